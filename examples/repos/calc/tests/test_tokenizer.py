import pytest

from calc import tokenize
from calc.tokenizer import TokenizeError


def test_tokenize_numbers_and_operators():
    kinds = [(t.kind, t.text) for t in tokenize("12 + 3.5*(4)")]
    assert kinds == [
        ("num", "12"), ("op", "+"), ("num", "3.5"), ("op", "*"),
        ("op", "("), ("num", "4"), ("op", ")"), ("end", ""),
    ]


def test_tokenize_positions():
    assert [t.pos for t in tokenize(" 1 +22")] == [1, 3, 4, 6]


def test_tokenize_rejects_letters():
    with pytest.raises(TokenizeError, match="unexpected character 'x' at 2"):
        tokenize("1+x")


def test_tokenize_rejects_two_dots():
    with pytest.raises(TokenizeError, match="malformed number"):
        tokenize("1.2.3")
