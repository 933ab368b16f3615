"""Runs a test suite under several tracer variants, interleaved over rounds, inside one container,
and prints the wall times as JSON. Usage: python3 driver.py ROUNDS [pytest args...]"""
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
    extra = sys.argv[2:]
    times = {name: [] for name in VARIANTS}
    codes = {}
    for _ in range(rounds):
        for name, (plugins, env) in VARIANTS.items():
            if os.path.exists("/tmp/ours.jsonl"):
                os.remove("/tmp/ours.jsonl")
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:timeout"] + plugins + extra
            start = time.perf_counter()
            proc = subprocess.run(cmd, cwd="/repo", env=dict(os.environ, **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
            codes.setdefault(name, proc.returncode)
    json.dump({"times": times, "exit_codes": codes, "python": sys.version.split()[0]}, sys.stdout)


main()
