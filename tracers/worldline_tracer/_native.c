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
#include <string.h>

typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t extra) {
    if (b->n + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 512;
    while (cap < b->n + extra) cap *= 2;
    char *q = PyMem_Realloc(b->p, cap);
    if (q == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = q;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_grow(b, n) < 0) return -1;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

#define PUT(b, lit) buf_put((b), (lit), (Py_ssize_t)(sizeof(lit) - 1))

static const char HEX[] = "0123456789abcdef";

static char *put_u(char *o, Py_UCS4 c) {
    *o++ = '\\';
    *o++ = 'u';
    *o++ = HEX[(c >> 12) & 0xf];
    *o++ = HEX[(c >> 8) & 0xf];
    *o++ = HEX[(c >> 4) & 0xf];
    *o++ = HEX[c & 0xf];
    return o;
}

/* s (a str) JSON-escaped, with quotes when `quotes`. */
static int buf_json(Buf *b, PyObject *s, int quotes) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (buf_grow(b, len * 12 + 2) < 0) return -1;
    char *o = b->p + b->n;
    if (quotes) *o++ = '"';
    for (Py_ssize_t i = 0; i < len; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
            *o++ = (char)c;
            continue;
        }
        switch (c) {
        case '\\': *o++ = '\\'; *o++ = '\\'; break;
        case '"': *o++ = '\\'; *o++ = '"'; break;
        case '\b': *o++ = '\\'; *o++ = 'b'; break;
        case '\f': *o++ = '\\'; *o++ = 'f'; break;
        case '\n': *o++ = '\\'; *o++ = 'n'; break;
        case '\r': *o++ = '\\'; *o++ = 'r'; break;
        case '\t': *o++ = '\\'; *o++ = 't'; break;
        default:
            if (c >= 0x10000) {
                Py_UCS4 v = c - 0x10000;
                o = put_u(o, 0xd800 | ((v >> 10) & 0x3ff));
                c = 0xdc00 | (v & 0x3ff);
            }
            o = put_u(o, c);
        }
    }
    if (quotes) *o++ = '"';
    b->n = o - b->p;
    return 0;
}

/* The buffer (ASCII) as a str. */
static PyObject *buf_str(Buf *b) {
    PyObject *u = PyUnicode_New(b->n, 127);
    if (u != NULL) memcpy(PyUnicode_1BYTE_DATA(u), b->p, b->n);
    return u;
}

static PyObject *ACTION_SEP, *ARG_SEP, *FRAME_SEP, *EMPTY, *LT_BAR, *LT_QUOTE_COLON;

/* '<":' not in text and text.count("<|") == seps */
static int is_clean(PyObject *text, Py_ssize_t seps) {
    Py_ssize_t at = PyUnicode_Find(text, LT_QUOTE_COLON, 0, PY_SSIZE_T_MAX, 1);
    if (at == -2) return -1;
    if (at != -1) return 0;
    Py_ssize_t n = PyUnicode_Count(text, LT_BAR, 0, PY_SSIZE_T_MAX);
    if (n < 0) return -1;
    return n == seps;
}

/* '"function": F, "kind": K, "line": L' (episodes._head) */
static int put_head(Buf *b, PyObject *function, PyObject *kind_json, long long line) {
    char num[32];
    Py_ssize_t k;
    const char *ks = PyUnicode_AsUTF8AndSize(kind_json, &k);
    if (ks == NULL) return -1;
    int m = snprintf(num, sizeof num, "%lld", line);
    if (PUT(b, "\"function\": ") < 0 || buf_json(b, function, 1) < 0 || PUT(b, ", \"kind\": ") < 0
        || buf_put(b, ks, k) < 0 || PUT(b, ", \"line\": ") < 0 || buf_put(b, num, m) < 0)
        return -1;
    return 0;
}

/* A local's [name, repr] pair, when both are exact str; else NULL without an error. */
static int pair_of(PyObject *pair, PyObject **name, PyObject **value) {
    if (PyList_CheckExact(pair) && PyList_GET_SIZE(pair) == 2) {
        *name = PyList_GET_ITEM(pair, 0);
        *value = PyList_GET_ITEM(pair, 1);
    } else if (PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2) {
        *name = PyTuple_GET_ITEM(pair, 0);
        *value = PyTuple_GET_ITEM(pair, 1);
    } else {
        return 0;
    }
    return PyUnicode_CheckExact(*name) && PyUnicode_CheckExact(*value);
}

