"""Never runs: the hostile test gives this folder a `.git` file pointing at another repository
on the host (git cannot track a file named .git), and clone must refuse it."""


def test_ok():
    assert True
