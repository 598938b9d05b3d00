/*
 * jsondec_int.h - what the files of the OTLP/JSON decoder share; nothing
 * outside proto/jsondec*.c includes this file. jsondec.h is the module's
 * public surface; jsondec.c's opening comment says how the decoder works.
 *
 * THE FILES
 *   jsondec.c          the entry (UTF-8 check, the batch put back on failure),
 *                      errors, the request, resource and scope envelopes, the
 *                      Resource and InstrumentationScope messages, member
 *                      names matched the general way
 *   jsondec_value.c    scalar members (strings, integers, doubles, enums, hex
 *                      ids), AnyValue, KeyValue (and its compact fast path),
 *                      attribute lists, counted attributes, blob lists
 *   jsondec_logs.c     LogRecord
 *   jsondec_traces.c   Span, its events, links and status
 *   jsondec_metrics.c  Metric, its data and data points: number lists,
 *                      histogram and exponential histogram buckets, summary
 *                      quantiles, exemplars, the in-place detail readers
 *   jsondec_num.c      numbers and hex ids read from the text (jsondec_num.h)
 * What every file calls per member (lexing, member-name matching) is static
 * inline here; the shared functions carry the jd_ prefix.
 */
#ifndef MIRADB_JSONDEC_INT_H
#define MIRADB_JSONDEC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "lib/jsonlex.h"
#include "proto/jsondec_num.h"
#include "storage/arena.h"
#include "storage/batch.h"

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
#define JD_DL_MAX 32
#define JD_KVC_MAX 8
#define JD_KVC_WAYS 16 /* a power of two */
#define JD_VQ_MAX 16
#define JD_PORD_KINDS 6 /* MK_NONE .. MK_SUMMARY */
#define JD_PORD_MAX 16

/* A compact KeyValue of a data point's attributes and what kv_fast_at
 * wrote for it (jsondec_value.c jd_point_attrs). */
struct jd_kvc {
    uint32_t at;   /* its text in the body: s[at, at + tlen), '{' through "}}" */
    uint32_t tlen; /* 0: none */
    uint32_t hoff, hlen;
};

/* A data point's k-th member as the last point of its kind had it: its
 * point_fields index |f|, the bits of its fdef cm that cm_eq asks for at the
 * cursor minus |back| (for k = 0 from the object's '{', whose bit is not
 * asked for) and how far the cursor then moves (past the ':'). */
struct jd_pm {
    uint32_t want;
    uint8_t back, adv, f;
};

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
     * began the object, m = -1) the last time; before that (JD_SUCC_DFLT
     * set) m + 1, or 0 after the last member, each table's filled in by
     * its first fcur (succ_set: bit t), so that next_field's guess is one
     * load. */
    uint8_t succ[TID_COUNT][FMAX];
    uint32_t succ_set;
    /* succ2[t][m + 1] - 1: the member that followed m before the one in
     * succ, tried second when the first guess misses (0: none). */
    uint8_t succ2[TID_COUNT][FMAX];
    /* The last list of doubles read whole (its text from '[' through ']'
     * and the values it gave, at most JD_DL_MAX): a list with the same
     * text, as the explicit bounds of one histogram's points are, is
     * copied instead of read again (jsondec_metrics.c num_list). */
    const char *dl_text;
    size_t dl_len;
    uint32_t dl_n;
    uint64_t dl_v[JD_DL_MAX];
    /* kvc[c]: c-th KeyValues of data point attributes that kv_fast_at read,
     * in the way a hash of their 16 bytes from kvc_voff[c] names (that
     * offset set by the first c-th one read: its last 8 bytes and the 8
     * after them, where a value ends, so that values of one key differing
     * in length or in their last bytes take different ways; 0 before). A
     * point's c-th KeyValue whose text is its way's is copied from the
     * heap instead of read again (jsondec_value.c jd_point_attrs). */
    struct jd_kvc kvc[JD_KVC_MAX][JD_KVC_WAYS];
    uint16_t kvc_voff[JD_KVC_MAX];
    /* The k-th compact ValueAtQuantile of the last summary point that had
     * one there: its text from the '{' through the ':' before the value,
     * {"quantile":Q,"value": or {"value": (vq_len bytes, at most 32; 0:
     * none), and the quantile it gives (0 without one). The same text is
     * that quantile (jsondec_metrics.c vaq_run). */
    char vq_text[JD_VQ_MAX][32];
    double vq_val[JD_VQ_MAX];
    uint8_t vq_len[JD_VQ_MAX];
    /* The last quoted 19-digit startTimeUnixNano u64_19 read: its 21 bytes
     * (st_ok: one was) and value (jsondec_metrics.c rd_start). */
    char st_text[24];
    uint64_t st_val;
    bool st_ok;
    /* The first 12 bytes (the quote and 11 digits) of the last quoted
     * 19-digit timeUnixNano u64_19 read, and their part of its value, the
     * value less its last 8 digits (tm_ok: one was; jsondec_metrics.c
     * rd_time). */
    char tm_text[12];
    bool tm_ok;
    uint64_t tm_hi;
    /* cpu_avx2(), asked once a body (jsondec_metrics.c uint_q_run): asking
     * it at every list of counts, as lib/ascii does, costs 20 Ir a point */
    bool avx2;
    /* The members (point_fields indices, each one of the kind's) a data
     * point of each metric kind had, in order, the last time: pord_n[kind]
     * of them, at most JD_PORD_MAX, each with the text that names it there
     * (struct jd_pm). The next point's k-th member is tried as
     * pord[kind][k] first (jsondec_metrics.c point). */
    struct jd_pm pord[JD_PORD_KINDS][JD_PORD_MAX];
    uint8_t pord_n[JD_PORD_KINDS];
    /* A data point of this kind was not read by the line path (members in
     * metrics.proto's order): the later ones go straight to the general
     * loop (jsondec_metrics.c point). */
    bool pline_off[JD_PORD_KINDS];
    /* h-jattr: kvh[k], for the 16 bytes after a compact KeyValue's
     * `{"key":"` of hash k: the head kv_head_at read there last (its text
     * at body offset |at|, '{' through the value's first byte, plen bytes,
     * at most 64; 0: none), the key's length and the value's type. A
     * KeyValue whose head is that text is read from its value on
     * (jsondec_value.c kv_keyed_at). Eight bytes an entry: the struct is
     * zeroed once a decode. */
    struct jd_kvh {
        uint32_t at;
        uint8_t plen, klen, type;
    } kvh[256];
};

