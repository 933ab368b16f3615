"""The optional C accelerator (_native.c, built by build_native.py as the top-level module
_worldline_native): ``mod`` is the module, or None when it is not importable (a Python it was not
built for, an image without it) or WORLDLINE_TRACER_NATIVE=0. Every caller keeps its pure Python
path as the reference and takes it when ``mod`` is None or a native call answers None; both give
the same bytes (tests/test_native.py)."""
import os

from .render import ACTION_SEP, ARG_SEP, FRAME_SEP

mod = None
if os.environ.get("WORLDLINE_TRACER_NATIVE", "1") != "0":
    try:
        import _worldline_native as mod
    except ImportError:
        mod = None
    else:
        mod.configure(ACTION_SEP, ARG_SEP, FRAME_SEP)
