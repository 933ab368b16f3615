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

