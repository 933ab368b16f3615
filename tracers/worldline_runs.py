"""Runs a pytest command N times for Worldline, holding the report key where tests cannot read it.

Started as `OUR_PYTHON worldline_runs.py OUT RUNS TIMEOUT_S TEST_LIMIT_S CAP_BYTES -- CMD...` (our own
interpreter, isolated, no site: no .pth or sitecustomize a repository installed runs here; see below). Before any repository code
runs it reads OUT/key, deletes it, and makes itself non-dumpable, so a test running as the same
user can open neither /proc/<this>/fd nor /proc/<this>/mem. The key never leaves this process:
the reporting plugin sends its records unsigned down a pipe (an inherited descriptor it makes
non-inheritable at import), and we check them (a phase reported twice, a record after the
session finished, a malformed line: a signed `tampered` line ends the report), number them,
sign them and write the report. Code under test can still lie about its outcomes through that
pipe, from inside pytest's own process; it cannot read the key, nor forge, reorder or cut the
report file.

Per run i it writes OUT/exit-i (pytest's status; 124 when the suite timeout killed it, 128+n
for a signal), OUT/report-i.jsonl (the plugin's records, signed by us), the first CAP_BYTES of the output to
OUT/output-i.log, and OUT/capped-i with the count of bytes dropped past the cap, so a test
printing gigabytes costs neither disk nor memory. A timed-out run ends the loop.

TEST_LIMIT_S (0: off) bounds each test from out here, where a test that ignores SIGALRM (which
pytest-timeout's signal method relies on) cannot reach: the plugin reports each test's start
and end on the same pipe, and when a test has run TEST_LIMIT_S seconds without its end
arriving, the suite's process group is killed and OUT/test-timeout-i names the test. Only the
end of the test that started disarms, and a test that closes the pipe leaves its deadline
armed; the tests' subprocesses hold no copy of the pipe. Runs share the
container's /tmp and /repo (state a run leaves there is how order-dependent flakiness shows);
nothing persists beyond the container.
Started as `OUR_PYTHON worldline_runs.py OUT --steps STEPS_JSON` it runs a list of steps
instead, for work that changes /repo between runs (issue-fix verification, the traces around
a fix): {"cap": bytes, "steps": [{"name", "sh": script} | {"name", "run": [argv], "timeout",
"test_limit", "env"?}]}. A `sh` step (patches, git; started by us, so it cannot read our memory
either) ends the list when it fails. Each step's outcome (exit status, a `sh` step's first
`cap` bytes of output, a run's capped bytes and timed-out test, wall clock) is one line of
OUT/steps.jsonl signed with the key, so what a test leaves in OUT cannot stand in for it.
With two or more pytest runs in the list, they fork from a zygote (worldline_zygote.py, started
before the first step) instead of each starting an interpreter and importing pytest; a run's
outcome says `"zygote": true` when it did. A plan with `"zygote": false` starts every run cold.

Started by the sandbox as the container's own command (WORLDLINE_BOOT set: pipeline/sandbox/sandbox.ts),
we run on our own interpreter: the base image's Python, its standard library and the shared
libraries it loads, mounted read-only at /worldline/py and started through its own loader, so
nothing the repository's build rewrote as root (hmac.py, libcrypto, /usr/bin/python3) runs here;
`boot` refuses to go on when a mapped file comes from anywhere else. Our environment holds none of
the unit's variables (LD_PRELOAD and the like would act on us first): the suite's environment
comes in OUT/suite-env.json, read before anything else, and only the runs get it. Then `boot`
makes us non-dumpable, takes the key and the inputs, copies the checkout into /repo (`cp`: the
build's, but the key and inputs are ours by then) and kills whatever that left. With "gate" in
WORLDLINE_BOOT (a held run, whose key and inputs are written while it waits) it copies with our
own code, so that nothing of the image runs before it waits for the line on stdin that lets the
run go, and only then takes the key and inputs.

A run ends when pytest exits: whatever it left (a daemon in a session of its own holding the
output pipe, a process that outlives the run into the next) is killed then, the container's
whole process tree but PID 1, us and the zygote, and the output is read to its end. A pytest
that reported its session's end but does not exit within FINISH_GRACE_S is killed too, its
status the one it reported.

Drivers of their own (forage_mutations.py) import boot, signer and run_once.
Standard library only; Python 3.8+.
"""
import array
import contextlib
import ctypes
import hashlib
import hmac
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

