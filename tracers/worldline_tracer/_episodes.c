/* The episode builder's walk in C, imported as the top-level module _worldline_episodes
 * (build_native.py compiles it beside _worldline_native; episodes.py uses it when both import).
 *
 * cut(raw, ctx, out) is episodes.EpisodeBuilder._cuts + _as_json straight from the tracer's compact
 * records (tracer.py: (kind, (info, depth), line, payload[, flag]), info = (file, qualname,
 * firstlineno, is_gen)), without the per-event dicts: the same nesting into activations, the same
 * order (an activation is always appended below the open path, so the walk's preorder is the order
 * the calls were recorded in), the same rng draws, each (record, full) frame rendered once by
 * _worldline_native.frame_parts and shared, and exactly the JSON EpisodeBuilder._as_json writes.
 * It answers None whenever the Python would take a path this file does not copy (a frame whose
 * text is not "clean", locals frame_parts or line_locals leave to Python, records of another
 * shape); the caller then builds the whole test in Python, which stays the reference.
 *
 * The episodes go straight into `out`, an Episodes object: one buffer holding them joined by ", "
 * (the body of the plugin's JSON array), which the plugin writes as it is through the buffer
 * protocol. Kept from one test to the next, it is written into without a str per episode, a join
 * and fresh pages for each (h11: 231 MB, each byte copied twice more and page-faulted twice).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_buf.h"

/* An ASCII str's bytes (frame_parts and encode_basestring_ascii give only those). */
static int put_ascii(Buf *b, PyObject *s) {
    if (!PyUnicode_IS_ASCII(s)) {
        PyErr_SetString(PyExc_ValueError, "_worldline_episodes: expected ASCII text");
        return -1;
    }
    return buf_put(b, (const char *)PyUnicode_1BYTE_DATA(s), PyUnicode_GET_LENGTH(s));
}

/* A test's episodes, joined by ", " in one buffer: episode i is [start(i), ends[i]). */
typedef struct {
    PyObject_HEAD
    Buf buf;
    Py_ssize_t *ends;
    Py_ssize_t n, cap;
    Py_ssize_t exports;  /* buffer views handed out: the bytes must not move under them */
} Episodes;

static PyTypeObject EpisodesType;

static Py_ssize_t ep_start(Episodes *e, Py_ssize_t i) {
    return i ? e->ends[i - 1] + 2 : 0;
}

static int ep_writable(Episodes *e) {
    if (e->exports) {
        PyErr_SetString(PyExc_BufferError, "Episodes: its bytes are being written");
        return -1;
    }
    return 0;
}

