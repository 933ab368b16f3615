"""The fast paths give exactly the slow paths' output: the serializer's builtin-repr fast paths,
and the tracer's incremental locals snapshot (only new objects and mutable values are
serialized again)."""
import random

import pytest
from conftest import load_program, run_traced

from worldline_tracer import HAS_MONITORING, Serializer

# every test here runs on the pure Python path and with the C accelerator
pytestmark = pytest.mark.usefixtures("native_mode")

BACKENDS = ["settrace", "monitoring"] if HAS_MONITORING else ["settrace"]
CAPS = [{}, dict(max_str=5, max_items=3, max_depth=2), dict(max_items=1), dict(max_items=2),
        dict(max_depth=1), dict(max_int_digits=3), dict(max_str=0), dict(max_set_sort=3)]


def slow(**caps):
    """A Serializer with its fast paths switched off."""
    s = Serializer(**caps)
    s._seq_render = lambda v, depth: None
    s._dict_render = lambda v, depth: None
    s._scalars_ok = lambda items, types, pure: False
    return s


def values(seed, count):
    rng = random.Random(seed)

    def leaf():
        return rng.choice([
            rng.randrange(-5, 300), 10 ** rng.randrange(1, 1100), -(2 ** rng.randrange(3300, 3400)),
            rng.random(), True, None, float("nan"), "ab'\"\\\n\u00e9" * rng.randrange(0, 3),
            "x" * rng.randrange(150, 260), "\u00e9" * rng.randrange(190, 210),
            bytes(range(rng.randrange(0, 250))), ("num", rng.randrange(9)),
        ])

    def value(depth=0):
        k = rng.randrange(7) if depth < 5 else 0
        n = rng.choice([0, 1, 2, 3, 19, 20, 21, 25])
        if k == 0:
            return leaf()
        if k == 1:
            return [value(depth + 1) if rng.random() < 0.3 else leaf() for _ in range(n)]
        if k == 2:
            return tuple(value(depth + 1) if rng.random() < 0.3 else leaf() for _ in range(n))
        if k == 3:
            return {leaf(): value(depth + 1) if rng.random() < 0.3 else leaf() for _ in range(n)}
        if k == 4:
            return {leaf() for _ in range(n)}
        if k == 5:
            return [tuple(leaf() for _ in range(rng.choice([0, 1, 2, 21]))) for _ in range(n)]
        x = [leaf() for _ in range(n)]
        x.append(x)
        return {"self": x, "list": [x]}

    return [value() for _ in range(count)]


@pytest.mark.parametrize("caps", CAPS, ids=[str(sorted(c.items())) for c in CAPS])
def test_serializer_fast_paths_match_slow_paths(caps):
    fast, ref = Serializer(**caps), slow(**caps)
    for v in values(len(str(caps)), 150):
        assert fast(v) == ref(v)
        text, key = fast.keyed(v)
        assert text == ref(v)
        if key is not None:
            assert fast.unchanged(v, key)


def test_unchanged_notices_changes():
    s = Serializer(max_items=3)
    items = [1, "a", 2.5]
    text, key = s.keyed(items)
    assert text == "[1, 'a', 2.5]" and key is not None and s.unchanged(items, key)
    items.append(4)  # now over max_items: "..." appears
    assert not s.unchanged(items, key)
    text, key = s.keyed(items)
    items.append(5)  # still over max_items, first items the same: same text
    assert s.unchanged(items, key) and s(items) == text == "[1, 'a', 2.5, ...]"
    items[1] = "b"
    assert not s.unchanged(items, key)
    rows = [("num", 1), ("op", "+")]
    text, key = s.keyed(rows)
    assert text == "[('num', 1), ('op', '+')]" and s.unchanged(rows, key)
    rows[0] = tuple(["num", 1])  # an equal but new tuple: looked at again
    assert not s.unchanged(rows, key)
    d = {"k": 1}
    text, key = s.keyed(d)
    d["k"] = 2
    assert not s.unchanged(d, key)
    nested = {"k": [1, [2]]}
    text, key = s.keyed(nested)
    assert key is not None and s.unchanged(nested, key)
    nested["k"][1].append(3)  # a change two levels down
    assert not s.unchanged(nested, key)

    class Obj(object):
        pass

    assert s.keyed([Obj()])[1] is None  # its repr may change while it stays the same object


