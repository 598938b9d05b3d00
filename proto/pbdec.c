/*
 * pbdec.c - hand-written OTLP protobuf decoder (see pbdec.h).
 *
 * Reads an Export{Logs,Trace,Metrics}ServiceRequest straight off the wire
 * into the row model of storage/batch.h. No message tree is built: strings
 * stay pointers into the body, everything that needs encoding is written
 * once into batch->heap with the val.h writers, and nothing is malloc'ed per
 * record (only the batch's arrays and heap grow, geometrically).
 *
 * HOW A MESSAGE IS READ
 * A message's fields may arrive in any order, a repeated field may be split
 * into several runs, and a blob in the heap must be contiguous. So every
 * message is read in one pass that sets the scalar fields and encodes at most
 * ONE repeated field into the heap as it goes (normally the attributes);
 * every other heap-producing field is only remembered as the byte range from
 * its first to its last occurrence, and encoded after the pass by walking that
 * range again and picking that field's occurrences out. Children that become
 * rows of their own (scope_logs, log_records, data points, ...) are deferred
 * the same way, so a resource or scope row is complete before its children
 * name it.
 *
 * PROTOBUF RULES FOLLOWED
 * - Unknown fields with a valid wire type are skipped (reserved numbers too).
 * - Wrong wire type for a known field, wire types 3/4 (groups) and 6/7,
 *   field number 0, truncated varints and fixed values, lengths past the
 *   end, varints longer than 10 bytes (tags and lengths: 5, as protobuf-c)
 *   are -EPROTO with a one-line reason naming the byte offset.
 * - Scalars: the last occurrence wins. Repeated numeric fields accept packed
 *   and unpacked encodings, mixed. A singular sub-message that occurs more
 *   than once is merged (its occurrences are read one after the other into
 *   the same row), as protobuf specifies.
 * - oneof: the last member on the wire wins, whole: a message member that
 *   occurs twice (array_value, Metric.gauge, ...) is replaced, not merged, as
 *   protobuf-c does. A singular AnyValue field occurring twice (body,
 *   KeyValue.value) is merged as protobuf specifies: a later copy with no
 *   member keeps the earlier value (protobuf-c 1.4.1 gets this case wrong or
 *   refuses it). Losing members are still decoded (and so validated), then
 *   their heap bytes / rows are rolled back.
 * - Enum values outside the enum are kept as they are.
 * - `string` fields must be valid UTF-8 (proto3 requires it): anything else is
 *   -EPROTO. `bytes` are not checked.
 * - AnyValue nesting deeper than VAL_MAX_DEPTH (a body or attribute value is
 *   depth 1) is -EPROTO; this is also what bounds the recursion, so a hostile
 *   body cannot exhaust the stack. All other message nesting is fixed by the
 *   schema.
 * - string_value_strindex / key_strindex (profiles only) are read and
 *   ignored: the value becomes empty, the key is whatever `key` says.
 * - trace/span ids of the wrong length or all zero: has_* = false (logs,
 *   exemplars, span parents); span and link ids are then stored as zeros.
 * - Resource.entity_refs is validated and dropped (the row model has no
 *   place for it).
 * - A body that would decode into more than EXPANSION_MAX times its size in
 *   rows and heap (+ 1 MiB) is refused, so hostile input made of tiny
 *   records cannot balloon memory before admission charges the batch.
 *
 * On any error the batch is restored to what it held before the call.
 */
#include "proto/pbdec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/utf8.h"

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

static int fail(struct dec *d, const uint8_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct dec *d, const uint8_t *at, const char *fmt, ...)
{
    if (d->err != NULL && d->errlen > 0) {
        int n = snprintf(d->err, d->errlen, "%s: ", d->sig);
        if (n >= 0 && (size_t)n < d->errlen) {
            va_list ap;
            va_start(ap, fmt);
            int m = vsnprintf(d->err + n, d->errlen - (size_t)n, fmt, ap);
            va_end(ap);
            if (m >= 0 && (size_t)(n + m) < d->errlen) {
                snprintf(d->err + n + m, d->errlen - (size_t)(n + m), " at offset %zu",
                         (size_t)(at - d->base));
            }
        }
    }
    return -EPROTO;
}

static int fail_nomem(struct dec *d, const char *what)
{
    if (d->err != NULL && d->errlen > 0) {
        snprintf(d->err, d->errlen, "%s: %s", d->sig, what);
    }
    return -ENOMEM;
}

static int wrong_wt(struct dec *d, const struct fld *f, const char *name)
{
    return fail(d, f->at, "wrong wire type %u for field %s", f->wt, name);
}

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
            return wrong_wt(d, &(f), name);                                                        \
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
static int varint_slow(const uint8_t **pp, const uint8_t *end, int max, uint64_t *out)
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
        return fail(d, p, rc == -1 ? "truncated %s" : "%s too long", what);
    }
    return 0;
}

/* 1 and |f| filled; 0 at the end of the message; -EPROTO. Any encoding. */
static __attribute__((noinline)) int next_field_slow(struct dec *d, struct cur *c, struct fld *f)
{
    const uint8_t *p = c->p;
    const uint8_t *end = c->end;
    uint64_t tag = 0;

    if (p == end) {
        return 0;
    }
    f->at = p;
    TRY(rd_varint(d, &p, end, 5, &tag, "varint (tag)"));
    if (UNLIKELY(tag > UINT32_MAX)) {
        return fail(d, f->at, "bad tag");
    }
    f->num = (uint32_t)(tag >> 3);
    f->wt = (uint32_t)(tag & 7);
    if (UNLIKELY(f->num == 0)) {
        return fail(d, f->at, "field number 0");
    }
    switch (f->wt) {
    case WT_VARINT:
        TRY(rd_varint(d, &p, end, 10, &f->v, "varint"));
        break;
    case WT_I64:
        if (UNLIKELY(end - p < 8)) {
            return fail(d, f->at, "truncated fixed64 in field %u", f->num);
        }
        f->v = le64(p);
        p += 8;
        break;
    case WT_LEN: {
        uint64_t n = 0;
        TRY(rd_varint(d, &p, end, 5, &n, "varint (length)"));
        if (UNLIKELY(n > (uint64_t)(end - p))) {
            return fail(d, f->at, "bad length %llu in field %u: past the end of the message",
                        (unsigned long long)n, f->num);
        }
        f->p = p;
        f->len = (size_t)n;
        p += n;
        break;
    }
    case WT_I32:
        if (UNLIKELY(end - p < 4)) {
            return fail(d, f->at, "truncated fixed32 in field %u", f->num);
        }
        f->v = le32(p);
        p += 4;
        break;
    case 3:
    case 4:
        return fail(d, f->at, "group wire type %u in field %u", f->wt, f->num);
    default:
        return fail(d, f->at, "unknown wire type %u in field %u", f->wt, f->num);
    }
    c->p = p;
    return 1;
}

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
            return next_field_slow(d, c, f);
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
    return next_field_slow(d, c, f);
}