#define NONE ((size_t)-1)

/* ---- errors (jsondec.c) ---- */

/* Sets the error text (with " at offset |at|"); returns -EPROTO. */
__attribute__((format(printf, 3, 4))) int jd_fail(struct jd *j, size_t at, const char *fmt, ...);
/* Sets the out-of-memory error text; returns -ENOMEM. */
int jd_nomem(struct jd *j);

/* ---- lexing (lib/jsonlex.h; its errors reported as this decoder's) ---- */

static inline int lexfail(struct jd *j)
{
    return jd_fail(j, j->lx.err_at, "%s", j->lx.err);
}

/* jsonlex_ws with the usual case first: compact JSON has no blank here. */
__attribute__((always_inline)) static inline void jd_ws(struct jsonlex *x)
{
    if (x->pos < x->n && (unsigned char)x->s[x->pos] > ' ') {
        return;
    }
    jsonlex_ws(x);
}

/* jsonlex_peek the same way. */
static inline int jd_peek(struct jsonlex *x)
{
    jd_ws(x);
    return x->pos < x->n ? (unsigned char)x->s[x->pos] : -1;
}

static inline void ws(struct jd *j)
{
    jd_ws(&j->lx);
}

/* The next non-blank byte, or -1 at the end. */
static inline int peekc(struct jd *j)
{
    return jd_peek(&j->lx);
}

/*
 * jsonlex_plain_end (the first '"', '\\' or control byte in s[i, n), or
 * |n|) with its first 16 bytes inline: most keys and short values end
 * there.
 */
static inline size_t plain_end(const char *s, size_t i, size_t n)
{
#ifdef __SSE2__
    if (n - i >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i hit =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                      _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                         _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f)));
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (m != 0) {
            return i + (size_t)__builtin_ctz(m);
        }
        return jsonlex_plain_end(s, i + 16, n);
    }
#endif
    return jsonlex_plain_end(s, i, n);
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
    struct jsonlex *x = &j->lx;
    /* the usual answer from the byte at the cursor: a value that is not a blank and not 'n' */
    if (x->pos < x->n && x->s[x->pos] != 'n' && (unsigned char)x->s[x->pos] > ' ') {
        return false;
    }
    jd_ws(x);
    if (x->n - x->pos >= 4 && memcmp(x->s + x->pos, "null", 4) == 0) {
        x->pos += 4;
        return true;
    }
    return false;
}

static inline int skip_value(struct jd *j)
{
    return jsonlex_skip(&j->lx) < 0 ? lexfail(j) : 0;
}

