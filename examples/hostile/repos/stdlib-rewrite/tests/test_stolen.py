"""Passes only when no key the build's programs took signs the runner's report: not one the
rewritten hmac.py was handed (the key holder must not run the image's standard library), nor one
the replaced cp read (no program of the image may run while the key is on the file system)."""
import glob
import hashlib
import hmac
import shutil
import time


def report_lines():
    """(mac, body) of every whole line of the reports so far; the runner (another process) signs
    each record as it comes, so the first may still be on its way: tried for up to ten seconds."""
    for _ in range(200):
        found = []
        for path in glob.glob("/worldline/out/report-*.jsonl"):
            with open(path, "rb") as f:
                found += [line[:-1].split(b" ", 1) for line in f if line.endswith(b"\n")]
        if found:
            break
        time.sleep(0.05)
    return found


def stolen():
    keys = set()
    try:
        with open("/tmp/stolen-hmac-keys") as f:
            keys |= {bytes.fromhex(line.strip()) for line in f if line.strip()}
    except FileNotFoundError:
        pass
    try:
        with open("/tmp/stolen-key", "rb") as f:
            keys.add(f.read().strip())
    except FileNotFoundError:
        pass
    return keys


def test_the_rewrites_are_in_place():
    with open(hmac.__file__) as f:
        assert "stolen-hmac-keys" in f.read()
    with open(shutil.which("cp"), "rb") as f:
        assert b"stolen-key" in f.read()


def test_no_stolen_key_signs_the_report():
    lines = report_lines()
    assert lines and all(len(line) == 2 for line in lines), "no signed report to check a key against"
    found = [k for k in stolen() for mac, body in lines if hmac.compare_digest(hmac.new(k, body, hashlib.sha256).hexdigest().encode(), mac)]
    assert not found, "a program of the build stole the report key"
