def double(x):
    return 2 * x


def test_double():
    assert double(2) == 4
