"""Line-level tracer with two backends behind one interface.

``sys.monitoring`` (Python 3.12+): global PY_START/PY_RESUME decide once per code object whether it
is in scope (out-of-scope code gets DISABLE); in-scope code gets local LINE, JUMP, PY_RETURN,
PY_YIELD and STOP_ITERATION events; RAISE, PY_UNWIND and PY_THROW cannot be local, so they are
global and ignored outside traced frames. The callbacks map onto settrace's events exactly as
CPython's own legacy tracing does (Python/legacy_tracing.c), so both backends give the same stream:
  PY_START, PY_RESUME, PY_THROW -> call;  PY_RETURN, PY_YIELD, PY_UNWIND -> return (None on unwind);
  RAISE, STOP_ITERATION -> exception;  LINE -> line;  JUMP backwards within one line -> line.
``sys.settrace`` (any version): only the calling thread is traced (other threads are ignored; no
``threading.settrace``).

Raw events are dicts:
  {"kind": "call"|"line"|"return"|"exception", "file": str, "line": int, "function": qualname,
   "depth": int, "locals": [[name, repr], ...]  (call/line), "value": repr  (return/exception)}
plus "resume": true on a call that resumes a generator/coroutine (a yield is a return event, as
under settrace) and "lines_capped": true on the return of a call whose line events hit the cap.
``depth`` is 0 for the outermost traced frame, +1 per traced frame below it (frames out of scope
between two traced frames do not count).
"""
import os
import sys
import sysconfig
import threading
import traceback

from .serialize import Serializer, deep_overflow
from .source import SourceIndex

_GEN_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_HERE = os.path.dirname(os.path.abspath(__file__))
HAS_MONITORING = hasattr(sys, "monitoring")

DEFAULT_MAX_EVENTS = 100000
DEFAULT_MAX_LINES_PER_CALL = 10000


def _excluded_prefixes():
    prefixes = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            path = sysconfig.get_paths().get(key)
        except Exception:
            path = None
        if path:
            prefixes.add(os.path.abspath(path) + os.sep)
    for base in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        prefixes.add(os.path.join(os.path.abspath(base), "lib") + os.sep)
    prefixes.add(_HERE + os.sep)
    for name in ("pytest", "_pytest", "pluggy", "py", "iniconfig", "_distutils_hack", "coverage"):
        mod = sys.modules.get(name)
        path = getattr(mod, "__file__", None)
        if path:
            if os.path.basename(path).startswith("__init__."):
                prefixes.add(os.path.dirname(os.path.abspath(path)) + os.sep)
            else:
                prefixes.add(os.path.abspath(path))
    return tuple(sorted(prefixes))


def make_scope(root=None, include_tests=True, exclude=()):
    """A predicate on filenames: files under ``root`` (default cwd), never the stdlib,
    site-packages/dist-packages, pytest/pluggy or the tracer itself. ``include_tests=False`` also
    leaves out test files (test_*.py, *_test.py, conftest.py, files under a tests/ folder).
    ``exclude`` adds path prefixes to leave out."""
    root = os.path.abspath(root or os.getcwd())
    root_prefix = root if root.endswith(os.sep) else root + os.sep
    excluded = _excluded_prefixes() + tuple(os.path.abspath(p) for p in exclude)
    cache = {}

    def in_scope(filename):
        hit = cache.get(filename)
        if hit is not None:
            return hit
        ok = False
        if filename and filename[0] != "<":
            path = os.path.abspath(filename)
            ok = path.startswith(root_prefix)
            if ok and (os.sep + "site-packages" + os.sep in path or os.sep + "dist-packages" + os.sep in path):
                ok = False
            if ok:
                for prefix in excluded:
                    if path.startswith(prefix) and not root_prefix.startswith(prefix):
                        ok = False
                        break
                    if path == prefix:
                        ok = False
                        break
            if ok and not include_tests:
                rel = path[len(root_prefix):]
                base = os.path.basename(rel)
                parts = rel.split(os.sep)[:-1]
                if (base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
                        or "tests" in parts or "test" in parts):
                    ok = False
        cache[filename] = ok
        return ok

    return in_scope


