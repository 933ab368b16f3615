"""The C accelerator (_native.c) gives exactly the pure Python path's bytes, and is really used."""
import json
import operator
import os
import random
import shutil
import subprocess
import sys
from functools import partial

import pytest
from conftest import PROGRAM_CALLS, PROGRAMS, TRACERS, load_program, run_traced
from test_fast_paths import CAPS, mutate, values

from worldline_tracer import HAS_MONITORING, Serializer, Tracer, native
from worldline_tracer.episodes import _KIND_JSON, EpisodeBuilder, _Frame, _shown_locals
from worldline_tracer.render import KIND_SEP, UNCHANGED

BACKENDS = ["settrace", "monitoring"] if HAS_MONITORING else ["settrace"]

# strings json escapes in every way it can: quotes, backslashes, the short escapes, other control
# characters, DEL, Latin-1, the BMP, astral characters (a surrogate pair), a lone surrogate, and
# special tokens (a frame holding one is not "clean")
AWKWARD = ['plain', '"q"', "back\\slash", "\b\f\n\r\t", "\x00\x1f\x7f", "caf\xe9", "\u20ac\uffff",
           "\U0001f600", "\ud800", "<|frame_sep|>", 'a<', "x<|y", ""]


def _both(fields, native_module):
    pure = _Frame(dict(fields), None)
    fast = _Frame(dict(fields), native_module.frame_parts)
    return pure, fast


def test_frames_match_the_pure_path_on_awkward_text(native_module):
    seen_fast = 0
    for kind in KIND_SEP:
        for a in AWKWARD:
            for b in AWKWARD:
                fields = {"kind": kind, "line": 7, "function": "f." + a, "source": "    x = " + b + "\n"}
                if kind in ("call", "line"):
                    fields["locals"] = [[a or "n", b], ["k" + b, a]]
                else:
                    fields["value"] = a + b
                pure, fast = _both(fields, native_module)
                assert (fast.text, fast.text_json, fast.tail, fast.clean) == (
                    pure.text, pure.text_json, pure.tail, pure.clean), fields
                assert fast.tail == json.dumps(fields, sort_keys=True)[1:]
                args = (KIND_SEP[kind], fields.get("locals"), fields.get("value"), fields["function"],
                        _KIND_JSON[kind], fields["line"], fields["source"])
                seen_fast += native_module.frame_parts(*args) is not None
                # the C walk's call: no plain text, the rest as the Python makes it
                assert native_module.frame_parts(*args, False) == (None, pure.text_json, pure.tail, pure.clean)
    assert seen_fast == len(KIND_SEP) * len(AWKWARD) ** 2


def test_every_escape_at_every_offset_of_a_word(native_module):
    """The C escaping skips plain text eight characters at a time: each character json escapes (and
    the bytes around the printable range, and the "<|" / '<":' the clean test looks for), at every
    offset of texts longer than two words, gives the pure path's bytes."""
    specials = ['"', "\\", "\n", "\x00", "\x1f", " ", "~", "\x7f", "\x80", "\xe9", "\xff", "<|", '<":', "<"]
    for c in specials:
        for at in range(20):
            text = "abcdefghijklmnopqrst"[:at] + c + "uvwxyz0123456789"
            for kind in ("line", "return"):
                fields = {"kind": kind, "line": 3, "function": "f" + text, "source": text + "\n"}
                if kind == "line":
                    fields["locals"] = [["v" + text[:at], text]]
                else:
                    fields["value"] = text
                pure, fast = _both(fields, native_module)
                assert (fast.text, fast.text_json, fast.tail, fast.clean) == (
                    pure.text, pure.text_json, pure.tail, pure.clean), fields


@pytest.mark.parametrize("source", ["x <", 'x <"', "<", "|>", ":"])
@pytest.mark.parametrize("sep", [KIND_SEP["line"], "<", "|", "<|odd"])
def test_without_the_text_clean_is_the_whole_texts(source, sep, native_module):
    """Counted piece by piece (with_text False), "<|" and '<":' next to a separator are found as in
    the whole text: a source ending in "<" or '<"', and separators not of the usual shape."""
    for pairs, value in (([["a", "<"]], None), (None, "<")):
        full = native_module.frame_parts(sep, pairs, value, "f", '"line"', 3, source)
        assert full[3] == ('<":' not in full[0] and full[0].count("<|") == (3 if pairs else 4))
        assert native_module.frame_parts(sep, pairs, value, "f", '"line"', 3, source, False) == (None,) + full[1:]


