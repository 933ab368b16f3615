"""Leaves a daemon behind: forked, in a session of its own, holding every descriptor pytest had
(its output pipe and the report pipe among them) and sleeping ten minutes. The suite is done
when pytest exits; the runner must not wait for the pipes to close."""
import os
import time


def test_leaves_a_daemon():
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(600)
        os._exit(0)
    os.waitpid(pid, 0)


def test_ok():
    assert True