/* The episode just written into e->buf (from its ", ") counted. */
static int ep_push(Episodes *e) {
    if (e->n == e->cap) {
        Py_ssize_t cap = e->cap ? e->cap * 2 : 256;
        Py_ssize_t *q = PyMem_Realloc(e->ends, sizeof(Py_ssize_t) * cap);
        if (q == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        e->ends = q;
        e->cap = cap;
    }
    e->ends[e->n++] = e->buf.n;
    return 0;
}

/* The walk's callables and constants: cut()'s ctx tuple, in this order. */
typedef struct {
    PyObject *func_of;      /* (file, line, function) -> FuncInfo of a def, or None */
    PyObject *lines;        /* SourceIndex._lines: file -> [line with "\n", ...] */
    PyObject *line_of;      /* SourceIndex.line, for a file not in `lines` yet */
    PyObject *context_of;   /* (file, FuncInfo, [(file, FuncInfo)]) -> context JSON, or None */
    PyObject *contexts;     /* its answers by (FuncInfo, callees' FuncInfo...): a FuncInfo is one
                             * function of one file (SourceIndex), so they name the context */
    PyObject *rand;         /* the episode rng's random() */
    PyObject *frame_parts;  /* _worldline_native.frame_parts */
    PyObject *line_locals;  /* _worldline_native.line_locals */
    PyObject *seps;         /* (call, line, return, exception) separators */
    PyObject *kinds_json;   /* the same kinds JSON-encoded */
    PyObject *unchanged;    /* ".." */
    PyObject *header_json;  /* TRACE_CONTEXT_START JSON-escaped, no quotes */
    PyObject *sep_json;     /* FRAME_SEP JSON-escaped, no quotes */
    double step_in;
    long max_depth;         /* -1: any */
    long max_step_depth;
    long max_frames;        /* -1: any */
} Ctx;

enum { K_CALL, K_LINE, K_RETURN, K_EXC };

typedef struct {
    PyObject *text_json, *tail;  /* owned; NULL until made */
    char missing;
} Frame;

typedef struct {
    Py_ssize_t call, ret;        /* record indexes; ret -1 when it never returned */
    Py_ssize_t first, last;      /* its items: a list through Item.next */
    PyObject *func;              /* borrowed from `funcs` (or Py_None); NULL: not asked yet */
} Act;

typedef struct {
    Py_ssize_t val;              /* a record index, or -(activation + 1) */
    Py_ssize_t next;
} Item;

typedef struct {
    long rel;
    Frame *fr;
    char is_line;
} Shown;

typedef struct {
    Ctx *c;
    PyObject *raw;
    Py_ssize_t n;
    char *kind;                  /* per record */
    Frame *frames;               /* 2 per record: [full=0, full=1] */
    Act *acts;
    Py_ssize_t nacts;
    Item *items;
    Py_ssize_t nitems;
    PyObject *funcs;             /* (info, line) -> FuncInfo or None */
    /* the episode under way */
    Shown *shown;
    Py_ssize_t nshown, capshown;
    PyObject *callees;           /* [(file, FuncInfo)] */
    Episodes *out;               /* where the episodes are written */
    int off_path;                /* set: answer None, the Python builds the test */
} Walk;

#define REC(w, i) PyList_GET_ITEM((w)->raw, (i))
#define INFO(rec) PyTuple_GET_ITEM(PyTuple_GET_ITEM((rec), 1), 0)
#define DEPTH(rec) PyTuple_GET_ITEM(PyTuple_GET_ITEM((rec), 1), 1)

static PyObject *S_DEF_LINE, *S_START_LINE, *S_QUALNAME;

/* A record's kind (K_CALL..K_EXC), or -1 for another str. The tracer's kinds are interned strs
 * (tracer.py, _native.c), so they are these objects: compared by identity before their text (h11,
 * 3.11: 468k records, the walk 25M instructions less). */
static PyObject *S_KINDS[4];
static const char *const KIND_NAMES[4] = {"call", "line", "return", "exception"};

static int kind_of(PyObject *k) {
    for (int i = 0; i < 4; i++)
        if (k == S_KINDS[i]) return i;
    for (int i = 0; i < 4; i++)
        if (PyUnicode_CompareWithASCIIString(k, KIND_NAMES[i]) == 0) return i;
    return -1;
}

/* The records' shape, checked once: tuples of 4 or 5 with a known kind and an (info, depth) head. */
static int classify(Walk *w) {
    for (Py_ssize_t i = 0; i < w->n; i++) {
        PyObject *rec = REC(w, i);
        if (!PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) < 4) return 0;
        PyObject *k = PyTuple_GET_ITEM(rec, 0), *head = PyTuple_GET_ITEM(rec, 1);
        if (!PyUnicode_CheckExact(k) || !PyTuple_CheckExact(head) || PyTuple_GET_SIZE(head) != 2
            || !PyLong_CheckExact(PyTuple_GET_ITEM(head, 1)))
            return 0;
        PyObject *info = PyTuple_GET_ITEM(head, 0);
        if (!PyTuple_CheckExact(info) || PyTuple_GET_SIZE(info) < 2 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(info, 0))
            || !PyUnicode_CheckExact(PyTuple_GET_ITEM(info, 1)))
            return 0;
        int kind = kind_of(k);
        if (kind < 0) return 0;
        if ((kind == K_CALL || kind == K_RETURN) && PyTuple_GET_SIZE(rec) != 5) return 0;
        w->kind[i] = (char)kind;
    }
    return 1;
}

static long depth_of(PyObject *rec) {
    return PyLong_AsLong(DEPTH(rec));
}

static int add_item(Walk *w, Py_ssize_t act, Py_ssize_t val) {
    Item *it = &w->items[w->nitems];
    it->val = val;
    it->next = -1;
    Act *a = &w->acts[act];
    if (a->last < 0) a->first = w->nitems;
    else w->items[a->last].next = w->nitems;
    a->last = w->nitems;
    w->nitems++;
    return 0;
}

