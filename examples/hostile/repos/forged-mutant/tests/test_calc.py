from calc import add, sign


def test_add():
    assert add(2, 3) == 5


def test_sign():
    assert [sign(-4), sign(0), sign(9)] == [-1, 0, 1]
