"""Values at the edges of the C snapshot's inlined renderings (tests/test_native.py): ints around
the digit cap and the 64-bit range, strs around max_str, functions, containers that change in place,
names the snapshot filters out, a class body's namespace and locals that change shape."""


def helper():
    return 1


def ints():
    a = 2 ** 33 - 1
    b = -(2 ** 33) + 1
    b2 = -(2 ** 33)
    c = 2 ** 33
    d = -(2 ** 63)
    e = 2 ** 63 - 1
    f = 2 ** 63
    g = -(2 ** 70)
    h = True
    return a + b + b2 + c + d + e + f + g + h


def strs():
    s = "abcd"
    s = "abcde"
    s = "abcdef"
    s = "\u20ac" * 5 + "\U0001f600"
    t = b"bytes"
    return s, t


def mutate():
    xs = [1, 2]
    xs.append(3)
    d = {"k": xs}
    d["k2"] = (1, "x")
    xs.append([4])
    st = {3, 1, 2}
    st.add(0)
    fn = helper
    fn = mutate
    fn = len
    return xs, d, st, fn


def shapes():
    total = 0
    for i in range(3):
        total += i
        del i
    squares = [x * x for x in range(4)]
    del total
    assert squares == [0, 1, 4, 9]
    return squares


class Body:
    x = 1
    y = [x, 2]


def main():
    return ints(), strs(), mutate(), shapes(), Body.y
