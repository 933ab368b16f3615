"""Split an arithmetic expression into tokens."""

from dataclasses import dataclass

OPERATORS = "+-*/%^()"


@dataclass(frozen=True)
class Token:
    kind: str  # "num", "op" or "end"
    text: str
    pos: int


class TokenizeError(ValueError):
    pass


def tokenize(source):
    tokens = []
    i = 0
    while i < len(source):
        ch = source[i]
        if ch.isspace():
            i += 1
        elif ch.isdigit() or ch == ".":
            start = i
            while i < len(source) and (source[i].isdigit() or source[i] == "."):
                i += 1
            text = source[start:i]
            if text.count(".") > 1:
                raise TokenizeError(f"malformed number {text!r} at {start}")
            tokens.append(Token("num", text, start))
        elif ch in OPERATORS:
            tokens.append(Token("op", ch, i))
            i += 1
        else:
            raise TokenizeError(f"unexpected character {ch!r} at {i}")
    tokens.append(Token("end", "", len(source)))
    return tokens
