"""Tries mutation candidates inside a repository container: for each, mutate one function in
/repo, run the tests that reach it with the reporting plugin, and restore the file.

Usage: python3 forage_mutations.py PLAN_JSON OUT_DIR   (stdlib + worldline_mutate only)
PLAN: {"pytest": [argv...], "timeout": seconds, "max_failing": N, "candidates": [{"file",
"qualname", "operator", "seed", "tests": [node ids], "timeout"?: seconds for this one}]}. It stops after N applied mutants made
pytest fail (the kept tasks can only be fewer, never more). Writes OUT_DIR/results.jsonl, one line per candidate, and
OUT_DIR/report-<i>.jsonl per run. The TypeScript side decides which mutants to keep.
"""
import difflib
import json
import os
import subprocess
import sys

from worldline_mutate.core import MutationError, mutate


def unified(a_text, b_text, path):
    a = a_text.splitlines(keepends=True)
    b = b_text.splitlines(keepends=True)
    lines = []
    for line in difflib.unified_diff(a, b, "a/" + path, "b/" + path):
        lines.append(line)
        if not line.endswith("\n"):
            lines.append("\n\\ No newline at end of file\n")
    return "".join(lines)


def main(plan_file, out_dir):
    with open(plan_file) as f:
        plan = json.load(f)
    results = open(os.path.join(out_dir, "results.jsonl"), "w")
    failing = 0
    for i, cand in enumerate(plan["candidates"]):
        if failing >= plan["max_failing"]:
            break
        path = os.path.join("/repo", cand["file"])
        with open(path, encoding="utf-8", newline="") as f:
            original = f.read()
        record = {"index": i}
        try:
            m = mutate(original, cand["qualname"], cand["operator"], cand["seed"], filename=cand["file"])
        except MutationError as e:
            record.update(status="no_site", error=str(e))
        except Exception as e:  # a mutator bug must not end the whole plan
            record.update(status="error", error="%s: %s" % (type(e).__name__, e))
        else:
            report = os.path.join(out_dir, "report-%d.jsonl" % i)
            try:
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(m["source"])
                env = dict(os.environ, WORLDLINE_REPORT=report)
                try:
                    proc = subprocess.run(plan["pytest"] + cand["tests"], cwd="/repo", env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, timeout=cand.get("timeout", plan["timeout"]))
                    code, timed_out = proc.returncode, False
                except subprocess.TimeoutExpired:
                    code, timed_out = None, True
            finally:
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(original)
            record.update(status="applied", description=m["description"], changed_lines=m["changed_lines"],
                          bug_patch=unified(original, m["source"], cand["file"]),
                          fix_patch=unified(m["source"], original, cand["file"]),
                          exit_code=code, timed_out=timed_out, report="report-%d.jsonl" % i)
            if code != 0:
                failing += 1
        results.write(json.dumps(record, sort_keys=True) + "\n")
        results.flush()
    results.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
