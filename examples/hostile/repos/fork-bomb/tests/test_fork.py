"""Forks until the kernel says no: the container's pids limit must stop it, well before 10000."""
import os
import signal
import time


def test_fork_bomb():
    children = []
    try:
        while len(children) < 10000:
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children.append(pid)
    except OSError:
        pass
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert len(children) < 10000, "no process limit stopped the fork bomb"


def test_ok():
    assert True
