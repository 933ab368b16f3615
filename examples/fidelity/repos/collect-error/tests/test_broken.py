import module_that_is_not_installed  # noqa: F401


def test_never():
    assert True
