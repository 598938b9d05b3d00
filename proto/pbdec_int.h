/*
 * pbdec_int.h - what the files of the protobuf decoder share (proto/pbdec*.c;
 * nothing outside the module includes it).
 *
 * The decoder state, the field reader (next_field and the wire primitives),
 * the tag-byte paths in front of it (TAG1, take_str1, get_id_at), the
 * inlined heap writers (the val.h encoding), KeyValue decoding (dec_kv)
 * and the guards every record passes. The hot readers and writers are
 * static inline here so that each signal's file inlines them as pbdec.c does.
 * pbdec.c: the reader's slow path, errors, AnyValue, resource, scope and the
 * envelopes; pbdec_logs.c, pbdec_traces.c, pbdec_metrics.c: each signal's
 * record decoder.
 */
#ifndef MIRADB_PBDEC_INT_H
#define MIRADB_PBDEC_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "lib/utf8.h"
#include "proto/pbdec.h"

#define WT_VARINT 0
#define WT_I64 1
#define WT_LEN 2
#define WT_I32 5

/*
 * Decoding expands: a 2-byte empty LogRecord becomes a ~140-byte row, an empty
 * exemplar ~50 heap bytes. So that a hostile body cannot make the batch grow
 * far beyond what admission charged for the body, one call may add at most
 * EXPANSION_MAX bytes of rows and heap per body byte, plus EXPANSION_SLACK;
 * beyond that the request is refused (-EPROTO). Real exporters' requests
 * expand by about 2x at most (the captured vectors: 0.9x to 1.6x).
 */
#define EXPANSION_MAX 32
#define EXPANSION_SLACK ((size_t)1 << 20)

/* Blob offsets are u32; checked alongside, as -ENOMEM. */
#define HEAP_SOFT_MAX ((size_t)UINT32_MAX / 2)

#ifdef __GNUC__
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#endif

struct dec {
    struct batch *b;
    const uint8_t *base; /* the body, for error offsets */
    char *err;
    size_t errlen;
    const char *sig;
    size_t row_size; /* of the signal's rows */
    size_t used0;    /* batch_used() when the call began */
    size_t limit;    /* what this call may add */
    int64_t pt_cap;  /* point_guard's bound on rows + heap (pbdec_metrics.c) */
};

/* A read position inside one message. */
struct cur {
    const uint8_t *p;
    const uint8_t *end;
};

/* One field as read off the wire. */
struct fld {
    uint32_t num;
    uint32_t wt;
    const uint8_t *at; /* first byte of the tag */
    uint64_t v;        /* VARINT, I64 and I32 values */
    const uint8_t *p;  /* LEN payload */
    size_t len;
};

/* From the first occurrence of a field to the end of its last one. */
struct range {
    const uint8_t *first;
    const uint8_t *end;
};

/* A one-line reason "<signal>: <what> at offset N" into d->err; returns -EPROTO. */
int pbdec_fail(struct dec *d, const uint8_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "<signal>: <what>" into d->err; returns -ENOMEM. */
int pbdec_fail_nomem(struct dec *d, const char *what);
/* -EPROTO: field |name| arrived with the wrong wire type. */
int pbdec_wrong_wt(struct dec *d, const struct fld *f, const char *name);

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (UNLIKELY(rc_ < 0)) {                                                                   \
            return rc_;                                                                            \
        }                                                                                          \
    } while (0)

#define WANT(f, w, name)                                                                           \
    do {                                                                                           \
        if (UNLIKELY((f).wt != (w))) {                                                             \
            return pbdec_wrong_wt(d, &(f), name);                                                  \
        }                                                                                          \
    } while (0)

/* ---- wire primitives ---- */

static inline uint64_t le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline double u64_to_f64(uint64_t u)
{
    double x;
    memcpy(&x, &u, 8);
    return x;
}

static inline int32_t unzigzag32(uint64_t v)
{
    uint32_t u = (uint32_t)v;
    return (int32_t)((u >> 1) ^ (0u - (u & 1)));
}

