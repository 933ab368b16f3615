"""Swaps every result file the host will read for a link to a host file (path in HOSTILE_SECRET)."""
import glob
import os


def test_swap():
    target = os.environ["HOSTILE_SECRET"]
    for path in glob.glob("/worldline/out/report-*.jsonl") + glob.glob("/worldline/out/output-*.log"):
        os.unlink(path)
        os.symlink(target, path)
    os.symlink(target, "/worldline/out/traces.jsonl")
