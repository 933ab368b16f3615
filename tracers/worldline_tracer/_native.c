/* The tracer's optional C accelerator, imported as the top-level module _worldline_native
 * (build_native.py compiles it; native.py loads it or falls back to the pure Python, which stays
 * the reference: tests compare both paths' bytes).
 *
 * frame_parts: an episode frame's pieces (episodes._Frame), exactly the text the Python builds:
 * the rendered text, that text JSON-escaped, the frame's JSON after its "depth" key, and whether
 * its only "<|" are its separators. It returns None for anything off its fast path (a field of a
 * type json would convert, repeated local names), and the caller then takes the Python path.
 *
 * JSON strings are written as json.encoder.encode_basestring_ascii writes them (Modules/_json.c:
 * S_CHAR and ascii_escape_unichar): printable ASCII but '"' and '\\' as is, the short escapes,
 * everything else as lowercase \uXXXX, astral characters as a surrogate pair.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <sys/mman.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h> /* PyFrame_Type and PyFrame_GetBack, in Python.h from 3.11 */
#endif
#include <structmember.h> /* PyMemberDef's T_BOOL, for Capture.off */
#include <limits.h>
#include <string.h>

#include "_buf.h"

/* Python's `a == b` / `a != b` as a truth value (PyObject_RichCompareBool would answer for
 * identical objects without asking them, unlike the Python it replaces); steals `result`. */
static int truth(PyObject *result) {
    if (result == NULL) return -1;
    int t = PyObject_IsTrue(result);
    Py_DECREF(result);
    return t;
}

static PyObject *ACTION_SEP, *ARG_SEP, *FRAME_SEP, *EMPTY, *LT_BAR, *LT_QUOTE_COLON;

/* A text's "<|" counted, or -1 when '<":' is in it (then it is not clean whatever the count):
 * `lt_scan` over one-byte characters (JSON written here, Latin-1 str data), `piece_scan` over a str
 * (-2: an error). */
static Py_ssize_t lt_scan(const char *s, Py_ssize_t n) {
    Py_ssize_t bars = 0;
    const char *end = s + n, *p = s;
    while ((p = memchr(p, '<', end - p)) != NULL) {
        if (p + 1 < end && p[1] == '|') bars++;
        else if (p + 2 < end && p[1] == '"' && p[2] == ':') return -1;
        p++;
    }
    return bars;
}

static Py_ssize_t piece_scan(PyObject *s) {
    if (PyUnicode_KIND(s) == PyUnicode_1BYTE_KIND)
        return lt_scan((const char *)PyUnicode_1BYTE_DATA(s), PyUnicode_GET_LENGTH(s));
    Py_ssize_t at = PyUnicode_Find(s, LT_QUOTE_COLON, 0, PY_SSIZE_T_MAX, 1);
    if (at == -2) return -2;
    if (at != -1) return -1;
    Py_ssize_t k = PyUnicode_Count(s, LT_BAR, 0, PY_SSIZE_T_MAX);
    return k < 0 ? -2 : k;
}

/* Whether `sep` starts with "<" and ends with ">": then "<|" and '<":' cannot straddle it and a
 * piece beside it, and a frame's text can be counted piece by piece (frame_parts). */
static int separated_by(PyObject *sep) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(sep);
    return n > 0 && PyUnicode_READ_CHAR(sep, 0) == '<' && PyUnicode_READ_CHAR(sep, n - 1) == '>';
}

/* A str a frame's text is made of, as frame_parts needs it: its JSON escape without quotes, its
 * "<|" counted (piece_scan's answer: -1 when '<":' is in it) and whether it is shaped as a
 * separator. */
typedef struct {
    PyObject *s;      /* owned by a table's entry; NULL: the entry is empty */
    char *esc;        /* PyMem; NULL when n is 0 */
    Py_ssize_t n;
    Py_ssize_t bars;
    int shaped;
} Piece;

static int piece_make(Piece *p, PyObject *s) {
    Buf b = {0};
    Py_ssize_t bars = piece_scan(s);
    if (bars == -2 || buf_json(&b, s, 0) < 0) {
        PyMem_Free(b.p);
        return -1;
    }
    p->s = s;
    p->esc = b.p;
    p->n = b.n;
    p->bars = bars;
    p->shaped = separated_by(s);
    return 0;
}

/* Pieces are remembered by their str's identity: a frame's source line is one of SourceIndex's
 * line strs and its separators are render.py's, so frame_parts met the same few thousand strs at
 * every frame and escaped and scanned each again (h11, 3.11: a quarter of frame_parts'
 * instructions). An entry holds a reference to its str, so
 * the address it is found by is never another str's; a str is immutable, so its piece stays
 * true. Separators: SEP_SLOTS entries, replaced in turn (a call asks for at most 4, fewer than
 * SEP_SLOTS, so none it holds is replaced under it). Sources: SOURCE_SLOTS entries, one per
 * address, the next str at an address replacing its entry; a line longer than PIECE_MAX_CHARS
 * is made afresh each time, so the table keeps at most SOURCE_SLOTS * PIECE_MAX_CHARS characters
 * (their escapes up to 12 bytes each) of lines SourceIndex keeps anyway. */
#define SEP_SLOTS 8
#define SOURCE_SLOTS 4096
#define PIECE_MAX_CHARS 1024
static Piece sep_slots[SEP_SLOTS], source_slots[SOURCE_SLOTS];
static int sep_next;

static void piece_replace(Piece *p, Piece *q) {
    Py_INCREF(q->s);
    Py_XDECREF(p->s);  /* a str: its deallocation runs no Python code */
    PyMem_Free(p->esc);
    *p = *q;
}

static const Piece *sep_piece(PyObject *s) {
    for (int i = 0; i < SEP_SLOTS; i++)
        if (sep_slots[i].s == s) return &sep_slots[i];
    Piece q;
    if (piece_make(&q, s) < 0) return NULL;
    Piece *p = &sep_slots[sep_next];
    sep_next = (sep_next + 1) % SEP_SLOTS;
    piece_replace(p, &q);
    return p;
}

/* The source's piece: remembered, or (a long line) made into *tmp, whose esc the caller frees. */
static const Piece *source_piece(PyObject *s, Piece *tmp) {
    if (PyUnicode_GET_LENGTH(s) > PIECE_MAX_CHARS) return piece_make(tmp, s) < 0 ? NULL : tmp;
    uintptr_t a = (uintptr_t)s;
    Piece *p = &source_slots[((a >> 4) ^ (a >> 16)) & (SOURCE_SLOTS - 1)];
    if (p->s == s) return p;
    Piece q;
    if (piece_make(&q, s) < 0) return NULL;
    piece_replace(p, &q);
    return p;
}

/* '"function": F, "kind": K, "line": L' (episodes._head) */
static int put_head(Buf *b, PyObject *function, PyObject *kind_json, long long line) {
    Py_ssize_t k;
    const char *ks = PyUnicode_AsUTF8AndSize(kind_json, &k);
    if (ks == NULL) return -1;
    if (PUT(b, "\"function\": ") < 0 || buf_json(b, function, 1) < 0 || PUT(b, ", \"kind\": ") < 0
        || buf_put(b, ks, k) < 0 || PUT(b, ", \"line\": ") < 0 || buf_long(b, line) < 0)
        return -1;
    return 0;
}

/* The two items of a [name, value] list or tuple (borrowed); 0 for anything else. */
static int pair_items(PyObject *pair, PyObject **name, PyObject **value) {
    if (PyList_CheckExact(pair) && PyList_GET_SIZE(pair) == 2) {
        *name = PyList_GET_ITEM(pair, 0);
        *value = PyList_GET_ITEM(pair, 1);
    } else if (PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2) {
        *name = PyTuple_GET_ITEM(pair, 0);
        *value = PyTuple_GET_ITEM(pair, 1);
    } else {
        return 0;
    }
    return 1;
}

/* A local's [name, repr] pair, when both are exact str; else 0. */
static int pair_of(PyObject *pair, PyObject **name, PyObject **value) {
    return pair_items(pair, name, value) && PyUnicode_CheckExact(*name) && PyUnicode_CheckExact(*value);
}

/* Whether two exact str are equal (one key of a dict): a str's kind is the narrowest that holds
 * its characters, so equal strs have the same kind and bytes. */
static int same_str(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return n == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b)
           && memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * kind) == 0;
}

/* Whether the names of n pairs (each a pair_of) are all different (dict(pairs) keeps them all).
 * A frame has a few locals, mostly the code object's interned names: compared pair by pair up to
 * DISTINCT_PAIRWISE of them, which costs less than the set made for every frame (h11, 3.11: a
 * tenth of frame_parts' instructions); a set above that. */
#define DISTINCT_PAIRWISE 16
static int names_distinct(PyObject *pairs, Py_ssize_t n) {
    PyObject *name, *value, *other;
    if (n <= DISTINCT_PAIRWISE) {
        for (Py_ssize_t i = 1; i < n; i++) {
            pair_of(PyList_GET_ITEM(pairs, i), &name, &value);
            for (Py_ssize_t j = 0; j < i; j++) {
                pair_of(PyList_GET_ITEM(pairs, j), &other, &value);
                if (same_str(name, other)) return 0;
            }
        }
        return 1;
    }
    PyObject *seen = PySet_New(NULL);
    if (seen == NULL) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        pair_of(PyList_GET_ITEM(pairs, i), &name, &value);
        if (PySet_Add(seen, name) < 0) {
            Py_DECREF(seen);
            return -1;
        }
    }
    int ok = PySet_GET_SIZE(seen) == n;
    Py_DECREF(seen);
    return ok;
}

/* The escape of the escape of a character: `e` (its JSON escape, to `end`) JSON-escaped onto t. An
 * escape is ASCII with no control characters, so escaping it again only puts a '\\' before its
 * '\\' and '"'. */
static inline char *put_reescaped(char *t, const char *e, const char *end) {
    for (; e < end; e++) {
        if (*e == '\\' || *e == '"') *t++ = '\\';
        *t++ = *e;
    }
    return t;
}

/* s JSON-encoded with its quotes into `json` (buf_json's bytes) and those bytes JSON-escaped, no
 * quotes, into `twice` (buf_json_bytes of them), in one pass over s: a frame's text holds its
 * locals' JSON, and escaping that JSON again after writing it was most of the walk's escaping.
 * A run of characters that stand for themselves stands for itself in both. */
static int buf_json_twice(Buf *json, Buf *twice, PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    /* a character's escape is at most 12 bytes (a surrogate pair) and 6 in one byte a character,
     * its escape escaped 14 and 7: "\\ud83d\\ude00", "\\u00e9" */
    int wide = kind != PyUnicode_1BYTE_KIND;
    if (buf_grow(json, n * (wide ? 12 : 6) + 2) < 0 || buf_grow(twice, n * (wide ? 14 : 7) + 4) < 0) return -1;
    char *o = json->p + json->n, *t = twice->p + twice->n;
    *o++ = '"';
    *t++ = '\\';
    *t++ = '"';
    if (!wide) {
        const unsigned char *d = PyUnicode_1BYTE_DATA(s);
        Py_ssize_t i = 0;
        while (i < n) {
            Py_ssize_t j = plain_run(d, i, n);
            memcpy(o, d + i, j - i);
            o += j - i;
            memcpy(t, d + i, j - i);
            t += j - i;
            if (j < n) {
                char *e = o;
                o = put_escaped(o, d[j++]);
                t = put_reescaped(t, e, o);
            }
            i = j;
        }
    } else {
        const void *data = PyUnicode_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (json_plain(c)) {
                *o++ = (char)c;
                *t++ = (char)c;
            } else {
                char *e = o;
                o = put_escaped(o, c);
                t = put_reescaped(t, e, o);
            }
        }
    }
    *o++ = '"';
    *t++ = '\\';
    *t++ = '"';
    json->n = o - json->p;
    twice->n = t - twice->p;
    return 0;
}


/* frame_parts' buffers, kept from one call to the next rather than allocated and freed three times
 * a frame; one that a large frame grew past SCRATCH_KEEP is freed after it. A call that begins
 * while another writes them (a collection run by an allocation can run a finalizer's Python)
 * uses buffers of its own. */
#define SCRATCH_KEEP (1 << 20)
static Buf scratch[3];
static int scratch_busy;

static void scratch_release(Buf *b, int kept) {
    for (int i = 0; i < 3; i++) {
        b[i].n = 0;
        if (!kept || b[i].cap > SCRATCH_KEEP) {
            PyMem_Free(b[i].p);
            b[i].p = NULL;
            b[i].cap = 0;
        }
    }
}

static inline char *put_piece(char *o, const char *s, Py_ssize_t n) {
    if (n) memcpy(o, s, n);
    return o + n;
}

/* frame_parts(sep, pairs, value, function, kind_json, line, source[, with_text]) -> (text, text_json,
 * tail, clean) or None. A call/line frame passes its locals as `pairs` (value None); a
 * return/exception frame passes pairs None and its value. With a false `with_text` (the C walk,
 * which writes only the escaped text) text is None and the plain text is never built: text_json
 * and clean are made from its pieces, JSON escaping being character by character. */
static PyObject *frame_parts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 && nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "frame_parts takes 7 or 8 arguments");
        return NULL;
    }
    int with_text = nargs == 7 ? 1 : PyObject_IsTrue(args[7]);
    if (with_text < 0) return NULL;
    PyObject *sep = args[0], *pairs = args[1], *value = args[2], *function = args[3];
    PyObject *kind_json = args[4], *line_obj = args[5], *source = args[6];
    if (!PyUnicode_CheckExact(sep) || !PyUnicode_CheckExact(function) || !PyUnicode_CheckExact(kind_json)
        || !PyLong_CheckExact(line_obj) || !PyUnicode_CheckExact(source))
        Py_RETURN_NONE;
    int overflow = 0;
    long long line = PyLong_AsLongLongAndOverflow(line_obj, &overflow);
    if (overflow) Py_RETURN_NONE;
    if (line == -1 && PyErr_Occurred()) return NULL;
    int locals = pairs != Py_None;
    Py_ssize_t n = 0;
    if (locals) {
        if (!PyList_CheckExact(pairs)) Py_RETURN_NONE;
        n = PyList_GET_SIZE(pairs);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *name, *val;
            if (!pair_of(PyList_GET_ITEM(pairs, i), &name, &val)) Py_RETURN_NONE;
        }
        int distinct = names_distinct(pairs, n);
        if (distinct < 0) return NULL;
        if (!distinct) Py_RETURN_NONE;
    } else if (!PyUnicode_CheckExact(value)) {
        Py_RETURN_NONE;
    }

    Piece long_source = {0};
    const Piece *ps = sep_piece(sep), *pa = sep_piece(ACTION_SEP), *pf = sep_piece(FRAME_SEP);
    const Piece *pr = locals ? NULL : sep_piece(ARG_SEP);
    const Piece *src = source_piece(source, &long_source);
    if (ps == NULL || pa == NULL || pf == NULL || (!locals && pr == NULL) || src == NULL) {
        PyMem_Free(long_source.esc);
        return NULL;
    }
    Buf own[3] = {{0}}, *b = scratch_busy ? own : scratch;
    int kept = b == scratch;
    scratch_busy = 1;
    Buf *obj = &b[0], *twice = &b[1], *tail = &b[2];
    PyObject *obj_str = NULL, *text = NULL, *text_json = NULL, *tail_str = NULL, *result = NULL;
    if (put_head(tail, function, kind_json, line) < 0) goto done;
    if (locals) {
        /* each name and value is escaped once, into the locals object (and its escape, into
         * twice); the frame's "locals" list copies those bytes */
        if (PUT(obj, "{") < 0 || PUT(twice, "{") < 0 || PUT(tail, ", \"locals\": [") < 0) goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *name, *val;
            pair_of(PyList_GET_ITEM(pairs, i), &name, &val);
            if (i && (PUT(obj, ", ") < 0 || PUT(twice, ", ") < 0)) goto done;
            Py_ssize_t n0 = obj->n;
            if (buf_json_twice(obj, twice, name) < 0) goto done;
            Py_ssize_t n1 = obj->n;
            if (PUT(obj, ": ") < 0 || PUT(twice, ": ") < 0) goto done;
            Py_ssize_t v0 = obj->n;
            if (buf_json_twice(obj, twice, val) < 0) goto done;
            Py_ssize_t v1 = obj->n;
            if ((i && PUT(tail, ", ") < 0) || PUT(tail, "[") < 0 || buf_put(tail, obj->p + n0, n1 - n0) < 0
                || PUT(tail, ", ") < 0 || buf_put(tail, obj->p + v0, v1 - v0) < 0 || PUT(tail, "]") < 0)
                goto done;
        }
        if (PUT(obj, "}") < 0 || PUT(twice, "}") < 0 || PUT(tail, "], \"source\": \"") < 0
            || buf_put(tail, src->esc, src->n) < 0 || PUT(tail, "\"}") < 0)
            goto done;
    } else {
        if (buf_json_twice(obj, twice, value) < 0 || PUT(tail, ", \"source\": \"") < 0
            || buf_put(tail, src->esc, src->n) < 0 || PUT(tail, "\", \"value\": ") < 0
            || buf_put(tail, obj->p, obj->n) < 0 || PUT(tail, "}") < 0)
            goto done;
    }
    /* the text is sep, obj, ACTION_SEP, source, FRAME_SEP (with locals) or sep, ACTION_SEP, source,
     * ARG_SEP, obj, FRAME_SEP; JSON escaping goes character by character, so its escape is the
     * pieces' escapes: obj's from twice, the others' remembered, written at once into its str */
    text_json = PyUnicode_New(ps->n + pa->n + src->n + pf->n + (locals ? 0 : pr->n) + twice->n, 127);
    if (text_json == NULL) goto done;
    char *o = (char *)PyUnicode_1BYTE_DATA(text_json);
    o = put_piece(o, ps->esc, ps->n);
    if (locals) o = put_piece(o, twice->p, twice->n);
    o = put_piece(o, pa->esc, pa->n);
    o = put_piece(o, src->esc, src->n);
    if (!locals) {
        o = put_piece(o, pr->esc, pr->n);
        o = put_piece(o, twice->p, twice->n);
    }
    put_piece(o, pf->esc, pf->n);
    /* clean: '<":' not in the text and text.count("<|") == seps, counted piece by piece when every
     * separator in it starts with "<" and ends with ">": no two other pieces are adjacent, so
     * neither "<|" nor '<":' can straddle two pieces; else over the whole text */
    Py_ssize_t seps = locals ? 3 : 4;
    int by_piece = ps->shaped && pa->shaped && pf->shaped && (locals || pr->shaped);
    if (with_text || !by_piece) {
        obj_str = buf_str(obj);
        if (obj_str == NULL) goto done;
        PyObject *parts = locals ? PyTuple_Pack(5, sep, obj_str, ACTION_SEP, source, FRAME_SEP)
                                 : PyTuple_Pack(6, sep, ACTION_SEP, source, ARG_SEP, obj_str, FRAME_SEP);
        if (parts == NULL) goto done;
        text = PyUnicode_Join(EMPTY, parts);
        Py_DECREF(parts);
        if (text == NULL) goto done;
    }
    int clean;
    if (by_piece) {
        const Piece *pieces[5] = {ps, pa, src, pf, pr};
        Py_ssize_t bars = lt_scan(obj->p, obj->n);
        clean = bars >= 0;
        for (int i = 0; clean && i < (locals ? 4 : 5); i++) {
            clean = pieces[i]->bars >= 0;
            bars += pieces[i]->bars;
        }
        clean = clean && bars == seps;
    } else {
        Py_ssize_t bars = piece_scan(text);
        if (bars == -2) goto done;
        clean = bars == seps;
    }
    tail_str = buf_str(tail);
    if (tail_str == NULL) goto done;
    result = PyTuple_Pack(4, with_text ? text : Py_None, text_json, tail_str, clean ? Py_True : Py_False);
