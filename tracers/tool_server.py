"""The agent's tool server: one process in the rollout container that runs each tool call's
command as a `docker exec` of it would, so a rollout pays one exec, not one per call (stdlib only).

Started by one exec (python3 -I, so nothing on the repository's import path is imported) with its
stdin and stdout as the channel: it says "ready", then each request is a JSON line {"cmd": [...], "timeout": s, "cap": bytes};
each answer is a line "EXIT KEPT DROPPED" and then KEPT bytes of output. The command gets what an
exec gives it: the exec's environment (read from /proc/self/environ: the one the engine passed,
before the interpreter touched anything), /repo as its folder, stdin from /dev/null, stdout and
stderr on one pipe, its own session, and `timeout -k 5 S` around it. One pipe, so the output is in
the order it was written: the engine reads two streams and orders them as they arrive, which is
that order unless writes to both come closer together than it reads (then it is a race).
Like the engine, the answer waits for output up to 2 s after the command exits (a background child
that keeps the pipes open is cut there). Output past `cap` bytes is counted, not kept.
"""
import json
import os
import select
import subprocess
import sys
import time

# The engine's own wait for an exec's output after its process exits.
DRAIN_AFTER_EXIT_S = 2.0


def exec_env():
    with open("/proc/self/environ", "rb") as f:
        pairs = [kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv]
    return {k: v for k, v in pairs}


def run(req, env):
    proc = subprocess.Popen(
        ["timeout", "-k", "5", str(req["timeout"])] + req["cmd"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd="/repo",
        env=env,
        start_new_session=True,
    )
    cap = req["cap"]
    kept = bytearray()
    dropped = 0
    open_fds = [proc.stdout.fileno()]
    exited_at = None
    while open_fds:
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
    env = exec_env()
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    for line in sys.stdin.buffer:
        code, kept, dropped = run(json.loads(line), env)
        out.write(b"%d %d %d\n" % (code, len(kept), dropped) + kept)
        out.flush()


if __name__ == "__main__":
    main()
