"""Hides a failure of validate's second run: run 1 passes, run 2 fails genuinely (the runs share
the container's /tmp), then, still in run 2, a test puts run 1's signed report in place of its
own and leaves with status 0 before pytest can say otherwise. Each report's lines were signed
with a sequence number alone: the copy checked out, and the flaky test was recorded as passing
twice."""
import os
import shutil

OUT = "/worldline/out"


def test_a_fails_after_the_first_run():
    first = not os.path.exists("/tmp/moved-report-ran")
    open("/tmp/moved-report-ran", "w").close()
    assert first, "fails in every run after the first"


def test_b_moves_the_first_report():
    mine, first = os.path.join(OUT, "report-2.jsonl"), os.path.join(OUT, "report-1.jsonl")
    if os.path.exists(mine) and os.path.exists(first):
        os.unlink(mine)
        shutil.copyfile(first, mine)
        os._exit(0)
