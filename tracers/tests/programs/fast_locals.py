"""Locals whose order or binding the f_locals dict's refreshes decide: _native.c reads 3.11's fast
locals directly and must give the same names, values and order (test_fast_locals.py)."""
import sys


def late_lower(n):
    for i in range(n):
        if i == 2:
            early = i  # a lower slot than `later`, bound after it: it goes to the end
        later = i * 2
    return early + later


def unbind():
    a = 1
    b = 2
    del a
    c = 3
    a = 4  # bound again: after c now
    try:
        raise ValueError("x")
    except ValueError as e:  # e is unbound when the block ends
        msg = str(e)
    e = msg
    return a, b, c, e


def closures(n):
    total = 0

    def add(k):
        nonlocal total
        total += k
        return total

    for j in range(n):
        add(j)
    late = [total]
    f = lambda: late  # noqa: E731 (a frame with a free variable)
    return f()


def cell_arg(x):
    g = lambda: x  # noqa: E731 (x is an argument and a cell)
    x = x + 1
    return g()


def cell_unbound():
    def g():
        return v

    v = 5  # a cell, empty at the call event
    return g()


def gen_late(n):
    for i in range(n):
        if i == 1:
            seen = i
        yield i
    del i
    yield seen


def comprehensions(n):
    xs = [v * 2 for v in range(n) if v]
    ds = {v: w for v, w in zip(xs, range(n))}
    ss = {v for v in xs}
    gs = list(v + 1 for v in ss)
    return xs, ds, ss, gs


async def coro(x):
    y = x + 1
    return y


def run_coro():
    c = coro(1)
    try:
        c.send(None)
    except StopIteration as s:
        return s.value


def user_locals():
    a = 1
    seen = sorted(locals())  # the dict, made by the program here
    b = 2
    sys._getframe().f_locals
    c = a + b
    return seen, c


def user_extra():
    a = 1
    sys._getframe().f_locals["extra"] = 5  # a name no slot has: the dict shows it from now on
    b = 2
    return a + b


def recurse(n):
    if n:
        first = recurse(n - 1)
    else:
        first = 0
    return first + n


def main():
    return (late_lower(4), unbind(), closures(3), cell_arg(1), cell_unbound(), list(gen_late(3)),
            comprehensions(4), run_coro(), user_locals(), user_extra(), recurse(3))


def stale():
    """Whether a dict from locals() saw a name bound after it was taken: the tracer's own refreshes
    of f_locals used to add it."""
    d = locals()
    x = 1
    return "x" in d, x
