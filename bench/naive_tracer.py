"""The naive tracer the benchmark compares against, the way PySnooper works: sys.settrace on every
file, and on every event every local repr'd with the builtin repr and written out. A pytest
plugin (-p naive_tracer) tracing each test's call phase into /tmp/naive-trace.txt (one line per
event, appended), stopping a test at NAIVE_MAX_EVENTS events as ours stops at its event cap. Like
PySnooper, a repr that raises becomes a marker: unguarded, networkx's lazy views raise from
inside the trace function and the suite fails instead of being measured.

NAIVE_OUT names another file to write to: /dev/null where one test's lines outgrow the
container's 1 GiB /tmp (cpuwork and netwrap write several GB a test). That spares the naive
tracer the writes, never ours, so a ratio measured so understates ours. Events are counted here
(a file of /dev/null's has no size to read back); the session's count goes to
/tmp/naive-events.txt."""
import os
import sys

import pytest

OUT = os.environ.get("NAIVE_OUT", "/tmp/naive-trace.txt")
_out = None
_cap = int(os.environ.get("NAIVE_MAX_EVENTS", "0") or 0) or None
_left = [0]
_events = [0]


def _repr(value):
    try:
        return repr(value)
    except Exception:
        return "REPR FAILED"


def _trace(frame, event, arg):
    if _left[0] == 0:  # at the cap: frames already traced still call in, and stop here
        sys.settrace(None)
        return None
    _left[0] -= 1
    _out.write("%s:%d %s %r\n" % (frame.f_code.co_filename, frame.f_lineno, event, {k: _repr(v) for k, v in frame.f_locals.items()}))
    return _trace


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    global _out
    _out = open(OUT, "a")
    _left[0] = _cap or -1
    sys.settrace(_trace)
    try:
        yield
    finally:
        sys.settrace(None)
        _out.close()
        _events[0] += (_cap or -1) - _left[0]  # _left counts down from the cap, or from -1


def pytest_sessionfinish(session, exitstatus):
    with open("/tmp/naive-events.txt", "w") as f:
        f.write(str(_events[0]))
