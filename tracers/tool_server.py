"""The agent's tool server: one process in the rollout container that runs each tool call's
command as a `docker exec` of it would, so a rollout pays one exec, not one per call (stdlib only).

Started by one exec of our own interpreter (isolated: nothing of the repository's build runs here,
pipeline/sandbox/our_python.ts), with none of the unit's variables in its environment, and its
stdin and stdout as the channel. The first line it reads says how a command's environment differs
from the server's own ({"set": {NAME: value}, "drop": [NAME]}: the unit's variables in, the ones the
exec set for the server alone out); it says "ready", then each request is a JSON line
{"cmd": [...], "timeout": s, "cap": bytes, "own"?: true}; each answer is a line "EXIT KEPT DROPPED"
and then KEPT bytes of output. The command gets what an exec of it gives it: the exec's
environment (the server's own as the engine passed it, read from /proc/self/environ before the
interpreter touched anything, changed as the first line says), /repo as its folder, stdin from
/dev/null, stdout and stderr on one pipe, its own session, and `timeout -k 5 S` around it. An
`own` command (our agent tools) runs with the server's own environment and no `timeout` of the
image's: the server kills its session at the timeout (exit 137). One pipe, so the output is in
the order it was written: the engine reads two streams and orders them as they arrive, which is
that order unless writes to both come closer together than it reads (then it is a race).
Like the engine, the answer waits for output up to 2 s after the command exits (a background child
that keeps the pipes open is cut there). Output past `cap` bytes is counted, not kept.
"""
import json
import os
import select
import signal
import subprocess
import sys
import time

# The engine's own wait for an exec's output after its process exits.
DRAIN_AFTER_EXIT_S = 2.0


def exec_env():
    with open("/proc/self/environ", "rb") as f:
        pairs = [kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv]
    return {k: v for k, v in pairs}


def command_env(own, change):
    """The server's own environment changed as the host said: what an exec of the command gets."""
    env = dict(own)
    for name in change.get("drop", []):
        env.pop(name.encode("utf-8"), None)
    env.update({k.encode("utf-8"): v.encode("utf-8") for k, v in change.get("set", {}).items()})
    return env


def run(req, env):
    own = req.get("own", False)
    proc = subprocess.Popen(
        req["cmd"] if own else ["timeout", "-k", "5", str(req["timeout"])] + req["cmd"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd="/repo",
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + float(req["timeout"]) if own else None
    cap = req["cap"]
    kept = bytearray()
    dropped = 0
    open_fds = [proc.stdout.fileno()]
    exited_at = None
    while open_fds:
        if deadline is not None and time.monotonic() > deadline:
            deadline = None
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if exited_at is None and proc.poll() is not None:
            exited_at = time.monotonic()
        wait = 0.05 if exited_at is None else DRAIN_AFTER_EXIT_S - (time.monotonic() - exited_at)
        if wait <= 0:
            break
        ready, _, _ = select.select(open_fds, [], [], wait)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.remove(fd)
                continue
            room = max(0, cap - len(kept))
            kept += chunk[:room]
            dropped += len(chunk) - min(room, len(chunk))
    proc.stdout.close()
    code = proc.wait()
    # As the engine reports it: a command killed by a signal exits 128 + the signal.
    return (128 - code if code < 0 else code), bytes(kept), dropped


def main():
    own = exec_env()
    env = command_env(own, json.loads(sys.stdin.buffer.readline() or b"{}"))
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    for line in sys.stdin.buffer:
        req = json.loads(line)
        code, kept, dropped = run(req, own if req.get("own") else env)
        out.write(b"%d %d %d\n" % (code, len(kept), dropped) + kept)
        out.flush()


if __name__ == "__main__":
    main()
