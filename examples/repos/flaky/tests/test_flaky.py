import os

COUNTER = "/tmp/worldline-flaky-counter"


def next_run_number():
    """Count runs in this machine's /tmp: 1 on the first run, 2 on the next, ..."""
    try:
        with open(COUNTER) as f:
            count = int(f.read().strip() or 0)
    except (FileNotFoundError, ValueError):
        count = 0
    count += 1
    tmp = f"{COUNTER}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"{count}\n")
    os.replace(tmp, COUNTER)
    return count


def test_stable():
    assert sorted([3, 1, 2]) == [1, 2, 3]


def test_alternates_between_runs():
    run = next_run_number()
    assert run % 2 == 1, f"run {run}: passes on odd runs, fails on even runs"
