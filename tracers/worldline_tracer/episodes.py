"""Function-level episodes cut from a raw trace, as CWM cut them out of pytest traces.

Every complete call of an in-scope function (a ``def``, not a lambda, comprehension or generator
resume) at raw stack depth <= ``max_depth`` becomes an episode. Inside an episode, each call of an
eligible function is stepped into with probability ``step_in`` (one draw of a seeded
``random.Random(seed)`` per eligible call, in trace order; nesting at most ``max_step_depth`` below
the entry); otherwise the call stays one line in the caller. The context is the entry function's
source with ``  # << START_OF_TRACE`` on its ``def`` line, then the source of each function stepped
into, each once, in order of first call, separated by blank lines.

An event appears in every episode whose activation contains it, so each event's frame is made
once per build and shared: its locals (diff-based against the previous call/line event of its
activation, or full right after a stepped-in callee returned: the only two forms it can take), its
rendered text, the JSON-escaped rendered text and the frame's JSON. ``encode`` joins those pieces
into exactly the bytes ``json.dumps(episode, sort_keys=True)`` gives for ``build``'s dicts.
"""
import json
import random

from . import native
from .render import (ACTION_SEP, ARG_SEP, FRAME_SEP, KIND_SEP, TRACE_CONTEXT_START, UNCHANGED,
                     has_special_token, locals_json, mark_entry)
from .source import SourceIndex, source_lines
from .tracer import _as_dict

_enc = json.encoder.encode_basestring_ascii  # json.dumps(str) with the defaults
_HEADER_JSON = _enc(TRACE_CONTEXT_START)[1:-1]
_SEP_JSON = _enc(FRAME_SEP)[1:-1]
_UNSET = object()
_MAX_CONTEXTS = 4096  # contexts kept across tests (SourceIndex.contexts); a few KB each


class _Act(object):
    __slots__ = ("call", "ret", "items", "func")

    def __init__(self, call):
        self.call = call
        self.ret = None
        self.items = []
        self.func = _UNSET  # EpisodeBuilder._func's answer, once asked


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


class _Frame(object):
    """One event's frame, shared by every episode that shows it: ``fields`` (the frame dict less
    "depth"), ``tail`` (its JSON after the "depth" key), ``text`` (rendered), ``text_json`` (the
    rendered text JSON-escaped, without quotes), ``clean`` (its only "<|" are its separators)."""
    __slots__ = ("fields", "tail", "text", "text_json", "clean", "is_line", "missing")

    def __init__(self, fields, fast):
        self.fields = fields
        kind = fields["kind"]
        self.is_line = kind == "line"
        source = fields["source"]
        self.missing = not source
        sep = KIND_SEP[kind]
        if fast is not None:  # the native module: the same pieces, or None off its fast path
            parts = fast(sep, fields.get("locals"), fields.get("value"), fields["function"],
                         _KIND_JSON[kind], fields["line"], source)
            if parts is not None:
                self.text, self.text_json, self.tail, self.clean = parts
                return
        tail = None
        if "locals" in fields:
            pairs = fields["locals"]
            # each name and value is JSON-encoded once, for both the text's locals object and the
            # frame's "locals" list (json.dumps would encode the frame again, in Python)
            encoded = _encode_pairs(pairs)
            if encoded is None:
                obj = locals_json(pairs)
            else:
                obj = "{" + ", ".join([n + ": " + v for n, v in encoded]) + "}"
                head = _head(fields, source)
                if head is not None:
                    tail = (head + ', "locals": [' + ", ".join(["[" + n + ", " + v + "]" for n, v in encoded])
                            + '], "source": ' + _enc(source) + "}")
            text = sep + obj + ACTION_SEP + source + FRAME_SEP
            seps = 3
        else:
            value = fields["value"]
            if type(value) is str:
                value_json = _enc(value)
                head = _head(fields, source)
                if head is not None:
                    tail = head + ', "source": ' + _enc(source) + ', "value": ' + value_json + "}"
            else:
                value_json = json.dumps(value)
            text = sep + ACTION_SEP + source + ARG_SEP + value_json + FRAME_SEP
            seps = 4
        self.text = text
        self.text_json = _enc(text)[1:-1]
        # exactly json.dumps(fields, sort_keys=True) after its "{": built by hand when every field
        # is of the types the frames hold (str, an int line), else by json
        self.tail = tail if tail is not None else json.dumps(fields, sort_keys=True)[1:]
        self.clean = '<":' not in text and text.count("<|") == seps

    def has_token(self):
        f = self.fields
        return (has_special_token(f["source"]) or has_special_token(f.get("value", ""))
                or any(has_special_token(n + v) for n, v in f.get("locals", ())))