@pytest.mark.parametrize("fields", [
    {"kind": "line", "line": 1, "function": "f", "source": "s\n", "locals": [["a", "1"], ["a", "2"]]},
    {"kind": "line", "line": 1, "function": "f", "source": "s\n", "locals": [["a", 1]]},
    {"kind": "return", "line": 1, "function": "f", "source": "s\n", "value": 3},
    {"kind": "return", "line": True, "function": "f", "source": "s\n", "value": "3"},
    {"kind": "return", "line": 1 << 70, "function": "f", "source": "s\n", "value": "3"},
])
def test_off_the_fast_path_the_python_path_answers(fields, native_module):
    """Repeated names (last wins), non-str values, a bool or huge line: json's own conversions."""
    assert native_module.frame_parts(KIND_SEP[fields["kind"]], fields.get("locals"), fields.get("value"),
                                     fields["function"], _KIND_JSON[fields["kind"]], fields["line"],
                                     fields["source"]) is None
    pure, fast = _both(fields, native_module)
    assert (fast.text, fast.text_json, fast.tail, fast.clean) == (pure.text, pure.text_json, pure.tail, pure.clean)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("step_in", [0.0, 0.5, 1.0])
def test_episode_bytes_equal_with_and_without_native(backend, step_in, native_module, monkeypatch):
    """Every golden program's episodes (both encode's JSON and build's dicts) are the same bytes
    on both paths."""
    out = {}
    for mode in ("pure", "native"):
        monkeypatch.setattr(native, "mod", native_module if mode == "native" else None)
        texts = []
        for module, call in PROGRAM_CALLS:
            p = load_program(module)
            tracer = run_traced(lambda: call(p), backend)[2]
            builder = EpisodeBuilder(step_in=step_in, seed=3)
            assert (builder._fast is not None) == (mode == "native")
            texts.extend(builder.encode(tracer.events))
            texts.extend(json.dumps(ep, sort_keys=True) for ep in EpisodeBuilder(step_in=step_in, seed=3).build(tracer.events))
        out[mode] = "\n".join(texts).encode("utf-8", "surrogatepass")
    assert len(out["pure"]) > 10000
    assert out["native"] == out["pure"]


class _Custom(object):
    """A serializer that is not a Serializer: the tracer then renders every value at every event."""

    def __init__(self):
        self.calls = 0

    def __call__(self, value):
        self.calls += 1
        return "%s#%d" % (type(value).__name__, self.calls)


def _events(backend, **options):
    out = []
    for module, call in PROGRAM_CALLS + [("native_edges", lambda p: p.main())]:
        p = load_program(module)
        tracer = run_traced(lambda: call(p), backend, **options)[2]
        assert tracer.error is None
        out.append(json.dumps(tracer.events))
    return "\n".join(out)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("serializer", [
    Serializer,
    lambda: Serializer(max_int_digits=10, max_str=5, max_items=2, max_depth=2),
    lambda: Serializer(max_int_digits=19),
    # SlowRepr sleeps 0.06 s: past this safety net on both paths (other_repr's guard in C)
    lambda: Serializer(repr_safety_s=0.05, max_repr=30),
    _Custom,
], ids=["default", "small-caps", "int64-edge", "repr-guards", "custom"])
def test_events_equal_with_and_without_native(backend, serializer, native_module, monkeypatch):
    """The tracer's events (locals snapshots and values) are the same with the C snapshot."""
    out = {}
    for mode in ("pure", "native"):
        monkeypatch.setattr(native, "mod", native_module if mode == "native" else None)
        assert isinstance(Tracer(root=".", serializer=serializer())._snap, partial) == (mode == "native")
        out[mode] = _events(backend, serializer=serializer())
    assert len(out["pure"]) > 10000
    assert out["native"] == out["pure"]


def test_line_locals_match_the_pure_diff(native_module):
    """episodes._shown_locals's lists, including Python's own == (a NaN is not equal to itself),
    repeated names (the last wins) and values that are not str."""
    nan = float("nan")
    prev = [["a", "1"], ["b", nan], ["c", "x"], ["c", "y"], ["d", 2]]
    for pairs in ([["a", "1"], ["b", nan], ["c", "y"], ["d", 2], ["e", "new"]], prev, []):
        for full in (False, True):
            want = _shown_locals(pairs, prev, full)
            got = native_module.line_locals(pairs, prev, full, UNCHANGED)
            assert repr(got) == repr(want)
            assert got is not pairs and all(g is not p for g, p in zip(got, pairs))
    assert native_module.line_locals([["a", "1", "extra"]], prev, False, UNCHANGED) is None
    assert native_module.line_locals([["a", "1"]], [("a",)], False, UNCHANGED) is None