done:
    scratch_release(b, kept);
    if (kept) scratch_busy = 0;
    PyMem_Free(long_source.esc);
    Py_XDECREF(obj_str);
    Py_XDECREF(text);
    Py_XDECREF(text_json);
    Py_XDECREF(tail_str);
    return result;
}


/* snapshot(ctx, frame, st): tracer.Tracer._snapshot, the same steps in the same order (the frame
 * state list's layout is tracer.py's _KEYS.._FILT, 3 to 8). ctx = (value, keyed, unchanged, named,
 * bad_classes, immutable, keyed_types, leaf, slow): the tracer's per-value callables and type
 * sets, leaf = (max_str, max_int_bits) when ``value`` is the default Serializer's (then ints, strs,
 * floats, bools and None are rendered here, as _value_repr does, before the type sets are asked:
 * tracer.py passes its _IMMUTABLE and _KEYED with a leaf; else None), ``slow``, the Python method, which answers for any
 * frame whose locals are not a list of str names, and ``other`` (other_repr's tuple, or None). A
 * ctx of 9 (no ``other``) is what tracer.py of an earlier revision passes: bench:tracer's
 * --baseline runs one against the module the image carries. */
enum { ST_KEYS = 3, ST_VALS, ST_OUT, ST_MUT, ST_CACHE, ST_FILT, ST_LEN };
static PyObject *S_F_LOCALS, *S_KEYS, *S_VALUES, *S_QUALNAME;

/* repr(v) of a leaf value (an exact int, str, bytes or float, a bool or None), remembered by the
 * object's identity in a table of TEXT_SLOTS entries, each holding the object and its text: their
 * texts depend on nothing but their values, which cannot change, and a frame's locals and the items
 * of its containers are mostly the same objects from one event to the next, so each was rendered
 * again at every event where it was looked at (a str's repr scans and copies it, an int's divides).
 * The table holds a reference to each object it names, so an address in it is never another
 * object's; an entry is replaced by the next object that maps to its slot, and the table is
 * emptied when a capture ends (text_cache_clear), so it keeps at most TEXT_SLOTS small immutable
 * objects alive, only while a trace runs. */
#define TEXT_SLOTS 4096
static struct { PyObject *obj, *text; } text_slots[TEXT_SLOTS];

static PyObject *cached_repr(PyObject *v) {
    size_t at = ((uintptr_t)v >> 4) & (TEXT_SLOTS - 1);  /* objects are 16-byte aligned */
    if (text_slots[at].obj == v) {
        Py_INCREF(text_slots[at].text);
        return text_slots[at].text;
    }
    PyObject *text = PyObject_Repr(v);
    if (text == NULL) return NULL;
    PyObject *old = text_slots[at].obj, *old_text = text_slots[at].text;
    Py_INCREF(v);
    text_slots[at].obj = v;
    Py_INCREF(text);
    text_slots[at].text = text;
    /* after the slot is rewritten: releasing an int or a str runs no Python code, but a slot must
     * never name a freed object */
    Py_XDECREF(old);
    Py_XDECREF(old_text);
    return text;
}

/* _value_repr's text for an int within the digit cap (|v| < 2**max_int_bits), a str of at most
 * max_str characters, a float, a bool or None; NULL without an error for any other value. */
static PyObject *leaf_repr(PyObject *v, Py_ssize_t max_str, long max_int_bits) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyLong_Type) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow) return NULL;  /* the Python path decides */
        int ok;
        if (max_int_bits >= 64) ok = 1;
        else if (max_int_bits == 63) ok = x != LLONG_MIN;
        else if (max_int_bits < 0) ok = 0;
        else ok = x > -(1LL << max_int_bits) && x < (1LL << max_int_bits);
        return ok ? cached_repr(v) : NULL;
    }
    if (t == &PyUnicode_Type) return PyUnicode_GET_LENGTH(v) <= max_str ? cached_repr(v) : NULL;
    if (t == &PyFloat_Type || t == &PyBool_Type || v == Py_None) return cached_repr(v);
    return NULL;
}

/* The lists a snapshot returns hold only [name, text] lists of two str (or None), so they can never
 * be part of a reference cycle: they are untracked by the cyclic GC, as CPython untracks tuples of
 * atomic items. A test's records live until its phase ends; tracked, every young collection walked
 * them again and moved them on, and the full collections they set off walked the whole heap. */
static void untrack(PyObject *list) {
    if (list != NULL) PyObject_GC_UnTrack(list);
}

/* other_repr(other, v): the default Serializer's text for a value of any type it has no rendering
 * of its own for (serialize.Serializer._other, reached through _value_repr and __call__), without
 * the four Python frames between: its own repr, guarded as _other guards it (a repr that raises,
 * is not exactly a str, is longer than max_repr or slower than repr_safety_s marks its class bad),
 * addresses stripped as the serializer's _ADDR strips them (strip_addresses), thread idents by its
 * own regex. other = (bad_classes, array_like, dispatch, max_repr, repr_safety_s, perf_counter,
 * addr_sub (_ADDR.sub, which strip_addresses repeats: the slot stays so that tracer.py of an
 * earlier revision, bench:tracer's --baseline, still fits this module), thread_sub, slow_classes,
 * c_repr_types). NULL without an error: the Python path answers (types the serializer dispatches
 * on, array-like or not yet classified types, a RecursionError before 3.10, whose handling depends
 * on the stack's depth). */
static PyObject *S_ED, *S_STARTED, *S_STOPPED, *S_OBJ_FMT, *S_THREAD_REPL, *S_NAME;

static int has(PyObject *text, PyObject *sub) {
    return PyUnicode_Find(text, sub, 0, PY_SSIZE_T_MAX, 1) >= 0;  /* -2 (an error) cannot happen on two str */
}

/* A class's marker text, remembered by the class and its __name__ object (a class's name can be
 * rebound): a class whose repr failed the guard is summarized at every event that shows one of its
 * objects, and formatting the text was most of that. Entries hold their class, and are emptied
 * with the leaf texts' (text_cache_clear). */
#define MARKER_SLOTS 256
static struct { PyObject *cls, *name, *text; } marker_slots[MARKER_SLOTS];

