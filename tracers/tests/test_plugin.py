"""The pytest plugin: one JSON line per test, and identical outcomes with and without it."""
import json
import os
import subprocess
import sys
import textwrap

from conftest import TRACERS

from worldline_tracer import parse, roundtrip

SUITE = {
    "mylib.py": '''
        def add(a, b):
            total = a + b
            return total

        def boom(x):
            raise KeyError(x)

        def gen(n):
            for i in range(n):
                yield i * i

        class Unprintable:
            def __repr__(self):
                raise RuntimeError("no")

        def deep(n):
            return 0 if n == 0 else 1 + deep(n - 1)

        def spin(n):
            t = 0
            for i in range(n):
                t += i
            return t
    ''',
    "conftest.py": '''
        import pytest

        @pytest.fixture
        def broken():
            raise RuntimeError("fixture error")

        @pytest.fixture
        def number():
            yield 41
    ''',
    "test_suite.py": '''
        import sys
        import threading
        import pytest
        import mylib

        def test_pass(number):
            assert mylib.add(number, 1) == 42

        def test_fail():
            x = mylib.add(1, 1)
            assert x == 3

        def test_error_in_fixture(broken):
            pass

        @pytest.mark.skip(reason="skipped")
        def test_skip():
            pass

        @pytest.mark.xfail(reason="known")
        def test_xfail():
            mylib.boom("k")

        def test_raises():
            with pytest.raises(KeyError):
                mylib.boom("k")

        def test_generator_and_bad_repr():
            u = mylib.Unprintable()
            assert list(mylib.gen(4)) == [0, 1, 4, 9]

        def test_recursion_limit():
            with pytest.raises(RecursionError):
                mylib.deep(10 ** 6)

        def test_threads():
            out = []
            t = threading.Thread(target=lambda: out.append(mylib.add(2, 3)))
            t.start(); t.join()
            assert out == [5]

        def test_capped():
            assert mylib.spin(5000) == sum(range(5000))

        def test_uncaught():
            mylib.boom("z")
    ''',
}


def _write_suite(root):
    for name, text in SUITE.items():
        with open(os.path.join(str(root), name), "w") as f:
            f.write(textwrap.dedent(text).lstrip())


def _run(root, report, trace_out=None, backend=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([TRACERS] + [p for p in sys.path if p])
    env["WORLDLINE_REPORT"] = str(report)
    env["PYTHONHASHSEED"] = "0"
    env.pop("WORLDLINE_TRACE_OUT", None)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "worldline_report", "-p", "no:cacheprovider"]
    if trace_out is not None:
        env["WORLDLINE_TRACE_OUT"] = str(trace_out)
        env["WORLDLINE_TRACE_ROOT"] = str(root)
        env["WORLDLINE_TRACE_EMIT"] = "both"
        env["WORLDLINE_TRACE_MAX_EVENTS"] = "3000"
        if backend:
            env["WORLDLINE_TRACE_BACKEND"] = backend
        args += ["-p", "worldline_tracer.plugin"]
    proc = subprocess.run(args, cwd=str(root), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=300)
    outcomes = []
    with open(str(report)) as f:
        for line in f:
            rec = json.loads(line)
            if rec["event"] == "test":
                outcomes.append((rec["nodeid"], rec["when"], rec["outcome"], rec.get("wasxfail", False)))
    return proc.returncode, sorted(outcomes), proc.stdout.decode("utf-8", "replace")


def _backends():
    return ["settrace", "monitoring"] if hasattr(sys, "monitoring") else ["settrace"]


