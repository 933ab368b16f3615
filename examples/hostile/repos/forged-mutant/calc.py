"""Plain arithmetic that the tests check: its mutants are caught honestly."""


def add(a, b):
    return a + b


def sign(x):
    if x > 0:
        return 1
    return -1 if x < 0 else 0
