"""Allocates and touches 8 GB: the container's memory limit must kill it (out of memory)."""


def test_hog():
    hog = bytearray(8 << 30)
    assert len(hog) == 8 << 30


def test_ok():
    assert True
