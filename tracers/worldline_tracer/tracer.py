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
from functools import partial
from itertools import compress, count, islice
from operator import is_not, or_

from . import native
from .serialize import _ADDR, _THREAD_IDENT, Serializer, _perf, deep_overflow
from .source import SourceIndex

_GEN_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
# whether _native.c reads 3.11's or 3.13's fast locals directly (_fast_locals_probe, at the first start)
_fast_locals = [None]
_HERE = os.path.dirname(os.path.abspath(__file__))
# Bound at import: a test under a fake file system (pyfakefs swaps every module's `os`) or one that
# mocks these must not change which files are in scope or which thread is traced.
_abspath, _basename = os.path.abspath, os.path.basename
_get_ident = threading.get_ident
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
            path = _abspath(filename)
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
                base = _basename(rel)
                parts = rel.split(os.sep)[:-1]
                if (base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
                        or "tests" in parts or "test" in parts):
                    ok = False
        cache[filename] = ok
        return ok

    return in_scope


# Per-frame state: a list indexed by these (see _on_call; _native.c's snapshot reads the same layout).
_HEAD, _NLINES, _CAPPED, _KEYS, _VALS, _OUT, _MUT, _CACHE, _FILT = range(9)
# Compact raw records, turned into event dicts when ``Tracer.events`` is read:
#   (_CALL, head, line, locals, resume)  (_LINE, head, line, locals)
#   (_RETURN, head, line, value, lines_capped)  (_EXCEPTION, head, line, value)
# where head = (info, depth) is shared by every record of one frame activation.
_CALL, _LINE, _RETURN, _EXCEPTION = "call", "line", "return", "exception"
# Exact types whose repr cannot change while the object stays the same (the snapshot skips them).
_IMMUTABLE = frozenset({int, str, float, bool, type(None), bytes})
# Exact types whose text the snapshot can keep while the containers it shows stay the same
# (Serializer.keyed).
_KEYED = frozenset({list, tuple, dict, set, frozenset})
# The Serializer methods whose steps _native.c's flat_keyed repeats (a subclass overriding one keeps
# the Python keyed).
_C_KEYED = ("keyed", "unchanged", "_seq_render", "_seq_scan", "_dict_render", "_scalars_ok", "__call__", "_ser", "_list",
            "_tuple", "_dict")


def _as_dict(rec):
    kind, head, line, payload = rec[0], rec[1], rec[2], rec[3]
    info = head[0]
    if kind is _LINE:
        return {"kind": kind, "file": info[0], "line": line, "function": info[1], "depth": head[1],
                "locals": payload}
    if kind is _CALL:
        ev = {"kind": kind, "file": info[0], "line": line, "function": info[1], "depth": head[1],
              "locals": payload}
        if rec[4]:
            ev["resume"] = True
        return ev
    ev = {"kind": kind, "file": info[0], "line": line, "function": info[1], "depth": head[1],
          "value": payload}
    if kind is _RETURN and rec[4]:
        ev["lines_capped"] = True
    return ev


_FUNCTION = type(_excluded_prefixes)
# Exact types whose builtin repr is C code reading only the object's own name fields (functions,
# classes of the plain metaclass, builtins), so it cannot run user code.
_C_REPR = frozenset({type(_excluded_prefixes), type, type(len)})


def _value_repr(ser):
    """``ser(value)``, with the commonest exact types inlined (the same text ``Serializer`` gives);
    a custom serializer sees every value."""
    if not isinstance(ser, Serializer):
        return ser
    int_lim = 1 << ser._max_int_bits
    max_str = ser.max_str
    max_repr = ser.max_repr
    bad = ser.bad_classes
    fast = (float, bool, type(None))

    def value(v):
        t = type(v)
        if t is int:
            return repr(v) if -int_lim < v < int_lim else ser(v)
        if t is str:
            return repr(v) if len(v) <= max_str else ser(v)
        if t in fast:
            return repr(v)
        if t in _C_REPR and t not in bad:
            # Serializer._other's text without its guard: these reprs are C code that cannot fail
            # or run long; any text the guard would change goes the whole way
            text = repr(v)
            if len(text) <= max_repr and "ed " not in text:
                return _ADDR.sub("", text) if " at 0x" in text else text
        return ser(v)

    return value


def _other_ctx(ser):
    """What _native.c's other_repr needs to give ``_value_repr``'s text for values of other types
    (Serializer._other, guarded the same way), when ``ser`` is exactly the default Serializer;
    else None (a subclass may render differently)."""
    if type(ser) is not Serializer:
        return None
    return (ser.bad_classes, ser._array_like, ser._dispatch, ser.max_repr, ser.repr_safety_s,
            _perf, _ADDR.sub, _THREAD_IDENT.sub, ser.slow_classes, _C_REPR)


