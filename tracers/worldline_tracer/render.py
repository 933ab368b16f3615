"""CWM's trace token format (facebookresearch/cwm): diff-based locals and rendering.

  <|trace_context_start|>$CONTEXT<|frame_sep|>
  <|call_sep|>$LOCALS<|action_sep|>$SOURCE<|frame_sep|>
  <|line_sep|>$LOCALS<|action_sep|>$SOURCE<|frame_sep|>
  <|return_sep|><|action_sep|>$SOURCE<|arg_sep|>$VALUE<|frame_sep|>
  <|exception_sep|><|action_sep|>$SOURCE<|arg_sep|>$VALUE<|frame_sep|>

$LOCALS is ``json.dumps`` (defaults) of an object mapping every local name to its repr string, or
".." when the value is unchanged since the previous frame of the same function activation; a call
or a return is a context change (the callee's call frame, and the caller's first frame after a
return, show full values). $SOURCE keeps its trailing newline; $VALUE is ``json.dumps`` of the repr.
"""
import json

TRACE_CONTEXT_START = "<|trace_context_start|>"
FRAME_SEP = "<|frame_sep|>"
ACTION_SEP = "<|action_sep|>"
RETURN_SEP = "<|return_sep|>"
CALL_SEP = "<|call_sep|>"
LINE_SEP = "<|line_sep|>"
EXCEPTION_SEP = "<|exception_sep|>"
ARG_SEP = "<|arg_sep|>"
SPECIAL_TOKENS = (TRACE_CONTEXT_START, FRAME_SEP, ACTION_SEP, RETURN_SEP, CALL_SEP, LINE_SEP,
                  EXCEPTION_SEP, ARG_SEP)
KIND_SEP = {"call": CALL_SEP, "line": LINE_SEP, "return": RETURN_SEP, "exception": EXCEPTION_SEP}
UNCHANGED = ".."
START_MARKER = "  # << START_OF_TRACE"


def diff_locals(frames):
    """Given frames with full locals (lists of [name, repr]), return new frame dicts whose call/line
    locals are diff-based as CWM writes them. Frames need "kind"; other keys are copied."""
    out = [dict(fr) for fr in frames]
    diff_frames(out)
    return out


def diff_frames(frames):
    """``diff_locals`` in place: each call/line frame's "locals" is replaced by a new list."""
    stack = []  # per open activation: [previous frame's locals list, the same as a dict]
    for fr in frames:
        kind = fr["kind"]
        if kind == "call":
            pairs = fr["locals"]
            stack.append([pairs, dict(pairs)])
            fr["locals"] = [[n, v] for n, v in pairs]
        elif kind == "line":
            if not stack:
                stack.append([None, {}])
            top = stack[-1]
            pairs = fr["locals"]
            if pairs is top[0]:  # the tracer shares an unchanged snapshot's list between events
                fr["locals"] = [[n, UNCHANGED] for n, v in pairs]
            else:
                get = top[1].get
                fr["locals"] = [[n, UNCHANGED if get(n, None) == v else v] for n, v in pairs]
                top[0] = pairs
                top[1] = dict(pairs)
        elif kind == "return":
            if stack:
                stack.pop()
            if stack:
                stack[-1] = [None, {}]  # back in the caller: a context change


_encode_str = json.encoder.encode_basestring_ascii  # exactly json.dumps(str) with the defaults


def locals_json(pairs):
    d = dict(pairs)
    try:
        return "{" + ", ".join([_encode_str(n) + ": " + _encode_str(v) for n, v in d.items()]) + "}"
    except TypeError:  # a name or value that is not a str: json's own conversions
        return json.dumps(d)


def render_frame(frame):
    kind = frame["kind"]
    sep = KIND_SEP[kind]
    if kind in ("call", "line"):
        return sep + locals_json(frame["locals"]) + ACTION_SEP + frame["source"] + FRAME_SEP
    value = frame["value"]
    return (sep + ACTION_SEP + frame["source"] + ARG_SEP
            + (_encode_str(value) if type(value) is str else json.dumps(value)) + FRAME_SEP)


def render(context, frames):
    """Render an episode: ``frames`` already diff-based (as ``diff_locals`` returns them)."""
    parts = [TRACE_CONTEXT_START, context, FRAME_SEP]
    for fr in frames:
        parts.append(render_frame(fr))
    return "".join(parts)


def has_special_token(text):
    if "<|" not in text:
        return False
    for tok in SPECIAL_TOKENS:
        if tok in text:
            return True
    return False


def tokens_only_as_separators(text, frames):
    """True when ``text`` (``render``'s output for ``frames``) holds "<|" only in its separators, so
    no context, source line, value or name+value pair of a frame holds a special token. Each
    separator has one "<|"; JSON escaping neither makes nor hides one, and the text around a
    JSON string or source line (quotes, a newline) cannot complete one. A pair's name + value can
    hold a token that neither holds alone only when the name ends in "<", which shows as '<":'."""
    if '<":' in text:
        return False
    seps = 2
    for fr in frames:
        seps += 3 if "locals" in fr else 4
    return text.count("<|") == seps


def mark_entry(source, def_offset):
    """Append the START_OF_TRACE marker to line ``def_offset`` (0-based) of ``source``."""
    lines = source.splitlines(True)
    if 0 <= def_offset < len(lines):
        line = lines[def_offset]
        body = line.rstrip("\r\n")
        lines[def_offset] = body + START_MARKER + line[len(body):]
    return "".join(lines)