static inline void range_add(struct range *r, const struct fld *f, const struct cur *after)
{
    if (r->first == NULL) {
        r->first = f->at;
    }
    r->end = after->p;
}

static inline int get_str(struct dec *d, const struct fld *f, const char *name, struct mstr *out)
{
    WANT(*f, WT_LEN, name);
    if (UNLIKELY(!utf8_valid(f->p, f->len))) {
        return fail(d, f->at, "invalid UTF-8 in string field %s", name);
    }
    out->p = (const char *)f->p;
    out->len = (uint32_t)f->len;
    return 0;
}

/* Copies a 16- or 8-byte id; false (and zeros) for a wrong length or all zeros. */
static inline bool get_id(const struct fld *f, uint8_t *dst, size_t n)
{
    if (f->len == n) {
        uint64_t a, b = 0;
        memcpy(&a, f->p, 8);
        if (n == 16) {
            memcpy(&b, f->p + 8, 8);
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

/* ---- heap writes: the val.h encoding, inlined for the hot kinds ---- */

static inline int hreserve(struct vbuf *h, size_t n)
{
    if (LIKELY(h->cap - h->len >= n)) {
        return 0;
    }
    return vbuf_reserve(h, n);
}

/* Room must have been reserved. */
static inline void hput_uv(struct vbuf *h, uint64_t v)
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
 * memcpy for the short strings of attributes: a variable-length memcpy
 * bounded by a small constant is otherwise expanded by the compiler into
 * `rep movsq`, whose start-up alone costs more than the copy. Two
 * overlapping loads and stores for up to 16 bytes, four for up to 32.
 */
static inline void copy_short(uint8_t *dst, const uint8_t *src, size_t n)
{
    if (n > 32) {
        memcpy(dst, src, n);
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
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else if (n > 0) {
        uint8_t a = src[0], b = src[n / 2], c = src[n - 1];
        dst[0] = a;
        dst[n / 2] = b;
        dst[n - 1] = c;
    }
}

/* uv len + bytes; room must have been reserved. */
static inline void hput_lenbytes(struct vbuf *h, const void *k, size_t n)
{
    hput_uv(h, n);
    copy_short(h->p + h->len, k, n);
    h->len += n;
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

static inline int put_u32(struct vbuf *h, uint32_t v)
{
    TRY(hreserve(h, 4));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    memcpy(h->p + h->len, &v, 4);
    h->len += 4;
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

static int dec_kv(struct dec *d, const uint8_t *p, size_t n, int depth);

static int dec_array(struct dec *d, const uint8_t *p, size_t n, int depth);
static int dec_kvlist(struct dec *d, const uint8_t *p, size_t n, int depth);

/*
 * Decodes one occurrence of an AnyValue at |depth| into |st|. A member
 * replaces whatever the state held (heap rolled back to st->start); an
 * occurrence without members leaves it as it was.
 */
static int dec_anyvalue(struct dec *d, const uint8_t *p, size_t n, int depth, enum av_mode mode,
                        struct av_state *st)
{
    if (UNLIKELY(depth > VAL_MAX_DEPTH)) {
        return fail(d, p, "AnyValue nested deeper than %d levels", VAL_MAX_DEPTH);
    }
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1: { /* string_value */
            struct mstr s;
            TRY(get_str(d, &f, "string_value", &s));
            h->len = st->start;
            st->type = VAL_STR;
            if (mode == AV_BODY) {
                st->str = s;
            } else {
                TRY(put_lenval(h, VAL_STR, s.p, s.len));
            }
            break;
        }
        case 2: /* bool_value */
            WANT(f, WT_VARINT, "bool_value");
            h->len = st->start;
            st->type = VAL_BOOL;
            TRY(put_boolval(h, f.v != 0));
            break;
        case 3: /* int_value */
            WANT(f, WT_VARINT, "int_value");
            h->len = st->start;
            st->type = VAL_INT;
            TRY(put_intval(h, (int64_t)f.v));
            break;
        case 4: /* double_value */
            WANT(f, WT_I64, "double_value");
            h->len = st->start;
            st->type = VAL_DOUBLE;
            TRY(put_f64val(h, f.v));
            break;
        case 5: /* array_value */
            WANT(f, WT_LEN, "array_value");
            h->len = st->start;
            st->type = VAL_ARRAY;
            TRY(dec_array(d, f.p, f.len, depth));
            break;
        case 6: /* kvlist_value */
            WANT(f, WT_LEN, "kvlist_value");
            h->len = st->start;
            st->type = VAL_KVLIST;
            TRY(dec_kvlist(d, f.p, f.len, depth));
            break;
        case 7: /* bytes_value */
            WANT(f, WT_LEN, "bytes_value");
            h->len = st->start;
            st->type = VAL_BYTES;
            TRY(put_lenval(h, VAL_BYTES, f.p, f.len));
            break;
        case 8: /* string_value_strindex: profiles only, value is empty */
            WANT(f, WT_VARINT, "string_value_strindex");
            h->len = st->start;
            st->type = VAL_EMPTY;
            break;
        default:
            break;
        }
    }
    return rc;
}

/* ArrayValue of a value at |depth|: its elements are at depth + 1. */
static int dec_array(struct dec *d, const uint8_t *p, size_t n, int depth)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    uint32_t count = 0;
    int rc;

    long at = val_open(h, VAL_ARRAY);
    if (at < 0) {
        return -ENOMEM;
    }
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num == 1) {
            WANT(f, WT_LEN, "values");
            struct av_state es = {.type = VAL_EMPTY, .start = h->len};
            TRY(dec_anyvalue(d, f.p, f.len, depth + 1, AV_HEAP, &es));
            if (h->len == es.start) {
                TRY(val_put_empty(h));
            }
            count++;
        }
    }
    if (rc < 0) {
        return rc;
    }
    val_close(h, at, count);
    return 0;
}

static int dec_kvlist(struct dec *d, const uint8_t *p, size_t n, int depth)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    uint32_t count = 0;
    int rc;

    long at = val_open(h, VAL_KVLIST);
    if (at < 0) {
        return -ENOMEM;
    }
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num == 1) {
            WANT(f, WT_LEN, "values");
            TRY(dec_kv(d, f.p, f.len, depth + 1));
            count++;
        }
    }
    if (rc < 0) {
        return rc;
    }
    val_close(h, at, count);
    return 0;
}

/*
 * An AnyValue that is exactly one string, int, double or bool member with
 * one-byte tag and length, as encoders write an attribute value: encoded
 * straight into the heap (room reserved by the caller). 1 when done; 0 for
 * anything else, which dec_anyvalue then reads (and checks) the general
 * way; -EPROTO for a string that is not UTF-8.
 */
