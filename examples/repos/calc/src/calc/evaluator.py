"""Recursive-descent evaluation of arithmetic expressions.

Grammar:
    expr   := term (("+" | "-") term)*
    term   := factor (("*" | "/" | "%") factor)*
    factor := ("-" | "+") factor | power
    power  := atom ("^" factor)?
    atom   := NUMBER | "(" expr ")"
"""

from .tokenizer import TokenizeError, tokenize


class CalcError(Exception):
    pass


class Parser:
    def __init__(self, source):
        try:
            self.tokens = tokenize(source)
        except TokenizeError as exc:
            raise CalcError(str(exc)) from exc
        self.index = 0

    def peek(self):
        return self.tokens[self.index]

    def take(self, text=None):
        token = self.peek()
        if text is not None and token.text != text:
            raise CalcError(f"expected {text!r} at {token.pos}, found {token.text or 'end'!r}")
        self.index += 1
        return token

    def parse(self):
        value = self.expr()
        if self.peek().kind != "end":
            raise CalcError(f"unexpected {self.peek().text!r} at {self.peek().pos}")
        return value

    def expr(self):
        value = self.term()
        while self.peek().text in ("+", "-"):
            op = self.take().text
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self):
        value = self.factor()
        while self.peek().text in ("*", "/", "%"):
            op = self.take().text
            rhs = self.factor()
            if op != "*" and rhs == 0:
                raise CalcError("division by zero")
            if op == "*":
                value = value * rhs
            elif op == "/":
                value = value / rhs
            else:
                value = value % rhs
        return value

    def factor(self):
        if self.peek().text in ("-", "+"):
            sign = -1 if self.take().text == "-" else 1
            return sign * self.factor()
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek().text == "^":
            self.take()
            return base ** self.factor()
        return base

    def atom(self):
        token = self.peek()
        if token.kind == "num":
            self.take()
            return float(token.text) if "." in token.text else int(token.text)
        if token.text == "(":
            self.take()
            value = self.expr()
            self.take(")")
            return value
        raise CalcError(f"unexpected {token.text or 'end'!r} at {token.pos}")


def evaluate(source):
    return Parser(source).parse()


def try_evaluate(source, default=None):
    """Evaluate `source`, returning `default` when it is not a valid expression."""
    try:
        return evaluate(source)
    except CalcError:
        return default