/* Whether the pairs' names are all different (dict(pairs) keeps them all). */
static int names_distinct(PyObject *pairs) {
    Py_ssize_t n = PyList_GET_SIZE(pairs);
    if (n < 2) return 1;
    PyObject *seen = PySet_New(NULL);
    if (seen == NULL) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name, *value;
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

static PyObject *join5(PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e, PyObject *f) {
    PyObject *parts = f ? PyTuple_Pack(6, a, b, c, d, e, f) : PyTuple_Pack(5, a, b, c, d, e);
    if (parts == NULL) return NULL;
    PyObject *text = PyUnicode_Join(EMPTY, parts);
    Py_DECREF(parts);
    return text;
}

/* frame_parts(sep, pairs, value, function, kind_json, line, source) -> (text, text_json, tail,
 * clean) or None. A call/line frame passes its locals as `pairs` (value None); a return/exception
 * frame passes pairs None and its value. */
static PyObject *frame_parts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "frame_parts takes 7 arguments");
        return NULL;
    }
    PyObject *sep = args[0], *pairs = args[1], *value = args[2], *function = args[3];
    PyObject *kind_json = args[4], *line_obj = args[5], *source = args[6];
    if (!PyUnicode_CheckExact(sep) || !PyUnicode_CheckExact(function) || !PyUnicode_CheckExact(kind_json)
        || !PyLong_CheckExact(line_obj) || !PyUnicode_CheckExact(source))
        Py_RETURN_NONE;
    int overflow = 0;
    long long line = PyLong_AsLongLongAndOverflow(line_obj, &overflow);
    if (overflow) Py_RETURN_NONE;
    if (line == -1 && PyErr_Occurred()) return NULL;

    Buf obj = {0}, tail = {0}, esc = {0};
    PyObject *obj_str = NULL, *text = NULL, *text_json = NULL, *tail_str = NULL, *result = NULL;
    Py_ssize_t seps;
    if (put_head(&tail, function, kind_json, line) < 0) goto done;
    if (pairs != Py_None) {
        if (!PyList_CheckExact(pairs)) goto none;
        Py_ssize_t n = PyList_GET_SIZE(pairs);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *name, *val;
            if (!pair_of(PyList_GET_ITEM(pairs, i), &name, &val)) goto none;
        }
        int distinct = names_distinct(pairs);
        if (distinct < 0) goto done;
        if (!distinct) goto none;
        /* each name and value is escaped once, into the locals object; the frame's "locals"
         * list copies those bytes */
        if (PUT(&obj, "{") < 0 || PUT(&tail, ", \"locals\": [") < 0) goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *name, *val;
            pair_of(PyList_GET_ITEM(pairs, i), &name, &val);
            if (i && PUT(&obj, ", ") < 0) goto done;
            Py_ssize_t n0 = obj.n;
            if (buf_json(&obj, name, 1) < 0) goto done;
            Py_ssize_t n1 = obj.n;
            if (PUT(&obj, ": ") < 0) goto done;
            Py_ssize_t v0 = obj.n;
            if (buf_json(&obj, val, 1) < 0) goto done;
            Py_ssize_t v1 = obj.n;
            if ((i && PUT(&tail, ", ") < 0) || PUT(&tail, "[") < 0 || buf_put(&tail, obj.p + n0, n1 - n0) < 0
                || PUT(&tail, ", ") < 0 || buf_put(&tail, obj.p + v0, v1 - v0) < 0 || PUT(&tail, "]") < 0)
                goto done;
        }
        if (PUT(&obj, "}") < 0 || PUT(&tail, "], \"source\": ") < 0 || buf_json(&tail, source, 1) < 0
            || PUT(&tail, "}") < 0)
            goto done;
        obj_str = buf_str(&obj);
        if (obj_str == NULL) goto done;
        text = join5(sep, obj_str, ACTION_SEP, source, FRAME_SEP, NULL);
        seps = 3;
    } else {
        if (!PyUnicode_CheckExact(value)) goto none;
        if (buf_json(&obj, value, 1) < 0) goto done;
        if (PUT(&tail, ", \"source\": ") < 0 || buf_json(&tail, source, 1) < 0 || PUT(&tail, ", \"value\": ") < 0
            || buf_put(&tail, obj.p, obj.n) < 0 || PUT(&tail, "}") < 0)
            goto done;
        obj_str = buf_str(&obj);
        if (obj_str == NULL) goto done;
        text = join5(sep, ACTION_SEP, source, ARG_SEP, obj_str, FRAME_SEP);
        seps = 4;
    }
    if (text == NULL || buf_json(&esc, text, 0) < 0) goto done;
    int clean = is_clean(text, seps);
    if (clean < 0) goto done;
    text_json = buf_str(&esc);
    tail_str = buf_str(&tail);
    if (text_json == NULL || tail_str == NULL) goto done;
    result = PyTuple_Pack(4, text, text_json, tail_str, clean ? Py_True : Py_False);
    goto done;
none:
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(obj.p);
    PyMem_Free(tail.p);
    PyMem_Free(esc.p);
    Py_XDECREF(obj_str);
    Py_XDECREF(text);
    Py_XDECREF(text_json);
    Py_XDECREF(tail_str);
    return result;
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

static PyMethodDef methods[] = {
    {"frame_parts", (PyCFunction)(void (*)(void))frame_parts, METH_FASTCALL,
     "frame_parts(sep, pairs, value, function, kind_json, line, source) -> (text, text_json, tail, clean) or None"},
    {"configure", configure, METH_VARARGS, "configure(action_sep, arg_sep, frame_sep)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_worldline_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__worldline_native(void) {
    EMPTY = PyUnicode_FromString("");
    LT_BAR = PyUnicode_FromString("<|");
    LT_QUOTE_COLON = PyUnicode_FromString("<\":");
    if (EMPTY == NULL || LT_BAR == NULL || LT_QUOTE_COLON == NULL) return NULL;
    return PyModule_Create(&module);
}
