"""The key holder's own checks (tracers/worldline_runs.py), on the host: what counts as a file mapped
from outside our interpreter's tree, and which file each signed line is bound to."""
import hashlib
import hmac
import json

import worldline_runs

MEMORY = worldline_runs._memory_device()


def maps_line(path, dev):
    return "7f0000000000-7f0000001000 r-xp 00000000 %s 1234                       %s\n" % (dev, path)


def test_a_file_the_image_names_memfd_is_foreign():
    lines = [
        maps_line("/worldline/py/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "00:3a"),
        maps_line("/memfd:libffi (deleted)", MEMORY),
        maps_line("/dev/zero (deleted)", MEMORY),
        "7f0000000000-7f0000001000 rw-p 00000000 00:00 0                          [heap]\n",
        # A provider a hostile openssl.cnf named, from a folder of the image called /memfd:x.
        maps_line("/memfd:x/provider.so", "00:3a"),
        maps_line("/usr/lib/x86_64-linux-gnu/ossl-modules/legacy.so", "00:3a"),
    ]
    assert worldline_runs._foreign_mappings(lines, MEMORY) == ["/memfd:x/provider.so", "/usr/lib/x86_64-linux-gnu/ossl-modules/legacy.so"]


def test_this_process_maps_memfds_on_the_memory_device():
    import ctypes  # noqa: F401  (libffi's trampolines, where it makes them)

    with open("/proc/self/maps") as f:
        lines = f.readlines()
    memfds = [line for line in lines if "/memfd:" in line]
    assert all(line.split(None, 5)[3] == MEMORY for line in memfds)


def test_each_signed_line_names_its_file():
    key = b"k" * 32
    line = worldline_runs.signer(key, "report-1.jsonl")({"event": "start"})
    mac, body = line.rstrip("\n").split(" ", 1)
    assert json.loads(body) == {"event": "start", "seq": 0, "file": "report-1.jsonl"}
    assert hmac.compare_digest(mac, hmac.new(key, body.encode(), hashlib.sha256).hexdigest())


def _phase(nodeid, when, outcome="passed"):
    return {"event": "test", "nodeid": nodeid, "when": when, "outcome": outcome, "duration": 0.0}


def _rerun(nodeid, when="call"):
    return {"event": "rerun", "nodeid": nodeid, "when": when}


def _report_of(tmp_path, records):
    """(the reason the runner refused the stream, or None; the records it wrote)."""
    report = worldline_runs._Report(str(tmp_path / "report-1.jsonl"), None)
    for record in [{"event": "start"}] + records:
        report.add(record)
    report.close()
    written = [json.loads(line) for line in (tmp_path / "report-1.jsonl").read_text().splitlines()]
    tampered = [r["reason"] for r in written if r["event"] == "tampered"]
    return (tampered[0] if tampered else None), written


# The streams each rerun plugin sends for a test that fails once and then passes, as their sources
# do: pytest-rerunfailures 10 (Debian's) stops the attempt at its rerun report, 16 reports the
# attempt's teardown after it, pytest-retry reports the retried call and then the call again.
RERUNFAILURES_10 = [_phase("t::a", "setup"), _rerun("t::a"), _phase("t::a", "setup"), _phase("t::a", "call"), _phase("t::a", "teardown")]
RERUNFAILURES_16 = [_phase("t::a", "setup"), _rerun("t::a"), _phase("t::a", "teardown")] + RERUNFAILURES_10[2:]
PYTEST_RETRY = [_phase("t::a", "setup"), _rerun("t::a"), _phase("t::a", "call"), _phase("t::a", "teardown")]


def test_the_attempts_rerun_plugins_report_are_taken(tmp_path):
    for stream in (RERUNFAILURES_10, RERUNFAILURES_16, PYTEST_RETRY):
        assert _report_of(tmp_path, stream)[0] is None


def test_a_rerun_cannot_stand_in_for_a_phase_already_reported(tmp_path):
    # A teardown fixture that waits for its test's failing call report, then sends a rerun and a pass.
    forged = [_phase("t::a", "setup"), _phase("t::a", "call", "failed"), _rerun("t::a"), _phase("t::a", "call")]
    assert _report_of(tmp_path, forged)[0] == "t::a reported its call phase twice"
    # Without a new setup, no phase may come twice after a rerun either.
    again = [_phase("t::a", "setup"), _rerun("t::a"), _phase("t::a", "call"), _phase("t::a", "call", "failed")]
    assert _report_of(tmp_path, again)[0] == "t::a reported its call phase twice"


def test_the_plugin_sends_an_attempt_of_any_outcome_pytest_does_not_know_as_a_rerun(monkeypatch):
    import worldline_report

    sent = []
    monkeypatch.setattr(worldline_report, "_message", lambda report: None)

    class Report:
        nodeid, when, duration = "t::a", "call", 0.5

    for outcome in ("rerun", "retried", "passed"):
        report = Report()
        report.outcome = outcome
        worldline_report.pytest_runtest_logreport(report, _emit=sent.append)
    assert sent == [_rerun("t::a"), _rerun("t::a"), dict(_phase("t::a", "call"), duration=0.5)]
