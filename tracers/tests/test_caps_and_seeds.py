"""Episodes as JSON (the same bytes as json.dumps of the dicts), output caps with seeded
sampling, and seeded ``random`` / hypothesis under the plugin."""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import PROGRAM_CALLS as PROGRAMS, TRACERS, load_program, run_traced

from worldline_tracer import HAS_MONITORING
from worldline_tracer.caps import OutputCaps
from worldline_tracer.episodes import EpisodeBuilder


@pytest.mark.parametrize("step_in", [0.0, 0.5, 1.0])
def test_encode_is_the_json_of_build(step_in):
    total = 0
    for module, call in PROGRAMS:
        p = load_program(module)
        events = run_traced(lambda: call(p), "monitoring" if HAS_MONITORING else "settrace")[2].events
        for seed in range(3):
            built = EpisodeBuilder(step_in=step_in, seed=seed)
            encoded = EpisodeBuilder(step_in=step_in, seed=seed)
            dicts = built.build(events)
            texts = encoded.encode(events)
            assert [json.dumps(d, sort_keys=True) for d in dicts] == texts
            assert built.dropped == encoded.dropped
            total += len(texts)
    assert total >= 45


def _episodes(n, size):
    return ['{"n": %d, "pad": "%s"}' % (i, "x" * size) for i in range(n)]


def test_caps_sample_reproducibly_and_bound_tests_and_units():
    eps = _episodes(50, 100)
    a, rec_a = OutputCaps("s", test_episodes=10).keep("t::a", eps)
    b, _ = OutputCaps("s", test_episodes=10).keep("t::a", eps)
    c, _ = OutputCaps("s", test_episodes=10).keep("t::b", eps)
    assert a == b and len(a) == 10 and a != c
    assert [eps.index(e) for e in a] == sorted(eps.index(e) for e in a)  # trace order kept
    assert rec_a == {"episodes_built": 50, "episode_bytes": sum(map(len, a)), "sampled": "test_cap"}
    small, rec = OutputCaps("s", test_episodes=10).keep("t::a", eps[:5])
    assert small == eps[:5] and rec["sampled"] is None
    by_bytes, rec = OutputCaps("s", test_bytes=1000).keep("t::a", eps)
    assert rec["episode_bytes"] <= 1000 and len(by_bytes) == 1000 // len(eps[0]) and rec["sampled"] == "test_cap"
    unit = OutputCaps("s", test_episodes=30, unit_episodes=40)
    first, r1 = unit.keep("t::1", eps)
    second, r2 = unit.keep("t::2", eps)
    third, r3 = unit.keep("t::3", eps)
    assert (len(first), len(second), len(third)) == (30, 10, 0)
    assert (r1["sampled"], r2["sampled"], r3["sampled"]) == ("test_cap", "unit_cap", "unit_cap")


def test_unit_caps_are_shared_so_every_test_keeps_an_episode():
    eps = _episodes(50, 100)
    # 40 episodes for 10 tests: the first two no longer take it all
    unit = OutputCaps("s", test_episodes=30, unit_episodes=40, tests=10)
    kept = [unit.keep("t::%d" % i, eps if i < 2 else eps[:3]) for i in range(10)]
    counts = [len(k) for k, _ in kept]
    assert min(counts) >= 1 and sum(counts) <= 40 and counts[0] == 4
    assert kept[0][1]["sampled"] == "unit_cap"
    # what a small test leaves flows on: 2 tests, the first makes 1 episode, the second may use 39
    flow = OutputCaps("s", unit_episodes=40, tests=2)
    assert len(flow.keep("t::a", eps[:1])[0]) == 1 and len(flow.keep("t::b", eps)[0]) == 39
    # a byte share smaller than any episode still keeps one, within what the unit has left
    same = eps[10:]  # all of one size
    by_bytes = OutputCaps("s", unit_bytes=len(same[0]) * 3, tests=5)
    counts = [len(by_bytes.keep("t::%d" % i, same)[0]) for i in range(5)]
    assert counts == [1, 1, 1, 0, 0] and by_bytes.unit_bytes_left == 0
    # the same cut on a rerun
    again = OutputCaps("s", test_episodes=30, unit_episodes=40, tests=10)
    assert [again.keep("t::%d" % i, eps if i < 2 else eps[:3]) for i in range(10)] == kept


