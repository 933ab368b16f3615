"""Drive `worldline serve` with OpenEnv's own client: parallel sessions, two policies.

A trainer copies this: OpenEnv's `GenericEnvClient` (pip install openenv==0.10.0) speaks to the
server with plain dict actions, and no Worldline code runs on the trainer's side.

    worldline serve --dataset out/demo/dataset --port 8000 &
    worldline export out/demo/dataset > tasks.jsonl      # the gold patches, for the oracle only
    python3 examples/serve_client.py --url http://127.0.0.1:8000 --tasks tasks.jsonl --sessions 4

Policies:
- oracle: replays the task's gold patch through the agent's tools (view, then one `edit` per hunk,
  then `submit`), as Worldline's own oracle does: it should earn reward 1.
- scripted: a stand-in for a model (swap `scripted_turns` for your model's tool calls): it runs the
  failing tests, looks around and submits without a fix: reward 0.
Prints one JSON line per episode: task, policy, reward, turns, exit status.
"""

import argparse
import json
import os
from concurrent.futures import ThreadPoolExecutor

from openenv.core.generic_client import GenericEnvClient


def hunks_of(patch):
    """(path, search, replace) per hunk of a unified diff: each hunk's old side becomes its new side."""
    hunks, path, old, new, lines = [], "", None, None, patch.splitlines(keepends=True)

    def flush():
        if old is not None:
            hunks.append((path, "".join(old), "".join(new)))

    for i, line in enumerate(lines):
        if line.startswith("+++ "):
            flush()
            old = new = None
            path = line[4:].strip()
            path = path[2:] if path.startswith("b/") else path
        elif line.startswith("--- "):
            flush()
            old = new = None
        elif line.startswith("@@"):
            flush()
            old, new = [], []
        elif old is not None and line.startswith("\\"):
            # "\ No newline at end of file": the line before it had no newline on its side.
            prev = lines[i - 1]
            for side in ([new] if prev.startswith("+") else [old] if prev.startswith("-") else [old, new]):
                side[-1] = side[-1].rstrip("\n")
        elif old is not None:
            body = line[1:]
            if line.startswith(" "):
                old.append(body)
                new.append(body)
            elif line.startswith("-"):
                old.append(body)
            elif line.startswith("+"):
                new.append(body)
    flush()
    return hunks


def call(tool, **arguments):
    return {"type": "call_tool", "tool_name": tool, "arguments": arguments}


def oracle_turns(task):
    hunks = hunks_of(task["patch"])
    for path in dict.fromkeys(h[0] for h in hunks):
        yield call("view", path=path)
    for path, search, replace in hunks:
        yield call("edit", path=path, search=search, replace=replace)
    yield call("submit")


def scripted_turns(task):
    yield call("bash", command="python3 -m pytest -q -x 2>&1 | tail -5")
    yield call("view", path=".")
    yield call("submit")


POLICIES = {"oracle": oracle_turns, "scripted": scripted_turns}


def episode(url, token, task, policy):
    headers = {"Authorization": f"Bearer {token}"} if token else None
    with GenericEnvClient(base_url=url, headers=headers, message_timeout_s=600).sync() as env:
        result = env.reset(task_id=task["instance_id"], policy=policy)
        turns = 0
        for action in POLICIES[policy](task):
            result = env.step(action)
            turns += 1
            if result.done:
                break
        meta = result.observation.get("metadata", {})
        return {"task_id": task["instance_id"], "policy": policy, "reward": result.reward, "done": result.done, "turns": turns, "exit_status": meta.get("exit_status")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--tasks", required=True, help="worldline export DIR > tasks.jsonl (the oracle needs the gold patches)")
    ap.add_argument("--sessions", type=int, default=4, help="episodes in flight at once")
    ap.add_argument("--policies", default="oracle,scripted")
    args = ap.parse_args()
    with open(args.tasks) as f:
        tasks = [json.loads(line) for line in f if line.strip()]
    token = os.environ.get("WORLDLINE_SERVE_TOKEN")
    jobs = [(task, policy) for task in tasks for policy in args.policies.split(",")]
    with ThreadPoolExecutor(max_workers=args.sessions) as pool:
        for row in pool.map(lambda job: episode(args.url, token, *job), jobs):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