class Tracer(object):
    """Trace the calling thread between ``start()`` and ``stop()``; results in ``.events``,
    ``.truncated`` and ``.error``. Use ``backend="auto"`` (monitoring on 3.12+, else settrace),
    ``"monitoring"`` or ``"settrace"``."""

    def __init__(self, scope=None, root=None, backend="auto", max_events=DEFAULT_MAX_EVENTS,
                 max_lines_per_call=DEFAULT_MAX_LINES_PER_CALL, serializer=None, tool_ids=(4, 3)):
        self.scope = scope if scope is not None else make_scope(root)
        if backend == "auto":
            backend = "monitoring" if HAS_MONITORING else "settrace"
        if backend == "monitoring" and not HAS_MONITORING:
            raise ValueError("sys.monitoring needs Python 3.12+")
        if backend not in ("monitoring", "settrace"):
            raise ValueError("unknown backend %r" % (backend,))
        self.backend = backend
        self.max_events = int(max_events)
        self.max_lines_per_call = int(max_lines_per_call)
        self.ser = serializer if serializer is not None else Serializer()
        self.tool_ids = tuple(tool_ids)
        self.sources = SourceIndex()
        self._fast_types = (float, bool, type(None))
        if isinstance(self.ser, Serializer):
            self._int_lim = 1 << self.ser._max_int_bits
            self._max_str = self.ser.max_str
        else:  # a custom serializer sees every value
            self._int_lim = 0
            self._max_str = -1
            self._fast_types = ()
        self.events = []
        self.truncated = False
        self.error = None
        self._frames = {}      # frame -> [depth, line events so far, lines capped, info]
        self._codes = {}       # code -> (filename, qualname, firstlineno, is_gen) or False
        self._running = False
        self._off = True
        self._thread = None
        self._tool = None
        self._local_codes = []
        self._jump_lines = {}
        self._prev_trace = None

    # ---------------------------------------------------------------- public interface
    def start(self):
        if self._running:
            raise RuntimeError("tracer already started")
        self._thread = threading.get_ident()
        self._running = True
        self._off = False
        if self.backend == "monitoring":
            self._start_monitoring()
        else:
            self._prev_trace = sys.gettrace()
            sys.settrace(self._st_global)
        return self

    def stop(self):
        if not self._running:
            return self
        self._off = True
        try:
            if self.backend == "monitoring":
                self._stop_monitoring()
            else:
                sys.settrace(self._prev_trace)
                self._prev_trace = None
        finally:
            self._running = False
            self._frames.clear()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def result(self):
        return {"events": self.events, "truncated": self.truncated, "error": self.error}

    # ---------------------------------------------------------------- shared core
    def _info(self, code):
        info = self._codes.get(code)
        if info is None:
            info = False
            filename = code.co_filename
            if self.scope(filename):
                info = (filename, self.sources.qualname(code), code.co_firstlineno,
                        bool(code.co_flags & _GEN_FLAGS))
            self._codes[code] = info
        return info

    def _locals(self, frame):
        ser = self.ser
        fast = self._fast_types
        int_lim = self._int_lim
        max_str = self._max_str
        out = []
        for name, value in frame.f_locals.items():
            c = name[0]
            if c == "@" or c == ".":
                continue  # pytest's @py_assert* temporaries; comprehension arguments
            t = type(value)
            # fast path for the commonest exact types; the same text the serializer would give
            if t is int:
                r = repr(value) if -int_lim < value < int_lim else ser(value)
            elif t is str:
                r = repr(value) if len(value) <= max_str else ser(value)
            elif t in fast:
                r = repr(value)
            else:
                r = ser(value)
            out.append([name, r])
        return out

    def _emit(self, ev):
        events = self.events
        events.append(ev)
        if len(events) >= self.max_events:
            self.truncated = True
            self._halt()

    def _halt(self):
        """Stop delivering events now (from inside a callback); stop() finishes the cleanup."""
        self._off = True
        if self.backend == "settrace":
            sys.settrace(self._prev_trace)
        else:
            self._quiet_monitoring()

    def _fault(self):
        """Called from an ``except`` block in a callback: record the error and stop tracing. A
        RecursionError near the limit on Python 3.8 is re-raised (see serialize.deep_overflow):
        the program is at its recursion limit and would raise it itself."""
        exc = sys.exc_info()[1]
        if isinstance(exc, RecursionError) and deep_overflow():
            self._off = True
            if self.error is None:
                self.error = "RecursionError: recursion limit reached while tracing"
            try:
                self._halt()
            except Exception:
                pass
            raise exc
        if self.error is None:
            self.error = traceback.format_exc(limit=8)[-4000:]
        try:
            self._halt()
        except Exception:
            pass

    def _on_call(self, frame, info):
        frames = self._frames
        depth = 0
        f = frame.f_back
        while f is not None:
            st = frames.get(f)
            if st is not None:
                depth = st[0] + 1
                break
            f = f.f_back
        frames[frame] = [depth, 0, False, info]
        line = frame.f_lineno
        ev = {"kind": "call", "file": info[0], "line": line, "function": info[1], "depth": depth,
              "locals": self._locals(frame)}
        if info[3] and line != info[2]:
            ev["resume"] = True
        self._emit(ev)

    def _on_line(self, frame, st, line):
        st[1] += 1
        if st[1] > self.max_lines_per_call:
            st[2] = True
            return
        info = st[3]
        self._emit({"kind": "line", "file": info[0], "line": line, "function": info[1],
                    "depth": st[0], "locals": self._locals(frame)})

    def _on_return(self, frame, st, value):
        del self._frames[frame]
        info = st[3]
        ev = {"kind": "return", "file": info[0], "line": frame.f_lineno, "function": info[1],
              "depth": st[0], "value": self.ser(value)}
        if st[2]:
            ev["lines_capped"] = True
        self._emit(ev)

    def _on_exception(self, frame, st, exc):
        info = st[3]
        self._emit({"kind": "exception", "file": info[0], "line": frame.f_lineno,
                    "function": info[1], "depth": st[0], "value": self.ser(exc)})

    # ---------------------------------------------------------------- settrace backend
    def _st_global(self, frame, event, arg):
        if self._off or event != "call":
            return None
        try:
            info = self._info(frame.f_code)
            if not info:
                return None
            self._on_call(frame, info)
        except Exception:
            self._fault()
            return None
        return self._st_local

    def _st_local(self, frame, event, arg):
        if self._off:
            return None
        try:
            st = self._frames.get(frame)
            if st is None:
                return None
            if event == "line":
                self._on_line(frame, st, frame.f_lineno)
            elif event == "return":
                self._on_return(frame, st, arg)
                return None
            elif event == "exception":
                exc = arg[1] if arg is not None else None
                if not isinstance(exc, BaseException):
                    exc = "<%s>" % getattr(arg[0], "__name__", "exception")
                self._on_exception(frame, st, exc)
        except Exception:
            self._fault()
            return None
        return self._st_local

    # ---------------------------------------------------------------- sys.monitoring backend
    def _start_monitoring(self):
        mon = sys.monitoring
        E = mon.events
        tool = None
        for tid in self.tool_ids:
            if mon.get_tool(tid) is None:
                mon.use_tool_id(tid, "worldline")
                tool = tid
                break
        if tool is None:
            raise RuntimeError("no free sys.monitoring tool id among %r" % (self.tool_ids,))
        self._tool = tool
        self._DISABLE = mon.DISABLE
        self._set_local = mon.set_local_events
        self._local_set = E.LINE | E.JUMP | E.PY_RETURN | E.PY_YIELD | E.STOP_ITERATION
        reg = mon.register_callback
        reg(tool, E.PY_START, self._m_start)
        reg(tool, E.PY_RESUME, self._m_start)
        reg(tool, E.PY_THROW, self._m_throw)
        reg(tool, E.PY_RETURN, self._m_return)
        reg(tool, E.PY_YIELD, self._m_return)
        reg(tool, E.PY_UNWIND, self._m_unwind)
        reg(tool, E.RAISE, self._m_raise)
        reg(tool, E.STOP_ITERATION, self._m_raise)
        reg(tool, E.LINE, self._m_line)
        reg(tool, E.JUMP, self._m_jump)
        self._global_set = E.PY_START | E.PY_RESUME | E.PY_THROW | E.PY_UNWIND | E.RAISE
        mon.set_events(tool, self._global_set)

    def _quiet_monitoring(self):
        tool = self._tool
        if tool is None:
            return
        mon = sys.monitoring
        mon.set_events(tool, 0)
        for code in self._local_codes:
            try:
                mon.set_local_events(tool, code, 0)
            except Exception:
                pass

    def _stop_monitoring(self):
        tool = self._tool
        if tool is None:
            return
        mon = sys.monitoring
        try:
            self._quiet_monitoring()
            for name in ("PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND",
                         "RAISE", "STOP_ITERATION", "LINE", "JUMP"):
                mon.register_callback(tool, getattr(mon.events, name), None)
        finally:
            self._local_codes = []
            self._tool = None
            try:
                mon.free_tool_id(tool)
            finally:
                mon.restart_events()

    def _m_scope(self, code):
        """In-scope info for ``code``, arming its local events the first time it is seen."""
        known = code in self._codes
        info = self._info(code)
        if info and not known:
            self._set_local(self._tool, code, self._local_set)
            self._local_codes.append(code)
        return info

    def _m_start(self, code, offset):
        if self._off:
            return None
        try:
            info = self._m_scope(code)
            if not info:
                return self._DISABLE
            if threading.get_ident() != self._thread:
                return None
            self._on_call(sys._getframe(1), info)
        except Exception:
            self._fault()
        return None

    def _m_throw(self, code, offset, exc):
        if self._off:
            return None
        try:
            info = self._m_scope(code)
            if info and threading.get_ident() == self._thread:
                self._on_call(sys._getframe(1), info)
        except Exception:
            self._fault()
        return None

    def _m_return(self, code, offset, value):
        if self._off:
            return None
        try:
            frame = sys._getframe(1)
            st = self._frames.get(frame)
            if st is not None:
                self._on_return(frame, st, value)
        except Exception:
            self._fault()
        return None

    def _m_unwind(self, code, offset, exc):
        if self._off:
            return None
        try:
            frame = sys._getframe(1)
            st = self._frames.get(frame)
            if st is not None:
                self._on_return(frame, st, None)
        except Exception:
            self._fault()
        return None

    def _m_raise(self, code, offset, exc):
        if self._off:
            return None
        try:
            frame = sys._getframe(1)
            st = self._frames.get(frame)
            if st is not None:
                self._on_exception(frame, st, exc)
        except Exception:
            self._fault()
        return None

    def _m_line(self, code, line):
        if self._off:
            return None
        try:
            frame = sys._getframe(1)
            st = self._frames.get(frame)
            if st is not None:
                self._on_line(frame, st, line)
        except Exception:
            self._fault()
        return None

    def _line_of(self, code, offset):
        table = self._jump_lines.get(code)
        if table is None:
            table = []
            for start, end, line in code.co_lines():
                table.append((start, end, line))
            self._jump_lines[code] = table
        for start, end, line in table:
            if start <= offset < end:
                return line
        return None

    def _m_jump(self, code, src, dest):
        # settrace reports a line event for every backward jump that stays on one line
        if self._off:
            return None
        try:
            if dest > src:
                return self._DISABLE
            to_line = self._line_of(code, dest)
            if to_line != self._line_of(code, src):
                return self._DISABLE
            if to_line is None or to_line < 0:
                return None
            frame = sys._getframe(1)
            st = self._frames.get(frame)
            if st is not None:
                self._on_line(frame, st, to_line)
        except Exception:
            self._fault()
        return None


def trace_call(func, *args, **kwargs):
    """Trace ``func(*args)``; returns (result or None, exception or None, Tracer). Keyword
    ``_tracer_options`` (a dict) is passed to Tracer."""
    options = kwargs.pop("_tracer_options", {})
    tracer = Tracer(**options)
    result = exc = None
    tracer.start()
    try:
        result = func(*args, **kwargs)
    except Exception as e:  # the traced program's own exception
        exc = e
    finally:
        tracer.stop()
    return result, exc, tracer