/* episodes.call_tree over the records. */
static int nest(Walk *w) {
    Py_ssize_t *stack = PyMem_Malloc(sizeof(Py_ssize_t) * (w->n + 1));
    if (stack == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t top = 0;
    for (Py_ssize_t i = 0; i < w->n; i++) {
        long d = depth_of(REC(w, i));
        if (d == -1 && PyErr_Occurred()) {
            PyMem_Free(stack);
            return -1;
        }
        if (d < 0) {
            w->off_path = 1;
            break;
        }
        if (w->kind[i] == K_CALL) {
            if (top > d) top = d;
            Py_ssize_t a = w->nacts++;
            w->acts[a].call = i;
            w->acts[a].ret = -1;
            w->acts[a].first = w->acts[a].last = -1;
            w->acts[a].func = NULL;
            if (top) add_item(w, stack[top - 1], -(a + 1));
            stack[top++] = a;
        } else {
            if (top <= d) continue; /* an orphan: its call was not traced */
            top = d + 1;
            Py_ssize_t a = stack[d];
            if (w->kind[i] == K_RETURN) {
                w->acts[a].ret = i;
                top--;
            } else {
                add_item(w, a, i);
            }
        }
    }
    PyMem_Free(stack);
    return 0;
}

/* EpisodeBuilder._func: the activation's FuncInfo (borrowed), Py_None, or NULL on an error. */
static PyObject *func_of(Walk *w, Py_ssize_t a) {
    Act *act = &w->acts[a];
    if (act->func != NULL) return act->func;
    PyObject *call = REC(w, act->call);
    act->func = Py_None;
    if (act->ret < 0 || PyObject_IsTrue(PyTuple_GET_ITEM(call, 4))) return Py_None;
    PyObject *ret = REC(w, act->ret);
    int capped = PyObject_IsTrue(PyTuple_GET_ITEM(ret, 4));
    if (capped < 0) return NULL;
    if (capped) return Py_None;
    PyObject *info = INFO(call), *line = PyTuple_GET_ITEM(call, 2);
    PyObject *key = PyTuple_Pack(2, info, line);
    if (key == NULL) return NULL;
    PyObject *found = PyDict_GetItemWithError(w->funcs, key);
    if (found == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(key);
            return NULL;
        }
        found = PyObject_CallFunctionObjArgs(w->c->func_of, PyTuple_GET_ITEM(info, 0), line,
                                             PyTuple_GET_ITEM(info, 1), NULL);
        if (found == NULL || PyDict_SetItem(w->funcs, key, found) < 0) {
            Py_XDECREF(found);
            Py_DECREF(key);
            return NULL;
        }
        Py_DECREF(found); /* the dict holds it */
    }
    Py_DECREF(key);
    act->func = found;
    return found;
}

/* SourceIndex.line(file, line) as a new reference. */
static PyObject *source_line(Walk *w, PyObject *file, PyObject *line_obj) {
    PyObject *lines = PyDict_GetItemWithError(w->c->lines, file);
    if (lines == NULL) {
        if (PyErr_Occurred()) return NULL;
        return PyObject_CallFunctionObjArgs(w->c->line_of, file, line_obj, NULL);
    }
    if (!PyList_CheckExact(lines)) return PyObject_CallFunctionObjArgs(w->c->line_of, file, line_obj, NULL);
    long line = PyLong_AsLong(line_obj);
    if (line == -1 && PyErr_Occurred()) return NULL;
    if (line > 0 && line <= PyList_GET_SIZE(lines)) {
        PyObject *s = PyList_GET_ITEM(lines, line - 1);
        Py_INCREF(s);
        return s;
    }
    return PyUnicode_FromStringAndSize("", 0);
}

/* A frame's pieces from frame_parts; off the fast path (None, or not clean) sets off_path. */
static int make_frame(Walk *w, Frame *fr, int kind, PyObject *pairs, PyObject *value, PyObject *function,
                      PyObject *line_obj, PyObject *file) {
    PyObject *source = source_line(w, file, line_obj);
    if (source == NULL) return -1;
    if (!PyUnicode_CheckExact(source)) {
        Py_DECREF(source);
        w->off_path = 1;
        return 0;
    }
    /* with_text False: the walk writes only the escaped text, so the plain one is never built */
    PyObject *args[8] = {PyTuple_GET_ITEM(w->c->seps, kind), pairs, value, function,
                         PyTuple_GET_ITEM(w->c->kinds_json, kind), line_obj, source, Py_False};
    PyObject *parts = PyObject_Vectorcall(w->c->frame_parts, args, 8, NULL);
    fr->missing = PyUnicode_GET_LENGTH(source) == 0;
    Py_DECREF(source);
    if (parts == NULL) return -1;
    if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) != 4 || PyTuple_GET_ITEM(parts, 3) != Py_True) {
        Py_DECREF(parts);
        w->off_path = 1;
        return 0;
    }
    fr->text_json = PyTuple_GET_ITEM(parts, 1);
    fr->tail = PyTuple_GET_ITEM(parts, 2);
    Py_INCREF(fr->text_json);
    Py_INCREF(fr->tail);
    Py_DECREF(parts);
    return 0;
}