PR_SET_DUMPABLE = 4
TIMEOUT_EXIT = 124
# How the sandbox started us: None (a command of its own started us), "prepare" or "gate,prepare".
BOOT = os.environ.pop("WORLDLINE_BOOT", None)
# Our interpreter's tree (pipeline/sandbox/our_python.ts): every file mapped into us comes from it.
OUR_PYTHON_ROOT = "/worldline/py/"
# The build's checkout, on the read-only root file system: what each container's /repo is copied from.
PRISTINE = "/opt/worldline/repo"
# Seconds pytest may take to exit after it reported its session's end.
FINISH_GRACE_S = 30


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


def _memory_device():
    """The device of memory-backed files (a memfd, shared anonymous memory) as /proc/self/maps names it."""
    fd = os.memfd_create("worldline-probe")
    try:
        dev = os.fstat(fd).st_dev
    finally:
        os.close(fd)
    return "%02x:%02x" % (os.major(dev), os.minor(dev))


def _foreign_mappings(maps_lines, memory_device):
    """Files mapped into this process (`maps_lines`: /proc/self/maps) from outside our interpreter's tree."""
    found = set()
    for line in maps_lines:
        fields = line.split(None, 5)
        path = fields[5].strip() if len(fields) == 6 else ""
        if not path.startswith("/") or path.startswith(OUR_PYTHON_ROOT):
            continue
        # libffi's memfd trampolines and shared anonymous memory are no file of the image's; a file
        # the image names /memfd:x/evil.so is, and lies on another device.
        if path.startswith(("/memfd:", "/dev/zero")) and fields[3] == memory_device:
            continue
        found.add(path)
    return sorted(found)


def _strays(keep):
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me) or int(name) in keep:
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            yield int(name)


def kill_strays(keep=()):
    """SIGKILL to every process of the container but PID 1 (its init), us and `keep`, until none is
    left: a daemon in a session of its own, a child of one, whatever a run or a step started. Only
    when the sandbox started us: there we are the container's only command and see its processes alone."""
    if BOOT is None:
        return
    for _ in range(1000):
        found = list(_strays(set(keep)))
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.002)


def _suite_env(out):
    """The runs' environment: ours without what the sandbox set for us alone, with the suite's own
    variables (OUT/suite-env.json: {"set": {...}, "drop": [...]}), read and removed before anything else runs."""
    env = dict(os.environ)
    path = os.path.join(out, "suite-env.json")
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except FileNotFoundError:
        return env
    os.unlink(path)
    for name in spec.get("drop", []):
        env.pop(name, None)
    env.update(spec.get("set", {}))
    return env


def _take(out, inputs):
    """The key, then the contents of the named input files of OUT."""
    key = take_key(out)
    found = {}
    for name in inputs:
        with open(os.path.join(out, name), "rb") as f:
            found[name] = f.read()
    return key, found


def _copy_tree(src, dst):
    """`cp -a src/. dst/` in our own code: links as links, modes and times (to the nanosecond:
    pytest's cache of rewritten test modules is checked by mtime), FIFOs as FIFOs; no other
    special file (none can be made without privileges)."""
    for entry in os.scandir(src):
        target = os.path.join(dst, entry.name)
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(entry.path), target)
        elif stat.S_ISDIR(st.st_mode):
            os.mkdir(target)
            _copy_tree(entry.path, target)
        elif stat.S_ISREG(st.st_mode):
            shutil.copyfile(entry.path, target)
        elif stat.S_ISFIFO(st.st_mode):
            os.mkfifo(target)
        else:
            continue
        if not stat.S_ISLNK(st.st_mode):
            os.chmod(target, stat.S_IMODE(st.st_mode))
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
    st = os.stat(src)
    os.chmod(dst, stat.S_IMODE(st.st_mode))
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def _prepare_repo(ours):
    """The checkout into this container's own /repo (absent in base images), by the image's `cp`
    (faster) or, with `ours`, by our own code; what the copy left running goes."""
    if os.path.isdir(PRISTINE):
        if ours:
            _copy_tree(PRISTINE, "/repo")
        else:
            code = subprocess.call(["cp", "-a", PRISTINE + "/.", "/repo/"], stdin=subprocess.DEVNULL, start_new_session=True)
            if code != 0:
                sys.exit("worldline_runs: copying the checkout into /repo failed (exit %d)" % code)
    kill_strays()


