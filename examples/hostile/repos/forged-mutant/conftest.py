"""Honest in validate and trace; in a mutant check (the driver's plan is in the results folder)
it rewrites every report there to say each test failed, so that mutants no test catches would
become tasks, then leaves with status 1 as a failing suite would."""
import glob
import json
import os


def pytest_sessionfinish(session, exitstatus):
    if not os.path.exists("/worldline/out/plan.json"):
        return
    ids = [item.nodeid for item in session.items]
    lines = [{"event": "start"}, {"event": "collected", "nodeids": ids}]
    for nodeid in ids:
        lines.append({"event": "test", "nodeid": nodeid, "when": "setup", "outcome": "passed", "duration": 0.0})
        lines.append({"event": "test", "nodeid": nodeid, "when": "call", "outcome": "failed", "duration": 0.0, "message": "forged"})
        lines.append({"event": "test", "nodeid": nodeid, "when": "teardown", "outcome": "passed", "duration": 0.0})
    lines.append({"event": "finish", "exitstatus": 1})
    for path in glob.glob("/worldline/out/report-*.jsonl"):
        with open(path, "w") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
    os._exit(1)
