"""Bounded, deterministic value serializer: Python repr() strings with caps.

Exact builtin types are rendered by hand (with caps on string length, items and depth); any other
object goes through its own ``repr`` under a guard: a repr that raises, is longer than ``max_repr``
or slower than ``slow_repr_s`` becomes ``<ClassName object>`` and that class is summarized without
calling repr for the rest of the run (the Serializer instance's lifetime). Huge ints are summarized
from ``bit_length`` (no str() call), numpy-like objects (``shape`` and ``dtype`` on the type) from
their shape and dtype. Addresses (`` at 0x...``) are stripped, sets are sorted by their rendered
form, cycles render as ``[...]`` / ``{...}`` / ``(...)``. Standard library only; Python 3.8+.
"""
import re
import sys
import time
from itertools import islice

_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")
_THREAD_IDENT = re.compile(r"\b(started|stopped)( daemon)? \d+")  # threading.Thread reprs
_perf = time.perf_counter

DEFAULTS = {
    "max_str": 200,        # characters of a str/bytes value kept before "..."
    "max_items": 20,       # items of a list/tuple/dict/set kept before "..."
    "max_depth": 4,        # nesting of containers rendered before "[...]"
    "max_repr": 1000,      # a user repr longer than this becomes a marker
    "slow_repr_s": 0.05,   # a user repr slower than this becomes a marker
    "max_int_digits": 1000,  # ints with more digits are summarized from bit_length
    "max_set_sort": 1000,  # sets larger than this: the first N by iteration order are sorted
}

# bits that certainly fit in max_int_digits decimal digits (log2(10) ~ 3.3219)
_LOG2_10 = 3.321928094887362


def deep_overflow():
    """True when a RecursionError must not be swallowed: on Python 3.8 a RecursionError caught
    near the recursion limit leaves the interpreter "overflowed", and a program that keeps
    recursing then aborts ("Cannot recover from stack overflow") instead of raising."""
    if sys.version_info >= (3, 9):
        return False
    depth = 0
    f = sys._getframe(1)
    while f is not None:
        depth += 1
        f = f.f_back
    return depth > sys.getrecursionlimit() - 100


def _marker(obj):
    return "<%s object>" % type(obj).__name__


