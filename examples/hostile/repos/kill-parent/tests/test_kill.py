"""Kills the process that started pytest (Worldline's runner) with SIGKILL."""
import os
import signal


def test_ok():
    assert True


def test_kill_parent():
    os.kill(os.getppid(), signal.SIGKILL)
