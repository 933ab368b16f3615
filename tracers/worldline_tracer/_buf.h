/* The growable byte buffer both C modules write their text into (_native.c, _episodes.c), and
 * the JSON string escaping they share; included, not linked: each module is its own shared object
 * and keeps these static. */
#ifndef WORLDLINE_BUF_H
#define WORLDLINE_BUF_H
#include <Python.h>
#include <stdint.h>
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

/* Always inlined: most calls put a few literal bytes (PUT), which then are a check and a store
 * or two; as a call, with memcpy's of a size it does not know, buf_put was 6-8% of the C walk's
 * instructions on h11, in each module. */
static inline __attribute__((always_inline)) int buf_put(Buf *b, const char *s, Py_ssize_t n) {
    if (b->n + n > b->cap && buf_grow(b, n) < 0) return -1;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

#define PUT(b, lit) buf_put((b), (lit), (Py_ssize_t)(sizeof(lit) - 1))

/* v in decimal, as repr(int) writes it (a frame's depth and line: snprintf's format parsing cost
 * more than the rest of the number's writing). */
static inline int buf_long(Buf *b, long long v) {
    char num[24], *e = num + sizeof num, *d = e;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--d = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--d = '-';
    return buf_put(b, d, e - d);
}

/* The buffer (ASCII) as a str. */
static inline PyObject *buf_str(Buf *b) {
    PyObject *u = PyUnicode_New(b->n, 127);
    if (u != NULL) memcpy(PyUnicode_1BYTE_DATA(u), b->p, b->n);
    return u;
}

static const char HEX[] = "0123456789abcdef";

static inline char *put_u(char *o, Py_UCS4 c) {
    *o++ = '\\';
    *o++ = 'u';
    *o++ = HEX[(c >> 12) & 0xf];
    *o++ = HEX[(c >> 8) & 0xf];
    *o++ = HEX[(c >> 4) & 0xf];
    *o++ = HEX[c & 0xf];
    return o;
}

/* One character as json.encoder.encode_basestring_ascii writes it, for one that is not printable
 * ASCII other than '\\' and '"' (those are copied as they are). */
static inline char *put_escaped(char *o, Py_UCS4 c) {
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
    return o;
}

static inline int json_plain(Py_UCS4 c) {
    return c >= ' ' && c <= '~' && c != '\\' && c != '"';
}

/* Whether any of the 8 bytes in x needs escaping (below ' ', above '~', '"' or '\\'): bytewise
 * tests on a word ("Bit Twiddling Hacks", determine if a word has a zero byte), exact when no
 * byte does, which is all a run of plain characters needs. */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
static inline uint64_t word_needs_escape(uint64_t x) {
    uint64_t quote = x ^ (ONES * '"'), slash = x ^ (ONES * '\\');
    return (((x - ONES * 0x20) & ~x)                 /* a byte below 0x20 */
            | (((x & ~HIGHS) + ONES) | x)            /* a byte of 0x7f or more */
            | ((quote - ONES) & ~quote)              /* '"' */
            | ((slash - ONES) & ~slash)) & HIGHS;    /* '\\' */
}

/* Where the run of characters that stand for themselves in JSON from s[j] ends (n bytes, one
 * byte a character: Latin-1, of which ASCII), found a word at a time. */
static inline Py_ssize_t plain_run(const unsigned char *s, Py_ssize_t j, Py_ssize_t n) {
    uint64_t x;
    for (; j + 8 <= n; j += 8) {
        memcpy(&x, s + j, 8);
        if (word_needs_escape(x)) break;
    }
    while (j < n && json_plain(s[j])) j++;
    return j;
}

/* n bytes (one byte a character) JSON-escaped into b, without quotes: runs of characters that
 * stand for themselves are copied whole. */
static inline int buf_json_bytes(Buf *b, const unsigned char *s, Py_ssize_t n) {
    if (buf_grow(b, n * 6) < 0) return -1;
    char *o = b->p + b->n;
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t j = plain_run(s, i, n);
        memcpy(o, s + i, j - i);
        o += j - i;
        if (j < n) o = put_escaped(o, s[j++]);
        i = j;
    }
    b->n = o - b->p;
    return 0;
}

/* s (a str) JSON-escaped as json.encoder.encode_basestring_ascii escapes it, with its quotes
 * when `quotes`. */
static inline int buf_json(Buf *b, PyObject *s, int quotes) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    if ((quotes && PUT(b, "\"") < 0)) return -1;
    if (kind == PyUnicode_1BYTE_KIND) {
        if (buf_json_bytes(b, PyUnicode_1BYTE_DATA(s), len) < 0) return -1;
    } else {
        const void *data = PyUnicode_DATA(s);
        if (buf_grow(b, len * 12) < 0) return -1;
        char *o = b->p + b->n;
        for (Py_ssize_t i = 0; i < len; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (json_plain(c)) *o++ = (char)c;
            else o = put_escaped(o, c);
        }
        b->n = o - b->p;
    }
    return quotes ? PUT(b, "\"") : 0;
}

#endif