static int show(Walk *w, long rel, Frame *fr, int is_line) {
    if (w->nshown == w->capshown) {
        Py_ssize_t cap = w->capshown ? w->capshown * 2 : 256;
        Shown *s = PyMem_Realloc(w->shown, sizeof(Shown) * cap);
        if (s == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        w->shown = s;
        w->capshown = cap;
    }
    w->shown[w->nshown].rel = rel;
    w->shown[w->nshown].fr = fr;
    w->shown[w->nshown].is_line = (char)is_line;
    w->nshown++;
    return 0;
}

static int same_callee(PyObject *file, long start, PyObject *entry) {
    PyObject *f = PyTuple_GET_ITEM(entry, 0);
    PyObject *s = PyObject_GetAttr(PyTuple_GET_ITEM(entry, 1), S_START_LINE);
    if (s == NULL) return -1;
    long st = PyLong_AsLong(s);
    Py_DECREF(s);
    if (st == -1 && PyErr_Occurred()) return -1;
    if (st != start) return 0;
    if (f == file) return 1;
    return PyUnicode_Compare(f, file) == 0;
}

/* EpisodeBuilder._episode's emit(). `seen_entry`: the entry's (file, start line) counts as seen. */
static int emit(Walk *w, Py_ssize_t a, PyObject *info_fn, long rel, PyObject *entry_file, long entry_start) {
    Ctx *c = w->c;
    Act *act = &w->acts[a];
    Py_ssize_t ci = act->call;
    PyObject *call = REC(w, ci), *info = INFO(call);
    PyObject *file = PyTuple_GET_ITEM(info, 0), *function = PyTuple_GET_ITEM(info, 1);
    Frame *fr = &w->frames[2 * ci + 1];
    if (fr->tail == NULL) {
        PyObject *def_line = PyObject_GetAttr(info_fn, S_DEF_LINE);
        if (def_line == NULL) return -1;
        int r = make_frame(w, fr, K_CALL, PyTuple_GET_ITEM(call, 3), Py_None, function, def_line, file);
        Py_DECREF(def_line);
        if (r < 0 || w->off_path) return r;
    }
    if (show(w, rel, fr, 0) < 0) return -1;
    PyObject *prev = PyTuple_GET_ITEM(call, 3);
    int full = 0;
    for (Py_ssize_t k = act->first; k >= 0; k = w->items[k].next) {
        Py_ssize_t v = w->items[k].val;
        if (v < 0) {
            Py_ssize_t b = -v - 1;
            if (rel + 1 > c->max_step_depth) continue;
            PyObject *sub = func_of(w, b);
            if (sub == NULL) return -1;
            if (sub == Py_None) continue;
            PyObject *draw = PyObject_CallNoArgs(c->rand);
            if (draw == NULL) return -1;
            double x = PyFloat_AsDouble(draw);
            Py_DECREF(draw);
            if (x == -1.0 && PyErr_Occurred()) return -1;
            if (!(x < c->step_in)) continue;
            PyObject *sub_file = PyTuple_GET_ITEM(INFO(REC(w, w->acts[b].call)), 0);
            PyObject *s = PyObject_GetAttr(sub, S_START_LINE);
            if (s == NULL) return -1;
            long start = PyLong_AsLong(s);
            Py_DECREF(s);
            if (start == -1 && PyErr_Occurred()) return -1;
            int seen = start == entry_start && (sub_file == entry_file || PyUnicode_Compare(sub_file, entry_file) == 0);
            for (Py_ssize_t j = 0; !seen && j < PyList_GET_SIZE(w->callees); j++) {
                seen = same_callee(sub_file, start, PyList_GET_ITEM(w->callees, j));
                if (seen < 0) return -1;
            }
            if (!seen) {
                PyObject *pair = PyTuple_Pack(2, sub_file, sub);
                if (pair == NULL) return -1;
                int r = PyList_Append(w->callees, pair);
                Py_DECREF(pair);
                if (r < 0) return -1;
            }
            if (emit(w, b, sub, rel + 1, entry_file, entry_start) < 0 || w->off_path) return w->off_path ? 0 : -1;
            full = 1;
            continue;
        }
        PyObject *rec = REC(w, v);
        Frame *f;
        if (w->kind[v] == K_LINE) {
            PyObject *pairs = PyTuple_GET_ITEM(rec, 3);
            f = &w->frames[2 * v + full];
            if (f->tail == NULL) {
                PyObject *args[4] = {pairs, prev, full ? Py_True : Py_False, c->unchanged};
                PyObject *shown = PyObject_Vectorcall(c->line_locals, args, 4, NULL);
                if (shown == NULL) return -1;
                if (shown == Py_None) {
                    Py_DECREF(shown);
                    w->off_path = 1;
                    return 0;
                }
                int r = make_frame(w, f, K_LINE, shown, Py_None, function, PyTuple_GET_ITEM(rec, 2), file);
                Py_DECREF(shown);
                if (r < 0 || w->off_path) return r;
            }
            if (show(w, rel, f, 1) < 0) return -1;
            prev = pairs;
            full = 0;
        } else {
            f = &w->frames[2 * v];
            if (f->tail == NULL) {
                if (make_frame(w, f, w->kind[v], Py_None, PyTuple_GET_ITEM(rec, 3), function,
                               PyTuple_GET_ITEM(rec, 2), file) < 0 || w->off_path)
                    return w->off_path ? 0 : -1;
            }
            if (show(w, rel, f, 0) < 0) return -1;
        }
    }
    Py_ssize_t ri = act->ret;
    PyObject *ret = REC(w, ri);
    fr = &w->frames[2 * ri];
    if (fr->tail == NULL) {
        if (make_frame(w, fr, K_RETURN, Py_None, PyTuple_GET_ITEM(ret, 3), function, PyTuple_GET_ITEM(ret, 2),
                       file) < 0 || w->off_path)
            return w->off_path ? 0 : -1;
    }
    return show(w, rel, fr, 0);
}

static int bump(PyObject *dropped, const char *reason) {
    PyObject *key = PyUnicode_FromString(reason);
    if (key == NULL) return -1;
    PyObject *old = PyDict_GetItemWithError(dropped, key);
    long n = old ? PyLong_AsLong(old) : 0;
    PyObject *v = PyLong_FromLong(n + 1);
    int r = v == NULL ? -1 : PyDict_SetItem(dropped, key, v);
    Py_XDECREF(v);
    Py_DECREF(key);
    return r;
}

/* The episode's context JSON (a new reference; None when the Python must answer), from
 * `contexts` or context_of. */
static PyObject *context_json(Walk *w, PyObject *file, PyObject *fn) {
    Py_ssize_t n = PyList_GET_SIZE(w->callees);
    PyObject *key = PyTuple_New(n + 1);
    if (key == NULL) return NULL;
    Py_INCREF(fn);
    PyTuple_SET_ITEM(key, 0, fn);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *sub = PyTuple_GET_ITEM(PyList_GET_ITEM(w->callees, i), 1);
        Py_INCREF(sub);
        PyTuple_SET_ITEM(key, i + 1, sub);
    }
    PyObject *context = PyDict_GetItemWithError(w->c->contexts, key);
    if (context != NULL) {
        Py_INCREF(context);
    } else if (!PyErr_Occurred()) {
        context = PyObject_CallFunctionObjArgs(w->c->context_of, file, fn, w->callees, NULL);
        if (context != NULL && PyDict_SetItem(w->c->contexts, key, context) < 0) Py_CLEAR(context);
    }
    Py_DECREF(key);
    return context;
}