/* ---- the heap written in place (val.h's little-endian fixed widths) ---- */

/* Room for |n| more heap bytes: 0, or -ENOMEM with the error set. */
static inline int hroom(struct jd *j, size_t n)
{
    return j->h->cap - j->h->len >= n || vbuf_reserve(j->h, n) == 0 ? 0 : jd_nomem(j);
}

/* |v| as an unsigned varint at |d| (up to 10 bytes); returns the end. */
static inline uint8_t *put_uv(uint8_t *d, uint64_t v)
{
    for (; v >= 0x80; v >>= 7) {
        *d++ = (uint8_t)(v | 0x80);
    }
    *d++ = (uint8_t)v;
    return d;
}

/* Stores at the heap's end; the caller made room (hroom). */
static inline void hstore_u64(struct jd *j, uint64_t v)
{
    uint8_t *d = j->h->p + j->h->len;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(d, &v, 8);
#else
    for (int i = 0; i < 8; i++) {
        d[i] = (uint8_t)(v >> (8 * i));
    }
#endif
    j->h->len += 8;
}

static inline void hstore_u32(struct jd *j, uint32_t v)
{
    uint8_t *d = j->h->p + j->h->len;
    d[0] = (uint8_t)v;
    d[1] = (uint8_t)(v >> 8);
    d[2] = (uint8_t)(v >> 16);
    d[3] = (uint8_t)(v >> 24);
    j->h->len += 4;
}

/* vbuf_patch_u32 inline: |v| over the 4 heap bytes at |off| (written before). */
static inline void hpatch_u32(struct jd *j, size_t off, uint32_t v)
{
    uint8_t *d = j->h->p + off;
    d[0] = (uint8_t)v;
    d[1] = (uint8_t)(v >> 8);
    d[2] = (uint8_t)(v >> 16);
    d[3] = (uint8_t)(v >> 24);
}

static inline int hput_u64(struct jd *j, uint64_t v)
{
    int rc = hroom(j, 8);
    if (rc == 0) {
        hstore_u64(j, v);
    }
    return rc;
}

static inline int hput_f64(struct jd *j, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    return hput_u64(j, u);
}

static inline int hput_u32(struct jd *j, uint32_t v)
{
    int rc = hroom(j, 4);
    if (rc == 0) {
        hstore_u32(j, v);
    }
    return rc;
}

/* ---- objects and arrays (jsondec.c) ---- */

/* jd_obj_open after a blank, or for anything but '{' (jsondec.c). */
int jd_obj_open_rest(struct jd *j, const char *what);

/* The cursor past the '{' that must come next; -EPROTO naming |what|
 * otherwise. The '{' at the cursor inline. */
static inline int jd_obj_open(struct jd *j, const char *what)
{
    struct jsonlex *x = &j->lx;
    if (x->pos < x->n && x->s[x->pos] == '{') {
        x->pos++;
        return 0;
    }
    return jd_obj_open_rest(j, what);
}