def test_without_the_module_the_pure_path_runs():
    """WORLDLINE_TRACER_NATIVE=0, or no module on the path (a user-named image, a Python it was not
    built for): native.mod is None and the tracer takes its Python snapshot."""
    code = ("import sys; sys.path.insert(0, %r); from worldline_tracer import native, Tracer; "
            "print(native.mod, Tracer(root='.')._snap.__name__)" % TRACERS)
    for env, flags in (({"WORLDLINE_TRACER_NATIVE": "0"}, []), ({}, ["-I", "-S"])):
        out = subprocess.run([sys.executable] + flags + ["-c", code], env=dict(os.environ, **env),
                             stdout=subprocess.PIPE, check=True).stdout.decode()
        assert out.split() == ["None", "_snapshot"]


def test_plugin_lines_equal_with_and_without_native(tmp_path, native_modules):
    """The plugin, run by pytest with the modules importable, writes the same episodes and events
    as with WORLDLINE_TRACER_NATIVE=0 (and really loaded both modules: the episodes are cut by
    _episodes.c's walk)."""
    native_module = native_modules[0]
    for name in ("samples", "cwm_example", "native_edges"):
        shutil.copy(os.path.join(PROGRAMS, name + ".py"), str(tmp_path / (name + ".py")))
    (tmp_path / "test_programs.py").write_text(
        "import pytest\nimport cwm_example, native_edges, samples\n\n"
        "CALLS = [lambda: cwm_example.main(), lambda: native_edges.main(), lambda: samples.fact(5),\n"
        "         lambda: samples.use_gen(), lambda: samples.catch(), lambda: samples.values(),\n"
        "         lambda: samples.gen_throw(), lambda: samples.use_point(), lambda: samples.squares([1, 2])]\n\n"
        "@pytest.mark.parametrize('i', range(len(CALLS)))\n"
        "def test_call(i):\n    CALLS[i]()\n")
    (tmp_path / "conftest.py").write_text(
        "import os\n\ndef pytest_sessionfinish(session):\n    from worldline_tracer import native\n"
        "    with open(os.environ['NATIVE_SEEN'], 'w') as f:\n"
        "        f.write(str(native.mod is not None and native.episodes is not None))\n")
    lines = {}
    for mode in ("0", "1"):
        out = tmp_path / ("trace%s.jsonl" % mode)
        env = dict(os.environ, PYTHONHASHSEED="0", WORLDLINE_TRACER_NATIVE=mode, WORLDLINE_TRACE_OUT=str(out),
                   WORLDLINE_TRACE_ROOT=str(tmp_path), WORLDLINE_TRACE_EMIT="both",
                   NATIVE_SEEN=str(tmp_path / "seen"),
                   PYTHONPATH=os.pathsep.join([TRACERS, os.path.dirname(native_module.__file__)]
                                              + [p for p in sys.path if p]))
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                               "worldline_tracer.plugin", "test_programs.py"], cwd=str(tmp_path), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        assert proc.returncode == 0, proc.stdout.decode()
        assert (tmp_path / "seen").read_text() == str(mode == "1")
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        for row in rows:
            row.pop("seconds")
        lines[mode] = rows
    assert len(lines["0"]) == 9 and sum(len(r["episodes"]) for r in lines["0"]) > 20
    assert json.dumps(lines["1"], sort_keys=True) == json.dumps(lines["0"], sort_keys=True)


@pytest.mark.parametrize("caps", CAPS, ids=[str(sorted(c.items())) for c in CAPS])
def test_unchanged_matches_the_serializer(caps, native_module):
    """Serializer.unchanged and its C twin agree on keyed values, mutated at random or not."""
    s = Serializer(**caps)
    rng = random.Random(11)
    answers = set()
    for v in values(len(str(caps)) + 3, 300):
        for _ in range(4):
            text, key = s.keyed(v)
            if key is None:
                break
            if rng.random() < 0.7:
                mutate(rng, v)
            want = s.unchanged(v, key)
            assert native_module.unchanged(s.max_items, v, key) is want
            assert native_module.unchanged(s.max_items, [], key) is False
            answers.add(want)
    assert answers == {True, False}