def boot(out, inputs=()):
    """Everything before the first step: (key, the runs' environment, {input name: bytes}). We are
    non-dumpable before any program of the image runs, and read the environment, the key and the
    inputs before one does. A held run's key and inputs are written while it waits, so no program
    of the image runs before its gate: its checkout is copied by our own code."""
    if BOOT is not None:
        with open("/proc/self/maps") as f:
            foreign = _foreign_mappings(f, _memory_device())
        if foreign:
            sys.exit("worldline_runs: refusing to run: %s is mapped from outside our interpreter (%s)" % (foreign[0], OUR_PYTHON_ROOT))
    forbid_dumping()
    gate = BOOT is not None and "gate" in BOOT.split(",")
    suite_env = _suite_env(out)
    if gate:
        _prepare_repo(ours=True)
        # No line (the stream closed): the run is off.
        if not sys.stdin.buffer.readline():
            sys.exit(0)
        key, found = _take(out, inputs)
        return key, suite_env, found
    key, found = _take(out, inputs)
    if BOOT is not None:
        _prepare_repo(ours=False)
    return key, suite_env, found


# Longest line the plugin may send (a large suite's list of collected node ids fits easily).
MAX_LINE = 64 << 20
DRAIN_S = 5
PHASES = ("setup", "call", "teardown")
EVENTS = ("start", "collected", "collect_error", "test", "subtest", "rerun", "finish")


class _Report:
    """Checks the plugin's records as they come and writes them, signed, to the report: a record
    no honest plugin sends ends the report with a signed `tampered` line saying why."""

    def __init__(self, path, key):
        self.file = open(path, "w", encoding="utf-8")
        self.sign = signer_of(key, os.path.basename(path))
        self.phases = set()
        # Tests a rerun plugin retried: their next setup report starts a new attempt.
        self.retrying = set()
        self.finished = False
        self.finished_at = None
        self.exitstatus = None
        self.tampered = False

    def _write(self, record):
        self.file.write(self.sign(record))
        self.file.flush()

    def _problem(self, record):
        event = record.get("event")
        if event not in EVENTS:
            return "the plugin sent a record with no known event"
        if self.finished:
            return "the plugin sent a record after the session finished"
        if event in ("test", "rerun"):
            nodeid, when = phase = (record.get("nodeid"), record.get("when"))
            if not isinstance(nodeid, str) or when not in PHASES:
                return "the plugin sent a %s record without a node id and phase" % event
            if event == "test" and when == "setup" and nodeid in self.retrying:
                # A new attempt of a test a rerun plugin retried: what it reported so far is void.
                self.retrying.discard(nodeid)
                self.phases -= {(nodeid, w) for w in PHASES}
            if phase in self.phases:
                return "%s reported its %s phase twice" % phase
            if event == "rerun":
                # An attempt that does not count, reported in place of this phase's report:
                # pytest-rerunfailures then runs the test again from its setup (its newer releases
                # report the attempt's teardown first), pytest-retry reports the phase once more.
                self.retrying.add(nodeid)
            else:
                self.phases.add(phase)
        elif event == "subtest" and not isinstance(record.get("nodeid"), str):
            return "the plugin sent a subtest record without a node id"
        self.finished = event == "finish"
        if self.finished:
            self.finished_at = time.monotonic()
            self.exitstatus = record.get("exitstatus")
        return None

    def add(self, record):
        if self.tampered:
            return
        problem = self._problem(record)
        if problem is None:
            self._write(record)
        else:
            self.reject(problem)

    def reject(self, why):
        if not self.tampered:
            self.tampered = True
            self._write({"event": "tampered", "reason": why})

    def close(self):
        self.file.close()


def _lines(fd, state):
    """(whole lines completed by one read of `fd`, whether it is at end of file); a line past
    MAX_LINE is not kept, and None stands for it."""
    chunk = os.read(fd, 1 << 16)
    if chunk == b"":
        return None, True
    pieces = chunk.split(b"\n")
    state["size"] += len(pieces[0])
    state["buf"].append(pieces[0])
    if state["size"] > MAX_LINE:
        state["buf"], state["over"] = [], True
    if len(pieces) == 1:
        return [], False
    first = None if state["over"] else b"".join(state["buf"])
    state.update(buf=[pieces[-1]], size=len(pieces[-1]), over=False)
    return [first] + pieces[1:-1], False


