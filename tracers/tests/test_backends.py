"""On 3.12+, the sys.monitoring and settrace backends give identical event streams."""
import sys

import pytest
from conftest import load_program, run_traced

from worldline_tracer import HAS_MONITORING

# every test here runs on the pure Python path and with the C accelerator
pytestmark = [pytest.mark.skipif(not HAS_MONITORING, reason="sys.monitoring needs Python 3.12+"),
              pytest.mark.usefixtures("native_mode")]

CASES = {
    "cwm_main": ("cwm_example", lambda p: p.main()),
    "fact": ("samples", lambda p: p.fact(6)),
    "use_gen": ("samples", lambda p: p.use_gen()),
    "catch": ("samples", lambda p: p.catch()),
    "uncaught": ("samples", lambda p: p.uncaught()),
    "values": ("samples", lambda p: p.values()),
    "one_line_loop": ("samples", lambda p: p.one_line_loop(5)),
    "squares": ("samples", lambda p: p.squares(list(range(5)))),
    "gen_throw": ("samples", lambda p: p.gen_throw()),
    "run_coroutine": ("samples", lambda p: p.run_coroutine()),
    "with_thread": ("samples", lambda p: p.with_thread()),
    "use_point": ("samples", lambda p: p.use_point()),
    "deep_loop": ("samples", lambda p: p.deep_loop(50)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_identical_streams(name):
    module, call = CASES[name]
    p = load_program(module)
    r1, e1, t1 = run_traced(lambda: call(p), "settrace")
    r2, e2, t2 = run_traced(lambda: call(p), "monitoring")
    assert t1.error is None and t2.error is None
    assert len(t1.events) > 0
    assert t1.events == t2.events
    assert repr(r1) == repr(r2) and type(e1) is type(e2)


@pytest.mark.parametrize("cap", [7, 15])
def test_identical_when_truncated(cap):
    p = load_program("samples")
    t1 = run_traced(lambda: p.use_gen(), "settrace", max_events=cap)[2]
    t2 = run_traced(lambda: p.use_gen(), "monitoring", max_events=cap)[2]
    assert t1.truncated and t2.truncated and t1.events == t2.events
