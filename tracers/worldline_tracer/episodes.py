"""Function-level episodes cut from a raw trace, as CWM cut them out of pytest traces.

Every complete call of an in-scope function (a ``def``, not a lambda, comprehension or generator
resume) at raw stack depth <= ``max_depth`` becomes an episode. Inside an episode, each call of an
eligible function is stepped into with probability ``step_in`` (one draw of a seeded
``random.Random(seed)`` per eligible call, in trace order; nesting at most ``max_step_depth`` below
the entry); otherwise the call stays one line in the caller. The context is the entry function's
source with ``  # << START_OF_TRACE`` on its ``def`` line, then the source of each function stepped
into, each once, in order of first call, separated by blank lines.
"""
import random

from .render import diff_frames, has_special_token, mark_entry, render, tokens_only_as_separators
from .source import SourceIndex, source_lines


class _Act(object):
    __slots__ = ("call", "ret", "items")

    def __init__(self, call):
        self.call = call
        self.ret = None
        self.items = []


def call_tree(events):
    """Nest raw events into activations (by depth); returns the top-level activations."""
    roots = []
    stack = []
    for ev in events:
        d = ev["depth"]
        kind = ev["kind"]
        if kind == "call":
            del stack[d:]
            act = _Act(ev)
            if stack:
                stack[-1].items.append(act)
            else:
                roots.append(act)
            stack.append(act)
        else:
            if len(stack) <= d:
                continue  # orphan event (its call was not traced)
            del stack[d + 1:]
            act = stack[d]
            if kind == "return":
                act.ret = ev
                stack.pop()
            else:
                act.items.append(ev)
    return roots


def _walk(acts):
    for act in acts:
        yield act
        for item in act.items:
            if isinstance(item, _Act):
                for sub in _walk([item]):
                    yield sub


class EpisodeBuilder(object):
    def __init__(self, step_in=0.5, max_depth=None, max_step_depth=2, seed=0, sources=None,
                 max_frames=None):
        self.step_in = float(step_in)
        self.max_depth = max_depth
        self.max_step_depth = int(max_step_depth)
        self.seed = seed
        self.sources = sources if sources is not None else SourceIndex()
        self.max_frames = max_frames
        self.dropped = {}

    def _func(self, act):
        """FuncInfo for an activation that can be an episode or be stepped into, else None."""
        call = act.call
        if act.ret is None or call.get("resume") or act.ret.get("lines_capped"):
            return None
        name = call["function"].rsplit(".", 1)[-1]
        info = self.sources.at(call["file"], call["line"], name)
        if info is None or not info.is_def:
            return None
        return info

    def _drop(self, reason):
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def build(self, events):
        rng = random.Random(self.seed)
        episodes = []
        for act in _walk(call_tree(events)):
            if self.max_depth is not None and act.call["depth"] > self.max_depth:
                continue
            info = self._func(act)
            if info is None:
                continue
            ep = self._episode(act, info, rng)
            if ep is not None:
                episodes.append(ep)
        return episodes

    def _episode(self, act, info, rng):
        frames = []
        callees = []  # (file, FuncInfo) in order of first step-in
        seen = {(act.call["file"], info.start_line)}
        line_of = self.sources.line

        def emit(act, info, rel):
            call = act.call
            frames.append({"kind": "call", "line": info.def_line, "depth": rel, "function": call["function"],
                           "locals": call["locals"], "source": line_of(call["file"], info.def_line)})
            for item in act.items:
                if isinstance(item, _Act):
                    if rel + 1 > self.max_step_depth:
                        continue
                    sub = self._func(item)
                    if sub is None:
                        continue
                    if rng.random() < self.step_in:
                        key = (item.call["file"], sub.start_line)
                        if key not in seen:
                            seen.add(key)
                            callees.append((item.call["file"], sub))
                        emit(item, sub, rel + 1)
                    continue
                kind = item["kind"]
                fr = {"kind": kind, "line": item["line"], "depth": rel, "function": item["function"]}
                if kind == "line":
                    fr["locals"] = item["locals"]
                else:
                    fr["value"] = item["value"]
                fr["source"] = line_of(item["file"], item["line"])
                frames.append(fr)
            ret = act.ret
            frames.append({"kind": "return", "line": ret["line"], "depth": rel, "function": ret["function"],
                           "value": ret["value"], "source": line_of(ret["file"], ret["line"])})

        emit(act, info, 0)
        diff_frames(frames)
        entry_file = act.call["file"]
        entry_src = source_lines(entry_file, info.start_line, info.end_line)
        parts = [mark_entry(entry_src, info.def_line - info.start_line)]
        for f, sub in callees:
            parts.append(source_lines(f, sub.start_line, sub.end_line))
        context = "\n".join(parts)
        if any(not fr["source"] for fr in frames):
            self._drop("missing_source")
            return None
        if self.max_frames is not None and len(frames) > self.max_frames:
            self._drop("too_many_frames")
            return None
        text = render(context, frames)
        if not tokens_only_as_separators(text, frames) and (
                has_special_token(context) or any(has_special_token(fr["source"]) or
                                                  has_special_token(fr.get("value", "")) or
                                                  any(has_special_token(n + v) for n, v in fr.get("locals", ()))
                                                  for fr in frames)):
            self._drop("special_token_in_text")
            return None
        return {
            "function": act.call["function"],
            "file": entry_file,
            "line": info.def_line,
            "depth": act.call["depth"],
            "context": context,
            "frames": frames,
            "text": text,
            "frame_count": len(frames),
            "line_events": sum(1 for fr in frames if fr["kind"] == "line"),
            "callees": [sub.qualname for _, sub in callees],
        }


def build_episodes(events, step_in=0.5, max_depth=None, max_step_depth=2, seed=0, sources=None,
                   max_frames=None):
    """Episodes (dicts) from raw events; see the module docstring."""
    return EpisodeBuilder(step_in=step_in, max_depth=max_depth, max_step_depth=max_step_depth,
                          seed=seed, sources=sources, max_frames=max_frames).build(events)
