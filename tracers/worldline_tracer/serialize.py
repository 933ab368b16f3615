"""Bounded, deterministic value serializer: Python repr() strings with caps.

Exact builtin types are rendered by hand (with caps on string length, items and depth); any other
object goes through its own ``repr`` under a guard: a repr that raises or is longer than ``max_repr``
becomes ``<ClassName object>`` and that class is summarized without calling repr for the rest of
the run (the Serializer instance's lifetime). Those bounds are on the output, never on time, so a
trace does not depend on how loaded the machine is; only a repr slower than ``repr_safety_s`` (a
safety net far above any sane repr) is cut on time, and its class is named in ``slow_classes`` so
the caller can flag the run as load-dependent rather than silently different. Huge ints are summarized
from ``bit_length`` (no str() call), numpy-like objects (``shape`` and ``dtype`` on the type) from
their shape and dtype. Addresses (`` at 0x...``) are stripped, sets are sorted by their rendered
form, cycles render as ``[...]`` / ``{...}`` / ``(...)``. Standard library only; Python 3.8+.
"""
import re
import sys
import time
from itertools import chain, islice, repeat
from operator import is_

_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")
_THREAD_IDENT = re.compile(r"\b(started|stopped)( daemon)? \d+")  # threading.Thread reprs
_perf = time.perf_counter
# exact types of the fast paths (builtin repr in C when it is exactly the slow path's text)
_LEAVES = frozenset({int, float, bool, type(None), str, bytes})
_PLAIN = frozenset({float, bool, type(None)})
_INTS = frozenset({int, bool})
_is_int = int.__instancecheck__  # in C; bools pass too (harmless for the magnitude check)
_SIZED = ((str, str.__instancecheck__), (bytes, bytes.__instancecheck__))
_SEQS = frozenset({list, tuple})
_CONTAINERS = frozenset({list, tuple, dict, set, frozenset})
_FAST_MIN = 6  # smaller containers: the fast path's fixed cost is more than the slow path's

DEFAULTS = {
    "max_str": 200,        # characters of a str/bytes value kept before "..."
    "max_items": 20,       # items of a list/tuple/dict/set kept before "..."
    "max_depth": 4,        # nesting of containers rendered before "[...]"
    "max_repr": 1000,      # a user repr longer than this becomes a marker
    "repr_safety_s": 2.0,  # a user repr slower than this becomes a marker (named in slow_classes)
    "max_int_digits": 1000,  # ints with more digits are summarized from bit_length
    "max_set_sort": 1000,  # sets larger than this: the first N by iteration order are sorted
}

# bits that certainly fit in max_int_digits decimal digits (log2(10) ~ 3.3219)
_LOG2_10 = 3.321928094887362


