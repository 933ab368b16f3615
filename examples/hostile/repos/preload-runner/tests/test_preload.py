"""The unit's LD_PRELOAD (a shared object of the repository) and LD_DEBUG reach the suite, and
never the runner that holds the report key: the loader logs each program it starts to
/tmp/ld-log.<pid>, so the runner (pytest's parent) must have no log."""
import os


def log_of(pid):
    try:
        with open("/tmp/ld-log.%d" % pid) as f:
            return f.read()
    except FileNotFoundError:
        return None


def test_the_suite_gets_the_variables():
    assert os.environ["LD_PRELOAD"] == "/repo/hook.so"
    assert "hook.so" in (log_of(os.getpid()) or ""), "pytest did not load the repository's shared object"


def test_the_runner_does_not():
    assert log_of(os.getppid()) is None, "the repository's LD_PRELOAD and LD_DEBUG reached the runner"