static PyObject *marker(PyObject *cls) {
    PyObject *name = PyObject_GetAttr(cls, S_NAME);
    if (name == NULL) return NULL;
    size_t at = ((uintptr_t)cls >> 4) & (MARKER_SLOTS - 1);
    if (marker_slots[at].cls == cls && marker_slots[at].name == name) {
        Py_DECREF(name);
        Py_INCREF(marker_slots[at].text);
        return marker_slots[at].text;
    }
    PyObject *text = PyUnicode_Format(S_OBJ_FMT, name);
    if (text == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    PyObject *old_cls = marker_slots[at].cls, *old_name = marker_slots[at].name, *old_text = marker_slots[at].text;
    Py_INCREF(cls);
    marker_slots[at].cls = cls;
    marker_slots[at].name = name;  /* the slot takes the reference */
    Py_INCREF(text);
    marker_slots[at].text = text;
    Py_XDECREF(old_cls);  /* a class's release can run Python code: only once the slot is whole */
    Py_XDECREF(old_name);
    Py_XDECREF(old_text);
    return text;
}

/* _ADDR.sub("", text) (serialize._ADDR, r" at 0x[0-9a-fA-F]+"): every " at 0x" followed by at least
 * one ASCII hex digit is removed with all the hex digits after it, leftmost first, as the regex
 * matches; the text itself (a new reference) where there is none. A call into re for each object
 * shown was a third of the guarded reprs' cost. The characters removed are ASCII, so the text keeps
 * its widest character and the result its kind. */
static int is_hex(Py_UCS4 c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The end of an address match starting at i (past its last hex digit), or -1 when none starts there. */
static Py_ssize_t addr_end(int kind, const void *data, Py_ssize_t n, Py_ssize_t i) {
    static const char at0x[] = " at 0x";
    if (i + 7 > n) return -1;
    for (int j = 0; j < 6; j++)
        if (PyUnicode_READ(kind, data, i + j) != (Py_UCS4)at0x[j]) return -1;
    Py_ssize_t end = i + 6;
    while (end < n && is_hex(PyUnicode_READ(kind, data, end))) end++;
    return end > i + 6 ? end : -1;
}

/* The index of the first ' ' at or after i (n where none): memchr over a one-byte text, the
 * commonest kind, as every match starts with one. */
static Py_ssize_t next_space(int kind, const void *data, Py_ssize_t n, Py_ssize_t i) {
    if (kind == PyUnicode_1BYTE_KIND) {
        const char *p = i < n ? memchr((const char *)data + i, ' ', n - i) : NULL;
        return p != NULL ? p - (const char *)data : n;
    }
    while (i < n && PyUnicode_READ(kind, data, i) != ' ') i++;
    return i;
}

static PyObject *strip_addresses(PyObject *text) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), removed = 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = next_space(kind, data, n, 0); i < n; i = next_space(kind, data, n, i)) {
        Py_ssize_t end = addr_end(kind, data, n, i);
        if (end < 0) i++;
        else {
            removed += end - i;
            i = end;
        }
    }
    if (removed == 0) {
        Py_INCREF(text);
        return text;
    }
    PyObject *out = PyUnicode_New(n - removed, PyUnicode_MAX_CHAR_VALUE(text));
    if (out == NULL) return NULL;
    Py_ssize_t at = 0, from = 0;
    for (Py_ssize_t i = next_space(kind, data, n, 0); i < n; i = next_space(kind, data, n, i)) {
        Py_ssize_t end = addr_end(kind, data, n, i);
        if (end < 0) {
            i++;
            continue;
        }
        if (PyUnicode_CopyCharacters(out, at, text, from, i - from) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        at += i - from;
        i = from = end;
    }
    if (PyUnicode_CopyCharacters(out, at, text, from, n - from) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* Empties the leaf texts' and the markers' tables (at a capture's end). */
static void text_cache_clear(void) {
    for (size_t i = 0; i < TEXT_SLOTS; i++) {
        PyObject *obj = text_slots[i].obj, *text = text_slots[i].text;
        text_slots[i].obj = text_slots[i].text = NULL;
        Py_XDECREF(obj);
        Py_XDECREF(text);
    }
    for (size_t i = 0; i < MARKER_SLOTS; i++) {
        PyObject *cls = marker_slots[i].cls, *name = marker_slots[i].name, *text = marker_slots[i].text;
        marker_slots[i].cls = marker_slots[i].name = marker_slots[i].text = NULL;
        Py_XDECREF(cls);
        Py_XDECREF(name);
        Py_XDECREF(text);
    }
}

/* _other's marker for a class whose repr failed the guard: the class is bad from now on */
static PyObject *bad_marker(PyObject *bad, PyObject *cls) {
    if (PySet_Add(bad, cls) < 0) return NULL;
    return marker(cls);
}

/* The repr guard's clock: time.perf_counter's own clock read here (CLOCK_MONOTONIC, which
 * perf_counter reads on Linux), where the guard is given time.perf_counter itself (PERF_COUNTER);
 * the two calls of it cost a call, a float each and its release, around every guarded repr (h11's
 * suite guards about 430,000). Any other callable (a test's stand-in) is called. -1: an error. */
static PyObject *PERF_COUNTER;

static int guard_clock(PyObject *perf, double *t) {
#ifdef CLOCK_MONOTONIC
    struct timespec ts;
    if (perf == PERF_COUNTER && clock_gettime(CLOCK_MONOTONIC, &ts) == 0) {
        *t = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
        return 0;
    }
#endif
    PyObject *r = PyObject_CallNoArgs(perf);
    *t = r ? PyFloat_AsDouble(r) : -1;
    Py_XDECREF(r);
    return r == NULL || PyErr_Occurred() ? -1 : 0;
}

static PyObject *other_repr(PyObject *other, PyObject *v) {
    PyObject *bad = PyTuple_GET_ITEM(other, 0), *array_like = PyTuple_GET_ITEM(other, 1);
    PyObject *dispatch = PyTuple_GET_ITEM(other, 2), *perf = PyTuple_GET_ITEM(other, 5);
    PyObject *thread_sub = PyTuple_GET_ITEM(other, 7);
    PyObject *c_repr = PyTuple_GET_ITEM(other, 9);
    Py_ssize_t max_repr = PyLong_AsSsize_t(PyTuple_GET_ITEM(other, 3));
    double safety = PyFloat_AsDouble(PyTuple_GET_ITEM(other, 4));
    if (PyErr_Occurred()) return NULL;
    PyObject *cls = (PyObject *)Py_TYPE(v);
    int r = PySet_Contains(bad, cls);
    if (r < 0) return NULL;
    if (r) return marker(cls);
    r = PySet_Contains(c_repr, cls);
    if (r < 0) return NULL;
    if (r) {  /* _value_repr's shortcut: these reprs are C code that cannot fail or run long */
        PyObject *text = PyObject_Repr(v);
        if (text == NULL) return NULL;
        if (PyUnicode_GET_LENGTH(text) <= max_repr && !has(text, S_ED)) {
            PyObject *stripped = strip_addresses(text);
            Py_DECREF(text);
            return stripped;
        }
        Py_DECREF(text);  /* the whole way, as _other */
    }
    PyObject *known = PyDict_GetItemWithError(dispatch, cls);
    if (known != NULL || PyErr_Occurred()) return NULL;
    known = PyDict_GetItemWithError(array_like, cls);
    if (known != Py_False) return NULL;  /* not classified yet, or array-like: the Python path */
    double t0, t1;
    if (guard_clock(perf, &t0) < 0) return NULL;
    PyObject *text = PyObject_Repr(v);
    if (text == NULL) {
#if PY_VERSION_HEX < 0x030A0000
        if (PyErr_ExceptionMatches(PyExc_RecursionError)) {
            return NULL;  /* see serialize.deep_overflow: only the Python path may decide */
        }
#endif
        if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL;
        PyErr_Clear();
        return bad_marker(bad, cls);
    }
    if (!PyUnicode_CheckExact(text) || PyUnicode_GET_LENGTH(text) > max_repr) {
        Py_DECREF(text);
        return bad_marker(bad, cls);
    }
    if (guard_clock(perf, &t1) < 0) {
        Py_DECREF(text);
        return NULL;
    }
    if (t1 - t0 > safety) {
        Py_DECREF(text);
        PyObject *name = PyObject_GetAttr(cls, S_NAME);
        if (name == NULL) return NULL;
        int err = PyList_Append(PyTuple_GET_ITEM(other, 8), name);
        Py_DECREF(name);
        return err < 0 ? NULL : bad_marker(bad, cls);
    }
    Py_SETREF(text, strip_addresses(text));
    if (text == NULL) return NULL;
    if (has(text, S_ED) && (has(text, S_STARTED) || has(text, S_STOPPED)))
        Py_SETREF(text, PyObject_CallFunctionObjArgs(thread_sub, S_THREAD_REPL, text, NULL));
    return text;
}

/* flat_keyed's test of one shown item: True when it is of a leaf type (int, bool, float, None,
 * str, bytes) whose builtin repr is exactly Serializer._ser's text (serialize._scalars_ok: ints
 * within the digit cap, str and bytes within max_str). An int past 64 bits answers False: the
 * Python path decides it. */
static int flat_item_ok(PyObject *x, Py_ssize_t max_str, long max_int_bits) {
    PyTypeObject *t = Py_TYPE(x);
    if (t == &PyLong_Type || t == &PyBool_Type) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow) return 0;
        if (max_int_bits >= 64) return 1;
        if (max_int_bits == 63) return v != LLONG_MIN;
        if (max_int_bits < 0) return 0;
        return v > -(1LL << max_int_bits) && v < (1LL << max_int_bits);
    }
    if (t == &PyUnicode_Type) return PyUnicode_GET_LENGTH(x) <= max_str;
    if (t == &PyBytes_Type) return PyBytes_GET_SIZE(x) <= max_str;
    return t == &PyFloat_Type || x == Py_None;
}

/* The builtin repr of an exact list, tuple or dict of leaf values, from its shown items' texts
 * (`texts`: m item texts, a dict's key and value texts alternating), with ", ..." before the closing
 * bracket where `capped` (flat_keyed's text of v[:k] then): the same text as repr() gives, written
 * once from the remembered leaf texts (cached_repr) instead of rendering every item again. */
static PyObject *join_flat(PyObject *const *texts, Py_ssize_t m, PyTypeObject *t, int capped) {
    int is_dict = t == &PyDict_Type;
    Py_ssize_t items = is_dict ? m / 2 : m, len = 2;
    Py_UCS4 maxc = 127;
    for (Py_ssize_t i = 0; i < m; i++) {
        len += PyUnicode_GET_LENGTH(texts[i]);
        Py_UCS4 c = PyUnicode_MAX_CHAR_VALUE(texts[i]);
        if (c > maxc) maxc = c;
    }
    if (items > 1) len += 2 * (items - 1);               /* ", " between items */
    if (is_dict) len += 2 * items;                       /* ": " in each pair */
    if (capped) len += 5;                                /* ", ..." */
    int single = t == &PyTuple_Type && items == 1 && !capped;
    if (single) len += 1;                                /* "(x,)" */
    PyObject *out = PyUnicode_New(len, maxc);
    if (out == NULL) return NULL;
    int kind = PyUnicode_KIND(out);
    void *data = PyUnicode_DATA(out);
    Py_ssize_t at = 0;
    PyUnicode_WRITE(kind, data, at++, is_dict ? '{' : t == &PyList_Type ? '[' : '(');
    for (Py_ssize_t i = 0; i < m; i++) {
        if (i > 0) {
            int pair_sep = is_dict && i % 2;
            PyUnicode_WRITE(kind, data, at++, pair_sep ? ':' : ',');
            PyUnicode_WRITE(kind, data, at++, ' ');
        }
        Py_ssize_t n = PyUnicode_GET_LENGTH(texts[i]);
        if (PyUnicode_CopyCharacters(out, at, texts[i], 0, n) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        at += n;
    }
    if (capped) {
        for (const char *p = ", ..."; *p; p++) PyUnicode_WRITE(kind, data, at++, *p);
    }
    if (single) PyUnicode_WRITE(kind, data, at++, ',');
    PyUnicode_WRITE(kind, data, at++, is_dict ? '}' : t == &PyList_Type ? ']' : ')');
    return out;
}

/* flat_keyed(v, caps): Serializer.keyed's (text, key) for an exact list, tuple or dict that is empty
 * or whose shown items (the first max_items; a dict's keys and values) are all leaf values within
 * the caps: its builtin-repr path (_seq_render, _dict_render) and its one-container key, the same
 * text and key, without the Python frames. caps = (max_str, max_int_bits, max_items, max_depth).
 * NULL without an error for anything else (nested containers, sets, other types, caps the Python
 * path treats apart): the Python keyed answers. */
static PyObject *flat_keyed(PyObject *v, Py_ssize_t max_str, long max_int_bits, Py_ssize_t k, long max_depth) {
    PyTypeObject *t = Py_TYPE(v);
    int is_dict = t == &PyDict_Type;
    if (!(t == &PyList_Type || t == &PyTuple_Type || is_dict) || k < 0) return NULL;
    Py_ssize_t n = is_dict ? PyDict_GET_SIZE(v) : Py_SIZE(v);
    if (n > 0 && (max_depth <= 0 || k < (is_dict ? 1 : 2))) return NULL;
    Py_ssize_t shown = n <= k ? n : k, m = 0;
    PyObject *keys = NULL, *vals = NULL, *text = NULL, *result = NULL;
    /* the shown items' texts, rendered before anything is allocated for the key */
    PyObject **texts = PyMem_Malloc(sizeof(PyObject *) * (is_dict ? 2 * shown : shown));
    if (texts == NULL) return PyErr_NoMemory();
    if (is_dict) {
        keys = PyTuple_New(shown);
        vals = PyTuple_New(shown);
        if (keys == NULL || vals == NULL) goto done;
        Py_ssize_t pos = 0, i = 0;
        PyObject *dk, *dv;
        while (i < shown && PyDict_Next(v, &pos, &dk, &dv)) {
            if (!flat_item_ok(dk, max_str, max_int_bits) || !flat_item_ok(dv, max_str, max_int_bits)) goto done;
            Py_INCREF(dk);
            PyTuple_SET_ITEM(keys, i, dk);
            Py_INCREF(dv);
            PyTuple_SET_ITEM(vals, i, dv);
            i++;
        }
        if (i != shown) goto done;  /* cannot happen: no Python code runs while the dict is read */
        for (i = 0; i < shown; i++) {
            if ((texts[m] = cached_repr(PyTuple_GET_ITEM(keys, i))) == NULL) goto done;
            m++;
            if ((texts[m] = cached_repr(PyTuple_GET_ITEM(vals, i))) == NULL) goto done;
            m++;
        }
    } else {
        PyObject **items = t == &PyList_Type ? ((PyListObject *)v)->ob_item : ((PyTupleObject *)v)->ob_item;
        for (Py_ssize_t i = 0; i < shown; i++)
            if (!flat_item_ok(items[i], max_str, max_int_bits)) goto done;
        keys = PyTuple_New(shown);
        if (keys == NULL) goto done;
        for (Py_ssize_t i = 0; i < shown; i++) {
            Py_INCREF(items[i]);
            PyTuple_SET_ITEM(keys, i, items[i]);
        }
        for (Py_ssize_t i = 0; i < shown; i++) {
            if ((texts[m] = cached_repr(PyTuple_GET_ITEM(keys, i))) == NULL) goto done;
            m++;
        }
    }
    /* past max_items: the text ends ", ...]" (")", "}") as _seq_render's */
    text = join_flat(texts, m, t, n > k);
    if (text == NULL) goto done;
    PyObject *count = PyLong_FromSsize_t(n <= k ? n : -1);
    if (count == NULL) goto done;
    PyObject *key = PyTuple_Pack(4, v, count, keys, is_dict ? vals : Py_None);
    Py_DECREF(count);
    if (key == NULL) goto done;
    result = PyTuple_Pack(2, text, key);
    Py_DECREF(key);
done:
    for (Py_ssize_t i = 0; i < m; i++) Py_DECREF(texts[i]);
    PyMem_Free(texts);
    Py_XDECREF(keys);
    Py_XDECREF(vals);
    Py_XDECREF(text);
    return result;
}

/* deep_keyed(v, caps, other): Serializer.keyed's text for an exact list, tuple or dict that
 * flat_keyed leaves (nested containers, items of any type), with no key: the text of
 * Serializer._ser, item by item as _list, _tuple, _dict and their _items / _dict_items write it
 * (the builtin-repr paths give those same texts), leaf values as _int and _text, other values by
 * other_repr (_other, guarded). A key would have to name every container shown and the texts of
 * the objects among them, which change without the containers changing: the snapshot renders the
 * value again at its frame's next event, here, without the Python frames. NULL without an error:
 * the Python keyed answers, and it does before any item's repr is called (a first pass looks at
 * the types only): non-empty sets (max_set_sort is not among the caps), classes other_repr leaves
 * to Python, nesting deeper than DEEP_MAX; or after, where Python raises and keyed's guard answers
 * (a dict that changes size while its items are rendered). */
#define DEEP_MAX 32
typedef struct {
    Py_ssize_t max_str, k;
    long max_int_bits, max_depth;
    PyObject *other;           /* other_repr's tuple */
    PyObject *parts;           /* the text's pieces */
    PyObject *path[DEEP_MAX];  /* the lists, tuples and dicts being rendered (Serializer._active) */
    int npath;
} Deep;

static PyObject *S_BIT_LENGTH, *S_DOTS, *S_COMMA, *S_COLON, *S_ZERO;

static int on_path(Deep *d, PyObject *v) {
    for (int i = 0; i < d->npath; i++)
        if (d->path[i] == v) return 1;
    return 0;
}

static int is_leaf_type(PyTypeObject *t, PyObject *v) {
    return t == &PyLong_Type || t == &PyBool_Type || t == &PyFloat_Type || v == Py_None || t == &PyUnicode_Type
           || t == &PyBytes_Type;
}

/* The first pass: 1 when every value the text shows can be rendered here, 0 when not, -1 on an
 * error. It visits what deep_put renders, in the same order, without rendering. */
static int deep_scan(Deep *d, PyObject *v, long depth) {
    PyTypeObject *t = Py_TYPE(v);
    if (is_leaf_type(t, v)) return 1;
    int is_list = t == &PyList_Type, is_tuple = t == &PyTuple_Type, is_dict = t == &PyDict_Type;
    if (is_list || is_tuple || is_dict) {
        Py_ssize_t n = is_dict ? PyDict_GET_SIZE(v) : Py_SIZE(v);
        if (n == 0 || on_path(d, v) || depth >= d->max_depth) return 1;
        if (d->npath == DEEP_MAX) return 0;
        d->path[d->npath++] = v;
        int ok = 1;
        if (is_dict) {
            Py_ssize_t pos = 0, i = 0;
            PyObject *dk, *dv;
            while (ok == 1 && i < d->k && PyDict_Next(v, &pos, &dk, &dv)) {
                ok = deep_scan(d, dk, depth + 1);
                if (ok == 1) ok = deep_scan(d, dv, depth + 1);
                i++;
            }
        } else {
            PyObject **items = is_list ? ((PyListObject *)v)->ob_item : ((PyTupleObject *)v)->ob_item;
            for (Py_ssize_t i = 0; ok == 1 && i < n && i < d->k; i++) ok = deep_scan(d, items[i], depth + 1);
        }
        d->npath--;
        return ok;
    }
    if (t == &PySet_Type || t == &PyFrozenSet_Type) return PySet_GET_SIZE(v) == 0 || depth >= d->max_depth;
    /* other_repr's classes: bad ones (the marker), its C-repr types, and those known not array-like */
    PyObject *other = d->other, *cls = (PyObject *)t;
    int r = PySet_Contains(PyTuple_GET_ITEM(other, 0), cls);
    if (r) return r;
    r = PySet_Contains(PyTuple_GET_ITEM(other, 9), cls);
    if (r) return r;
    PyObject *known = PyDict_GetItemWithError(PyTuple_GET_ITEM(other, 2), cls);
    if (known != NULL) return 0;
    if (PyErr_Occurred()) return -1;
    known = PyDict_GetItemWithError(PyTuple_GET_ITEM(other, 1), cls);
    if (known == NULL && PyErr_Occurred()) return -1;
    return known == Py_False;
}

static int put_part(Deep *d, PyObject *s) {  /* steals s */
    if (s == NULL) return -1;
    int r = PyList_Append(d->parts, s);
    Py_DECREF(s);
    return r;
}

static int put_str(Deep *d, PyObject *s) {  /* borrows s */
    return PyList_Append(d->parts, s);
}

/* _int's and _text's texts, repr's for float, bool and None. */
static PyObject *leaf_text(Deep *d, PyObject *v) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyLong_Type) {
        if (flat_item_ok(v, 0, d->max_int_bits)) return cached_repr(v);
        PyObject *b = PyObject_CallMethodObjArgs(v, S_BIT_LENGTH, NULL);
        if (b == NULL) return NULL;
        long bits = PyLong_AsLong(b);
        Py_DECREF(b);
        if (bits == -1 && PyErr_Occurred()) return NULL;
        if (bits <= d->max_int_bits) return cached_repr(v);
        int neg = PyObject_RichCompareBool(v, S_ZERO, Py_LT);
        if (neg < 0) return NULL;
        return PyUnicode_FromFormat("%s<int bit_length=%ld>", neg ? "-" : "", bits);
    }
    if (t == &PyUnicode_Type || t == &PyBytes_Type) {
        Py_ssize_t n = t == &PyUnicode_Type ? PyUnicode_GET_LENGTH(v) : PyBytes_GET_SIZE(v);
        if (n <= d->max_str) return cached_repr(v);
        PyObject *head = t == &PyUnicode_Type ? PyUnicode_Substring(v, 0, d->max_str)
                                              : PyBytes_FromStringAndSize(PyBytes_AS_STRING(v), d->max_str);
        if (head == NULL) return NULL;
        PyObject *text = PyObject_Repr(head);
        Py_DECREF(head);
        if (text != NULL) PyUnicode_Append(&text, S_DOTS);
        return text;
    }
    return cached_repr(v);  /* float, bool, None */
}

/* Appends v's text at `depth` to d->parts: 0, -1 on an error, 1 where the Python keyed answers. */
static int deep_put(Deep *d, PyObject *v, long depth) {
    PyTypeObject *t = Py_TYPE(v);
    if (is_leaf_type(t, v)) return put_part(d, leaf_text(d, v));
    int is_list = t == &PyList_Type, is_tuple = t == &PyTuple_Type, is_dict = t == &PyDict_Type;
    if (is_list || is_tuple || is_dict) {
        const char *empty = is_list ? "[]" : is_tuple ? "()" : "{}";
        const char *cut = is_list ? "[...]" : is_tuple ? "(...)" : "{...}";
        Py_ssize_t n = is_dict ? PyDict_GET_SIZE(v) : Py_SIZE(v);
        if (n == 0) return put_part(d, PyUnicode_FromString(empty));
        if (on_path(d, v) || depth >= d->max_depth) return put_part(d, PyUnicode_FromString(cut));
        if (d->npath == DEEP_MAX) return 1;
        d->path[d->npath++] = v;
        int r = put_part(d, PyUnicode_FromStringAndSize(empty, 1));
        Py_ssize_t shown = 0;  /* parts between the brackets: items, and "..." */
        if (is_dict) {
            Py_ssize_t pos = 0;
            PyObject *dk, *dv;
            while (r == 0 && PyDict_Next(v, &pos, &dk, &dv)) {
                if (shown && (r = put_str(d, S_COMMA)) < 0) break;
                if (shown++ >= d->k) {
                    r = put_str(d, S_DOTS);
                    break;
                }
                Py_INCREF(dk);
                Py_INCREF(dv);
                r = deep_put(d, dk, depth + 1);
                if (r == 0) r = put_str(d, S_COLON);
                if (r == 0) r = deep_put(d, dv, depth + 1);
                Py_DECREF(dk);
                Py_DECREF(dv);
                if (r == 0 && PyDict_GET_SIZE(v) != n) r = 1;  /* Python's iteration raises */
            }
        } else {
            /* a list is read as its iterator reads it, its length asked at each step */
            for (Py_ssize_t i = 0; r == 0 && i < Py_SIZE(v); i++) {
                if (shown && (r = put_str(d, S_COMMA)) < 0) break;
                if (shown++ >= d->k) {
                    r = put_str(d, S_DOTS);
                    break;
                }
                PyObject *item = is_list ? PyList_GET_ITEM(v, i) : PyTuple_GET_ITEM(v, i);
                Py_INCREF(item);
                r = deep_put(d, item, depth + 1);
                Py_DECREF(item);
            }
        }
        d->npath--;
        if (r != 0) return r;
        if (is_tuple && shown == 1) return put_part(d, PyUnicode_FromString(",)"));
        return put_part(d, PyUnicode_FromStringAndSize(empty + 1, 1));
    }
    if (t == &PySet_Type || t == &PyFrozenSet_Type) {
        int frozen = t == &PyFrozenSet_Type;
        if (PySet_GET_SIZE(v) == 0) return put_part(d, PyUnicode_FromString(frozen ? "frozenset()" : "set()"));
        if (depth >= d->max_depth) return put_part(d, PyUnicode_FromString(frozen ? "frozenset({...})" : "{...}"));
        return 1;
    }
    PyObject *text = other_repr(d->other, v);
    if (text == NULL) return PyErr_Occurred() ? -1 : 1;
    return put_part(d, text);
}