def mutate(rng, value):
    """Change one container inside ``value`` in place (or nothing, when none is mutable)."""
    found = []

    def walk(v, depth):
        if type(v) in (list, dict, set):
            found.append(v)
        if depth < 6 and type(v) in (list, tuple, set, frozenset):
            for x in list(v)[:30]:
                walk(x, depth + 1)
        elif depth < 6 and type(v) is dict:
            for x in list(v.values())[:30]:
                walk(x, depth + 1)

    walk(value, 0)
    if not found:
        return
    c = rng.choice(found)
    new = rng.choice([1, True, 1.0, "x", (1,), [1], ()])
    if type(c) is list:
        op = rng.randrange(4)
        if op == 0 or not c:
            c.append(new)
        elif op == 1:
            c[rng.randrange(len(c))] = new
        elif op == 2:
            c.pop(rng.randrange(len(c)))
        else:
            c.insert(0, new)
    elif type(c) is dict:
        if c and rng.random() < 0.5:
            c[rng.choice(list(c))] = new
        elif c and rng.random() < 0.5:
            c.pop(rng.choice(list(c)))
        else:
            c[rng.random()] = new
    else:
        if c and rng.random() < 0.5:
            c.pop()
        else:
            c.add(rng.random())


@pytest.mark.parametrize("caps", CAPS, ids=[str(sorted(c.items())) for c in CAPS])
def test_unchanged_only_when_the_text_is_the_same(caps):
    s = Serializer(**caps)
    rng = random.Random(5)
    kept = 0
    for v in values(len(str(caps)) + 1, 300):
        for _ in range(4):
            text, key = s.keyed(v)
            if key is None:
                break
            mutate(rng, v)
            if s.unchanged(v, key):
                kept += 1
                assert s(v) == text
    assert kept > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_incremental_snapshot_matches_full_serialization(backend, monkeypatch):
    p = load_program("mutations")
    plain = Serializer()
    # a custom serializer turns the incremental snapshot off: every value, every event
    ref = run_traced(lambda: p.mutate(12), backend, serializer=lambda v: plain(v))[2]
    got = run_traced(lambda: p.mutate(12), backend)[2]
    assert ref.error is None and got.error is None
    assert len(got.events) > 100
    assert got.events == ref.events
    # functions keep their text across events while their qualname object stays (tracer.py)
    plain = Serializer()
    ref = run_traced(lambda: p.rename(6), backend, serializer=lambda v: plain(v))[2]
    got = run_traced(lambda: p.rename(6), backend)[2]
    assert ref.error is None and got.error is None
    assert got.events == ref.events
    shown = {v for ev in got.events for n, v in ev.get("locals", ()) if n == "inner"}
    assert {"<function renamed_0>", "<function renamed_1>", "<function object>"} <= shown
    # rebound locals, lists and dicts changed in place at one length, names bound and unbound; the
    # reference is the pure Python tracer's full serialization, apart from the C snapshot's shortcuts
    from worldline_tracer import native

    fast = native.mod
    plain = Serializer()
    monkeypatch.setattr(native, "mod", None)
    ref = run_traced(lambda: p.rebind(9), backend, serializer=lambda v: plain(v))[2]
    monkeypatch.setattr(native, "mod", fast)
    got = run_traced(lambda: p.rebind(9), backend)[2]
    assert ref.error is None and got.error is None
    assert got.events == ref.events
    shown = {(n, v) for ev in got.events for n, v in ev.get("locals", ())}
    assert {("old", "[0, 7, 12]"), ("d", "{'k': 8, 'j': '8'}"), ("sub", "{'k': 8}"), ("fresh", "[8]")} <= shown


def test_tracer_value_fast_path_matches_the_serializer():
    """Functions, classes and builtins are rendered from their C repr by the tracer's own fast
    path: the same text as the Serializer's guarded path, a too-long repr still a marker."""
    from worldline_tracer.tracer import _value_repr

    def local_function():
        return None

    class Local(object):
        pass

    long_named = lambda: None  # noqa: E731
    long_named.__qualname__ = "q" * 1200
    odd_named = lambda: None  # noqa: E731
    odd_named.__qualname__ = "stopped 12 at 0xdead"
    cases = [local_function, Local, len, [].append, random.Random, Serializer, long_named, odd_named,
             Local.__init__, values]
    for caps in ({}, dict(max_repr=20)):
        ref = Serializer(**caps)
        value = _value_repr(Serializer(**caps))
        for v in cases:
            assert value(v) == ref(v), v
    assert _value_repr(Serializer())(local_function).startswith("<function test_tracer_value_fast_path")
    assert _value_repr(Serializer())(long_named) == "<function object>"
