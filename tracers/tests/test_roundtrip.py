"""Every rendered episode parses back and re-renders byte for byte."""
import pytest
from conftest import PROGRAM_CALLS as PROGRAMS, load_program, run_traced

from worldline_tracer import HAS_MONITORING, build_episodes, parse, render, roundtrip
from worldline_tracer.parse import ParseError

# every test here runs on the pure Python path and with the C accelerator
pytestmark = pytest.mark.usefixtures("native_mode")


@pytest.mark.parametrize("step_in", [0.0, 0.5, 1.0])
def test_all_episodes_roundtrip(step_in):
    total = 0
    for module, call in PROGRAMS:
        p = load_program(module)
        tracer = run_traced(lambda: call(p), "monitoring" if HAS_MONITORING else "settrace")[2]
        for ep in build_episodes(tracer.events, step_in=step_in, seed=7):
            total += 1
            assert roundtrip(ep["text"])
            context, frames = parse(ep["text"])
            assert context == ep["context"]
            assert len(frames) == ep["frame_count"]
            for got, want in zip(frames, ep["frames"]):
                assert got["kind"] == want["kind"] and got["source"] == want["source"]
                assert got.get("locals") == want.get("locals") and got.get("value") == want.get("value")
            assert render(context, frames) == ep["text"]
    assert total >= 15


def test_episodes_are_reproducible_and_seeded():
    p = load_program("samples")
    tracer = run_traced(lambda: p.use_point(), "settrace")[2]
    a = build_episodes(tracer.events, step_in=0.5, seed=1)
    b = build_episodes(tracer.events, step_in=0.5, seed=1)
    assert a == b
    texts = {tuple(ep["text"] for ep in build_episodes(tracer.events, step_in=0.5, seed=s)) for s in range(20)}
    assert len(texts) > 1


def test_uncaught_exception_episode_text():
    p = load_program("samples")
    tracer = run_traced(lambda: p.uncaught(), "settrace")[2]
    eps = {ep["function"]: ep for ep in build_episodes(tracer.events, step_in=0.0)}
    assert eps["fail"]["text"] == (
        '<|trace_context_start|>def fail(x):  # << START_OF_TRACE\n    raise ValueError("bad %d" % x)\n'
        '<|frame_sep|><|call_sep|>{"x": "2"}<|action_sep|>def fail(x):\n'
        '<|frame_sep|><|line_sep|>{"x": ".."}<|action_sep|>    raise ValueError("bad %d" % x)\n'
        '<|frame_sep|><|exception_sep|><|action_sep|>    raise ValueError("bad %d" % x)\n'
        '<|arg_sep|>"ValueError(\'bad 2\')"<|frame_sep|>'
        '<|return_sep|><|action_sep|>    raise ValueError("bad %d" % x)\n<|arg_sep|>"None"<|frame_sep|>')


def test_generator_resumes_are_not_episodes():
    p = load_program("samples")
    tracer = run_traced(lambda: p.use_gen(), "settrace")[2]
    names = [ep["function"] for ep in build_episodes(tracer.events, step_in=0.0)]
    assert names == ["use_gen", "countdown"]


@pytest.mark.parametrize("bad", ["", "<|trace_context_start|>ctx", "<|trace_context_start|>c<|frame_sep|><|line_sep|>{}",
                                 "<|trace_context_start|>c<|frame_sep|><|bogus|><|frame_sep|>"])
def test_parse_rejects_malformed(bad):
    with pytest.raises(ParseError):
        parse(bad)