/* The same for '['. */
static inline int arr_open(struct jd *j, const char *what)
{
    if (peekc(j) != '[') {
        return jd_fail(j, j->lx.pos, "%s: expected an array", what);
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

/* 1: an element follows (cursor at it); 0: the array ended. Compact text
 * inline (no blank at the cursor or after the ','), as jsonlex_arr_next
 * reads it; the rest by it. */
static inline int arr_next(struct jd *j, bool *first)
{
    struct jsonlex *x = &j->lx;
    if (x->n - x->pos >= 2) {
        unsigned char c = (unsigned char)x->s[x->pos], c1 = (unsigned char)x->s[x->pos + 1];
        if (c == ']') {
            x->pos++;
            return 0;
        }
        if (*first ? c > ' ' : c == ',' && c1 > ' ') {
            x->pos += !*first;
            *first = false;
            return 1;
        }
    }
    int rc = jsonlex_arr_next(x, first);
    return rc < 0 ? lexfail(j) : rc;
}

/* ---- member names ---- */

/* A member name, camelCase and snake_case. |cq|/|sq| hold the name and its
 * closing quote, zero-padded, for next_field's word compares. |cm| is the
 * text a compact object has from the ',' before the camelCase name through
 * the ':' after it (,"name":), zero-padded, and |cmwant| the bits of its
 * bytes in a 32-byte compare's mask (bit 32 alone, never matched, when the
 * text is longer than 32 bytes): next_field's one-compare member. */
#define FNAME_MAX 31
#define FCM_LEN(c) (sizeof(c) - 1 + 4)
struct fdef {
    const char *camel;
    const char *snake; /* NULL when the same */
    uint8_t clen, slen;
    char cq[FNAME_MAX + 1], sq[FNAME_MAX + 1];
    uint8_t cmlen;
    uint64_t cmwant;
    char cm[32];
};
#define FCM(c)                                                                                     \
    FCM_LEN(c), FCM_LEN(c) <= 32 ? (1ull << FCM_LEN(c)) - 1 : 1ull << 32,                          \
        ",\"" c "\":" /* a camelCase name of 29+ bytes: GCC warns the text is too long */
#define F2(c, s)                                                                                   \
    {                                                                                              \
        c, s, sizeof(c) - 1, sizeof(s) - 1, c "\"", s "\"", FCM(c)                                 \
    }
#define F1(c)                                                                                      \
    {                                                                                              \
        c, NULL, sizeof(c) - 1, 0, c "\"", "", FCM(c)                                              \
    }
#define NF(t) ((int)(sizeof(t) / sizeof((t)[0])))

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
    uint8_t *succ;  /* j->succ[table] */
    uint8_t *succ2; /* j->succ2[table] */
    int nt;
    int prev; /* the last known member matched, -1 before the first */
    int f;    /* the member just read: its index in t, or -1 (unknown) */
    bool first;
};
#define FCUR(j, tab)                                                                               \
    {                                                                                              \
        .t = (tab), .succ = jd_succ((j), TID_##tab, NF(tab)), .succ2 = (j)->succ2[TID_##tab],      \
        .nt = NF(tab), .prev = -1, .f = -1, .first = true                                          \
    }

/* A guess not learned yet: m + 1 (0 after the last member), flagged. */
#define JD_SUCC_DFLT 0x80

/* j->succ[t], its defaults filled in the first time (table t has |nt| members). */
static inline uint8_t *jd_succ(struct jd *j, int t, int nt)
{
    if (!(j->succ_set >> t & 1)) {
        for (int m = -1; m < nt; m++) {
            j->succ[t][m + 1] = (uint8_t)((m + 1 < nt ? m + 1 : 0) + 1) | JD_SUCC_DFLT;
        }
        j->succ_set |= 1u << t;
    }
    return j->succ[t];
}

/*
 * Whether |p| starts with the |n| bytes of |nm| (a zero-padded FNAME_MAX + 1
 * array); |p| has at least FNAME_MAX + 1 bytes. Eight bytes at a time, the
 * last word masked to its |n| % 8 bytes (little-endian order).
 */
static inline bool name_eq(const char *p, const char *nm, size_t n)
{
#ifdef __SSE2__
    /* one or two 16-byte compares; the bits of the first |n| bytes must all be set */
    unsigned m = (unsigned)_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p),
                       _mm_loadu_si128((const __m128i *)(const void *)nm)));
    if (n <= 16) {
        unsigned want = (1u << n) - 1;
        return (m & want) == want;
    }
    m |= (unsigned)_mm_movemask_epi8(
             _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)),
                            _mm_loadu_si128((const __m128i *)(const void *)(nm + 16))))
         << 16;
    uint32_t want = n >= 32 ? UINT32_MAX : (1u << n) - 1;
    return (m & want) == want;
#else
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
#endif
}

/*
 * The member whose name (and closing quote) starts the text at |p| (a key's
 * first byte), trying |h| first: its index, with |*len| its name's length,
 * or -1. |p| has at least FNAME_MAX + 1 bytes.
 */
/* name_find's search of the whole table (jsondec.c). */
int jd_name_find_all(const char *p, const struct fdef *t, int nt, int h, size_t *len);

static inline int name_find(const char *p, const struct fdef *t, int nt, int h, size_t *len)
{
    const struct fdef *d = &t[h];
    if (p[0] == d->cq[0] && name_eq(p, d->cq, d->clen + 1u)) {
        *len = d->clen;
        return h;
    }
    return jd_name_find_all(p, t, nt, h, len);
}

/* next_field for a key not matched in place (jsondec.c). */
int jd_next_field_slow(struct jd *j, struct fcur *c);

/* Member |f| followed c->prev: the guess for next time, the one it
 * replaces kept as the second guess. */
static inline void fc_learn(struct fcur *c, int f)
{
    uint8_t *g = &c->succ[c->prev + 1];
    if (*g != f + 1) { /* a default is no second guess */
        c->succ2[c->prev + 1] = *g & JD_SUCC_DFLT ? 0 : *g;
        *g = (uint8_t)(f + 1);
    }
}