static PyObject *deep_keyed(PyObject *v, Py_ssize_t max_str, long max_int_bits, Py_ssize_t k, long max_depth,
                            PyObject *other) {
    PyTypeObject *t = Py_TYPE(v);
    if (!(t == &PyList_Type || t == &PyTuple_Type || t == &PyDict_Type) || k < 0 || max_str < 0 || max_depth < 0)
        return NULL;
    Deep d = {max_str, k, max_int_bits, max_depth, other, NULL, {NULL}, 0};
    int ok = deep_scan(&d, v, 0);
    if (ok <= 0) return NULL;
    d.parts = PyList_New(0);
    if (d.parts == NULL) return NULL;
    int r = deep_put(&d, v, 0);
    PyObject *result = NULL;
    if (r == 0) {
        PyObject *text = PyUnicode_Join(EMPTY, d.parts);
        if (text != NULL) {
            result = PyTuple_Pack(2, text, Py_None);
            Py_DECREF(text);
        }
    }
    Py_DECREF(d.parts);
    return result;
}

/* The C keyed: flat_keyed's answer, else deep_keyed's where other_repr's tuple is given. */
static PyObject *any_keyed(PyObject *v, Py_ssize_t max_str, long max_int_bits, Py_ssize_t k, long max_depth,
                         PyObject *other) {
    PyObject *r = flat_keyed(v, max_str, max_int_bits, k, max_depth);
    if (r != NULL || PyErr_Occurred() || other == Py_None) return r;
    return deep_keyed(v, max_str, max_int_bits, k, max_depth, other);
}

static int unchanged_of(Py_ssize_t k, PyObject *value, PyObject *key);

/* frame.f_locals, without the attribute lookup where the C API has the getter (3.11+). */
static PyObject *locals_of(PyObject *frame) {
#if PY_VERSION_HEX >= 0x030B0000
    if (PyFrame_Check(frame)) return PyFrame_GetLocals((PyFrameObject *)frame);
#endif
    return PyObject_GetAttr(frame, S_F_LOCALS);
}

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* 3.11's fast locals read where they are, instead of through frame.f_locals: PyFrame_GetLocals runs
 * PyFrame_FastToLocalsWithError, which writes every slot into the frame's dict at every event (on
 * a CPU-bound run, about 900 instructions an event, with the dict walk after it). The layout is
 * CPython 3.11's (Include/internal/pycore_frame.h and pycore_code.h, the same in every 3.11.x;
 * Debian's python3.11 ships no internal headers): FrameFast is `_PyInterpreterFrame`. It is
 * trusted only once fast_locals_check has compared what it reads with PyFrame_GetLocals on live frames (tracer.py's _fast_locals_probe, at the first start), and each
 * read checks that the frame object and its frame data point at each other; anything else takes
 * the dict, as before. */
#define FAST_LOCALS 311
typedef struct {
    PyObject *f_func, *f_globals, *f_builtins, *f_locals;
    PyCodeObject *f_code;
    PyFrameObject *frame_obj;
    void *previous;
    _Py_CODEUNIT *prev_instr;
    int stacktop;
    char is_entry, owner;
    PyObject *localsplus[1];
} FrameFast;
#define FAST_CODE(f) ((f)->f_code)
#elif PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED)
/* 3.13's fast locals read where they are, instead of through frame.f_locals: PyFrame_GetLocals
 * makes a FrameLocalsProxy (PEP 667) at every event, and its keys() and values() build two lists
 * from the same slots, which the snapshot then compared with the previous event's (on h11 the
 * proxy, its lists and their frees were about a tenth of the capture). The proxy lists each bound
 * slot in slot order, a cell's or free variable's content rather than the cell, then the names of
 * f_extra_locals (what was set through f_locals that is no slot); this reads the same, and takes
 * the proxy wherever f_extra_locals is there. The layout is CPython 3.13's
 * (Include/internal/pycore_frame.h, the same in every 3.13.x of the default build; the free-threaded
 * build keeps the proxy): FrameFast is `_PyInterpreterFrame`.
 * Trusted as 3.11's is: only once fast_locals_check has agreed with the proxy on live frames, and
 * for a frame whose data points back at it. */
#define FAST_LOCALS 313
typedef struct {
    PyObject *f_executable;
    void *previous;
    PyObject *f_funcobj, *f_globals, *f_builtins, *f_locals;
    PyFrameObject *frame_obj;
    void *instr_ptr;
    int stacktop;
    uint16_t return_offset;
    char owner;
    PyObject *localsplus[1];
} FrameFast;
#define FAST_CODE(f) ((PyCodeObject *)(f)->f_executable)
enum { OWNED_BY_THREAD = 0, OWNED_BY_GENERATOR = 1 };  /* pycore_frame.h's FRAME_OWNED_BY_*: a live frame */
#endif

#ifdef FAST_LOCALS
/* `struct _frame`: its head is the same in 3.11 and 3.13, where f_extra_locals follows it */
typedef struct {
    PyObject_HEAD
    PyFrameObject *f_back;
    FrameFast *f_frame;
    PyObject *f_trace;
    int f_lineno;
    char f_trace_lines, f_trace_opcodes;
#if FAST_LOCALS == 313
    PyObject *f_extra_locals;
#endif
} FrameObjectFast;
enum { FAST_CELL = 0x40, FAST_FREE = 0x80 };  /* pycore_code.h's CO_FAST_CELL, CO_FAST_FREE */
#define FAST_MAX 256  /* REUSE_MAX: a frame with more slots takes the dict or the proxy */
static int fast_ok;   /* set by fast_locals_check */

#if FAST_LOCALS == 311
/* Is `k` one of the code's local names (by identity: the names the dict gets are these objects)? */
static int slot_of(PyObject *names, int n, PyObject *k, int hint) {
    if (hint < n && PyTuple_GET_ITEM(names, hint) == k) return hint;
    for (int i = 0; i < n; i++)
        if (PyTuple_GET_ITEM(names, i) == k) return i;
    return -1;
}
#endif

/* The frame's slots as f_locals reads them: vals[i] the value of local i (borrowed; NULL when
 * unbound), a cell's or a free variable's content rather than the cell; the number of slots, or -1
 * where the frame must take f_locals. On 3.11: a cleared frame (FastToLocals reads no slot where
 * stacktop is 0; it is -1 while the frame runs, set at trace events), not a function's frame
 * (module and class bodies and exec keep their locals in the dict), a generator's or coroutine's
 * (its dict, and so the order of its locals, lives on across its resumptions, this frame state
 * does not), before the frame's first traceable instruction (MAKE_CELL and COPY_FREE_VARS not run
 * yet), or a frame whose dict holds a name that is not one of its slots (put there through
 * frame.f_locals or locals(): the dict shows it). On 3.13: not a function's frame, a frame that is
 * not running (its owner neither a thread nor a generator), or one with f_extra_locals. */
static int fast_read(PyObject *frame, PyObject **vals) {
    if (!PyFrame_Check(frame)) return -1;
    FrameFast *f = ((FrameObjectFast *)frame)->f_frame;
    if (f == NULL || f->frame_obj != (PyFrameObject *)frame) return -1;
    PyCodeObject *co = FAST_CODE(f);
    if (!PyCode_Check((PyObject *)co) || !(co->co_flags & CO_OPTIMIZED)) return -1;
    int n = co->co_nlocalsplus;
    if (n > FAST_MAX) return -1;
#if FAST_LOCALS == 311
    if (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE) || f->stacktop == 0
        || f->prev_instr < _PyCode_CODE(co) + co->_co_firsttraceable)
        return -1;
    PyObject *names = co->co_localsplusnames;
    if (f->f_locals != NULL) {
        if (!PyDict_CheckExact(f->f_locals)) return -1;
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(f->f_locals, &pos, &k, &v))
            if (slot_of(names, n, k, 0) < 0) return -1;
    }
#else
    if ((f->owner != OWNED_BY_THREAD && f->owner != OWNED_BY_GENERATOR) || ((FrameObjectFast *)frame)->f_extra_locals != NULL)
        return -1;
#endif
    const char *kinds = PyBytes_AS_STRING(co->co_localspluskinds);
    for (int i = 0; i < n; i++) {
        PyObject *v = f->localsplus[i];
#if FAST_LOCALS == 311
        if (kinds[i] & FAST_FREE) {
            if (v == NULL || !PyCell_Check(v)) return -1;
            v = PyCell_GET(v);
        } else if (kinds[i] & FAST_CELL && v != NULL && PyCell_Check(v)) v = PyCell_GET(v);  /* MAKE_CELL ran */
#else
        /* framelocalsproxy_getval: a cell slot may hold a plain value (an inlined comprehension's
         * variable of the cell's name, GH-128396) */
        if (kinds[i] & (FAST_FREE | FAST_CELL) && v != NULL && PyCell_Check(v)) v = PyCell_GET(v);
#endif
        vals[i] = v;
    }
    return n;
}

#if FAST_LOCALS == 311
/* The order the frame's dict would have now: FastToLocals keeps a name where it is while it stays
 * bound, deletes an unbound one and appends a newly bound one (in slot order), so the names of the
 * previous snapshot `prev` (a list; None at a call) that are still bound, then the other bound
 * slots. idx gets the slots in that order; the number of them, *same = 1 when that is `prev` as it
 * was, or -1 where a name of `prev` is none of the slots (the dict then answers). */
static int fast_order(PyObject *names, int n, PyObject *const *vals, PyObject *prev, int *idx, int *same) {
    char seen[FAST_MAX];
    memset(seen, 0, n);
    int m = 0, at = 0, dropped = 0;
    Py_ssize_t np = PyList_CheckExact(prev) ? PyList_GET_SIZE(prev) : -1;
    for (Py_ssize_t p = 0; p < np; p++) {
        int j = slot_of(names, n, PyList_GET_ITEM(prev, p), at);
        if (j < 0 || seen[j]) return -1;
        seen[j] = 1;
        at = j + 1;
        if (vals[j] != NULL) idx[m++] = j;
        else dropped = 1;
    }
    *same = np == m && !dropped;
    for (int i = 0; i < n; i++)
        if (!seen[i] && vals[i] != NULL) {
            idx[m++] = i;
            *same = 0;
        }
    return m;
}
#else
/* The proxy's order: the bound slots in slot order. idx gets them; the number of them, *same = 1
 * when their names are the previous snapshot's `prev` (a list; None at a call), object for object. */
static int fast_order(PyObject *names, int n, PyObject *const *vals, PyObject *prev, int *idx, int *same) {
    Py_ssize_t np = PyList_CheckExact(prev) ? PyList_GET_SIZE(prev) : -1;
    int m = 0, s = np >= 0;
    for (int i = 0; i < n; i++)
        if (vals[i] != NULL) {
            s = s && m < np && PyList_GET_ITEM(prev, m) == PyTuple_GET_ITEM(names, i);
            idx[m++] = i;
        }
    *same = s && np == m;
    return m;
}
#endif

/* fast_locals_check(*frames): whether fast_read reads each (live) frame's locals as
 * PyFrame_GetLocals gives them (3.11's dict, 3.13's proxy), the same objects in the same order; the
 * answer, given for all, turns the direct read on or off. */
static PyObject *fast_locals_check(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int ok = nargs > 0;
    for (Py_ssize_t a = 0; ok && a < nargs; a++) {
        PyObject *vals[FAST_MAX];
        int n = fast_read(args[a], vals);
        if (n < 0) {
            ok = 0;
            break;
        }
        PyObject *names = FAST_CODE(((FrameObjectFast *)args[a])->f_frame)->co_localsplusnames;
        PyObject *fl = PyFrame_GetLocals((PyFrameObject *)args[a]);
        PyObject *items = fl == NULL ? NULL : PyMapping_Items(fl);
        Py_XDECREF(fl);
        if (items == NULL) return NULL;
        Py_ssize_t at = 0, len = PyList_GET_SIZE(items);
        for (int i = 0; ok && i < n; i++) {
            if (vals[i] == NULL) continue;
            PyObject *kv = at < len ? PyList_GET_ITEM(items, at++) : NULL;
            ok = kv != NULL && PyTuple_GET_ITEM(kv, 0) == PyTuple_GET_ITEM(names, i) && PyTuple_GET_ITEM(kv, 1) == vals[i];
        }
        ok = ok && at == len;
        Py_DECREF(items);
    }
    fast_ok = ok;
    return PyBool_FromLong(ok);
}
#endif

/* The locals dict's keys as a list: the previous snapshot's own list `prev` when it holds the same
 * objects in the same order (*same = 1: no local bound or unbound since, the commonest case),
 * which spares building a new list and comparing it at every event; else a new list (*same = -1:
 * not compared yet). */
static PyObject *keys_since(PyObject *fl, PyObject *prev, int *same) {
    Py_ssize_t n = PyDict_GET_SIZE(fl), pos = 0, i = 0;
    if (PyList_CheckExact(prev) && PyList_GET_SIZE(prev) == n) {
        PyObject *k, *v;
        while (PyDict_Next(fl, &pos, &k, &v) && k == PyList_GET_ITEM(prev, i)) i++;
        if (i == n) {
            *same = 1;
            Py_INCREF(prev);
            return prev;
        }
    }
    *same = -1;
    return PyDict_Keys(fl);
}

/* The previous snapshot's values list, refreshed in place from the locals dict `fl` when the frame
 * state alone holds it and it has the dict's length: one walk over the dict both compares the
 * names with `prev_keys` (*same = 1 when all are the same objects in the same order, else -1: not
 * compared yet) and puts each value in its slot, with moved[i] telling whether it is another object
 * than before; this spares a new list, and its references, at every event. 1 when done that way,
 * 0 when the caller must build the lists (no Python code has run and nothing was changed). */
#define REUSE_MAX 256
static int values_into(PyObject *fl, PyObject *prev_keys, PyObject *vals, char *moved, int *same) {
    Py_ssize_t n = PyDict_GET_SIZE(fl);
    if (n > REUSE_MAX || !PyList_CheckExact(vals) || Py_REFCNT(vals) != 1 || PyList_GET_SIZE(vals) != n
        || !PyList_CheckExact(prev_keys) || PyList_GET_SIZE(prev_keys) != n)
        return 0;
    PyObject *olds[REUSE_MAX];
    Py_ssize_t pos = 0, i = 0, nold = 0;
    PyObject *k, *v, **slots = ((PyListObject *)vals)->ob_item;
    int names_same = 1;
    while (PyDict_Next(fl, &pos, &k, &v)) {
        names_same &= k == PyList_GET_ITEM(prev_keys, i);
        moved[i] = slots[i] != v;
        if (moved[i]) {
            olds[nold++] = slots[i];
            Py_INCREF(v);
            slots[i] = v;
        }
        i++;
    }
    *same = names_same ? 1 : -1;
    /* after the walk: a finalizer run by a release must not see the dict half read */
    for (Py_ssize_t j = 0; j < nold; j++) Py_DECREF(olds[j]);
    return 1;
}