_KIND_JSON = {kind: _enc(kind) for kind in KIND_SEP}
# the same in _episodes.c's order: call, line, return, exception
_KIND_SEPS = tuple(KIND_SEP[k] for k in ("call", "line", "return", "exception"))
_KINDS_JSON = tuple(_KIND_JSON[k] for k in ("call", "line", "return", "exception"))


def _clean_header(context):
    """Whether the episode's header (the context between its separators) holds "<|" only in those
    two separators and no '<":', the test each frame's ``clean`` makes of its own text; the C walk
    and the Python builder both ask it."""
    header = TRACE_CONTEXT_START + context + FRAME_SEP
    return '<":' not in header and header.count("<|") == 2


def _encode_pairs(pairs):
    """[(name JSON, value JSON)] for locals [[name, repr], ...], or None when a name or value is not
    a str or a name repeats (then json's own conversions and a dict's last-wins apply)."""
    try:
        encoded = [(_enc(n), _enc(v)) for n, v in pairs]
    except TypeError:
        return None
    if len(dict(pairs)) != len(encoded):
        return None
    return encoded


def _head(fields, source):
    """The sorted keys before "locals"/"source" of a frame's JSON, or None when a field's type
    needs json's own conversions."""
    function = fields["function"]
    line = fields["line"]
    if type(function) is not str or type(line) is not int or type(source) is not str:
        return None
    return '"function": ' + _enc(function) + ', "kind": ' + _KIND_JSON[fields["kind"]] + ', "line": ' + repr(line)