/*
 * Reads a varint of at most |max| bytes. 0, or -1 when the input ends
 * first, -2 when it is longer than |max|.
 */
static inline int varint_slow(const uint8_t **pp, const uint8_t *end, int max, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int i = 0; i < max; i++) {
        if (p == end) {
            return -1;
        }
        uint8_t c = *p++;
        v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (c < 0x80) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -2;
}

/*
 * The same loop when |max| bytes are known to be there: one bounds check for
 * the whole varint instead of one per byte. 0, or -2 when longer than |max|.
 */
static inline int varint_unchecked(const uint8_t **pp, int max, uint64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int i = 0; i < max; i++) {
        uint8_t c = p[i];
        v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (c < 0x80) {
            *pp = p + i + 1;
            *out = v;
            return 0;
        }
    }
    return -2;
}

static inline int rd_varint(struct dec *d, const uint8_t **pp, const uint8_t *end, int max,
                            uint64_t *out, const char *what)
{
    const uint8_t *p = *pp;
    if (LIKELY(p < end && *p < 0x80)) {
        *out = *p;
        *pp = p + 1;
        return 0;
    }
    int rc = end - p >= max ? varint_unchecked(pp, max, out) : varint_slow(pp, end, max, out);
    if (UNLIKELY(rc < 0)) {
        return pbdec_fail(d, p, rc == -1 ? "truncated %s" : "%s too long", what);
    }
    return 0;
}

/* next_field for any encoding: 1 and |f| filled; 0 at the end; -EPROTO. */
int pbdec_next_field_slow(struct dec *d, struct cur *c, struct fld *f);

/*
 * The same, inlined for what encoders emit nearly always: a one- or two-byte
 * tag, one- or two-byte lengths, varints with ten bytes of room behind them.
 * Everything else goes the slow way.
 */
static inline __attribute__((always_inline)) int next_field(struct dec *d, struct cur *c,
                                                            struct fld *f)
{
    const uint8_t *p = c->p;
    const uint8_t *end = c->end;

    if (p == end) {
        return 0;
    }
    uint32_t t = *p;
    const uint8_t *q = p + 1;
    if (UNLIKELY(t >= 0x80)) { /* two-byte tags: fields 16..2047 (Span.flags) */
        if (end - p < 2 || p[1] >= 0x80) {
            return pbdec_next_field_slow(d, c, f);
        }
        t = (t & 0x7f) | ((uint32_t)p[1] << 7);
        q = p + 2;
    }
    if (LIKELY(t >= 8)) {
        f->at = p;
        f->num = t >> 3;
        f->wt = t & 7;
        p = q;
        switch (t & 7) {
        case WT_LEN:
            if (LIKELY(p < end && *p < 0x80 && (size_t)*p < (size_t)(end - p))) {
                f->len = *p;
                f->p = p + 1;
                c->p = f->p + f->len;
                return 1;
            }
            /* Two-byte lengths (128..16383): records, bodies. */
            if (LIKELY(end - p >= 2 && p[0] >= 0x80 && p[1] < 0x80)) {
                size_t n = ((size_t)p[1] << 7) | (p[0] & 0x7f);
                if (LIKELY(n <= (size_t)(end - p - 2))) {
                    f->len = n;
                    f->p = p + 2;
                    c->p = f->p + n;
                    return 1;
                }
            }
            break;
        case WT_VARINT:
            if (LIKELY(p < end && *p < 0x80)) {
                f->v = *p;
                c->p = p + 1;
                return 1;
            }
            if (LIKELY(end - p >= 10) && varint_unchecked(&p, 10, &f->v) == 0) {
                c->p = p;
                return 1;
            }
            break;
        case WT_I64:
            if (LIKELY(end - p >= 8)) {
                f->v = le64(p);
                c->p = p + 8;
                return 1;
            }
            break;
        case WT_I32:
            if (LIKELY(end - p >= 4)) {
                f->v = le32(p);
                c->p = p + 4;
                return 1;
            }
            break;
        default:
            break;
        }
    }
    return pbdec_next_field_slow(d, c, f);
}