static inline int dec_scalar(struct dec *d, const uint8_t *v, size_t n, struct vbuf *h)
{
    if (n >= 2 && v[0] == 0x0a && (size_t)v[1] == n - 2) { /* string_value */
        if (UNLIKELY(!utf8_valid(v + 2, n - 2))) {
            return fail(d, v, "invalid UTF-8 in string field string_value");
        }
        h->p[h->len++] = VAL_STR;
        hput_lenbytes(h, v + 2, n - 2);
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

/* dec_kv for any encoding of a KeyValue. */
static __attribute__((noinline)) int dec_kv_slow(struct dec *d, const uint8_t *p, size_t n,
                                                 int depth)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct mstr key = {"", 0};
    struct range val = {0};
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            TRY(get_str(d, &f, "key", &key));
            break;
        case 2:
            WANT(f, WT_LEN, "value");
            range_add(&val, &f, &c);
            break;
        case 3: /* key_strindex: profiles only */
            WANT(f, WT_VARINT, "key_strindex");
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    TRY(put_key(h, key.p, key.len));
    struct av_state st = {.type = VAL_EMPTY, .start = h->len};
    if (val.first != NULL) {
        c.p = val.first;
        c.end = val.end;
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num == 2) {
                TRY(dec_anyvalue(d, f.p, f.len, depth, AV_HEAP, &st));
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    if (h->len == st.start) {
        TRY(val_put_empty(h));
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
        return fail(d, p, "AnyValue nested deeper than %d levels", VAL_MAX_DEPTH);
    }
    if (LIKELY(n >= 2 && p[0] == 0x0a && p[1] < 0x80 && (size_t)p[1] <= n - 2)) {
        const uint8_t *end = p + n;
        const uint8_t *k = p + 2;
        const uint8_t *q = k + p[1];
        if (q == end || (end - q >= 2 && q[0] == 0x12 && q[1] < 0x80 &&
                         (size_t)q[1] == (size_t)(end - q - 2))) {
            if (UNLIKELY(!utf8_valid(k, p[1]))) {
                return fail(d, p, "invalid UTF-8 in string field key");
            }
            /* The encoding is never longer than the wire form (+ 2 for an
             * absent value), so one reservation covers the whole entry. */
            TRY(hreserve(h, n + 16));
            hput_lenbytes(h, k, p[1]);
            struct av_state st = {.type = VAL_EMPTY, .start = h->len};
            if (q != end) {
                int r = dec_scalar(d, q + 2, q[1], h);
                if (LIKELY(r != 0)) {
                    return r < 0 ? r : 0;
                }
                TRY(dec_anyvalue(d, q + 2, q[1], depth, AV_HEAP, &st));
            }
            if (h->len == st.start) {
                h->p[h->len++] = VAL_EMPTY;
            }
            return 0;
        }
    }
    return dec_kv_slow(d, p, n, depth);
}

/* Walks |r| and calls dec_kv on every occurrence of field |num|. */
static int dec_attrs_range(struct dec *d, const struct range *r, uint32_t num, uint32_t *count)
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
        }
    }
    return rc;
}

/* Writes a u32 count placeholder and a u32 nbytes placeholder; returns where. */
static long put_attr_header(struct vbuf *h)
{
    if (vbuf_reserve(h, 8) < 0) {
        return -ENOMEM;
    }
    long at = (long)h->len;
    put_u32(h, 0);
    put_u32(h, 0);
    return at;
}

static void patch_attr_header(struct vbuf *h, long at, uint32_t count)
{
    vbuf_patch_u32(h, (size_t)at, count);
    vbuf_patch_u32(h, (size_t)at + 4, (uint32_t)(h->len - (size_t)at - 8));
}

/* ---- resource and scope ---- */

static int dec_entity_ref(struct dec *d, const uint8_t *p, size_t n)
{
    static const char *const names[] = {NULL, "schema_url", "type", "id_keys", "description_keys"};
    struct cur c = {p, p + n};
    struct fld f;
    struct mstr s;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num >= 1 && f.num <= 4) {
            TRY(get_str(d, &f, names[f.num], &s));
        }
    }
    return rc;
}

/* One occurrence of Resource; attributes are appended to the heap. */
static int dec_resource(struct dec *d, const uint8_t *p, size_t n, uint32_t *nattrs,
                        uint32_t *dropped)
{
    struct cur c = {p, p + n};
    struct fld f;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            (*nattrs)++;
            break;
        case 2:
            WANT(f, WT_VARINT, "dropped_attributes_count");
            *dropped = (uint32_t)f.v;
            break;
        case 3:
            WANT(f, WT_LEN, "entity_refs");
            TRY(dec_entity_ref(d, f.p, f.len));
            break;
        default:
            break;
        }
    }
    return rc;
}

/* One occurrence of InstrumentationScope; attributes are appended to the heap. */
static int dec_scope(struct dec *d, const uint8_t *p, size_t n, struct scope_row *sr)
{
    struct cur c = {p, p + n};
    struct fld f;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            TRY(get_str(d, &f, "name", &sr->name));
            break;
        case 2:
            TRY(get_str(d, &f, "version", &sr->version));
            break;
        case 3:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            sr->attrs.count++;
            break;
        case 4:
            WANT(f, WT_VARINT, "dropped_attributes_count");
            sr->dropped_attrs = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    return rc;
}

/* ---- per signal: the item decoders ---- */

typedef int (*item_fn)(struct dec *d, const uint8_t *p, size_t n, uint32_t scope);

struct shape {
    const char *resources; /* ExportXServiceRequest field 1 */
    const char *scopes;    /* ResourceX field 2 */
    const char *items;     /* ScopeX field 2 */
    item_fn item;
};

/* Bytes of rows and heap the batch holds (not its spare capacity). */
static size_t batch_used(const struct batch *b, size_t row_size)
{
    return (size_t)b->n_rows * row_size + (size_t)b->n_resources * sizeof(struct res_row) +
           (size_t)b->n_scopes * sizeof(struct scope_row) +
           (size_t)b->n_metrics * sizeof(struct metric_row) + b->heap.len;
}

/* Called before each record (and each event, link, exemplar): see EXPANSION_MAX. */
static int heap_guard(struct dec *d, const uint8_t *at)
{
    if (UNLIKELY(batch_used(d->b, d->row_size) - d->used0 > d->limit)) {
        return fail(d, at, "request expands to more than %d times its size when decoded",
                    EXPANSION_MAX);
    }
    if (UNLIKELY(d->b->heap.len > HEAP_SOFT_MAX)) {
        return fail_nomem(d, "decoded batch larger than 2 GiB");
    }
    return 0;
}

/* -- logs -- */

