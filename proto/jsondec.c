/*
 * jsondec.c - OTLP/JSON request bodies into the row model (proto3 JSON
 * mapping with OTLP's deviations, FACTS.md section 7).
 *
 * WHY A HAND-WRITTEN PARSER, NOT JANSSON
 *   jansson would build a whole tree (a dozen allocations per record, every
 *   string copied, hash tables per object) only for us to walk it once and
 *   copy again; it rejects integers above INT64_MAX (fixed64 timestamps and
 *   counts can be larger) and turns bare numbers above 2^53 into lossy doubles;
 *   and its allocator hook is process-global. This file instead reads the
 *   body with a cursor and writes straight into the batch: scalars into the
 *   rows, values into batch->heap (val.h encoding), and the strings a row
 *   points at (struct mstr) into the request arena, unescaped. No tree, no
 *   malloc per record (only the batch's geometric arrays and heap grow), each
 *   integer parsed exactly from its digits.
 *
 * SHAPE
 *   One function per OTLP message, driven by the schema. Members are handled
 *   in the order they arrive; the few blob layouts that put a variable-length
 *   part before the attributes (span events and links, exemplars) or fix an
 *   order the JSON need not follow (histogram buckets and bounds, exponential
 *   histogram buckets) remember where those members start, skip them, and
 *   parse them at the end of the object by moving the cursor back. A
 *   KeyValue whose "value" precedes its "key" is handled the same way.
 *   Proto3 JSON forbids a member given twice; we accept it as protobuf does
 *   a field repeated on the wire: lists of resources, scopes, records and
 *   data points append, any other member is replaced by its last occurrence
 *   (the oneofs of AnyValue, data point values and Metric data included).
 *
 * FAST PATHS (issue 13: within 2x of protobuf per CPU-second)
 *   Each is taken only for input it reads exactly, and gives up with nothing
 *   consumed or written otherwise, so the general path above still decides
 *   every refusal and its message: member names matched in place against
 *   the member the previous object of that kind had next (struct fcur); the
 *   compact KeyValue (kv_fast); integers, doubles and hex ids read from the
 *   text (jsondec_num.h); number lists in compact form; histogram, exponential
 *   histogram and summary details read in place when they come in the usual
 *   order (list_inline) instead of skipped and read again.
 *
 * DEPTH
 *   The schema bounds the nesting of messages; AnyValue nesting is bounded by
 *   VAL_MAX_DEPTH (an attribute or body value is level 1, as in
 *   val_check_attrs), deeper is -EPROTO. Values of unknown members are skipped
 *   by an iterative scanner that validates them and refuses nesting deeper
 *   than JSONLEX_SKIP_DEPTH. So the C stack stays small whatever the input.
 *
 * ACCEPTED (FACTS.md section 7): lowerCamelCase or snake_case keys; unknown
 * keys ignored; null = absent (a null element of a list of messages is an
 * empty message; a null element of a list of numbers is an error); 64-bit
 * integers as JSON numbers or decimal strings (exponent and zero fraction
 * allowed when the value is integral); enums as integers or their names;
 * doubles as numbers, numeric strings, "NaN", "Infinity", "-Infinity"; bytes
 * as base64, standard or URL-safe, padded or not; trace/span ids as hex of
 * the exact length, any case ("" = absent; wrong length or non-hex is
 * -EPROTO naming the field; all zero = absent, as in the protobuf decoder).
 * The whole body must be valid UTF-8 and one JSON object; \u escapes must not
 * leave a lone surrogate.
 */
#include "proto/jsondec.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/hex.h"
#include "lib/jsonlex.h"
#include "lib/utf8.h"
#include "proto/jsondec_num.h"
#include "storage/val.h"

/* Strings up to this size are carved from a shared arena block. */
#define JD_STR_BLOCK 4096

/* The member tables, numbered for the decoder's learned member order (struct fcur). */
enum {
    TID_values_fields,
    TID_any_fields,
    TID_kv_fields,
    TID_scope_fields,
    TID_resource_fields,
    TID_log_fields,
    TID_event_fields,
    TID_link_fields,
    TID_status_fields,
    TID_span_fields,
    TID_bucket_fields,
    TID_vaq_fields,
    TID_exemplar_fields,
    TID_point_fields,
    TID_data_fields,
    TID_metric_fields,
    TID_scope_env_fields,
    TID_resource_env_fields,
    TID_request_fields,
    TID_COUNT,
};
#define FMAX 24 /* members a table may have, plus one */

struct jd {
    struct jsonlex lx; /* the body: lx.s[0..lx.n), cursor lx.pos */
    arena *a;
    struct batch *b;
    struct vbuf *h; /* &b->heap */
    enum signal sig;
    char *err;
    size_t errlen;
    char *sp; /* string carving block in the arena */
    size_t sleft;
    /* succ[t][m + 1] - 1: the member of table t that followed member m (or
     * began the object, m = -1) the last time; 0 when not yet seen. */
    uint8_t succ[TID_COUNT][FMAX];
};

#define NONE ((size_t)-1)

/* ---- errors ---- */

__attribute__((format(printf, 3, 4))) static int fail(struct jd *j, size_t at, const char *fmt, ...)
{
    if (j->err != NULL && j->errlen != 0) {
        int k = snprintf(j->err, j->errlen, "%s json: ", signal_name(j->sig));
        if (k < 0 || (size_t)k >= j->errlen) {
            return -EPROTO;
        }
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(j->err + k, j->errlen - (size_t)k, fmt, ap);
        va_end(ap);
        if (m >= 0 && (size_t)(k + m) < j->errlen) {
            snprintf(j->err + k + m, j->errlen - (size_t)(k + m), " at offset %zu", at);
        }
    }
    return -EPROTO;
}

static int nomem(struct jd *j)
{
    if (j->err != NULL && j->errlen != 0) {
        snprintf(j->err, j->errlen, "%s json: out of memory at offset %zu", signal_name(j->sig),
                 j->lx.pos);
    }
    return -ENOMEM;
}

/* ---- lexing (lib/jsonlex.h; its errors reported as this decoder's) ---- */

static int lexfail(struct jd *j)
{
    return fail(j, j->lx.err_at, "%s", j->lx.err);
}

static inline void ws(struct jd *j)
{
    jsonlex_ws(&j->lx);
}

/* The next non-blank byte, or -1 at the end. */
static inline int peekc(struct jd *j)
{
    return jsonlex_peek(&j->lx);
}

static inline int lex_str(struct jd *j, struct jsonlex_str *out)
{
    return jsonlex_str(&j->lx, out) < 0 ? lexfail(j) : 0;
}

static inline void unescape(const struct jd *j, const struct jsonlex_str *js, char *d)
{
    jsonlex_unescape(&j->lx, js, d);
}

static inline bool str_bytes(const struct jd *j, const struct jsonlex_str *js, char *buf,
                             size_t cap, const char **p)
{
    return jsonlex_str_bytes(&j->lx, js, buf, cap, p);
}

static inline int lex_num(struct jd *j, size_t *at, size_t *len)
{
    return jsonlex_num(&j->lx, at, len) < 0 ? lexfail(j) : 0;
}

static inline int lex_lit(struct jd *j, const char *lit, size_t n)
{
    return jsonlex_lit(&j->lx, lit, n) < 0 ? lexfail(j) : 0;
}

static inline bool take_null(struct jd *j)
{
    return jsonlex_null(&j->lx);
}

static inline int skip_value(struct jd *j)
{
    return jsonlex_skip(&j->lx) < 0 ? lexfail(j) : 0;
}

/* ---- objects and arrays ---- */

static int obj_open(struct jd *j, const char *what)
{
    if (peekc(j) != '{') {
        return fail(j, j->lx.pos, "%s: expected an object", what);
    }
    j->lx.pos++;
    return 0;
}

/* 1: a member follows (key set, cursor at its value); 0: the object ended. */
static inline int obj_next(struct jd *j, struct jsonlex_str *key, bool *first)
{
    int rc = jsonlex_obj_next(&j->lx, key, first);
    return rc < 0 ? lexfail(j) : rc;
}

static int arr_open(struct jd *j, const char *what)
{
    if (peekc(j) != '[') {
        return fail(j, j->lx.pos, "%s: expected an array", what);
    }
    j->lx.pos++;
    return 0;
}

/* 1: an element follows (cursor at it); 0: the array ended. */
static inline int arr_next(struct jd *j, bool *first)
{
    int rc = jsonlex_arr_next(&j->lx, first);
    return rc < 0 ? lexfail(j) : rc;
}

/* ---- member names ---- */

/* A member name, camelCase and snake_case. |cq|/|sq| hold the name and its
 * closing quote, zero-padded, for next_field's word compares. */
#define FNAME_MAX 31
struct fdef {
    const char *camel;
    const char *snake; /* NULL when the same */
    uint8_t clen, slen;
    char cq[FNAME_MAX + 1], sq[FNAME_MAX + 1];
};
#define F2(c, s)                                                                                   \
    {                                                                                              \
        c, s, sizeof(c) - 1, sizeof(s) - 1, c "\"", s "\""                                         \
    }
#define F1(c)                                                                                      \
    {                                                                                              \
        c, NULL, sizeof(c) - 1, 0, c "\"", ""                                                      \
    }
#define NF(t) ((int)(sizeof(t) / sizeof((t)[0])))

/* Index of the member |k| in |t|, or -1 (unknown: skip it). */
static int field_of(const struct jd *j, const struct jsonlex_str *k, const struct fdef *t, int nt)
{
    char buf[48];
    const char *p;
    if (!str_bytes(j, k, buf, sizeof(buf), &p)) {
        return -1;
    }
    for (int i = 0; i < nt; i++) {
        if ((k->len == t[i].clen && p[0] == t[i].camel[0] && memcmp(p, t[i].camel, k->len) == 0) ||
            (t[i].snake != NULL && k->len == t[i].slen && p[0] == t[i].snake[0] &&
             memcmp(p, t[i].snake, k->len) == 0)) {
            return i;
        }
    }
    return -1;
}

/*
 * A cursor over an object's members, matched against a member table. The
 * member that comes next is guessed from the order the previous object of
 * the same kind had (producers write members in a fixed order): when the
 * text at the cursor is exactly that name in quotes, it is taken without
 * lexing the key or searching the table. Any other key goes the general way
 * (jsonlex_obj_next + field_of), so escapes, snake_case and unknown keys
 * read as before and errors are the lexer's.
 */
