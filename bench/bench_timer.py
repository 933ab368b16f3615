"""pytest plugin (-p bench_timer): the wall time spent running tests (setup, call and teardown
of every item, the tracer's per-test output included), without interpreter start-up and
collection, written to the file named by BENCH_TIMER_OUT at the end of the session."""
import os
import time

import pytest

_total = [0.0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.perf_counter()
    yield
    _total[0] += time.perf_counter() - start


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("BENCH_TIMER_OUT")
    if path:
        with open(path, "w") as f:
            f.write(repr(_total[0]))
