"""More arithmetic, in a second file that a test of calc.py rewrites."""


def double(x):
    return x * 2


def halve(x):
    return x / 2