/*
 * The one-byte tag of field |num| (< 16) with wire type |wt|. The record
 * decoders switch on the tag byte itself before calling next_field: a
 * fixed64 field whose 8 bytes are there is then a load, and a field that
 * arrives with another wire type is another byte, so it takes next_field
 * and the switch on f.num, which checks the type (WANT) and says why.
 */
#define TAG1(num, wt) ((uint8_t)((num) << 3 | (wt)))

static inline void range_add(struct range *r, const struct fld *f, const struct cur *after)
{
    if (r->first == NULL) {
        r->first = f->at;
    }
    r->end = after->p;
}

static inline __attribute__((always_inline)) int get_str(struct dec *d, const struct fld *f,
                                                         const char *name, struct mstr *out)
{
    WANT(*f, WT_LEN, name);
    if (UNLIKELY(!utf8_valid(f->p, f->len))) {
        return pbdec_fail(d, f->at, "invalid UTF-8 in string field %s", name);
    }
    out->p = (const char *)f->p;
    out->len = (uint32_t)f->len;
    return 0;
}

/* Copies a 16- or 8-byte id of |len| bytes at |p|; false (and zeros) for a
 * wrong length or all zeros. */
static inline bool get_id_at(const uint8_t *p, size_t len, uint8_t *dst, size_t n)
{
    if (len == n) {
        uint64_t a, b = 0;
        memcpy(&a, p, 8);
        if (n == 16) {
            memcpy(&b, p + 8, 8);
        }
        if ((a | b) != 0) {
            memcpy(dst, &a, 8);
            if (n == 16) {
                memcpy(dst + 8, &b, 8);
            }
            return true;
        }
    }
    memset(dst, 0, n);
    return false;
}

static inline bool get_id(const struct fld *f, uint8_t *dst, size_t n)
{
    return get_id_at(f->p, f->len, dst, n);
}

/*
 * A string field of one-byte length at |q| (its tag byte), for the tag-byte
 * paths (TAG1): true and |out| set when it is there and valid UTF-8; false
 * leaves it to next_field and get_str, which give a failure its text.
 */
static inline __attribute__((always_inline)) bool take_str1(struct cur *c, const uint8_t *q,
                                                            struct mstr *out)
{
    size_t len = q[1];
    if (q[1] < 0x80 && len <= (size_t)(c->end - q - 2) && utf8_valid(q + 2, len)) {
        out->p = (const char *)(q + 2);
        out->len = (uint32_t)len;
        c->p = q + 2 + len;
        return true;
    }
    return false;
}

/* ---- heap writes: the val.h encoding, inlined for the hot kinds ---- */

static inline int hreserve(struct vbuf *h, size_t n)
{
    if (LIKELY(h->cap - h->len >= n)) {
        return 0;
    }
    return vbuf_reserve(h, n);
}