class _Cut(object):
    """An episode before it is turned into a dict or JSON."""
    __slots__ = ("act", "info", "frames", "callees", "context")

    def __init__(self, act, info, frames, callees, context):
        self.act = act
        self.info = info
        self.frames = frames    # [(relative depth, _Frame)]
        self.callees = callees  # [FuncInfo]
        self.context = context


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
        self._fast = native.mod.frame_parts if native.mod is not None else None
        self._diff = native.mod.line_locals if native.mod is not None else None
        self._frames = {}   # (id(event), full) -> _Frame, for the build under way
        self._marked = {}   # (file, start line) -> the entry's source with the START marker
        self._plain = {}    # (file, start line) -> a callee's source

    def _func(self, act):
        """FuncInfo for an activation that can be an episode or be stepped into, else None."""
        info = act.func
        if info is _UNSET:
            info = None
            call = act.call
            if act.ret is not None and not call.get("resume") and not act.ret.get("lines_capped"):
                info = self._def_at(call["file"], call["line"], call["function"])
            act.func = info
        return info

    def _def_at(self, filename, line, function):
        """FuncInfo of the ``def`` whose code object starts at ``line``, else None."""
        found = self.sources.at(filename, line, function.rsplit(".", 1)[-1])
        return found if found is not None and found.is_def else None

    def _drop(self, reason):
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def build(self, events):
        """Episodes as dicts."""
        return [self._as_dict(cut) for cut in self._cuts(events)]

    def encode(self, events):
        """Episodes as JSON texts, each exactly ``json.dumps(dict, sort_keys=True)`` of the dict
        ``build`` gives for it."""
        return [self._as_json(cut) for cut in self._cuts(events)]

    def encode_records(self, raw, into=None):
        """``encode`` straight from a Tracer's compact records (tracer.py's ``_raw``), without
        turning them into event dicts, as a batch (``new_batch``; ``into``, when given, is emptied
        and filled): by _episodes.c's walk when it is built and the test stays on its path, else by
        the Python over the records' dicts (the same bytes)."""
        if native.episodes is not None:
            contexts = self.sources.contexts
            if len(contexts) > _MAX_CONTEXTS:  # a bound on a large suite's memory
                contexts.clear()
            out = into if into is not None else new_batch()
            dropped = native.episodes.cut(raw, (
                self._def_at, self.sources._lines, self.sources.line, self._context_json, contexts,
                random.Random(self.seed).random, native.mod.frame_parts, native.mod.line_locals,
                _KIND_SEPS, _KINDS_JSON, UNCHANGED, _HEADER_JSON, _SEP_JSON, self.step_in, self.max_depth,
                self.max_step_depth, self.max_frames), out)
            if dropped is not None:
                for reason, n in dropped.items():
                    self.dropped[reason] = self.dropped.get(reason, 0) + n
                return out
        return Texts(self.encode([_as_dict(rec) for rec in raw]))

    def _context_json(self, entry_file, info, callees):
        """The context JSON-encoded, or None when its header holds "<|" other than its own
        separators (the C walk leaves such an episode to the Python). JSON escapes each character
        on its own, so the escaped sources joined by an escaped newline are the escaped context:
        each source is escaped once a run (SourceIndex.escaped), not once for every context it is
        in (h11: 1,454 contexts, a sixth of the walk's own work outside the frames)."""
        if not _clean_header(self._context(entry_file, info, callees)):
            return None
        parts = [self._escaped(self._marked, entry_file, info, True)]
        for f, sub in callees:
            parts.append(self._escaped(self._plain, f, sub, False))
        return '"' + "\\n".join(parts) + '"'

    def _escaped(self, cache, filename, info, entry):
        """A source of ``_context`` JSON-escaped, without quotes."""
        key = (filename, info.start_line, entry)
        escaped = self.sources.escaped.get(key)
        if escaped is None:
            escaped = self.sources.escaped[key] = _enc(self._source(cache, filename, info, entry))[1:-1]
        return escaped

    def _context(self, entry_file, info, callees):
        """The entry's source marked, then each stepped-into callee's ([(file, FuncInfo)])."""
        parts = [self._source(self._marked, entry_file, info, True)]
        for f, sub in callees:
            parts.append(self._source(self._plain, f, sub, False))
        return "\n".join(parts)

    def _cuts(self, events):
        rng = random.Random(self.seed)
        self._frames = {}
        try:
            for act in _walk(call_tree(events)):
                if self.max_depth is not None and act.call["depth"] > self.max_depth:
                    continue
                info = self._func(act)
                if info is None:
                    continue
                cut = self._episode(act, info, rng)
                if cut is not None:
                    yield cut
        finally:
            self._frames = {}

    def _frame(self, ev, full, fields):
        key = (id(ev), full)
        fr = self._frames.get(key)
        if fr is None:
            fr = self._frames[key] = _Frame(fields(), self._fast)
        return fr

    def _episode(self, act, info, rng):
        frames = []
        callees = []  # (file, FuncInfo) in order of first step-in
        seen = {(act.call["file"], info.start_line)}
        line_of = self.sources.line
        frame = self._frame
        max_step_depth = self.max_step_depth
        step_in = self.step_in
        diff = self._diff

        def emit(act, info, rel):
            call = act.call
            pairs = call["locals"]
            frames.append((rel, frame(call, True, lambda: {
                "kind": "call", "line": info.def_line, "function": call["function"],
                "locals": [[n, v] for n, v in pairs], "source": line_of(call["file"], info.def_line)})))
            prev = pairs   # the previous call/line event's locals in this activation
            full = False   # a stepped-in callee returned since: the next line shows full values
            for item in act.items:
                if isinstance(item, _Act):
                    if rel + 1 > max_step_depth:
                        continue
                    sub = self._func(item)
                    if sub is None:
                        continue
                    if rng.random() < step_in:
                        key = (item.call["file"], sub.start_line)
                        if key not in seen:
                            seen.add(key)
                            callees.append((item.call["file"], sub))
                        emit(item, sub, rel + 1)
                        full = True
                    continue
                if item["kind"] == "line":
                    frames.append((rel, frame(item, full, lambda: _line_fields(item, prev, full, line_of, diff))))
                    prev = item["locals"]
                    full = False
                else:
                    frames.append((rel, frame(item, False, lambda: {
                        "kind": item["kind"], "line": item["line"], "function": item["function"],
                        "value": item["value"], "source": line_of(item["file"], item["line"])})))
            ret = act.ret
            frames.append((rel, frame(ret, False, lambda: {
                "kind": "return", "line": ret["line"], "function": ret["function"], "value": ret["value"],
                "source": line_of(ret["file"], ret["line"])})))

        emit(act, info, 0)
        if any(fr.missing for _, fr in frames):
            self._drop("missing_source")
            return None
        if self.max_frames is not None and len(frames) > self.max_frames:
            self._drop("too_many_frames")
            return None
        context = self._context(act.call["file"], info, callees)
        clean = _clean_header(context) and all(fr.clean for _, fr in frames)
        if not clean and (has_special_token(context) or any(fr.has_token() for _, fr in frames)):
            self._drop("special_token_in_text")
            return None
        return _Cut(act, info, frames, [sub for _, sub in callees], context)

    @staticmethod
    def _source(cache, filename, info, entry):
        key = (filename, info.start_line)
        text = cache.get(key)
        if text is None:
            text = source_lines(filename, info.start_line, info.end_line)
            if entry:
                text = mark_entry(text, info.def_line - info.start_line)
            cache[key] = text
        return text

    @staticmethod
    def _as_dict(cut):
        frames = []
        for rel, fr in cut.frames:
            d = {"depth": rel}
            d.update(fr.fields)
            frames.append(d)
        call = cut.act.call
        return {
            "function": call["function"],
            "file": call["file"],
            "line": cut.info.def_line,
            "depth": call["depth"],
            "context": cut.context,
            "frames": frames,
            "text": TRACE_CONTEXT_START + cut.context + FRAME_SEP + "".join([fr.text for _, fr in cut.frames]),
            "frame_count": len(frames),
            "line_events": sum(1 for _, fr in cut.frames if fr.is_line),
            "callees": [sub.qualname for sub in cut.callees],
        }

    @staticmethod
    def _as_json(cut):
        call = cut.act.call
        context = _enc(cut.context)
        frames = cut.frames
        # the keys in sorted order, as json.dumps(sort_keys=True) writes them
        return "".join([
            '{"callees": ', json.dumps([sub.qualname for sub in cut.callees]),
            ', "context": ', context,
            ', "depth": ', repr(call["depth"]),
            ', "file": ', _enc(call["file"]),
            ', "frame_count": ', repr(len(frames)),
            ', "frames": [', ", ".join(['{"depth": %d, %s' % (rel, fr.tail) for rel, fr in frames]),
            '], "function": ', _enc(call["function"]),
            ', "line": ', repr(cut.info.def_line),
            ', "line_events": ', repr(sum(1 for _, fr in frames if fr.is_line)),
            ', "text": "', _HEADER_JSON, context[1:-1], _SEP_JSON,
            "".join([fr.text_json for _, fr in frames]), '"}'])


