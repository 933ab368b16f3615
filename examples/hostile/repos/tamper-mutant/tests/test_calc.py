import os

from calc import add, sub
from scale import double, halve

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_add():
    assert add(2, 3) == 5


def test_sub():
    assert sub(7, 3) == 4


def test_double():
    assert double(4) == 8


def test_halve():
    assert halve(8) == 4


def test_rewrites_the_other_file():
    # Reaches calc.py, so it runs in calc's mutant checks; rewrites scale.py, which the mutant
    # driver does not restore on its own: the next candidate would mutate the rewritten file.
    assert add(1, 1) == 2 and sub(1, 1) == 0
    path = os.path.join(HERE, "scale.py")
    with open(path) as f:
        lines = f.read().splitlines()
    with open(path, "w") as f:
        f.write("".join(line + ("  # TAMPERED\n" if line.strip() and not line.endswith("TAMPERED") else "\n") for line in lines))
