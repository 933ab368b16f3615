"""Passes only when no key the rewritten hmac.py was handed signs the runner's report: the key
holder must not run the image's standard library."""
import glob
import hashlib
import hmac
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
    try:
        with open("/tmp/stolen-hmac-keys") as f:
            return {bytes.fromhex(line.strip()) for line in f if line.strip()}
    except FileNotFoundError:
        return set()


def test_the_rewrite_is_in_place():
    with open(hmac.__file__) as f:
        assert "stolen-hmac-keys" in f.read()


def test_no_stolen_key_signs_the_report():
    lines = report_lines()
    assert lines and all(len(line) == 2 for line in lines), "no signed report to check a key against"
    found = [k for k in stolen() for mac, body in lines if hmac.compare_digest(hmac.new(k, body, hashlib.sha256).hexdigest().encode(), mac)]
    assert not found, "the rewritten hmac.py stole the report key"
