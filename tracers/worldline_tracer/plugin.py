"""pytest plugin: trace each test, keyed by node id (``-p worldline_tracer.plugin``).

Writes one JSON line per test to the file named by WORLDLINE_TRACE_OUT (append, flushed per line;
nothing is traced when it is unset). It never changes a test's outcome: tracer faults are caught
and recorded in the line's "error". Environment variables (all optional):
  WORLDLINE_TRACE_OUT             output file (JSON Lines); keep it outside the repository
  WORLDLINE_TRACE_ROOT            scope root (default: the current directory)
  WORLDLINE_TRACE_INCLUDE_TESTS   1 (default) to trace test files too, 0 to leave them out
  WORLDLINE_TRACE_PHASES          phases traced, comma-separated: call (default), setup, teardown
  WORLDLINE_TRACE_BACKEND         auto (default) | monitoring | settrace
  WORLDLINE_TRACE_EMIT            episodes (default) | events | both
  WORLDLINE_TRACE_MAX_EVENTS      raw events per test (default 100000); hit -> truncated, stop
  WORLDLINE_TRACE_MAX_LINES_PER_CALL  line events kept per function call (default 10000)
  WORLDLINE_TRACE_STEP_IN         step-in probability (default 0.5)
  WORLDLINE_TRACE_SEED            episode seed (default 0); the rng is seeded with "SEED|nodeid"
                                  and so is ``random`` before each test (as pytest-randomly does);
                                  hypothesis runs derandomized (see _seed_hypothesis)
  WORLDLINE_TRACE_MAX_DEPTH       deepest raw stack depth that starts an episode (default: any)
  WORLDLINE_TRACE_MAX_STEP_DEPTH  step-in nesting below an episode's entry (default 2)
  WORLDLINE_TRACE_MAX_FRAMES      episodes with more frames are dropped (default 10000)
  WORLDLINE_TRACE_MAX_TEST_EPISODES, WORLDLINE_TRACE_MAX_TEST_BYTES  caps per test (default 1000
                                  episodes, 8 MiB of episode JSON; 0: none); past them a seeded sample
  WORLDLINE_TRACE_MAX_UNIT_EPISODES, WORLDLINE_TRACE_MAX_UNIT_BYTES  caps on the whole run (default
                                  50000 episodes, 256 MiB; 0: none), shared out over the tests
                                  still to run so each keeps at least one episode; see caps.py
  WORLDLINE_TRACE_REPR_SAFETY_S   wall seconds a value's repr may take before it becomes a marker and
                                  its class is named in the line's "slow_reprs" (default 2.0)
  WORLDLINE_TRACE_BUDGETS         JSON file {nodeid: {"seconds": s, "stop_at_cap": bool}}: a listed
                                  test's call is stopped after s seconds, or as soon as its trace stops
                                  growing at a cap (events, or a call's lines) when stop_at_cap (a test
                                  known to loop); its line then
                                  says "timed_out_under_trace" and why
  WORLDLINE_TRACE_ARENAS_KEPT_MB  pymalloc's arenas come from huge pages and empty ones are kept for
                                  the next test, up to this many MiB resident (default 128; "off":
                                  CPython's own arenas); see _native.c's huge_arenas
Line shape: {"nodeid", "phases", "backend", "python", "tracer_version", "truncated", "error",
  "seconds", "timed_out_under_trace", "stopped", "event_count", "line_events", "events"?: [...],
  "episodes"?: [...], "episodes_dropped"?: {...}, "episodes_built"?, "episode_bytes"?,
  "sampled"?: null | "test_cap" | "unit_cap", "slow_reprs": [...]}; "slow_reprs" names the classes
  whose repr ran past the serializer's wall-time safety net (their values are markers, so the trace
  depends on the machine's load: the caller flags it)

PYTEST_DONT_REWRITE: pytest leaves this module as it is. Every function the hooks call on the
standard library is bound below, at import: a test that mocks `os.write`, `time.monotonic`
(freezegun) or `json.dumps`, or a fake file system (pyfakefs swaps the `os` of every module it
finds), changes nothing the plugin does.
"""
import gc
import importlib.util
import json
import os
import platform
import random
import signal
import sys
import time

