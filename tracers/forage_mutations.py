"""Tries mutation candidates inside a repository container: for each, mutate one function in
/repo, run the tests that reach it with the reporting plugin, and restore the file and any other
file in /repo the tests changed (from the build's pristine checkout, recorded as `tree_restored`).

Usage: OUR_PYTHON forage_mutations.py PLAN_JSON OUT_DIR   (stdlib + worldline_mutate + worldline_runs only;
OUR_PYTHON: our own interpreter, isolated, as the sandbox starts validate's runner)
PLAN: {"pytest": [argv...], "timeout": seconds, "test_limit": seconds, "output_cap": bytes, "max_failing": N,
"candidates": [{"file", "qualname", "operator", "seed", "tests": [node ids], "timeout"?: seconds for this one}]}.
It stops after N applied mutants made pytest fail (the kept tasks can only be fewer, never more).

Like validate's runner (worldline_runs.py: its `boot`, whose run_once runs each mutant's tests), it
runs on our own interpreter, with none of the unit's variables, takes OUT_DIR/key and the plan off
the file system and makes itself non-dumpable before any repository code runs: each run's report is signed by run_once from the plugin's records, and OUT_DIR/results.jsonl, one line per
candidate, is signed here, so a conftest can forge neither which mutants failed nor the
patches. The TypeScript side checks both and decides which mutants to keep. The mutants' runs
fork from one zygote (worldline_zygote.py): pytest is imported once per container, /repo's
modules never before a run.
"""
import difflib
import hashlib
import json
import os
import shutil
import sys

# Isolated mode (-I) leaves our own folder off the path: only it, never the repository's site.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import worldline_runs  # noqa: E402
from worldline_mutate.core import MutationError, mutate  # noqa: E402


def unified(a_text, b_text, path):
    a = a_text.splitlines(keepends=True)
    b = b_text.splitlines(keepends=True)
    lines = []
    for line in difflib.unified_diff(a, b, "a/" + path, "b/" + path):
        lines.append(line)
        if not line.endswith("\n"):
            lines.append("\n\\ No newline at end of file\n")
    return "".join(lines)


PRISTINE = worldline_runs.PRISTINE


def tree_digest(root):
    """{path: sha256 of its content, or its link target} for every file and link under `root` but .git."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == root and ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                found[rel] = "link:" + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    found[rel] = hashlib.sha256(f.read()).hexdigest()
    return found


def restore_tree(expected):
    """Puts /repo back as the pristine checkout (`expected` is its digest): a mutant's tests may
    have edited, added or removed files the next candidate would start from. Returns what differed."""
    now = tree_digest("/repo")
    changed = sorted(p for p in set(now) | set(expected) if now.get(p) != expected.get(p))
    for rel in changed:
        dst = os.path.join("/repo", rel)
        if os.path.islink(dst) or os.path.isfile(dst):
            os.unlink(dst)
        elif os.path.isdir(dst):
            shutil.rmtree(dst)
        if rel in expected:
            src = os.path.join(PRISTINE, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
            else:
                shutil.copy2(src, dst)
    return changed


def main(plan_file, out_dir):
    plan_name = os.path.relpath(plan_file, out_dir)
    key, suite_env, inputs = worldline_runs.boot(out_dir, [plan_name])
    sign = worldline_runs.signer_of(key, "results.jsonl")
    plan = json.loads(inputs[plan_name].decode("utf-8"))
    pristine = tree_digest(PRISTINE) if os.path.isdir(PRISTINE) else None
    # Each mutant's run forks from one zygote (pytest imported once), which never imports /repo's modules.
    with worldline_runs.zygote_if(len(plan["candidates"]) >= 2 and worldline_runs.Zygote.serves(plan["pytest"], None), suite_env) as zygote:
        _try_all(plan, out_dir, key, sign, suite_env, pristine, zygote)


def _try_all(plan, out_dir, key, sign, suite_env, pristine, zygote):
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
            try:
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(m["source"])
                code = worldline_runs.run_once(out_dir, i, cand.get("timeout", plan["timeout"]), plan["test_limit"], plan["output_cap"],
                                               plan["pytest"] + cand["tests"], key, suite_env, None, zygote)["exit"]
                # Nobody reads a mutant's output: it would only fill the folder.
                os.unlink(os.path.join(out_dir, "output-%d.log" % i))
                timed_out = code == worldline_runs.TIMEOUT_EXIT
                if timed_out:
                    code = None
            finally:
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(original)
                # Every candidate starts from the pristine tree, whatever this one's tests wrote.
                tampered = restore_tree(pristine) if pristine is not None else []
                if tampered:
                    record.update(tree_restored=tampered[:20])
            record.update(status="applied", description=m["description"], changed_lines=m["changed_lines"],
                          bug_patch=unified(original, m["source"], cand["file"]),
                          fix_patch=unified(m["source"], original, cand["file"]),
                          exit_code=code, timed_out=timed_out, report="report-%d.jsonl" % i)
            if code != 0:
                failing += 1
        results.write(sign(record))
        results.flush()
    results.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
