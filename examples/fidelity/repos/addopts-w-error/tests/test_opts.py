import warnings

import pytest


def test_warnings_are_errors():
    with pytest.raises(RuntimeWarning):
        warnings.warn("x", RuntimeWarning)


@pytest.mark.slow
def test_marked(pytestconfig):
    assert any(m.startswith("slow:") for m in pytestconfig.getini("markers"))