import pytest

from . import __version__, native
from .caps import OutputCaps
from .episodes import EpisodeBuilder, Texts, new_batch
from .serialize import DEFAULTS as _SER_DEFAULTS
from .serialize import Serializer
from .source import SourceIndex
from .tracer import Tracer, _as_dict, make_scope

_monotonic = time.monotonic
_open, _close, _write, _writev = os.open, os.close, os.write, os.writev
_dumps = json.dumps
_load = json.load
_read_file = open
_signal, _setitimer = signal.signal, signal.setitimer
_gc_get_threshold, _gc_set_threshold, _gc_isenabled, _gc_enable, _gc_disable = (
    gc.get_threshold, gc.set_threshold, gc.isenabled, gc.enable, gc.disable)
_seed = random.seed
_PYTHON = platform.python_version()

# one SourceIndex for the whole run: each file is parsed once, not once per test
# and one batch the episodes of every test are written into (episodes.new_batch)
_state = {"fd": None, "scope": None, "opts": None, "sources": None, "caps": None, "budgets": {}, "batch": None}
_KEY = "_worldline_trace"
_SLOT = "@worldline-episodes@"
_HERE = os.path.dirname(os.path.abspath(__file__))
# How often a budgeted test is checked (its trace at the cap, its seconds spent).
_TICK_S = 0.05
# How much larger the collector's youngest generation is while a phase is traced (_SparseCollection).
_GC_SCALE = 10
# MiB of empty pymalloc arenas kept resident between tests (_native.c's huge_arenas): h11's largest
# test fills about 80 MB of them, and the memory is the process's peak either way
_ARENAS_KEPT_MB = 128


class TracedTestStopped(BaseException):
    """Ends a budgeted test's call (a BaseException, so the test's own `except Exception` cannot
    swallow it; pytest reports the test as failed)."""


def _env_int(name, default):
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def _options():
    phases = [p.strip() for p in os.environ.get("WORLDLINE_TRACE_PHASES", "call").split(",") if p.strip()]
    max_depth = os.environ.get("WORLDLINE_TRACE_MAX_DEPTH", "").strip()
    return {
        "phases": [p for p in ("setup", "call", "teardown") if p in phases],
        "backend": os.environ.get("WORLDLINE_TRACE_BACKEND", "auto").strip() or "auto",
        "emit": os.environ.get("WORLDLINE_TRACE_EMIT", "episodes").strip() or "episodes",
        "max_events": _env_int("WORLDLINE_TRACE_MAX_EVENTS", 100000),
        "max_lines_per_call": _env_int("WORLDLINE_TRACE_MAX_LINES_PER_CALL", 10000),
        "step_in": float(os.environ.get("WORLDLINE_TRACE_STEP_IN", "0.5") or 0.5),
        "seed": os.environ.get("WORLDLINE_TRACE_SEED", "0"),
        "max_depth": int(max_depth) if max_depth else None,
        "max_step_depth": _env_int("WORLDLINE_TRACE_MAX_STEP_DEPTH", 2),
        "max_frames": _env_int("WORLDLINE_TRACE_MAX_FRAMES", 10000),
        "max_test_episodes": _env_int("WORLDLINE_TRACE_MAX_TEST_EPISODES", 1000),
        "max_test_bytes": _env_int("WORLDLINE_TRACE_MAX_TEST_BYTES", 8 << 20),
        "max_unit_episodes": _env_int("WORLDLINE_TRACE_MAX_UNIT_EPISODES", 50000),
        "max_unit_bytes": _env_int("WORLDLINE_TRACE_MAX_UNIT_BYTES", 256 << 20),
        "repr_safety_s": float(os.environ.get("WORLDLINE_TRACE_REPR_SAFETY_S", "").strip()
                               or _SER_DEFAULTS["repr_safety_s"]),
    }


