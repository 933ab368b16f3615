# As loguru and filelock: tests that start processes with multiprocessing's spawn and forkserver
# start methods. The child re-imports the parent's __main__ unless it is a `-m` module, so a
# runner script without its guard would run the whole pytest session again in every child.
import multiprocessing

import pytest

import work


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_pool(method):
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(2) as pool:
        assert pool.map(work.square, [1, 2, 3]) == [1, 4, 9]


def test_process_exit_code():
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=work.square, args=(3,))
    p.start()
    p.join(60)
    assert p.exitcode == 0


def test_spawn_child_runs_pth_files():
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.map(work.hooked_value, [0]) == [42]
