"""Rewrites the reporting plugin's file at the end of the session to say the failing test
passed, then leaves with status 0 before pytest can say otherwise."""
import glob
import json
import os

FORGED = [
    {"event": "start"},
    {"event": "collected", "nodeids": ["tests/test_forged.py::test_fails"]},
    {"event": "test", "nodeid": "tests/test_forged.py::test_fails", "when": "setup", "outcome": "passed", "duration": 0.0},
    {"event": "test", "nodeid": "tests/test_forged.py::test_fails", "when": "call", "outcome": "passed", "duration": 0.0},
    {"event": "test", "nodeid": "tests/test_forged.py::test_fails", "when": "teardown", "outcome": "passed", "duration": 0.0},
    {"event": "finish", "exitstatus": 0},
]


def pytest_sessionfinish(session, exitstatus):
    for path in glob.glob("/worldline/out/report-*.jsonl"):
        with open(path, "w") as f:
            f.write("".join(json.dumps(line) + "\n" for line in FORGED))
    os._exit(0)