struct fcur {
    const struct fdef *t;
    uint8_t *succ; /* j->succ[table] */
    int nt;
    int prev; /* the last known member matched, -1 before the first */
    int f;    /* the member just read: its index in t, or -1 (unknown) */
    bool first;
};
#define FCUR(j, tab)                                                                               \
    {                                                                                              \
        .t = (tab), .succ = (j)->succ[TID_##tab], .nt = NF(tab), .prev = -1, .f = -1,              \
        .first = true                                                                              \
    }

/*
 * Whether |p| starts with the |n| bytes of |nm| (a zero-padded FNAME_MAX + 1
 * array); |p| has at least FNAME_MAX + 1 bytes. Eight bytes at a time, the
 * last word masked to its |n| % 8 bytes (little-endian order).
 */
static inline bool name_eq(const char *p, const char *nm, size_t n)
{
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t a, b;
        memcpy(&a, p + k, 8);
        memcpy(&b, nm + k, 8);
        if (a != b) {
            return false;
        }
    }
    if (k < n) {
        uint64_t a, b;
        memcpy(&a, p + k, 8);
        memcpy(&b, nm + k, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        return ((a ^ b) & (~0ull << (64 - 8 * (n - k)))) == 0;
#else
        return ((a ^ b) & (~0ull >> (64 - 8 * (n - k)))) == 0;
#endif
    }
    return true;
}

/*
 * The member whose name (and closing quote) starts the text at |p| (a key's
 * first byte), trying |h| first: its index, with |*len| its name's length,
 * or -1. |p| has at least FNAME_MAX + 1 bytes.
 */
static inline int name_find(const char *p, const struct fdef *t, int nt, int h, size_t *len)
{
    for (int i = 0; i < nt; i++, h = h + 1 == nt ? 0 : h + 1) {
        const struct fdef *d = &t[h];
        if (p[0] == d->cq[0] && name_eq(p, d->cq, d->clen + 1u)) {
            *len = d->clen;
            return h;
        }
        if (d->slen != 0 && p[0] == d->sq[0] && name_eq(p, d->sq, d->slen + 1u)) {
            *len = d->slen;
            return h;
        }
    }
    return -1;
}

__attribute__((noinline)) static int next_field_slow(struct jd *j, struct fcur *c)
{
    struct jsonlex_str k;
    int rc = obj_next(j, &k, &c->first);
    if (rc <= 0) {
        return rc;
    }
    c->f = field_of(j, &k, c->t, c->nt);
    if (c->f >= 0) {
        c->succ[c->prev + 1] = (uint8_t)(c->f + 1);
        c->prev = c->f;
    }
    return 1;
}

/* 1: a member follows (c->f set, the cursor at its value); 0: the object ended. */
__attribute__((always_inline)) static inline int next_field(struct jd *j, struct fcur *c)
{
    struct jsonlex *x = &j->lx;
    size_t save = x->pos;
    int ch = jsonlex_peek(x);
    if (ch == '}') {
        x->pos++;
        return 0;
    }
    if (!c->first) {
        ch = ch == ',' ? (x->pos++, jsonlex_peek(x)) : -1;
    }
    if (ch == '"' && x->n - x->pos > FNAME_MAX + 1) {
        int h = c->succ[c->prev + 1];
        size_t len;
        h = h != 0 ? h - 1 : c->prev + 1 < c->nt ? c->prev + 1 : 0;
        int f = name_find(x->s + x->pos + 1, c->t, c->nt, h, &len);
        if (f >= 0) {
            x->pos += len + 2;
            if (jsonlex_peek(x) == ':') {
                x->pos++;
                jsonlex_ws(x);
                c->first = false;
                c->succ[c->prev + 1] = (uint8_t)(f + 1);
                c->f = c->prev = f;
                return 1;
            }
        }
    }
    x->pos = save;
    return next_field_slow(j, c);
}

/* ---- scalar members ---- */

/* Carves the unescaped string from the arena. */
static int arena_str(struct jd *j, const struct jsonlex_str *js, struct mstr *out)
{
    char *p;
    if (js->len == 0) {
        out->p = "";
        out->len = 0;
        return 0;
    }
    if (js->len > UINT32_MAX) {
        return fail(j, js->at, "string longer than 4 GiB");
    }
    if (js->len <= j->sleft) {
        p = j->sp;
        j->sp += js->len;
        j->sleft -= js->len;
    } else if (js->len > JD_STR_BLOCK / 4) {
        p = arena_alloc(j->a, js->len);
    } else {
        p = arena_alloc(j->a, JD_STR_BLOCK);
        if (p != NULL) {
            j->sp = p + js->len;
            j->sleft = JD_STR_BLOCK - js->len;
        }
    }
    if (p == NULL) {
        return nomem(j);
    }
    unescape(j, js, p);
    out->p = p;
    out->len = (uint32_t)js->len;
    return 0;
}

static int rd_jstr(struct jd *j, const char *field, struct jsonlex_str *js)
{
    if (peekc(j) != '"') {
        return fail(j, j->lx.pos, "%s: expected a string", field);
    }
    return lex_str(j, js);
}

static int rd_mstr(struct jd *j, const char *field, struct mstr *out)
{
    struct jsonlex_str js;
    int rc = rd_jstr(j, field, &js);
    return rc < 0 ? rc : arena_str(j, &js, out);
}

/* Writes uv length + unescaped bytes to the heap. */
static int heap_jstr(struct jd *j, const struct jsonlex_str *js)
{
    if (vbuf_reserve(j->h, 10 + js->len) < 0) {
        return nomem(j);
    }
    vbuf_put_uv(j->h, js->len);
    unescape(j, js, (char *)j->h->p + j->h->len);
    j->h->len += js->len;
    return 0;
}

/*
 * The text of a number, bare or quoted (unescaped into |buf| if need be).
 * |quoted| says which it was.
 */
static int num_text(struct jd *j, const char *field, char *buf, size_t cap, const char **p,
                    size_t *n, bool *quoted)
{
    int c = peekc(j), rc;
    size_t at = j->lx.pos;
    if (c == '"') {
        struct jsonlex_str js;
        if ((rc = lex_str(j, &js)) < 0) {
            return rc;
        }
        if (!str_bytes(j, &js, buf, cap, p)) {
            return fail(j, at, "%s: number string too long", field);
        }
        *n = js.len;
        *quoted = true;
        return 0;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t nat;
        if ((rc = lex_num(j, &nat, n)) < 0) {
            return rc;
        }
        *p = j->lx.s + nat;
        *quoted = false;
        return 0;
    }
    return fail(j, at, "%s: expected a number or a numeric string", field);
}

/*
 * Exact integer value of the JSON number p[0..n): sign and magnitude. False
 * if it is not a number, not integral, or beyond 2^64-1.
 */
static bool num_to_int(const char *p, size_t n, bool *neg, uint64_t *mag)
{
    /* the usual case: up to 19 plain digits cannot overflow */
    size_t i0 = n != 0 && p[0] == '-';
    if (n > i0 && n - i0 <= 19 && (p[i0] != '0' || n - i0 == 1)) {
        uint64_t v = 0;
        size_t k = i0;
        while (k < n && p[k] >= '0' && p[k] <= '9') {
            v = v * 10 + (uint64_t)(p[k++] - '0');
        }
        if (k == n) {
            *neg = i0 != 0;
            *mag = v;
            return true;
        }
    }
    if (n == 0 || jsonlex_num_span(p, n) != n) {
        return false;
    }
    size_t i = 0;
    *neg = p[0] == '-';
    i += *neg;
    size_t int_at = i, int_end, frac_at = 0, frac_end = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9') {
        i++;
    }
    int_end = i;
    if (i < n && p[i] == '.') {
        frac_at = ++i;
        while (i < n && p[i] >= '0' && p[i] <= '9') {
            i++;
        }
        frac_end = i;
    }
    long exp = 0;
    if (i < n) { /* 'e' / 'E' */
        bool eneg = false;
        i++;
        if (p[i] == '+' || p[i] == '-') {
            eneg = p[i] == '-';
            i++;
        }
        for (; i < n; i++) {
            if (exp < 100000) {
                exp = exp * 10 + (p[i] - '0');
            }
        }
        exp = eneg ? -exp : exp;
    }
    /* digits d[0..nd) = integer part then fraction; value = d * 10^e10 */
    size_t nint = int_end - int_at, nfrac = frac_end - frac_at, nd = nint + nfrac;
    long e10 = exp - (long)nfrac;
#define DIG(k) ((k) < nint ? p[int_at + (k)] : p[frac_at + (k)-nint])
    size_t keep = nd;
    if (e10 < 0) {
        size_t drop = (size_t)-e10 > nd ? nd : (size_t)-e10;
        for (size_t k = nd - drop; k < nd; k++) {
            if (DIG(k) != '0') {
                return false;
            }
        }
        keep = nd - drop;
        e10 = 0;
    }
    uint64_t v = 0;
    for (size_t k = 0; k < keep; k++) {
        unsigned d = (unsigned)(DIG(k) - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
#undef DIG
    if (v != 0) {
        for (long k = 0; k < e10; k++) {
            if (v > UINT64_MAX / 10) {
                return false;
            }
            v *= 10;
        }
    }
    *mag = v;
    return true;
}

static int rd_u64(struct jd *j, const char *field, uint64_t *out)
{
    char buf[128];
    const char *p;
    size_t n, at = (ws(j), j->lx.pos);
    bool quoted, neg;
    uint64_t mag;
    if (jdnum_int(j->lx.s + at, j->lx.n - at, &neg, &mag, &n) && !neg) {
        j->lx.pos += n;
        *out = mag;
        return 0;
    }
    int rc = num_text(j, field, buf, sizeof(buf), &p, &n, &quoted);
    if (rc < 0) {
        return rc;
    }
    if (!num_to_int(p, n, &neg, &mag)) {
        return fail(j, at, "%s: not an integer in range", field);
    }
    if (neg && mag != 0) {
        return fail(j, at, "%s: negative value for an unsigned field", field);
    }
    *out = mag;
    return 0;
}

static int rd_i64(struct jd *j, const char *field, int64_t *out)
{
    char buf[128];
    const char *p;
    size_t n, at = (ws(j), j->lx.pos);
    bool quoted, neg;
    uint64_t mag;
    if (jdnum_int(j->lx.s + at, j->lx.n - at, &neg, &mag, &n) && mag <= (uint64_t)INT64_MAX + neg) {
        j->lx.pos += n;
        *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
        return 0;
    }
    int rc = num_text(j, field, buf, sizeof(buf), &p, &n, &quoted);
    if (rc < 0) {
        return rc;
    }
    if (!num_to_int(p, n, &neg, &mag) || mag > (uint64_t)INT64_MAX + neg) {
        return fail(j, at, "%s: not a 64-bit signed integer", field);
    }
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return 0;
}

static int rd_u32(struct jd *j, const char *field, uint32_t *out)
{
    size_t at = (ws(j), j->lx.pos);
    uint64_t v;
    int rc = rd_u64(j, field, &v);
    if (rc < 0) {
        return rc;
    }
    if (v > UINT32_MAX) {
        return fail(j, at, "%s: out of range for 32 bits", field);
    }
    *out = (uint32_t)v;
    return 0;
}

static int rd_i32(struct jd *j, const char *field, int32_t *out)
{
    size_t at = (ws(j), j->lx.pos);
    int64_t v;
    int rc = rd_i64(j, field, &v);
    if (rc < 0) {
        return rc;
    }
    if (v < INT32_MIN || v > INT32_MAX) {
        return fail(j, at, "%s: out of range for 32 bits", field);
    }
    *out = (int32_t)v;
    return 0;
}

/*
 * Clinger's fast path: a decimal mantissa of at most 2^53 and a power of ten
 * of at most 22 are both exact doubles, so one multiply or divide gives the
 * correctly rounded value, the same as strtod. False: use strtod. |p| is a
 * valid JSON number.
 */
static bool f64_fast(const char *p, size_t n, double *out)
{
    static const double pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const uint64_t max = 1ull << 53;
    size_t i = 0;
    bool neg = p[0] == '-';
    uint64_t m = 0;
    long e10 = 0;
    i += neg;
    for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
        m = m * 10 + (uint64_t)(p[i] - '0');
        if (m > max) {
            return false;
        }
    }
    if (i < n && p[i] == '.') {
        for (i++; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
            m = m * 10 + (uint64_t)(p[i] - '0');
            e10--;
            if (m > max) {
                return false;
            }
        }
    }
    if (i < n) { /* exponent */
        bool eneg = false;
        long e = 0;
        i++;
        if (p[i] == '+' || p[i] == '-') {
            eneg = p[i++] == '-';
        }
        for (; i < n; i++) {
            e = e * 10 + (p[i] - '0');
            if (e > 1000) {
                return false;
            }
        }
        e10 += eneg ? -e : e;
    }
    double v;
    if (m == 0) {
        v = 0.0;
    } else if (e10 >= 0 && e10 <= 22) {
        v = (double)m * pow10[e10];
    } else if (e10 < 0 && e10 >= -22) {
        v = (double)m / pow10[-e10];
    } else {
        return false;
    }
    *out = neg ? -v : v;
    return true;
}

static int rd_f64(struct jd *j, const char *field, double *out)
{
    char buf[512];
    const char *p;
    size_t n, at = (ws(j), j->lx.pos);
    bool quoted;
    int c = peekc(j);
    if (c != '"' && jdnum_f64(j->lx.s + at, j->lx.n - at, out, &n)) {
        j->lx.pos += n;
        return 0;
    }
    if (c == '"') {
        struct jsonlex_str js;
        int rc = lex_str(j, &js);
        if (rc < 0) {
            return rc;
        }
        if (!str_bytes(j, &js, buf, sizeof(buf) - 1, &p)) {
            return fail(j, at, "%s: number string too long", field);
        }
        n = js.len;
        if (n == 3 && memcmp(p, "NaN", 3) == 0) {
            *out = NAN;
            return 0;
        }
        if (n == 8 && memcmp(p, "Infinity", 8) == 0) {
            *out = INFINITY;
            return 0;
        }
        if (n == 9 && memcmp(p, "-Infinity", 9) == 0) {
            *out = -INFINITY;
            return 0;
        }
        quoted = true;
    } else {
        int rc = num_text(j, field, buf, sizeof(buf), &p, &n, &quoted);
        if (rc < 0) {
            return rc;
        }
    }
    if (n == 0 || jsonlex_num_span(p, n) != n) {
        return fail(j, at, "%s: not a number", field);
    }
    if (f64_fast(p, n, out)) {
        return 0;
    }
    if (n >= sizeof(buf)) {
        return fail(j, at, "%s: number too long", field);
    }
    if (p != buf) {
        memcpy(buf, p, n);
    }
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    if (isinf(v)) {
        return fail(j, at, "%s: number out of range for a double", field);
    }
    *out = v;
    return 0;
}

static int rd_bool(struct jd *j, const char *field, bool *out)
{
    int c = peekc(j);
    if (c == 't' && lex_lit(j, "true", 4) == 0) {
        *out = true;
        return 0;
    }
    if (c == 'f' && lex_lit(j, "false", 5) == 0) {
        *out = false;
        return 0;
    }
    return fail(j, j->lx.pos, "%s: expected true or false", field);
}

/* An enum: an integer (bare or quoted) or one of |names| (index = value). */
static int rd_enum(struct jd *j, const char *field, const char *const *names, int nn, int32_t *out)
{
    size_t at = (ws(j), j->lx.pos);
    if (peekc(j) == '"') {
        struct jsonlex_str js;
        char buf[64];
        const char *p;
        int rc = lex_str(j, &js);
        if (rc < 0) {
            return rc;
        }
        if (str_bytes(j, &js, buf, sizeof(buf), &p)) {
            for (int i = 0; i < nn; i++) {
                if (names[i] != NULL && strlen(names[i]) == js.len &&
                    memcmp(names[i], p, js.len) == 0) {
                    *out = i;
                    return 0;
                }
            }
            bool neg;
            uint64_t mag;
            if (num_to_int(p, js.len, &neg, &mag) && mag <= (uint64_t)INT32_MAX + neg) {
                *out = neg ? (int32_t)(0 - (int64_t)mag) : (int32_t)mag;
                return 0;
            }
        }
        return fail(j, at, "%s: unknown enum value \"%.*s\"", field,
                    (int)(js.len > 40 ? 40 : js.len), js.esc ? "(escaped)" : j->lx.s + js.at);
    }
    return rd_i32(j, field, out);
}

/*
 * A hex id of exactly |nb| bytes into |dst|. "" leaves |dst| zero and
 * |present| false; all-zero bytes also read as absent.
 */
static int rd_id(struct jd *j, const char *field, uint8_t *dst, size_t nb, bool *present)
{
    struct jsonlex_str js;
    char buf[64];
    const char *p;
    size_t at = (ws(j), j->lx.pos);
    *present = false;
    /* the usual case: exactly 2 * nb hex digits in quotes */
    if (j->lx.n - at > 2 * nb + 1 && j->lx.s[at] == '"' && j->lx.s[at + 2 * nb + 1] == '"' &&
        jdnum_hex(dst, j->lx.s + at + 1, nb)) {
        uint8_t any = 0;
        for (size_t i = 0; i < nb; i++) {
            any |= dst[i];
        }
        j->lx.pos = at + 2 * nb + 2;
        *present = any != 0;
        return 0;
    }
    int rc = rd_jstr(j, field, &js);
    if (rc < 0) {
        return rc;
    }
    memset(dst, 0, nb);
    if (js.len == 0) {
        return 0;
    }
    if (js.len != 2 * nb || !str_bytes(j, &js, buf, sizeof(buf), &p)) {
        return fail(j, at, "%s: %zu hex digits, want %zu", field, js.len, 2 * nb);
    }
    if (hex_decode(dst, p, nb) < 0) {
        return fail(j, at, "%s: not a hex string", field);
    }
    uint8_t any = 0;
    for (size_t i = 0; i < nb; i++) {
        any |= dst[i];
    }
    *present = any != 0;
    return 0;
}

/* ---- values (val.h encoding into the heap) ---- */

/* bytesValue: base64 (standard or URL-safe, padded or not) -> VAL_BYTES. */
static int bytes_value(struct jd *j)
{
    struct jsonlex_str js;
    const char *p;
    size_t at = (ws(j), j->lx.pos);
    int rc = rd_jstr(j, "bytesValue", &js);
    if (rc < 0) {
        return rc;
    }
    if (js.esc) { /* rare: unescape into the arena first */
        char *t = arena_alloc(j->a, js.len);
        if (t == NULL) {
            return nomem(j);
        }
        unescape(j, &js, t);
        p = t;
    } else {
        p = j->lx.s + js.at;
    }
    size_t n = base64_unpad(p, js.len);
    long out = base64_decoded_len(n);
    if (out < 0) {
        return fail(j, at, "bytesValue: bad base64 length");
    }
    if (vbuf_put_u8(j->h, VAL_BYTES) < 0 || vbuf_put_uv(j->h, (uint64_t)out) < 0 ||
        vbuf_reserve(j->h, (size_t)out) < 0) {
        return nomem(j);
    }
    if (base64_decode(j->h->p + j->h->len, p, n) < 0) {
        return fail(j, at, "bytesValue: not base64");
    }
    j->h->len += (size_t)out;
    return 0;
}

enum { AV_STR, AV_BOOL, AV_INT, AV_DOUBLE, AV_ARRAY, AV_KVLIST, AV_BYTES, AV_STRINDEX };
static const struct fdef any_fields[] = {
    [AV_STR] = F2("stringValue", "string_value"),
    [AV_BOOL] = F2("boolValue", "bool_value"),
    [AV_INT] = F2("intValue", "int_value"),
    [AV_DOUBLE] = F2("doubleValue", "double_value"),
    [AV_ARRAY] = F2("arrayValue", "array_value"),
    [AV_KVLIST] = F2("kvlistValue", "kvlist_value"),
    [AV_BYTES] = F2("bytesValue", "bytes_value"),
    [AV_STRINDEX] = F2("stringValueStrindex", "string_value_strindex"),
};
static const struct fdef values_fields[] = {F1("values")};

/* A string log body goes to the arena, not the heap. */
struct body_sink {
    bool is_str;
    struct mstr str;
};

static int any_value(struct jd *j, int depth, struct body_sink *sink);
static int key_value(struct jd *j, int depth);

/* ArrayValue or KeyValueList at depth |depth| (its members one deeper). */
static int list_value(struct jd *j, int depth, enum val_type t)
{
    long at = val_open(j->h, t);
    uint32_t count = 0;
    int rc;
    if (at < 0) {
        return nomem(j);
    }
    if ((rc = obj_open(j, t == VAL_ARRAY ? "arrayValue" : "kvlistValue")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, values_fields); (rc = next_field(j, &fc)) > 0;) {
        if (fc.f != 0 || take_null(j)) {
            if ((rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        bool efirst = true;
        j->h->len = (size_t)at + 8; /* a repeated "values" replaces the first */
        count = 0;
        if ((rc = arr_open(j, "values")) < 0) {
            return rc;
        }
        while ((rc = arr_next(j, &efirst)) > 0) {
            rc = t == VAL_ARRAY ? any_value(j, depth + 1, NULL) : key_value(j, depth + 1);
            if (rc < 0) {
                return rc;
            }
            count++;
        }
        if (rc < 0) {
            return rc;
        }
    }
    if (rc < 0) {
        return rc;
    }
    val_close(j->h, at, count);
    return 0;
}

/*
 * One AnyValue at nesting level |depth| (1 = an attribute or body value),
 * written to the heap as one val.h value. With |sink|, a string value goes
 * to sink->str instead and the heap gets nothing.
 */
static int any_value(struct jd *j, int depth, struct body_sink *sink)
{
    size_t mark = j->h->len, at = (ws(j), j->lx.pos);
    bool set = false;
    int rc;
    if (depth > VAL_MAX_DEPTH) {
        return fail(j, at, "AnyValue nested deeper than %d levels", VAL_MAX_DEPTH);
    }
    if (sink != NULL) {
        sink->is_str = false;
    }
    if (take_null(j)) {
        return val_put_empty(j->h) < 0 ? nomem(j) : 0;
    }
    if ((rc = obj_open(j, "AnyValue")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, any_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        if (f < 0 || take_null(j)) {
            if (f < 0 && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        /* the last member set wins */
        j->h->len = mark;
        set = true;
        if (sink != NULL) {
            sink->is_str = false;
        }
        switch (f) {
        case AV_STR: {
            struct jsonlex_str js;
            if ((rc = rd_jstr(j, "stringValue", &js)) < 0) {
                return rc;
            }
            if (sink != NULL) {
                rc = arena_str(j, &js, &sink->str);
                sink->is_str = true;
            } else if (vbuf_put_u8(j->h, VAL_STR) < 0) {
                return nomem(j);
            } else {
                rc = heap_jstr(j, &js);
            }
            break;
        }
        case AV_BOOL: {
            bool v;
            if ((rc = rd_bool(j, "boolValue", &v)) == 0 && val_put_bool(j->h, v) < 0) {
                return nomem(j);
            }
            break;
        }
        case AV_INT: {
            int64_t v;
            if ((rc = rd_i64(j, "intValue", &v)) == 0 && val_put_int(j->h, v) < 0) {
                return nomem(j);
            }
            break;
        }
        case AV_DOUBLE: {
            double v;
            if ((rc = rd_f64(j, "doubleValue", &v)) == 0 && val_put_double(j->h, v) < 0) {
                return nomem(j);
            }
            break;
        }
        case AV_ARRAY:
            rc = list_value(j, depth, VAL_ARRAY);
            break;
        case AV_KVLIST:
            rc = list_value(j, depth, VAL_KVLIST);
            break;
        case AV_BYTES:
            rc = bytes_value(j);
            break;
        default: /* string_value_strindex: profiles only; the value reads as empty */
            set = false;
            rc = skip_value(j);
            break;
        }
        if (rc < 0) {
            return rc;
        }
    }
    if (rc < 0) {
        return rc;
    }
    if (!set) {
        j->h->len = mark;
        if (val_put_empty(j->h) < 0) {
            return nomem(j);
        }
    }
    return 0;
}

enum { KV_KEY, KV_VALUE, KV_KEYSTRINDEX };
static const struct fdef kv_fields[] = {
    [KV_KEY] = F1("key"),
    [KV_VALUE] = F1("value"),
    [KV_KEYSTRINDEX] = F2("keyStrindex", "key_strindex"),
};

/*
 * The KeyValue every OTLP exporter writes, compact and in schema order:
 * {"key":"k","value":{"stringValue":"v"}} (or intValue, doubleValue,
 * boolValue) with no escape in the strings. Read by exact comparison and
 * written to the heap as key_value would; false with nothing consumed and
 * nothing written for anything else, which key_value then reads the
 * general way (so it also gives every error).
 */
static bool kv_fast(struct jd *j)
{
    static const char kv_open[] = "{\"key\":\"", kv_mid[] = ",\"value\":{\"";
    const char *s = j->lx.s;
    size_t n = j->lx.n, i = j->lx.pos, mark = j->h->len;
    if (n - i < 64 || memcmp(s + i, kv_open, 8) != 0) {
        return false;
    }
    size_t k0 = i + 8;
    i = jsonlex_plain_end(s, k0, n);
    if (n - i < 48 || s[i] != '"' || memcmp(s + i + 1, kv_mid, 11) != 0) {
        return false;
    }
    size_t klen = i - k0;
    if (vbuf_reserve(j->h, 10 + klen) < 0) {
        return false; /* the general path reports it */
    }
    vbuf_put_uv(j->h, klen);
    memcpy(j->h->p + j->h->len, s + k0, klen);
    j->h->len += klen;
    i += 12;
    bool ok = false;
    size_t used = 0;
    if (memcmp(s + i, "stringValue\":\"", 14) == 0) {
        size_t v0 = i + 14;
        i = jsonlex_plain_end(s, v0, n);
        ok = i < n && s[i] == '"' && vbuf_reserve(j->h, 11 + (i - v0)) == 0;
        if (ok) {
            j->h->p[j->h->len++] = VAL_STR;
            vbuf_put_uv(j->h, i - v0);
            memcpy(j->h->p + j->h->len, s + v0, i - v0);
            j->h->len += i - v0;
            i++;
        }
    } else if (memcmp(s + i, "intValue\":", 10) == 0) {
        bool neg;
        uint64_t mag;
        i += 10;
        ok = jdnum_int(s + i, n - i, &neg, &mag, &used) && mag <= (uint64_t)INT64_MAX + neg &&
             val_put_int(j->h, neg ? (int64_t)(0 - mag) : (int64_t)mag) == 0;
        i += used;
    } else if (memcmp(s + i, "doubleValue\":", 13) == 0) {
        double d;
        i += 13;
        ok = jdnum_f64(s + i, n - i, &d, &used) && val_put_double(j->h, d) == 0;
        i += used;
    } else if (memcmp(s + i, "boolValue\":", 11) == 0) {
        i += 11;
        bool t = memcmp(s + i, "true", 4) == 0, f = !t && memcmp(s + i, "false", 5) == 0;
        ok = (t || f) && val_put_bool(j->h, t) == 0;
        i += t ? 4 : 5;
    }
    if (!ok || n - i < 2 || s[i] != '}' || s[i + 1] != '}') {
        j->h->len = mark;
        return false;
    }
    j->lx.pos = i + 2;
    return true;
}

/*
 * One KeyValue: key, then its value at level |depth|. The usual order
 * ("key" first) is written as it is read; otherwise the value is found
 * again once the key is known.
 */
static int key_value(struct jd *j, int depth)
{
    size_t start = j->h->len, val_pos = NONE;
    struct jsonlex_str key = {0};
    bool key_written = false, val_written = false, redo = false;
    int rc;
    if (take_null(j)) { /* an empty KeyValue */
        return val_put_key(j->h, "", 0) < 0 || val_put_empty(j->h) < 0 ? nomem(j) : 0;
    }
    if (depth <= VAL_MAX_DEPTH && kv_fast(j)) {
        return 0;
    }
    if ((rc = obj_open(j, "KeyValue")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, kv_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        if (f == KV_KEY) {
            if (take_null(j)) {
                key = (struct jsonlex_str){0};
                redo = true;
                continue;
            }
            if ((rc = rd_jstr(j, "key", &key)) < 0) {
                return rc;
            }
            if (key_written || val_pos != NONE) {
                redo = true;
            } else {
                if (heap_jstr(j, &key) < 0) {
                    return -ENOMEM;
                }
                key_written = true;
            }
        } else if (f == KV_VALUE) {
            if (val_pos != NONE) {
                redo = true;
            }
            val_pos = (ws(j), j->lx.pos);
            if (key_written && !redo) {
                rc = any_value(j, depth, NULL);
                val_written = true;
            } else {
                rc = skip_value(j);
            }
            if (rc < 0) {
                return rc;
            }
        } else if ((rc = skip_value(j)) < 0) { /* keyStrindex (profiles only) and unknown */
            return rc;
        }
    }
    if (rc < 0) {
        return rc;
    }
    if (redo || !key_written) {
        j->h->len = start;
        if (heap_jstr(j, &key) < 0) { /* a zeroed jstr writes "" */
            return -ENOMEM;
        }
        val_written = false;
        if (val_pos != NONE) {
            size_t end = j->lx.pos;
            j->lx.pos = val_pos;
            if ((rc = any_value(j, depth, NULL)) < 0) {
                return rc;
            }
            j->lx.pos = end;
            val_written = true;
        }
    }
    if (!val_written && val_put_empty(j->h) < 0) {
        return nomem(j);
    }
    return 0;
}

/* An attributes list: KeyValue entries back to back in the heap. */
static int attr_list(struct jd *j, const char *what, struct attrs *out)
{
    size_t off = j->h->len;
    uint32_t count = 0;
    bool first = true;
    int rc = arr_open(j, what);
    if (rc < 0) {
        return rc;
    }
    while ((rc = arr_next(j, &first)) > 0) {
        if ((rc = key_value(j, 1)) < 0) {
            return rc;
        }
        count++;
    }
    if (rc < 0) {
        return rc;
    }
    out->blob.off = (uint32_t)off;
    out->blob.len = (uint32_t)(j->h->len - off);
    out->count = count;
    return 0;
}

/* The attributes list found at |pos| earlier, written now; the cursor is restored. */
static int attr_list_at(struct jd *j, size_t pos, const char *what, struct attrs *out)
{
    *out = (struct attrs){{(uint32_t)j->h->len, 0}, 0};
    if (pos == NONE) {
        return 0;
    }
    size_t end = j->lx.pos;
    j->lx.pos = pos;
    int rc = attr_list(j, what, out);
    j->lx.pos = end;
    return rc;
}

/* Remembers where a member's value is, and skips it. */
static int defer(struct jd *j, size_t *pos)
{
    *pos = (ws(j), j->lx.pos);
    return skip_value(j);
}

/* ---- enums ---- */

static const char *const severity_names[] = {
    "SEVERITY_NUMBER_UNSPECIFIED", "SEVERITY_NUMBER_TRACE",  "SEVERITY_NUMBER_TRACE2",
    "SEVERITY_NUMBER_TRACE3",      "SEVERITY_NUMBER_TRACE4", "SEVERITY_NUMBER_DEBUG",
    "SEVERITY_NUMBER_DEBUG2",      "SEVERITY_NUMBER_DEBUG3", "SEVERITY_NUMBER_DEBUG4",
    "SEVERITY_NUMBER_INFO",        "SEVERITY_NUMBER_INFO2",  "SEVERITY_NUMBER_INFO3",
    "SEVERITY_NUMBER_INFO4",       "SEVERITY_NUMBER_WARN",   "SEVERITY_NUMBER_WARN2",
    "SEVERITY_NUMBER_WARN3",       "SEVERITY_NUMBER_WARN4",  "SEVERITY_NUMBER_ERROR",
    "SEVERITY_NUMBER_ERROR2",      "SEVERITY_NUMBER_ERROR3", "SEVERITY_NUMBER_ERROR4",
    "SEVERITY_NUMBER_FATAL",       "SEVERITY_NUMBER_FATAL2", "SEVERITY_NUMBER_FATAL3",
    "SEVERITY_NUMBER_FATAL4",
};
static const char *const span_kind_names[] = {
    "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",      "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER",
};
static const char *const status_names[] = {
    "STATUS_CODE_UNSET",
    "STATUS_CODE_OK",
    "STATUS_CODE_ERROR",
};
static const char *const temporality_names[] = {
    "AGGREGATION_TEMPORALITY_UNSPECIFIED",
    "AGGREGATION_TEMPORALITY_DELTA",
    "AGGREGATION_TEMPORALITY_CUMULATIVE",
};

/* ---- resource and scope ---- */

enum { SC_NAME, SC_VERSION, SC_ATTRS, SC_DROPPED };
static const struct fdef scope_fields[] = {
    [SC_NAME] = F1("name"),
    [SC_VERSION] = F1("version"),
    [SC_ATTRS] = F1("attributes"),
    [SC_DROPPED] = F2("droppedAttributesCount", "dropped_attributes_count"),
};

static int scope_msg(struct jd *j, uint32_t si)
{
    int rc = obj_open(j, "scope");
    if (rc < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, scope_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        struct scope_row *sc = &j->b->scopes[si];
        if (f < 0 || take_null(j)) {
            rc = f < 0 ? skip_value(j) : 0;
        } else if (f == SC_NAME) {
            rc = rd_mstr(j, "scope.name", &sc->name);
        } else if (f == SC_VERSION) {
            rc = rd_mstr(j, "scope.version", &sc->version);
        } else if (f == SC_ATTRS) {
            rc = attr_list(j, "scope.attributes", &sc->attrs);
        } else {
            rc = rd_u32(j, "scope.droppedAttributesCount", &sc->dropped_attrs);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

enum { RS_ATTRS, RS_DROPPED };
static const struct fdef resource_fields[] = {
    [RS_ATTRS] = F1("attributes"),
    [RS_DROPPED] = F2("droppedAttributesCount", "dropped_attributes_count"),
};

static int resource_msg(struct jd *j, uint32_t ri)
{
    int rc = obj_open(j, "resource");
    if (rc < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, resource_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        struct res_row *r = &j->b->resources[ri];
        if (f < 0 || take_null(j)) {
            rc = f < 0 ? skip_value(j) : 0; /* entityRefs and unknown */
        } else if (f == RS_ATTRS) {
            rc = attr_list(j, "resource.attributes", &r->attrs);
        } else {
            rc = rd_u32(j, "resource.droppedAttributesCount", &r->dropped_attrs);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

/* ---- logs ---- */

enum {
    LR_TIME,
    LR_OBSERVED,
    LR_SEVNUM,
    LR_SEVTEXT,
    LR_BODY,
    LR_ATTRS,
    LR_DROPPED,
    LR_FLAGS,
    LR_TRACE,
    LR_SPAN,
    LR_EVENT,
};
static const struct fdef log_fields[] = {
    [LR_TIME] = F2("timeUnixNano", "time_unix_nano"),
    [LR_OBSERVED] = F2("observedTimeUnixNano", "observed_time_unix_nano"),
    [LR_SEVNUM] = F2("severityNumber", "severity_number"),
    [LR_SEVTEXT] = F2("severityText", "severity_text"),
    [LR_BODY] = F1("body"),
    [LR_ATTRS] = F1("attributes"),
    [LR_DROPPED] = F2("droppedAttributesCount", "dropped_attributes_count"),
    [LR_FLAGS] = F1("flags"),
    [LR_TRACE] = F2("traceId", "trace_id"),
    [LR_SPAN] = F2("spanId", "span_id"),
    [LR_EVENT] = F2("eventName", "event_name"),
};

static int log_body(struct jd *j, struct log_row *l)
{
    struct body_sink sink;
    size_t mark = j->h->len;
    int rc = any_value(j, 1, &sink);
    if (rc < 0) {
        return rc;
    }
    l->body_str = (struct mstr){0};
    l->body_val = (struct blob){0};
    if (sink.is_str) {
        l->body_type = VAL_STR;
        l->body_str = sink.str;
    } else if (j->h->p[mark] == VAL_EMPTY) {
        l->body_type = VAL_EMPTY;
        j->h->len = mark;
    } else {
        l->body_type = (enum val_type)j->h->p[mark];
        l->body_val = (struct blob){(uint32_t)mark, (uint32_t)(j->h->len - mark)};
    }
    return 0;
}

static int log_record(struct jd *j, uint32_t si)
{
    struct log_row *l = batch_add_log(j->b);
    bool has;
    int rc;
    if (l == NULL) {
        return nomem(j);
    }
    l->scope = si;
    if (take_null(j)) {
        return 0;
    }
    if ((rc = obj_open(j, "logRecords")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, log_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        if (f < 0 || take_null(j)) {
            if (f < 0 && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        switch (f) {
        case LR_TIME:
            rc = rd_u64(j, "timeUnixNano", &l->time_ns);
            break;
        case LR_OBSERVED:
            rc = rd_u64(j, "observedTimeUnixNano", &l->observed_ns);
            break;
        case LR_SEVNUM:
            rc = rd_enum(j, "severityNumber", severity_names, NF(severity_names),
                         &l->severity_number);
            break;
        case LR_SEVTEXT:
            rc = rd_mstr(j, "severityText", &l->severity_text);
            break;
        case LR_BODY:
            rc = log_body(j, l);
            break;
        case LR_ATTRS:
            rc = attr_list(j, "attributes", &l->attrs);
            break;
        case LR_DROPPED:
            rc = rd_u32(j, "droppedAttributesCount", &l->dropped_attrs);
            break;
        case LR_FLAGS:
            rc = rd_u32(j, "flags", &l->flags);
            break;
        case LR_TRACE:
            rc = rd_id(j, "traceId", l->trace_id, 16, &has);
            l->has_trace_id = has;
            break;
        case LR_SPAN:
            rc = rd_id(j, "spanId", l->span_id, 8, &has);
            l->has_span_id = has;
            break;
        default:
            rc = rd_mstr(j, "eventName", &l->event_name);
            break;
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

/* ---- traces ---- */

enum { EV_TIME, EV_NAME, EV_ATTRS, EV_DROPPED };
static const struct fdef event_fields[] = {
    [EV_TIME] = F2("timeUnixNano", "time_unix_nano"),
    [EV_NAME] = F1("name"),
    [EV_ATTRS] = F1("attributes"),
    [EV_DROPPED] = F2("droppedAttributesCount", "dropped_attributes_count"),
};

/* u32 count + u32 nbytes + the attributes found at |pos|. */
static int counted_attrs_at(struct jd *j, size_t pos, const char *what)
{
    size_t hdr = j->h->len;
    struct attrs at;
    int rc;
    if (vbuf_put_u32(j->h, 0) < 0 || vbuf_put_u32(j->h, 0) < 0) {
        return nomem(j);
    }
    if ((rc = attr_list_at(j, pos, what, &at)) < 0) {
        return rc;
    }
    vbuf_patch_u32(j->h, hdr, at.count);
    vbuf_patch_u32(j->h, hdr + 4, at.blob.len);
    return 0;
}

/* One Span.Event: u64 time, uv name, u32 dropped, u32 count, u32 nbytes, attrs. */
static int event(struct jd *j)
{
    uint64_t t = 0;
    uint32_t dropped = 0;
    struct jsonlex_str name = {0};
    size_t attrs = NONE;
    int rc = 0;
    if (!take_null(j)) {
        if ((rc = obj_open(j, "events")) < 0) {
            return rc;
        }
        for (struct fcur fc = FCUR(j, event_fields); (rc = next_field(j, &fc)) > 0;) {
            int f = fc.f;
            if (f < 0 || take_null(j)) {
                rc = f < 0 ? skip_value(j) : 0;
            } else if (f == EV_TIME) {
                rc = rd_u64(j, "events.timeUnixNano", &t);
            } else if (f == EV_NAME) {
                rc = rd_jstr(j, "events.name", &name);
            } else if (f == EV_ATTRS) {
                rc = defer(j, &attrs);
            } else {
                rc = rd_u32(j, "events.droppedAttributesCount", &dropped);
            }
            if (rc < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    if (vbuf_put_u64(j->h, t) < 0 || heap_jstr(j, &name) < 0 || vbuf_put_u32(j->h, dropped) < 0) {
        return nomem(j);
    }
    return counted_attrs_at(j, attrs, "events.attributes");
}

enum { LK_TRACE, LK_SPAN, LK_STATE, LK_ATTRS, LK_DROPPED, LK_FLAGS };
static const struct fdef link_fields[] = {
    [LK_TRACE] = F2("traceId", "trace_id"),
    [LK_SPAN] = F2("spanId", "span_id"),
    [LK_STATE] = F2("traceState", "trace_state"),
    [LK_ATTRS] = F1("attributes"),
    [LK_DROPPED] = F2("droppedAttributesCount", "dropped_attributes_count"),
    [LK_FLAGS] = F1("flags"),
};

/* One Span.Link: 16 trace id, 8 span id, uv trace state, u32 flags, u32 dropped, attrs. */
static int link(struct jd *j)
{
    uint8_t tid[16] = {0}, sid[8] = {0};
    uint32_t flags = 0, dropped = 0;
    struct jsonlex_str state = {0};
    size_t attrs = NONE;
    bool has;
    int rc = 0;
    if (!take_null(j)) {
        if ((rc = obj_open(j, "links")) < 0) {
            return rc;
        }
        for (struct fcur fc = FCUR(j, link_fields); (rc = next_field(j, &fc)) > 0;) {
            int f = fc.f;
            if (f < 0 || take_null(j)) {
                rc = f < 0 ? skip_value(j) : 0;
            } else if (f == LK_TRACE) {
                rc = rd_id(j, "links.traceId", tid, 16, &has);
            } else if (f == LK_SPAN) {
                rc = rd_id(j, "links.spanId", sid, 8, &has);
            } else if (f == LK_STATE) {
                rc = rd_jstr(j, "links.traceState", &state);
            } else if (f == LK_ATTRS) {
                rc = defer(j, &attrs);
            } else if (f == LK_DROPPED) {
                rc = rd_u32(j, "links.droppedAttributesCount", &dropped);
            } else {
                rc = rd_u32(j, "links.flags", &flags);
            }
            if (rc < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    if (vbuf_put(j->h, tid, 16) < 0 || vbuf_put(j->h, sid, 8) < 0 || heap_jstr(j, &state) < 0 ||
        vbuf_put_u32(j->h, flags) < 0 || vbuf_put_u32(j->h, dropped) < 0) {
        return nomem(j);
    }
    return counted_attrs_at(j, attrs, "links.attributes");
}

/* A list of events or links into one blob. */
static int blob_list(struct jd *j, const char *what, int (*one)(struct jd *), struct blob *out,
                     uint32_t *n)
{
    size_t off = j->h->len;
    bool first = true;
    int rc = arr_open(j, what);
    *n = 0;
    if (rc < 0) {
        return rc;
    }
    while ((rc = arr_next(j, &first)) > 0) {
        if ((rc = one(j)) < 0) {
            return rc;
        }
        (*n)++;
    }
    if (rc < 0) {
        return rc;
    }
    *out = (struct blob){(uint32_t)off, (uint32_t)(j->h->len - off)};
    return 0;
}

enum { ST_MESSAGE, ST_CODE };
static const struct fdef status_fields[] = {
    [ST_MESSAGE] = F1("message"),
    [ST_CODE] = F1("code"),
};

static int status_msg(struct jd *j, struct span_row *sp)
{
    int rc = obj_open(j, "status");
    if (rc < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, status_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        if (f < 0 || take_null(j)) {
            rc = f < 0 ? skip_value(j) : 0;
        } else if (f == ST_MESSAGE) {
            rc = rd_mstr(j, "status.message", &sp->status_message);
        } else {
            rc = rd_enum(j, "status.code", status_names, NF(status_names), &sp->status_code);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

enum {
    SP_TRACE,
    SP_SPAN,
    SP_STATE,
    SP_PARENT,
    SP_FLAGS,
    SP_NAME,
    SP_KIND,
    SP_START,
    SP_END,
    SP_ATTRS,
    SP_DROPPED_ATTRS,
    SP_EVENTS,
    SP_DROPPED_EVENTS,
    SP_LINKS,
    SP_DROPPED_LINKS,
    SP_STATUS,
};
static const struct fdef span_fields[] = {
    [SP_TRACE] = F2("traceId", "trace_id"),
    [SP_SPAN] = F2("spanId", "span_id"),
    [SP_STATE] = F2("traceState", "trace_state"),
    [SP_PARENT] = F2("parentSpanId", "parent_span_id"),
    [SP_FLAGS] = F1("flags"),
    [SP_NAME] = F1("name"),
    [SP_KIND] = F1("kind"),
    [SP_START] = F2("startTimeUnixNano", "start_time_unix_nano"),
    [SP_END] = F2("endTimeUnixNano", "end_time_unix_nano"),
    [SP_ATTRS] = F1("attributes"),
    [SP_DROPPED_ATTRS] = F2("droppedAttributesCount", "dropped_attributes_count"),
    [SP_EVENTS] = F1("events"),
    [SP_DROPPED_EVENTS] = F2("droppedEventsCount", "dropped_events_count"),
    [SP_LINKS] = F1("links"),
    [SP_DROPPED_LINKS] = F2("droppedLinksCount", "dropped_links_count"),
    [SP_STATUS] = F1("status"),
};

static int span(struct jd *j, uint32_t si)
{
    struct span_row *sp = batch_add_span(j->b);
    bool has;
    int rc;
    if (sp == NULL) {
        return nomem(j);
    }
    sp->scope = si;
    if (take_null(j)) {
        return 0;
    }
    if ((rc = obj_open(j, "spans")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, span_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        if (f < 0 || take_null(j)) {
            if (f < 0 && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        switch (f) {
        case SP_TRACE:
            rc = rd_id(j, "traceId", sp->trace_id, 16, &has);
            break;
        case SP_SPAN:
            rc = rd_id(j, "spanId", sp->span_id, 8, &has);
            break;
        case SP_STATE:
            rc = rd_mstr(j, "traceState", &sp->trace_state);
            break;
        case SP_PARENT:
            rc = rd_id(j, "parentSpanId", sp->parent_span_id, 8, &has);
            sp->has_parent = has;
            break;
        case SP_FLAGS:
            rc = rd_u32(j, "flags", &sp->flags);
            break;
        case SP_NAME:
            rc = rd_mstr(j, "name", &sp->name);
            break;
        case SP_KIND:
            rc = rd_enum(j, "kind", span_kind_names, NF(span_kind_names), &sp->kind);
            break;
        case SP_START:
            rc = rd_u64(j, "startTimeUnixNano", &sp->start_ns);
            break;
        case SP_END:
            rc = rd_u64(j, "endTimeUnixNano", &sp->end_ns);
            break;
        case SP_ATTRS:
            rc = attr_list(j, "attributes", &sp->attrs);
            break;
        case SP_DROPPED_ATTRS:
            rc = rd_u32(j, "droppedAttributesCount", &sp->dropped_attrs);
            break;
        case SP_EVENTS:
            rc = blob_list(j, "events", event, &sp->events, &sp->n_events);
            break;
        case SP_DROPPED_EVENTS:
            rc = rd_u32(j, "droppedEventsCount", &sp->dropped_events);
            break;
        case SP_LINKS:
            rc = blob_list(j, "links", link, &sp->links, &sp->n_links);
            break;
        case SP_DROPPED_LINKS:
            rc = rd_u32(j, "droppedLinksCount", &sp->dropped_links);
            break;
        default:
            rc = status_msg(j, sp);
            break;
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

/* ---- metrics ---- */

/* A list of numbers: u32 n, then n u64 (|dbl| false) or n f64, into the heap. */
static int num_list(struct jd *j, const char *what, bool dbl)
{
    size_t hdr = j->h->len;
    uint32_t n = 0;
    bool first = true;
    int rc;
    if (vbuf_put_u32(j->h, 0) < 0) {
        return nomem(j);
    }
    if ((rc = arr_open(j, what)) < 0) {
        return rc;
    }
    /* the compact form first: numbers and ',' with no blanks, read in place;
     * the general loop takes over at anything else (the cursor then at the
     * ',' before the element it could not read) */
    const char *s = j->lx.s;
    for (size_t i = j->lx.pos + !first, used; i < j->lx.n && (first || s[i - 1] == ',');
         i = j->lx.pos + 1) {
        uint64_t v;
        bool ok, neg = false;
        if (dbl) {
            double d;
            ok = jdnum_f64(s + i, j->lx.n - i, &d, &used);
            memcpy(&v, &d, 8);
        } else {
            ok = jdnum_int(s + i, j->lx.n - i, &neg, &v, &used) && !neg;
        }
        if (!ok || i + used >= j->lx.n || (s[i + used] != ',' && s[i + used] != ']')) {
            break;
        }
        if (vbuf_put_u64(j->h, v) < 0) {
            return nomem(j);
        }
        n++;
        first = false;
        j->lx.pos = i + used;
        if (s[j->lx.pos] == ']') {
            break;
        }
    }
    while ((rc = arr_next(j, &first)) > 0) {
        if (dbl) {
            double v;
            if ((rc = rd_f64(j, what, &v)) < 0) {
                return rc;
            }
            if (vbuf_put_f64(j->h, v) < 0) {
                return nomem(j);
            }
        } else {
            uint64_t v;
            if ((rc = rd_u64(j, what, &v)) < 0) {
                return rc;
            }
            if (vbuf_put_u64(j->h, v) < 0) {
                return nomem(j);
            }
        }
        n++;
    }
    if (rc < 0) {
        return rc;
    }
    vbuf_patch_u32(j->h, hdr, n);
    return 0;
}

/* A number list found at |pos| earlier (or an empty one). */
static int num_list_at(struct jd *j, size_t pos, const char *what, bool dbl)
{
    if (pos == NONE) {
        return vbuf_put_u32(j->h, 0) < 0 ? nomem(j) : 0;
    }
    size_t end = j->lx.pos;
    j->lx.pos = pos;
    int rc = num_list(j, what, dbl);
    j->lx.pos = end;
    return rc;
}

enum { BK_OFFSET, BK_COUNTS };
static const struct fdef bucket_fields[] = {
    [BK_OFFSET] = F1("offset"),
    [BK_COUNTS] = F2("bucketCounts", "bucket_counts"),
};

/* ExponentialHistogram Buckets found at |pos|: u32 offset, u32 n, n u64. */
static int buckets_at(struct jd *j, size_t pos, const char *what, bool here)
{
    size_t hdr = j->h->len, end = j->lx.pos;
    int32_t offset = 0;
    bool have_counts = false;
    int rc = 0;
    if (vbuf_put_u32(j->h, 0) < 0) {
        return nomem(j);
    }
    if (pos != NONE) {
        j->lx.pos = pos;
        if ((rc = obj_open(j, what)) < 0) {
            return rc;
        }
        for (struct fcur fc = FCUR(j, bucket_fields); (rc = next_field(j, &fc)) > 0;) {
            int f = fc.f;
            if (f < 0 || take_null(j)) {
                rc = f < 0 ? skip_value(j) : 0;
            } else if (f == BK_OFFSET) {
                rc = rd_i32(j, "offset", &offset);
            } else {
                j->h->len = hdr + 4; /* a repeated list replaces the first */
                rc = num_list(j, "bucketCounts", false);
                have_counts = true;
            }
            if (rc < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
        if (!here) {
            j->lx.pos = end;
        }
    }
    if (!have_counts && vbuf_put_u32(j->h, 0) < 0) {
        return nomem(j);
    }
    vbuf_patch_u32(j->h, hdr, (uint32_t)offset);
    return 0;
}

enum { VQ_QUANTILE, VQ_VALUE };
static const struct fdef vaq_fields[] = {
    [VQ_QUANTILE] = F1("quantile"),
    [VQ_VALUE] = F1("value"),
};

/* SummaryDataPoint quantile values found at |pos|: u32 n, n x (f64, f64). */
static int quantiles_at(struct jd *j, size_t pos, bool here)
{
    size_t hdr = j->h->len, end = j->lx.pos;
    uint32_t n = 0;
    bool first = true;
    int rc;
    if (vbuf_put_u32(j->h, 0) < 0) {
        return nomem(j);
    }
    if (pos == NONE) {
        return 0;
    }
    j->lx.pos = pos;
    if ((rc = arr_open(j, "quantileValues")) < 0) {
        return rc;
    }
    while ((rc = arr_next(j, &first)) > 0) {
        double q = 0, v = 0;
        if (!take_null(j)) {
            if ((rc = obj_open(j, "quantileValues")) < 0) {
                return rc;
            }
            for (struct fcur fc = FCUR(j, vaq_fields); (rc = next_field(j, &fc)) > 0;) {
                int f = fc.f;
                if (f < 0 || take_null(j)) {
                    rc = f < 0 ? skip_value(j) : 0;
                } else {
                    rc = rd_f64(j, f == VQ_QUANTILE ? "quantile" : "value",
                                f == VQ_QUANTILE ? &q : &v);
                }
                if (rc < 0) {
                    return rc;
                }
            }
            if (rc < 0) {
                return rc;
            }
        }
        if (vbuf_put_f64(j->h, q) < 0 || vbuf_put_f64(j->h, v) < 0) {
            return nomem(j);
        }
        n++;
    }
    if (rc < 0) {
        return rc;
    }
    vbuf_patch_u32(j->h, hdr, n);
    if (!here) {
        j->lx.pos = end;
    }
    return 0;
}

/* What list_inline reads. */
enum { LI_COUNTS, LI_BOUNDS, LI_POSITIVE, LI_NEGATIVE, LI_QUANTILES };

/*
 * A detail member read where it is (for LI_POSITIVE, after a placeholder
 * for the exponential histogram's scale, zero count and zero threshold),
 * |*pos| set to where its value starts. When that fails the heap and the
 * cursor are put back and the member is deferred (skipped, to be read again
 * at |*pos| later), so that errors are those of the deferred path: returns
 * 1 then, 0 when read in place, or defer's error.
 */
static int list_inline(struct jd *j, size_t *pos, int what)
{
    size_t mark = j->h->len;
    int rc;
    *pos = (ws(j), j->lx.pos);
    switch (what) {
    case LI_COUNTS:
        rc = num_list(j, "bucketCounts", false);
        break;
    case LI_BOUNDS:
        rc = num_list(j, "explicitBounds", true);
        break;
    case LI_POSITIVE:
        rc = vbuf_put_u32(j->h, 0) < 0 || vbuf_put_u64(j->h, 0) < 0 || vbuf_put_u64(j->h, 0) < 0
                 ? -ENOMEM
                 : buckets_at(j, *pos, "positive", true);
        break;
    case LI_NEGATIVE:
        rc = buckets_at(j, *pos, "negative", true);
        break;
    default:
        rc = quantiles_at(j, *pos, true);
        break;
    }
    if (rc == 0) {
        return 0;
    }
    j->h->len = mark;
    j->lx.pos = *pos;
    rc = defer(j, pos);
    return rc < 0 ? rc : 1;
}

enum { EX_ATTRS, EX_TIME, EX_DOUBLE, EX_INT, EX_SPAN, EX_TRACE };
static const struct fdef exemplar_fields[] = {
    [EX_ATTRS] = F2("filteredAttributes", "filtered_attributes"),
    [EX_TIME] = F2("timeUnixNano", "time_unix_nano"),
    [EX_DOUBLE] = F2("asDouble", "as_double"),
    [EX_INT] = F2("asInt", "as_int"),
    [EX_SPAN] = F2("spanId", "span_id"),
    [EX_TRACE] = F2("traceId", "trace_id"),
};

/*
 * One Exemplar: u64 time, u8 point_value, 8 value bytes, u8 has_trace_id,
 * 16 trace id, u8 has_span_id, 8 span id, u32 count, u32 nbytes, attrs.
 */
static int exemplar(struct jd *j)
{
    uint64_t t = 0, raw = 0;
    uint8_t vt = PV_NONE, tid[16] = {0}, sid[8] = {0};
    bool has_t = false, has_s = false;
    size_t attrs = NONE;
    int rc = 0;
    if (!take_null(j)) {
        if ((rc = obj_open(j, "exemplars")) < 0) {
            return rc;
        }
        for (struct fcur fc = FCUR(j, exemplar_fields); (rc = next_field(j, &fc)) > 0;) {
            int f = fc.f;
            if (f < 0 || take_null(j)) {
                rc = f < 0 ? skip_value(j) : 0;
            } else if (f == EX_ATTRS) {
                rc = defer(j, &attrs);
            } else if (f == EX_TIME) {
                rc = rd_u64(j, "exemplars.timeUnixNano", &t);
            } else if (f == EX_DOUBLE) {
                double d;
                if ((rc = rd_f64(j, "exemplars.asDouble", &d)) == 0) {
                    memcpy(&raw, &d, 8);
                    vt = PV_DOUBLE;
                }
            } else if (f == EX_INT) {
                int64_t i;
                if ((rc = rd_i64(j, "exemplars.asInt", &i)) == 0) {
                    raw = (uint64_t)i;
                    vt = PV_INT;
                }
            } else if (f == EX_SPAN) {
                rc = rd_id(j, "exemplars.spanId", sid, 8, &has_s);
            } else {
                rc = rd_id(j, "exemplars.traceId", tid, 16, &has_t);
            }
            if (rc < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    if (vbuf_put_u64(j->h, t) < 0 || vbuf_put_u8(j->h, vt) < 0 || vbuf_put_u64(j->h, raw) < 0 ||
        vbuf_put_u8(j->h, has_t) < 0 || vbuf_put(j->h, tid, 16) < 0 ||
        vbuf_put_u8(j->h, has_s) < 0 || vbuf_put(j->h, sid, 8) < 0) {
        return nomem(j);
    }
    return counted_attrs_at(j, attrs, "exemplars.filteredAttributes");
}

enum {
    DP_ATTRS,
    DP_START,
    DP_TIME,
    DP_DOUBLE,
    DP_INT,
    DP_EXEMPLARS,
    DP_FLAGS,
    DP_COUNT,
    DP_SUM,
    DP_BUCKETS,
    DP_BOUNDS,
    DP_MIN,
    DP_MAX,
    DP_SCALE,
    DP_ZERO_COUNT,
    DP_POSITIVE,
    DP_NEGATIVE,
    DP_ZERO_THRESHOLD,
    DP_QUANTILES,
};
static const struct fdef point_fields[] = {
    [DP_ATTRS] = F1("attributes"),
    [DP_START] = F2("startTimeUnixNano", "start_time_unix_nano"),
    [DP_TIME] = F2("timeUnixNano", "time_unix_nano"),
    [DP_DOUBLE] = F2("asDouble", "as_double"),
    [DP_INT] = F2("asInt", "as_int"),
    [DP_EXEMPLARS] = F1("exemplars"),
    [DP_FLAGS] = F1("flags"),
    [DP_COUNT] = F1("count"),
    [DP_SUM] = F1("sum"),
    [DP_BUCKETS] = F2("bucketCounts", "bucket_counts"),
    [DP_BOUNDS] = F2("explicitBounds", "explicit_bounds"),
    [DP_MIN] = F1("min"),
    [DP_MAX] = F1("max"),
    [DP_SCALE] = F1("scale"),
    [DP_ZERO_COUNT] = F2("zeroCount", "zero_count"),
    [DP_POSITIVE] = F1("positive"),
    [DP_NEGATIVE] = F1("negative"),
    [DP_ZERO_THRESHOLD] = F2("zeroThreshold", "zero_threshold"),
    [DP_QUANTILES] = F2("quantileValues", "quantile_values"),
};

/* The members each kind of data point has (bit per DP_*). */
#define B(x) (1u << (x))
#define DP_COMMON (B(DP_ATTRS) | B(DP_START) | B(DP_TIME) | B(DP_FLAGS))
static const uint32_t point_members[] = {
    [MK_NONE] = 0,
    [MK_GAUGE] = DP_COMMON | B(DP_DOUBLE) | B(DP_INT) | B(DP_EXEMPLARS),
    [MK_SUM] = DP_COMMON | B(DP_DOUBLE) | B(DP_INT) | B(DP_EXEMPLARS),
    [MK_HISTOGRAM] = DP_COMMON | B(DP_COUNT) | B(DP_SUM) | B(DP_BUCKETS) | B(DP_BOUNDS) |
                     B(DP_MIN) | B(DP_MAX) | B(DP_EXEMPLARS),
    [MK_EXP_HISTOGRAM] = DP_COMMON | B(DP_COUNT) | B(DP_SUM) | B(DP_SCALE) | B(DP_ZERO_COUNT) |
                         B(DP_POSITIVE) | B(DP_NEGATIVE) | B(DP_MIN) | B(DP_MAX) |
                         B(DP_ZERO_THRESHOLD) | B(DP_EXEMPLARS),
    [MK_SUMMARY] = DP_COMMON | B(DP_COUNT) | B(DP_SUM) | B(DP_QUANTILES),
};

static int point(struct jd *j, uint32_t mi, enum metric_kind kind)
{
    struct point_row *p = batch_add_point(j->b);
    size_t buckets = NONE, bounds = NONE, pos = NONE, neg = NONE, quant = NONE;
    /* histogram buckets and bounds read in place (the detail blob then is
     * heap[d0, d1)): 0 not yet, 1 buckets, 2 both, -1 deferred instead */
    int hs = 0;
    size_t d0 = 0, d1 = 0;
    int32_t scale = 0;
    uint64_t zero_count = 0;
    double zero_threshold = 0;
    int rc = 0;
    if (p == NULL) {
        return nomem(j);
    }
    p->metric = mi;
    p->has_sum = kind == MK_SUMMARY;
    if (!take_null(j)) {
        if ((rc = obj_open(j, "dataPoints")) < 0) {
            return rc;
        }
        for (struct fcur fc = FCUR(j, point_fields); (rc = next_field(j, &fc)) > 0;) {
            int f = fc.f;
            if (f < 0 || !(point_members[kind] & B(f)) || take_null(j)) {
                if ((f < 0 || !(point_members[kind] & B(f))) && (rc = skip_value(j)) < 0) {
                    return rc;
                }
                continue;
            }
            switch (f) {
            case DP_ATTRS:
                rc = attr_list(j, "attributes", &p->attrs);
                break;
            case DP_START:
                rc = rd_u64(j, "startTimeUnixNano", &p->start_ns);
                break;
            case DP_TIME:
                rc = rd_u64(j, "timeUnixNano", &p->time_ns);
                break;
            case DP_DOUBLE:
                rc = rd_f64(j, "asDouble", &p->value.d);
                p->value_type = PV_DOUBLE;
                break;
            case DP_INT:
                rc = rd_i64(j, "asInt", &p->value.i);
                p->value_type = PV_INT;
                break;
            case DP_EXEMPLARS:
                rc = blob_list(j, "exemplars", exemplar, &p->exemplars, &p->n_exemplars);
                break;
            case DP_FLAGS:
                rc = rd_u32(j, "flags", &p->flags);
                break;
            case DP_COUNT:
                rc = rd_u64(j, "count", &p->count);
                break;
            case DP_SUM:
                rc = rd_f64(j, "sum", &p->sum);
                p->has_sum = true;
                break;
            case DP_MIN:
                rc = rd_f64(j, "min", &p->min);
                p->has_min = true;
                break;
            case DP_MAX:
                rc = rd_f64(j, "max", &p->max);
                p->has_max = true;
                break;
            case DP_SCALE:
                rc = rd_i32(j, "scale", &scale);
                break;
            case DP_ZERO_COUNT:
                rc = rd_u64(j, "zeroCount", &zero_count);
                break;
            case DP_ZERO_THRESHOLD:
                rc = rd_f64(j, "zeroThreshold", &zero_threshold);
                break;
            case DP_BUCKETS: /* read in place when it can be the detail's start */
                hs = hs == 0 && bounds == NONE ? 1 : -1;
                d0 = j->h->len;
                rc = hs == 1 ? list_inline(j, &buckets, LI_COUNTS) : defer(j, &buckets);
                hs = rc == 1 ? -1 : hs; /* it fell back to defer */
                d1 = j->h->len;
                break;
            case DP_BOUNDS: /* in place right after the buckets read in place */
                hs = hs == 1 && j->h->len == d1 ? 2 : -1;
                rc = hs == 2 ? list_inline(j, &bounds, LI_BOUNDS) : defer(j, &bounds);
                hs = rc == 1 ? -1 : hs;
                d1 = j->h->len;
                break;
            case DP_POSITIVE: /* in place, after a header placeholder */
                hs = hs == 0 && neg == NONE ? 1 : -1;
                d0 = j->h->len;
                rc = hs == 1 ? list_inline(j, &pos, LI_POSITIVE) : defer(j, &pos);
                hs = rc == 1 ? -1 : hs;
                d1 = j->h->len;
                break;
            case DP_NEGATIVE: /* in place right after the positive buckets */
                hs = hs == 1 && j->h->len == d1 ? 2 : -1;
                rc = hs == 2 ? list_inline(j, &neg, LI_NEGATIVE) : defer(j, &neg);
                hs = rc == 1 ? -1 : hs;
                d1 = j->h->len;
                break;
            default: /* quantile values: the whole detail, in place */
                hs = hs == 0 ? 2 : -1;
                d0 = j->h->len;
                rc = hs == 2 ? list_inline(j, &quant, LI_QUANTILES) : defer(j, &quant);
                hs = rc == 1 ? -1 : hs;
                d1 = j->h->len;
                break;
            }
            if (rc < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    size_t off = j->h->len, end = NONE; /* the detail: heap[off, end or the heap's end) */
    if (kind == MK_HISTOGRAM && hs == 1 && bounds == NONE && off == d1) {
        if (vbuf_put_u32(j->h, 0) < 0) { /* no bounds */
            return nomem(j);
        }
        off = d0;
    } else if (kind == MK_HISTOGRAM && hs == 2) {
        off = d0;
        end = d1;
    } else if (kind == MK_HISTOGRAM) {
        if ((rc = num_list_at(j, buckets, "bucketCounts", false)) < 0 ||
            (rc = num_list_at(j, bounds, "explicitBounds", true)) < 0) {
            return rc;
        }
    } else if (kind == MK_EXP_HISTOGRAM && hs >= 1 && (hs == 2 || (neg == NONE && off == d1))) {
        if (hs == 1 && (rc = buckets_at(j, NONE, "negative", false)) < 0) {
            return rc;
        }
        end = hs == 2 ? d1 : NONE;
        uint64_t zt;
        memcpy(&zt, &zero_threshold, 8);
        vbuf_patch_u32(j->h, d0, (uint32_t)scale);
        for (int i = 0; i < 8; i++) { /* the header, little-endian as vbuf_put_u64 writes */
            j->h->p[d0 + 4 + i] = (uint8_t)(zero_count >> (8 * i));
            j->h->p[d0 + 12 + i] = (uint8_t)(zt >> (8 * i));
        }
        off = d0;
    } else if (kind == MK_EXP_HISTOGRAM) {
        if (vbuf_put_u32(j->h, (uint32_t)scale) < 0 || vbuf_put_u64(j->h, zero_count) < 0 ||
            vbuf_put_f64(j->h, zero_threshold) < 0) {
            return nomem(j);
        }
        if ((rc = buckets_at(j, pos, "positive", false)) < 0 ||
            (rc = buckets_at(j, neg, "negative", false)) < 0) {
            return rc;
        }
    } else if (kind == MK_SUMMARY && hs == 2) {
        off = d0;
        end = d1;
    } else if (kind == MK_SUMMARY) {
        if ((rc = quantiles_at(j, quant, false)) < 0) {
            return rc;
        }
    }
    p->detail = (struct blob){(uint32_t)off, (uint32_t)((end != NONE ? end : j->h->len) - off)};
    return 0;
}

enum { MD_POINTS, MD_TEMPORALITY, MD_MONOTONIC };
static const struct fdef data_fields[] = {
    [MD_POINTS] = F2("dataPoints", "data_points"),
    [MD_TEMPORALITY] = F2("aggregationTemporality", "aggregation_temporality"),
    [MD_MONOTONIC] = F2("isMonotonic", "is_monotonic"),
};

/* Gauge, Sum, Histogram, ExponentialHistogram or Summary of metric |mi|. */
static int metric_data(struct jd *j, uint32_t mi, enum metric_kind kind, const char *what)
{
    int rc = obj_open(j, what);
    if (rc < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, data_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        struct metric_row *m = &j->b->metrics[mi];
        bool known = f == MD_POINTS ||
                     (f == MD_TEMPORALITY && kind != MK_GAUGE && kind != MK_SUMMARY) ||
                     (f == MD_MONOTONIC && kind == MK_SUM);
        if (!known || take_null(j)) {
            if (!known && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        if (f == MD_TEMPORALITY) {
            rc = rd_enum(j, "aggregationTemporality", temporality_names, NF(temporality_names),
                         &m->temporality);
        } else if (f == MD_MONOTONIC) {
            rc = rd_bool(j, "isMonotonic", &m->monotonic);
        } else {
            bool efirst = true;
            if ((rc = arr_open(j, "dataPoints")) < 0) {
                return rc;
            }
            while ((rc = arr_next(j, &efirst)) > 0) {
                if ((rc = point(j, mi, kind)) < 0) {
                    return rc;
                }
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

enum { MT_NAME, MT_DESC, MT_UNIT, MT_GAUGE, MT_SUM, MT_HIST, MT_EXP, MT_SUMMARY, MT_METADATA };
static const struct fdef metric_fields[] = {
    [MT_NAME] = F1("name"),
    [MT_DESC] = F1("description"),
    [MT_UNIT] = F1("unit"),
    [MT_GAUGE] = F1("gauge"),
    [MT_SUM] = F1("sum"),
    [MT_HIST] = F1("histogram"),
    [MT_EXP] = F2("exponentialHistogram", "exponential_histogram"),
    [MT_SUMMARY] = F1("summary"),
    [MT_METADATA] = F1("metadata"),
};

static int metric(struct jd *j, uint32_t si)
{
    uint32_t mi = j->b->n_metrics, rows_mark = j->b->n_rows;
    int rc;
    if (batch_add_metric(j->b) == NULL) {
        return nomem(j);
    }
    j->b->metrics[mi].scope = si;
    if (take_null(j)) {
        return 0;
    }
    if ((rc = obj_open(j, "metrics")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, metric_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        struct metric_row *m = &j->b->metrics[mi];
        if (f < 0 || take_null(j)) {
            if (f < 0 && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        switch (f) {
        case MT_NAME:
            rc = rd_mstr(j, "name", &m->name);
            break;
        case MT_DESC:
            rc = rd_mstr(j, "description", &m->description);
            break;
        case MT_UNIT:
            rc = rd_mstr(j, "unit", &m->unit);
            break;
        case MT_METADATA:
            rc = attr_list(j, "metadata", &m->metadata);
            break;
        default: {
            static const enum metric_kind kinds[] = {
                [MT_GAUGE] = MK_GAUGE,       [MT_SUM] = MK_SUM,         [MT_HIST] = MK_HISTOGRAM,
                [MT_EXP] = MK_EXP_HISTOGRAM, [MT_SUMMARY] = MK_SUMMARY,
            };
            /* the data oneof: the last member wins, with its points only */
            j->b->n_rows = rows_mark;
            m->kind = kinds[f];
            m->temporality = 0;
            m->monotonic = false;
            rc = metric_data(j, mi, kinds[f], metric_fields[f].camel);
            break;
        }
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

/* ---- envelopes ---- */

enum { SE_SCOPE, SE_LOGS, SE_SPANS, SE_METRICS, SE_SCHEMA };
static const struct fdef scope_env_fields[] = {
    [SE_SCOPE] = F1("scope"),
    [SE_LOGS] = F2("logRecords", "log_records"),
    [SE_SPANS] = F1("spans"),
    [SE_METRICS] = F1("metrics"),
    [SE_SCHEMA] = F2("schemaUrl", "schema_url"),
};

static int scope_env(struct jd *j, uint32_t ri)
{
    uint32_t si = j->b->n_scopes;
    int items = j->sig == SIG_LOGS ? SE_LOGS : j->sig == SIG_TRACES ? SE_SPANS : SE_METRICS;
    int rc;
    if (batch_add_scope(j->b) == NULL) {
        return nomem(j);
    }
    j->b->scopes[si].resource = ri;
    if (take_null(j)) {
        return 0;
    }
    if ((rc = obj_open(j, "scope envelope")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, scope_env_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        bool known = f == SE_SCOPE || f == SE_SCHEMA || f == items;
        if (!known || take_null(j)) {
            if (!known && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        if (f == SE_SCOPE) {
            rc = scope_msg(j, si);
        } else if (f == SE_SCHEMA) {
            rc = rd_mstr(j, "schemaUrl", &j->b->scopes[si].schema_url);
        } else {
            bool efirst = true;
            if ((rc = arr_open(j, scope_env_fields[f].camel)) < 0) {
                return rc;
            }
            while ((rc = arr_next(j, &efirst)) > 0) {
                rc = j->sig == SIG_LOGS     ? log_record(j, si)
                     : j->sig == SIG_TRACES ? span(j, si)
                                            : metric(j, si);
                if (rc < 0) {
                    return rc;
                }
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

enum { RE_RESOURCE, RE_LOGS, RE_SPANS, RE_METRICS, RE_SCHEMA };
static const struct fdef resource_env_fields[] = {
    [RE_RESOURCE] = F1("resource"),
    [RE_LOGS] = F2("scopeLogs", "scope_logs"),
    [RE_SPANS] = F2("scopeSpans", "scope_spans"),
    [RE_METRICS] = F2("scopeMetrics", "scope_metrics"),
    [RE_SCHEMA] = F2("schemaUrl", "schema_url"),
};

static int resource_env(struct jd *j)
{
    uint32_t ri = j->b->n_resources;
    int items = j->sig == SIG_LOGS ? RE_LOGS : j->sig == SIG_TRACES ? RE_SPANS : RE_METRICS;
    int rc;
    if (batch_add_resource(j->b) == NULL) {
        return nomem(j);
    }
    if (take_null(j)) {
        return 0;
    }
    if ((rc = obj_open(j, "resource envelope")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, resource_env_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        bool known = f == RE_RESOURCE || f == RE_SCHEMA || f == items;
        if (!known || take_null(j)) {
            if (!known && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        if (f == RE_RESOURCE) {
            rc = resource_msg(j, ri);
        } else if (f == RE_SCHEMA) {
            rc = rd_mstr(j, "schemaUrl", &j->b->resources[ri].schema_url);
        } else {
            bool efirst = true;
            if ((rc = arr_open(j, resource_env_fields[f].camel)) < 0) {
                return rc;
            }
            while ((rc = arr_next(j, &efirst)) > 0) {
                if ((rc = scope_env(j, ri)) < 0) {
                    return rc;
                }
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

static const struct fdef request_fields[] = {
    [SIG_LOGS - 1] = F2("resourceLogs", "resource_logs"),
    [SIG_TRACES - 1] = F2("resourceSpans", "resource_spans"),
    [SIG_METRICS - 1] = F2("resourceMetrics", "resource_metrics"),
};

static int request(struct jd *j)
{
    int rc = obj_open(j, "request");
    if (rc < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, request_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        if (f != (int)j->sig - 1 || take_null(j)) {
            if (f != (int)j->sig - 1 && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        bool efirst = true;
        if ((rc = arr_open(j, request_fields[f].camel)) < 0) {
            return rc;
        }
        while ((rc = arr_next(j, &efirst)) > 0) {
            if ((rc = resource_env(j)) < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

/* ---- entry ---- */

/* utf8_check's answer (the offset of the first byte not part of valid
 * UTF-8, or |n|), skipping ASCII 32 bytes at a time: a request body is
 * almost all ASCII. */
static size_t body_utf8_check(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (n - i >= 32) {
            uint64_t w[4];
            memcpy(w, s + i, 32);
            if (((w[0] | w[1] | w[2] | w[3]) & 0x8080808080808080ull) == 0) {
                i += 32;
                continue;
            }
        }
        size_t end = n - i >= 32 ? i + 32 : n;
        while (i < end) { /* a sequence may run past |end| */
            if (s[i] < 0x80) {
                i++;
                continue;
            }
            size_t k = utf8_seq(s + i, n - i);
            if (k == 0) {
                return i;
            }
            i += k;
        }
    }
    return n;
}

int jsondec_decode(enum signal s, const char *body, size_t len, arena *a, struct batch *out,
                   char *err, size_t errlen)
{
    struct jd j = {
        .lx = {.s = body, .n = len},
        .a = a,
        .b = out,
        .h = &out->heap,
        .sig = s,
        .err = err,
        .errlen = errlen,
    };
    if (err != NULL && errlen != 0) {
        err[0] = '\0';
    }
    assert(out->signal == s && s >= SIG_LOGS && s <= SIG_METRICS); /* the caller's batch */
    /* on failure the batch is put back as it was, as pbdec does */
    uint32_t n_res = out->n_resources, n_scopes = out->n_scopes, n_metrics = out->n_metrics,
             n_rows = out->n_rows;
    size_t heap_len = out->heap.len;
    int rc;
    size_t bad = body_utf8_check((const uint8_t *)body, len);
    if (bad < len) {
        rc = fail(&j, bad, "invalid UTF-8");
    } else if (peekc(&j) != '{') {
        rc = fail(&j, j.lx.pos,
                  j.lx.pos < len ? "expected '{' (an export request object)"
                                 : "empty body (expected an export request object)");
    } else if ((rc = request(&j)) == 0 && peekc(&j) >= 0) {
        rc = fail(&j, j.lx.pos, "trailing characters after the request object");
    }
    if (rc == 0 && out->heap.len > UINT32_MAX) {
        if (err != NULL && errlen != 0) {
            snprintf(err, errlen, "%s json: decoded values exceed 4 GiB", signal_name(s));
        }
        rc = -ENOMEM; /* a limit, like the arena's */
    }
    if (rc < 0) {
        out->n_resources = n_res;
        out->n_scopes = n_scopes;
        out->n_metrics = n_metrics;
        out->n_rows = n_rows;
        out->heap.len = heap_len;
    }
    return rc;
}
