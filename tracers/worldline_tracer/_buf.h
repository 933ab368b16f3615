/* The growable byte buffer both C modules write their text into (_native.c, _episodes.c);
 * included, not linked: each module is its own shared object and keeps these static. */
#ifndef WORLDLINE_BUF_H
#define WORLDLINE_BUF_H
#include <Python.h>
#include <string.h>

typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static inline int buf_grow(Buf *b, Py_ssize_t extra) {
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

static inline int buf_put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_grow(b, n) < 0) return -1;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

#define PUT(b, lit) buf_put((b), (lit), (Py_ssize_t)(sizeof(lit) - 1))

#endif
