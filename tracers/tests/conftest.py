import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TRACERS = os.path.dirname(HERE)
PROGRAMS = os.path.join(HERE, "programs")
if TRACERS not in sys.path:
    sys.path.insert(0, TRACERS)

_loaded = {}


def load_program(name):
    """Import tracers/tests/programs/NAME.py under a private module name."""
    if name not in _loaded:
        path = os.path.join(PROGRAMS, name + ".py")
        spec = importlib.util.spec_from_file_location("worldline_prog_" + name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _loaded[name] = mod
    return _loaded[name]


def run_traced(fn, backend, **options):
    from worldline_tracer import Tracer

    tracer = Tracer(root=PROGRAMS, backend=backend, **options)
    result = exc = None
    tracer.start()
    try:
        result = fn()
    except Exception as e:
        exc = e
    finally:
        tracer.stop()
    return result, exc, tracer


def compact(events):
    """(kind, line, function, depth, locals-or-value[, 'resume']) tuples, for golden comparisons."""
    out = []
    for e in events:
        payload = [tuple(p) for p in e["locals"]] if "locals" in e else e["value"]
        row = (e["kind"], e["line"], e["function"], e["depth"], payload)
        if e.get("resume"):
            row += ("resume",)
        out.append(row)
    return out


# (program, call) pairs that between them reach every event kind: the episode tests run them all
PROGRAM_CALLS = [
    ("cwm_example", lambda p: p.main()),
    ("samples", lambda p: p.fact(5)),
    ("samples", lambda p: p.use_gen()),
    ("samples", lambda p: p.catch()),
    ("samples", lambda p: p.uncaught()),
    ("samples", lambda p: p.values()),
    ("samples", lambda p: p.gen_throw()),
    ("samples", lambda p: p.run_coroutine()),
    ("samples", lambda p: p.use_point()),
    ("samples", lambda p: p.squares([1, 2, 3])),
]


@pytest.fixture(scope="session")
def native_modules(tmp_path_factory):
    """(_worldline_native, _worldline_episodes) as installed (the base images carry them, built for
    their Python), else built here for this Python: a host without gcc and the Python headers fails
    here, it does not skip."""
    from worldline_tracer import native
    from worldline_tracer.build_native import build

    try:
        import _worldline_episodes
        import _worldline_native
    except ImportError:
        out = str(tmp_path_factory.mktemp("native"))
        build(out)
        sys.path.insert(0, out)
        try:
            import _worldline_episodes
            import _worldline_native
        finally:
            sys.path.remove(out)
    _worldline_native.configure(native.ACTION_SEP, native.ARG_SEP, native.FRAME_SEP)
    return _worldline_native, _worldline_episodes


@pytest.fixture(scope="session")
def native_module(native_modules):
    """_worldline_native (see native_modules)."""
    return native_modules[0]


@pytest.fixture(params=["pure", "native"])
def native_mode(request, native_module, monkeypatch):
    """Runs a test once on the pure Python path and once with the C accelerator."""
    from worldline_tracer import native

    monkeypatch.setattr(native, "mod", native_module if request.param == "native" else None)
    return request.param
