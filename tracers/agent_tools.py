"""The file tools of the agent environment, run inside the rollout container (stdlib only).

Usage: python3 agent_tools.py TOOL ARGS_BASE64_JSON
  view   {"path", "start"?, "end"?}     numbered lines of a file, or a folder listing
  edit   {"path", "search", "replace"}   replace the one exact occurrence of `search`
  create {"path", "content"}             write a new file (parents created)
Prints the observation; exits 1 with an error message the agent can read on misuse.
Run on our own interpreter (pipeline/sandbox/our_python.ts), not the image's, and with no
`timeout` of the image's around it: it ends itself after MAX_SECONDS.
"""
import base64
import json
import os
import signal
import sys

MAX_VIEW_LINES = 400
# As long as the environment gives a tool call (pipeline/agent/agent_env.ts).
MAX_SECONDS = 60


def resolve(path):
    return path if os.path.isabs(path) else os.path.join("/repo", path)


def view(args):
    path = resolve(args["path"])
    if os.path.isdir(path):
        entries = sorted(os.listdir(path))
        return "\n".join(e + ("/" if os.path.isdir(os.path.join(path, e)) else "") for e in entries if e != ".git")
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    start = max(1, int(args.get("start") or 1))
    end = min(len(lines), int(args.get("end") or start + MAX_VIEW_LINES - 1))
    width = len(str(end))
    body = "\n".join("%*d  %s" % (width, i, lines[i - 1]) for i in range(start, end + 1))
    more = "\n[lines %d-%d of %d]" % (start, end, len(lines)) if end < len(lines) or start > 1 else ""
    return body + more


def edit(args):
    path = resolve(args["path"])
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    search, replace = args["search"], args["replace"]
    count = text.count(search) if search else 0
    if count != 1:
        raise ValueError("search text found %d times in %s; it must occur exactly once" % (count, args["path"]))
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text.replace(search, replace, 1))
    return "edited %s" % args["path"]


def create(args):
    path = resolve(args["path"])
    if os.path.exists(path):
        raise ValueError("%s already exists; use edit to change it" % args["path"])
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(args["content"])
    return "created %s" % args["path"]


TOOLS = {"view": view, "edit": edit, "create": create}


def main():
    signal.alarm(MAX_SECONDS)
    try:
        tool = TOOLS[sys.argv[1]]
        args = json.loads(base64.b64decode(sys.argv[2]).decode("utf-8"))
        sys.stdout.write(tool(args))
    except (KeyError, ValueError, OSError, TypeError) as e:
        sys.stdout.write("error: %s" % (e,))
        sys.exit(1)


if __name__ == "__main__":
    main()
