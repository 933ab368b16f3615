"""Per-test outcomes for Worldline, written by pytest hooks, never parsed from log output.

Loaded with `-p worldline_report`; writes JSON Lines to the file named by WORLDLINE_REPORT
(outside /repo). Each line is flushed as it is written so a run killed by a timeout still
leaves the outcomes of the tests that finished. Standard library only; Python 3.8+.
"""
import json
import os

_fd = None


def _emit(record):
    if _fd is None:
        return
    data = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8", "replace")
    os.write(_fd, data)


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


def pytest_configure(config):
    global _fd
    path = os.environ.get("WORLDLINE_REPORT")
    if path and _fd is None:
        _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _emit({"event": "start"})


def pytest_collectreport(report):
    if report.failed:
        _emit({"event": "collect_error", "nodeid": report.nodeid, "message": _message(report)})


def pytest_collection_finish(session):
    _emit({"event": "collected", "nodeids": [item.nodeid for item in session.items]})


def pytest_runtest_logreport(report):
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


def pytest_sessionfinish(session, exitstatus):
    _emit({"event": "finish", "exitstatus": int(exitstatus)})


def pytest_unconfigure(config):
    global _fd
    if _fd is not None:
        os.close(_fd)
        _fd = None
