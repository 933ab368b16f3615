import sys

import pytest


def add(a, b):
    return a + b


def test_stub_in_place():
    assert sys.modules["hypothesis"].__spec__ is None
    assert add(2, 3) == 5


def test_json_stubbed():
    import json

    with pytest.raises(RuntimeError):
        json.dumps([1])