class Texts(object):
    """A test's episodes as JSON texts (str), with the methods of _episodes.c's Episodes, which
    holds them joined in one buffer: ``sizes()``, ``keep(ascending indices)``, ``texts()`` and
    ``body()``, the ASCII bytes of ``", ".join(texts)`` (the plugin's JSON array body)."""

    def __init__(self, texts):
        self._texts = texts

    def __len__(self):
        return len(self._texts)

    def sizes(self):
        return [len(t) for t in self._texts]

    def keep(self, indices):
        self._texts = [self._texts[i] for i in indices]

    def texts(self):
        return list(self._texts)

    def body(self):
        return ", ".join(self._texts).encode("ascii")


def new_batch():
    """An empty batch for ``encode_records(raw, into=...)``: _episodes.c's Episodes when it is built
    (reused from one test to the next, the memory it grew to is written again, not allocated and
    faulted in afresh), else None."""
    return native.episodes.Episodes() if native.episodes is not None else None


def _line_fields(ev, prev, full, line_of, diff):
    """A line event's frame: its locals in full, or diffed against ``prev`` (the previous
    call/line event's locals of the same activation) as render.diff_frames writes them; ``diff``
    is the native module's line_locals (the same list, or None off its fast path) or None."""
    pairs = ev["locals"]
    shown = diff(pairs, prev, full, UNCHANGED) if diff is not None else None
    if shown is None:
        shown = _shown_locals(pairs, prev, full)
    return {"kind": "line", "line": ev["line"], "function": ev["function"], "locals": shown,
            "source": line_of(ev["file"], ev["line"])}


def _shown_locals(pairs, prev, full):
    if full:
        return [[n, v] for n, v in pairs]
    if pairs is prev:  # the tracer shares an unchanged snapshot's list between events
        return [[n, UNCHANGED] for n, v in pairs]
    get = dict(prev).get
    return [[n, UNCHANGED if get(n, None) == v else v] for n, v in pairs]


def build_episodes(events, step_in=0.5, max_depth=None, max_step_depth=2, seed=0, sources=None,
                   max_frames=None):
    """Episodes (dicts) from raw events; see the module docstring."""
    return EpisodeBuilder(step_in=step_in, max_depth=max_depth, max_step_depth=max_step_depth,
                          seed=seed, sources=sources, max_frames=max_frames).build(events)