static int dec_log(struct dec *d, const uint8_t *p, size_t n, uint32_t scope)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range body = {0};
    const uint8_t *bp = NULL; /* the last body occurrence, and how many */
    size_t bn = 0;
    uint32_t nbody = 0;
    int rc;

    TRY(heap_guard(d, p));
    struct log_row *r = batch_add_log(d->b);
    if (r == NULL) {
        return -ENOMEM;
    }
    r->scope = scope;
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_I64, "time_unix_nano");
            r->time_ns = f.v;
            break;
        case 2:
            WANT(f, WT_VARINT, "severity_number");
            r->severity_number = (int32_t)f.v;
            break;
        case 3:
            TRY(get_str(d, &f, "severity_text", &r->severity_text));
            break;
        case 5:
            WANT(f, WT_LEN, "body");
            range_add(&body, &f, &c);
            bp = f.p;
            bn = f.len;
            nbody++;
            break;
        case 6:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            r->attrs.count++;
            break;
        case 7:
            WANT(f, WT_VARINT, "dropped_attributes_count");
            r->dropped_attrs = (uint32_t)f.v;
            break;
        case 8:
            WANT(f, WT_I32, "flags");
            r->flags = (uint32_t)f.v;
            break;
        case 9:
            WANT(f, WT_LEN, "trace_id");
            r->has_trace_id = get_id(&f, r->trace_id, 16);
            break;
        case 10:
            WANT(f, WT_LEN, "span_id");
            r->has_span_id = get_id(&f, r->span_id, 8);
            break;
        case 11:
            WANT(f, WT_I64, "observed_time_unix_nano");
            r->observed_ns = f.v;
            break;
        case 12:
            TRY(get_str(d, &f, "event_name", &r->event_name));
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    r->attrs.blob.off = (uint32_t)astart;
    r->attrs.blob.len = (uint32_t)(h->len - astart);

    struct av_state st = {.type = VAL_EMPTY, .start = h->len};
    /* The usual body, one AnyValue that is exactly a string_value (one- or
     * two-byte length), is taken as it is; anything else the general way. */
    size_t sl = SIZE_MAX, hl = 0;
    if (nbody == 1 && bn >= 2 && bp[0] == 0x0a) {
        if (bp[1] < 0x80) {
            sl = bp[1];
            hl = 2;
        } else if (bn >= 3 && bp[2] < 0x80) {
            sl = ((size_t)bp[2] << 7) | (bp[1] & 0x7f);
            hl = 3;
        }
    }
    if (sl != SIZE_MAX && hl + sl == bn) {
        if (UNLIKELY(!utf8_valid(bp + hl, sl))) {
            return fail(d, bp, "invalid UTF-8 in string field string_value");
        }
        st.type = VAL_STR;
        st.str.p = (const char *)(bp + hl);
        st.str.len = (uint32_t)sl;
    } else if (body.first != NULL) {
        c.p = body.first;
        c.end = body.end;
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num == 5) {
                TRY(dec_anyvalue(d, f.p, f.len, 1, AV_BODY, &st));
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    r->body_type = st.type;
    if (st.type == VAL_STR) {
        r->body_str = st.str;
        r->body_val.off = (uint32_t)st.start;
    } else if (st.type != VAL_EMPTY) {
        r->body_val.off = (uint32_t)st.start;
        r->body_val.len = (uint32_t)(h->len - st.start);
    } else {
        h->len = st.start; /* a strindex body leaves nothing behind */
        r->body_val.off = (uint32_t)st.start;
    }
    return 0;
}

/* -- traces -- */

static int dec_status(struct dec *d, const uint8_t *p, size_t n, struct span_row *r)
{
    struct cur c = {p, p + n};
    struct fld f;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 2:
            TRY(get_str(d, &f, "status.message", &r->status_message));
            break;
        case 3:
            WANT(f, WT_VARINT, "status.code");
            r->status_code = (int32_t)f.v;
            break;
        default:
            break;
        }
    }
    return rc;
}

/* events blob entry: u64 time, uv+name, u32 dropped, u32 count, u32 nbytes, attrs */
static int dec_event(struct dec *d, const uint8_t *p, size_t n)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range attrs = {0};
    uint64_t time_ns = 0;
    struct mstr name = {"", 0};
    uint32_t dropped = 0, count = 0;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_I64, "event.time_unix_nano");
            time_ns = f.v;
            break;
        case 2:
            TRY(get_str(d, &f, "event.name", &name));
            break;
        case 3:
            WANT(f, WT_LEN, "event.attributes");
            range_add(&attrs, &f, &c);
            break;
        case 4:
            WANT(f, WT_VARINT, "event.dropped_attributes_count");
            dropped = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    TRY(put_u64(h, time_ns));
    TRY(put_key(h, name.p, name.len));
    TRY(put_u32(h, dropped));
    long at = put_attr_header(h);
    if (at < 0) {
        return -ENOMEM;
    }
    TRY(dec_attrs_range(d, &attrs, 3, &count));
    patch_attr_header(h, at, count);
    return 0;
}

/* links blob entry: 16 trace_id, 8 span_id, uv+trace_state, u32 flags,
 * u32 dropped, u32 count, u32 nbytes, attrs */
static int dec_link(struct dec *d, const uint8_t *p, size_t n)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range attrs = {0};
    uint8_t ids[24] = {0};
    struct mstr state = {"", 0};
    uint32_t flags = 0, dropped = 0, count = 0;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "link.trace_id");
            get_id(&f, ids, 16);
            break;
        case 2:
            WANT(f, WT_LEN, "link.span_id");
            get_id(&f, ids + 16, 8);
            break;
        case 3:
            TRY(get_str(d, &f, "link.trace_state", &state));
            break;
        case 4:
            WANT(f, WT_LEN, "link.attributes");
            range_add(&attrs, &f, &c);
            break;
        case 5:
            WANT(f, WT_VARINT, "link.dropped_attributes_count");
            dropped = (uint32_t)f.v;
            break;
        case 6:
            WANT(f, WT_I32, "link.flags");
            flags = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    TRY(put_raw(h, ids, sizeof(ids)));
    TRY(put_key(h, state.p, state.len));
    TRY(put_u32(h, flags));
    TRY(put_u32(h, dropped));
    long at = put_attr_header(h);
    if (at < 0) {
        return -ENOMEM;
    }
    TRY(dec_attrs_range(d, &attrs, 4, &count));
    patch_attr_header(h, at, count);
    return 0;
}

