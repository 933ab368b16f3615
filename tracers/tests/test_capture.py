"""The C capture (_native.c's Capture: the settrace trace function and the sys.monitoring callbacks)
records exactly what the Python handlers record, and handles faults and a trace function handed
back to sys.settrace the same way."""
import gc
import importlib.util
import sys

import pytest
from conftest import PROGRAM_CALLS, load_program

from worldline_tracer import HAS_MONITORING, Serializer, Tracer, native
from worldline_tracer import tracer as tracer_module

BACKENDS = ["settrace", "monitoring"] if HAS_MONITORING else ["settrace"]
KINDS = (tracer_module._CALL, tracer_module._LINE, tracer_module._RETURN, tracer_module._EXCEPTION)

PROGRAM = '''
import sys

def leaf(x):
    y = [x, x + 1]
    return sum(y)

SAVED = []  # a global: the trace function's own repr differs between the paths


def handed_back(n):
    # what debuggers and coverage tools do: take the trace function and give it back
    SAVED.append(sys.gettrace())
    sys.settrace(None)
    untraced = leaf(100)
    sys.settrace(SAVED.pop())
    total = untraced
    for i in range(n):
        total += leaf(i)
    return total

def gen(n):
    for i in range(n):
        yield leaf(i)

def fails(n):
    try:
        raise ValueError("no %d" % n)
    except ValueError as e:
        return str(e)

def main():
    out = [handed_back(3), list(gen(3)), fails(2)]
    return out
'''


