"""The optional C accelerator (_native.c and _episodes.c, built by build_native.py as the top-level
modules _worldline_native and _worldline_episodes): ``mod`` and ``episodes`` are the modules, or
None when they are not importable (a Python they were not built for, an image without them) or
WORLDLINE_TRACER_NATIVE=0; ``episodes`` renders through ``mod``, so it is None without it. Every
caller keeps its pure Python path as the reference and takes it when a module is None or a native
call answers None; both give the same bytes (tests/test_native.py, tests/test_native_episodes.py)."""
import os

from .render import ACTION_SEP, ARG_SEP, FRAME_SEP

mod = None
episodes = None
if os.environ.get("WORLDLINE_TRACER_NATIVE", "1") != "0":
    try:
        import _worldline_native as mod
    except ImportError:
        mod = None
    else:
        mod.configure(ACTION_SEP, ARG_SEP, FRAME_SEP)
        try:
            import _worldline_episodes as episodes
        except ImportError:
            episodes = None