/* One episode for activation a (FuncInfo fn) appended to w->out, or a drop counted. */
static int episode(Walk *w, Py_ssize_t a, PyObject *fn, PyObject *dropped) {
    Ctx *c = w->c;
    PyObject *call = REC(w, w->acts[a].call), *info = INFO(call);
    PyObject *file = PyTuple_GET_ITEM(info, 0);
    PyObject *s = PyObject_GetAttr(fn, S_START_LINE);
    if (s == NULL) return -1;
    long start = PyLong_AsLong(s);
    Py_DECREF(s);
    if (start == -1 && PyErr_Occurred()) return -1;
    w->nshown = 0;
    if (PyList_SetSlice(w->callees, 0, PyList_GET_SIZE(w->callees), NULL) < 0) return -1;
    if (emit(w, a, fn, 0, file, start) < 0) return -1;
    if (w->off_path) return 0;
    for (Py_ssize_t i = 0; i < w->nshown; i++)
        if (w->shown[i].fr->missing) return bump(dropped, "missing_source");
    if (c->max_frames >= 0 && w->nshown > c->max_frames) return bump(dropped, "too_many_frames");
    PyObject *context = context_json(w, file, fn);
    if (context == NULL) return -1;
    if (context == Py_None || !PyUnicode_CheckExact(context) || PyUnicode_GET_LENGTH(context) < 2) {
        Py_DECREF(context);
        w->off_path = 1;
        return 0;
    }
    /* b is the buffer's header, copied back at the end whatever happens (it may have grown); mark
     * is where this episode began, where the buffer ends again when it is not written */
    Buf *bp = &w->out->buf, b = *bp;
    Py_ssize_t mark = b.n;
    PyObject *def_line = NULL;
    int r = -1;
    long line_events = 0;
    if ((w->out->n && PUT(&b, ", ") < 0) || PUT(&b, "{\"callees\": [") < 0) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(w->callees); i++) {
        PyObject *q = PyObject_GetAttr(PyTuple_GET_ITEM(PyList_GET_ITEM(w->callees, i), 1), S_QUALNAME);
        if (q == NULL) goto done;
        if (!PyUnicode_Check(q)) {  /* json's own conversions: the Python builds the test */
            Py_DECREF(q);
            w->off_path = 1;
            r = 0;
            goto done;
        }
        int e = (i && PUT(&b, ", ") < 0) || buf_json(&b, q, 1) < 0;
        Py_DECREF(q);
        if (e) goto done;
    }
    long long depth = PyLong_AsLongLong(DEPTH(call));
    if (depth == -1 && PyErr_Occurred()) goto done;
    if (PUT(&b, "], \"context\": ") < 0 || put_ascii(&b, context) < 0 || PUT(&b, ", \"depth\": ") < 0
        || buf_long(&b, depth) < 0 || PUT(&b, ", \"file\": ") < 0 || buf_json(&b, file, 1) < 0
        || PUT(&b, ", \"frame_count\": ") < 0 || buf_long(&b, w->nshown) < 0 || PUT(&b, ", \"frames\": [") < 0)
        goto done;
    for (Py_ssize_t i = 0; i < w->nshown; i++) {
        line_events += w->shown[i].is_line;
        if ((i && PUT(&b, ", ") < 0) || PUT(&b, "{\"depth\": ") < 0 || buf_long(&b, w->shown[i].rel) < 0
            || PUT(&b, ", ") < 0 || put_ascii(&b, w->shown[i].fr->tail) < 0)
            goto done;
    }
    def_line = PyObject_GetAttr(fn, S_DEF_LINE);
    if (def_line == NULL) goto done;
    long long dl = PyLong_AsLongLong(def_line);
    if (dl == -1 && PyErr_Occurred()) goto done;
    if (PUT(&b, "], \"function\": ") < 0 || buf_json(&b, PyTuple_GET_ITEM(info, 1), 1) < 0
        || PUT(&b, ", \"line\": ") < 0 || buf_long(&b, dl) < 0 || PUT(&b, ", \"line_events\": ") < 0
        || buf_long(&b, line_events) < 0 || PUT(&b, ", \"text\": \"") < 0 || put_ascii(&b, c->header_json) < 0
        || buf_put(&b, (const char *)PyUnicode_1BYTE_DATA(context) + 1, PyUnicode_GET_LENGTH(context) - 2) < 0
        || put_ascii(&b, c->sep_json) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < w->nshown; i++)
        if (put_ascii(&b, w->shown[i].fr->text_json) < 0) goto done;
    if (PUT(&b, "\"}") < 0) goto done;
    *bp = b;
    r = ep_push(w->out);