def deep_overflow():
    """True when a RecursionError must not be swallowed: on Python 3.8 and 3.9 a RecursionError caught
    near the recursion limit leaves the interpreter "overflowed", and a program that keeps
    recursing then aborts ("Cannot recover from stack overflow") instead of raising."""
    if sys.version_info >= (3, 10):
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
        self.repr_safety_s = float(opts["repr_safety_s"])
        self.max_int_digits = int(opts["max_int_digits"])
        self.max_set_sort = int(opts["max_set_sort"])
        self._max_int_bits = int(self.max_int_digits * _LOG2_10)
        self._int_lim = 1 << self._max_int_bits  # |int| < this: within the digit cap
        self.bad_classes = set()      # types whose repr is no longer called
        self.slow_classes = []        # names of classes cut by the wall-time safety net
        self._array_like = {}         # type -> bool
        self._active = set()          # ids of containers on the current path (cycles)
        self._rec = None              # containers rendered, while ``keyed`` records them
        self._keyable = True          # False once ``keyed`` rendered a non-leaf, non-container
        self._dispatch = {
            int: self._int,
            float: repr,
            bool: repr,
            type(None): repr,
            str: self._text,
            bytes: self._text,
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

    def _text(self, v, depth):  # str and bytes
        if len(v) > self.max_str:
            return repr(v[: self.max_str]) + "..."
        return repr(v)

    def _items(self, seq, depth):
        """The texts of a list's/tuple's items (capped), with ``seq`` on the current path."""
        out = []
        n = 0
        cap = self.max_items
        key = id(seq)
        self._active.add(key)
        try:
            for item in seq:
                if n >= cap:
                    out.append("...")
                    break
                out.append(self._ser(item, depth + 1))
                n += 1
        finally:
            self._active.discard(key)
        return out

    def _scalars_ok(self, items, types, pure):
        """The items of ``items`` (re-iterable) whose exact types are the leaf types ``types``
        (``pure``: there are no others): True when the builtin repr of each is exactly what
        ``_ser`` gives (ints within the digit cap, str/bytes within max_str), checked in C; mixed
        types are split with ``filter(T.__instancecheck__, ...)``."""
        if types <= _PLAIN:
            return True
        if int in types:
            ints = items if pure and types <= _INTS else list(filter(_is_int, items))
            lim = self._int_lim
            if not (-lim < min(ints) and max(ints) < lim):
                return False
        for t, is_t in _SIZED:
            if t in types:
                sized = items if pure and len(types) == 1 else filter(is_t, items)
                if max(map(len, sized)) > self.max_str:
                    return False
        return True

    def _seq_scan(self, s, depth):
        """How a list/tuple ``s`` (at most max_items items) at ``depth`` can be rendered: 2 when
        its builtin repr is exactly the slow path's text and its items are deep-immutable (leaf
        scalars, or tuples of them), 1 when the repr is exact but items are mutable (lists of
        leaf scalars), 0 otherwise. All in C but for one loop over the columns of nested rows
        (rows of one length, like records; a column is usually of one type). Deeper or mixed
        nesting takes the slow path, which fast-paths the inner containers one by one: below
        that size a Python-level check costs more than it saves."""
        types = set(map(type, s))
        if types <= _LEAVES:
            return 2 if self._scalars_ok(s, types, True) else 0
        if types <= _SEQS and depth + 1 < self.max_depth:
            lens = set(map(len, s))
            if len(lens) != 1 or lens.pop() > self.max_items:
                return 0
            for col in zip(*s):
                ctypes = set(map(type, col))
                if not (ctypes <= _LEAVES and self._scalars_ok(col, ctypes, True)):
                    return 0
            return 1 if list in types else 2
        return 0

    def _seq_render(self, v, depth):
        """The text by builtin repr of a non-empty list/tuple, or None."""
        n = self.max_items
        if n < 2:
            return None
        s = v if len(v) <= n else v[:n]
        scan = self._seq_scan(s, depth)
        if not scan:
            return None
        if scan == 1 and self._rec is not None:
            self._rec.extend(s)  # rows that are lists: containers the text shows
        text = repr(s)
        if s is not v:
            text = text[:-1] + (", ...]" if type(s) is list else ", ...)")
        return text

    def _dict_render(self, v, depth):
        """The text by builtin repr of a non-empty dict of leaf scalars, or None."""
        n = self.max_items
        if n < 1:
            return None
        vtypes = set(map(type, islice(v.values(), n)))  # values fail most often: check first
        if not vtypes <= _LEAVES:
            return None
        sub = v if len(v) <= n else dict(islice(v.items(), n))
        ktypes = set(map(type, sub))
        if not (ktypes <= _LEAVES and self._scalars_ok(sub, ktypes, True)
                and self._scalars_ok(sub.values(), vtypes, True)):
            return None
        text = repr(sub)
        return text if sub is v else text[:-1] + ", ...}"

    def keyed(self, value):
        """``(text, key)`` for a local's value: text is ``self(value)``; key, when not None, lets
        a caller that keeps it tell in C that the text still holds (``unchanged``). The text of a
        list, tuple, dict, set or frozenset is a function of the containers it shows (the value
        and those nested in it, recorded while it is rendered): their identities, their lengths
        (or, past max_items, that they are past it) and the identities of their shown items, as
        long as every other item is of an immutable leaf type (no key when any is not)."""
        if type(value) not in _CONTAINERS:
            return self(value), None
        t = type(value)
        rec = self._rec = []
        self._keyable = True
        try:
            text = None
            if value and self.max_depth > 0:  # the builtin-repr paths, small containers too
                if t is dict:
                    text = self._dict_render(value, 0)
                else:
                    text = self._seq_render(value, 0) if t is list or t is tuple else None
            if text is None:
                text = self._ser(value, 0)
            else:
                rec.append(value)
        except Exception:  # the guarded call gives the marker (or re-raises a deep overflow)
            self._active.clear()
            self._rec = None
            return self(value), None
        self._rec = None
        if not self._keyable:
            return text, None
        k = self.max_items
        if len(rec) == 1 and t is not set and t is not frozenset:  # one flat list/tuple/dict
            n = len(value)
            return text, (value, n if n <= k else -1, tuple(islice(value, k)),
                          tuple(islice(value.values(), k)) if t is dict else None)
        small = []
        capped = []
        for c in rec:
            if len(c) <= k or type(c) is set or type(c) is frozenset:
                if len(c) > self.max_set_sort:
                    return text, None
                small.append(c)
            else:
                capped.append(c)
        sdicts = [c for c in small if type(c) is dict]
        cdicts = [c for c in capped if type(c) is dict]
        return text, (value, tuple(small), list(map(len, small)), tuple(chain.from_iterable(small)),
                      tuple(sdicts), tuple(chain.from_iterable(map(dict.values, sdicts))),
                      tuple(capped), tuple(chain.from_iterable(map(islice, capped, repeat(k)))),
                      tuple(cdicts), tuple(chain.from_iterable(map(islice, map(dict.values, cdicts), repeat(k)))))

    def unchanged(self, value, key):
        """True when ``keyed(value)`` would give the same text as when it returned ``key``."""
        if key[0] is not value:
            return False
        k = self.max_items
        if len(key) == 4:
            n = len(value)
            if (n if n <= k else -1) != key[1] or not all(map(is_, value, key[2])):
                return False
            return key[3] is None or all(map(is_, value.values(), key[3]))
        small = key[1]
        if list(map(len, small)) != key[2] or not all(map(is_, chain.from_iterable(small), key[3])):
            return False
        if key[4] and not all(map(is_, chain.from_iterable(map(dict.values, key[4])), key[5])):
            return False
        capped = key[6]
        if capped:
            if min(map(len, capped)) <= k or not all(map(
                    is_, chain.from_iterable(map(islice, capped, repeat(k))), key[7])):
                return False
            if key[8] and not all(map(is_, chain.from_iterable(
                    map(islice, map(dict.values, key[8]), repeat(k))), key[9])):
                return False
        return True

    def _dict_items(self, v, depth):
        """The texts of a dict's items (capped), with ``v`` on the current path."""
        out = []
        n = 0
        key = id(v)
        self._active.add(key)
        try:
            for k, val in islice(v.items(), self.max_items + 1):
                if n >= self.max_items:
                    out.append("...")
                    break
                out.append(self._ser(k, depth + 1) + ": " + self._ser(val, depth + 1))
                n += 1
        finally:
            self._active.discard(key)
        return out

    # The three containers share one shape: empty; cycle or too deep: marker; with at least
    # _FAST_MIN items, the fast path's text when it applies; else the items, rendered with the
    # container on the current path (_items, _dict_items). Kept inline: it runs per container.
    def _list(self, v, depth):
        if self._rec is not None:
            self._rec.append(v)
        if not v:
            return "[]"
        if id(v) in self._active or depth >= self.max_depth:
            return "[...]"
        if len(v) >= _FAST_MIN:
            text = self._seq_render(v, depth)
            if text is not None:
                return text
        return "[" + ", ".join(self._items(v, depth)) + "]"

    def _tuple(self, v, depth):
        if self._rec is not None:
            self._rec.append(v)
        if not v:
            return "()"
        if id(v) in self._active or depth >= self.max_depth:
            return "(...)"
        if len(v) >= _FAST_MIN:
            text = self._seq_render(v, depth)
            if text is not None:
                return text
        parts = self._items(v, depth)
        if len(parts) == 1:
            return "(" + parts[0] + ",)"
        return "(" + ", ".join(parts) + ")"

    def _dict(self, v, depth):
        if self._rec is not None:
            self._rec.append(v)
        if not v:
            return "{}"
        if id(v) in self._active or depth >= self.max_depth:
            return "{...}"
        if len(v) >= _FAST_MIN:
            text = self._dict_render(v, depth)
            if text is not None:
                return text
        return "{" + ", ".join(self._dict_items(v, depth)) + "}"

    def _set_items(self, v, depth):
        if len(v) > self.max_set_sort:
            items = []
            for i, x in enumerate(v):
                if i >= self.max_set_sort:
                    break
                items.append(x)
        else:
            items = v
        types = set(map(type, items))
        if types <= _LEAVES and self._scalars_ok(items, types, True):
            parts = sorted(map(repr, items))
        else:
            parts = sorted(self._ser(x, depth + 1) for x in items)
        if len(v) > self.max_items:
            parts = parts[: self.max_items] + ["..."]
        return parts

    def _set(self, v, depth):
        if self._rec is not None:
            self._rec.append(v)
        if not v:
            return "set()"
        if depth >= self.max_depth:
            return "{...}"
        return "{" + ", ".join(self._set_items(v, depth)) + "}"

    def _frozenset(self, v, depth):
        if self._rec is not None:
            self._rec.append(v)
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
        self._keyable = False  # its text may change while it stays the same object
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
        if type(text) is not str or len(text) > self.max_repr:
            self.bad_classes.add(cls)
            return _marker(value)
        if _perf() - t0 > self.repr_safety_s:
            self.bad_classes.add(cls)
            self.slow_classes.append(cls.__name__)
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
