"""Arithmetic the tests check: its mutants are caught honestly."""


def add(a, b):
    return a + b


def sub(a, b):
    return a - b