def test_outcome_parity_and_trace_lines(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    _write_suite(suite)
    rc0, plain, out0 = _run(suite, tmp_path / "plain.jsonl")
    assert rc0 == 1, out0
    assert len({o[0] for o in plain}) == 11
    for backend in _backends():
        trace_out = tmp_path / ("trace-%s.jsonl" % backend)
        rc1, traced, out1 = _run(suite, tmp_path / ("traced-%s.jsonl" % backend), trace_out, backend)
        assert (rc1, traced) == (rc0, plain), out1
        with open(str(trace_out)) as f:
            lines = [json.loads(line) for line in f]
        by_id = {rec["nodeid"]: rec for rec in lines}
        assert sorted(by_id) == sorted({o[0] for o in plain})
        for rec in lines:
            assert rec["backend"] in (backend, None)
            for ep in rec["episodes"]:
                assert roundtrip(ep["text"])
                assert parse(ep["text"])[0] == ep["context"]
        passing = by_id["test_suite.py::test_pass"]
        assert passing["error"] is None and not passing["truncated"] and passing["line_events"] > 0
        assert passing["slow_reprs"] == []
        funcs = {e["function"] for e in passing["events"]}
        assert funcs == {"test_pass", "add"}
        assert all(not name.startswith("@") for e in passing["events"] for name, _ in e.get("locals", []))
        add = [ep for ep in passing["episodes"] if ep["function"] == "add"][0]
        assert add["text"].startswith("<|trace_context_start|>def add(a, b):  # << START_OF_TRACE\n")
        assert '<|call_sep|>{"a": "41", "b": "1"}<|action_sep|>def add(a, b):\n' in add["text"]
        assert by_id["test_suite.py::test_capped"]["truncated"] is True
        assert by_id["test_suite.py::test_skip"]["phases"] == []
        threads = by_id["test_suite.py::test_threads"]
        assert {e["function"] for e in threads["events"]} == {"test_threads"}


LOOPING = {
    "looplib.py": '''
        def tokenize(s):
            i = 0
            n = 0
            while i < len(s):
                n += 1
                i -= 1
            return n

        def quick(n):
            return n + 1

        def calls_forever():
            while True:
                quick(1)
    ''',
    "test_loop.py": '''
        import looplib

        def test_loops():
            try:
                assert looplib.tokenize("12") == 2
            except Exception:
                pass

        def test_calls_forever():
            looplib.calls_forever()

        def test_loops_untraced():
            while True:
                pass

        def test_quick():
            assert looplib.quick(1) == 2
    ''',
}


def _traced_run(suite, tmp_path, **trace_env):
    """pytest with the report and tracer plugins over ``suite``: the process, and its trace lines by node id."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([TRACERS] + [p for p in sys.path if p])
    env.update(WORLDLINE_REPORT=str(tmp_path / "report.jsonl"), WORLDLINE_TRACE_OUT=str(tmp_path / "trace.jsonl"),
               WORLDLINE_TRACE_ROOT=str(suite), **trace_env)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "worldline_report", "-p", "no:cacheprovider",
                           "-p", "worldline_tracer.plugin"], cwd=str(suite), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=100)
    with open(str(tmp_path / "trace.jsonl")) as f:
        return proc, {rec["nodeid"]: rec for rec in map(json.loads, f)}


def test_budgets_stop_a_looping_test_at_the_cap_or_its_seconds(tmp_path):
    """A test known to loop is stopped once its trace hits the cap (its own `except Exception` cannot
    swallow the stop); a loop the tracer cannot see stops at its seconds; others run as usual."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in LOOPING.items():
        (suite / name).write_text(textwrap.dedent(text).lstrip())
    budgets = tmp_path / "budgets.json"
    budgets.write_text(json.dumps({
        "test_loop.py::test_loops": {"seconds": 120, "stop_at_cap": True},
        "test_loop.py::test_calls_forever": {"seconds": 120, "stop_at_cap": True},
        "test_loop.py::test_loops_untraced": {"seconds": 1, "stop_at_cap": True},
        "test_loop.py::test_quick": {"seconds": 60, "stop_at_cap": False},
    }))
    proc, by_id = _traced_run(suite, tmp_path, WORLDLINE_TRACE_MAX_EVENTS="2000", WORLDLINE_TRACE_MAX_LINES_PER_CALL="500",
                              WORLDLINE_TRACE_INCLUDE_TESTS="0", WORLDLINE_TRACE_BUDGETS=str(budgets))
    assert proc.returncode == 1, proc.stdout
    # A loop inside one call stops at the call's line cap; a loop of calls at the event cap.
    loops = by_id["test_loop.py::test_loops"]
    assert not loops["truncated"] and loops["timed_out_under_trace"] and loops["line_events"] == 500
    assert loops["stopped"].startswith("trace cap")
    calls = by_id["test_loop.py::test_calls_forever"]
    assert calls["truncated"] and calls["timed_out_under_trace"] and calls["stopped"].startswith("trace cap")
    untraced = by_id["test_loop.py::test_loops_untraced"]
    assert untraced["timed_out_under_trace"] and untraced["stopped"].startswith("over its budget of 1.0 s")
    assert not by_id["test_loop.py::test_quick"]["timed_out_under_trace"]
    outcomes = {}
    with open(str(tmp_path / "report.jsonl")) as f:
        for rec in map(json.loads, f):
            if rec["event"] == "test" and rec["when"] == "call":
                outcomes[rec["nodeid"]] = rec["outcome"]
    assert outcomes == {"test_loop.py::test_loops": "failed", "test_loop.py::test_calls_forever": "failed",
                        "test_loop.py::test_loops_untraced": "failed",
                        "test_loop.py::test_quick": "passed"}


def test_a_repr_past_the_safety_net_is_named_on_its_line(tmp_path):
    """Reprs are bounded by output, not time; one slower than the wall-time safety net becomes a
    marker and the line names its class, so the run is flagged as load-dependent."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "slowlib.py").write_text(textwrap.dedent('''
        import time

        class Slow:
            def __repr__(self):
                time.sleep(0.05)
                return "Slow()"

        def make():
            s = Slow()
            return s
    ''').lstrip())
    (suite / "test_slow.py").write_text(textwrap.dedent('''
        import slowlib

        def test_slow():
            assert slowlib.make() is not None

        def test_plain():
            assert 1 + 1 == 2
    ''').lstrip())
    proc, by_id = _traced_run(suite, tmp_path, WORLDLINE_TRACE_REPR_SAFETY_S="0.01")
    assert proc.returncode == 0, proc.stdout
    assert by_id["test_slow.py::test_slow"]["slow_reprs"] == ["Slow"]
    assert by_id["test_slow.py::test_plain"]["slow_reprs"] == []


def test_no_collection_while_the_tracer_writes_and_the_state_restored():
    """Episodes are built with the cyclic collector off (plugin._NoCollection); a suite that had
    switched it off itself keeps it off."""
    import gc

    from worldline_tracer.plugin import _NoCollection

    assert gc.isenabled()
    with _NoCollection():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with _NoCollection():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    try:
        with _NoCollection():
            raise ValueError("a failed write")
    except ValueError:
        pass
    assert gc.isenabled()


def test_a_traced_phase_collects_young_objects_less_often_and_restores_the_threshold(tmp_path):
    """While a phase is traced the collector's youngest generation is _GC_SCALE times larger
    (plugin._SparseCollection); afterwards the suite's own threshold is back, and a threshold the
    traced code set itself is left as it set it."""
    import gc

    from worldline_tracer.plugin import _GC_SCALE

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_gc.py").write_text(textwrap.dedent('''
        import gc, json, os

        def _note(name):
            with open(os.environ["GC_NOTES"], "a") as f:
                f.write(json.dumps([name, gc.get_threshold()]) + "\\n")

        def test_plain():
            _note("plain")

        def test_sets_its_own():
            gc.set_threshold(123, 4, 5)
            _note("own")

        def test_after():
            _note("after")
    '''))
    notes = tmp_path / "notes.jsonl"
    proc, by_id = _traced_run(suite, tmp_path, GC_NOTES=str(notes))
    assert proc.returncode == 0, proc.stdout
    assert len(by_id) == 3
    t0, t1, t2 = gc.get_threshold()
    seen = dict(json.loads(line) for line in notes.read_text().splitlines())
    assert seen == {"plain": [t0 * _GC_SCALE, t1, t2], "own": [123, 4, 5],
                    "after": [123 * _GC_SCALE, 4, 5]}