def pytest_configure(config):
    path = os.environ.get("WORLDLINE_TRACE_OUT")
    if not path or _state["fd"] is not None:
        return
    _state["fd"] = _open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    _state["opts"] = opts = _options()
    _state["caps"] = OutputCaps(opts["seed"], opts["max_test_episodes"], opts["max_test_bytes"],
                                opts["max_unit_episodes"], opts["max_unit_bytes"])
    root = os.environ.get("WORLDLINE_TRACE_ROOT") or os.getcwd()
    include_tests = os.environ.get("WORLDLINE_TRACE_INCLUDE_TESTS", "1").strip() not in ("0", "false", "no")
    _state["scope"] = make_scope(root, include_tests=include_tests)
    _seed_hypothesis()
    _huge_arenas()
    _state["sources"] = SourceIndex()
    _state["batch"] = new_batch()
    budgets = os.environ.get("WORLDLINE_TRACE_BUDGETS", "").strip()
    if budgets:
        with _read_file(budgets) as f:
            _state["budgets"] = _load(f)


def pytest_collection_finish(session):
    # the unit's caps are shared out over the tests still to run (caps.py)
    if _state["caps"] is not None:
        _state["caps"].tests = len(session.items)


def _seed_hypothesis():
    """Property-based tests draw the same examples on every run: a settings profile with
    ``derandomize`` (examples from a hash of the test), no example database (a rerun would replay
    what an earlier run found) and no deadline (the tracer's slowdown must not fail a test). Only
    when hypothesis is installed (then imported at start-up even if the suite never uses it)."""
    try:
        # A suite's conftest may have put a stub there (no __spec__: find_spec raises).
        if importlib.util.find_spec("hypothesis") is None:
            return
        from hypothesis import HealthCheck, settings

        settings.register_profile("worldline", derandomize=True, database=None, deadline=None,
                                  suppress_health_check=list(HealthCheck))
        settings.load_profile("worldline")
    except Exception as e:  # an old or broken hypothesis: its tests stay as random as they were
        sys.stderr.write("worldline_tracer: hypothesis left unseeded: %s\n" % (e,))


def _huge_arenas():
    """pymalloc's arenas from transparent huge pages, the empty ones kept for the next test: the
    records and frame texts a traced test makes are its pymalloc memory, and each fresh 4 KiB page
    of it was a page fault (h11 on 3.13: 20k of them, about a quarter of its time in tests). Only
    where the accelerator has it (64-bit, not free-threaded) and WORLDLINE_TRACE_ARENAS_KEPT_MB is
    not "off"; the traced code's own objects share the arenas, as they shared pymalloc's."""
    kept = os.environ.get("WORLDLINE_TRACE_ARENAS_KEPT_MB", "").strip()
    if kept == "off" or native.mod is None or not hasattr(native.mod, "huge_arenas"):
        return
    if kept and not kept.isdigit():
        raise pytest.UsageError("WORLDLINE_TRACE_ARENAS_KEPT_MB must be a whole number of MiB or off, not %r" % kept)
    native.mod.huge_arenas((int(kept) if kept else _ARENAS_KEPT_MB) << 20)


def pytest_unconfigure(config):
    fd = _state["fd"]
    if fd is not None:
        _state["fd"] = None
        _close(fd)


def _record(item):
    rec = item.__dict__.get(_KEY)
    if rec is None:
        # "records": the tracers' compact records (tracer.py), turned into event dicts only when
        # the line emits events: episodes are cut from the records themselves
        rec = {"records": [], "truncated": False, "error": None, "phases": [], "backend": None, "slow_reprs": []}
        item.__dict__[_KEY] = rec
    return rec