static int dec_span(struct dec *d, const uint8_t *p, size_t n, uint32_t scope)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range events = {0}, links = {0};
    int rc;

    TRY(heap_guard(d, p));
    struct span_row *r = batch_add_span(d->b);
    if (r == NULL) {
        return -ENOMEM;
    }
    r->scope = scope;
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "trace_id");
            get_id(&f, r->trace_id, 16);
            break;
        case 2:
            WANT(f, WT_LEN, "span_id");
            get_id(&f, r->span_id, 8);
            break;
        case 3:
            TRY(get_str(d, &f, "trace_state", &r->trace_state));
            break;
        case 4:
            WANT(f, WT_LEN, "parent_span_id");
            r->has_parent = get_id(&f, r->parent_span_id, 8);
            break;
        case 5:
            TRY(get_str(d, &f, "name", &r->name));
            break;
        case 6:
            WANT(f, WT_VARINT, "kind");
            r->kind = (int32_t)f.v;
            break;
        case 7:
            WANT(f, WT_I64, "start_time_unix_nano");
            r->start_ns = f.v;
            break;
        case 8:
            WANT(f, WT_I64, "end_time_unix_nano");
            r->end_ns = f.v;
            break;
        case 9:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            r->attrs.count++;
            break;
        case 10:
            WANT(f, WT_VARINT, "dropped_attributes_count");
            r->dropped_attrs = (uint32_t)f.v;
            break;
        case 11:
            WANT(f, WT_LEN, "events");
            range_add(&events, &f, &c);
            break;
        case 12:
            WANT(f, WT_VARINT, "dropped_events_count");
            r->dropped_events = (uint32_t)f.v;
            break;
        case 13:
            WANT(f, WT_LEN, "links");
            range_add(&links, &f, &c);
            break;
        case 14:
            WANT(f, WT_VARINT, "dropped_links_count");
            r->dropped_links = (uint32_t)f.v;
            break;
        case 15:
            WANT(f, WT_LEN, "status");
            TRY(dec_status(d, f.p, f.len, r));
            break;
        case 16:
            WANT(f, WT_I32, "flags");
            r->flags = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    r->attrs.blob.off = (uint32_t)astart;
    r->attrs.blob.len = (uint32_t)(h->len - astart);

    r->events.off = (uint32_t)h->len;
    if (events.first != NULL) {
        c.p = events.first;
        c.end = events.end;
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num == 11) {
                TRY(heap_guard(d, f.at));
                TRY(dec_event(d, f.p, f.len));
                r->n_events++;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    r->events.len = (uint32_t)(h->len - r->events.off);

    r->links.off = (uint32_t)h->len;
    if (links.first != NULL) {
        c.p = links.first;
        c.end = links.end;
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num == 13) {
                TRY(heap_guard(d, f.at));
                TRY(dec_link(d, f.p, f.len));
                r->n_links++;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    r->links.len = (uint32_t)(h->len - r->links.off);
    return 0;
}

/* -- metrics -- */

/* exemplars blob entry: u64 time, u8 point_value, 8 value bytes, u8 has_trace_id,
 * 16 trace_id, u8 has_span_id, 8 span_id, u32 count, u32 nbytes, attrs */
static int dec_exemplar(struct dec *d, const uint8_t *p, size_t n)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range attrs = {0};
    uint64_t time_ns = 0, value = 0;
    uint8_t pv = PV_NONE;
    uint8_t trace[16] = {0}, span[8] = {0};
    bool has_trace = false, has_span = false;
    uint32_t count = 0;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 2:
            WANT(f, WT_I64, "exemplar.time_unix_nano");
            time_ns = f.v;
            break;
        case 3:
            WANT(f, WT_I64, "exemplar.as_double");
            pv = PV_DOUBLE;
            value = f.v;
            break;
        case 4:
            WANT(f, WT_LEN, "exemplar.span_id");
            has_span = get_id(&f, span, 8);
            break;
        case 5:
            WANT(f, WT_LEN, "exemplar.trace_id");
            has_trace = get_id(&f, trace, 16);
            break;
        case 6:
            WANT(f, WT_I64, "exemplar.as_int");
            pv = PV_INT;
            value = f.v;
            break;
        case 7:
            WANT(f, WT_LEN, "exemplar.filtered_attributes");
            range_add(&attrs, &f, &c);
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    TRY(vbuf_reserve(h, 8 + 1 + 8 + 1 + 16 + 1 + 8));
    put_u64(h, time_ns);
    put_u8(h, pv);
    put_u64(h, value);
    put_u8(h, has_trace);
    put_raw(h, trace, 16);
    put_u8(h, has_span);
    put_raw(h, span, 8);
    long at = put_attr_header(h);
    if (at < 0) {
        return -ENOMEM;
    }
    TRY(dec_attrs_range(d, &attrs, 7, &count));
    patch_attr_header(h, at, count);
    return 0;
}

static int dec_exemplars(struct dec *d, const struct range *r, uint32_t num, struct point_row *pt)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {r->first, r->end};
    struct fld f;
    int rc = 0;

    pt->exemplars.off = (uint32_t)h->len;
    if (r->first != NULL) {
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num == num) {
                TRY(heap_guard(d, f.at));
                TRY(dec_exemplar(d, f.p, f.len));
                pt->n_exemplars++;
            }
        }
    }
    pt->exemplars.len = (uint32_t)(h->len - pt->exemplars.off);
    return rc;
}

/* Checks a repeated fixed64/double occurrence: one I64 value or a packed run. */
static int check_rep64(struct dec *d, const struct fld *f, const char *name)
{
    if (f->wt == WT_LEN) {
        if (UNLIKELY(f->len % 8 != 0)) {
            return fail(d, f->at, "packed %s length %zu is not a multiple of 8", name, f->len);
        }
        return 0;
    }
    WANT(*f, WT_I64, name);
    return 0;
}

/* u32 n, then n 8-byte values from every occurrence of |num| in |r|. */
static int put_rep64(struct dec *d, const struct range *r, uint32_t num)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {r->first, r->end};
    struct fld f;
    uint32_t count = 0;
    int rc = 0;

    size_t at = h->len;
    TRY(put_u32(h, 0));
    if (r->first != NULL) {
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num != num) {
                continue;
            }
            if (f.wt == WT_LEN) {
                /* Wire and blob are both little-endian 8-byte values. */
                TRY(put_raw(h, f.p, f.len));
                count += (uint32_t)(f.len / 8);
            } else {
                TRY(put_u64(h, f.v));
                count++;
            }
        }
    }
    vbuf_patch_u32(h, at, count);
    return rc;
}

