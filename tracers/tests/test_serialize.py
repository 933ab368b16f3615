import time

from worldline_tracer import Serializer


class Array:
    """Like numpy.ndarray: shape and dtype are descriptors on the type."""

    @property
    def shape(self):
        return (3, 4)

    @property
    def dtype(self):
        return "float64"

    def __repr__(self):
        raise AssertionError("repr of an array-like must not be called")


class Counted:
    calls = 0

    def __repr__(self):
        Counted.calls += 1
        raise ValueError("nope")


class Slow:
    calls = 0

    def __repr__(self):
        Slow.calls += 1
        time.sleep(0.06)
        return "Slow()"


class Addr:
    pass


def test_builtins():
    s = Serializer()
    assert s(1) == "1" and s(-2.5) == "-2.5" and s(True) == "True" and s(None) == "None"
    assert s("a'b") == '"a\'b"' and s(b"\x00") == "b'\\x00'"
    assert s([1, (2,), {"k": {3}}]) == "[1, (2,), {'k': {3}}]"
    assert s(()) == "()" and s(set()) == "set()" and s(frozenset()) == "frozenset()" and s({}) == "{}"
    assert s(frozenset({"b", "a"})) == "frozenset({'a', 'b'})"


def test_caps():
    s = Serializer(max_str=5, max_items=3, max_depth=2)
    assert s("abcdefgh") == "'abcde'..."
    assert s(b"abcdefgh") == "b'abcde'..."
    assert s(list(range(10))) == "[0, 1, 2, ...]"
    assert s({i: i for i in range(10)}) == "{0: 0, 1: 1, 2: 2, ...}"
    assert s([[[1]]]) == "[[[...]]]"
    assert s(set(range(10))) == "{0, 1, 2, ...}"


def test_sets_sorted_by_rendered_form():
    s = Serializer()
    assert s({10, 9, "x", 1}) == "{'x', 1, 10, 9}"


def test_cycles():
    s = Serializer()
    a = [1]
    a.append(a)
    d = {}
    d["self"] = d
    assert s(a) == "[1, [...]]"
    assert s(d) == "{'self': {...}}"
    shared = [0]
    assert s([shared, shared]) == "[[0], [0]]"  # shared is not a cycle


def test_huge_int_not_stringified():
    s = Serializer()
    assert s(10 ** 999) == repr(10 ** 999)
    big = 1 << 100000
    t0 = time.perf_counter()
    assert s(big) == "<int bit_length=100001>"
    assert s(-big) == "-<int bit_length=100001>"
    assert time.perf_counter() - t0 < 0.05


def test_array_like():
    s = Serializer()
    assert s(Array()) == "<Array shape=(3, 4) dtype=float64>"


def test_bad_repr_class_is_remembered():
    s = Serializer()
    Counted.calls = 0
    assert s(Counted()) == "<Counted object>"
    assert s([Counted()]) == "[<Counted object>]"
    assert Counted.calls == 1


def test_slow_repr_kept_huge_repr_cut():
    # A slow repr is bounded by its output, not its time: the text never depends on the load.
    s = Serializer(max_repr=50)
    assert s(Slow()) == "Slow()" and s.slow_classes == []
    big = type("Big", (), {"__repr__": lambda self: "y" * 51})
    assert s(big()) == "<Big object>"


def test_repr_safety_net_is_recorded():
    s = Serializer(repr_safety_s=0.01)
    Slow.calls = 0
    assert s(Slow()) == "<Slow object>"
    assert s([Slow()]) == "[<Slow object>]"
    assert Slow.calls == 1 and s.slow_classes == ["Slow"]


def test_addresses_stripped():
    s = Serializer()
    assert s(Addr()) == "<%s.Addr object>" % __name__
    assert s(test_caps) == "<function test_caps>"
