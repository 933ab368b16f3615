"""frame_parts remembers the escapes of the strs a frame's text is made of (its source line and its
separators, by the str's identity), compares a frame's local names pair by pair, and writes into
buffers it keeps from call to call: each must give the pure path's bytes whatever strs come and go."""
import gc
import json
import sys

import pytest

from worldline_tracer.episodes import _KIND_JSON, _Frame
from worldline_tracer.render import KIND_SEP


def _check(native_module, fields, sep=None):
    """The native frame (both calls: with and without the plain text) equals the pure path's."""
    fields = dict(fields)
    sep = KIND_SEP[fields["kind"]] if sep is None else sep
    pure = _Frame(dict(fields), None)
    if sep != KIND_SEP[fields["kind"]]:  # _Frame takes its separator from KIND_SEP
        text = sep + pure.text[len(KIND_SEP[fields["kind"]]):]
        expect_json = json.encoder.encode_basestring_ascii(text)[1:-1]
        seps = 3 if "locals" in fields else 4
        expect = (text, expect_json, pure.tail, '<":' not in text and text.count("<|") == seps)
    else:
        expect = (pure.text, pure.text_json, pure.tail, pure.clean)
    args = (sep, fields.get("locals"), fields.get("value"), fields["function"], _KIND_JSON[fields["kind"]],
            fields["line"], fields["source"])
    assert native_module.frame_parts(*args) == expect, fields
    assert native_module.frame_parts(*args, False) == (None,) + expect[1:], fields


# a source line's characters in every way JSON escapes them, and the texts the clean test looks for
TAILS = ['"q"\n', "back\\slash\n", "\t\x00\x7f\n", "caf\xe9\n", "\u20ac\n", "\U0001f600\n", "<|frame_sep|>\n",
         'x<":\n', "<\n", "\n", ""]


def test_a_new_source_line_at_a_freed_ones_address_gets_its_own_escape(native_module):
    """Source lines made and dropped one after another (the next is often put where the last was):
    each frame carries its own line's escape and clean flag, not a remembered one's."""
    for i in range(3000):
        source = "    v%d = %s" % (i, TAILS[i % len(TAILS)])
        kind = ("line", "return")[i % 2]
        fields = {"kind": kind, "line": i, "function": "f", "source": source}
        if kind == "line":
            fields["locals"] = [["v%d" % i, repr(source)]]
        else:
            fields["value"] = "'" + source + "'"
        _check(native_module, fields)
        del source, fields


def test_remembered_lines_stay_true_after_many_others(native_module):
    """More lines than the table holds, kept alive, then each asked again: an entry another line
    replaced is made again, one still there is that line's own."""
    lines = ["    w = %r %s" % (i, TAILS[i % len(TAILS)]) for i in range(10000)]
    for _ in range(2):
        for i, source in enumerate(lines):
            _check(native_module, {"kind": "line", "line": 2, "function": "g", "source": source,
                                   "locals": [["w", str(i)]]})


@pytest.mark.parametrize("tail", TAILS)
def test_a_long_line_is_escaped_whole(tail, native_module):
    """A line longer than the table keeps (made afresh each time) gives the same bytes."""
    source = "x = [" + "1, " * 2000 + "]  # " + tail
    for _ in range(3):
        _check(native_module, {"kind": "return", "line": 9, "function": "h", "source": source, "value": "1"})


def test_separators_are_escaped_as_they_are(native_module):
    """Separators needing escapes, of other shapes, more of them than the separators' table holds,
    in turn: each frame's text holds its own separator's escape and is counted by its shape."""
    seps = ['<"é\\>', "<|x|>", "<\u20ac>", "<\U0001f600|>", "<a", "b>", "|", "", "<|odd", '<":>',
            "<\n>", "<\x00>"]
    for _ in range(3):
        for sep in seps:
            for kind in ("line", "exception"):
                fields = {"kind": kind, "line": 4, "function": "k", "source": "y = 1 <\n"}
                if kind == "line":
                    fields["locals"] = [["y", "<|"]]
                else:
                    fields["value"] = "|>"
                _check(native_module, fields, sep)


def _name(text):
    """An equal str that is not the same object as ``text`` (the code object's names are interned;
    a frame's may not be)."""
    return "".join(list(text))


@pytest.mark.parametrize("count", [2, 3, 16, 17, 40])
@pytest.mark.parametrize("name", ["a", "caf\xe9", "\u20ac", "\U0001f600", "x" * 50])
def test_a_repeated_local_name_is_left_to_the_python(count, name, native_module):
    """A name twice among ``count`` locals (as the same object and as an equal other one, first and
    last), pair by pair or by a set: frame_parts answers None and the pure path's last-wins dict
    applies; names alike but for their length, kind or last character are different."""
    others = [["n%d" % i, str(i)] for i in range(count - 2)]
    for twin in (name, _name(name)):
        assert twin == name
        for at in (0, len(others)):
            pairs = [[name, "1"]] + others[:at] + [[twin, "2"]] + others[at:]
            assert native_module.frame_parts(KIND_SEP["line"], pairs, None, "f", '"line"', 1, "s\n") is None
    near = [name + "x", name[:-1] or "b", name[:-1] + chr(ord(name[-1]) + 1), name.encode("utf-8").decode("latin-1")]
    pairs = [[n, str(i)] for i, n in enumerate(dict.fromkeys([name] + near))] + others
    _check(native_module, {"kind": "line", "line": 1, "function": "f", "source": "s\n", "locals": pairs})


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="a collection runs inside an allocation only up to 3.11")
def test_a_call_inside_a_call_leaves_its_buffers_alone(native_module):
    """A collection set off by frame_parts' own allocation (3.11: inside the allocation; the plain
    text's parts tuple, when no free 5-tuple is left to reuse) can run a finalizer that makes a
    frame while the outer call still writes its pieces: the outer frame's pieces are its own."""
    inner = {"kind": "line", "line": 5, "function": "inner", "source": "z = 'inner'\n",
             "locals": [["z", "'" + "i" * 300 + "'"]]}
    inner_args = (KIND_SEP["line"], inner["locals"], None, "inner", '"line"', 5, inner["source"])
    seen = []

    class Cycle(object):
        def __init__(self):
            self.me = self

        def __del__(self):
            seen.append(native_module.frame_parts(*inner_args))

    outer = {"kind": "line", "line": 3, "function": "outer", "source": "w = 'outer'\n",
             "locals": [["w", "'" + "o" * 300 + "'"], ["v", "'outer'"]]}
    outer_args = (KIND_SEP["line"], outer["locals"], None, "outer", '"line"', 3, outer["source"])
    got = []
    saved = gc.get_threshold()
    gc.collect()
    try:
        gc.set_threshold(1)
        for _ in range(20):
            held = [tuple([i, i, i, i, i]) for i in range(2100)]  # every free 5-tuple taken
            Cycle()
            got.append(native_module.frame_parts(*outer_args))
            del held
    finally:
        gc.set_threshold(*saved)
    gc.collect()
    assert seen, "no finalizer ran inside frame_parts"
    for fields, answers in ((inner, seen), (outer, got)):
        pure = _Frame(dict(fields), None)
        assert all(a == (pure.text, pure.text_json, pure.tail, pure.clean) for a in answers)
