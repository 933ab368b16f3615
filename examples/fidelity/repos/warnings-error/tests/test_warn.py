# click, jinja, markupsafe, packaging, dateutil, filelock and loguru turn every warning into an
# error in their pytest config: a warning of the runner's own would stop them before any test.
import warnings

import pytest


def test_warning_is_an_error():
    with pytest.raises(UserWarning):
        warnings.warn("boom", UserWarning)


def test_expected_warning():
    with pytest.warns(DeprecationWarning):
        warnings.warn("old", DeprecationWarning)


def test_plain():
    assert sum(range(4)) == 6