static PyObject *snapshot_of(PyObject *ctx, PyObject *frame, PyObject *st) {
    if (!PyTuple_CheckExact(ctx) || (PyTuple_GET_SIZE(ctx) != 9 && PyTuple_GET_SIZE(ctx) != 10) || !PyList_CheckExact(st)
        || PyList_GET_SIZE(st) != ST_LEN) {
        PyErr_SetString(PyExc_TypeError, "snapshot(ctx, frame, st)");
        return NULL;
    }
    PyObject *other = PyTuple_GET_SIZE(ctx) == 10 ? PyTuple_GET_ITEM(ctx, 9) : Py_None;
    if (other != Py_None && (!PyTuple_CheckExact(other) || PyTuple_GET_SIZE(other) != 10)) {
        PyErr_SetString(PyExc_TypeError, "snapshot: other must be a 10-tuple or None");
        return NULL;
    }
    PyObject *value = PyTuple_GET_ITEM(ctx, 0), *keyed = PyTuple_GET_ITEM(ctx, 1);
    PyObject *unchanged = PyTuple_GET_ITEM(ctx, 2), *named = PyTuple_GET_ITEM(ctx, 3);
    PyObject *bad = PyTuple_GET_ITEM(ctx, 4), *immutable = PyTuple_GET_ITEM(ctx, 5);
    PyObject *keyed_types = PyTuple_GET_ITEM(ctx, 6), *leaf = PyTuple_GET_ITEM(ctx, 7);
    Py_ssize_t max_str = -1, max_items = -1;
    long max_int_bits = -1, max_depth = -1;
    int c_keyed = 0;
    if (leaf != Py_None) {
        if (!PyTuple_CheckExact(leaf) || (PyTuple_GET_SIZE(leaf) != 2 && PyTuple_GET_SIZE(leaf) != 4)) {
            PyErr_SetString(PyExc_TypeError, "snapshot: leaf must be (max_str, max_int_bits[, max_items, max_depth]) or None");
            return NULL;
        }
        max_str = PyLong_AsSsize_t(PyTuple_GET_ITEM(leaf, 0));
        max_int_bits = PyLong_AsLong(PyTuple_GET_ITEM(leaf, 1));
        if (PyTuple_GET_SIZE(leaf) == 4) {  /* keyed and unchanged are Serializer's: flat containers here too */
            c_keyed = 1;
            max_items = PyLong_AsSsize_t(PyTuple_GET_ITEM(leaf, 2));
            max_depth = PyLong_AsLong(PyTuple_GET_ITEM(leaf, 3));
        }
        if (PyErr_Occurred()) return NULL;
    }

    PyObject *keys = NULL, *vals = NULL, *out = NULL, *result = NULL;
    PyObject *prev_keys = PyList_GET_ITEM(st, ST_KEYS);
    int same = -1;
    char moved[REUSE_MAX];  /* where vals was reused: whether the value at i is another object */
    int reused = 0;
    PyObject *fl = NULL;
#ifdef FAST_LOCALS
    PyObject *fast[FAST_MAX];
    int nfast = fast_ok ? fast_read(frame, fast) : -1, idx[FAST_MAX], m = -1;
    PyObject *names = nfast < 0 ? NULL : FAST_CODE(((FrameObjectFast *)frame)->f_frame)->co_localsplusnames;
    if (nfast >= 0) m = fast_order(names, nfast, fast, prev_keys, idx, &same);
    if (m >= 0) {
        PyObject *prev_vals = PyList_GET_ITEM(st, ST_VALS);
        if (same && PyList_CheckExact(prev_vals) && Py_REFCNT(prev_vals) == 1 && PyList_GET_SIZE(prev_vals) == m) {
            /* values_into's reuse of the values list, from the slots */
            PyObject *olds[FAST_MAX], **slots = ((PyListObject *)prev_vals)->ob_item;
            int nold = 0;
            for (int i = 0; i < m; i++) {
                PyObject *v = fast[idx[i]];
                moved[i] = slots[i] != v;
                if (moved[i]) {
                    olds[nold++] = slots[i];
                    Py_INCREF(v);
                    slots[i] = v;
                }
            }
            for (int j = 0; j < nold; j++) Py_DECREF(olds[j]);  /* after the walk, as values_into */
            reused = 1;
            vals = prev_vals;
            Py_INCREF(vals);
        } else {
            vals = PyList_New(m);
            for (int i = 0; vals != NULL && i < m; i++) {
                Py_INCREF(fast[idx[i]]);
                PyList_SET_ITEM(vals, i, fast[idx[i]]);
            }
        }
        if (same) {
            keys = prev_keys;
            Py_INCREF(keys);
        } else {
            keys = PyList_New(m);
            for (int i = 0; keys != NULL && i < m; i++) {
                PyObject *name = PyTuple_GET_ITEM(names, idx[i]);
                Py_INCREF(name);
                PyList_SET_ITEM(keys, i, name);
            }
        }
    } else
#endif
    if ((fl = locals_of(frame)) == NULL) return NULL;
    else if (PyDict_CheckExact(fl)) {  /* up to 3.12 */
        reused = values_into(fl, prev_keys, PyList_GET_ITEM(st, ST_VALS), moved, &same);
        if (reused) {
            vals = PyList_GET_ITEM(st, ST_VALS);
            Py_INCREF(vals);
            keys = same == 1 ? (Py_INCREF(prev_keys), prev_keys) : PyDict_Keys(fl);
        } else {
            keys = keys_since(fl, prev_keys, &same);
            vals = PyDict_Values(fl);
        }
    } else {  /* 3.13+: a FrameLocalsProxy */
        keys = PyObject_CallMethodNoArgs(fl, S_KEYS);
        vals = keys ? PyObject_CallMethodNoArgs(fl, S_VALUES) : NULL;
    }
    Py_XDECREF(fl);
    if (keys == NULL || vals == NULL) goto done;
    int ok = PyList_CheckExact(keys) && PyList_CheckExact(vals) && PyList_GET_SIZE(keys) == PyList_GET_SIZE(vals);
    Py_ssize_t n = ok ? PyList_GET_SIZE(keys) : 0;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        ok = PyUnicode_CheckExact(k) && PyUnicode_GET_LENGTH(k) > 0;
    }
    if (!ok) {
        /* st's values were refreshed in place, so the Python path cannot tell what changed: it is
         * told the names are new, and renders every value */
        if (reused) PyList_SetItem(st, ST_KEYS, (Py_INCREF(Py_None), Py_None));
        result = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(ctx, 8), frame, st, NULL);
        goto done;
    }
    if (same < 0) same = PyObject_RichCompareBool(keys, prev_keys, Py_EQ);
    if (same < 0) goto done;
    PyObject *mut, *cache, *prev_vals = NULL;
    int shared;
    if (reused && !same) reused = 0;  /* the names changed: every value is looked at, as without prev_vals */
    if (same) {
        out = PyList_GET_ITEM(st, ST_OUT);
        Py_INCREF(out);
        mut = PyList_GET_ITEM(st, ST_MUT);
        cache = PyList_GET_ITEM(st, ST_CACHE);
        prev_vals = PyList_GET_ITEM(st, ST_VALS);
        Py_INCREF(prev_vals);
        shared = 1;
        if (!PyList_CheckExact(out) || !PyList_CheckExact(mut) || !PyList_CheckExact(cache) || !PyList_CheckExact(prev_vals)
            || PyList_GET_SIZE(out) != n || PyList_GET_SIZE(mut) != n || PyList_GET_SIZE(cache) != n
            || PyList_GET_SIZE(prev_vals) != n) {
            Py_DECREF(prev_vals);
            PyErr_SetString(PyExc_RuntimeError, "snapshot: frame state out of shape");
            goto done;
        }
    } else {
        out = PyList_New(n);
        untrack(out);
        mut = PyList_New(n);
        cache = PyList_New(n);
        if (out == NULL || mut == NULL || cache == NULL) {
            Py_XDECREF(mut);
            Py_XDECREF(cache);
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_INCREF(Py_None);
            PyList_SET_ITEM(out, i, Py_None);
            Py_INCREF(Py_False);
            PyList_SET_ITEM(mut, i, Py_False);
            Py_INCREF(Py_None);
            PyList_SET_ITEM(cache, i, Py_None);
        }
        Py_INCREF(keys);
        PyList_SetItem(st, ST_KEYS, keys);
        Py_INCREF(out);
        PyList_SetItem(st, ST_OUT, out);
        PyList_SetItem(st, ST_MUT, mut);   /* st holds mut and cache from here on */
        PyList_SetItem(st, ST_CACHE, cache);
        Py_INCREF(Py_False);
        PyList_SetItem(st, ST_FILT, Py_False);
        shared = 0;
    }
    Py_INCREF(vals);
    PyList_SetItem(st, ST_VALS, vals);
    /* the lists keep their own references while st may be rewritten by a callback */
    Py_INCREF(mut);
    Py_INCREF(cache);
    int failed = 0;
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        PyObject *v = PyList_GET_ITEM(vals, i);
        int kept = reused ? !moved[i] : prev_vals != NULL && i < PyList_GET_SIZE(prev_vals) && PyList_GET_ITEM(prev_vals, i) == v;
        if (kept && !PyObject_IsTrue(PyList_GET_ITEM(mut, i))) continue;
        PyObject *name = PyList_GET_ITEM(keys, i);
        Py_UCS4 c = PyUnicode_READ_CHAR(name, 0);
        if (c == '@' || c == '.') {
            Py_INCREF(Py_True);
            PyList_SetItem(st, ST_FILT, Py_True);
            continue;
        }
        Py_INCREF(v);
        /* a leaf value is rendered first: its types are in `immutable` and not in `keyed_types`
         * wherever leaf is given (tracer.py's _IMMUTABLE and _KEYED), so both lookups are spared */
        PyObject *t = (PyObject *)Py_TYPE(v), *r = leaf != Py_None ? leaf_repr(v, max_str, max_int_bits) : NULL;
        int leafed = r != NULL;
        int contains = leafed ? 0 : PyErr_Occurred() ? -1 : PySet_Contains(keyed_types, t);
        if (contains < 0) failed = 1;
        else if (contains) {
            PyObject *key = PyList_GET_ITEM(cache, i);
            if (PyTuple_CheckExact(key)) {
                int same_text;
                if (c_keyed) same_text = unchanged_of(max_items, v, key);  /* no partial to call through */
                else {
                    PyObject *u = PyObject_CallFunctionObjArgs(unchanged, v, key, NULL);
                    same_text = u ? PyObject_IsTrue(u) : -1;
                    Py_XDECREF(u);
                }
                if (same_text < 0) failed = 1;
                else if (same_text) {
                    Py_DECREF(v);
                    continue;
                }
            }
            PyObject *rk = failed || !c_keyed ? NULL : any_keyed(v, max_str, max_int_bits, max_items, max_depth, other);
            if (rk == NULL && !failed && !PyErr_Occurred()) rk = PyObject_CallOneArg(keyed, v);
            if (rk == NULL) failed = 1;
            else {
                if (!PyTuple_CheckExact(rk) || PyTuple_GET_SIZE(rk) != 2) {
                    PyErr_SetString(PyExc_TypeError, "keyed() must give (text, key)");
                    failed = 1;
                } else {
                    r = PyTuple_GET_ITEM(rk, 0);
                    Py_INCREF(r);
                    PyObject *k = PyTuple_GET_ITEM(rk, 1);
                    Py_INCREF(k);
                    PyList_SetItem(cache, i, k);
                    Py_INCREF(Py_True);
                    PyList_SetItem(mut, i, Py_True);
                }
                Py_DECREF(rk);
            }
        } else if (t == named) {
            PyObject *q = PyObject_GetAttr(v, S_QUALNAME);
            if (q == NULL) failed = 1;
            else {
                int skip = 0;
                if (PyList_GET_ITEM(cache, i) == q && PyList_GET_ITEM(out, i) != Py_None) {
                    int is_bad = PySet_Contains(bad, t);
                    if (is_bad < 0) failed = 1;
                    else skip = !is_bad;
                }
                if (skip || failed) {
                    Py_DECREF(q);
                    Py_DECREF(v);
                    if (failed) break;
                    continue;
                }
                r = PyObject_CallOneArg(value, v);
                if (r == NULL) {
                    Py_DECREF(q);
                    failed = 1;
                } else {
                    PyList_SetItem(cache, i, q);
                    Py_INCREF(Py_True);
                    PyList_SetItem(mut, i, Py_True);
                }
            }
        } else {
            if (r == NULL && other != Py_None) r = other_repr(other, v);
            if (r == NULL && !PyErr_Occurred()) r = PyObject_CallOneArg(value, v);
            if (r == NULL) failed = 1;
            else {
                int imm = leafed ? 1 : PySet_Contains(immutable, t);
                if (imm < 0) failed = 1;
                else {
                    PyObject *m = imm ? Py_False : Py_True;
                    Py_INCREF(m);
                    PyList_SetItem(mut, i, m);
                }
            }
        }
        Py_DECREF(v);
        if (failed) {
            Py_XDECREF(r);
            break;
        }
        PyObject *pair = PyList_GET_ITEM(out, i);
        int differs = 1;
        if (pair != Py_None) {
            PyObject *old = PySequence_GetItem(pair, 1);
            differs = old ? truth(PyObject_RichCompare(old, r, Py_NE)) : -1;
            Py_XDECREF(old);
        }
        if (differs < 0) {
            Py_DECREF(r);
            failed = 1;
            break;
        }
        if (differs) {
            if (shared) {
                PyObject *copy = PyList_GetSlice(out, 0, n);
                untrack(copy);
                if (copy == NULL) {
                    Py_DECREF(r);
                    failed = 1;
                    break;
                }
                Py_SETREF(out, copy);
                shared = 0;
            }
            Py_INCREF(name);
            PyObject *np = PyList_New(2);
            if (np == NULL) {
                Py_DECREF(name);
                Py_DECREF(r);
                failed = 1;
                break;
            }
            PyList_SET_ITEM(np, 0, name);
            PyList_SET_ITEM(np, 1, r);
            untrack(np);
            PyList_SetItem(out, i, np);
        } else {
            Py_DECREF(r);
        }
    }
    Py_XDECREF(prev_vals);
    Py_DECREF(mut);
    Py_DECREF(cache);
    if (failed) goto done;
    Py_INCREF(out);
    PyList_SetItem(st, ST_OUT, out);
    if (PyObject_IsTrue(PyList_GET_ITEM(st, ST_FILT))) {
        result = PyList_New(0);
        for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
            PyObject *p = PyList_GET_ITEM(out, i);
            if (p != Py_None && PyList_Append(result, p) < 0) Py_CLEAR(result);
        }
        untrack(result);
    } else {
        result = out;
        Py_INCREF(result);
    }
done:
    Py_XDECREF(keys);
    Py_XDECREF(vals);
    Py_XDECREF(out);
    return result;
}


static PyObject *snapshot(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "snapshot(ctx, frame, st)");
        return NULL;
    }
    return snapshot_of(args[0], args[1], args[2]);
}

/* Capture: tracer.Tracer's event handlers in C, from the interpreter's event to the compact record
 * in Tracer._raw: the settrace backend's trace function (_st_global/_st_local, installed with
 * PyEval_SetTrace, so no Python frame runs per event) and the sys.monitoring backend's commonest
 * callbacks (LINE, PY_START/PY_RESUME, PY_RETURN/PY_YIELD). It shares the tracer's frames dict,
 * code cache and record list, so the Python handlers that stay (the rarer monitoring events) see
 * the same state. Only what must be Python is called back: the scope decision for a code object
 * not seen before (cached in the tracer's dict), the serializer for returned values and
 * exceptions, the snapshot's slow paths, and the tracer's _halt and _fault. A Python exception
 * in a handler is handled as the Python's ``except Exception: self._fault()``; anything else
 * propagates and, under settrace, turns tracing off as CPython's own trampoline does. */
enum { ST_HEAD = 0, ST_NLINES, ST_CAPPED };
static PyObject *S_F_TRACE_LINES, *S_OFF, *S_TRUNCATED, *S_HALT, *S_FAULT, *S_F_TRACE, *S_CALL, *S_LINE, *S_RETURN, *S_EXCEPTION,
    *S_EXC_FMT, *S_CO_LINES;

/* A code object's line per code unit, from its co_lines() (-1: none), for cap_m_jump: the JUMP
 * events of a loop come from one or two code objects in turn, so a few entries keyed by the
 * object's address (holding it alive) answer nearly every event without a dict lookup, which
 * would hash the code object. */
#define JUMP_CODES 8
typedef struct {
    PyObject *code;
    int *lines;
    Py_ssize_t n;
} CodeLines;

/* An entry of the capture's table of code objects by address (cap_info). */
typedef struct {
    PyObject *code, *info;
} CodeInfo;

