"""_episodes.c's walk (EpisodeBuilder.encode_records) gives exactly the Python builder's bytes from
the same records, is really taken, and hands the test back to the Python where it leaves the path."""
import importlib.util
import itertools

import pytest
from conftest import PROGRAM_CALLS, load_program, run_traced

from worldline_tracer import HAS_MONITORING, Tracer, native
from worldline_tracer.episodes import EpisodeBuilder, Texts
from worldline_tracer.tracer import _as_dict

BACKENDS = ["settrace", "monitoring"] if HAS_MONITORING else ["settrace"]
CALLS = PROGRAM_CALLS + [("native_edges", lambda p: p.main())]


@pytest.fixture
def walk(native_modules, monkeypatch):
    """Both modules in use, and the answers of every cut(): the episodes' count, or None."""
    mod, episodes = native_modules
    answers = []

    class Spy(object):
        Episodes = episodes.Episodes

        @staticmethod
        def cut(raw, ctx, out):
            got = episodes.cut(raw, ctx, out)
            answers.append(None if got is None else len(out))
            return got

    monkeypatch.setattr(native, "mod", mod)
    monkeypatch.setattr(native, "episodes", Spy)
    return answers


def _both(raw, events, **options):
    fast = EpisodeBuilder(**options)
    pure = EpisodeBuilder(**options)
    return (fast.encode_records(raw).texts(), fast.dropped), (pure.encode(events), pure.dropped)


OPTIONS = [dict(step_in=s, max_depth=d, max_step_depth=m, max_frames=f, seed=7)
           for s, d, m, f in itertools.product([0.0, 0.5, 1.0], [None, 0, 1], [0, 2], [None, 6])]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("tracer_options", [{}, {"max_events": 40}, {"max_lines_per_call": 2}],
                         ids=["whole", "truncated", "lines-capped"])
def test_records_give_the_python_builders_bytes(backend, tracer_options, walk):
    """Every golden program, every combination of the builder's options, traces cut short (calls
    that never return) and calls whose lines hit the cap: the same JSON and the same drops."""
    built = 0
    for module, call in CALLS:
        p = load_program(module)
        tracer = run_traced(lambda: call(p), backend, **tracer_options)[2]
        for options in OPTIONS:
            fast, pure = _both(tracer._raw, tracer.events, **options)
            assert fast == pure, (module, options)
            built += len(pure[0])
    assert built > 100
    assert walk and None not in walk  # the walk answered every time: these are on its path


def test_contexts_shared_across_tests_give_the_same_bytes(walk, monkeypatch):
    """Builders sharing one SourceIndex (the plugin's, one per run) reuse the contexts an earlier
    test built: the same bytes as a builder with an index of its own, whether the shared cache holds
    the context, was just cleared at its bound, or never had it."""
    from worldline_tracer import episodes
    from worldline_tracer.source import SourceIndex
    shared = SourceIndex()
    for bound in (4096, 0):
        monkeypatch.setattr(episodes, "_MAX_CONTEXTS", bound)
        for module, call in CALLS:
            p = load_program(module)
            tracer = run_traced(lambda: call(p), "settrace")[2]
            for seed in (1, 2):
                fresh = EpisodeBuilder(seed=seed, step_in=1.0).encode_records(tracer._raw).texts()
                again = EpisodeBuilder(seed=seed, step_in=1.0, sources=shared).encode_records(tracer._raw).texts()
                assert again == fresh, module
        assert shared.contexts  # the C walk filled the shared cache
    assert walk and None not in walk