done:
    if (r < 0 || w->off_path) b.n = mark;
    *bp = b;
    Py_DECREF(context);
    Py_XDECREF(def_line);
    return r;
}

static int ctx_of(PyObject *t, Ctx *c) {
    /* 18 items: episodes.py of an earlier revision, which passed json's string encoder at 8 (this
     * file escapes its strings itself now); bench:tracer's --baseline runs one against the module
     * the image carries */
    if (!PyTuple_CheckExact(t) || (PyTuple_GET_SIZE(t) != 17 && PyTuple_GET_SIZE(t) != 18)) {
        PyErr_SetString(PyExc_TypeError, "cut: ctx is a tuple of 17");
        return -1;
    }
    PyObject **head = &PyTuple_GET_ITEM(t, 0), **o = head + (PyTuple_GET_SIZE(t) - 17);
    c->func_of = head[0];
    c->lines = head[1];
    c->line_of = head[2];
    c->context_of = head[3];
    c->contexts = head[4];
    c->rand = head[5];
    c->frame_parts = head[6];
    c->line_locals = head[7];
    c->seps = o[8];
    c->kinds_json = o[9];
    c->unchanged = o[10];
    c->header_json = o[11];
    c->sep_json = o[12];
    c->step_in = PyFloat_AsDouble(o[13]);
    c->max_depth = o[14] == Py_None ? -1 : PyLong_AsLong(o[14]);
    c->max_step_depth = PyLong_AsLong(o[15]);
    c->max_frames = o[16] == Py_None ? -1 : PyLong_AsLong(o[16]);
    if (PyErr_Occurred()) return -1;
    if (!PyDict_CheckExact(c->lines) || !PyDict_CheckExact(c->contexts) || !PyTuple_CheckExact(c->seps) || PyTuple_GET_SIZE(c->seps) != 4
        || !PyTuple_CheckExact(c->kinds_json) || PyTuple_GET_SIZE(c->kinds_json) != 4
        || !PyUnicode_IS_ASCII(c->header_json) || !PyUnicode_IS_ASCII(c->sep_json)) {
        PyErr_SetString(PyExc_TypeError, "cut: a ctx item of the wrong type");
        return -1;
    }
    return 0;
}

static PyObject *ep_texts(Episodes *e);

/* cut(raw, ctx, out) -> {drop reason: count}, the episodes written into `out` (an Episodes, emptied
 * first), or None (out left empty): see the top of this file. cut(raw, ctx) -> ([episode JSON],
 * {drop reason: count}) or None, the form episodes.py of an earlier revision asks for (bench:tracer's
 * --baseline runs one against the module the image carries). */
