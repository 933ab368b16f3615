/* The growable byte buffer both C modules write their text into (_native.c, _episodes.c), and
 * the JSON string escaping they share; included, not linked: each module is its own shared object
 * and keeps these static. */
#ifndef WORLDLINE_BUF_H
#define WORLDLINE_BUF_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__linux__) && defined(MADV_HUGEPAGE) && defined(MREMAP_MAYMOVE)
#define BUF_MAPS 1
#else
#define BUF_MAPS 0
#endif

typedef struct {
    char *p;
    Py_ssize_t n, cap;
    int mapped;  /* set: from BUF_MAPPED bytes on, its memory is its own mapping (buf_map) */
} Buf;

/* A buffer that grows to a test's whole output (_episodes.c's Episodes: h11, 66 MB) takes its
 * memory from its own mapping from BUF_MAPPED bytes on, marked for transparent huge pages (the
 * kernel gives them on this advice, as Debian's does) and grown by mremap, which keeps the mark:
 * written 4 KiB at a time, each page of it was a page fault the first time (a third of h11's run's
 * 52k). madvise on malloc's memory split its mapping and malloc's realloc then copied it. Where
 * the advice is refused nothing changes but the faults. */
#define BUF_MAPPED ((Py_ssize_t)2 << 20)
static inline int buf_is_map(const Buf *b) {
    return BUF_MAPS && b->mapped && b->cap >= BUF_MAPPED;
}

static inline char *buf_map(Buf *b, Py_ssize_t cap) {
#if BUF_MAPS
    void *q;
    if (buf_is_map(b)) {
        q = mremap(b->p, b->cap, cap, MREMAP_MAYMOVE);
    } else {
        q = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q != MAP_FAILED) {
            madvise(q, cap, MADV_HUGEPAGE);
            if (b->n) memcpy(q, b->p, b->n);
            PyMem_Free(b->p);
        }
    }
    return q == MAP_FAILED ? NULL : q;
#else
    return NULL;
#endif
}

static inline void buf_free(Buf *b) {
#if BUF_MAPS
    if (buf_is_map(b)) {
        munmap(b->p, b->cap);
        b->p = NULL;
        b->cap = b->n = 0;
        return;
    }
#endif
    PyMem_Free(b->p);
    b->p = NULL;
    b->cap = b->n = 0;
}

static inline int buf_grow(Buf *b, Py_ssize_t extra) {
    if (b->n + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 512;
    while (cap < b->n + extra) cap *= 2;
    char *q = BUF_MAPS && b->mapped && cap >= BUF_MAPPED ? buf_map(b, cap) : PyMem_Realloc(b->p, cap);
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
