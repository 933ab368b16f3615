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
    out = []
    stack = []  # previous full locals (dict) per open activation
    for fr in frames:
        kind = fr["kind"]
        new = dict(fr)
        if kind == "call":
            stack.append({})
            prev = stack[-1]
            new["locals"] = [[n, v] for n, v in fr["locals"]]
            prev.clear()
            prev.update((n, v) for n, v in fr["locals"])
        elif kind == "line":
            if not stack:
                stack.append({})
            prev = stack[-1]
            new["locals"] = [[n, UNCHANGED if prev.get(n, None) == v else v] for n, v in fr["locals"]]
            prev.clear()
            prev.update((n, v) for n, v in fr["locals"])
        elif kind == "return":
            if stack:
                stack.pop()
            if stack:
                stack[-1].clear()  # back in the caller: a context change
        out.append(new)
    return out


def locals_json(pairs):
    return json.dumps(dict((n, v) for n, v in pairs))


def render_frame(frame):
    kind = frame["kind"]
    sep = KIND_SEP[kind]
    if kind in ("call", "line"):
        return sep + locals_json(frame["locals"]) + ACTION_SEP + frame["source"] + FRAME_SEP
    return sep + ACTION_SEP + frame["source"] + ARG_SEP + json.dumps(frame["value"]) + FRAME_SEP


def render(context, frames):
    """Render an episode: ``frames`` already diff-based (as ``diff_locals`` returns them)."""
    parts = [TRACE_CONTEXT_START, context, FRAME_SEP]
    for fr in frames:
        parts.append(render_frame(fr))
    return "".join(parts)


def has_special_token(text):
    for tok in SPECIAL_TOKENS:
        if tok in text:
            return True
    return False


def mark_entry(source, def_offset):
    """Append the START_OF_TRACE marker to line ``def_offset`` (0-based) of ``source``."""
    lines = source.splitlines(True)
    if 0 <= def_offset < len(lines):
        line = lines[def_offset]
        body = line.rstrip("\r\n")
        lines[def_offset] = body + START_MARKER + line[len(body):]
    return "".join(lines)