#ifdef __SSE2__
/*
 * Whether the 32 bytes at |q| equal those of |cm| at the bits of |want|
 * (bit i: byte i) but bit 0 when |first|, by one 32-byte compare: a
 * member's ,"name": text (struct fdef's cm and cmwant). |q| has 32 readable
 * bytes.
 */
__attribute__((always_inline)) static inline bool cm_eq(const char *q, const char *cm,
                                                        uint64_t want, bool first)
{
    uint64_t m = (uint32_t)_mm_movemask_epi8(
                     _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)q),
                                    _mm_loadu_si128((const __m128i *)(const void *)cm))) |
                 (uint64_t)(uint32_t)_mm_movemask_epi8(
                     _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(q + 16)),
                                    _mm_loadu_si128((const __m128i *)(const void *)(cm + 16))))
                     << 16;
    return ((m | first) & want) == want;
}

/*
 * Member |h| by cm_eq: from the ',' (after the first member), or from the
 * byte before the quote (the first), whose bit is not asked for. The cursor past the ':' when it
 * matched (c->f, c->prev set): true. The text has more than FNAME_MAX + 3
 * bytes after the cursor, which is >= 1 (past a '{').
 */
__attribute__((always_inline)) static inline bool fc_take_cm(struct jsonlex *x, struct fcur *c,
                                                             int h)
{
    const struct fdef *d = &c->t[h];
    const char *q = x->s + x->pos - c->first;
    if (!cm_eq(q, d->cm, d->cmwant, c->first)) {
        return false;
    }
    x->pos = (size_t)(q - x->s) + d->cmlen;
    c->first = false;
    c->f = c->prev = h;
    return true;
}
#endif

/* next_field after the guess |h| missed its one-compare path (or there
 * are too few bytes for it): the member matched in place without a blank,
 * or with blanks, or lexed (jd_next_field_slow). */
static inline int next_field_rest(struct jd *j, struct fcur *c, int h)
{
    struct jsonlex *x = &j->lx;
    size_t save = x->pos;
    /* compact text first: '}', or [','] '"' name '"' ':' with no blank */
    if (x->n - x->pos > FNAME_MAX + 3) {
        const char *p = x->s + x->pos;
        char c0 = *p;
        if (c0 == '}') {
            x->pos++;
            return 0;
        }
        if (!c->first) {
            c0 = c0 == ',' ? *++p : 0;
        }
        size_t len;
        int f;
        if (c0 == '"' && (f = name_find(p + 1, c->t, c->nt, h, &len)) >= 0 && p[len + 2] == ':') {
            x->pos = (size_t)(p - x->s) + len + 3;
            c->first = false;
            if (f != h) { /* learned: the guess for next time */
                fc_learn(c, f);
            }
            c->f = c->prev = f;
            return 1;
        }
    }
    int ch = jd_peek(x);
    if (ch == '}') {
        x->pos++;
        return 0;
    }
    if (!c->first) {
        ch = ch == ',' ? (x->pos++, jd_peek(x)) : -1;
    }
    if (ch == '"' && x->n - x->pos > FNAME_MAX + 1) {
        size_t len;
        int f = name_find(x->s + x->pos + 1, c->t, c->nt, h, &len);
        if (f >= 0) {
            x->pos += len + 2;
            if (jd_peek(x) == ':') {
                x->pos++;
                jd_ws(x);
                c->first = false;
                fc_learn(c, f);
                c->f = c->prev = f;
                return 1;
            }
        }
    }
    x->pos = save;
    return jd_next_field_slow(j, c);
}

/* next_field after its guess |h| missed: the second guess, then
 * next_field_rest (jsondec.c; out of line, so that each inlined
 * next_field stays short). */
int jd_next_field_miss(struct jd *j, struct fcur *c, int h);

/* 1: a member follows (c->f set, the cursor at its value); 0: the object ended. */
__attribute__((always_inline)) static inline int next_field(struct jd *j, struct fcur *c)
{
    int h = (c->succ[c->prev + 1] & ~JD_SUCC_DFLT) - 1;
#ifdef __SSE2__
    struct jsonlex *x = &j->lx;
    if (x->n - x->pos > FNAME_MAX + 3) {
        if (fc_take_cm(x, c, h)) {
            return 1;
        }
        if (x->s[x->pos] == '}') {
            x->pos++;
            return 0;
        }
    }
    return jd_next_field_miss(j, c, h);
#else
    return next_field_rest(j, c, h);
#endif
}

/* ---- scalar members (jsondec_value.c) ---- */

