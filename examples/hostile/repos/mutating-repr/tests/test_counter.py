from counter import Counter, double, touch


def test_never_shown():
    counter, _ = touch(Counter())
    # Holds untraced; under the tracer, its repr of `counter` ran and this fails.
    assert counter.shown == 0


def test_double():
    assert double(21) == 42
