class Counter:
    """Counts how often it was shown: a __repr__ with a side effect, which the tracer runs to record a value."""

    shown = 0

    def __init__(self):
        self.shown = 0

    def __repr__(self):
        self.shown += 1
        return "Counter(shown=%d)" % self.shown


def touch(counter):
    step = 1
    return counter, step


def double(n):
    result = n * 2
    return result
