"""Runs a test suite under several tracer variants, interleaved over rounds, inside one container,
and prints as JSON the wall times of whole pytest runs ("times") and of the tests alone
("in_test", from bench_timer). A variant past BUDGET seconds is stopped and not run again: its
time is then a lower bound ("capped"), since the naive tracer can take hours where ours takes
seconds. Usage: python3 driver.py ROUNDS BUDGET [pytest args...]"""
import json
import os
import subprocess
import sys
import time

VARIANTS = {
    "untraced": ([], {}),
    "ours": (["-p", "worldline_tracer.plugin"], {"WORLDLINE_TRACE_OUT": "/tmp/ours.jsonl", "WORLDLINE_TRACE_ROOT": "/repo", "WORLDLINE_TRACE_MAX_EVENTS": "2000000"}),
    "ours-settrace": (["-p", "worldline_tracer.plugin"], {"WORLDLINE_TRACE_OUT": "/tmp/ours.jsonl", "WORLDLINE_TRACE_ROOT": "/repo", "WORLDLINE_TRACE_MAX_EVENTS": "2000000", "WORLDLINE_TRACE_BACKEND": "settrace"}),
    "naive": (["-p", "naive_tracer"], {}),
}


def main():
    rounds = int(sys.argv[1])
    budget = float(sys.argv[2])
    extra = sys.argv[3:]
    times = {name: [] for name in VARIANTS}
    in_test = {name: [] for name in VARIANTS}
    codes = {}
    capped = {}
    for _ in range(rounds):
        for name, (plugins, env) in VARIANTS.items():
            if name in capped:
                continue
            for stale in ("/tmp/ours.jsonl", "/tmp/in_test"):
                if os.path.exists(stale):
                    os.remove(stale)
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:timeout", "-p", "bench_timer"] + plugins + extra
            start = time.perf_counter()
            try:
                proc = subprocess.run(cmd, cwd="/repo", env=dict(os.environ, BENCH_TIMER_OUT="/tmp/in_test", **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=budget)
            except subprocess.TimeoutExpired:
                capped[name] = True
                times[name] = [budget]
                in_test[name] = [budget]
                continue
            times[name].append(time.perf_counter() - start)
            with open("/tmp/in_test") as f:
                in_test[name].append(float(f.read()))
            codes.setdefault(name, proc.returncode)
    json.dump({"times": times, "in_test": in_test, "exit_codes": codes, "capped": capped, "python": sys.version.split()[0]}, sys.stdout)


main()