/* Buckets: u32 offset, u32 n, n x u64 (merged over every occurrence of |num|). */
static int put_buckets(struct dec *d, const struct range *r, uint32_t num)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {r->first, r->end};
    struct fld f, g;
    int32_t offset = 0;
    uint32_t count = 0;
    int rc = 0;

    size_t at = h->len;
    TRY(put_u32(h, 0));
    TRY(put_u32(h, 0));
    if (r->first != NULL) {
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num != num) {
                continue;
            }
            struct cur bc = {f.p, f.p + f.len};
            while ((rc = next_field(d, &bc, &g)) > 0) {
                if (g.num == 1) {
                    WANT(g, WT_VARINT, "buckets.offset");
                    offset = unzigzag32(g.v);
                } else if (g.num == 2) {
                    if (g.wt == WT_VARINT) {
                        TRY(put_u64(h, g.v));
                        count++;
                        continue;
                    }
                    WANT(g, WT_LEN, "buckets.bucket_counts");
                    const uint8_t *q = g.p, *qend = g.p + g.len;
                    TRY(vbuf_reserve(h, g.len * 8));
                    while (q < qend) {
                        uint64_t v = 0;
                        TRY(rd_varint(d, &q, qend, 10, &v, "packed varint (bucket_counts)"));
                        hput_u64(h, v);
                        count++;
                    }
                }
            }
            if (rc < 0) {
                return rc;
            }
        }
    }
    vbuf_patch_u32(h, at, (uint32_t)offset);
    vbuf_patch_u32(h, at + 4, count);
    return rc;
}

/* Summary: u32 n, n x (f64 quantile, f64 value). */
static int put_quantiles(struct dec *d, const struct range *r)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {r->first, r->end};
    struct fld f, g;
    uint32_t count = 0;
    int rc = 0;

    size_t at = h->len;
    TRY(put_u32(h, 0));
    if (r->first != NULL) {
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num != 6) {
                continue;
            }
            uint64_t q = 0, v = 0;
            struct cur qc = {f.p, f.p + f.len};
            while ((rc = next_field(d, &qc, &g)) > 0) {
                if (g.num == 1) {
                    WANT(g, WT_I64, "quantile");
                    q = g.v;
                } else if (g.num == 2) {
                    WANT(g, WT_I64, "value");
                    v = g.v;
                }
            }
            if (rc < 0) {
                return rc;
            }
            TRY(put_u64(h, q));
            TRY(put_u64(h, v));
            count++;
        }
    }
    vbuf_patch_u32(h, at, count);
    return rc;
}

static int new_point(struct dec *d, const uint8_t *at, uint32_t metric, struct point_row **out)
{
    TRY(heap_guard(d, at));
    struct point_row *pt = batch_add_point(d->b);
    if (pt == NULL) {
        return -ENOMEM;
    }
    pt->metric = metric;
    *out = pt;
    return 0;
}

static void set_attrs(struct attrs *a, size_t start, const struct vbuf *h)
{
    a->blob.off = (uint32_t)start;
    a->blob.len = (uint32_t)(h->len - start);
}

static int dec_number_point(struct dec *d, const uint8_t *p, size_t n, uint32_t metric)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range ex = {0};
    int rc;

    struct point_row *pt;
    TRY(new_point(d, p, metric, &pt));
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 2:
            WANT(f, WT_I64, "start_time_unix_nano");
            pt->start_ns = f.v;
            break;
        case 3:
            WANT(f, WT_I64, "time_unix_nano");
            pt->time_ns = f.v;
            break;
        case 4:
            WANT(f, WT_I64, "as_double");
            pt->value_type = PV_DOUBLE;
            pt->value.d = u64_to_f64(f.v);
            break;
        case 5:
            WANT(f, WT_LEN, "exemplars");
            range_add(&ex, &f, &c);
            break;
        case 6:
            WANT(f, WT_I64, "as_int");
            pt->value_type = PV_INT;
            pt->value.i = (int64_t)f.v;
            break;
        case 7:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            pt->attrs.count++;
            break;
        case 8:
            WANT(f, WT_VARINT, "flags");
            pt->flags = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&pt->attrs, astart, h);
    pt->detail.off = (uint32_t)h->len;
    return dec_exemplars(d, &ex, 5, pt);
}

static int dec_histogram_point(struct dec *d, const uint8_t *p, size_t n, uint32_t metric)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range ex = {0}, counts = {0}, bounds = {0};
    int rc;

    struct point_row *pt;
    TRY(new_point(d, p, metric, &pt));
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 2:
            WANT(f, WT_I64, "start_time_unix_nano");
            pt->start_ns = f.v;
            break;
        case 3:
            WANT(f, WT_I64, "time_unix_nano");
            pt->time_ns = f.v;
            break;
        case 4:
            WANT(f, WT_I64, "count");
            pt->count = f.v;
            break;
        case 5:
            WANT(f, WT_I64, "sum");
            pt->has_sum = true;
            pt->sum = u64_to_f64(f.v);
            break;
        case 6:
            TRY(check_rep64(d, &f, "bucket_counts"));
            range_add(&counts, &f, &c);
            break;
        case 7:
            TRY(check_rep64(d, &f, "explicit_bounds"));
            range_add(&bounds, &f, &c);
            break;
        case 8:
            WANT(f, WT_LEN, "exemplars");
            range_add(&ex, &f, &c);
            break;
        case 9:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            pt->attrs.count++;
            break;
        case 10:
            WANT(f, WT_VARINT, "flags");
            pt->flags = (uint32_t)f.v;
            break;
        case 11:
            WANT(f, WT_I64, "min");
            pt->has_min = true;
            pt->min = u64_to_f64(f.v);
            break;
        case 12:
            WANT(f, WT_I64, "max");
            pt->has_max = true;
            pt->max = u64_to_f64(f.v);
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&pt->attrs, astart, h);
    size_t dstart = h->len;
    TRY(put_rep64(d, &counts, 6));
    TRY(put_rep64(d, &bounds, 7));
    pt->detail.off = (uint32_t)dstart;
    pt->detail.len = (uint32_t)(h->len - dstart);
    return dec_exemplars(d, &ex, 8, pt);
}

