# As filelock: tests that mock the functions a reporter would call, with the mocks still in force
# when pytest reports the call phase (a fixture's monkeypatch is undone only at teardown).
import builtins
import json
import os
import time

import pytest


@pytest.fixture
def write_returns_zero(monkeypatch):
    monkeypatch.setattr(os, "write", lambda fd, data: 0)


@pytest.fixture
def no_open(monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError("open is off in this test")

    monkeypatch.setattr(builtins, "open", refuse)


@pytest.fixture
def frozen(monkeypatch):
    monkeypatch.setattr(time, "monotonic", lambda: 0.0)
    monkeypatch.setattr(time, "time", lambda: 0.0)
    monkeypatch.setattr(os, "getpid", lambda: 1)


@pytest.fixture
def no_json(monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("json.dumps is off in this test")

    monkeypatch.setattr(json, "dumps", refuse)


def test_os_write_returns_zero(write_returns_zero):
    assert os.write(1, b"x") == 0


def test_open_refused(no_open):
    with pytest.raises(PermissionError):
        open("/etc/hostname")


def test_frozen_clock_and_pid(frozen):
    assert time.monotonic() == 0.0 and os.getpid() == 1


def test_json_off(no_json):
    with pytest.raises(RuntimeError):
        json.dumps({})
