"""Runs a pytest command N times for Worldline, holding the report key where tests cannot read it.

Started as `python3 -I -S worldline_runs.py OUT RUNS TIMEOUT_S TEST_LIMIT_S CAP_BYTES -- CMD...` (isolated, no
site: no .pth or sitecustomize a repository installed runs here). Before any repository code
runs it reads OUT/key, deletes it, and makes itself non-dumpable, so a test running as the same
user can open neither /proc/<this>/fd nor /proc/<this>/mem. Each run gets the key through a
fresh pipe on an inherited descriptor that the reporting plugin drains at import: afterwards
the pipe is empty, and no process the tests can inspect holds the key (only the plugin's own
memory, the residual risk worldline_report.py names).

Per run i it writes OUT/exit-i (pytest's status; 124 when the suite timeout killed it, 128+n
for a signal), OUT/report-i.jsonl (the plugin's), the first CAP_BYTES of the output to
OUT/output-i.log, and OUT/capped-i with the count of bytes dropped past the cap, so a test
printing gigabytes costs neither disk nor memory. A timed-out run ends the loop.

TEST_LIMIT_S (0: off) bounds each test from out here, where a test that ignores SIGALRM (which
pytest-timeout's signal method relies on) cannot reach: the plugin reports each test's start
and end on a second pipe, signed with the key, and when a test has run TEST_LIMIT_S seconds
without its end arriving, the suite's process group is killed and OUT/test-timeout-i names the
test. Only signed lines count, and a test that closes the pipe leaves its deadline armed, so
a test can neither extend nor disarm its own bound. Runs share the
container's /tmp and /repo (state a run leaves there is how order-dependent flakiness shows);
nothing persists beyond the container.
Started as `python3 -I -S worldline_runs.py OUT --steps STEPS_JSON` it runs a list of steps
instead, for work that changes /repo between runs (issue-fix verification, the traces around
a fix): {"cap": bytes, "steps": [{"name", "sh": script} | {"name", "run": [argv], "timeout",
"test_limit", "env"?}]}. A `sh` step (patches, git; started by us, so it cannot read our memory
either) ends the list when it fails. Each step's outcome (exit status, a `sh` step's first
`cap` bytes of output, a run's capped bytes and timed-out test, wall clock) is one line of
OUT/steps.jsonl signed with the key, so what a test leaves in OUT cannot stand in for it.

Drivers of their own (forage_mutations.py) import take_key, forbid_dumping, signer and run_once.
Standard library only; Python 3.8+.
"""
import ctypes
import hashlib
import hmac
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

PR_SET_DUMPABLE = 4
TIMEOUT_EXIT = 124


