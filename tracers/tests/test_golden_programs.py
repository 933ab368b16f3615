"""Golden traces of small programs (tracers/tests/programs/samples.py), checked by hand."""
import sys

import pytest
from conftest import compact, load_program, run_traced

from worldline_tracer import HAS_MONITORING, Serializer

# every test here runs on the pure Python path and with the C accelerator
pytestmark = pytest.mark.usefixtures("native_mode")

BACKENDS = ["settrace", "monitoring"] if HAS_MONITORING else ["settrace"]
PY = sys.version_info[:2]


def only(cond, *rows):
    return list(rows) if cond else []


def events_of(fn, backend, **options):
    result, exc, tracer = run_traced(fn, backend, **options)
    assert tracer.error is None and not tracer.truncated
    return result, exc, compact(tracer.events)


@pytest.fixture(scope="module")
def p():
    return load_program("samples")


@pytest.mark.parametrize("backend", BACKENDS)
def test_recursion(p, backend):
    result, exc, ev = events_of(lambda: p.fact(3), backend)
    assert result == 6
    assert ev == [
        ("call", 4, "fact", 0, [("n", "3")]),
        ("line", 5, "fact", 0, [("n", "3")]),
        ("line", 7, "fact", 0, [("n", "3")]),
        ("call", 4, "fact", 1, [("n", "2")]),
        ("line", 5, "fact", 1, [("n", "2")]),
        ("line", 7, "fact", 1, [("n", "2")]),
        ("call", 4, "fact", 2, [("n", "1")]),
        ("line", 5, "fact", 2, [("n", "1")]),
        ("line", 6, "fact", 2, [("n", "1")]),
        ("return", 6, "fact", 2, "1"),
        ("return", 7, "fact", 1, "2"),
        ("return", 7, "fact", 0, "6"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop(p, backend):
    result, exc, ev = events_of(lambda: p.deep_loop(2), backend)
    assert result == 1
    assert ev == [
        ("call", 131, "deep_loop", 0, [("n", "2")]),
        ("line", 132, "deep_loop", 0, [("n", "2")]),
        ("line", 133, "deep_loop", 0, [("n", "2"), ("total", "0")]),
        ("line", 134, "deep_loop", 0, [("n", "2"), ("total", "0"), ("i", "0")]),
        ("line", 133, "deep_loop", 0, [("n", "2"), ("total", "0"), ("i", "0")]),
        ("line", 134, "deep_loop", 0, [("n", "2"), ("total", "0"), ("i", "1")]),
        ("line", 133, "deep_loop", 0, [("n", "2"), ("total", "1"), ("i", "1")]),
        ("line", 135, "deep_loop", 0, [("n", "2"), ("total", "1"), ("i", "1")]),
        ("return", 135, "deep_loop", 0, "1"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_line_loop_backward_jumps(p, backend):
    result, exc, ev = events_of(lambda: p.one_line_loop(2), backend)
    assert ev == [
        ("call", 66, "one_line_loop", 0, [("n", "2")]),
        ("line", 67, "one_line_loop", 0, [("n", "2")]),
        ("line", 67, "one_line_loop", 0, [("n", "1")]),
    ] + only(PY < (3, 10), ("line", 67, "one_line_loop", 0, [("n", "0")])) + [
        ("line", 68, "one_line_loop", 0, [("n", "0")]),
        ("return", 68, "one_line_loop", 0, "0"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_generator_yield_is_return_resume_is_call(p, backend):
    result, exc, ev = events_of(p.use_gen, backend)
    assert result == 3
    assert ev == [
        ("call", 16, "use_gen", 0, []),
        ("line", 17, "use_gen", 0, []),
        ("line", 18, "use_gen", 0, [("total", "0")]),
        ("call", 10, "countdown", 1, [("n", "2")]),
        ("line", 11, "countdown", 1, [("n", "2")]),
        ("line", 12, "countdown", 1, [("n", "2")]),
        ("return", 12, "countdown", 1, "2"),
        ("line", 19, "use_gen", 0, [("total", "0"), ("v", "2")]),
        ("line", 18, "use_gen", 0, [("total", "2"), ("v", "2")]),
        ("call", 12, "countdown", 1, [("n", "2")], "resume"),
        ("line", 13, "countdown", 1, [("n", "2")]),
        ("line", 11, "countdown", 1, [("n", "1")]),
        ("line", 12, "countdown", 1, [("n", "1")]),
        ("return", 12, "countdown", 1, "1"),
        ("line", 19, "use_gen", 0, [("total", "2"), ("v", "1")]),
        ("line", 18, "use_gen", 0, [("total", "3"), ("v", "1")]),
        ("call", 12, "countdown", 1, [("n", "1")], "resume"),
        ("line", 13, "countdown", 1, [("n", "1")]),
        ("line", 11, "countdown", 1, [("n", "0")]),
        ("return", 11, "countdown", 1, "None"),
    ] + only(PY < (3, 10), ("exception", 18, "use_gen", 0, "StopIteration()")) + [
        ("line", 20, "use_gen", 0, [("total", "3"), ("v", "1")]),
        ("return", 20, "use_gen", 0, "3"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_generator_throw(p, backend):
    result, exc, ev = events_of(p.gen_throw, backend)
    assert result == 3
    g = ("g", "<generator object countdown>")
    assert ev[9:13] == [
        ("call", 12, "countdown", 1, [("n", "3")], "resume"),
        ("exception", 12, "countdown", 1, "KeyError('k')"),
        ("return", 12, "countdown", 1, "None"),
        ("exception", 80, "gen_throw", 0, "KeyError('k')"),
    ]
    assert ev[-1] == ("return", 83, "gen_throw", 0, "3")
    assert ev[-2] == ("line", 83, "gen_throw", 0, [g, ("first", "3")])


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_caught(p, backend):
    result, exc, ev = events_of(p.catch, backend)
    assert result == "bad 1"
    assert ev == [
        ("call", 27, "catch", 0, []),
        ("line", 28, "catch", 0, []),
        ("line", 29, "catch", 0, []),
        ("call", 23, "fail", 1, [("x", "1")]),
        ("line", 24, "fail", 1, [("x", "1")]),
        ("exception", 24, "fail", 1, "ValueError('bad 1')"),
        ("return", 24, "fail", 1, "None"),
        ("exception", 29, "catch", 0, "ValueError('bad 1')"),
        ("line", 30, "catch", 0, []),
        ("line", 31, "catch", 0, [("e", "ValueError('bad 1')")]),
        ("line", 32, "catch", 0, [("msg", "'bad 1'")]),
        ("return", 32, "catch", 0, "'bad 1'"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_uncaught(p, backend):
    result, exc, ev = events_of(p.uncaught, backend)
    assert isinstance(exc, ValueError)
    assert ev == [
        ("call", 35, "uncaught", 0, []),
        ("line", 36, "uncaught", 0, []),
        ("call", 23, "fail", 1, [("x", "2")]),
        ("line", 24, "fail", 1, [("x", "2")]),
        ("exception", 24, "fail", 1, "ValueError('bad 2')"),
        ("return", 24, "fail", 1, "None"),
        ("exception", 36, "uncaught", 0, "ValueError('bad 2')"),
        ("return", 36, "uncaught", 0, "None"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_awkward_values(p, backend):
    # SlowRepr (60 ms) shows as a marker under a safety net below it (the default, 2 s, keeps it).
    ser = Serializer(repr_safety_s=0.05)
    result, exc, ev = events_of(p.values, backend, serializer=ser)
    assert ser.slow_classes == ["SlowRepr"]
    assert result == 1
    big = ("big", "<int bit_length=14037>")
    bad = ("bad", "<BadRepr object>")
    slow = ("slow", "<SlowRepr object>")
    huge = ("huge", "<HugeRepr object>")
    assert ev[-3:] == [
        ("line", 62, "values", 0, [big, bad, slow, huge, ("cyc", "[1, [...]]")]),
        ("line", 63, "values", 0, [big, bad, slow, huge, ("cyc", "[1, [...]]"), ("d", "{'k': [1, [...]]}")]),
        ("return", 63, "values", 0, "1"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_coroutine(p, backend):
    result, exc, ev = events_of(p.run_coroutine, backend)
    assert result == 3
    assert ("call", 90, "run_async", 1, []) in ev
    assert ("call", 86, "add_async", 2, [("a", "1"), ("b", "2")]) in ev
    assert ("return", 87, "add_async", 2, "3") in ev
    assert ("exception", 91, "run_async", 1, "StopIteration(3)") in ev
    assert ev[-1] == ("return", 100, "run_coroutine", 0, "3")


@pytest.mark.parametrize("backend", BACKENDS)
def test_methods_and_qualnames(p, backend):
    result, exc, ev = events_of(p.use_point, backend)
    assert result == 7
    obj = "<worldline_prog_samples.Point object>"
    assert ev == [
        ("call", 126, "use_point", 0, []),
        ("line", 127, "use_point", 0, []),
        ("call", 118, "Point.__init__", 1, [("self", obj), ("x", "3"), ("y", "-4")]),
        ("line", 119, "Point.__init__", 1, [("self", obj), ("x", "3"), ("y", "-4")]),
        ("line", 120, "Point.__init__", 1, [("self", obj), ("x", "3"), ("y", "-4")]),
        ("return", 120, "Point.__init__", 1, "None"),
        ("line", 128, "use_point", 0, [("p", obj)]),
        ("call", 122, "Point.norm1", 1, [("self", obj)]),
        ("line", 123, "Point.norm1", 1, [("self", obj)]),
        ("return", 123, "Point.norm1", 1, "7"),
        ("return", 128, "use_point", 0, "7"),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_comprehension(p, backend):
    result, exc, ev = events_of(lambda: p.squares([1, 2]), backend)
    assert result == [1, 4]
    if PY >= (3, 12):  # PEP 709: inlined
        middle = [("line", 72, "squares", 0, [("xs", "[1, 2]"), ("x", "1")]),
                  ("line", 72, "squares", 0, [("xs", "[1, 2]"), ("x", "2")])]
    else:
        middle = [("call", 72, "squares.<locals>.<listcomp>", 1, []),
                  ("line", 72, "squares.<locals>.<listcomp>", 1, []),
                  ("line", 72, "squares.<locals>.<listcomp>", 1, [("x", "1")]),
                  ("line", 72, "squares.<locals>.<listcomp>", 1, [("x", "2")]),
                  ("return", 72, "squares.<locals>.<listcomp>", 1, "[1, 4]")]
    assert ev == [("call", 71, "squares", 0, [("xs", "[1, 2]")]),
                  ("line", 72, "squares", 0, [("xs", "[1, 2]")])] + middle + [
                  ("line", 73, "squares", 0, [("xs", "[1, 2]"), ("out", "[1, 4]")]),
                  ("return", 73, "squares", 0, "[1, 4]")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_other_threads_ignored(p, backend):
    result, exc, ev = events_of(p.with_thread, backend)
    assert result == 3
    assert {row[2] for row in ev} == {"with_thread"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_event_cap_truncates_and_stops(p, backend):
    result, exc, tracer = run_traced(lambda: p.deep_loop(1000), backend, max_events=50)
    assert result == sum(range(1000)) and exc is None
    assert tracer.truncated and len(tracer.events) == 50 and tracer.error is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_line_cap_per_call(p, backend):
    result, exc, tracer = run_traced(lambda: p.deep_loop(100), backend, max_lines_per_call=5)
    assert result == sum(range(100))
    ev = tracer.events
    assert [e["kind"] for e in ev] == ["call"] + ["line"] * 5 + ["return"]
    assert ev[-1]["lines_capped"] is True and ev[-1]["value"] == "4950"


@pytest.mark.parametrize("backend", BACKENDS)
def test_tracer_fault_never_reaches_the_program(p, backend):
    calls = []

    def scope(filename):
        calls.append(filename)
        raise RuntimeError("broken scope")

    from worldline_tracer import Tracer

    tracer = Tracer(scope=scope, backend=backend)
    tracer.start()
    try:
        result = p.fact(5)
    finally:
        tracer.stop()
    assert result == 120
    assert calls and "broken scope" in tracer.error


def test_monitoring_cleans_up():
    if not HAS_MONITORING:
        pytest.skip("sys.monitoring needs 3.12+")
    p = load_program("samples")
    for _ in range(3):  # tool ids are freed and events restarted each time
        result, exc, tracer = run_traced(lambda: p.fact(4), "monitoring")
        assert result == 24 and len(tracer.events) > 0
        assert all(sys.monitoring.get_tool(t) is None for t in (3, 4))
