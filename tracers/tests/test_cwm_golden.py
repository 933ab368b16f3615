"""The published CWM example (shared/research/cwm.md): main() calls f(1, 3); f returns "6"."""
import pytest
from conftest import PROGRAMS, load_program, run_traced

from worldline_tracer import HAS_MONITORING, build_episodes, parse, roundtrip

# every test here runs on the pure Python path and with the C accelerator
pytestmark = pytest.mark.usefixtures("native_mode")

# The frames shown in the published example, byte for byte ("..." in cwm.md elides the middle).
PUBLISHED_HEAD = (
    '<|frame_sep|><|call_sep|>{"a": "1", "b": "3"}<|action_sep|>def f(a,b):\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": ".."}<|action_sep|>    y = a\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": "..", "y": "1"}<|action_sep|>    for i in range(b):\n'
)
PUBLISHED_TAIL = (
    '<|frame_sep|><|return_sep|><|action_sep|>    return y\n'
    '<|arg_sep|>"6"<|frame_sep|>'
)

F_CONTEXT = (
    "def f(a,b):  # << START_OF_TRACE\n"
    "    y = a\n"
    "    for i in range(b):\n"
    "        y *= i + 1\n"
    "    return y\n"
)

F_TEXT = (
    "<|trace_context_start|>" + F_CONTEXT +
    '<|frame_sep|><|call_sep|>{"a": "1", "b": "3"}<|action_sep|>def f(a,b):\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": ".."}<|action_sep|>    y = a\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": "..", "y": "1"}<|action_sep|>    for i in range(b):\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": "..", "y": "..", "i": "0"}<|action_sep|>        y *= i + 1\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": "..", "y": "..", "i": ".."}<|action_sep|>    for i in range(b):\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": "..", "y": "..", "i": "1"}<|action_sep|>        y *= i + 1\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": "..", "y": "2", "i": ".."}<|action_sep|>    for i in range(b):\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": "..", "y": "..", "i": "2"}<|action_sep|>        y *= i + 1\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": "..", "y": "6", "i": ".."}<|action_sep|>    for i in range(b):\n'
    '<|frame_sep|><|line_sep|>{"a": "..", "b": "..", "y": "..", "i": ".."}<|action_sep|>    return y\n'
    '<|frame_sep|><|return_sep|><|action_sep|>    return y\n'
    '<|arg_sep|>"6"<|frame_sep|>'
)


def _episodes(backend, **kw):
    prog = load_program("cwm_example")
    result, exc, tracer = run_traced(prog.main, backend)
    assert result == 6 and exc is None and tracer.error is None and not tracer.truncated
    return {ep["function"]: ep for ep in build_episodes(tracer.events, **kw)}


def _backends():
    return ["settrace", "monitoring"] if HAS_MONITORING else ["settrace"]


def test_published_frames_byte_for_byte():
    for backend in _backends():
        ep = _episodes(backend, step_in=0.0)["f"]
        text = ep["text"]
        assert text.startswith("<|trace_context_start|>" + F_CONTEXT)
        body = text[len("<|trace_context_start|>" + F_CONTEXT):]
        assert body.startswith(PUBLISHED_HEAD), body[:300]
        assert body.endswith(PUBLISHED_TAIL)
        assert text == F_TEXT
        assert roundtrip(text)


def test_main_episode_steps_into_f():
    for backend in _backends():
        eps = _episodes(backend, step_in=1.0)
        main = eps["main"]
        assert main["callees"] == ["f"]
        assert main["context"] == ("def main():  # << START_OF_TRACE\n    return f(1, 3)\n\n"
                                   + F_CONTEXT.replace("  # << START_OF_TRACE", ""))
        # main's frames, then f's frames exactly as in f's own episode, then main's return
        f_frames = F_TEXT[len("<|trace_context_start|>" + F_CONTEXT + "<|frame_sep|>"):]
        expected = ("<|trace_context_start|>" + main["context"] + "<|frame_sep|>"
                    "<|call_sep|>{}<|action_sep|>def main():\n<|frame_sep|>"
                    "<|line_sep|>{}<|action_sep|>    return f(1, 3)\n<|frame_sep|>"
                    + f_frames +
                    '<|return_sep|><|action_sep|>    return f(1, 3)\n<|arg_sep|>"6"<|frame_sep|>')
        assert main["text"] == expected
        context, frames = parse(main["text"])
        assert context == main["context"]
        assert [fr["kind"] for fr in frames] == [fr["kind"] for fr in main["frames"]]


def test_main_episode_without_step_in_keeps_call_as_one_line():
    eps = _episodes(_backends()[-1], step_in=0.0)
    main = eps["main"]
    assert main["callees"] == []
    assert main["text"] == (
        "<|trace_context_start|>def main():  # << START_OF_TRACE\n    return f(1, 3)\n<|frame_sep|>"
        "<|call_sep|>{}<|action_sep|>def main():\n<|frame_sep|>"
        "<|line_sep|>{}<|action_sep|>    return f(1, 3)\n<|frame_sep|>"
        '<|return_sep|><|action_sep|>    return f(1, 3)\n<|arg_sep|>"6"<|frame_sep|>')
    assert eps["f"]["frame_count"] == 11 and eps["f"]["line_events"] == 9