class Serializer(object):
    """Callable: ``Serializer(**caps)(value) -> str``. Keeps per-run state (classes whose repr failed)."""

    def __init__(self, **caps):
        unknown = set(caps) - set(DEFAULTS)
        if unknown:
            raise TypeError("unknown serializer options: %s" % sorted(unknown))
        opts = dict(DEFAULTS)
        opts.update(caps)
        self.max_str = int(opts["max_str"])
        self.max_items = int(opts["max_items"])
        self.max_depth = int(opts["max_depth"])
        self.max_repr = int(opts["max_repr"])
        self.slow_repr_s = float(opts["slow_repr_s"])
        self.max_int_digits = int(opts["max_int_digits"])
        self.max_set_sort = int(opts["max_set_sort"])
        self._max_int_bits = int(self.max_int_digits * _LOG2_10)
        self.bad_classes = set()      # types whose repr is no longer called
        self._array_like = {}         # type -> bool
        self._active = set()          # ids of containers on the current path (cycles)
        self._dispatch = {
            int: self._int,
            float: repr,
            bool: repr,
            type(None): repr,
            str: self._str,
            bytes: self._bytes,
            list: self._list,
            tuple: self._tuple,
            dict: self._dict,
            set: self._set,
            frozenset: self._frozenset,
        }

    def __call__(self, value):
        try:
            return self._ser(value, 0)
        except RecursionError:
            self._active.clear()
            if deep_overflow():
                raise
            return _marker(value)
        except Exception:  # never let a value break the trace
            self._active.clear()
            return _marker(value)

    # -- dispatch ---------------------------------------------------------------------------
    def _ser(self, value, depth):
        fn = self._dispatch.get(type(value))
        if fn is not None:
            if fn is repr:
                return repr(value)
            return fn(value, depth)
        return self._other(value)

    def _int(self, v, depth):
        bits = v.bit_length()
        if bits > self._max_int_bits:
            # beyond the digit cap (or within a few digits of it): never call str() on it
            return "%s<int bit_length=%d>" % ("-" if v < 0 else "", bits)
        return repr(v)

    def _str(self, v, depth):
        if len(v) > self.max_str:
            return repr(v[: self.max_str]) + "..."
        return repr(v)

    def _bytes(self, v, depth):
        if len(v) > self.max_str:
            return repr(v[: self.max_str]) + "..."
        return repr(v)

    def _items(self, seq, depth):
        out = []
        n = 0
        cap = self.max_items
        for item in seq:
            if n >= cap:
                out.append("...")
                break
            out.append(self._ser(item, depth + 1))
            n += 1
        return out

    def _list(self, v, depth):
        if not v:
            return "[]"
        key = id(v)
        if key in self._active or depth >= self.max_depth:
            return "[...]"
        self._active.add(key)
        try:
            return "[" + ", ".join(self._items(v, depth)) + "]"
        finally:
            self._active.discard(key)

    def _tuple(self, v, depth):
        if not v:
            return "()"
        key = id(v)
        if key in self._active or depth >= self.max_depth:
            return "(...)"
        self._active.add(key)
        try:
            parts = self._items(v, depth)
        finally:
            self._active.discard(key)
        if len(parts) == 1:
            return "(" + parts[0] + ",)"
        return "(" + ", ".join(parts) + ")"

    def _dict(self, v, depth):
        if not v:
            return "{}"
        key = id(v)
        if key in self._active or depth >= self.max_depth:
            return "{...}"
        self._active.add(key)
        try:
            out = []
            n = 0
            for k, val in islice(v.items(), self.max_items + 1):
                if n >= self.max_items:
                    out.append("...")
                    break
                out.append(self._ser(k, depth + 1) + ": " + self._ser(val, depth + 1))
                n += 1
            return "{" + ", ".join(out) + "}"
        finally:
            self._active.discard(key)

    def _set_items(self, v, depth):
        if len(v) > self.max_set_sort:
            items = []
            for i, x in enumerate(v):
                if i >= self.max_set_sort:
                    break
                items.append(x)
        else:
            items = v
        parts = sorted(self._ser(x, depth + 1) for x in items)
        if len(v) > self.max_items:
            parts = parts[: self.max_items] + ["..."]
        return parts

    def _set(self, v, depth):
        if not v:
            return "set()"
        if depth >= self.max_depth:
            return "{...}"
        return "{" + ", ".join(self._set_items(v, depth)) + "}"

    def _frozenset(self, v, depth):
        if not v:
            return "frozenset()"
        if depth >= self.max_depth:
            return "frozenset({...})"
        return "frozenset({" + ", ".join(self._set_items(v, depth)) + "})"

    # -- everything else --------------------------------------------------------------------
    def _is_array_like(self, cls):
        known = self._array_like.get(cls)
        if known is None:
            try:
                known = (getattr(cls, "shape", None) is not None
                         and getattr(cls, "dtype", None) is not None)
            except Exception:
                known = False
            self._array_like[cls] = known
        return known

    def _array(self, value):
        cls = type(value)
        try:
            shape = getattr(value, "shape")
            if type(shape) is not tuple:
                shape = tuple(int(x) for x in shape)
            dtype = str(getattr(value, "dtype"))
            if len(dtype) > 100:
                dtype = dtype[:100] + "..."
            return "<%s shape=%s dtype=%s>" % (cls.__name__, self._tuple(shape, 0), dtype)
        except Exception:
            self.bad_classes.add(cls)
            return _marker(value)

    def _other(self, value):
        cls = type(value)
        if cls in self.bad_classes:
            return _marker(value)
        if self._is_array_like(cls):
            return self._array(value)
        t0 = _perf()
        try:
            text = repr(value)
        except RecursionError:
            if deep_overflow():
                raise
            self.bad_classes.add(cls)
            return _marker(value)
        except Exception:
            self.bad_classes.add(cls)
            return _marker(value)
        if type(text) is not str or len(text) > self.max_repr or _perf() - t0 > self.slow_repr_s:
            self.bad_classes.add(cls)
            return _marker(value)
        if " at 0x" in text:
            text = _ADDR.sub("", text)
        if "ed " in text and ("started" in text or "stopped" in text):
            text = _THREAD_IDENT.sub(r"\1\2", text)
        return text


_default = None


def serialize(value):
    """Serialize with a module-level default Serializer (shared bad-class memory)."""
    global _default
    if _default is None:
        _default = Serializer()
    return _default(value)
