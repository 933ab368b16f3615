"""The unit that must finish while its neighbours attack: plain passing tests worth tracing."""


def mean(xs):
    total = 0
    for x in xs:
        total += x
    return total / len(xs)


def test_mean():
    assert mean([1, 2, 3, 6]) == 3


def test_mean_single():
    assert mean([5]) == 5