static int dec_exp_histogram_point(struct dec *d, const uint8_t *p, size_t n, uint32_t metric)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range ex = {0}, pos = {0}, neg = {0};
    int32_t scale = 0;
    uint64_t zero_count = 0, zero_threshold = 0;
    int rc;

    struct point_row *pt;
    TRY(new_point(d, p, metric, &pt));
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            pt->attrs.count++;
            break;
        case 2:
            WANT(f, WT_I64, "start_time_unix_nano");
            pt->start_ns = f.v;
            break;
        case 3:
            WANT(f, WT_I64, "time_unix_nano");
            pt->time_ns = f.v;
            break;
        case 4:
            WANT(f, WT_I64, "count");
            pt->count = f.v;
            break;
        case 5:
            WANT(f, WT_I64, "sum");
            pt->has_sum = true;
            pt->sum = u64_to_f64(f.v);
            break;
        case 6:
            WANT(f, WT_VARINT, "scale");
            scale = unzigzag32(f.v);
            break;
        case 7:
            WANT(f, WT_I64, "zero_count");
            zero_count = f.v;
            break;
        case 8:
            WANT(f, WT_LEN, "positive");
            range_add(&pos, &f, &c);
            break;
        case 9:
            WANT(f, WT_LEN, "negative");
            range_add(&neg, &f, &c);
            break;
        case 10:
            WANT(f, WT_VARINT, "flags");
            pt->flags = (uint32_t)f.v;
            break;
        case 11:
            WANT(f, WT_LEN, "exemplars");
            range_add(&ex, &f, &c);
            break;
        case 12:
            WANT(f, WT_I64, "min");
            pt->has_min = true;
            pt->min = u64_to_f64(f.v);
            break;
        case 13:
            WANT(f, WT_I64, "max");
            pt->has_max = true;
            pt->max = u64_to_f64(f.v);
            break;
        case 14:
            WANT(f, WT_I64, "zero_threshold");
            zero_threshold = f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&pt->attrs, astart, h);
    size_t dstart = h->len;
    TRY(put_u32(h, (uint32_t)scale));
    TRY(put_u64(h, zero_count));
    TRY(put_u64(h, zero_threshold));
    TRY(put_buckets(d, &pos, 8));
    TRY(put_buckets(d, &neg, 9));
    pt->detail.off = (uint32_t)dstart;
    pt->detail.len = (uint32_t)(h->len - dstart);
    return dec_exemplars(d, &ex, 11, pt);
}

static int dec_summary_point(struct dec *d, const uint8_t *p, size_t n, uint32_t metric)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range qs = {0};
    int rc;

    struct point_row *pt;
    TRY(new_point(d, p, metric, &pt));
    pt->has_sum = true;
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 2:
            WANT(f, WT_I64, "start_time_unix_nano");
            pt->start_ns = f.v;
            break;
        case 3:
            WANT(f, WT_I64, "time_unix_nano");
            pt->time_ns = f.v;
            break;
        case 4:
            WANT(f, WT_I64, "count");
            pt->count = f.v;
            break;
        case 5:
            WANT(f, WT_I64, "sum");
            pt->sum = u64_to_f64(f.v);
            break;
        case 6:
            WANT(f, WT_LEN, "quantile_values");
            range_add(&qs, &f, &c);
            break;
        case 7:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            pt->attrs.count++;
            break;
        case 8:
            WANT(f, WT_VARINT, "flags");
            pt->flags = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&pt->attrs, astart, h);
    size_t dstart = h->len;
    TRY(put_quantiles(d, &qs));
    pt->detail.off = (uint32_t)dstart;
    pt->detail.len = (uint32_t)(h->len - dstart);
    pt->exemplars.off = (uint32_t)h->len;
    return 0;
}

/* Gauge / Sum / Histogram / ExponentialHistogram / Summary of metric |mi|. */
static int dec_metric_data(struct dec *d, enum metric_kind kind, const uint8_t *p, size_t n,
                           uint32_t mi)
{
    struct cur c = {p, p + n};
    struct fld f;
    struct range dps = {0};
    struct metric_row *m = &d->b->metrics[mi];
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "data_points");
            range_add(&dps, &f, &c);
            break;
        case 2:
            if (kind == MK_SUM || kind == MK_HISTOGRAM || kind == MK_EXP_HISTOGRAM) {
                WANT(f, WT_VARINT, "aggregation_temporality");
                m->temporality = (int32_t)f.v;
            }
            break;
        case 3:
            if (kind == MK_SUM) {
                WANT(f, WT_VARINT, "is_monotonic");
                m->monotonic = f.v != 0;
            }
            break;
        default:
            break;
        }
    }
    if (rc < 0 || dps.first == NULL) {
        return rc;
    }
    c.p = dps.first;
    c.end = dps.end;
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num != 1) {
            continue;
        }
        switch (kind) {
        case MK_GAUGE:
        case MK_SUM:
            TRY(dec_number_point(d, f.p, f.len, mi));
            break;
        case MK_HISTOGRAM:
            TRY(dec_histogram_point(d, f.p, f.len, mi));
            break;
        case MK_EXP_HISTOGRAM:
            TRY(dec_exp_histogram_point(d, f.p, f.len, mi));
            break;
        case MK_SUMMARY:
            TRY(dec_summary_point(d, f.p, f.len, mi));
            break;
        case MK_NONE:
            break;
        }
    }
    return rc;
}

static enum metric_kind data_kind(uint32_t num)
{
    switch (num) {
    case 5:
        return MK_GAUGE;
    case 7:
        return MK_SUM;
    case 9:
        return MK_HISTOGRAM;
    case 10:
        return MK_EXP_HISTOGRAM;
    case 11:
        return MK_SUMMARY;
    }
    return MK_NONE;
}

static int dec_metric(struct dec *d, const uint8_t *p, size_t n, uint32_t scope)
{
    struct batch *b = d->b;
    struct vbuf *h = &b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range data = {0};
    int rc;

    TRY(heap_guard(d, p));
    uint32_t mi = b->n_metrics;
    struct metric_row *m = batch_add_metric(b);
    if (m == NULL) {
        return -ENOMEM;
    }
    m->scope = scope;
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            TRY(get_str(d, &f, "name", &m->name));
            break;
        case 2:
            TRY(get_str(d, &f, "description", &m->description));
            break;
        case 3:
            TRY(get_str(d, &f, "unit", &m->unit));
            break;
        case 5:
        case 7:
        case 9:
        case 10:
        case 11:
            WANT(f, WT_LEN, "data");
            range_add(&data, &f, &c);
            break;
        case 12:
            WANT(f, WT_LEN, "metadata");
            TRY(dec_kv(d, f.p, f.len, 1));
            m->metadata.count++;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&m->metadata, astart, h);
    if (data.first == NULL) {
        return 0;
    }
    /* oneof data: every member is decoded (and so checked), the last one
     * stays; an earlier member's points and heap bytes are rolled back. */
    uint32_t rows0 = b->n_rows;
    size_t heap0 = h->len;
    c.p = data.first;
    c.end = data.end;
    while ((rc = next_field(d, &c, &f)) > 0) {
        enum metric_kind kind = data_kind(f.num);
        if (kind == MK_NONE) {
            continue;
        }
        b->n_rows = rows0;
        h->len = heap0;
        m = &b->metrics[mi];
        m->kind = kind;
        m->temporality = 0;
        m->monotonic = false;
        TRY(dec_metric_data(d, kind, f.p, f.len, mi));
    }
    return rc;
}

/* ---- envelopes, shared by the three signals ---- */