typedef struct {
    PyObject_HEAD
    PyObject *tracer;  /* the Python Tracer: truncated, _halt(), _fault() */
    char off;          /* tracer._off, which Tracer._set_off keeps here too (cap_off) */
    PyObject *frames, *codes, *raw, *ctx, *ser, *scope, *disable;
    PyObject *counts;  /* the ints 0, 1, ... a frame's line count has reached so far (count_of) */
    Py_ssize_t max_lines, max_events;
    unsigned long thread;
    CodeLines jump_codes[JUMP_CODES];
    CodeInfo *infos;  /* open addressing, a power of two long (or NULL), at most half full */
    Py_ssize_t infos_size, infos_used;
} Capture;

/* `except Exception: tracer._fault()` for the error set now: 0 when handled, -1 when it must
 * propagate (not an Exception, or _fault re-raised). */
static int cap_fault(Capture *c) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
    PyObject *t, *v, *tb, *ot, *ov, *otb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb != NULL) PyException_SetTraceback(v, tb);
    PyErr_GetExcInfo(&ot, &ov, &otb);
    PyErr_SetExcInfo(t, v, tb);  /* what sys.exc_info() shows inside _fault */
    PyObject *r = PyObject_CallMethodNoArgs(c->tracer, S_FAULT);
    PyErr_SetExcInfo(ot, ov, otb);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* tracer._off, asked at every event, the line cap's dropped lines included: a field the tracer
 * sets (Tracer._set_off), where a lookup in the tracer's __dict__ was 4% of a CPU-bound run's
 * instructions. 1, 0 (kept int-valued: the callers also take -1 as an error). */
static int cap_off(Capture *c) {
    return c->off;
}

/* frame.f_lineno */
static PyObject *lineno_of(PyFrameObject *frame) {
    int line = PyFrame_GetLineNumber(frame);
    if (line < 0) Py_RETURN_NONE;
    return PyLong_FromLong(line);
}

/* A tuple none of whose items the cyclic GC tracks is untracked (what a collection would do to it
 * later, after walking it; see untrack above). */
static void untrack_flat(PyObject *tuple) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (PyObject_IS_GC(item) && PyObject_GC_IsTracked(item)) return;
    }
    PyObject_GC_UnTrack(tuple);
}

/* Tracer._emit: append (stealing rec) and stop at the event cap. */
static int cap_emit(Capture *c, PyObject *rec) {
    if (rec == NULL) return -1;
    untrack_flat(rec);
    int r = PyList_Append(c->raw, rec);
    Py_DECREF(rec);
    if (r < 0) return -1;
    if (PyList_GET_SIZE(c->raw) >= c->max_events) {
        if (PyObject_SetAttr(c->tracer, S_TRUNCATED, Py_True) < 0) return -1;
        PyObject *h = PyObject_CallMethodNoArgs(c->tracer, S_HALT);
        if (h == NULL) return -1;
        Py_DECREF(h);
    }
    return 0;
}

/* Tracer._on_call */
static int cap_on_call(Capture *c, PyFrameObject *frame, PyObject *info) {
    long depth = 0;
    PyFrameObject *f = PyFrame_GetBack(frame);
    while (f != NULL) {
        PyObject *st = PyDict_GetItemWithError(c->frames, (PyObject *)f);
        if (st != NULL) {
            depth = PyLong_AsLong(PyTuple_GET_ITEM(PyList_GET_ITEM(st, ST_HEAD), 1)) + 1;
            break;
        }
        PyFrameObject *back = PyErr_Occurred() ? NULL : PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    if (PyErr_Occurred()) return -1;
    untrack_flat(info);
    PyObject *head = Py_BuildValue("(Ol)", info, depth);
    if (head == NULL) return -1;
    untrack_flat(head);
    PyObject *st = PyList_New(ST_LEN);
    if (st == NULL) {
        Py_DECREF(head);
        return -1;
    }
    PyObject *init[ST_LEN] = {head, NULL, Py_False, Py_None, Py_None, Py_None, Py_None, Py_None, Py_False};
    init[ST_NLINES] = PyLong_FromLong(0);
    for (int i = 0; i < ST_LEN; i++) {
        if (i != ST_HEAD && i != ST_NLINES) Py_INCREF(init[i]);
        PyList_SET_ITEM(st, i, init[i]);
    }
    int r = PyDict_SetItem(c->frames, (PyObject *)frame, st);
    PyObject *line = r < 0 ? NULL : lineno_of(frame);
    PyObject *snap = line == NULL ? NULL : snapshot_of(c->ctx, (PyObject *)frame, st);
    PyObject *rec = NULL;
    if (snap != NULL) {
        PyObject *gen = PyTuple_GET_ITEM(info, 3), *resume;
        int is_gen = PyObject_IsTrue(gen);
        resume = is_gen ? PyObject_RichCompare(line, PyTuple_GET_ITEM(info, 2), Py_NE) : (Py_INCREF(gen), gen);
        if (resume != NULL) rec = PyTuple_Pack(5, S_CALL, head, line, snap, resume);
        Py_XDECREF(resume);
    }
    Py_XDECREF(line);
    Py_XDECREF(snap);
    Py_DECREF(st);
    return snap == NULL ? -1 : cap_emit(c, rec);
}

/* The int n (0 <= n <= max_lines + 1), a new reference: a frame's line count is replaced at every
 * line event, and past CPython's cached small ints (256) each new count was allocated and the
 * previous one freed; the capture keeps the ints up to the line cap instead, made once when a frame
 * first gets that far. */
static PyObject *count_of(Capture *c, Py_ssize_t n) {
    if (n < 0 || n > c->max_lines + 1) return PyLong_FromSsize_t(n);
    while (PyList_GET_SIZE(c->counts) <= n) {
        PyObject *x = PyLong_FromSsize_t(PyList_GET_SIZE(c->counts));
        if (x == NULL || PyList_Append(c->counts, x) < 0) {
            Py_XDECREF(x);
            return NULL;
        }
        Py_DECREF(x);
    }
    PyObject *x = PyList_GET_ITEM(c->counts, n);
    Py_INCREF(x);
    return x;
}

/* Tracer._on_line, the line cap included; line NULL: the frame's, read only past the cap check (a
 * capped loop's lines, most of a CPU-bound run's events, then cost no int) */
static int cap_on_line(Capture *c, PyFrameObject *frame, PyObject *st, PyObject *line) {
    Py_ssize_t n = PyLong_AsSsize_t(PyList_GET_ITEM(st, ST_NLINES)) + 1;
    if (n == 0 && PyErr_Occurred()) return -1;
    /* past the cap the count stays one past it (all that is asked of it is `n > max_lines`): a
     * capped loop's further lines then cost no new int each */
    PyObject *count = count_of(c, n > c->max_lines ? c->max_lines + 1 : n);
    if (count == NULL) return -1;
    PyList_SetItem(st, ST_NLINES, count);
    if (n > c->max_lines) {
        Py_INCREF(Py_True);
        PyList_SetItem(st, ST_CAPPED, Py_True);
        return 0;
    }
    if (line == NULL) {
        line = lineno_of(frame);
        if (line == NULL) return -1;
    } else Py_INCREF(line);
    Py_INCREF(st);  /* a callback in the snapshot may drop it from the frames dict */
    PyObject *snap = snapshot_of(c->ctx, (PyObject *)frame, st);
    PyObject *rec = snap ? PyTuple_Pack(4, S_LINE, PyList_GET_ITEM(st, ST_HEAD), line, snap) : NULL;
    Py_XDECREF(snap);
    Py_DECREF(st);
    Py_DECREF(line);
    return snap == NULL ? -1 : cap_emit(c, rec);
}

/* Tracer._on_return (value: the returned object, or NULL for None) */
static int cap_on_return(Capture *c, PyFrameObject *frame, PyObject *st, PyObject *value) {
    Py_INCREF(st);
    int r = PyDict_DelItem(c->frames, (PyObject *)frame);
    PyObject *line = r < 0 ? NULL : lineno_of(frame);
    PyObject *text = line ? PyObject_CallOneArg(c->ser, value ? value : Py_None) : NULL;
    PyObject *rec = text ? PyTuple_Pack(5, S_RETURN, PyList_GET_ITEM(st, ST_HEAD), line, text,
                                        PyList_GET_ITEM(st, ST_CAPPED)) : NULL;
    Py_XDECREF(line);
    Py_XDECREF(text);
    Py_DECREF(st);
    return text == NULL ? -1 : cap_emit(c, rec);
}

/* Tracer._on_exception, with _st_local's reading of settrace's (type, value, traceback) */
static int cap_on_exception(Capture *c, PyFrameObject *frame, PyObject *st, PyObject *arg) {
    PyObject *exc = NULL;
    if (arg != NULL && arg != Py_None) {
        exc = PySequence_GetItem(arg, 1);
        if (exc == NULL) return -1;
    }
    if (exc == NULL || !PyExceptionInstance_Check(exc)) {
        Py_XDECREF(exc);
        PyObject *type = arg != NULL && arg != Py_None ? PySequence_GetItem(arg, 0) : (Py_INCREF(Py_None), Py_None);
        if (type == NULL) return -1;
        PyObject *name = PyObject_GetAttr(type, S_NAME);
        Py_DECREF(type);
        if (name == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            name = PyUnicode_FromString("exception");
            if (name == NULL) return -1;
        }
        exc = PyUnicode_Format(S_EXC_FMT, name);
        Py_DECREF(name);
        if (exc == NULL) return -1;
    }
    Py_INCREF(st);
    PyObject *line = lineno_of(frame);
    PyObject *text = line ? PyObject_CallOneArg(c->ser, exc) : NULL;
    PyObject *rec = text ? PyTuple_Pack(4, S_EXCEPTION, PyList_GET_ITEM(st, ST_HEAD), line, text) : NULL;
    Py_DECREF(exc);
    Py_XDECREF(line);
    Py_XDECREF(text);
    Py_DECREF(st);
    return text == NULL ? -1 : cap_emit(c, rec);
}

/* The slot of `code` in a table of `size` entries: its own, or the empty one where it would go. */
static CodeInfo *info_slot(CodeInfo *table, Py_ssize_t size, PyObject *code) {
    size_t h = (size_t)(uintptr_t)code >> 4;
    h ^= h >> 17;
    h *= 0x9E3779B1u;
    h ^= h >> 15;
    size_t mask = (size_t)size - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask)
        if (table[i].code == NULL || table[i].code == code) return &table[i];
}

/* Remember code -> info (both held), growing the table to keep it at most half full. */
static int info_put(Capture *c, PyObject *code, PyObject *info) {
    if (2 * (c->infos_used + 1) > c->infos_size) {
        Py_ssize_t size = c->infos_size ? 2 * c->infos_size : 256;
        CodeInfo *table = PyMem_New(CodeInfo, size);
        if (table == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memset(table, 0, sizeof(CodeInfo) * size);
        for (Py_ssize_t i = 0; i < c->infos_size; i++)
            if (c->infos[i].code != NULL) *info_slot(table, size, c->infos[i].code) = c->infos[i];
        PyMem_Free(c->infos);
        c->infos = table;
        c->infos_size = size;
    }
    CodeInfo *e = info_slot(c->infos, c->infos_size, code);
    if (e->code == NULL) c->infos_used++;
    Py_INCREF(code);
    Py_INCREF(info);
    Py_XSETREF(e->code, code);
    Py_XSETREF(e->info, info);
    return 0;
}

static void clear_infos(Capture *c) {
    CodeInfo *table = c->infos;
    Py_ssize_t size = c->infos_size;
    c->infos = NULL;
    c->infos_size = c->infos_used = 0;
    for (Py_ssize_t i = 0; i < size; i++) {
        Py_XDECREF(table[i].code);
        Py_XDECREF(table[i].info);
    }
    PyMem_Free(table);
}

/* The code's info (Tracer._info / _m_scope, called only for a code object not in the tracer's
 * dict yet): a new reference, False when out of scope. What the dict answers is remembered by the
 * code object's address: a dict lookup hashes the code object, and CPython computes that hash
 * afresh every time, from its constants and names (3.11) or from every instruction (3.13: about
 * 1.8 us for a large function), and settrace asks at every call, in scope or not. */
static PyObject *cap_info(Capture *c, PyObject *code) {
    if (c->infos != NULL) {
        CodeInfo *e = info_slot(c->infos, c->infos_size, code);
        if (e->code == code) {
            Py_INCREF(e->info);
            return e->info;
        }
    }
    PyObject *info = PyDict_GetItemWithError(c->codes, code);
    if (info != NULL) Py_INCREF(info);
    else if (PyErr_Occurred()) return NULL;
    else info = PyObject_CallOneArg(c->scope, code);
    if (info != NULL && info_put(c, code, info) < 0) Py_CLEAR(info);
    return info;
}

/* settrace: one event, as _st_global ("call") and _st_local (the rest) handle it. */
static int cap_event(Capture *c, PyFrameObject *frame, int what, PyObject *arg) {
    int off = cap_off(c);
    if (off) return off < 0 ? -1 : 0;
    if (what == PyTrace_CALL) {
        PyObject *code = (PyObject *)PyFrame_GetCode(frame);
        PyObject *info = cap_info(c, code);
        Py_DECREF(code);
        if (info == NULL) return -1;
        int in = PyObject_IsTrue(info);
        int r = in <= 0 ? in : cap_on_call(c, frame, info);
        Py_DECREF(info);
        /* the trampoline sets the frame's f_trace to the local trace function it is given back */
        if (r == 0 && in) r = PyObject_SetAttr((PyObject *)frame, S_F_TRACE, (PyObject *)c);
        return r;
    }
    PyObject *st = PyDict_GetItemWithError(c->frames, (PyObject *)frame);
    if (st == NULL) return PyErr_Occurred() ? -1 : 0;
    if (what == PyTrace_LINE) {
        /* past the line cap the frame's lines are dropped: CPython is told to stop delivering them
         * (most of a CPU-bound run's events were such lines); the return turns them back on, for a
         * generator's next resumption, which counts afresh, and so does Tracer.stop */
        Py_INCREF(st);
        int r = cap_on_line(c, frame, st, NULL);
        if (r == 0 && PyList_GET_ITEM(st, ST_CAPPED) == Py_True) r = PyObject_SetAttr((PyObject *)frame, S_F_TRACE_LINES, Py_False);
        Py_DECREF(st);
        return r;
    }
    if (what == PyTrace_RETURN) {
        int capped = PyList_GET_ITEM(st, ST_CAPPED) == Py_True;
        int r = cap_on_return(c, frame, st, arg);
        if (r == 0 && capped) r = PyObject_SetAttr((PyObject *)frame, S_F_TRACE_LINES, Py_True);
        return r < 0 ? r : PyObject_SetAttr((PyObject *)frame, S_F_TRACE, Py_None);
    }
    if (what == PyTrace_EXCEPTION) return cap_on_exception(c, frame, st, arg);
    return 0;
}

static int cap_trace(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
    Capture *c = (Capture *)obj;
    Py_INCREF(c);  /* _halt may replace the trace function, dropping the interpreter's reference */
    int r = cap_event(c, frame, what, arg);
    if (r < 0) r = cap_fault(c);
    if (r < 0) {
        /* as CPython's trampoline does when a trace function raises */
        PyEval_SetTrace(NULL, NULL);
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        if (PyObject_SetAttr((PyObject *)frame, S_F_TRACE, Py_None) < 0) PyErr_Clear();
        PyErr_Restore(t, v, tb);
    }
    Py_DECREF(c);
    return r;
}

/* Called as a Python trace function (someone gave sys.gettrace()'s answer back to sys.settrace):
 * the same handling, and itself as the local trace function while the frame is traced. */
static PyObject *cap_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    PyObject *frame, *event, *arg;
    if (!PyArg_ParseTuple(args, "O!UO", &PyFrame_Type, &frame, &event, &arg)) return NULL;
    int what = -1;
    if (PyUnicode_Compare(event, S_CALL) == 0) what = PyTrace_CALL;
    else if (PyUnicode_Compare(event, S_LINE) == 0) what = PyTrace_LINE;
    else if (PyUnicode_Compare(event, S_RETURN) == 0) what = PyTrace_RETURN;
    else if (PyUnicode_Compare(event, S_EXCEPTION) == 0) what = PyTrace_EXCEPTION;
    if (what >= 0) {
        Capture *c = (Capture *)self;
        Py_INCREF(c);
        int r = cap_event(c, (PyFrameObject *)frame, what, arg);
        if (r < 0) r = cap_fault(c);
        Py_DECREF(c);
        if (r < 0) return NULL;
    }
    int traced = PyDict_Contains(((Capture *)self)->frames, frame);
    if (traced < 0) return NULL;
    PyObject *r = traced && what != PyTrace_RETURN ? self : Py_None;
    Py_INCREF(r);
    return r;
}

