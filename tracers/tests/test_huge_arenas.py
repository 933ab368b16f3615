"""_native.c's huge_arenas: pymalloc's arenas from huge pages, empty ones kept for reuse up to a cap.
Each case runs in a fresh interpreter (the allocator is the process's), fills and frees about 64 MB
of small objects twice, and counts the page faults of each round (getrusage's minor faults) and the
memory still resident once the first round's objects are freed: with CPython's own arenas the
second round maps and faults its pages again, with the kept arenas it reuses them; past the cap
the pages go back. The objects must read back intact from reused (not zeroed) memory."""
import os
import subprocess
import sys

import pytest

ROUNDS = r"""
import resource, sys
sys.path.insert(0, sys.argv[1])
import _worldline_native as m
keep = sys.argv[2]
if keep != "default":
    m.huge_arenas(int(keep) << 20)

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

def resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() >> 20

start = resident_mb()
out = []
for r in range(2):
    before = faults()
    # 400k small strs and tuples: pymalloc's, about 64 MB across its arenas
    held = [("%d-%d" % (r, i), (i, r)) for i in range(400000)]
    assert all(s == "%d-%d" % (r, i) and t == (i, r) for i, (s, t) in enumerate(held))
    out.append(faults() - before)
    del held
    if r == 0:
        freed = resident_mb() - start
print(out[0], out[1], freed)
"""


def _rounds(native_modules, keep):
    folder = os.path.dirname(native_modules[0].__file__)
    res = subprocess.run([sys.executable, "-c", ROUNDS, folder, keep], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    first, second, freed = map(int, res.stdout.split())
    return first, second, freed


@pytest.fixture
def arenas(native_modules):
    if not hasattr(native_modules[0], "huge_arenas"):
        pytest.skip("huge_arenas is built for 64-bit 3.10+ default builds only")
    return native_modules


def test_empty_arenas_are_reused_where_cpythons_are_mapped_again(arenas):
    own_first, own_second, own_freed = _rounds(arenas, "default")
    first, second, freed = _rounds(arenas, "256")
    # CPython unmaps an empty arena: the second round faults about as much as the first
    assert own_second > own_first // 2 > 2000
    # kept arenas: the second round's objects land in memory already faulted in
    assert second < own_second // 10
    # huge pages, where the kernel gives them, make even the first round cheaper; never dearer
    assert first <= own_first * 1.1
    # the freed round's arenas stay resident, up to the cap; CPython's went back
    assert freed >= 48 and own_freed < 16


def test_past_the_cap_the_pages_go_back(arenas):
    first, second, freed = _rounds(arenas, "0")
    kept_first, kept_second, kept_freed = _rounds(arenas, "256")
    # none kept resident: every freed arena gave its pages back (MADV_DONTNEED) and stayed mapped
    assert freed < 16 and kept_freed >= 48
    # so the second round faults them in again, where the kept ones did not
    assert second > kept_second


SUITE = '''
import resource


def _faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_rounds():
    counts = []
    for r in range(2):
        before = _faults()
        held = [("%d-%d" % (r, i), (i, r)) for i in range(400000)]
        counts.append(_faults() - before)
        del held
    with open("faults.txt", "w") as f:
        f.write("%d %d" % tuple(counts))
'''


def _plugin_run(native_modules, tmp_path, kept):
    """A one-test suite under the tracer plugin (its scope elsewhere, so only the allocator is at
    work), WORLDLINE_TRACE_ARENAS_KEPT_MB=kept (None: unset): the process and the test's faults."""
    suite = tmp_path / "suite"
    suite.mkdir(parents=True)
    (suite / "test_rounds.py").write_text(SUITE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(__file__)),
                                                        os.path.dirname(native_modules[0].__file__)]
                                                       + [p for p in sys.path if p]),
               WORLDLINE_TRACE_OUT=str(tmp_path / "trace.jsonl"), WORLDLINE_TRACE_ROOT=str(tmp_path / "elsewhere"))
    env.pop("WORLDLINE_TRACE_ARENAS_KEPT_MB", None)
    if kept is not None:
        env["WORLDLINE_TRACE_ARENAS_KEPT_MB"] = kept
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "worldline_tracer.plugin"],
                          cwd=str(suite), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    faults = suite / "faults.txt"
    return proc, tuple(map(int, faults.read_text().split())) if faults.exists() else None


def test_the_plugin_installs_them_when_it_traces_unless_told_off(arenas, tmp_path):
    proc, (first, second) = _plugin_run(arenas, tmp_path / "on", None)
    assert proc.returncode == 0, proc.stdout
    proc, (own_first, own_second) = _plugin_run(arenas, tmp_path / "off", "off")
    assert proc.returncode == 0, proc.stdout
    assert own_second > 2000 and second < own_second // 10


def test_a_bad_arenas_setting_is_a_usage_error_naming_it(arenas, tmp_path):
    proc, faults = _plugin_run(arenas, tmp_path, "lots")
    assert proc.returncode == 4 and faults is None
    assert b"WORLDLINE_TRACE_ARENAS_KEPT_MB must be a whole number of MiB or off, not 'lots'" in proc.stdout
