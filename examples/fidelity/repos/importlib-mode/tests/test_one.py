import sys

import helpers


def test_double():
    assert helpers.double(4) == 8


def test_not_on_path():
    # importlib mode puts no test folder on sys.path
    assert not any(p.endswith("/tests") for p in sys.path)