/* settrace(capture): install it as the calling thread's C trace function. */
static PyObject *cap_settrace(PyObject *self, PyObject *obj) {
    PyEval_SetTrace(cap_trace, obj);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* sys.monitoring callbacks (bound methods of the capture). The calling frame is the monitored
 * one: a C function pushes no frame, where the Python callbacks used sys._getframe(1). */
static PyObject *cap_done(Capture *c, int r) {
    if (r < 0 && cap_fault(c) < 0) return NULL;
    Py_RETURN_NONE;
}

/* LINE(code, line) */
static PyObject *cap_m_line(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Capture *c = (Capture *)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "line(code, line)");
        return NULL;
    }
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL) Py_RETURN_NONE;
    PyObject *st = PyDict_GetItemWithError(c->frames, (PyObject *)frame);
    if (st == NULL) return PyErr_Occurred() ? NULL : (Py_INCREF(Py_None), Py_None);
    int off = cap_off(c);
    if (off) return off < 0 ? NULL : (Py_INCREF(Py_None), Py_None);
    return cap_done(c, cap_on_line(c, frame, st, args[1]));
}

/* PY_START / PY_RESUME(code, offset): out-of-scope code gets DISABLE */
static PyObject *cap_m_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Capture *c = (Capture *)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "start(code, offset)");
        return NULL;
    }
    int off = cap_off(c);
    if (off) return off < 0 ? NULL : (Py_INCREF(Py_None), Py_None);
    PyObject *info = cap_info(c, args[0]);
    if (info == NULL) return cap_done(c, -1);
    int in = PyObject_IsTrue(info);
    int r = in;
    if (in == 0) {
        Py_DECREF(info);
        Py_INCREF(c->disable);
        return c->disable;
    }
    if (in > 0 && PyThread_get_thread_ident() == c->thread) {
        PyFrameObject *frame = PyEval_GetFrame();
        r = frame ? cap_on_call(c, frame, info) : 0;
    }
    Py_DECREF(info);
    return cap_done(c, r);
}

/* PY_RETURN / PY_YIELD(code, offset, value) */
static PyObject *cap_m_return(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Capture *c = (Capture *)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "return(code, offset, value)");
        return NULL;
    }
    int off = cap_off(c);
    if (off) return off < 0 ? NULL : (Py_INCREF(Py_None), Py_None);
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL) Py_RETURN_NONE;
    PyObject *st = PyDict_GetItemWithError(c->frames, (PyObject *)frame);
    if (st == NULL) return PyErr_Occurred() ? NULL : (Py_INCREF(Py_None), Py_None);
    return cap_done(c, cap_on_return(c, frame, st, args[2]));
}

/* The code's entry, made from its co_lines() the first time (as Tracer._line_of reads them), or
 * NULL with an error set. */
static CodeLines *code_lines(Capture *c, PyObject *code) {
    CodeLines *e = &c->jump_codes[((uintptr_t)code >> 4) % JUMP_CODES];
    if (e->code == code) return e;
    PyObject *it = PyObject_CallMethodNoArgs(code, S_CO_LINES);
    PyObject *table = it ? PySequence_List(it) : NULL;
    Py_XDECREF(it);
    if (table == NULL) return NULL;
    Py_ssize_t n = 0, count = PyList_GET_SIZE(table);
    long *ranges = PyMem_New(long, 3 * (count ? count : 1));
    if (ranges == NULL) {
        Py_DECREF(table);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *t = PyList_GET_ITEM(table, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
            PyErr_SetString(PyExc_TypeError, "co_lines() must give (start, end, line)");
            break;
        }
        PyObject *line = PyTuple_GET_ITEM(t, 2);
        ranges[3 * i] = PyLong_AsLong(PyTuple_GET_ITEM(t, 0)) / 2;
        ranges[3 * i + 1] = PyLong_AsLong(PyTuple_GET_ITEM(t, 1)) / 2;
        ranges[3 * i + 2] = line == Py_None ? -1 : PyLong_AsLong(line);
        if (PyErr_Occurred()) break;
        if (ranges[3 * i + 2] < 0 || ranges[3 * i + 2] > INT_MAX) ranges[3 * i + 2] = -1;
        if (ranges[3 * i + 1] > n) n = ranges[3 * i + 1];
    }
    Py_DECREF(table);
    int *lines = PyErr_Occurred() ? NULL : PyMem_New(int, n ? n : 1);
    if (lines != NULL) {
        for (Py_ssize_t k = 0; k < n; k++) lines[k] = -1;
        /* backwards, so that the first range holding a code unit gives its line, as in _line_of */
        for (Py_ssize_t i = count - 1; i >= 0; i--)
            for (long k = ranges[3 * i] < 0 ? 0 : ranges[3 * i]; k < ranges[3 * i + 1]; k++) lines[k] = (int)ranges[3 * i + 2];
    } else if (!PyErr_Occurred()) PyErr_NoMemory();
    PyMem_Free(ranges);
    if (lines == NULL) return NULL;
    Py_INCREF(code);
    Py_XSETREF(e->code, code);
    PyMem_Free(e->lines);
    e->lines = lines;
    e->n = n;
    return e;
}

/* The line of the code unit at byte offset `at` (-1: none, as _line_of's None). */
static int line_at(CodeLines *e, long at) {
    return at >= 0 && at / 2 < e->n ? e->lines[at / 2] : -1;
}

static void clear_code_lines(Capture *c) {
    for (int i = 0; i < JUMP_CODES; i++) {
        Py_CLEAR(c->jump_codes[i].code);
        PyMem_Free(c->jump_codes[i].lines);
        c->jump_codes[i].lines = NULL;
        c->jump_codes[i].n = 0;
    }
}

/* JUMP(code, src, dest): Tracer._m_jump, settrace's line event for a backward jump that stays on
 * one line (a one-line loop), as CPython's legacy tracing gives it; every other jump gets DISABLE
 * and is not reported again. In C because it fires on every turn of such a loop: the Python
 * handler ran a frame and looked the code object up in a dict, and on 3.13 a code object's hash is
 * computed afresh from its bytecode and constants at every lookup (and PyCode_Addr2Line scans the
 * line table from its start at every call). */
static PyObject *cap_m_jump(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Capture *c = (Capture *)self;
    if (nargs != 3 || !PyCode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "jump(code, src, dest)");
        return NULL;
    }
    int off = cap_off(c);
    if (off) return off < 0 ? NULL : (Py_INCREF(Py_None), Py_None);
    long src = PyLong_AsLong(args[1]), dest = PyLong_AsLong(args[2]);
    if (PyErr_Occurred()) return cap_done(c, -1);
    if (dest > src) {
        Py_INCREF(c->disable);
        return c->disable;
    }
    CodeLines *lines = code_lines(c, args[0]);
    if (lines == NULL) return cap_done(c, -1);
    int to_line = line_at(lines, dest);
    if (to_line != line_at(lines, src)) {
        Py_INCREF(c->disable);
        return c->disable;
    }
    if (to_line < 0) Py_RETURN_NONE;
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL) Py_RETURN_NONE;
    PyObject *st = PyDict_GetItemWithError(c->frames, (PyObject *)frame);
    if (st == NULL) return PyErr_Occurred() ? cap_done(c, -1) : (Py_INCREF(Py_None), Py_None);
    PyObject *line = PyLong_FromLong(to_line);
    if (line == NULL) return cap_done(c, -1);
    int r = cap_on_line(c, frame, st, line);
    Py_DECREF(line);
    return cap_done(c, r);
}

/* Capture(tracer, frames, codes, raw, ctx, ser, scope, max_lines, max_events, disable, thread) */
static PyObject *cap_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *tracer, *frames, *codes, *raw, *ctx, *ser, *scope, *disable;
    Py_ssize_t max_lines, max_events;
    unsigned long thread;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!OOnnOk", &tracer, &PyDict_Type, &frames, &PyDict_Type, &codes, &PyList_Type,
                          &raw, &PyTuple_Type, &ctx, &ser, &scope, &max_lines, &max_events, &disable, &thread))
        return NULL;
    Capture *c = (Capture *)type->tp_alloc(type, 0);
    if (c == NULL) return NULL;
    PyObject **slots[] = {&c->tracer, &c->frames, &c->codes, &c->raw, &c->ctx, &c->ser, &c->scope, &c->disable};
    PyObject *vals[] = {tracer, frames, codes, raw, ctx, ser, scope, disable};
    for (int i = 0; i < 8; i++) {
        Py_INCREF(vals[i]);
        *slots[i] = vals[i];
    }
    c->max_lines = max_lines;
    c->max_events = max_events;
    c->thread = thread;
    c->counts = PyList_New(0);
    if (c->counts == NULL) {
        Py_DECREF(c);
        return NULL;
    }
    PyObject *off = PyObject_GetAttr(tracer, S_OFF);
    int is_off = off == NULL ? -1 : PyObject_IsTrue(off);
    Py_XDECREF(off);
    if (is_off < 0) {
        Py_DECREF(c);
        return NULL;
    }
    c->off = (char)is_off;
    return (PyObject *)c;
}

static int cap_traverse(Capture *c, visitproc visit, void *arg) {
    Py_VISIT(c->tracer);
    Py_VISIT(c->counts);
    Py_VISIT(c->frames);
    Py_VISIT(c->codes);
    Py_VISIT(c->raw);
    Py_VISIT(c->ctx);
    Py_VISIT(c->ser);
    Py_VISIT(c->scope);
    Py_VISIT(c->disable);
    for (int i = 0; i < JUMP_CODES; i++) Py_VISIT(c->jump_codes[i].code);
    for (Py_ssize_t i = 0; i < c->infos_size; i++) {
        Py_VISIT(c->infos[i].code);
        Py_VISIT(c->infos[i].info);
    }
    return 0;
}

static int cap_clear(Capture *c) {
    Py_CLEAR(c->tracer);
    Py_CLEAR(c->counts);
    Py_CLEAR(c->frames);
    Py_CLEAR(c->codes);
    Py_CLEAR(c->raw);
    Py_CLEAR(c->ctx);
    Py_CLEAR(c->ser);
    Py_CLEAR(c->scope);
    Py_CLEAR(c->disable);
    clear_code_lines(c);
    clear_infos(c);
    text_cache_clear();
    return 0;
}

static void cap_dealloc(Capture *c) {
    PyObject_GC_UnTrack(c);
    cap_clear(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyMethodDef cap_methods[] = {
    {"line", (PyCFunction)(void (*)(void))cap_m_line, METH_FASTCALL, "sys.monitoring LINE callback"},
    {"start", (PyCFunction)(void (*)(void))cap_m_start, METH_FASTCALL, "sys.monitoring PY_START/PY_RESUME callback"},
    {"ret", (PyCFunction)(void (*)(void))cap_m_return, METH_FASTCALL, "sys.monitoring PY_RETURN/PY_YIELD callback"},
    {"jump", (PyCFunction)(void (*)(void))cap_m_jump, METH_FASTCALL, "sys.monitoring JUMP callback"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef cap_members[] = {
    {"off", T_BOOL, offsetof(Capture, off), 0, "tracer._off, set by Tracer._set_off"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject CaptureType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_worldline_native.Capture",
    .tp_basicsize = sizeof(Capture),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Capture(tracer, frames, codes, raw, ctx, ser, scope, max_lines, max_events, disable, thread)",
    .tp_members = cap_members,
    .tp_new = cap_new,
    .tp_call = cap_call,
    .tp_traverse = (traverseproc)cap_traverse,
    .tp_clear = (inquiry)cap_clear,
    .tp_dealloc = (destructor)cap_dealloc,
    .tp_methods = cap_methods,
};


/* line_locals(pairs, prev, full, unchanged): episodes._line_fields's "locals": every pair in full,
 * or each value replaced by `unchanged` where dict(prev) holds the same text for its name; None
 * when a pair is not a [name, value] list or tuple (the Python path then unpacks it itself). */
static PyObject *line_locals(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "line_locals takes 4 arguments");
        return NULL;
    }
    PyObject *pairs = args[0], *prev = args[1], *unchanged = args[3];
    int full = PyObject_IsTrue(args[2]);
    if (full < 0) return NULL;
    if (!PyList_CheckExact(pairs) || (!full && pairs != prev && !PyList_CheckExact(prev))) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(pairs);
    PyObject *name, *val;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!pair_items(PyList_GET_ITEM(pairs, i), &name, &val)) Py_RETURN_NONE;
    PyObject *before = NULL;
    if (!full && pairs != prev) {
        Py_ssize_t m = PyList_GET_SIZE(prev);
        for (Py_ssize_t i = 0; i < m; i++)
            if (!pair_items(PyList_GET_ITEM(prev, i), &name, &val)) Py_RETURN_NONE;
        before = PyDict_New();
        if (before == NULL) return NULL;
        for (Py_ssize_t i = 0; i < m; i++) {
            pair_items(PyList_GET_ITEM(prev, i), &name, &val);
            if (PyDict_SetItem(before, name, val) < 0) {
                Py_DECREF(before);
                return NULL;
            }
        }
    }
    PyObject *shown = PyList_New(n);
    if (shown == NULL) {
        Py_XDECREF(before);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        pair_items(PyList_GET_ITEM(pairs, i), &name, &val);
        PyObject *text = val;
        if (!full) {
            if (before == NULL) text = unchanged;
            else {
                PyObject *old = PyDict_GetItemWithError(before, name);
                int same = 0;
                if (old == NULL && PyErr_Occurred()) same = -1;
                else same = truth(PyObject_RichCompare(old ? old : Py_None, val, Py_EQ));
                if (same < 0) {
                    Py_DECREF(shown);
                    Py_DECREF(before);
                    return NULL;
                }
                if (same) text = unchanged;
            }
        }
        PyObject *pair = PyList_New(2);
        if (pair == NULL) {
            Py_DECREF(shown);
            Py_XDECREF(before);
            return NULL;
        }
        Py_INCREF(name);
        PyList_SET_ITEM(pair, 0, name);
        Py_INCREF(text);
        PyList_SET_ITEM(pair, 1, text);
        PyList_SET_ITEM(shown, i, pair);
    }
    Py_XDECREF(before);
    return shown;
}


/* Whether the items `obj` yields (a dict's values() where `values`), `limit` at most (-1: all), are
 * the items of `tuple` from *pos on, by identity, as all(map(operator.is_, ...)) over a chain of
 * such iterables sees them: it stops where the tuple runs out (2). 1, 0, or -1 with an error.
 * Exact lists, tuples and dicts are read in place (the same items in the same order as their
 * iterators give, and no Python code runs meanwhile): this check runs for every container local
 * at every event, and the iterator, the bound values() and their frames were most of its cost. */
static int items_are(PyObject *obj, Py_ssize_t limit, int values, PyObject *tuple, Py_ssize_t *pos) {
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyList_Type || t == &PyTuple_Type) {
        if (values) goto generic;
        PyObject **items = t == &PyList_Type ? ((PyListObject *)obj)->ob_item : ((PyTupleObject *)obj)->ob_item;
        Py_ssize_t len = Py_SIZE(obj);
        if (limit >= 0 && limit < len) len = limit;
        for (Py_ssize_t i = 0; i < len; i++) {
            if (*pos >= n) return 2;
            if (items[i] != PyTuple_GET_ITEM(tuple, (*pos)++)) return 0;
        }
        return 1;
    }
    if (t == &PyDict_Type) {
        Py_ssize_t dpos = 0, taken = 0;
        PyObject *k, *v;
        while ((limit < 0 || taken < limit) && PyDict_Next(obj, &dpos, &k, &v)) {
            taken++;
            if (*pos >= n) return 2;
            if ((values ? v : k) != PyTuple_GET_ITEM(tuple, (*pos)++)) return 0;
        }
        return 1;
    }
generic:;
    PyObject *src = values ? PyObject_CallMethodNoArgs(obj, S_VALUES) : obj;
    if (src == NULL) return -1;
    PyObject *it = PyObject_GetIter(src);
    if (values) Py_DECREF(src);
    if (it == NULL) return -1;
    Py_ssize_t taken = 0;
    int ok = 1;
    while (ok && (limit < 0 || taken < limit)) {
        PyObject *item = PyIter_Next(it);
        if (item == NULL) break;
        taken++;
        if (*pos >= n) {  /* the tuple ran out first: zip stops, nothing more is compared */
            Py_DECREF(item);
            ok = 2;
            break;
        }
        ok = item == PyTuple_GET_ITEM(tuple, *pos);
        (*pos)++;
        Py_DECREF(item);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return -1;
    return ok;
}

/* all(map(is_, chain.from_iterable(map(islice, containers, repeat(limit))), tuple)), with
 * `values` taking each dict's values(); 1, 0 or -1. */
static int chain_is(PyObject *containers, Py_ssize_t limit, int values, PyObject *tuple) {
    if (!PyTuple_CheckExact(containers) || !PyTuple_CheckExact(tuple)) {
        PyErr_SetString(PyExc_TypeError, "unchanged: a key that keyed() did not make");
        return -1;
    }
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(containers); i++) {
        int r = items_are(PyTuple_GET_ITEM(containers, i), limit, values, tuple, &pos);
        if (r <= 0) return r;
        if (r == 2) return 1;
    }
    return 1;
}

/* keyed(caps, value[, other]): any_keyed's (text, key), or None where the Python keyed answers (for
 * tests); other: other_repr's tuple (tracer._other_ctx), without it flat containers only. */
static PyObject *keyed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if ((nargs != 2 && nargs != 3) || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != 4
        || (nargs == 3 && args[2] != Py_None && (!PyTuple_CheckExact(args[2]) || PyTuple_GET_SIZE(args[2]) != 10))) {
        PyErr_SetString(PyExc_TypeError, "keyed((max_str, max_int_bits, max_items, max_depth), value[, other])");
        return NULL;
    }
    PyObject *caps = args[0];
    Py_ssize_t max_str = PyLong_AsSsize_t(PyTuple_GET_ITEM(caps, 0)), max_items = PyLong_AsSsize_t(PyTuple_GET_ITEM(caps, 2));
    long max_int_bits = PyLong_AsLong(PyTuple_GET_ITEM(caps, 1)), max_depth = PyLong_AsLong(PyTuple_GET_ITEM(caps, 3));
    if (PyErr_Occurred()) return NULL;
    PyObject *r = any_keyed(args[1], max_str, max_int_bits, max_items, max_depth, nargs == 3 ? args[2] : Py_None);
    if (r == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return r;
}

/* serialize.Serializer.unchanged's checks: 1 (the text still holds), 0, or -1 with an error. */
static int unchanged_of(Py_ssize_t k, PyObject *value, PyObject *key) {
    Py_ssize_t klen = PyTuple_GET_SIZE(key);
    if ((klen != 4 && klen != 10) || PyTuple_GET_ITEM(key, 0) != value) {
        if (klen != 4 && klen != 10) {
            PyErr_SetString(PyExc_TypeError, "unchanged: a key that keyed() did not make");
            return -1;
        }
        return 0;
    }
    int r;
    if (klen == 4) {
        Py_ssize_t n = PyObject_Size(value);
        if (n < 0) return -1;
        Py_ssize_t shown = PyLong_AsSsize_t(PyTuple_GET_ITEM(key, 1));
        if (shown == -1 && PyErr_Occurred()) return -1;
        if ((n <= k ? n : -1) != shown) return 0;
        PyObject *items = PyTuple_GET_ITEM(key, 2), *vals = PyTuple_GET_ITEM(key, 3);
        if (!PyTuple_CheckExact(items) || (vals != Py_None && !PyTuple_CheckExact(vals))) {
            PyErr_SetString(PyExc_TypeError, "unchanged: a key that keyed() did not make");
            return -1;
        }
        Py_ssize_t pos = 0;
        r = items_are(value, -1, 0, items, &pos);
        if (r > 0 && vals != Py_None) {
            pos = 0;
            r = items_are(value, -1, 1, vals, &pos);
        }
        return r < 0 ? -1 : r > 0;
    }
    PyObject *small = PyTuple_GET_ITEM(key, 1), *lens = PyTuple_GET_ITEM(key, 2);
    if (!PyTuple_CheckExact(small) || !PyList_CheckExact(lens)) {
        PyErr_SetString(PyExc_TypeError, "unchanged: a key that keyed() did not make");
        return -1;
    }
    if (PyList_GET_SIZE(lens) != PyTuple_GET_SIZE(small)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(small); i++) {
        Py_ssize_t n = PyObject_Size(PyTuple_GET_ITEM(small, i));
        if (n < 0) return -1;
        PyObject *was = PyList_GET_ITEM(lens, i);
        Py_ssize_t before = PyLong_AsSsize_t(was);
        if (before == -1 && PyErr_Occurred()) return -1;
        if (n != before) return 0;
    }
    r = chain_is(small, -1, 0, PyTuple_GET_ITEM(key, 3));
    if (r == 1 && PyTuple_GET_SIZE(PyTuple_GET_ITEM(key, 4))) r = chain_is(PyTuple_GET_ITEM(key, 4), -1, 1, PyTuple_GET_ITEM(key, 5));
    PyObject *capped = PyTuple_GET_ITEM(key, 6);
    if (r == 1 && PyTuple_GET_SIZE(capped)) {
        for (Py_ssize_t i = 0; r == 1 && i < PyTuple_GET_SIZE(capped); i++) {
            Py_ssize_t n = PyObject_Size(PyTuple_GET_ITEM(capped, i));
            if (n < 0) return -1;
            if (n <= k) r = 0;
        }
        if (r == 1) r = chain_is(capped, k, 0, PyTuple_GET_ITEM(key, 7));
        if (r == 1 && PyTuple_GET_SIZE(PyTuple_GET_ITEM(key, 8))) r = chain_is(PyTuple_GET_ITEM(key, 8), k, 1, PyTuple_GET_ITEM(key, 9));
    }
    if (r < 0) return -1;
    return r;
}

/* unchanged(max_items, value, key): serialize.Serializer.unchanged, the same checks in C. */
static PyObject *unchanged(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "unchanged(max_items, value, key)");
        return NULL;
    }
    Py_ssize_t k = PyLong_AsSsize_t(args[0]);
    if (k == -1 && PyErr_Occurred()) return NULL;
    int r = unchanged_of(k, args[1], args[2]);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

