"""Per-test outcomes for Worldline, written by pytest hooks, never parsed from log output.

Loaded with `-p worldline_report`; writes JSON Lines to the file named by WORLDLINE_REPORT
(outside /repo). Each line is flushed as it is written so a run killed by a timeout still
leaves the outcomes of the tests that finished. Standard library only; Python 3.8+.

When grading, the code under test is untrusted and runs in this very process, so it could
overwrite the report. The grader then hands us a key on an inherited file descriptor
(WORLDLINE_REPORT_KEY_FD), never in the environment or a file: we read it at import, before
any conftest or repository code runs, close the descriptor, and sign every line
(`<hmac-sha256 hex> <json>`, with a sequence number) so that a rewritten, reordered, cut or
injected line is detected (pipeline/sandbox/pytest_report.ts).

With WORLDLINE_PROGRESS_FD, each test's start and end also go, signed the same way, down that
pipe to the runner (worldline_runs.py), whose watchdog kills a test that runs past its limit
whatever the test does with signals.
"""
import hashlib
import hmac
import json
import os


def _read_key():
    fd = os.environ.pop("WORLDLINE_REPORT_KEY_FD", None)
    if fd is None:
        return None
    fd = int(fd)
    chunks = []
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).strip()


def _emitter(key):
    state = {"fd": None, "seq": 0}

    def emit(record):
        if state["fd"] is None:
            return
        body = json.dumps(record, sort_keys=True)
        if key is not None:
            body = json.dumps(dict(record, seq=state["seq"]), sort_keys=True)
            state["seq"] += 1
            body = hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest() + " " + body
        os.write(state["fd"], (body + "\n").encode("utf-8", "replace"))

    return emit, state


# Hooks take these as default arguments (which pluggy does not pass), so code under test that
# reassigns module attributes cannot reroute what the hooks write.
_key = _read_key()
_emit, _state = _emitter(_key)
_progress, _progress_state = _emitter(_key)


def _progress_fd():
    fd = os.environ.pop("WORLDLINE_PROGRESS_FD", None)
    if fd is None:
        return None
    fd = int(fd)
    # The tests' own subprocesses get no copy to hold open.
    os.set_inheritable(fd, False)
    return fd


_progress_state["fd"] = _progress_fd()
del _key


def _message(report):
    """First line of a failure, enough to say why without the whole traceback."""
    if report.passed:
        return None
    longrepr = getattr(report, "longrepr", None)
    if longrepr is None:
        return None
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # skip: (path, line, reason)
        return str(longrepr[2])[:500]
    crash = getattr(getattr(longrepr, "reprcrash", None), "message", None)
    text = crash if crash else str(longrepr)
    return text.strip().splitlines()[0][:500] if text.strip() else None


def pytest_configure(config, _emit=_emit, _state=_state):
    path = os.environ.pop("WORLDLINE_REPORT", None)
    if path and _state["fd"] is None:
        _state["fd"] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _emit({"event": "start"})


def pytest_collectreport(report, _emit=_emit):
    if report.failed:
        _emit({"event": "collect_error", "nodeid": report.nodeid, "message": _message(report)})


def pytest_collection_finish(session, _emit=_emit):
    _emit({"event": "collected", "nodeids": [item.nodeid for item in session.items]})


def pytest_runtest_logstart(nodeid, location, _progress=_progress):
    _progress({"event": "start", "nodeid": nodeid})


def pytest_runtest_logfinish(nodeid, location, _progress=_progress):
    _progress({"event": "end", "nodeid": nodeid})


def pytest_runtest_logreport(report, _emit=_emit):
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
        os.close(_state["fd"])
        _state["fd"] = None
