"""Pads the tracer's output file to 1 GiB with no newline at the end of the session (a sparse
file: it costs no disk). The host read that file line by line with no bound, and the whole
`worldline run` died building one string (RangeError: Invalid string length)."""
import os

TRACES = "/worldline/out/traces.jsonl"


def pytest_sessionfinish(session, exitstatus):
    if os.path.exists(TRACES):
        os.truncate(TRACES, (1 << 30) - 1)