static PyObject *cut(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if ((nargs != 2 && nargs != 3) || !PyList_CheckExact(args[0])
        || (nargs == 3 && !PyObject_TypeCheck(args[2], &EpisodesType))) {
        PyErr_SetString(PyExc_TypeError, "cut(raw: list, ctx: tuple[, out: Episodes])");
        return NULL;
    }
    Ctx c;
    if (ctx_of(args[1], &c) < 0) return NULL;
    Episodes *into = nargs == 3 ? (Episodes *)args[2] : (Episodes *)PyObject_CallNoArgs((PyObject *)&EpisodesType);
    if (into == NULL) return NULL;
    if (nargs == 3) Py_INCREF(into);
    if (ep_writable(into) < 0) {
        Py_DECREF(into);
        return NULL;
    }
    into->n = into->buf.n = 0;
    Walk w = {0};
    w.c = &c;
    w.out = into;
    /* a list the walk holds, so a callback cannot change the records under it */
    w.raw = PyList_GetSlice(args[0], 0, PyList_GET_SIZE(args[0]));
    if (w.raw == NULL) {
        Py_DECREF(into);
        return NULL;
    }
    w.n = PyList_GET_SIZE(w.raw);
    PyObject *result = NULL, *dropped = NULL;
    Py_ssize_t cells = w.n ? w.n : 1;
    w.kind = PyMem_Malloc(cells);
    w.frames = PyMem_Calloc(2 * cells, sizeof(Frame));
    w.acts = PyMem_Malloc(sizeof(Act) * cells);
    w.items = PyMem_Malloc(sizeof(Item) * cells);
    w.funcs = PyDict_New();
    w.callees = PyList_New(0);
    dropped = PyDict_New();
    if (w.kind == NULL || w.frames == NULL || w.acts == NULL || w.items == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (w.funcs == NULL || w.callees == NULL || dropped == NULL) goto done;
    if (!classify(&w)) goto none;
    if (nest(&w) < 0) goto done;
    if (w.off_path) goto none;
    for (Py_ssize_t a = 0; a < w.nacts; a++) {
        if (c.max_depth >= 0) {
            long d = depth_of(REC(&w, w.acts[a].call));
            if (d == -1 && PyErr_Occurred()) goto done;
            if (d > c.max_depth) continue;
        }
        PyObject *fn = func_of(&w, a);
        if (fn == NULL) goto done;
        if (fn == Py_None) continue;
        if (episode(&w, a, fn, dropped) < 0) goto done;
        if (w.off_path) goto none;
    }
    if (nargs == 3) {
        result = dropped;
        Py_INCREF(result);
    } else {
        PyObject *texts = ep_texts(into);
        if (texts != NULL) result = PyTuple_Pack(2, texts, dropped);
        Py_XDECREF(texts);
    }
    goto done;
none:
    into->n = into->buf.n = 0;
    result = Py_None;
    Py_INCREF(result);
done:
    if (result == NULL) into->n = into->buf.n = 0;
    if (w.frames != NULL)
        for (Py_ssize_t i = 0; i < 2 * cells; i++) {
            Py_XDECREF(w.frames[i].text_json);
            Py_XDECREF(w.frames[i].tail);
        }
    PyMem_Free(w.kind);
    PyMem_Free(w.frames);
    PyMem_Free(w.acts);
    PyMem_Free(w.items);
    PyMem_Free(w.shown);
    Py_XDECREF(w.funcs);
    Py_XDECREF(w.callees);
    Py_XDECREF(dropped);
    Py_DECREF(w.raw);
    Py_DECREF(into);
    return result;
}

static PyObject *ep_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Episodes() takes no arguments");
        return NULL;
    }
    Episodes *e = (Episodes *)type->tp_alloc(type, 0);  /* zeroed: no episodes, no memory yet */
    if (e != NULL) e->buf.mapped = 1;  /* a test's whole output: see buf_map */
    return (PyObject *)e;
}

static void ep_dealloc(Episodes *e) {
    buf_free(&e->buf);
    PyMem_Free(e->ends);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static Py_ssize_t ep_len(Episodes *e) {
    return e->n;
}

/* sizes() -> [len(episode i)], what the output caps weigh. */
static PyObject *ep_sizes(Episodes *e, PyObject *unused) {
    PyObject *l = PyList_New(e->n);
    for (Py_ssize_t i = 0; l != NULL && i < e->n; i++) {
        PyObject *v = PyLong_FromSsize_t(e->ends[i] - ep_start(e, i));
        if (v == NULL) Py_CLEAR(l);
        else PyList_SET_ITEM(l, i, v);
    }
    return l;
}

/* texts() -> [episode JSON as str]. */
static PyObject *ep_texts(Episodes *e) {
    PyObject *l = PyList_New(e->n);
    for (Py_ssize_t i = 0; l != NULL && i < e->n; i++) {
        Py_ssize_t s = ep_start(e, i);
        PyObject *t = PyUnicode_New(e->ends[i] - s, 127);
        if (t == NULL) {
            Py_CLEAR(l);
            break;
        }
        memcpy(PyUnicode_1BYTE_DATA(t), e->buf.p + s, e->ends[i] - s);
        PyList_SET_ITEM(l, i, t);
    }
    return l;
}

/* keep(indices): only the episodes at these ascending indices are left, in place (a test's
 * output caps sampled them). */
static PyObject *ep_keep(Episodes *e, PyObject *indices) {
    PyObject *seq = PySequence_Fast(indices, "keep(indices): a sequence of ints");
    if (seq == NULL) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq), prev = -1;
    for (Py_ssize_t j = 0; j < k; j++) {
        Py_ssize_t i = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, j), PyExc_IndexError);
        if (i == -1 && PyErr_Occurred()) goto fail;
        if (i <= prev || i >= e->n) {
            PyErr_SetString(PyExc_IndexError, "keep(indices): ascending indices of its episodes");
            goto fail;
        }
        prev = i;
    }
    if (ep_writable(e) < 0) goto fail;
    Py_ssize_t o = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        Py_ssize_t i = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, j), PyExc_IndexError);
        Py_ssize_t s = ep_start(e, i), len = e->ends[i] - s;  /* ends[< j] are rewritten, ends[i >= j] not yet */
        if (j) {
            memcpy(e->buf.p + o, ", ", 2);
            o += 2;
        }
        memmove(e->buf.p + o, e->buf.p + s, len);
        o += len;
        e->ends[j] = o;
    }
    e->n = k;
    e->buf.n = o;
    Py_DECREF(seq);
    Py_RETURN_NONE;
