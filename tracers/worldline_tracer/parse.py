"""Parser of CWM's trace token format: ``parse(text) -> (context, frames)``; ``render`` of the
result gives back ``text`` byte for byte (``roundtrip`` checks it)."""
import json

from .render import (ACTION_SEP, ARG_SEP, CALL_SEP, EXCEPTION_SEP, FRAME_SEP, LINE_SEP, RETURN_SEP,
                     TRACE_CONTEXT_START, render)

_SEP_KIND = {CALL_SEP: "call", LINE_SEP: "line", RETURN_SEP: "return", EXCEPTION_SEP: "exception"}


class ParseError(ValueError):
    pass


def _pairs(text):
    try:
        pairs = json.loads(text, object_pairs_hook=lambda kv: [[k, v] for k, v in kv])
    except ValueError as e:
        raise ParseError("bad locals JSON: %s" % e)
    if not isinstance(pairs, list):
        raise ParseError("locals are not a JSON object")
    for _, v in pairs:
        if not isinstance(v, str):
            raise ParseError("a local's value is not a string")
    return pairs


def parse(text):
    if not text.startswith(TRACE_CONTEXT_START):
        raise ParseError("text does not start with %s" % TRACE_CONTEXT_START)
    body = text[len(TRACE_CONTEXT_START):]
    end = body.find(FRAME_SEP)
    if end < 0:
        raise ParseError("no %s after the context" % FRAME_SEP)
    context = body[:end]
    chunks = body[end + len(FRAME_SEP):].split(FRAME_SEP)
    if chunks[-1] != "":
        raise ParseError("text does not end with %s" % FRAME_SEP)
    frames = []
    for chunk in chunks[:-1]:
        sep = None
        for token, kind in _SEP_KIND.items():
            if chunk.startswith(token):
                sep = token
                break
        if sep is None:
            raise ParseError("frame starts with no event token: %r" % chunk[:40])
        kind = _SEP_KIND[sep]
        rest = chunk[len(sep):]
        if kind in ("call", "line"):
            locals_text, found, source = rest.partition(ACTION_SEP)
            if not found:
                raise ParseError("%s frame without %s" % (kind, ACTION_SEP))
            frames.append({"kind": kind, "locals": _pairs(locals_text), "source": source})
        else:
            if not rest.startswith(ACTION_SEP):
                raise ParseError("%s frame without %s" % (kind, ACTION_SEP))
            source, found, value = rest[len(ACTION_SEP):].rpartition(ARG_SEP)
            if not found:
                raise ParseError("%s frame without %s" % (kind, ARG_SEP))
            try:
                value = json.loads(value)
            except ValueError as e:
                raise ParseError("bad value JSON: %s" % e)
            if not isinstance(value, str):
                raise ParseError("value is not a JSON string")
            frames.append({"kind": kind, "source": source, "value": value})
    return context, frames


def roundtrip(text):
    """True when ``text`` parses and re-renders byte for byte."""
    context, frames = parse(text)
    return render(context, frames) == text