/* Carves the unescaped string from the arena. */
int jd_arena_str(struct jd *j, const struct jsonlex_str *js, struct mstr *out);
/*
 * The string at the cursor unescaped straight into the current string
 * block in one pass (SSE2: 16 bytes copied, then the first '"', '\\' or
 * control byte looked for), when it has only the short escapes and fits
 * with 16 bytes to spare: true, |out| set and the cursor past it, the
 * arena as jd_arena_str leaves it. False with nothing consumed or carved
 * otherwise (\u escapes, errors, no room, the text's last 16 bytes): the
 * caller then takes jd_rd_jstr and jd_arena_str.
 */
bool jd_arena_str_now(struct jd *j, struct mstr *out);
/* A string member's text (not yet unescaped). */
int jd_rd_jstr(struct jd *j, const char *field, struct jsonlex_str *js);
/* Writes uv length + unescaped bytes to the heap. */
int jd_heap_jstr(struct jd *j, const struct jsonlex_str *js);
/* The general readers of scalar members (the rd_* below take the usual
 * case inline and call these for the rest; they read every form).
 * Integers: JSON numbers or decimal strings, exact; -EPROTO out of range. */
int jd_rd_u64(struct jd *j, const char *field, uint64_t *out);
int jd_rd_i64(struct jd *j, const char *field, int64_t *out);
int jd_rd_u32(struct jd *j, const char *field, uint32_t *out);
int jd_rd_i32(struct jd *j, const char *field, int32_t *out);
/* A double: a number, a numeric string, "NaN", "Infinity" or "-Infinity". */
int jd_rd_f64(struct jd *j, const char *field, double *out);
int jd_rd_bool(struct jd *j, const char *field, bool *out);
/* An enum: an integer (bare or quoted) or one of |names| (index = value). */
int jd_rd_enum(struct jd *j, const char *field, const char *const *names, int nn, int32_t *out);
/*
 * A hex id of exactly |nb| bytes into |dst|. "" leaves |dst| zero and
 * |present| false; all-zero bytes also read as absent.
 */
int jd_rd_id(struct jd *j, const char *field, uint8_t *dst, size_t nb, bool *present);

/*
 * The same readers with their usual case inline (the callers' per-field
 * cost): a plain integer, a bare number or a quoted 2 * |nb|-digit hex id
 * is read here; anything else (and every error) goes to the jd_ function,
 * which reads it from the start as before.
 */
/* The integer at the cursor when jdnum_int reads it and it is in range
 * (|sign|: -|max|-1..|max|, else 0..|max|): the cursor moved past it. */
__attribute__((always_inline)) static inline bool int_fast(struct jd *j, bool sign, uint64_t max,
                                                           bool *neg, uint64_t *mag)
{
    size_t at = (ws(j), j->lx.pos), n;
    if (jdnum_int(j->lx.s + at, j->lx.n - at, neg, mag, &n) &&
        (sign ? *mag <= max + *neg : !*neg && *mag <= max)) {
        j->lx.pos += n;
        return true;
    }
    return false;
}

/* A quoted 19-digit integer (a nanosecond timestamp of this century): what
 * jdnum_int reads it as, in fewer steps. SSE2: the first 16 digits checked
 * and joined in one register (digit pairs by a 16-bit multiply-add, then
 * 4-digit and 8-digit groups by pmaddwd), the last three by one 8-byte
 * load; else three 8-byte loads. */
static inline bool u64_19(const char *p, size_t n, uint64_t *out)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w2;
    if (n < 24 || p[0] != '"' || p[20] != '"' || p[1] == '0') {
        return false;
    }
    memcpy(&w2, p + 12, 8); /* digits 12-19, the last three in its top bytes */
#ifdef __SSE2__
    __m128i d =
        _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 1)), _mm_set1_epi8('0'));
    /* a digit is a byte d <= 9 (unsigned) */
    if ((_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d)) != 0xffff) |
        (jdnum_nondigits(w2) != 0)) {
        return false;
    }
    /* the last three digits from w2's top bytes (all digits: tested above) */
    uint64_t d3 = (w2 >> 40) - 0x303030u;
    *out = jdnum_join16(d) * 1000u + (d3 & 0xff) * 100u + ((d3 >> 8) & 0xff) * 10u + (d3 >> 16);
#else
    uint64_t w0, w1;
    memcpy(&w0, p + 1, 8);
    memcpy(&w1, p + 9, 8);
    if ((jdnum_nondigits(w0) | jdnum_nondigits(w1) | jdnum_nondigits(w2)) != 0) {
        return false;
    }
    *out = jdnum_eight_value(w0) * 100000000000ull + jdnum_eight_value(w1) * 1000u +
           jdnum_eight_value(w2) % 1000u;