fail:
    Py_DECREF(seq);
    return NULL;
}

/* body() -> a read-only view of ", ".join(episodes) as ASCII bytes, for os.writev. */
static PyObject *ep_body(Episodes *e, PyObject *unused) {
    return PyMemoryView_FromObject((PyObject *)e);
}

static int ep_getbuffer(Episodes *e, Py_buffer *view, int flags) {
    static char empty[1];
    if (PyBuffer_FillInfo(view, (PyObject *)e, e->buf.p ? e->buf.p : empty, e->buf.n, 1, flags) < 0) return -1;
    e->exports++;
    return 0;
}

static void ep_releasebuffer(Episodes *e, Py_buffer *view) {
    e->exports--;
}

static PyMethodDef ep_methods[] = {
    {"sizes", (PyCFunction)ep_sizes, METH_NOARGS, "sizes() -> [len(episode JSON)]"},
    {"texts", (PyCFunction)(void (*)(void))ep_texts, METH_NOARGS, "texts() -> [episode JSON]"},
    {"keep", (PyCFunction)ep_keep, METH_O, "keep(indices): only these (ascending) are left"},
    {"body", (PyCFunction)ep_body, METH_NOARGS, "body() -> memoryview of ', '.join(episodes) in ASCII"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods ep_as_sequence = {.sq_length = (lenfunc)ep_len};
static PyBufferProcs ep_as_buffer = {(getbufferproc)ep_getbuffer, (releasebufferproc)ep_releasebuffer};

static PyTypeObject EpisodesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_worldline_episodes.Episodes",
    .tp_basicsize = sizeof(Episodes),
    .tp_dealloc = (destructor)ep_dealloc,
    .tp_as_sequence = &ep_as_sequence,
    .tp_as_buffer = &ep_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A test's episodes (JSON) joined by \", \" in one buffer that cut() writes into; kept "
              "across tests, its memory is reused.",
    .tp_methods = ep_methods,
    .tp_new = ep_new,
};

/* join(episodes) -> bytes: sep.join(episodes).encode("ascii") for sep ", ", the JSON array body the
 * plugin of an earlier revision writes (bench:tracer's --baseline runs one against this module). */
static PyObject *join(PyObject *self, PyObject *episodes) {
    if (!PyList_CheckExact(episodes)) {
        PyErr_SetString(PyExc_TypeError, "join(episodes: list of str)");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(episodes), size = n > 1 ? 2 * (n - 1) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(episodes, i);
        if (!PyUnicode_Check(e) || !PyUnicode_IS_ASCII(e)) {
            PyErr_SetString(PyExc_ValueError, "join: an episode that is not ASCII text");
            return NULL;
        }
        size += PyUnicode_GET_LENGTH(e);
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL;
    char *o = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(episodes, i);
        if (i) {
            memcpy(o, ", ", 2);
            o += 2;
        }
        memcpy(o, PyUnicode_1BYTE_DATA(e), PyUnicode_GET_LENGTH(e));
        o += PyUnicode_GET_LENGTH(e);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"cut", (PyCFunction)(void (*)(void))cut, METH_FASTCALL,
     "cut(raw, ctx, out) -> {reason: dropped}, or None (the Python path answers); without out: "
     "([episode JSON], {reason: dropped}) or None"},
    {"join", join, METH_O, "join(episodes) -> ', '.join(episodes).encode('ascii')"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_worldline_episodes", NULL, -1, methods};

PyMODINIT_FUNC PyInit__worldline_episodes(void) {
    S_DEF_LINE = PyUnicode_InternFromString("def_line");
    S_START_LINE = PyUnicode_InternFromString("start_line");
    S_QUALNAME = PyUnicode_InternFromString("qualname");
    if (S_DEF_LINE == NULL || S_START_LINE == NULL || S_QUALNAME == NULL) return NULL;
    for (int i = 0; i < 4; i++)
        if ((S_KINDS[i] = PyUnicode_InternFromString(KIND_NAMES[i])) == NULL) return NULL;
    if (PyType_Ready(&EpisodesType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    Py_INCREF(&EpisodesType);
    if (PyModule_AddObject(m, "Episodes", (PyObject *)&EpisodesType) < 0) {
        Py_DECREF(&EpisodesType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
