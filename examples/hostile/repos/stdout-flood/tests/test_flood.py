"""Prints 2 GB to the terminal (the manifest runs pytest with -s): the host's disk and memory must not follow."""
import os


def test_flood():
    block = b"x" * (1 << 20)
    for _ in range(2048):
        os.write(1, block)


def test_ok():
    assert True