#endif
    return true;
#else
    (void)p, (void)n, (void)out;
    return false;
#endif
}

__attribute__((always_inline)) static inline int rd_u64(struct jd *j, const char *field,
                                                        uint64_t *out)
{
    size_t at = (ws(j), j->lx.pos);
    if (u64_19(j->lx.s + at, j->lx.n - at, out)) {
        j->lx.pos = at + 21;
        return 0;
    }
    bool neg;
    uint64_t mag;
    if (int_fast(j, false, UINT64_MAX, &neg, &mag)) {
        *out = mag;
        return 0;
    }
    return jd_rd_u64(j, field, out);
}

__attribute__((always_inline)) static inline int rd_i64(struct jd *j, const char *field,
                                                        int64_t *out)
{
    bool neg;
    uint64_t mag;
    if (int_fast(j, true, INT64_MAX, &neg, &mag)) {
        *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
        return 0;
    }
    return jd_rd_i64(j, field, out);
}

__attribute__((always_inline)) static inline int rd_u32(struct jd *j, const char *field,
                                                        uint32_t *out)
{
    bool neg;
    uint64_t mag;
    if (int_fast(j, false, UINT32_MAX, &neg, &mag)) {
        *out = (uint32_t)mag;
        return 0;
    }
    return jd_rd_u32(j, field, out);
}

__attribute__((always_inline)) static inline int rd_i32(struct jd *j, const char *field,
                                                        int32_t *out)
{
    bool neg;
    uint64_t mag;
    if (int_fast(j, true, INT32_MAX, &neg, &mag)) {
        *out = neg ? (int32_t)(0 - (int64_t)mag) : (int32_t)mag;
        return 0;
    }
    return jd_rd_i32(j, field, out);
}

/* rd_f64 with ws(j) already run at the cursor (it would not move it). */
__attribute__((always_inline)) static inline int rd_f64_here(struct jd *j, const char *field,
                                                             double *out)
{
    size_t at = j->lx.pos, n;
    if (at < j->lx.n && j->lx.s[at] != '"' && jdnum_f64_fast(j->lx.s + at, j->lx.n - at, out, &n)) {
        j->lx.pos += n;
        return 0;
    }
    return jd_rd_f64(j, field, out);
}

__attribute__((always_inline)) static inline int rd_f64(struct jd *j, const char *field,
                                                        double *out)
{
    ws(j);
    return rd_f64_here(j, field, out);
}

static inline int rd_id(struct jd *j, const char *field, uint8_t *dst, size_t nb, bool *present)
{
    size_t at = (ws(j), j->lx.pos);
    if (j->lx.n - at > 2 * nb + 1 && j->lx.s[at] == '"' && j->lx.s[at + 2 * nb + 1] == '"' &&
        jdnum_hex(dst, j->lx.s + at + 1, nb)) {
        uint64_t any = 0, w; /* nb is 8 or 16 where it is inlined: one or two loads */
        size_t i = 0;
        for (; i + 8 <= nb; i += 8) {
            memcpy(&w, dst + i, 8);
            any |= w;
        }
        for (; i < nb; i++) {
            any |= dst[i];
        }
        j->lx.pos = at + 2 * nb + 2;
        *present = any != 0;
        return 0;
    }
    return jd_rd_id(j, field, dst, nb, present);
}

/* A string member into the arena. One with no escape (no '\\', no control
 * byte before its closing quote) is found by plain_end and carved here
 * when the current string block has room, as jd_arena_str would (a string
 * of that kind is valid JSON as it stands); anything else is lexed by
 * jd_rd_jstr and carved by jd_arena_str. */
__attribute__((always_inline)) static inline int rd_mstr(struct jd *j, const char *field,
                                                         struct mstr *out)
{
    struct jsonlex *x = &j->lx;
    jd_ws(x);
    size_t at = x->pos;
    if (at < x->n && x->s[at] == '"') {
        size_t e = plain_end(x->s, at + 1, x->n), len = e - at - 1;
        if (e < x->n && x->s[e] == '"' && len <= j->sleft) {
            if (len == 0) {
                out->p = "";
            } else {
                memcpy(j->sp, x->s + at + 1, len);
                out->p = j->sp;
                j->sp += len;
                j->sleft -= len;
            }
            out->len = (uint32_t)len;
            x->pos = e + 1;
            return 0;
        }
    }
    if (jd_arena_str_now(j, out)) {
        return 0;
    }
    struct jsonlex_str js;
    int rc = jd_rd_jstr(j, field, &js);
    return rc < 0 ? rc : jd_arena_str(j, &js, out);
}

