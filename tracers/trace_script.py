"""Trace a standalone program on one input, as CWM traced competitive-programming solutions.

Usage: python3 trace_script.py SCRIPT INPUT_FILE   (stdlib only; run inside a sandbox)
Runs SCRIPT as __main__ with INPUT_FILE on stdin, tracing only SCRIPT's own code, and prints one
JSON object: the program's stdout, how it ended, and its function-level episodes.
"""
import io
import json
import os
import runpy
import sys

from worldline_tracer import __version__
from worldline_tracer.episodes import build_episodes
from worldline_tracer.tracer import Tracer


def main(argv):
    script, input_file = os.path.abspath(argv[1]), argv[2]
    step_in = float(os.environ.get("WORLDLINE_TRACE_STEP_IN", "1"))
    seed = os.environ.get("WORLDLINE_TRACE_SEED", "0")
    max_events = int(os.environ.get("WORLDLINE_TRACE_MAX_EVENTS", "100000"))
    out = io.StringIO()
    real_stdin, real_stdout = sys.stdin, sys.stdout
    tracer = Tracer(scope=lambda filename: filename == script, max_events=max_events)
    status, error = "ok", None
    with open(input_file, encoding="utf-8") as stdin:
        sys.stdin, sys.stdout = stdin, out
        sys.argv = [script]
        tracer.start()
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            status = "ok" if e.code in (None, 0) else "exit"
            error = None if status == "ok" else "SystemExit(%r)" % (e.code,)
        except BaseException as e:  # the program's own failure is a result, not ours
            status, error = "exception", "%s: %s" % (type(e).__name__, e)
        finally:
            tracer.stop()
            sys.stdin, sys.stdout = real_stdin, real_stdout
    episodes = build_episodes(tracer.events, step_in=step_in, seed="%s|%s" % (seed, script))
    json.dump({
        "stdout": out.getvalue(),
        "status": status,
        "error": error,
        "truncated": tracer.truncated,
        "tracer_error": tracer.error,
        "python": sys.version.split()[0],
        "tracer_version": __version__,
        "episodes": episodes,
    }, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)
