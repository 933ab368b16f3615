"""Passes only when nothing in pytest's process can find the report key: neither the .pth the
build planted (it runs before pytest, in every interpreter) nor a test searching every object
the interpreter holds, the reporting plugin's included."""
import builtins
import gc
import glob
import hashlib
import hmac
import itertools
import re
import time

KEY_BYTES = re.compile(rb"[0-9a-f]{64}")
KEY_STR = re.compile(r"[0-9a-f]{64}")


def keylike():
    """Every bytes or str of 64 hex digits an object of this interpreter refers to. Only C-level
    calls, so the tracer (which traces this test too) records a few lines, not one per object."""
    refs = list(itertools.chain.from_iterable(map(gc.get_referents, gc.get_objects())))
    found = set(filter(KEY_BYTES.fullmatch, filter(bytes.__instancecheck__, refs)))
    found |= set(map(str.encode, filter(KEY_STR.fullmatch, filter(str.__instancecheck__, refs))))
    return found


def signed_lines():
    """(mac, body) of each report's first line: the runner's, signed with the key. The runner
    writes it from another process as the records come, so on a busy machine it may still be on
    its way when this test runs: waited for, up to ten seconds."""
    deadline = time.monotonic() + 10
    while True:
        firsts = []
        for path in glob.glob("/worldline/out/report-*.jsonl"):
            with open(path, "rb") as f:
                first = f.readline()
            if first.endswith(b"\n"):
                firsts.append(first.rstrip(b"\n").split(b" ", 1))
        if firsts or time.monotonic() > deadline:
            return firsts
        time.sleep(0.05)


def test_pth_ran():
    assert hasattr(builtins, "worldline_stolen"), "the planted .pth did not run"


def test_key_out_of_reach():
    assert not re.fullmatch(rb"[0-9a-f]{64}", builtins.worldline_stolen), "a .pth read the report key"


def test_search_finds_a_key_it_is_shown():
    planted = [hashlib.sha256(b"not the key").hexdigest().encode()]
    assert planted[0] in keylike()


def test_no_key_in_the_process():
    lines = signed_lines()
    assert lines and all(len(line) == 2 for line in lines), "no signed report to check a key against"
    found = [k for k in keylike() for mac, body in lines if hmac.compare_digest(hmac.new(k, body, hashlib.sha256).hexdigest().encode(), mac)]
    assert not found, "the report key is in pytest's memory"