def _fast_locals_probe(arg, cell_arg):
    """Turn on _native.c's direct read of 3.11's or 3.13's fast locals once it has read two live
    frames' locals as frame.f_locals gives them (native.mod.fast_locals_check): this frame (a plain local,
    one unbound by del, an argument that is a cell, a cell bound late, one not bound yet) and the
    closure's (free variables, one of them an empty cell). Whether it agreed."""
    gone = arg
    del gone

    def inner(plain):
        if plain is None:
            return cell_arg, late, unset  # free variables: never run
        return native.mod.fast_locals_check(sys._getframe(), sys._getframe(1))

    late = [arg]
    agreed = inner(arg)
    unset = None
    return agreed


class Tracer(object):
    """Trace the calling thread between ``start()`` and ``stop()``; results in ``.events``,
    ``.truncated`` and ``.error``. Use ``backend="auto"`` (monitoring on 3.12+, else settrace),
    ``"monitoring"`` or ``"settrace"``.

    Per-event cost is kept low by (1) snapshotting a frame's locals incrementally: a value that is
    the same object as at the frame's previous event and of an immutable exact type keeps its text
    (found in C with ``map(is_not, ...)``), only new objects and mutable values are serialized,
    and an unchanged snapshot reuses the previous event's list (events may share their "locals"
    lists and [name, repr] pairs: treat them as read-only); (2) recording compact tuples and
    building the event dicts when ``.events`` is first read."""

    def __init__(self, scope=None, root=None, backend="auto", max_events=DEFAULT_MAX_EVENTS,
                 max_lines_per_call=DEFAULT_MAX_LINES_PER_CALL, serializer=None, tool_ids=(4, 3),
                 sources=None):
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
        self.sources = sources if sources is not None else SourceIndex()
        self._value = _value_repr(self.ser)
        # a custom serializer may be stateful: then every value is serialized at every event
        if isinstance(self.ser, Serializer):
            self._immutable = _IMMUTABLE
            self._keyed_types = _KEYED
            self._keyed = self.ser.keyed
            self._unchanged = self.ser.unchanged
            self._named = _FUNCTION
        else:
            self._immutable = self._keyed_types = frozenset()
            self._keyed = self._unchanged = None
            self._named = None
        self._snap = self._snapshot
        self._snap_ctx = None
        if native.mod is not None:
            # the same steps in C; the leaf values _value_repr inlines are rendered there too
            default = isinstance(self.ser, Serializer)
            unchanged = self._unchanged
            if default and type(self.ser).unchanged is Serializer.unchanged and self.ser.max_items >= 0:
                unchanged = partial(native.mod.unchanged, self.ser.max_items)  # the same checks in C
            leaf = (self.ser.max_str, self.ser._max_int_bits) if default else None
            if (default and self.ser.max_items >= 0
                    and all(getattr(type(self.ser), m) is getattr(Serializer, m) for m in _C_KEYED)):
                # keyed's flat list/tuple/dict of leaf values is rendered and keyed in C as well, and
                # unchanged is called there directly
                leaf += (self.ser.max_items, self.ser.max_depth)
            self._snap_ctx = (
                self._value, self._keyed, unchanged, self._named,
                self.ser.bad_classes if default else frozenset(), self._immutable, self._keyed_types,
                leaf, self._snapshot,
                _other_ctx(self.ser))
            self._snap = partial(native.mod.snapshot, self._snap_ctx)
        self.truncated = False
        self.error = None
        self._raw = []         # compact records (see _as_dict)
        self._events = []      # the records turned into dicts so far
        self._frames = {}      # frame -> state list (_HEAD, _NLINES, ...)
        self._codes = {}       # code -> (filename, qualname, firstlineno, is_gen) or False
        self._running = False
        self._off = True
        self._thread = None
        self._tool = None
        self._local_codes = []
        self._jump_lines = {}
        self._prev_trace = None
        self._capture = None   # the C handlers (native.mod.Capture), while started with the accelerator

    @property
    def events(self):
        """The raw events as dicts (see the module docstring)."""
        raw = self._raw
        done = self._events
        if len(done) < len(raw):
            done.extend(map(_as_dict, islice(raw, len(done), None)))
        return done

    # ---------------------------------------------------------------- public interface
    def start(self):
        if self._running:
            raise RuntimeError("tracer already started")
        self._thread = _get_ident()
        self._running = True
        self._set_off(False)
        if native.mod is not None:
            if _fast_locals[0] is None and hasattr(native.mod, "fast_locals_check"):  # 3.11 and 3.13 builds only
                _fast_locals[0] = _fast_locals_probe(self, [self])
            # _st_global/_st_local and the commonest monitoring callbacks in C, on this state
            self._capture = native.mod.Capture(
                self, self._frames, self._codes, self._raw, self._snap_ctx, self.ser,
                self._m_scope if self.backend == "monitoring" else self._info, self.max_lines_per_call,
                self.max_events, getattr(sys.monitoring, "DISABLE", None) if HAS_MONITORING else None,
                self._thread)
        if self.backend == "monitoring":
            self._start_monitoring()
        else:
            self._prev_trace = sys.gettrace()
            if self._capture is not None:
                native.mod.settrace(self._capture)
            else:
                sys.settrace(self._st_global)
        return self

    def stop(self):
        if not self._running:
            return self
        self._set_off(True)
        try:
            if self.backend == "monitoring":
                self._stop_monitoring()
            else:
                sys.settrace(self._prev_trace)
                self._prev_trace = None
                if self._capture is not None:
                    # the C capture stops a frame's line events past the line cap (see cap_event)
                    for frame, st in self._frames.items():
                        if st[_CAPPED]:
                            frame.f_trace_lines = True
        finally:
            self._running = False
            self._frames.clear()
            self._capture = None
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

    def _snapshot(self, frame, st):
        """The frame's locals as [[name, repr], ...] for a call or line event. Only what may have
        changed since the frame's previous snapshot is looked at: values that are new objects
        (found in C: ``map(is_not, ...)``) or of mutable types; a list/tuple/dict whose shown
        items are deep-immutable keeps its text while those items are the same objects
        (``Serializer.unchanged``); any other value is serialized again. Unchanged pairs, and the
        whole list when nothing changed, are shared with the previous event."""
        fl = frame.f_locals
        if type(fl) is dict:  # up to 3.12, and frames without fast locals
            keys = list(fl)
            vals = list(fl.values())
        else:  # 3.13+: a FrameLocalsProxy, whose keys() and values() are lists
            keys = fl.keys()
            vals = fl.values()
        if keys == st[_KEYS]:
            out = st[_OUT]
            mut = st[_MUT]
            cache = st[_CACHE]
            shared = True  # out is the previous event's list: copy before writing
            todo = compress(count(), map(or_, map(is_not, vals, st[_VALS]), mut))
        else:
            n = len(keys)
            st[_KEYS] = keys
            st[_OUT] = out = [None] * n
            st[_MUT] = mut = [False] * n
            st[_CACHE] = cache = [None] * n
            st[_FILT] = False
            shared = False
            todo = range(n)
        st[_VALS] = vals
        value = self._value
        immutable = self._immutable
        keyed_types = self._keyed_types
        named = self._named
        for i in todo:
            name = keys[i]
            c = name[0]
            if c == "@" or c == ".":
                st[_FILT] = True  # pytest's @py_assert* temporaries; comprehension arguments
                continue
            v = vals[i]
            t = type(v)
            if t in keyed_types:
                key = cache[i]
                if type(key) is tuple and self._unchanged(v, key):
                    continue
                r, cache[i] = self._keyed(v)
                mut[i] = True
            elif t is named:
                # a function's text is its qualname's (its address is stripped): the same
                # qualname object, and no failed function repr since, gives the same text
                q = v.__qualname__
                if cache[i] is q and out[i] is not None and t not in self.ser.bad_classes:
                    continue
                r = value(v)
                cache[i] = q
                mut[i] = True
            else:
                r = value(v)
                mut[i] = t not in immutable
            pair = out[i]
            if pair is None or pair[1] != r:
                if shared:
                    out = out[:]
                    shared = False
                out[i] = [name, r]
        st[_OUT] = out
        return [p for p in out if p is not None] if st[_FILT] else out

    def saturated(self):
        """Whether the trace has stopped growing at a cap: the event cap, or the line cap of a call
        still running (a loop inside one call). Safe to call between events, not from a callback."""
        return self.truncated or any(st[_CAPPED] for st in list(self._frames.values()))

    def _emit(self, rec):
        raw = self._raw
        raw.append(rec)
        if len(raw) >= self.max_events:
            self.truncated = True
            self._halt()

    def _set_off(self, off):
        """Events are ignored from now on (off) or handled again; the C capture keeps its own copy,
        which it reads at every event in place of this attribute."""
        self._off = off
        if self._capture is not None:
            self._capture.off = off

    def _halt(self):
        """Stop delivering events now (from inside a callback); stop() finishes the cleanup."""
        self._set_off(True)
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
            self._set_off(True)
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
                depth = st[_HEAD][1] + 1
                break
            f = f.f_back
        st = [(info, depth), 0, False, None, None, None, None, None, False]
        frames[frame] = st
        line = frame.f_lineno
        self._emit((_CALL, st[_HEAD], line, self._snap(frame, st), info[3] and line != info[2]))

    def _on_line(self, frame, st, line, _unused=None):
        n = st[_NLINES] = st[_NLINES] + 1
        if n > self.max_lines_per_call:
            st[_CAPPED] = True
            return
        self._emit((_LINE, st[_HEAD], line, self._snap(frame, st)))

    def _on_return(self, frame, st, value):
        del self._frames[frame]
        self._emit((_RETURN, st[_HEAD], frame.f_lineno, self.ser(value), st[_CAPPED]))

    def _on_exception(self, frame, st, exc):
        self._emit((_EXCEPTION, st[_HEAD], frame.f_lineno, self.ser(exc)))

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
            if event == "line":  # _on_line, inlined: the commonest event
                n = st[_NLINES] = st[_NLINES] + 1
                if n > self.max_lines_per_call:
                    st[_CAPPED] = True
                    return self._st_local
                raw = self._raw
                raw.append((_LINE, st[_HEAD], frame.f_lineno, self._snap(frame, st)))
                if len(raw) >= self.max_events:
                    self.truncated = True
                    self._halt()
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
        on_call = self._call_callback
        on_frame = self._frame_callback
        on_return = self._on_return
        on_exception = self._on_exception
        cap = self._capture
        start = on_call(disable=True) if cap is None else cap.start
        ret = on_frame(lambda frame, st, offset, value: on_return(frame, st, value)) if cap is None else cap.ret
        exc = on_frame(lambda frame, st, offset, exc: on_exception(frame, st, exc))
        reg = mon.register_callback
        reg(tool, E.PY_START, start)
        reg(tool, E.PY_RESUME, start)
        reg(tool, E.PY_THROW, on_call(disable=False))
        reg(tool, E.PY_RETURN, ret)
        reg(tool, E.PY_YIELD, ret)
        reg(tool, E.PY_UNWIND, on_frame(lambda frame, st, offset, exc: on_return(frame, st, None)))
        reg(tool, E.RAISE, exc)
        reg(tool, E.STOP_ITERATION, exc)
        reg(tool, E.LINE, self._m_line_callback() if cap is None else cap.line)
        reg(tool, E.JUMP, self._m_jump if cap is None else cap.jump)
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

    def _call_callback(self, disable):
        """The PY_START/PY_RESUME (``disable``: out-of-scope code gets DISABLE) or PY_THROW
        callback: a call event for in-scope code run by the traced thread."""
        getframe = sys._getframe
        DISABLE = self._DISABLE if disable else None

        def callback(code, offset, exc=None):
            if self._off:
                return None
            try:
                info = self._m_scope(code)
                if not info:
                    return DISABLE
                if _get_ident() == self._thread:
                    self._on_call(getframe(1), info)
            except Exception:
                self._fault()
            return None

        return callback

    def _frame_callback(self, handler):
        """A callback ``(code, offset_or_line[, arg])`` that runs ``handler(frame, st,
        offset_or_line, arg)`` when the calling frame is traced; all callbacks share this guard
        (nothing once tracing is off; a fault is recorded and stops tracing)."""
        frames = self._frames
        getframe = sys._getframe

        def callback(code, where, arg=None):
            if self._off:
                return None
            try:
                frame = getframe(1)
                st = frames.get(frame)
                if st is not None:
                    handler(frame, st, where, arg)
            except Exception:
                self._fault()
            return None

        return callback

    def _m_line_callback(self):
        """The LINE callback: ``_frame_callback(self._on_line)`` with both calls inlined (the
        commonest event)."""
        frames = self._frames
        getframe = sys._getframe
        raw = self._raw
        snapshot = self._snap
        max_lines = self.max_lines_per_call
        max_events = self.max_events

        def callback(code, line):
            frame = getframe(1)
            st = frames.get(frame)
            if st is None or self._off:
                return None
            n = st[_NLINES] = st[_NLINES] + 1
            if n > max_lines:
                st[_CAPPED] = True
                return None
            try:
                raw.append((_LINE, st[_HEAD], line, snapshot(frame, st)))
                if len(raw) >= max_events:
                    self.truncated = True
                    self._halt()
            except Exception:
                self._fault()
            return None

        return callback

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