def _flat_edges(caps):
    """Flat containers at the caps' edges: empty, one item, max_items and one past it, ints and str
    at the digit and length caps and one past them, and containers flat_keyed leaves to Python."""
    s = Serializer(**caps)
    lim = 1 << s._max_int_bits
    k = s.max_items
    leaves = [0, -1, True, False, None, 1.5, float("nan"), "", "'\"\\\n\u00e9", b"\x00b",
              lim - 1, -(lim - 1), lim, -lim, 2 ** 63, -(2 ** 63), 2 ** 64,
              "x" * s.max_str, "x" * (s.max_str + 1), b"y" * s.max_str, b"y" * (s.max_str + 1)]
    out = [[], (), {}, set(), frozenset(), [[1, 2], [3, 4]], ([1],), {"a": [1]}, {1: object()}]
    for leaf in leaves:
        for n in (1, 2, k, k + 1, k + 5):
            out.append([leaf] * n)
            out.append(tuple([leaf] + list(range(n - 1))))
            out.append(dict(zip(range(n), [leaf] * n)))
            out.append({leaf: 1} if n == 1 else dict(zip([str(i) for i in range(n)], range(n))))
    return out


@pytest.mark.parametrize("caps", CAPS, ids=[str(sorted(c.items())) for c in CAPS])
def test_keyed_matches_the_serializer(caps, native_module):
    """The C keyed of flat containers gives Serializer.keyed's text and an equal key (the same
    objects), or leaves the value to the Python keyed; it answers for the flat ones."""
    s = Serializer(**caps)
    c_caps = (s.max_str, s._max_int_bits, s.max_items, s.max_depth)
    answered = 0
    for v in _flat_edges(caps) + list(values(len(str(caps)) + 5, 300)):
        got = native_module.keyed(c_caps, v)
        if got is None:
            continue
        answered += 1
        text, key = s.keyed(v)
        assert got[0] == text
        assert key is not None and len(got[1]) == len(key) == 4
        assert got[1][0] is v and got[1][1] == key[1]
        assert len(got[1][2]) == len(key[2]) and all(map(operator.is_, got[1][2], key[2]))
        assert (got[1][3] is None) == (key[3] is None)
        if key[3] is not None:
            assert len(got[1][3]) == len(key[3]) and all(map(operator.is_, got[1][3], key[3]))
    assert answered > 30
    assert native_module.keyed(c_caps, [[1]]) is None and native_module.keyed(c_caps, {1}) is None


class _Plain(object):
    pass


class _Named(object):
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Named(%r)" % (self.name,)


class _Raises(object):
    def __repr__(self):
        raise ValueError("no repr")


class _Long(object):
    def __repr__(self):
        return "L" * 5000


class _NotStr(object):
    def __repr__(self):
        return 3


class _Threadish(object):
    def __repr__(self):
        return "<Thread(w, started daemon 140234)>"


class _Int(int):
    pass


class _ArrayLike(object):
    shape = (2,)
    dtype = "f8"


class _Grows(object):
    """A repr that adds a key to the dict holding it: Python's iteration raises, keyed's guard
    answers with the marker."""

    def __init__(self, d):
        self.d = d

    def __repr__(self):
        self.d[len(self.d) + 100] = 0
        return "Grows()"


def _deep_edges():
    """Nested containers and containers of objects: every kind of object repr the guard treats
    apart, cycles, depth and length at the caps' edges."""
    objs = [_Plain(), _Named("a"), _Named("\u00e9\n"), _Raises(), _Long(), _NotStr(), _Threadish(), _Int(7),
            _ArrayLike(), len, _Plain, lambda: 0, 10 ** 400, -(10 ** 400), "s" * 300, b"b" * 300]
    out = []
    for o in objs:
        out += [[o], (o,), {"k": o}, {o: 1} if o.__hash__ else [o, o], [o] * 25, [[o]], ([o, [o]],), {"a": {"b": [o]}},
                [(o, 1), (2, o)], [[[[[o]]]]], [set(), frozenset(), {1}], (frozenset(),), [{1: [o]}, ()]]
    x = [1, _Named("x")]
    x.append(x)
    out.append(x)
    d = {"self": None}
    d["self"] = d
    out.append([d, d])
    t = ([],)
    t[0].append(t)
    out.append(t)
    return out