SUITE = {
    "lib.py": '''
        import random

        def step(i):
            j = i * 2
            return j + 1

        def many(n):
            return [step(i) for i in range(n)]

        def draw(k):
            picked = random.random()
            return round(picked * k, 6)
    ''',
    "test_lib.py": '''
        import lib

        def test_many():
            assert len(lib.many(60)) == 60

        def test_draw():
            assert 0 <= lib.draw(10) <= 10

        def test_few():
            assert lib.step(1) == 3
    ''',
}

HYPOTHESIS_SUITE = {
    "props.py": '''
        def clamp(x, lo, hi):
            if x < lo:
                return lo
            if x > hi:
                return hi
            return x
    ''',
    "test_props.py": '''
        from hypothesis import given, strategies as st
        import props

        @given(st.integers(), st.integers(min_value=-5, max_value=0), st.integers(min_value=1, max_value=5))
        def test_clamp(x, lo, hi):
            assert lo <= props.clamp(x, lo, hi) <= hi
    ''',
}


def _trace_suite(root, suite, out, **env_extra):
    root.mkdir()
    for name, text in suite.items():
        (root / name).write_text(textwrap.dedent(text).lstrip())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([TRACERS] + [p for p in sys.path if p])
    env["PYTHONHASHSEED"] = "0"
    env["WORLDLINE_TRACE_OUT"] = str(out)
    env["WORLDLINE_TRACE_ROOT"] = str(root)
    env.update(env_extra)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                           "worldline_tracer.plugin"], cwd=str(root), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=300)
    assert proc.returncode == 0, proc.stdout.decode("utf-8", "replace")
    with open(str(out)) as f:
        return {rec["nodeid"]: rec for rec in map(json.loads, f)}


def test_plugin_samples_over_its_caps_reproducibly_and_seeds_random(tmp_path):
    caps = {"WORLDLINE_TRACE_MAX_TEST_EPISODES": "12"}
    a = _trace_suite(tmp_path / "a", SUITE, tmp_path / "a.jsonl", **caps)
    b = _trace_suite(tmp_path / "b", SUITE, tmp_path / "b.jsonl", **caps)
    c = _trace_suite(tmp_path / "c", SUITE, tmp_path / "c.jsonl", WORLDLINE_TRACE_SEED="1", **caps)
    many = a["test_lib.py::test_many"]
    assert many["sampled"] == "test_cap" and many["episodes_built"] > 12 and len(many["episodes"]) == 12
    assert many["episode_bytes"] == sum(len(json.dumps(ep, sort_keys=True)) for ep in many["episodes"])
    assert a["test_lib.py::test_few"]["sampled"] is None
    texts = lambda recs, root: {k: [ep["text"].replace(str(root), "@") for ep in r["episodes"]] for k, r in recs.items()}
    assert texts(a, tmp_path / "a") == texts(b, tmp_path / "b")
    # random is seeded per test from the unit's seed: the same draw in a and b, another with seed 1
    value = lambda recs: [ep["frames"][-1]["value"] for ep in recs["test_lib.py::test_draw"]["episodes"]
                          if ep["function"] == "draw"]
    assert value(a) == value(b) and value(a) != value(c) and value(a)
    # the unit's 4 episodes are shared over the 3 tests: the first (test_many) no longer takes them all
    unit = _trace_suite(tmp_path / "u", SUITE, tmp_path / "u.jsonl", WORLDLINE_TRACE_MAX_UNIT_EPISODES="4")
    assert sum(len(r["episodes"]) for r in unit.values()) <= 4
    assert all(r["episodes"] for r in unit.values())
    assert unit["test_lib.py::test_many"]["sampled"] == "unit_cap"


@pytest.mark.skipif(importlib.util.find_spec("hypothesis") is None, reason="hypothesis is not installed")
def test_property_based_suite_traces_identically_twice(tmp_path):
    runs = [_trace_suite(tmp_path / name, HYPOTHESIS_SUITE, tmp_path / (name + ".jsonl"))
            for name in ("a", "b")]
    texts = [[ep["text"] for ep in r["test_props.py::test_clamp"]["episodes"]] for r in runs]
    assert len(texts[0]) > 10
    assert texts[0] == texts[1]