/* jd_rd_jstr with a string that has no escape (no '\\', no control byte
 * before its closing quote: valid JSON as it stands) found by plain_end
 * inline, as the lexer would give it. */
__attribute__((always_inline)) static inline int rd_jstr(struct jd *j, const char *field,
                                                         struct jsonlex_str *js)
{
    struct jsonlex *x = &j->lx;
    jd_ws(x);
    size_t at = x->pos;
    if (at < x->n && x->s[at] == '"') {
        size_t e = plain_end(x->s, at + 1, x->n);
        if (e < x->n && x->s[e] == '"') {
            *js = (struct jsonlex_str){.at = at + 1, .raw = e - at - 1, .len = e - at - 1};
            x->pos = e + 1;
            return 0;
        }
    }
    return jd_rd_jstr(j, field, js);
}

/* An enum member: a bare integer read inline, anything else by jd_rd_enum. */
__attribute__((always_inline)) static inline int
rd_enum(struct jd *j, const char *field, const char *const *names, int nn, int32_t *out)
{
    bool neg;
    uint64_t mag;
    if (int_fast(j, true, INT32_MAX, &neg, &mag)) {
        *out = neg ? (int32_t)(0 - (int64_t)mag) : (int32_t)mag;
        return 0;
    }
    return jd_rd_enum(j, field, names, nn, out);
}

/* ---- values (jsondec_value.c; val.h encoding into the heap) ---- */

/* A string log body goes to the arena, not the heap. */
struct body_sink {
    bool is_str;
    struct mstr str;
};

/*
 * One AnyValue at nesting level |depth| (1 = an attribute or body value),
 * written to the heap as one val.h value. With |sink|, a string value goes
 * to sink->str instead and the heap gets nothing.
 */
int jd_any_value(struct jd *j, int depth, struct body_sink *sink);
/* An attributes list: KeyValue entries back to back in the heap. */
int jd_attr_list(struct jd *j, const char *what, struct attrs *out);
/* jd_attr_list for a data point's attributes: a compact KeyValue whose text
 * is one an earlier point had at its place (struct jd kvc) is copied. */
int jd_point_attrs(struct jd *j, struct attrs *out);
/* The kvc entries whose copies lie at or past heap offset |mark| dropped:
 * the heap is being put back there, and a copy of 64 bytes to its end
 * would overwrite them. */
void jd_kvc_drop(struct jd *j, size_t mark);
/* u32 count + u32 nbytes + the attributes found at |pos|. */
int jd_counted_attrs_at(struct jd *j, size_t pos, const char *what);
/* An attributes member of an event or link read in place when it can be,
 * else deferred to |*pos| (jsondec_value.c says how). */
int jd_counted_attrs_now(struct jd *j, const char *what, size_t *pos, size_t *here);
/* After the fixed part was written at the heap's end from |fixed|: moved
 * before the attributes read in place at |here|. 0 or -ENOMEM. */
int jd_counted_attrs_put_first(struct jd *j, size_t here, size_t fixed);
/* A list of events, links or exemplars into one blob, |*n| of them. */
int jd_blob_list(struct jd *j, const char *what, int (*one)(struct jd *), struct blob *out,
                 uint32_t *n);

/* Remembers where a member's value is, and skips it. */
static inline int defer(struct jd *j, size_t *pos)
{
    *pos = (ws(j), j->lx.pos);
    return skip_value(j);
}

/* ---- the records, one signal each ---- */

/* The value of a scope envelope's logRecords (jsondec_logs.c), spans
 * (jsondec_traces.c) or metrics (jsondec_metrics.c) member, the records of
 * scope |si|: a row appended to the batch for each. One call per list, so
 * that the per-record function is inlined into its loop. */
int jd_log_records(struct jd *j, uint32_t si);
int jd_spans(struct jd *j, uint32_t si);
int jd_metrics(struct jd *j, uint32_t si);

/* |one| for each element of the list at the cursor (the shared body of the
 * three above: inlined, with |one| a constant that GCC inlines in turn). */
__attribute__((always_inline)) static inline int
record_list(struct jd *j, const char *what, uint32_t si, int (*one)(struct jd *, uint32_t))
{
    bool efirst = true;
    int rc = arr_open(j, what);
    if (rc < 0) {
        return rc;
    }
    while ((rc = arr_next(j, &efirst)) > 0) {
        if ((rc = one(j, si)) < 0) {
            return rc;
        }
    }
    return rc;
}

#endif