/* configure(action_sep, arg_sep, frame_sep): render.py's separators, set once by native.py. */
static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *a, *r, *f;
    if (!PyArg_ParseTuple(args, "UUU", &a, &r, &f)) return NULL;
    Py_INCREF(a);
    Py_INCREF(r);
    Py_INCREF(f);
    Py_XSETREF(ACTION_SEP, a);
    Py_XSETREF(ARG_SEP, r);
    Py_XSETREF(FRAME_SEP, f);
    Py_RETURN_NONE;
}

/* huge_arenas(keep_bytes): pymalloc's arenas carved from memory marked for transparent huge pages,
 * and its empty arenas kept for reuse. A traced test's records and its episodes' frame texts are
 * pymalloc objects (on h11 about 80 MB at its largest test), and each 4 KiB page of a fresh arena
 * is a page fault the first time it is written: on these VMs about 12 us each, 0.24 s for 80 MB,
 * where a 2 MiB huge page takes one fault for 512 of them (the same 80 MB in 5 ms). pymalloc asks
 * _PyObject_Arena for ARENA_SIZE (1 MiB on 64-bit 3.10+) at a time and gives an arena back when it
 * is empty; the arenas here come from 2 MiB-aligned chunks of CHUNK bytes marked MADV_HUGEPAGE,
 * and an arena given back stays mapped on a free list, reused first: pymalloc sets up what it uses
 * and never relies on zeroed memory (the frame data stack, whose chunks also come from here, sets
 * its slots itself). Free arenas past keep_bytes give their pages back (MADV_DONTNEED) and stay on
 * the list, so the process keeps at most its peak of pymalloc memory mapped and keep_bytes of empty
 * arenas resident. Any other size goes to the allocator that was there. Where the kernel gives no
 * huge pages (transparent_hugepage=never) the pages are 4 KiB as before. Installed once; a later
 * call changes keep_bytes. The free-threaded build (mimalloc) has no arenas: not built there. */
#if !defined(Py_GIL_DISABLED) && SIZEOF_VOID_P == 8 && PY_VERSION_HEX >= 0x030A0000 && defined(MADV_HUGEPAGE)
#define HUGE_ARENAS 1
#define ARENA_BYTES ((size_t)1 << 20)  /* obmalloc.c's ARENA_SIZE with USE_LARGE_ARENAS */
#define HUGE_BYTES ((size_t)2 << 20)
#define CHUNK ((size_t)32 << 20)
static PyObjectArenaAllocator arena_default;
/* pymalloc calls in under its interpreter's GIL, but a subinterpreter with its own GIL (3.12+) has
 * its own pymalloc state and the same _PyObject_Arena: the free list and the chunk are shared */
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static char *chunk_at, *chunk_end;
static uintptr_t *arena_free;  /* free arenas, the most recently freed last; bit 0: its pages were given back */
static Py_ssize_t arena_nfree, arena_capfree, arena_resident, arena_keep;

static void *arena_take(void) {
    if (arena_nfree > 0) {
        uintptr_t a = arena_free[--arena_nfree];
        if (!(a & 1)) arena_resident--;
        return (void *)(a & ~(uintptr_t)1);
    }
    if (chunk_at == chunk_end) {
        char *m = mmap(NULL, CHUNK + HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return NULL;
        char *at = (char *)(((uintptr_t)m + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
        if (at > m) munmap(m, at - m);
        if (at + CHUNK < m + CHUNK + HUGE_BYTES) munmap(at + CHUNK, m + CHUNK + HUGE_BYTES - (at + CHUNK));
        madvise(at, CHUNK, MADV_HUGEPAGE);
        chunk_at = at;
        chunk_end = at + CHUNK;
    }
    void *a = chunk_at;
    chunk_at += ARENA_BYTES;
    return a;
}

static void *arena_alloc(void *ctx, size_t size) {
    if (size != ARENA_BYTES) return arena_default.alloc(arena_default.ctx, size);
    pthread_mutex_lock(&arena_lock);
    void *a = arena_take();
    pthread_mutex_unlock(&arena_lock);
    return a != NULL ? a : arena_default.alloc(arena_default.ctx, size);
}

/* Onto the free list, its pages given back past arena_keep; 0 when there is no room to remember it. */
static int arena_keep_free(void *ptr) {
    if (arena_nfree == arena_capfree) {
        Py_ssize_t cap = arena_capfree ? 2 * arena_capfree : 64;
        uintptr_t *q = realloc(arena_free, sizeof(uintptr_t) * cap);  /* not PyMem: no GIL is asked for */
        if (q == NULL) return 0;
        arena_free = q;
        arena_capfree = cap;
    }
    uintptr_t a = (uintptr_t)ptr;
    if ((Py_ssize_t)((arena_resident + 1) * ARENA_BYTES) > arena_keep) {
        madvise(ptr, ARENA_BYTES, MADV_DONTNEED);
        a |= 1;
    } else
        arena_resident++;
    arena_free[arena_nfree++] = a;
    return 1;
}

static void arena_release(void *ctx, void *ptr, size_t size) {
    int kept = 0;
    if (size == ARENA_BYTES) {
        pthread_mutex_lock(&arena_lock);
        kept = arena_keep_free(ptr);
        pthread_mutex_unlock(&arena_lock);
    }
    if (!kept) arena_default.free(arena_default.ctx, ptr, size);  /* as it would have gone */
}

static PyObject *huge_arenas(PyObject *self, PyObject *arg) {
    Py_ssize_t keep = PyLong_AsSsize_t(arg);
    if (keep == -1 && PyErr_Occurred()) return NULL;
    pthread_mutex_lock(&arena_lock);
    arena_keep = keep < 0 ? 0 : keep;
    pthread_mutex_unlock(&arena_lock);
    if (arena_default.alloc == NULL) {
        PyObjectArenaAllocator ours = {NULL, arena_alloc, arena_release};
        PyObject_GetArenaAllocator(&arena_default);
        PyObject_SetArenaAllocator(&ours);
    }
    Py_RETURN_NONE;
}
#endif

static PyMethodDef methods[] = {
    {"frame_parts", (PyCFunction)(void (*)(void))frame_parts, METH_FASTCALL,
     "frame_parts(sep, pairs, value, function, kind_json, line, source[, with_text]) -> (text, text_json, tail, clean) or None"},
    {"snapshot", (PyCFunction)(void (*)(void))snapshot, METH_FASTCALL,
     "snapshot(ctx, frame, st) -> the frame's locals as [[name, repr], ...] (tracer.Tracer._snapshot)"},
    {"line_locals", (PyCFunction)(void (*)(void))line_locals, METH_FASTCALL,
     "line_locals(pairs, prev, full, unchanged) -> a line frame's locals, or None (episodes._line_fields)"},
    {"keyed", (PyCFunction)(void (*)(void))keyed, METH_FASTCALL,
     "keyed((max_str, max_int_bits, max_items, max_depth), value) -> (text, key) of a flat container, or None"},
    {"unchanged", (PyCFunction)(void (*)(void))unchanged, METH_FASTCALL,
     "unchanged(max_items, value, key) -> bool (serialize.Serializer.unchanged)"},
    {"configure", configure, METH_VARARGS, "configure(action_sep, arg_sep, frame_sep)"},
    {"settrace", cap_settrace, METH_O, "settrace(capture): the calling thread's C trace function"},
#ifdef HUGE_ARENAS
    {"huge_arenas", huge_arenas, METH_O, "huge_arenas(keep_bytes): pymalloc's arenas from huge pages, up to keep_bytes of empty ones kept"},
#endif
#ifdef FAST_LOCALS
    {"fast_locals_check", (PyCFunction)(void (*)(void))fast_locals_check, METH_FASTCALL,
     "fast_locals_check(*frames) -> whether 3.11's or 3.13's fast locals are read directly from now on"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_worldline_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__worldline_native(void) {
    EMPTY = PyUnicode_FromString("");
    LT_BAR = PyUnicode_FromString("<|");
    LT_QUOTE_COLON = PyUnicode_FromString("<\":");
    S_F_LOCALS = PyUnicode_InternFromString("f_locals");
    S_KEYS = PyUnicode_InternFromString("keys");
    S_VALUES = PyUnicode_InternFromString("values");
    S_QUALNAME = PyUnicode_InternFromString("__qualname__");
    S_OFF = PyUnicode_InternFromString("_off");
    S_F_TRACE_LINES = PyUnicode_InternFromString("f_trace_lines");
    S_TRUNCATED = PyUnicode_InternFromString("truncated");
    S_HALT = PyUnicode_InternFromString("_halt");
    S_FAULT = PyUnicode_InternFromString("_fault");
    S_F_TRACE = PyUnicode_InternFromString("f_trace");
    S_NAME = PyUnicode_InternFromString("__name__");
    S_BIT_LENGTH = PyUnicode_InternFromString("bit_length");
    S_DOTS = PyUnicode_InternFromString("...");
    S_COMMA = PyUnicode_InternFromString(", ");
    S_COLON = PyUnicode_InternFromString(": ");
    S_ZERO = PyLong_FromLong(0);
    if (S_BIT_LENGTH == NULL || S_DOTS == NULL || S_COMMA == NULL || S_COLON == NULL || S_ZERO == NULL) return NULL;
    S_EXC_FMT = PyUnicode_FromString("<%s>");
    S_CO_LINES = PyUnicode_InternFromString("co_lines");
    S_OBJ_FMT = PyUnicode_FromString("<%s object>");
    S_ED = PyUnicode_FromString("ed ");
    S_STARTED = PyUnicode_FromString("started");
    S_STOPPED = PyUnicode_FromString("stopped");
    S_THREAD_REPL = PyUnicode_FromString("\\1\\2");
    PyObject *time_mod = PyImport_ImportModule("time");
    PERF_COUNTER = time_mod ? PyObject_GetAttrString(time_mod, "perf_counter") : NULL;
    Py_XDECREF(time_mod);
    if (PERF_COUNTER == NULL) return NULL;
    /* the record kinds: tracer.py's constants are these interned strings (_as_dict tests them with `is`) */
    S_CALL = PyUnicode_InternFromString("call");
    S_LINE = PyUnicode_InternFromString("line");
    S_RETURN = PyUnicode_InternFromString("return");
    S_EXCEPTION = PyUnicode_InternFromString("exception");
    if (EMPTY == NULL || LT_BAR == NULL || LT_QUOTE_COLON == NULL || S_F_LOCALS == NULL || S_KEYS == NULL
        || S_VALUES == NULL || S_QUALNAME == NULL || S_OFF == NULL || S_F_TRACE_LINES == NULL || S_TRUNCATED == NULL || S_HALT == NULL
        || S_FAULT == NULL || S_F_TRACE == NULL || S_NAME == NULL || S_EXC_FMT == NULL || S_CO_LINES == NULL || S_OBJ_FMT == NULL
        || S_ED == NULL || S_STARTED == NULL || S_STOPPED == NULL || S_THREAD_REPL == NULL || S_CALL == NULL
        || S_LINE == NULL || S_RETURN == NULL || S_EXCEPTION == NULL || PyType_Ready(&CaptureType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&CaptureType);
    if (PyModule_AddObject(m, "Capture", (PyObject *)&CaptureType) < 0) {
        Py_DECREF(&CaptureType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
