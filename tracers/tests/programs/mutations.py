"""Locals that change in every way the incremental snapshot must notice (test_fast_paths.py)."""


class Box:
    def __init__(self, x):
        self.x = x

    def __repr__(self):
        return "Box(%r)" % (getattr(self, "x", None),)


def mutate(n):
    a = [1, 2]
    d = {"k": [1]}
    s = {3}
    pairs = [("num", 1), ("op", "+")]
    rows = [[0, 1], [2, 3]]
    box = Box(0)
    t = (1, (2, 3))
    for i in range(n):
        a.append(i)
        a[0] = i
        d["k"].append(i)
        d[i] = (i, [i])
        s.add(i)
        pairs.append(("num", i))
        pairs[0] = ("op", str(i))
        rows[0][1] = i
        box.x = i
        t = (i, (i, a))
        x = i
        y = str(i) * i
        z = 10 ** (i * 40)
        if i % 3 == 0:
            del x
        a = a if i % 5 else list(a)
        big = list(range(i * 10))
        same = big
        del same
        same = [i]
    return a


def rename(n):
    """Functions whose text changes while they stay the same object (their qualname is set, as
    functools.wraps does), new functions with one qualname (closures made in a loop), and a
    function repr that fails mid-frame (too long: the class becomes a marker from then on)."""
    def inner():
        return None

    made = []
    for i in range(n):
        def closure():
            return i

        made.append(closure)
        last = closure
        inner.__qualname__ = "renamed_%d" % (i % 2)
        if i == n - 2:
            inner.__qualname__ = "q" * 1200
    del last
    return len(made)



class Dict(dict):
    pass


def rebind(n):
    """What the C snapshot's shortcuts must still notice (a values list refreshed in place, lists
    and dicts compared item by item in place): a local rebound to an equal but different object
    whose old object then changes, lists and dicts changed in place at the same length (shown items
    and, past max_items, hidden ones), a dict subclass, names bound and unbound between lines."""
    a = [0, 1, 2]
    d = {"k": 1, "j": 2}
    wide = dict.fromkeys(range(30), 0)
    long = [0] * 30
    sub = Dict(k=1)
    t = (1, 2)
    for i in range(n):
        old = a
        a = [0, 1, 2] if i % 2 else list(old)
        old[1] = i
        a[2] = i * 2
        d["k"] = i
        d["j"] = str(i)
        wide[i % 3] = i
        wide[29] = i
        long[i % 4] = i
        long[25] = i
        sub["k"] = i
        t = (1, 2) if i % 2 else (1, i)
        if i % 3 == 0:
            fresh = i
        elif i % 3 == 1:
            del fresh
        else:
            fresh = [i]
    return a
