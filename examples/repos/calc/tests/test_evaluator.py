import pytest

from calc import CalcError, evaluate, try_evaluate


@pytest.mark.parametrize(
    "source, expected",
    [
        ("1 + 2 * 3", 7),
        ("10 - 4 - 3", 3),
        ("2 ^ 3 ^ 2", 512),
        ("-2 ^ 2", -4),
        ("7 % 4 + 0.5", 3.5),
    ],
)
def test_evaluate(source, expected):
    assert evaluate(source) == expected


def test_division_gives_float():
    assert evaluate("7 / 2") == 3.5


def test_division_by_zero():
    with pytest.raises(CalcError, match="division by zero"):
        evaluate("1 / (2 - 2)")


def test_unbalanced_parenthesis():
    with pytest.raises(CalcError, match=r"expected '\)' at 6"):
        evaluate("(1 + 2")


def test_trailing_garbage():
    with pytest.raises(CalcError, match="unexpected"):
        evaluate("1 2")


def test_try_evaluate_catches_errors():
    assert try_evaluate("2 * (3 + 4)") == 14
    assert try_evaluate("2 * ", default="bad") == "bad"
    assert try_evaluate("2 $ 3") is None