/* ScopeX in two passes: the scope row first, then the items (any field order). */
static int dec_scope_x2(struct dec *d, const struct shape *sh, const uint8_t *p, size_t n,
                        uint32_t ri)
{
    struct batch *b = d->b;
    struct vbuf *h = &b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range items = {0};
    int rc;

    TRY(heap_guard(d, p));
    uint32_t si = b->n_scopes;
    struct scope_row *sr = batch_add_scope(b);
    if (sr == NULL) {
        return -ENOMEM;
    }
    sr->resource = ri;
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "scope");
            TRY(dec_scope(d, f.p, f.len, sr));
            break;
        case 2:
            WANT(f, WT_LEN, sh->items);
            range_add(&items, &f, &c);
            break;
        case 3:
            TRY(get_str(d, &f, "schema_url", &sr->schema_url));
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&sr->attrs, astart, h);
    if (items.first == NULL) {
        return 0;
    }
    c.p = items.first;
    c.end = items.end;
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num == 2) {
            TRY(sh->item(d, f.p, f.len, si));
        }
    }
    return rc;
}

/*
 * ScopeX in one pass, for the field order every encoder writes (the scope's
 * own fields, then the items): each item is decoded as it comes, so the
 * request is read front to back once. Two passes would first hop from one
 * item's length to the next, a dependent cache miss per item when the body
 * is not in cache. 0, or 1 when the message is not in that order or
 * anything in it fails: the caller then rolls the batch back and takes
 * dec_scope_x2, which also gives any error its usual text.
 */
static int dec_scope_x1(struct dec *d, const struct shape *sh, const uint8_t *p, size_t n,
                        uint32_t ri)
{
    struct batch *b = d->b;
    struct vbuf *h = &b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    bool any_item = false;
    int rc;

    if (heap_guard(d, p) < 0) {
        return 1;
    }
    uint32_t si = b->n_scopes;
    struct scope_row *sr = batch_add_scope(b);
    if (sr == NULL) {
        return 1;
    }
    sr->resource = ri;
    size_t astart = h->len, aend = 0;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            /* The scope's attributes must precede every item's heap bytes. */
            if (any_item || f.wt != WT_LEN || dec_scope(d, f.p, f.len, sr) < 0) {
                return 1;
            }
            break;
        case 2:
            if (f.wt != WT_LEN) {
                return 1;
            }
            if (!any_item) {
                any_item = true;
                aend = h->len;
            }
            /* Items add rows and metrics, never scopes: |sr| stays put. */
            if (sh->item(d, f.p, f.len, si) < 0) {
                return 1;
            }
            break;
        case 3:
            if (get_str(d, &f, "schema_url", &sr->schema_url) < 0) {
                return 1;
            }
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return 1;
    }
    sr = &b->scopes[si];
    sr->attrs.blob.off = (uint32_t)astart;
    sr->attrs.blob.len = (uint32_t)((any_item ? aend : h->len) - astart);
    return 0;
}

static int dec_scope_x(struct dec *d, const struct shape *sh, const uint8_t *p, size_t n,
                       uint32_t ri)
{
    struct batch *b = d->b;
    uint32_t scopes0 = b->n_scopes, metrics0 = b->n_metrics, rows0 = b->n_rows;
    size_t heap0 = b->heap.len;

    if (LIKELY(dec_scope_x1(d, sh, p, n, ri) == 0)) {
        return 0;
    }
    b->n_scopes = scopes0;
    b->n_metrics = metrics0;
    b->n_rows = rows0;
    b->heap.len = heap0;
    if (d->err != NULL && d->errlen > 0) {
        d->err[0] = '\0';
    }
    return dec_scope_x2(d, sh, p, n, ri);
}

static int dec_resource_x(struct dec *d, const struct shape *sh, const uint8_t *p, size_t n)
{
    struct batch *b = d->b;
    struct vbuf *h = &b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range scopes = {0};
    int rc;

    TRY(heap_guard(d, p));
    uint32_t ri = b->n_resources;
    struct res_row *rr = batch_add_resource(b);
    if (rr == NULL) {
        return -ENOMEM;
    }
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "resource");
            TRY(dec_resource(d, f.p, f.len, &rr->attrs.count, &rr->dropped_attrs));
            break;
        case 2:
            WANT(f, WT_LEN, sh->scopes);
            range_add(&scopes, &f, &c);
            break;
        case 3:
            TRY(get_str(d, &f, "schema_url", &rr->schema_url));
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&rr->attrs, astart, h);
    if (scopes.first == NULL) {
        return 0;
    }
    c.p = scopes.first;
    c.end = scopes.end;
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num == 2) {
            TRY(dec_scope_x(d, sh, f.p, f.len, ri));
        }
    }
    return rc;
}

static const struct shape shapes[] = {
    [SIG_LOGS] = {"resource_logs", "scope_logs", "log_records", dec_log},
    [SIG_TRACES] = {"resource_spans", "scope_spans", "spans", dec_span},
    [SIG_METRICS] = {"resource_metrics", "scope_metrics", "metrics", dec_metric},
};

int pbdec_decode(enum signal s, const uint8_t *body, size_t len, struct batch *out, char *err,
                 size_t errlen)
{
    struct dec d = {.b = out, .base = body, .err = err, .errlen = errlen, .sig = signal_name(s)};
    static const size_t row_sizes[] = {
        [SIG_LOGS] = sizeof(struct log_row),
        [SIG_TRACES] = sizeof(struct span_row),
        [SIG_METRICS] = sizeof(struct point_row),
    };

    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (s != SIG_LOGS && s != SIG_TRACES && s != SIG_METRICS) {
        return fail(&d, body, "unknown signal %d", (int)s);
    }
    if (out->signal != s) {
        batch_reset(out, s);
    }
    if (len == 0) {
        return 0; /* an empty request is a valid one */
    }
    if (len > UINT32_MAX) {
        return fail(&d, body, "body of %zu bytes is too large", len);
    }

    const struct shape *sh = &shapes[s];
    d.row_size = row_sizes[s];
    d.used0 = batch_used(out, d.row_size);
    d.limit = len * EXPANSION_MAX + EXPANSION_SLACK;
    uint32_t n_res = out->n_resources, n_scopes = out->n_scopes, n_metrics = out->n_metrics;
    uint32_t n_rows = out->n_rows;
    size_t heap = out->heap.len;
    struct cur c = {body, body + len};
    struct fld f;
    int rc;

    while ((rc = next_field(&d, &c, &f)) > 0) {
        if (f.num == 1) {
            if (f.wt != WT_LEN) {
                rc = wrong_wt(&d, &f, sh->resources);
                break;
            }
            rc = dec_resource_x(&d, sh, f.p, f.len);
            if (rc < 0) {
                break;
            }
        }
    }
    if (rc < 0) {
        if (rc == -ENOMEM && err != NULL && errlen > 0 && err[0] == '\0') {
            fail_nomem(&d, "out of memory");
        }
        out->n_resources = n_res;
        out->n_scopes = n_scopes;
        out->n_metrics = n_metrics;
        out->n_rows = n_rows;
        out->heap.len = heap;
        return rc;
    }
    return 0;
}