def _collect(fd, limit, proc, report, ended, fired):
    """Reads the plugin's records until every writer is gone (or pytest has ended and the pipe is
    drained), writing the report as they come. With `limit` > 0, kills the suite when one test
    runs past `limit` seconds; `fired` gets its node id."""
    current = None  # (nodeid, deadline, teardown reported)
    state = {"buf": [], "size": 0, "over": False}
    drain_until = None
    while True:
        # Wakes at least once a second so that a pipe a stray process still holds never keeps us.
        wait = 1.0 if current is None else min(1.0, max(0.0, current[1] - time.monotonic()))
        if ended.is_set() and drain_until is None:
            # What pytest left in the pipe is at most its capacity; a stray writer that keeps
            # it full (one that left the suite's session) does not keep us past this.
            drain_until = time.monotonic() + DRAIN_S
        # Checked before reading, so that a test flooding the pipe cannot outrun its deadline.
        if drain_until is None and current is not None and time.monotonic() >= current[1]:
            break
        if not select.select([fd], [], [], 0 if drain_until is not None else wait)[0] or (drain_until is not None and time.monotonic() > drain_until):
            if drain_until is not None:
                return
            continue
        lines, eof = _lines(fd, state)
        if eof:
            # Every writer is gone: pytest ended, or a test closed the pipe. An armed deadline still holds.
            if current is None or ended.wait(max(0.0, current[1] - time.monotonic())):
                return
            break
        for line in lines:
            try:
                record = json.loads(line.decode("utf-8")) if line is not None else None
            except ValueError:
                record = None
            if not isinstance(record, dict):
                report.reject("the plugin sent a line that is no JSON record" if line is not None else "the plugin sent a line longer than %d bytes" % MAX_LINE)
            elif "progress" not in record:
                report.add(record)
                if current is not None and record.get("event") == "test" and record.get("when") == "teardown" and record.get("nodeid") == current[0]:
                    current = (current[0], current[1], True)
            # A start never moves an armed deadline, and only the end of the armed test, after its
            # teardown was reported (as pytest orders them), disarms it: a test cannot end its own
            # bound with one forged line (it takes a forged teardown, which the real one then
            # shows up as a phase reported twice).
            elif limit > 0 and record["progress"] == "start" and current is None:
                current = (record.get("nodeid"), time.monotonic() + limit, False)
            elif limit > 0 and record["progress"] == "end" and current is not None and current[2] and record.get("nodeid") == current[0]:
                current = None
    if current is not None and proc.poll() is None:
        fired.append(str(current[0]))
        _kill_group(proc)


def forbid_dumping():
    """After this, a process of the same user can open neither /proc/<us>/fd nor /proc/<us>/mem."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.exit("worldline_runs: prctl(PR_SET_DUMPABLE) failed: the key would be readable by tests")


def signer_of(key, file):
    """The signer of our records for OUT/`file`: plain JSON lines when no key was given."""
    return signer(key, file) if key is not None else lambda record: json.dumps(record, sort_keys=True) + "\n"


def signer(key, file):
    """Signs the records of OUT/`file` (`<hmac-sha256 hex> <json with seq and file>`): the reporting
    plugin's, and a driver's own results; tests can write the folder they land in, but not sign a
    line. Each line names the file it was signed for, and the key is this container's alone, so a
    signed line moved to another run's report, another file or another container is caught."""
    state = {"seq": 0}

    def sign(record):
        body = json.dumps(dict(record, seq=state["seq"], file=file), sort_keys=True)
        state["seq"] += 1
        return hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest() + " " + body + "\n"

    return sign


# The one command a zygote child can stand in for: a cold start of this, with the same arguments.
PYTEST_CMD = ["python3", "-S", "/worldline/lib/worldline_pytest.py"]
# Seconds the first run waits for the zygote's imports before starting cold.
ZYGOTE_READY_S = 60


