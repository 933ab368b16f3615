"""pytest's start-up paid once per container: a fork server for the step runner (worldline_runs.py).

A container that runs pytest several times (grading, then the traces before and after the fix)
paid the interpreter's start, site.main() and `import pytest` (about 120 ms of a 170 ms run in an
env image) on every run. The runner starts this once, before its first step, as
`python3 -S worldline_zygote.py` with the container's environment and a socket on
WORLDLINE_ZYGOTE_FD. It runs site.main() and imports pytest, nothing else: the repository's own
modules are never imported here (the code under test changes between runs), and if anything it
imported came from /repo (a .pth, a PYTHONPATH entry shadowing a package) it refuses and every
run starts cold, as before. For each run the runner sends the arguments of
`python3 -S worldline_pytest.py ARGS...`, the run's environment, and two descriptors (the output
pipe, the report pipe); we fork a child that becomes that run: its own session, stdin /dev/null,
stdout and stderr the output pipe, the environment replaced, the reporting plugin imported first
with the import machinery as it was before site.main() (so no .pth-installed hook sees the report
descriptor, as in worldline_pytest.py), the working directory first on sys.path, then
`pytest.main`. We send the child's pid, then its exit status as Popen gives it.

The zygote holds no key (it is exec'd, not forked from the runner) and makes itself non-dumpable,
so a test (same user) cannot write into its memory to change a later run; each child makes
itself dumpable again, as a cold run is. A test can kill it: the runner then starts the
remaining runs cold. Standard library only; Python 3.8+.

A forked child shares the zygote's memory copy-on-write, and every page it writes is copied
(page faults are dear in these VMs). Two writers made a forked run dearer in CPU than the cold
start it replaced (textstats' image, 4 runs: 2.2 s forked against 1.65 s cold): the interpreter's
teardown at exit, which frees every object and so writes nearly every page (about 0.18 s a run),
and the cyclic GC's passes over the zygote's objects. So the zygote freezes its objects
(`gc.freeze()`: the collector never visits them; they are pytest's modules, alive for the whole
run anyway) and a child ends as `multiprocessing`'s forked children do: its non-daemon threads are
waited for, `atexit` handlers run and the standard streams are flushed, as at a normal exit, then `os._exit` with pytest's status,
without the teardown. What a run leaves to the teardown alone (the `__del__` of objects still
referenced from modules, a leaked buffered file's last flush) does not happen in a forked run.
"""
import atexit
import ctypes
import gc
import json
import os
import socket
import sys
import time

PR_SET_DUMPABLE = 4
MAX_FDS = 2
# The import machinery before site.main(): what worldline_pytest.py imports the plugin with.
_BARE_META_PATH = list(sys.meta_path)
_BARE_PATH_HOOKS = list(sys.path_hooks)


def _dumpable(flag):
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, flag, 0, 0, 0)


def _warm():
    """site.main() and pytest imported; False when any module loaded came from /repo."""
    import site

    site.main()
    try:
        import pytest  # noqa: F401
    except Exception:
        return False
    for module in list(sys.modules.values()):
        where = getattr(module, "__file__", None) or ""
        if where == "/repo" or where.startswith("/repo/"):
            return False
    return True


def _receive(sock):
    """One request (`<length>\\n<json>` with the descriptors on its first bytes), or (None, fds) at end of stream."""
    fds = []
    data, ancillary, _, _ = sock.recvmsg(1 << 16, socket.CMSG_SPACE(MAX_FDS * 4))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += [int.from_bytes(payload[i : i + 4], sys.byteorder) for i in range(0, len(payload) - len(payload) % 4, 4)]
    if not data:
        return None, fds
    size, _, body = data.partition(b"\n")
    chunks = [body]
    got = len(body)
    while got < int(size):
        chunk = sock.recv(min(1 << 16, int(size) - got))
        if not chunk:
            return None, fds
        chunks.append(chunk)
        got += len(chunk)
    return json.loads(b"".join(chunks).decode("utf-8")), fds


def _serve(sock):
    """Forks a child per request; returns (request, fds) in the child, None in the zygote once the runner is gone."""
    while True:
        request, fds = _receive(sock)
        if request is None or len(fds) != 2:
            return None
        pid = os.fork()
        if pid == 0:
            sock.close()
            os.setsid()
            return request, fds
        for fd in fds:
            os.close(fd)
        # The runner kills the run's process group: it must be the child's own before we name it.
        while True:
            try:
                if os.getpgid(pid) == pid:
                    break
            except ProcessLookupError:
                break
            time.sleep(0.0005)
        sock.sendall(b"%d\n" % pid)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        sock.sendall(b"%d\n" % code)


def _become_run(request, fds):
    """In the child: the process a cold `python3 -S worldline_pytest.py ARGS` would have been, up to
    worldline_pytest.run (which makes it `python3 -m pytest ARGS` for the suite); returns ARGS."""
    out, report = fds
    _dumpable(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    for fd in (null, out):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ["WORLDLINE_REPORT_FD"] = str(report)
    sys.argv = ["/worldline/lib/worldline_pytest.py"] + request["args"]
    if hasattr(sys, "orig_argv"):
        sys.orig_argv = ["python3", "-S"] + sys.argv
    machinery = sys.meta_path, sys.path_hooks, sys.path_importer_cache
    sys.meta_path, sys.path_hooks, sys.path_importer_cache = list(_BARE_META_PATH), list(_BARE_PATH_HOOKS), {}
    try:
        import worldline_report  # noqa: F401  (takes the report pipe's descriptor on import)
    finally:
        sys.meta_path, sys.path_hooks, sys.path_importer_cache = machinery
    return request["args"]


def main():
    sock = socket.socket(fileno=int(os.environ.pop("WORLDLINE_ZYGOTE_FD")))
    _dumpable(0)
    ready = _warm()
    sock.sendall(b"ready\n" if ready else b"refused\n")
    if not ready:
        sys.exit(0)
    gc.freeze()
    served = _serve(sock)
    if served is None:
        sys.exit(0)
    return _become_run(*served)


def _exit_forked(code):
    """A normal exit's effects a run can see (its threads waited for, atexit handlers, flushed streams), without the teardown."""
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


if __name__ == "__main__":
    args = main()
    import worldline_pytest

    # As in a cold run, where it is __main__: no module of that name for a test to find.
    del sys.modules["worldline_pytest"]
    _exit_forked(worldline_pytest.run(args))
