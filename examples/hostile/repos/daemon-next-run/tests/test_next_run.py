"""Starts a daemon (its own session, no descriptor of pytest's) that would outlive the run; in the
next run of the same container it fails when that daemon is still alive. Passes in every run
only when nothing a run started lives into the next."""
import ctypes
import os
import time

PIDFILE = "/tmp/daemon-next-run.pid"
NAME = b"next-run-daemon"


def alive():
    try:
        with open(PIDFILE) as f:
            pid = int(f.read())
        with open("/proc/%d/comm" % pid, "rb") as f:
            return f.read().strip() == NAME
    except (OSError, ValueError):
        return False


def start_daemon():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, 4096)
            ctypes.CDLL(None).prctl(15, NAME, 0, 0, 0)  # PR_SET_NAME
            with open(PIDFILE, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    os.waitpid(pid, 0)
    deadline = time.monotonic() + 10
    while not alive() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_no_daemon_from_an_earlier_run():
    assert not alive(), "a daemon of an earlier run is still alive"
    start_daemon()
    assert alive()