/* Room must have been reserved. */
static inline __attribute__((always_inline)) void hput_uv(struct vbuf *h, uint64_t v)
{
    uint8_t *q = h->p + h->len;
    while (v >= 0x80) {
        *q++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *q++ = (uint8_t)v;
    h->len = (size_t)(q - h->p);
}

/*
 * Copies a string of fewer than 128 bytes with 8-byte moves and tells
 * whether it was all ASCII (true) from the words it moved anyway: the UTF-8
 * check of an attribute's key and value costs nothing when it is. False
 * means "not known": check it with utf8_valid. Longer than 32 bytes: 16 at
 * a time, the last 16 overlapping what was copied.
 */
static inline __attribute__((always_inline)) bool copy_short_ascii(uint8_t *dst, const uint8_t *src,
                                                                   size_t n)
{
    const uint64_t hi = 0x8080808080808080ull;
    if (n > 32) {
        uint64_t acc = 0, a, b;
        for (size_t i = 0; i + 16 < n; i += 16) {
            memcpy(&a, src + i, 8);
            memcpy(&b, src + i + 8, 8);
            memcpy(dst + i, &a, 8);
            memcpy(dst + i + 8, &b, 8);
            acc |= a | b;
        }
        memcpy(&a, src + n - 16, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst + n - 16, &a, 8);
        memcpy(dst + n - 8, &b, 8);
        return ((acc | a | b) & hi) == 0;
    } else if (n > 16) {
        uint64_t a, b, c, e;
        memcpy(&a, src, 8);
        memcpy(&b, src + 8, 8);
        memcpy(&c, src + n - 16, 8);
        memcpy(&e, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + 8, &b, 8);
        memcpy(dst + n - 16, &c, 8);
        memcpy(dst + n - 8, &e, 8);
        return ((a | b | c | e) & hi) == 0;
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
        return ((a | b) & hi) == 0;
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
        return ((a | b) & 0x80808080u) == 0;
    } else if (n > 0) {
        uint8_t a = src[0], b = src[n / 2], c = src[n - 1];
        dst[0] = a;
        dst[n / 2] = b;
        dst[n - 1] = c;
        return ((a | b | c) & 0x80) == 0;
    }
    return true;
}

/*
 * memcpy for the short strings of attributes: a variable-length memcpy
 * bounded by a small constant is otherwise expanded by the compiler into
 * `rep movsq`, whose start-up alone costs more than the copy. Two
 * overlapping loads and stores for up to 16 bytes, four for up to 32
 * (copy_short_ascii's moves, its ASCII answer unused).
 */
static inline void copy_short(uint8_t *dst, const uint8_t *src, size_t n)
{
    if (n > 32) {
        memcpy(dst, src, n);
    } else {
        (void)copy_short_ascii(dst, src, n);
    }
}

/* uv len + bytes; room must have been reserved. */
static inline void hput_lenbytes(struct vbuf *h, const void *k, size_t n)
{
    hput_uv(h, n);
    copy_short(h->p + h->len, k, n);
    h->len += n;
}

/* A string of fewer than 128 bytes as uv len + bytes (room reserved),
 * checked as UTF-8: false when it is not. */
static inline __attribute__((always_inline)) bool hput_str127(struct vbuf *h, const uint8_t *k,
                                                              size_t n)
{
    h->p[h->len++] = (uint8_t)n;
    bool ascii = copy_short_ascii(h->p + h->len, k, n);
    h->len += n;
    return LIKELY(ascii) || utf8_valid(k, n);
}

/* A key: uv len + bytes. */
static inline int put_key(struct vbuf *h, const void *k, size_t n)
{
    TRY(hreserve(h, 10 + n));
    hput_lenbytes(h, k, n);
    return 0;
}

/* VAL_STR / VAL_BYTES: type, uv len, bytes. */
static inline int put_lenval(struct vbuf *h, enum val_type type, const void *s, size_t n)
{
    TRY(hreserve(h, 11 + n));
    h->p[h->len++] = (uint8_t)type;
    hput_lenbytes(h, s, n);
    return 0;
}

/* Fixed-width little-endian values and raw bytes (vbuf_put_*'s encoding,
 * inlined: a call per exemplar field or bucket count showed in profiles). */
static inline void hput_u64(struct vbuf *h, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(h->p + h->len, &v, 8);
    h->len += 8;
}

static inline int put_u64(struct vbuf *h, uint64_t v)
{
    TRY(hreserve(h, 8));
    hput_u64(h, v);
    return 0;
}

static inline void hput_u32(struct vbuf *h, uint32_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    memcpy(h->p + h->len, &v, 4);
    h->len += 4;
}

static inline int put_u32(struct vbuf *h, uint32_t v)
{
    TRY(hreserve(h, 4));
    hput_u32(h, v);
    return 0;
}

static inline int put_u8(struct vbuf *h, uint8_t v)
{
    TRY(hreserve(h, 1));
    h->p[h->len++] = v;
    return 0;
}

static inline int put_raw(struct vbuf *h, const void *p, size_t n)
{
    TRY(hreserve(h, n));
    if (n != 0) {
        memcpy(h->p + h->len, p, n);
    }
    h->len += n;
    return 0;
}

/* VAL_INT: type, uv zigzag. */
static inline int put_intval(struct vbuf *h, int64_t v)
{
    TRY(hreserve(h, 11));
    h->p[h->len++] = VAL_INT;
    hput_uv(h, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
    return 0;
}

/* VAL_DOUBLE: type, 8 bytes little-endian (as on the wire). */
static inline int put_f64val(struct vbuf *h, uint64_t bits)
{
    TRY(hreserve(h, 9));
    h->p[h->len++] = VAL_DOUBLE;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    bits = __builtin_bswap64(bits);
#endif
    memcpy(h->p + h->len, &bits, 8);
    h->len += 8;
    return 0;
}

/* VAL_BOOL: type, 0 or 1 (val_put_bool, inlined). */
static inline int put_boolval(struct vbuf *h, bool v)
{
    TRY(hreserve(h, 2));
    h->p[h->len++] = VAL_BOOL;
    h->p[h->len++] = v ? 1 : 0;
    return 0;
}

/* ---- AnyValue and key-value lists ---- */

enum av_mode {
    AV_HEAP, /* everything goes into the heap (attribute and nested values) */
    AV_BODY, /* a log body: a string stays a pointer into the request */
};

/* What an AnyValue (possibly occurring several times) has produced so far. */
struct av_state {
    enum val_type type;
    struct mstr str; /* AV_BODY string */
    size_t start;    /* heap offset where the value's encoding begins */
};

/*
 * Decodes one occurrence of an AnyValue at |depth| into |st| (pbdec.c: a
 * member replaces what |st| held, an occurrence without members keeps it).
 */
int pbdec_anyvalue(struct dec *d, const uint8_t *p, size_t n, int depth, enum av_mode mode,
                   struct av_state *st);
/* dec_kv for any encoding of a KeyValue. */
int pbdec_kv_slow(struct dec *d, const uint8_t *p, size_t n, int depth);

/*
 * An AnyValue that is exactly one string, int, double or bool member with
 * one-byte tag and length, as encoders write an attribute value: encoded
 * straight into the heap (room reserved by the caller). 1 when done; 0 for
 * anything else, which pbdec_anyvalue then reads (and checks) the general
 * way; -EPROTO for a string that is not UTF-8.
 */
static inline __attribute__((always_inline)) int dec_scalar(struct dec *d, const uint8_t *v,
                                                            size_t n, struct vbuf *h)
{
    if (n >= 2 && v[0] == 0x0a && (size_t)v[1] == n - 2) { /* string_value */
        h->p[h->len++] = VAL_STR;
        if (UNLIKELY(!hput_str127(h, v + 2, n - 2))) {
            return pbdec_fail(d, v, "invalid UTF-8 in string field string_value");
        }
        return 1;
    }
    if (n >= 2 && v[0] == 0x18) { /* int_value */
        const uint8_t *q = v + 1;
        uint64_t x;
        if (varint_slow(&q, v + n, 10, &x) == 0 && q == v + n) {
            h->p[h->len++] = VAL_INT;
            hput_uv(h, (x << 1) ^ (uint64_t)((int64_t)x >> 63));
            return 1;
        }
        return 0;
    }
    if (n == 9 && v[0] == 0x21) { /* double_value: the wire's 8 LE bytes */
        h->p[h->len++] = VAL_DOUBLE;
        memcpy(h->p + h->len, v + 1, 8);
        h->len += 8;
        return 1;
    }
    if (n == 2 && v[0] == 0x10 && v[1] < 0x80) { /* bool_value */
        h->p[h->len++] = VAL_BOOL;
        h->p[h->len++] = v[1] != 0;
        return 1;
    }
    return 0;
}

/*
 * One KeyValue whose value is at |depth|: appends "key, value" to the heap.
 * Inlined for how every encoder writes one: `1: key` then optionally
 * `2: value`, one-byte lengths, and a scalar value (dec_scalar).
 */
static inline __attribute__((always_inline)) int dec_kv(struct dec *d, const uint8_t *p, size_t n,
                                                        int depth)
{
    struct vbuf *h = &d->b->heap;

    /* Checked here too: a member whose value is absent still sits at |depth|. */
    if (UNLIKELY(depth > VAL_MAX_DEPTH)) {
        return pbdec_fail(d, p, "AnyValue nested deeper than %d levels", VAL_MAX_DEPTH);
    }
    if (LIKELY(n >= 2 && p[0] == 0x0a && p[1] < 0x80 && (size_t)p[1] <= n - 2)) {
        const uint8_t *end = p + n;
        const uint8_t *k = p + 2;
        const uint8_t *q = k + p[1];
        if (q == end || (end - q >= 2 && q[0] == 0x12 && q[1] < 0x80 &&
                         (size_t)q[1] == (size_t)(end - q - 2))) {
            /* The encoding is never longer than the wire form (+ 2 for an
             * absent value), so one reservation covers the whole entry. A
             * failed call leaves the heap to the caller's rollback. */
            TRY(hreserve(h, n + 16));
            /* Written through a local pointer: a byte store through h->p
             * may alias h->len, which the compiler then reloads each time. */
            size_t kl = p[1];
            uint8_t *w = h->p + h->len;
            w[0] = (uint8_t)kl;
            bool ka = copy_short_ascii(w + 1, k, kl);
            w += 1 + kl;
            if (LIKELY(q != end)) {
                /* A string value of one-byte lengths (dec_scalar's first
                 * case), copied here so that one branch checks both. */
                const uint8_t *v = q + 2;
                size_t vn = q[1];
                if (vn >= 2 && v[0] == 0x0a && (size_t)v[1] == vn - 2) {
                    w[0] = VAL_STR;
                    w[1] = (uint8_t)(vn - 2);
                    bool va = copy_short_ascii(w + 2, v + 2, vn - 2);
                    if (UNLIKELY(!(ka && va))) {
                        if (!ka && !utf8_valid(k, kl)) {
                            return pbdec_fail(d, p, "invalid UTF-8 in string field key");
                        }
                        if (!va && !utf8_valid(v + 2, vn - 2)) {
                            return pbdec_fail(d, v, "invalid UTF-8 in string field string_value");
                        }
                    }
                    h->len = (size_t)(w + vn - h->p);
                    return 0;
                }
            }
            if (UNLIKELY(!ka) && !utf8_valid(k, kl)) {
                return pbdec_fail(d, p, "invalid UTF-8 in string field key");
            }
            h->len = (size_t)(w - h->p);
            struct av_state st = {.type = VAL_EMPTY, .start = h->len};
            if (q != end) {
                int r = dec_scalar(d, q + 2, q[1], h);
                if (LIKELY(r != 0)) {
                    return r < 0 ? r : 0;
                }
                TRY(pbdec_anyvalue(d, q + 2, q[1], depth, AV_HEAP, &st));
            }
            if (h->len == st.start) {
                h->p[h->len++] = VAL_EMPTY;
            }
            return 0;
        }
    }
    return pbdec_kv_slow(d, p, n, depth);
}

/*
 * After one attribute (field |num| < 16) was read through next_field, the
 * ones that follow it directly with a one-byte tag and length (as encoders
 * write a list) go straight to dec_kv: next_field would read the same
 * field and WANT would pass it. Stops at anything else and leaves it to
 * next_field.
 */
static inline __attribute__((always_inline)) int dec_attr_run(struct dec *d, struct cur *c,
                                                              uint32_t num, uint32_t *count)
{
    const uint8_t tag = (uint8_t)(num << 3 | WT_LEN);
    const uint8_t *p = c->p;
    const uint8_t *end = c->end;

    while (end - p >= 2 && p[0] == tag && p[1] < 0x80 && (size_t)p[1] <= (size_t)(end - p - 2)) {
        TRY(dec_kv(d, p + 2, p[1], 1));
        (*count)++;
        p += 2 + p[1];
    }
    c->p = p;
    return 0;
}

/* Walks |r| and calls dec_kv on every occurrence of field |num|. */
static inline int dec_attrs_range(struct dec *d, const struct range *r, uint32_t num,
                                  uint32_t *count)
{
    struct cur c = {r->first, r->end};
    struct fld f;
    int rc;

    if (r->first == NULL) {
        return 0;
    }
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num == num) {
            TRY(dec_kv(d, f.p, f.len, 1));
            (*count)++;
            TRY(dec_attr_run(d, &c, num, count));
        }
    }
    return rc;
}

