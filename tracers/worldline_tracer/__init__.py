"""Worldline's tracer: CWM-format line-level execution traces (standard library only, 3.8+).

Public API:
  Tracer(scope=None, root=None, backend="auto"|"monitoring"|"settrace", max_events=...,
         max_lines_per_call=..., serializer=None).start() / .stop() -> .events, .truncated, .error
  make_scope(root=None, include_tests=True, exclude=()) -> predicate(filename)
  trace_call(func, *args, _tracer_options={...}) -> (result, exception, tracer)
  Serializer(**caps)(value) -> repr string;  serialize(value)
  build_episodes(events, step_in=0.5, max_depth=None, max_step_depth=2, seed=0) -> [episode]
  render(context, frames) -> text;  diff_locals(frames);  parse(text) -> (context, frames)
The pytest plugin is worldline_tracer.plugin (``-p worldline_tracer.plugin``).
"""
from .episodes import build_episodes, call_tree
from .parse import ParseError, parse, roundtrip
from .render import diff_locals, render
from .serialize import Serializer, serialize
from .tracer import HAS_MONITORING, Tracer, make_scope, trace_call

__version__ = "0.1.0"
__all__ = ["Tracer", "make_scope", "trace_call", "Serializer", "serialize", "build_episodes",
           "call_tree", "render", "diff_locals", "parse", "roundtrip", "ParseError", "HAS_MONITORING",
           "__version__"]
