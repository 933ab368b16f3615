"""_episodes.c's Episodes buffer takes its memory from a mapping of its own once it outgrows
_buf.h's BUF_MAPPED (2 MiB), and grows it by mremap: a test's episodes written into it, grown
past several sizes, sampled in place and written over by smaller and larger tests, are the Python
builder's bytes."""
from conftest import load_program, run_traced

from worldline_tracer import native
from worldline_tracer.episodes import EpisodeBuilder, Texts
from worldline_tracer.tracer import _as_dict


def test_a_batch_past_its_mapping_size_holds_the_python_texts(native_modules, monkeypatch):
    mod, episodes = native_modules
    monkeypatch.setattr(native, "mod", mod)
    monkeypatch.setattr(native, "episodes", episodes)
    program = load_program("large_output")
    raws = {n: run_traced(lambda: program.outer(n), "settrace")[2]._raw for n in (5, 300, 1200)}
    batch = episodes.Episodes()
    sizes = []
    for n in (5, 300, 1200, 5, 1200, 300):  # growing from small, past 2 MiB, then over and over
        texts = EpisodeBuilder(seed=3, step_in=1.0).encode([_as_dict(r) for r in raws[n]])
        built = EpisodeBuilder(seed=3, step_in=1.0).encode_records(raws[n], into=batch)
        assert built is batch
        assert batch.texts() == texts
        assert bytes(batch.body()) == Texts(list(texts)).body()
        sizes.append(len(bytes(batch.body())))
        chosen = [0, len(texts) // 2, len(texts) - 1]
        batch.keep(chosen)  # moved within the mapping
        assert batch.texts() == [texts[i] for i in chosen]
    assert sizes[0] < 2 << 20 < sizes[1] and sizes[2] > 8 << 20, sizes
    del batch  # unmapped: a fresh batch starts small again
    again = EpisodeBuilder(seed=3, step_in=1.0).encode_records(raws[5], into=episodes.Episodes())
    assert again.texts() == EpisodeBuilder(seed=3, step_in=1.0).encode([_as_dict(r) for r in raws[5]])