/* Writes a u32 count placeholder and a u32 nbytes placeholder; returns where. */
static inline long put_attr_header(struct vbuf *h)
{
    if (hreserve(h, 8) < 0) {
        return -ENOMEM;
    }
    long at = (long)h->len;
    put_u32(h, 0);
    put_u32(h, 0);
    return at;
}

/* vbuf_patch_u32, inlined (a call per exemplar, event and bucket run). */
static inline void hpatch_u32(struct vbuf *h, size_t at, uint32_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    memcpy(h->p + at, &v, 4);
}

static inline void patch_attr_header(struct vbuf *h, long at, uint32_t count)
{
    hpatch_u32(h, (size_t)at, count);
    hpatch_u32(h, (size_t)at + 4, (uint32_t)(h->len - (size_t)at - 8));
}

/* ---- guards and row bookkeeping, shared by the record decoders ---- */

/* Bytes of rows and heap the batch holds (not its spare capacity). */
static inline size_t batch_used(const struct batch *b, size_t row_size)
{
    return (size_t)b->n_rows * row_size + (size_t)b->n_resources * sizeof(struct res_row) +
           (size_t)b->n_scopes * sizeof(struct scope_row) +
           (size_t)b->n_metrics * sizeof(struct metric_row) + b->heap.len;
}