def take_key(out):
    path = os.path.join(out, "key")
    try:
        with open(path, "rb") as f:
            key = f.read().strip()
    except FileNotFoundError:
        return None
    os.unlink(path)
    return key


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _progress_event(line, key, seq):
    """(event, nodeid) of a progress line the plugin signed with `key` as number `seq`, else None."""
    try:
        if key is not None:
            mac, body = line.split(b" ", 1)
            if not hmac.compare_digest(mac, hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii")):
                return None
        else:
            body = line
        record = json.loads(body.decode("utf-8"))
        if key is not None and record.get("seq") != seq:
            return None
        return record["event"], record["nodeid"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _watch_tests(fd, limit, proc, key, ended, fired):
    """Kills the suite when one test runs past `limit` seconds; `fired` gets its node id."""
    current = None  # (nodeid, deadline)
    pending = b""
    seq = 0
    while not ended.is_set():
        # Wakes at least once a second so that a pipe a stray process still holds never keeps us.
        wait = 1.0 if current is None else min(1.0, max(0.0, current[1] - time.monotonic()))
        if not select.select([fd], [], [], wait)[0]:
            if current is not None and time.monotonic() >= current[1]:
                break
            continue
        chunk = os.read(fd, 1 << 16)
        if chunk == b"":
            # Every writer is gone: pytest ended, or a test closed the pipe. An armed deadline still holds.
            if current is None or ended.wait(max(0.0, current[1] - time.monotonic())):
                return
            break
        # Garbage without a newline is not allowed to grow our memory.
        pending = (pending + chunk)[-(1 << 20) :]
        *lines, pending = pending.split(b"\n")
        for line in lines:
            event = _progress_event(line, key, seq)
            if event is None:
                continue
            seq += 1
            current = (event[1], time.monotonic() + limit) if event[0] == "start" else None
    if current is not None and proc.poll() is None:
        fired.append(current[0])
        _kill_group(proc)


def forbid_dumping():
    """After this, a process of the same user can open neither /proc/<us>/fd nor /proc/<us>/mem."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.exit("worldline_runs: prctl(PR_SET_DUMPABLE) failed: the key would be readable by tests")


def signer(key):
    """Signs records as the reporting plugin does (`<hmac-sha256 hex> <json with seq>`), for a
    driver's own results: tests can write the folder they land in, but not sign a line."""
    state = {"seq": 0}

    def sign(record):
        body = json.dumps(dict(record, seq=state["seq"]), sort_keys=True)
        state["seq"] += 1
        return hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest() + " " + body + "\n"

    return sign


def run_once(out, i, timeout_s, test_limit_s, cap, cmd, key, extra_env=None):
    """One pytest run; its files are named with `i` (see the module's docstring). Returns what the
    files say, from our memory: {"exit", "capped" (bytes dropped), "test_timeout" (node id or None)}."""
    env = dict(os.environ, **(extra_env or {}))
    env["WORLDLINE_REPORT"] = os.path.join(out, "report-%s.jsonl" % i)
    pass_fds = []
    if key is not None:
        r, w = os.pipe()
        os.write(w, key)
        os.close(w)
        env["WORLDLINE_REPORT_KEY_FD"] = str(r)
        pass_fds.append(r)
    progress = None
    if test_limit_s > 0:
        progress, w = os.pipe()
        env["WORLDLINE_PROGRESS_FD"] = str(w)
        pass_fds.append(w)
    # Its own session: a timeout kills the suite and whatever it started, not us.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, pass_fds=pass_fds, start_new_session=True, cwd="/repo")
    for fd in pass_fds:
        os.close(fd)
    timed_out = []
    ended = threading.Event()
    test_timed_out = []
    if progress is not None:
        watcher = threading.Thread(target=_watch_tests, args=(progress, test_limit_s, proc, key, ended, test_timed_out), daemon=True)
        watcher.start()

    def on_timeout():
        timed_out.append(True)
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        threading.Timer(10, _kill_group, (proc,)).start()

    timer = threading.Timer(timeout_s, on_timeout)
    timer.daemon = True
    timer.start()
    kept = 0
    dropped = 0
    with open(os.path.join(out, "output-%s.log" % i), "wb") as log:
        while True:
            chunk = proc.stdout.read1(1 << 16) if hasattr(proc.stdout, "read1") else proc.stdout.read(1 << 16)
            if not chunk:
                break
            room = cap - kept
            if room > 0:
                log.write(chunk[:room])
                kept += min(room, len(chunk))
            dropped += max(0, len(chunk) - max(room, 0))
    code = proc.wait()
    ended.set()
    timer.cancel()
    # What the suite left running after its session ended goes too.
    _kill_group(proc)
    if progress is not None:
        watcher.join()
        os.close(progress)
    if test_timed_out:
        code = TIMEOUT_EXIT
        with open(os.path.join(out, "test-timeout-%s" % i), "w", encoding="utf-8") as f:
            f.write(test_timed_out[0])
    elif timed_out:
        code = TIMEOUT_EXIT
    elif code < 0:
        code = 128 - code
    with open(os.path.join(out, "exit-%s" % i), "w") as f:
        f.write("%d\n" % code)
    if dropped:
        with open(os.path.join(out, "capped-%s" % i), "w") as f:
            f.write("%d\n" % dropped)
    return {"exit": code, "capped": dropped, "test_timeout": test_timed_out[0] if test_timed_out else None}


def _sh_step(script, cap):
    """A step of ours: its exit status and the first `cap` bytes of its output."""
    proc = subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, cwd="/repo")
    kept = []
    size = 0
    while True:
        chunk = proc.stdout.read(1 << 16)
        if not chunk:
            break
        if size < cap:
            kept.append(chunk[: cap - size])
            size += len(kept[-1])
    code = proc.wait()
    _kill_group(proc)
    return code, b"".join(kept).decode("utf-8", "replace")


def run_steps(out, plan_file):
    key = take_key(out)
    forbid_dumping()
    with open(plan_file) as f:
        plan = json.load(f)
    sign = signer(key) if key is not None else (lambda record: json.dumps(record, sort_keys=True) + "\n")
    cap = int(plan["cap"])
    with open(os.path.join(out, "steps.jsonl"), "w") as steps:
        for step in plan["steps"]:
            started = time.time()
            record = {"name": step["name"]}
            if "sh" in step:
                record["exit"], record["output"] = _sh_step(step["sh"], cap)
            else:
                record.update(run_once(out, step["name"], float(step["timeout"]), float(step["test_limit"]), cap, step["run"], key, step.get("env")))
            record.update(started=started, ended=time.time())
            steps.write(sign(record))
            steps.flush()
            if "sh" in step and record["exit"] != 0:
                break


def main(argv):
    if argv[2] == "--steps":
        run_steps(argv[1], argv[3])
        return
    sep = argv.index("--")
    out, runs, timeout_s, test_limit_s, cap = argv[1], int(argv[2]), float(argv[3]), float(argv[4]), int(argv[5])
    cmd = argv[sep + 1 :]
    key = take_key(out)
    forbid_dumping()
    for i in range(1, runs + 1):
        if run_once(out, i, timeout_s, test_limit_s, cap, cmd, key)["exit"] == TIMEOUT_EXIT:
            break


if __name__ == "__main__":
    main(sys.argv)