class _Watchdog:
    """Stops the budgeted call of a test from a SIGALRM tick on the main thread: when its seconds are
    spent, or when its trace hit the cap and it is known to loop (tracing on would only burn time)."""

    def __init__(self, budget, rec, tracer):
        self.seconds = float(budget.get("seconds", 0)) or None
        self.stop_at_cap = bool(budget.get("stop_at_cap"))
        self.rec = rec
        self.tracer = tracer
        self.started = _monotonic()
        self.previous = None

    def __enter__(self):
        try:
            self.previous = _signal(signal.SIGALRM, self._tick)
            _setitimer(signal.ITIMER_REAL, _TICK_S, _TICK_S)
        except (ValueError, OSError, AttributeError):  # not the main thread: the outer timeout bounds it
            self.previous = None
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            _setitimer(signal.ITIMER_REAL, 0, 0)
            _signal(signal.SIGALRM, self.previous)
        return False

    def _tick(self, signum, frame):
        # Never raise inside the tracer's own callbacks: wait for the next tick.
        if frame is not None and frame.f_code.co_filename.startswith(_HERE):
            return
        why = None
        if self.stop_at_cap and self.tracer is not None and self.tracer.saturated():
            why = "trace cap reached by a test known to time out"
        elif self.seconds is not None and _monotonic() - self.started > self.seconds:
            why = "over its budget of %.1f s" % self.seconds
        if why is None:
            return
        _setitimer(signal.ITIMER_REAL, 0, 0)
        self.rec["timed_out_under_trace"] = True
        self.rec["stopped"] = why
        raise TracedTestStopped("stopped under trace: " + why)


def _traced(item, phase):
    """Run one phase under the tracer (a generator used by the hookwrappers)."""
    opts = _state["opts"]
    if _state["fd"] is None or phase not in opts["phases"]:
        yield
        return
    rec = None
    tracer = None
    try:
        rec = _record(item)
        if not rec["truncated"]:
            budget = opts["max_events"] - len(rec["records"])
            tracer = Tracer(scope=_state["scope"], backend=opts["backend"], max_events=max(budget, 1),
                            max_lines_per_call=opts["max_lines_per_call"], sources=_state["sources"],
                            serializer=Serializer(repr_safety_s=opts["repr_safety_s"]))
            tracer.start()
    except Exception as e:  # the tracer could not start: the test runs untraced
        tracer = None
        if rec is not None and rec["error"] is None:
            rec["error"] = "start: %s: %s" % (type(e).__name__, e)
    budget = _state["budgets"].get(item.nodeid) if phase == "call" and rec is not None else None
    started = _monotonic()
    try:
        with _SparseCollection(tracer is not None):
            if budget is None:
                yield
            else:
                with _Watchdog(budget, rec, tracer):
                    yield
    finally:
        if rec is not None and phase == "call":
            rec["seconds"] = round(_monotonic() - started, 4)
        if tracer is not None:
            try:
                tracer.stop()
            except Exception as e:
                tracer.error = tracer.error or "stop: %s: %s" % (type(e).__name__, e)
            try:
                rec["phases"].append(phase)
                rec["backend"] = tracer.backend
                rec["records"].extend(tracer._raw)
                rec["truncated"] = rec["truncated"] or tracer.truncated
                rec["slow_reprs"].extend(getattr(tracer.ser, "slow_classes", ()))
                if tracer.error and rec["error"] is None:
                    rec["error"] = tracer.error
            except Exception:
                pass