def test_frames_off_its_path_are_left_to_the_python(tmp_path, walk):
    """A special token in a local makes a frame that is not "clean": the walk hands the test back,
    and the Python drops the episode that shows it (tokens(), not stepped into from main()) and keeps
    the others."""
    (tmp_path / "tokens.py").write_text(
        "def tokens():\n    s = '<|frame_sep|>'\n    return len(s)\n\n\n"
        "def plain(x):\n    y = x + 1\n    return y\n\n\n"
        "def main():\n    return tokens() + plain(2)\n")
    spec = importlib.util.spec_from_file_location("worldline_tokens", str(tmp_path / "tokens.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tracer = Tracer(root=str(tmp_path))
    with tracer:
        mod.main()
    (texts, dropped), pure = _both(tracer._raw, tracer.events, step_in=0.0)
    assert (texts, dropped) == pure
    assert walk == [None]
    assert dropped == {"special_token_in_text": 1}
    assert sorted(t[t.index('"function": '):].split('"')[3] for t in texts) == ["main", "plain"]


def test_without_the_module_records_take_the_python(monkeypatch):
    """native.episodes None (an image without it, WORLDLINE_TRACER_NATIVE=0): the records' dicts
    go through the Python builder."""
    monkeypatch.setattr(native, "episodes", None)
    p = load_program("cwm_example")
    tracer = run_traced(p.main, "settrace")[2]
    texts = EpisodeBuilder(seed=1).encode_records(tracer._raw).texts()
    assert texts and texts == EpisodeBuilder(seed=1).encode([_as_dict(r) for r in tracer._raw])


def test_the_batch_is_the_python_texts(native_modules, monkeypatch):
    """The C batch (one buffer, reused across tests) and the Python's texts: the same sizes, texts
    and array body the plugin writes, after a sample was kept too, and after a larger test was
    written into the same batch; its bytes are not rewritten while a view of them is out."""
    mod, episodes = native_modules
    monkeypatch.setattr(native, "mod", mod)
    monkeypatch.setattr(native, "episodes", episodes)
    samples = load_program("samples")
    raws = [run_traced(lambda: samples.fact(5), "settrace")[2]._raw,
            run_traced(load_program("native_edges").main, "settrace")[2]._raw]
    batch = episodes.Episodes()
    for raw in raws[::-1] + raws:  # a larger test first, then a smaller one written over it
        built = EpisodeBuilder(seed=5, step_in=1.0).encode_records(raw, into=batch)
        assert built is batch
        texts = EpisodeBuilder(seed=5, step_in=1.0).encode([_as_dict(r) for r in raw])
        assert len(texts) > 3
        for chosen in (None, [0, 2, len(texts) - 1], [1], []):
            pure = Texts(list(texts))
            built = EpisodeBuilder(seed=5, step_in=1.0).encode_records(raw, into=batch)
            if chosen is not None:
                pure.keep(chosen)
                batch.keep(chosen)
            kept = texts if chosen is None else [texts[i] for i in chosen]
            assert batch.texts() == pure.texts() == kept
            assert batch.sizes() == pure.sizes() == [len(t) for t in kept]
            assert bytes(batch.body()) == pure.body() == ", ".join(kept).encode("ascii")
            # join(): the body as an earlier revision's plugin asks for it (bench:tracer --baseline)
            assert episodes.join(kept) == pure.body()
            assert len(batch) == len(kept)
    view = batch.body()
    with pytest.raises(BufferError):
        EpisodeBuilder(seed=5).encode_records(raws[0], into=batch)
    view.release()
    with pytest.raises(IndexError):
        batch.keep([1, 0])
    # the form an earlier revision's episodes.py asks for: (texts, dropped)
    builder = EpisodeBuilder(seed=5, step_in=1.0)
    got = builder.encode_records(raws[0], into=batch)
    assert got is batch and len(batch)
    ctx_texts = episodes.cut(raws[0], _ctx_of(builder))
    assert ctx_texts[0] == EpisodeBuilder(seed=5, step_in=1.0).encode([_as_dict(r) for r in raws[0]])


def _ctx_of(builder):
    """The ctx tuple encode_records passes to cut(), caught on its way."""
    seen = []

    class Catch(object):
        @staticmethod
        def cut(raw, ctx, out):
            seen.append(ctx)
            return None

    real, native.episodes = native.episodes, Catch
    try:
        builder.encode_records([], into=object())
    finally:
        native.episodes = real
    return seen[0]


def test_an_earlier_revisions_ctx_gives_the_same_bytes(native_modules, monkeypatch):
    """episodes.py of an earlier revision passed json's string encoder as ctx item 8 (bench:tracer's
    --baseline runs one against the module the image carries): the same episodes."""
    import json
    mod, episodes = native_modules
    seen = []

    class Earlier(object):
        Episodes = episodes.Episodes

        @staticmethod
        def cut(raw, ctx, out):
            got = episodes.cut(raw, ctx[:8] + (json.encoder.encode_basestring_ascii,) + ctx[8:], out)
            seen.append(got is not None)
            return got

    monkeypatch.setattr(native, "mod", mod)
    p = load_program("cwm_example")
    tracer = run_traced(p.main, "settrace")[2]
    monkeypatch.setattr(native, "episodes", episodes)
    now = EpisodeBuilder(seed=3, step_in=1.0).encode_records(tracer._raw).texts()
    monkeypatch.setattr(native, "episodes", Earlier)
    assert now and EpisodeBuilder(seed=3, step_in=1.0).encode_records(tracer._raw).texts() == now
    assert seen == [True]