/* Called before each record (and each event, link, exemplar): see EXPANSION_MAX. */
static inline int heap_guard(struct dec *d, const uint8_t *at)
{
    if (UNLIKELY(batch_used(d->b, d->row_size) - d->used0 > d->limit)) {
        return pbdec_fail(d, at, "request expands to more than %d times its size when decoded",
                          EXPANSION_MAX);
    }
    if (UNLIKELY(d->b->heap.len > HEAP_SOFT_MAX)) {
        return pbdec_fail_nomem(d, "decoded batch larger than 2 GiB");
    }
    return 0;
}

/*
 * The inlined common case of batch_add_log/span/point: a zeroed row of
 * |size| bytes when the rows array has room (it keeps its capacity across
 * batch_reset), else NULL and the caller calls the batch_add_* function.
 */
static inline void *next_row(struct batch *b, size_t size)
{
    if (LIKELY(b->n_rows < b->cap_rows)) {
        void *r = (char *)b->rows + (size_t)b->n_rows++ * size;
#if defined(__SSE2__)
        /* 16-byte stores: GCC turns a memset of a span or log row into
         * `rep stos`, whose start-up costs more than the stores. The rows
         * are multiples of 8 bytes; the last store overlaps when not 16. */
        const __m128i z = _mm_setzero_si128();
        size_t i = 0;
        for (; i + 16 <= size; i += 16) {
            _mm_storeu_si128((__m128i *)(void *)((char *)r + i), z);
        }
        if (i < size) {
            _mm_storeu_si128((__m128i *)(void *)((char *)r + size - 16), z);
        }
#else
        memset(r, 0, size);
#endif
        return r;
    }
    return NULL;
}

static inline void set_attrs(struct attrs *a, size_t start, const struct vbuf *h)
{
    a->blob.off = (uint32_t)start;
    a->blob.len = (uint32_t)(h->len - start);
}

/* ---- the record decoders: one LogRecord, Span or Metric of scope |scope| ---- */

int pbdec_log(struct dec *d, const uint8_t *p, size_t n, uint32_t scope);
int pbdec_span(struct dec *d, const uint8_t *p, size_t n, uint32_t scope);
int pbdec_metric(struct dec *d, const uint8_t *p, size_t n, uint32_t scope);

#endif