class _SparseCollection(object):
    """The cyclic collector's youngest generation made _GC_SCALE times larger while a phase is
    traced: the tracer keeps every record (tuples and lists) until its test's line is written, so
    they survive each young collection, are promoted, and set off full collections that walk the
    whole heap again (toolz: 3 of them, 0.12 s CPU of its 1.7 s in tests). Cycles are still
    collected, a few thousand allocations later; a threshold the traced code set itself is kept."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.saved = _gc_get_threshold()
        self.ours = None
        if self.on and self.saved[0]:
            self.ours = (self.saved[0] * _GC_SCALE,) + self.saved[1:]
            _gc_set_threshold(*self.ours)
        return self

    def __exit__(self, *exc):
        if self.ours is not None and _gc_get_threshold() == self.ours:
            _gc_set_threshold(*self.saved)
        return False


class _NoCollection(object):
    """The cyclic garbage collector off while the tracer does its own work after a phase: turning
    its records into events, building and writing episodes. The traced code is not running; the
    work makes hundreds of thousands of strings, tuples and dicts and almost no garbage cycles,
    and the collections those allocations set off each walk the whole heap (~40% of building
    toolz's episodes). What it leaves is found by the next automatic collection."""

    def __enter__(self):
        self.was = _gc_isenabled()
        _gc_disable()
        return self

    def __exit__(self, *exc):
        if self.was:
            _gc_enable()
        return False


def _write(item):
    with _NoCollection():
        _write_line(item)


def _write_line(item):
    if _state["fd"] is None:
        return
    try:
        rec = item.__dict__.pop(_KEY, None) or {"records": [], "truncated": False, "error": None,
                                                 "phases": [], "backend": None}
        opts = _state["opts"]
        records = rec["records"]
        out = {
            "nodeid": item.nodeid,
            "phases": rec["phases"],
            "backend": rec["backend"],
            "python": _PYTHON,
            "tracer_version": __version__,
            "truncated": rec["truncated"],
            "error": rec["error"],
            "seconds": rec.get("seconds"),
            "timed_out_under_trace": bool(rec.get("timed_out_under_trace")),
            "stopped": rec.get("stopped"),
            "event_count": len(records),
            "line_events": sum(1 for r in records if r[0] == "line"),
            "slow_reprs": sorted(set(rec.get("slow_reprs", ()))),
        }
        if opts["emit"] in ("events", "both"):
            out["events"] = [_as_dict(r) for r in records]
        episodes = None
        if opts["emit"] in ("episodes", "both"):
            try:
                builder = EpisodeBuilder(step_in=opts["step_in"], max_depth=opts["max_depth"],
                                         max_step_depth=opts["max_step_depth"],
                                         seed="%s|%s" % (opts["seed"], item.nodeid),
                                         max_frames=opts["max_frames"], sources=_state["sources"])
                episodes = builder.encode_records(records, into=_state["batch"])
                chosen, kept = _state["caps"].choose(item.nodeid, episodes.sizes())
                if chosen is not None:
                    episodes.keep(chosen)
                out.update(kept)
                out["episodes_dropped"] = builder.dropped
            except Exception as e:
                episodes = Texts([])
                out["error"] = out["error"] or "episodes: %s: %s" % (type(e).__name__, e)
            out["episodes"] = _SLOT
        line = _dumps(out, sort_keys=True) + "\n"
        if episodes is None:
            parts = [line.encode("utf-8", "replace")]
        else:
            # the episodes are JSON already (ASCII): put them in their key's place ("backend" sorts
            # before "episodes", and its value is a backend name or null, so the first match is
            # the slot), written around the rest of the line without copying the line again
            head, tail = line.split('"%s"' % _SLOT, 1)
            parts = [(head + "[").encode("utf-8", "replace"), episodes.body(),
                     ("]" + tail).encode("utf-8", "replace")]
        _write_all(_state["fd"], parts)
    except Exception as e:
        try:
            sys.stderr.write("worldline_tracer: could not write the trace of %s: %s\n" % (item.nodeid, e))
        except Exception:
            pass


def _write_all(fd, parts):
    """One writev of the line's parts (one append, as one write was), and the rest if it fell short."""
    done = _writev(fd, parts)
    rest = b"".join(parts)[done:] if done < sum(map(len, parts)) else b""
    while rest:
        written = _write(fd, rest)
        if written <= 0:
            raise OSError("the trace file took no bytes")
        rest = rest[written:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    if _state["fd"] is not None:
        _seed("%s|%s" % (_state["opts"]["seed"], item.nodeid))
    for _ in _traced(item, "setup"):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    for _ in _traced(item, "call"):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        for _ in _traced(item, "teardown"):
            yield
    finally:
        _write(item)
