"""Runs a test suite under several tracer variants, interleaved over rounds, inside one container,
and prints as JSON the wall times of whole pytest runs ("times") and of the tests alone
("in_test", from bench_timer), with each variant's raw events and output bytes (from its last
round). Every tracer stops a test at the same event cap (EVENT_CAP), so they do equal work; ours
runs without output caps (the bytes are the episodes' own). A variant past BUDGET seconds is
stopped and not run again: its time is then a lower bound ("capped"), since the naive tracer can
take hours where ours takes seconds. "before" runs the tracer found in /worldline/baseline (a
checkout of an earlier revision), when it is mounted. Usage: python3 driver.py ROUNDS BUDGET
[pytest args...]"""
import json
import os
import subprocess
import sys
import time

EVENT_CAP = "2000000"
OURS = {"WORLDLINE_TRACE_OUT": "/tmp/ours.jsonl", "WORLDLINE_TRACE_ROOT": "/repo", "WORLDLINE_TRACE_MAX_EVENTS": EVENT_CAP,
        "WORLDLINE_TRACE_MAX_TEST_EPISODES": "0", "WORLDLINE_TRACE_MAX_TEST_BYTES": "0",
        "WORLDLINE_TRACE_MAX_UNIT_EPISODES": "0", "WORLDLINE_TRACE_MAX_UNIT_BYTES": "0"}
VARIANTS = {
    "untraced": ([], {}),
    "ours": (["-p", "worldline_tracer.plugin"], OURS),
    "ours-settrace": (["-p", "worldline_tracer.plugin"], dict(OURS, WORLDLINE_TRACE_BACKEND="settrace")),
    "naive": (["-p", "naive_tracer"], {"NAIVE_MAX_EVENTS": EVENT_CAP}),
}
BASELINE = "/worldline/baseline"
if os.path.isdir(BASELINE):
    VARIANTS["before"] = (["-p", "worldline_tracer.plugin"], OURS)


def output(name):
    """(raw events, bytes) a variant wrote in the round just run; bytes None where the naive
    tracer wrote to /dev/null."""
    if name == "naive":
        with open("/tmp/naive-events.txt") as f:
            events = int(f.read())
        path = os.environ.get("NAIVE_OUT", "/tmp/naive-trace.txt")
        return events, (os.path.getsize(path) if path != os.devnull else None)
    if name == "untraced":
        return 0, 0
    events = 0
    with open("/tmp/ours.jsonl", "rb") as f:
        for line in f:
            events += json.loads(line)["event_count"]
    return events, os.path.getsize("/tmp/ours.jsonl")


def main():
    rounds = int(sys.argv[1])
    budget = float(sys.argv[2])
    extra = sys.argv[3:]
    times = {name: [] for name in VARIANTS}
    in_test = {name: [] for name in VARIANTS}
    codes = {}
    capped = {}
    written = {}
    failed = {}
    for _ in range(rounds):
        for name, (plugins, env) in VARIANTS.items():
            if name in capped:
                continue
            for stale in ("/tmp/ours.jsonl", "/tmp/in_test", "/tmp/naive-trace.txt", "/tmp/naive-events.txt"):
                if os.path.exists(stale):
                    os.remove(stale)
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:timeout", "-p", "bench_timer"] + plugins + extra
            run_env = dict(os.environ, BENCH_TIMER_OUT="/tmp/in_test", **env)
            if name == "before":
                run_env["PYTHONPATH"] = run_env["PYTHONPATH"].replace("/worldline/lib", BASELINE)
            start = time.perf_counter()
            try:
                proc = subprocess.run(cmd, cwd="/repo", env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=budget)
            except subprocess.TimeoutExpired:
                capped[name] = True
                times[name] = [budget]
                in_test[name] = [budget]
                continue
            elapsed = time.perf_counter() - start
            try:
                with open("/tmp/in_test") as f:
                    in_test[name].append(float(f.read()))
            except (OSError, ValueError):
                # the run did not reach the end of its session: no sample, and why (one rare
                # failure must not lose the whole table)
                failed[name] = "exit %d: %s" % (proc.returncode, proc.stderr.decode("utf-8", "replace")[-300:])
                continue
            times[name].append(elapsed)
            codes.setdefault(name, proc.returncode)
            written[name] = output(name)
    json.dump({"times": times, "in_test": in_test, "exit_codes": codes, "capped": capped, "written": written,
               "failed": failed, "python": sys.version.split()[0]}, sys.stdout)


main()