def _load(tmp_path):
    path = tmp_path / "capture_program.py"
    path.write_text(PROGRAM)
    spec = importlib.util.spec_from_file_location("capture_program", str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(fn, root, backend, **options):
    tracer = Tracer(root=root, backend=backend, **options)
    seen = []
    result = None
    tracer.start()
    try:
        seen.append(tracer._capture)
        result = fn()
    except Exception as e:  # the traced program's own exception
        result = repr(e)
    finally:
        tracer.stop()
    return result, tracer, seen[0]


def _both(run, native_module, monkeypatch):
    out = {}
    for mode in ("pure", "native"):
        monkeypatch.setattr(native, "mod", native_module if mode == "native" else None)
        result, tracer, capture = run()
        assert (type(capture).__name__ == "Capture") == (mode == "native")
        out[mode] = (result, tracer)
    return out["pure"], out["native"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_raw_records_equal_with_and_without_capture(backend, native_module, monkeypatch):
    """The compact records themselves (not only the event dicts) are equal on every test program,
    their kinds are tracer.py's own constants, and the C path's are untracked by the cyclic GC."""
    from conftest import PROGRAMS

    tracked = total = 0
    for module, call in PROGRAM_CALLS + [("native_edges", lambda p: p.main())]:
        p = load_program(module)
        (r1, pure), (r2, fast) = _both(lambda: _run(lambda: call(p), PROGRAMS, backend), native_module, monkeypatch)
        assert pure.error is None and fast.error is None
        assert len(pure._raw) > 0
        assert fast._raw == pure._raw, module
        assert all(rec[0] in KINDS and any(rec[0] is k for k in KINDS) for rec in fast._raw)
        assert fast.events == pure.events
        tracked += sum(map(gc.is_tracked, fast._raw))
        total += len(fast._raw)
        if backend == "settrace":
            assert not any(gc.is_tracked(rec[3]) for rec in fast._raw if rec[0] in ("call", "line"))
    # the rarer monitoring events (RAISE, PY_UNWIND, PY_THROW) still have Python handlers
    assert tracked == 0 if backend == "settrace" else tracked < total / 4, (tracked, total)



@pytest.mark.skipif(not HAS_MONITORING, reason="sys.monitoring needs Python 3.12+")
def test_one_line_loops_take_the_c_jump_handler(native_module, monkeypatch):
    """A loop on one line has a line event per turn only through sys.monitoring's JUMP event (a
    backward jump that stays on the line); the C handler records what the Python one records, and
    all its records come from C (untracked by the cyclic GC, which is off so that it cannot untrack
    the Python path's records itself)."""
    p = load_program("samples")
    gc.disable()
    try:
        (r1, pure), (r2, fast) = _both(lambda: _run(lambda: p.one_line_loop(5), p.__file__.rsplit("/", 1)[0],
                                                    "monitoring"), native_module, monkeypatch)
    finally:
        gc.enable()
    assert r1 == r2 == 0
    assert pure.error is None and fast.error is None
    assert fast._raw == pure._raw
    loop_line = p.one_line_loop.__code__.co_firstlineno + 1
    assert [rec[2] for rec in fast._raw if rec[0] == "line"].count(loop_line) == 5
    assert not any(map(gc.is_tracked, fast._raw))
    assert all(map(gc.is_tracked, (rec for rec in pure._raw if rec[0] == "line")))

@pytest.mark.parametrize("backend", BACKENDS)
def test_program_with_generators_exceptions_and_a_handed_back_trace_function(backend, tmp_path, native_module,
                                                                           monkeypatch):
    """settrace: sys.gettrace()'s answer (the Capture object) given back to sys.settrace keeps
    tracing, through CPython's Python-level trampoline, with the same records; the untraced
    stretch in between records nothing on either path."""
    mod = _load(tmp_path)
    (r1, pure), (r2, fast) = _both(lambda: _run(mod.main, str(tmp_path), backend), native_module, monkeypatch)
    assert r1 == r2 == [201 + 1 + 3 + 5, [1, 3, 5], "no 2"]
    assert pure.error is None and fast.error is None
    assert fast._raw == pure._raw
    kinds = {rec[0] for rec in fast._raw}
    assert kinds == {"call", "line", "return", "exception"}
    calls = [rec[1][0][1] for rec in fast._raw if rec[0] == "call"]
    assert calls.count("leaf") == 6 if backend == "settrace" else calls.count("leaf") >= 6


class _Failing(Serializer):
    """Fails on the Nth value it is asked for: the tracer must record the fault and stop."""

    def __init__(self, n):
        Serializer.__init__(self)
        self.left = n

    def __call__(self, value):
        self.left -= 1
        if self.left == 0:
            raise RuntimeError("serializer broke")
        return Serializer.__call__(self, value)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_fault_in_a_handler_is_recorded_and_stops_tracing(backend, n, tmp_path, native_module, monkeypatch):
    """A Python exception in a handler (here the serializer, called from C for a returned value)
    becomes tracer.error and stops tracing, on both paths at the same record; the program runs on."""
    mod = _load(tmp_path)
    (r1, pure), (r2, fast) = _both(lambda: _run(mod.main, str(tmp_path), backend, serializer=_Failing(n)),
                                   native_module, monkeypatch)
    assert r1 == r2
    for tracer in (pure, fast):
        assert "RuntimeError: serializer broke" in tracer.error
        assert not tracer.truncated
    assert fast._raw == pure._raw
    assert sum(rec[0] == "return" for rec in fast._raw) == n - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_event_and_line_caps_in_c(backend, tmp_path, native_module, monkeypatch):
    """max_events (truncated, tracing stops) and max_lines_per_call (lines_capped on the return)
    cut the records at the same place on both paths."""
    mod = _load(tmp_path)
    for options in ({"max_events": 17}, {"max_lines_per_call": 2}):
        (r1, pure), (r2, fast) = _both(lambda: _run(mod.main, str(tmp_path), backend, **options),
                                       native_module, monkeypatch)
        assert fast._raw == pure._raw
        assert fast.truncated == pure.truncated == ("max_events" in options)
        if "max_events" in options:
            assert len(fast._raw) == 17
        else:
            assert any(rec[0] == "return" and rec[4] for rec in fast._raw)
    assert sys.gettrace() is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_events_while_off_are_dropped_on_both_paths(backend, tmp_path, native_module, monkeypatch):
    """Tracer._set_off (what _halt and _fault use) reaches the C capture, which reads its own copy
    of the flag at every event: events while off are dropped, and they are recorded again once on."""
    mod = _load(tmp_path)

    def run():
        tracer = Tracer(root=str(tmp_path), backend=backend)
        tracer.start()
        try:
            capture = tracer._capture
            mod.leaf(1)
            tracer._set_off(True)
            mod.leaf(2)
            tracer._set_off(False)
            mod.leaf(3)
        finally:
            tracer.stop()
        return None, tracer, capture

    (_, pure), (_, fast) = _both(run, native_module, monkeypatch)
    assert fast._raw == pure._raw
    assert [dict(rec[3])["x"] for rec in fast._raw if rec[0] == tracer_module._CALL] == ["1", "3"]


def test_capped_frames_get_their_line_events_back(tmp_path, native_module, monkeypatch):
    """settrace: past the line cap the C capture turns a frame's line events off (f_trace_lines);
    a generator resumed after its cap counts its lines afresh, as on the Python path, and a frame
    still running when the tracer stops has them back (a coverage tool or debugger tracing after
    us must still see its lines)."""
    path = tmp_path / "capped_program.py"
    path.write_text('''import sys

def gen(n):
    for i in range(n):
        x = i
        yield x

def loop(tracer, seen):
    total = 0
    for i in range(6):
        total += i
    g = gen(6)
    total += next(g) + next(g)
    total += sum(g)
    tracer.stop()
    seen.append(sys._getframe().f_trace_lines)
    return total
''')
    spec = importlib.util.spec_from_file_location("capped_program", str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def run():
        tracer = Tracer(root=str(tmp_path), backend="settrace", max_lines_per_call=2)
        seen = []
        tracer.start()
        capture = tracer._capture
        mod.loop(tracer, seen)
        return seen, tracer, capture

    (seen_pure, pure), (seen_fast, fast) = _both(run, native_module, monkeypatch)
    assert fast._raw == pure._raw
    assert seen_fast == seen_pure == [True]
    lines = [rec for rec in fast._raw if rec[0] == tracer_module._LINE and rec[1][0][1] == "gen"]
    assert len(lines) > 6  # each resumption counts afresh: more lines than one frame's cap
