"""Per-test outcomes for Worldline, written by pytest hooks, never parsed from log output.

Loaded with `-p worldline_report`; writes JSON Lines to the file named by WORLDLINE_REPORT
(outside /repo). Each line is flushed as it is written so a run killed by a timeout still
leaves the outcomes of the tests that finished. Standard library only; Python 3.8+.

Under the runner (worldline_runs.py) the lines go instead, unsigned, down a pipe on an inherited
descriptor (WORLDLINE_REPORT_FD, dropped from the environment and made non-inheritable at
import, before any conftest or repository code runs). The runner, a separate non-dumpable
process the tests cannot read, checks the stream (no phase reported twice, nothing after the
session finished, no malformed line), numbers and signs each line with a key only it holds, and
writes the report (pipeline/sandbox/pytest_report.ts verifies it). So this process never holds
the key: code under test can still lie about its own outcomes through this pipe, but it cannot
forge, reorder or cut the report file. Each test's start and end go down the same pipe for the
runner's watchdog, which kills a test that runs past its limit whatever it does with signals.

Invisible to the suite: PYTEST_DONT_REWRITE (pytest neither rewrites this module nor warns that
it was imported before assertion rewriting was set up), and every function the hooks call is
bound here, at import, so a test that mocks `os.write` (filelock's return 0), `json.dumps` or
`builtins.open`, or a conftest that swaps `sys.modules` entries, changes nothing we do.
"""
import json
import os

_write = os.write
_read = os.read
_open = os.open
_close = os.close
_set_inheritable = os.set_inheritable
_environ_pop = os.environ.pop
_encode = json.JSONEncoder(sort_keys=True).encode


def _pipe_fd():
    fd = _environ_pop("WORLDLINE_REPORT_FD", None)
    if fd is None:
        return None
    fd = int(fd)
    # The tests' own subprocesses get no copy to write into.
    _set_inheritable(fd, False)
    return fd


def _emitter():
    fd = _pipe_fd()
    state = {"fd": fd, "runner": fd is not None}

    def emit(record):
        if state["fd"] is None:
            return
        data = (_encode(record) + "\n").encode("utf-8", "replace")
        # A signal can cut a write to a pipe short; the runner must get whole lines.
        while data:
            written = _write(state["fd"], data)
            if written <= 0:
                raise OSError("the report pipe took no bytes")
            data = data[written:]

    return emit, state


# Hooks take these as default arguments (which pluggy does not pass), so code under test that
# reassigns module attributes cannot reroute what the hooks write.
_emit, _state = _emitter()


def _message(report):
    """First line of a failure, enough to say why without the whole traceback: for an error
    without a crash line (a module that failed to import while collecting, whose text starts
    "ImportError while importing test module"), the exception pytest marks with "E   "."""
    if report.passed:
        return None
    longrepr = getattr(report, "longrepr", None)
    if longrepr is None:
        return None
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # skip: (path, line, reason)
        return str(longrepr[2])[:500]
    crash = getattr(getattr(longrepr, "reprcrash", None), "message", None)
    text = crash if crash else str(longrepr)
    lines = text.strip().splitlines()
    if not crash:
        marked = [line[1:].strip() for line in lines if line.startswith("E ") and line[1:].strip()]
        lines = marked[-1:] or lines
    return lines[0][:500] if lines else None


def _selection():
    """The node ids this run is limited to, when WORLDLINE_SELECT names a file of them (a line each):
    the tests that finished before a suite's time limit, which the stages after validate run again."""
    path = _environ_pop("WORLDLINE_SELECT", None)
    if path is None:
        return None
    fd = _open(path, os.O_RDONLY)
    chunks = []
    while True:
        chunk = _read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    _close(fd)
    return set(b"".join(chunks).decode("utf-8").split("\n")) - {""}


def pytest_configure(config, _emit=_emit, _state=_state):
    # Without the runner (the tracer's own tests), straight to the file named.
    path = _environ_pop("WORLDLINE_REPORT", None)
    if path and _state["fd"] is None:
        _state["fd"] = _open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    _state["select"] = _selection()
    _emit({"event": "start"})


def pytest_collectreport(report, _emit=_emit):
    if report.failed:
        _emit({"event": "collect_error", "nodeid": report.nodeid, "message": _message(report)})


def pytest_collection_finish(session, _emit=_emit, _state=_state):
    select = _state.get("select")
    if select is not None:
        # After every plugin's own selection and ordering; pytest counts the tests it collected
        # from this same list once this hook returns.
        dropped = [item for item in session.items if item.nodeid not in select]
        if dropped:
            session.items[:] = [item for item in session.items if item.nodeid in select]
            session.config.hook.pytest_deselected(items=dropped)
    _emit({"event": "collected", "nodeids": [item.nodeid for item in session.items]})


# Progress is for the runner's watchdog only: it never reaches the report.
def pytest_runtest_logstart(nodeid, location, _emit=_emit, _state=_state):
    if _state["runner"]:
        _emit({"progress": "start", "nodeid": nodeid})


def pytest_runtest_logfinish(nodeid, location, _emit=_emit, _state=_state):
    if _state["runner"]:
        _emit({"progress": "end", "nodeid": nodeid})


def _is_subtest(report):
    # pytest 9's SubtestReport and pytest-subtests' SubTestReport: one per subtest (the subtests
    # fixture, unittest's subTest), each with when="call", beside the test's own call report.
    return type(report).__name__ in ("SubtestReport", "SubTestReport")


def pytest_runtest_logreport(report, _emit=_emit):
    if _is_subtest(report):
        # Part of its test: a failing one fails it. Not a phase, so never "reported twice".
        record = {"event": "subtest", "nodeid": report.nodeid, "outcome": report.outcome}
        message = _message(report)
        if message:
            record["message"] = message
        _emit(record)
        return
    if report.outcome not in ("passed", "failed", "skipped"):
        # An attempt that does not count: pytest-rerunfailures' "rerun" (the test runs again from
        # its setup), pytest-retry's "retried" (its --retry-outcome; the call phase is reported
        # again). pytest itself knows only the three outcomes.
        _emit({"event": "rerun", "nodeid": report.nodeid, "when": report.when})
        return
    record = {
        "event": "test",
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "duration": round(float(report.duration), 6),
    }
    if hasattr(report, "wasxfail"):
        record["wasxfail"] = True
    message = _message(report)
    if message:
        record["message"] = message
    _emit(record)


def pytest_sessionfinish(session, exitstatus, _emit=_emit):
    _emit({"event": "finish", "exitstatus": int(exitstatus)})


def pytest_unconfigure(config, _state=_state):
    if _state["fd"] is not None:
        _close(_state["fd"])
        _state["fd"] = None