class _Forked:
    """A run the zygote forked, with the part of Popen's interface run_once uses."""

    def __init__(self, sock, pid, stdout):
        self.sock, self.pid, self.stdout = sock, pid, stdout
        self.returncode = None
        self.lock = threading.Lock()

    def _read_status(self, wait_s):
        with self.lock:
            if self.returncode is None and select.select([self.sock], [], [], wait_s)[0]:
                line = _read_line(self.sock)
                # The zygote gone without a word: the run's status is unknown, counted as killed.
                self.returncode = int(line) if line else -signal.SIGKILL
            return self.returncode

    def poll(self):
        return self._read_status(0)

    def wait(self):
        # Never blocks holding the lock: the watcher thread may need poll() meanwhile.
        while self._read_status(0.2) is None:
            pass
        return self.returncode


def _read_line(sock):
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            return None
        data += chunk
    return data.strip()


class Zygote:
    """The runner's side of worldline_zygote.py: started once, asked for a child per run."""

    def __init__(self, suite_env):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # The runs' environment: the zygote is the start of every run it serves.
        env = dict(suite_env, WORLDLINE_ZYGOTE_FD=str(theirs.fileno()))
        self.proc = subprocess.Popen(
            ["python3", "-S", "/worldline/lib/worldline_zygote.py"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env, pass_fds=[theirs.fileno()], start_new_session=True, cwd="/repo",
        )
        theirs.close()
        self.ready = None

    @staticmethod
    def serves(cmd, extra_env):
        """Only a plain pytest run, and an environment the interpreter read nothing of at start-up (ours only)."""
        return cmd[: len(PYTEST_CMD)] == PYTEST_CMD and all(k.startswith("WORLDLINE_") for k in (extra_env or {}))

    def spawn(self, args, env, report_w):
        """A forked run writing to a new output pipe, or None when the zygote refused or is gone (the run then starts cold)."""
        try:
            if self.ready is None:
                # A zygote that does not get ready in time (a hung import) is given up, not waited on.
                self.ready = bool(select.select([self.sock], [], [], ZYGOTE_READY_S)[0]) and _read_line(self.sock) == b"ready"
            if not self.ready:
                _kill_group(self.proc)
                return None
            body = json.dumps({"args": args, "env": env, "cwd": "/repo"}).encode("utf-8")
            out_r, out_w = os.pipe()
            try:
                message = b"%d\n" % len(body) + body
                sent = self.sock.sendmsg([message[: 1 << 15]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [out_w, report_w]).tobytes())])
                self.sock.sendall(message[sent:])
            finally:
                os.close(out_w)
            pid = _read_line(self.sock)
            if pid is None:
                os.close(out_r)
                self.ready = False
                return None
            return _Forked(self.sock, int(pid), os.fdopen(out_r, "rb"))
        except OSError:
            self.ready = False
            return None

    def close(self):
        self.sock.close()
        _kill_group(self.proc)
        self.proc.wait()


@contextlib.contextmanager
def zygote_if(wanted, suite_env):
    """A Zygote for the block when `wanted` (it pays off from two runs it serves), else None; closed after."""
    zygote = Zygote(suite_env) if wanted else None
    try:
        yield zygote
    finally:
        if zygote is not None:
            zygote.close()


def _keep(zygote):
    """The processes a run's end leaves alive besides us: the zygote, waiting for the next run."""
    return (zygote.proc.pid,) if zygote is not None else ()


def run_once(out, i, timeout_s, test_limit_s, cap, cmd, key, suite_env, extra_env=None, zygote=None):
    """One pytest run; its files are named with `i` (see the module's docstring). Returns what the
    files say, from our memory: {"exit", "capped" (bytes dropped), "test_timeout" (node id or None)}."""
    env = dict(suite_env, **(extra_env or {}))
    records, w = os.pipe()
    env["WORLDLINE_REPORT_FD"] = str(w)
    report = _Report(os.path.join(out, "report-%s.jsonl" % i), key)
    proc = zygote.spawn(cmd[len(PYTEST_CMD) :], env, w) if zygote is not None and Zygote.serves(cmd, extra_env) else None
    forked = proc is not None
    if not forked:
        # Its own session: a timeout kills the suite and whatever it started, not us.
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, pass_fds=[w], start_new_session=True, cwd="/repo")
    os.close(w)
    timed_out = []
    ended = threading.Event()
    test_timed_out = []
    watcher = threading.Thread(target=_collect, args=(records, test_limit_s, proc, report, ended, test_timed_out), daemon=True)
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
    with open(os.path.join(out, "output-%s.log" % i), "wb") as log:
        kept, dropped, let_go = _read_output(proc, report, log, cap, _keep(zygote))
    code = proc.wait()
    timer.cancel()
    # What the suite left running after it ended goes too: its group, and every other process but the zygote.
    _kill_group(proc)
    kill_strays(_keep(zygote))
    ended.set()
    watcher.join()
    os.close(records)
    report.close()
    if let_go and report.exitstatus is not None:
        # Killed after its session reported its end: its status is the one it reported.
        code = int(report.exitstatus)
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
    proc.stdout.close()
    return {"exit": code, "capped": dropped, "test_timeout": test_timed_out[0] if test_timed_out else None, "zygote": forked}