@pytest.mark.parametrize("caps", CAPS, ids=[str(sorted(c.items())) for c in CAPS])
def test_deep_keyed_matches_the_serializer(caps, native_module):
    """The C keyed of nested containers and of containers of objects gives Serializer.keyed's text
    (with no key), both when the C path meets a class first (its guard marks it bad) and after the
    Python did; where it leaves a value to Python, the Python keyed answers."""
    from worldline_tracer.tracer import _other_ctx
    answered = 0
    for v in _deep_edges() + list(values(len(str(caps)) + 9, 200)):
        c_ser, py_ser = Serializer(**caps), Serializer(**caps)
        for s in (c_ser, py_ser):  # the classes' array-likeness, as the snapshot learns it
            for o in (v if isinstance(v, (list, tuple)) else [v]):
                s._is_array_like(type(o))
        c_caps = (c_ser.max_str, c_ser._max_int_bits, c_ser.max_items, c_ser.max_depth)
        got = native_module.keyed(c_caps, v, _other_ctx(c_ser))
        want = py_ser.keyed(v)
        if got is None:
            continue
        answered += 1
        assert got[0] == want[0], v
        assert got[1] is None or got == native_module.keyed(c_caps, v)  # only flat values get a key
        assert c_ser.bad_classes == py_ser.bad_classes
        assert native_module.keyed(c_caps, v, _other_ctx(py_ser))[0] == want[0]  # classes already bad
    assert answered > 150


class _Says(object):
    """An object whose repr is the text it is given."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def test_addresses_stripped_as_the_serializer_strips_them(native_module):
    """The C strip of " at 0x<hex>" (strip_addresses) gives _ADDR.sub's text: matches at the ends,
    back to back, without hex digits after them, upper-case and non-hex digits, a match inside a
    near-match, in every string kind; and a class marked bad by its repr keeps its marker text, also
    once its name is rebound."""
    from worldline_tracer.tracer import _other_ctx
    texts = ["<f at 0x7f3a>", " at 0x1", "x at 0x", "x at 0xg", "a at 0xAbC9 at 0x12 b", "at 0x12",
             " at  at 0x5", " at 0x at 0x5z", "caf\xe9 at 0xfff\xe9", "\u20ac at 0x10 \u20ac",
             "\U0001f600 at 0xdeadBEEF at 0x", " At 0x5", " at 0X5", "plain", "", " at 0x" + "f" * 300]
    s = Serializer()
    caps = (s.max_str, s._max_int_bits, s.max_items, s.max_depth)
    s._is_array_like(_Says)
    for text in texts:
        got = native_module.keyed(caps, [_Says(text)], _other_ctx(s))
        assert got is not None
        assert got[0] == Serializer().keyed([_Says(text)])[0], text
    bad = Serializer(max_repr=3)
    bad._is_array_like(_Says)
    other = _other_ctx(bad)
    caps = (bad.max_str, bad._max_int_bits, bad.max_items, bad.max_depth)
    for _ in range(2):
        assert native_module.keyed(caps, [_Says("long text")], other) == ("[<_Says object>]", None)
    _Says.__name__ = "Renamed"
    try:
        assert native_module.keyed(caps, [_Says("long text")], other) == ("[<Renamed object>]", None)
    finally:
        _Says.__name__ = "_Says"


def test_deep_keyed_leaves_to_python(native_module):
    """Sets, classes not classified yet or array-like, and a dict that grows while rendered."""
    from worldline_tracer.tracer import _other_ctx
    s = Serializer()
    c_caps = (s.max_str, s._max_int_bits, s.max_items, s.max_depth)
    other = _other_ctx(s)
    assert native_module.keyed(c_caps, [{1, 2}], other) is None
    assert native_module.keyed(c_caps, [_Plain()], other) is None  # not classified yet
    s._is_array_like(_Plain)
    s._is_array_like(_ArrayLike)
    s._is_array_like(_Grows)
    assert native_module.keyed(c_caps, [_Plain()], other) == ("[<_Plain object>]".replace(
        "<_Plain object>", repr(_Plain()).split(" at ")[0] + ">"), None)
    assert native_module.keyed(c_caps, [_ArrayLike()], other) is None
    d = {}
    d["g"] = _Grows(d)
    assert native_module.keyed(c_caps, [d], other) is None
    d2 = {}
    d2["g"] = _Grows(d2)
    assert Serializer().keyed([d2]) == ("<list object>", None)