def _read_output(proc, report, log, cap, keep):
    """Copies the run's output to `log` (the first `cap` bytes; the rest counted) until the pipe's end,
    which comes when pytest is gone and so is every other holder: once pytest exits, whatever is
    left (a daemon in a session of its own keeps the pipe) is killed, and a pipe still open DRAIN_S
    later is given up. A pytest still there FINISH_GRACE_S after it reported its session's end is
    killed. Returns (bytes kept, bytes dropped, whether pytest was killed after its end)."""
    fd = proc.stdout.fileno()
    kept = dropped = 0
    exited_at = None
    let_go = False
    while True:
        if exited_at is None and proc.poll() is not None:
            exited_at = time.monotonic()
            _kill_group(proc)
            kill_strays(keep)
        elif exited_at is None and not let_go and report.finished_at is not None and time.monotonic() - report.finished_at > FINISH_GRACE_S:
            let_go = True
            _kill_group(proc)
        wait = 0.2 if exited_at is None else max(0.0, exited_at + DRAIN_S - time.monotonic())
        if not select.select([fd], [], [], wait)[0]:
            if exited_at is not None:
                break
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        room = cap - kept
        if room > 0:
            log.write(chunk[:room])
            kept += min(room, len(chunk))
        dropped += max(0, len(chunk) - max(room, 0))
    return kept, dropped, let_go


def _sh_step(script, cap, keep):
    """A step of ours (our environment, none of the suite's variables): its exit status and the first `cap` bytes of its output."""
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
    kill_strays(keep)
    return code, b"".join(kept).decode("utf-8", "replace")


def run_steps(out, plan_name):
    key, suite_env, inputs = boot(out, [plan_name])
    sign = signer_of(key, "steps.jsonl")
    plan = json.loads(inputs[plan_name].decode("utf-8"))
    cap = int(plan["cap"])
    runs = [step for step in plan["steps"] if "run" in step and Zygote.serves(step["run"], step.get("env"))]
    # One run gains nothing from a zygote; it starts while the first steps (patches) run.
    with zygote_if(plan.get("zygote", True) and len(runs) >= 2, suite_env) as zygote:
        _steps(out, plan, cap, key, sign, suite_env, zygote)


def _steps(out, plan, cap, key, sign, suite_env, zygote):
    with open(os.path.join(out, "steps.jsonl"), "w") as steps:
        for step in plan["steps"]:
            started = time.time()
            record = {"name": step["name"]}
            if "sh" in step:
                record["exit"], record["output"] = _sh_step(step["sh"], cap, _keep(zygote))
            else:
                record.update(run_once(out, step["name"], float(step["timeout"]), float(step["test_limit"]), cap, step["run"], key, suite_env, step.get("env"), zygote))
            record.update(started=started, ended=time.time())
            steps.write(sign(record))
            steps.flush()
            if "sh" in step and record["exit"] != 0:
                break


def main(argv):
    if argv[2] == "--steps":
        # The plan is a file of OUT, read with the key (argv names it as the container sees it).
        run_steps(argv[1], os.path.relpath(argv[3], argv[1]))
        return
    sep = argv.index("--")
    out, runs, timeout_s, test_limit_s, cap = argv[1], int(argv[2]), float(argv[3]), float(argv[4]), int(argv[5])
    cmd = argv[sep + 1 :]
    key, suite_env, _ = boot(out)
    for i in range(1, runs + 1):
        if run_once(out, i, timeout_s, test_limit_s, cap, cmd, key, suite_env)["exit"] == TIMEOUT_EXIT:
            break


if __name__ == "__main__":
    main(sys.argv)
