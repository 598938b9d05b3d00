/*
 * jsondec_value.c - the OTLP/JSON decoder's values: scalar members
 * (strings into the arena or the heap, integers exact from their digits,
 * doubles, booleans, enums, hex ids), AnyValue and KeyValue in val.h
 * encoding (with the compact-KeyValue fast path, kv_fast), attribute lists
 * and the blob lists of events, links and exemplars. jsondec.c says how the
 * decoder works; jsondec_int.h lists what these offer the other files.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/hex.h"
#include "proto/jsondec_int.h"
#include "proto/jsondec_num.h"
#include "storage/val.h"

/* Strings up to this size are carved from a shared arena block. */
#define JD_STR_BLOCK 4096

/* ---- scalar members ---- */

/* Carves the unescaped string from the arena. */
int jd_arena_str(struct jd *j, const struct jsonlex_str *js, struct mstr *out)
{
    char *p;
    if (js->len == 0) {
        out->p = "";
        out->len = 0;
        return 0;
    }
    if (js->len > UINT32_MAX) {
        return jd_fail(j, js->at, "string longer than 4 GiB");
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
        return jd_nomem(j);
    }
    unescape(j, js, p);
    out->p = p;
    out->len = (uint32_t)js->len;
    return 0;
}

bool jd_arena_str_now(struct jd *j, struct mstr *out)
{
#ifdef __SSE2__
    struct jsonlex *x = &j->lx;
    jd_ws(x);
    const char *s = x->s;
    size_t n = x->n, i = x->pos + 1, d = 0, cap = j->sleft;
    char *dst = j->sp;
    if (x->pos >= n || s[x->pos] != '"') {
        return false;
    }
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  ctl = _mm_set1_epi8(0x1f);
    for (;;) {
        if (n - i < 16 || cap - d < 16) {
            return false;
        }
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        _mm_storeu_si128((__m128i *)(void *)(dst + d), v);
        __m128i hit =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                         _mm_cmpeq_epi8(_mm_max_epu8(v, ctl), ctl));
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (m == 0) {
            i += 16;
            d += 16;
            continue;
        }
        unsigned k = (unsigned)__builtin_ctz(m);
        i += k;
        d += k;
        if (s[i] == '"') {
            break;
        }
        if (s[i] != '\\' || i + 1 >= n) {
            return false; /* a control byte or a '\\' ending the text: the lexer's error */
        }
        char e;
        switch (s[i + 1]) {
        case '"':
        case '\\':
        case '/':
            e = s[i + 1];
            break;
        case 'b':
            e = '\b';
            break;
        case 'f':
            e = '\f';
            break;
        case 'n':
            e = '\n';
            break;
        case 'r':
            e = '\r';
            break;
        case 't':
            e = '\t';
            break;
        default: /* \u (surrogates to check) and bad escapes: the general way */
            return false;
        }
        dst[d++] = e;
        i += 2;
    }
    if (d == 0) {
        out->p = "";
    } else {
        out->p = dst;
        j->sp += d;
        j->sleft -= d;
    }
    out->len = (uint32_t)d;
    x->pos = i + 1;
    return true;
#else
    (void)j, (void)out;
    return false;
#endif
}

int jd_rd_jstr(struct jd *j, const char *field, struct jsonlex_str *js)
{
    if (peekc(j) != '"') {
        return jd_fail(j, j->lx.pos, "%s: expected a string", field);
    }
    return lex_str(j, js);
}

/* Writes uv length + unescaped bytes to the heap. */
int jd_heap_jstr(struct jd *j, const struct jsonlex_str *js)
{
    if (vbuf_reserve(j->h, 10 + js->len) < 0) {
        return jd_nomem(j);
    }
    j->h->len = (size_t)(put_uv(j->h->p + j->h->len, js->len) - j->h->p);
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
            return jd_fail(j, at, "%s: number string too long", field);
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
    return jd_fail(j, at, "%s: expected a number or a numeric string", field);
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

int jd_rd_u64(struct jd *j, const char *field, uint64_t *out)
{
    char buf[128];
    const char *p;
    size_t n, at = (ws(j), j->lx.pos);
    bool quoted, neg;
    uint64_t mag;
    int rc = num_text(j, field, buf, sizeof(buf), &p, &n, &quoted);
    if (rc < 0) {
        return rc;
    }
    if (!num_to_int(p, n, &neg, &mag)) {
        return jd_fail(j, at, "%s: not an integer in range", field);
    }
    if (neg && mag != 0) {
        return jd_fail(j, at, "%s: negative value for an unsigned field", field);
    }
    *out = mag;
    return 0;
}

int jd_rd_i64(struct jd *j, const char *field, int64_t *out)
{
    char buf[128];
    const char *p;
    size_t n, at = (ws(j), j->lx.pos);
    bool quoted, neg;
    uint64_t mag;
    int rc = num_text(j, field, buf, sizeof(buf), &p, &n, &quoted);
    if (rc < 0) {
        return rc;
    }
    if (!num_to_int(p, n, &neg, &mag) || mag > (uint64_t)INT64_MAX + neg) {
        return jd_fail(j, at, "%s: not a 64-bit signed integer", field);
    }
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return 0;
}

int jd_rd_u32(struct jd *j, const char *field, uint32_t *out)
{
    size_t at = (ws(j), j->lx.pos);
    uint64_t v;
    int rc = rd_u64(j, field, &v);
    if (rc < 0) {
        return rc;
    }
    if (v > UINT32_MAX) {
        return jd_fail(j, at, "%s: out of range for 32 bits", field);
    }
    *out = (uint32_t)v;
    return 0;
}

int jd_rd_i32(struct jd *j, const char *field, int32_t *out)
{
    size_t at = (ws(j), j->lx.pos);
    int64_t v;
    int rc = rd_i64(j, field, &v);
    if (rc < 0) {
        return rc;
    }
    if (v < INT32_MIN || v > INT32_MAX) {
        return jd_fail(j, at, "%s: out of range for 32 bits", field);
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

int jd_rd_f64(struct jd *j, const char *field, double *out)
{
    char buf[512];
    const char *p;
    size_t n, at = (ws(j), j->lx.pos);
    bool quoted;
    int c = peekc(j);
    if (c == '"') {
        struct jsonlex_str js;
        int rc = lex_str(j, &js);
        if (rc < 0) {
            return rc;
        }
        if (!str_bytes(j, &js, buf, sizeof(buf) - 1, &p)) {
            return jd_fail(j, at, "%s: number string too long", field);
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
        return jd_fail(j, at, "%s: not a number", field);
    }
    if (f64_fast(p, n, out)) {
        return 0;
    }
    if (n >= sizeof(buf)) {
        return jd_fail(j, at, "%s: number too long", field);
    }
    if (p != buf) {
        memcpy(buf, p, n);
    }
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    if (isinf(v)) {
        return jd_fail(j, at, "%s: number out of range for a double", field);
    }
    *out = v;
    return 0;
}

int jd_rd_bool(struct jd *j, const char *field, bool *out)
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
    return jd_fail(j, j->lx.pos, "%s: expected true or false", field);
}

/* An enum: an integer (bare or quoted) or one of |names| (index = value). */
int jd_rd_enum(struct jd *j, const char *field, const char *const *names, int nn, int32_t *out)
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
        return jd_fail(j, at, "%s: unknown enum value \"%.*s\"", field,
                       (int)(js.len > 40 ? 40 : js.len), js.esc ? "(escaped)" : j->lx.s + js.at);
    }
    return rd_i32(j, field, out);
}

/*
 * A hex id of exactly |nb| bytes into |dst|. "" leaves |dst| zero and
 * |present| false; all-zero bytes also read as absent.
 */
int jd_rd_id(struct jd *j, const char *field, uint8_t *dst, size_t nb, bool *present)
{
    struct jsonlex_str js;
    char buf[64];
    const char *p;
    size_t at = (ws(j), j->lx.pos);
    *present = false;
    int rc = jd_rd_jstr(j, field, &js);
    if (rc < 0) {
        return rc;
    }
    memset(dst, 0, nb);
    if (js.len == 0) {
        return 0;
    }
    if (js.len != 2 * nb || !str_bytes(j, &js, buf, sizeof(buf), &p)) {
        return jd_fail(j, at, "%s: %zu hex digits, want %zu", field, js.len, 2 * nb);
    }
    if (hex_decode(dst, p, nb) < 0) {
        return jd_fail(j, at, "%s: not a hex string", field);
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
    int rc = jd_rd_jstr(j, "bytesValue", &js);
    if (rc < 0) {
        return rc;
    }
    if (js.esc) { /* rare: unescape into the arena first */
        char *t = arena_alloc(j->a, js.len);
        if (t == NULL) {
            return jd_nomem(j);
        }
        unescape(j, &js, t);
        p = t;
    } else {
        p = j->lx.s + js.at;
    }
    size_t n = base64_unpad(p, js.len);
    long out = base64_decoded_len(n);
    if (out < 0) {
        return jd_fail(j, at, "bytesValue: bad base64 length");
    }
    if (vbuf_put_u8(j->h, VAL_BYTES) < 0 || vbuf_put_uv(j->h, (uint64_t)out) < 0 ||
        vbuf_reserve(j->h, (size_t)out) < 0) {
        return jd_nomem(j);
    }
    if (base64_decode(j->h->p + j->h->len, p, n) < 0) {
        return jd_fail(j, at, "bytesValue: not base64");
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

static int key_value(struct jd *j, int depth);

/* ArrayValue or KeyValueList at depth |depth| (its members one deeper). */
static int list_value(struct jd *j, int depth, enum val_type t)
{
    long at = val_open(j->h, t);
    uint32_t count = 0;
    int rc;
    if (at < 0) {
        return jd_nomem(j);
    }
    if ((rc = jd_obj_open(j, t == VAL_ARRAY ? "arrayValue" : "kvlistValue")) < 0) {
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
            rc = t == VAL_ARRAY ? jd_any_value(j, depth + 1, NULL) : key_value(j, depth + 1);
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
int jd_any_value(struct jd *j, int depth, struct body_sink *sink)
{
    size_t mark = j->h->len, at = (ws(j), j->lx.pos);
    bool set = false;
    int rc;
    if (depth > VAL_MAX_DEPTH) {
        return jd_fail(j, at, "AnyValue nested deeper than %d levels", VAL_MAX_DEPTH);
    }
    if (sink != NULL) {
        sink->is_str = false;
    }
    if (take_null(j)) {
        return val_put_empty(j->h) < 0 ? jd_nomem(j) : 0;
    }
    if ((rc = jd_obj_open(j, "AnyValue")) < 0) {
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
            if (sink != NULL && jd_arena_str_now(j, &sink->str)) {
                sink->is_str = true;
                break;
            }
            if ((rc = jd_rd_jstr(j, "stringValue", &js)) < 0) {
                return rc;
            }
            if (sink != NULL) {
                rc = jd_arena_str(j, &js, &sink->str);
                sink->is_str = true;
            } else if (vbuf_put_u8(j->h, VAL_STR) < 0) {
                return jd_nomem(j);
            } else {
                rc = jd_heap_jstr(j, &js);
            }
            break;
        }
        case AV_BOOL: {
            bool v;
            if ((rc = jd_rd_bool(j, "boolValue", &v)) == 0 && val_put_bool(j->h, v) < 0) {
                return jd_nomem(j);
            }
            break;
        }
        case AV_INT: {
            int64_t v;
            if ((rc = rd_i64(j, "intValue", &v)) == 0 && val_put_int(j->h, v) < 0) {
                return jd_nomem(j);
            }
            break;
        }
        case AV_DOUBLE: {
            double v;
            if ((rc = rd_f64(j, "doubleValue", &v)) == 0 && val_put_double(j->h, v) < 0) {
                return jd_nomem(j);
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
            return jd_nomem(j);
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

/* kv_fast_at's key: uv length + bytes at |d| (room made); returns the end.
 * A key of up to 32 bytes is copied whole by two 16-byte moves (its text
 * has at least 32 bytes after it: the 48 kv_fast_at checked). */
__attribute__((always_inline)) static inline uint8_t *kv_put_key(uint8_t *d, const char *k,
                                                                 size_t klen)
{
    d = put_uv(d, klen);
    if (klen <= 32) {
        memcpy(d, k, 32);
    } else {
        memcpy(d, k, klen);
    }
    return d + klen;
}

/* Room for |need| heap bytes and the heap's end, or NULL (the general
 * path then reports it). */
__attribute__((always_inline)) static inline uint8_t *kv_room(struct vbuf *h, size_t need)
{
    if (h->cap - h->len < need && vbuf_reserve(h, need) < 0) {
        return NULL;
    }
    return h->p + h->len;
}

#ifdef __SSE2__
/* The bytes of p[0, 16) that end a plain string ('"', '\\', 0x00-0x1f:
 * max(v, 0x1f) == 0x1f exactly for those), as a 16-bit mask. */
__attribute__((always_inline)) static inline unsigned kv_stops16(const char *p)
{
    const __m128i ctl = _mm_set1_epi8(0x1f);
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
        _mm_cmpeq_epi8(_mm_max_epu8(v, ctl), ctl)));
}
#endif

/* plain_end for a KeyValue's string value: up to 64 bytes inline, 16 at a
 * time (values of 17-64 bytes, hosts and statements, are common), then
 * jsonlex_plain_end from there; the same offset plain_end gives. */
__attribute__((always_inline)) static inline size_t kv_plain_end(const char *s, size_t i, size_t n)
{
#ifdef __SSE2__
    for (int k = 0; k < 4 && n - i >= 16; k++, i += 16) {
        unsigned m = kv_stops16(s + i);
        if (m != 0) {
            return i + (size_t)__builtin_ctz(m);
        }
    }
#endif
    return jsonlex_plain_end(s, i, n);
}

/* The value types kv_fast_at reads, and the length of each one's member
 * name text after the key's `","value":{"`. */
enum { KVT_STR, KVT_INT, KVT_DOUBLE, KVT_BOOL };

/*
 * The head of the KeyValue every OTLP exporter writes, compact and in
 * schema order: {"key":"k","value":{"stringValue":" (or intValue,
 * doubleValue, boolValue) with no escape in the key, at s[i]. True with the
 * key's length, the value's type and where the value starts (s[*v]); false
 * for anything else. Decided by the bytes from s[i] to s[*v] and by two
 * room tests: n - i >= 64 and, at the key's end, 48 bytes.
 */
__attribute__((always_inline)) static inline bool kv_head_at(const char *s, size_t n, size_t i,
                                                             size_t *klen, unsigned *t, size_t *v)
{
    static const char kv_open[] = "{\"key\":\"", kv_mid[] = "\",\"value\":{\"";
    if (n - i < 64 || memcmp(s + i, kv_open, 8) != 0) {
        return false;
    }
    size_t k0 = i + 8;
    i = plain_end(s, k0, n);
    if (n - i < 48 || memcmp(s + i, kv_mid, 12) != 0) {
        return false;
    }
    *klen = i - k0;
    i += 12;
    if (memcmp(s + i, "stringValue\":\"", 14) == 0) {
        *t = KVT_STR;
        *v = i + 14;
    } else if (memcmp(s + i, "intValue\":", 10) == 0) {
        *t = KVT_INT;
        *v = i + 10;
    } else if (memcmp(s + i, "doubleValue\":", 13) == 0) {
        *t = KVT_DOUBLE;
        *v = i + 13;
    } else if (memcmp(s + i, "boolValue\":", 11) == 0) {
        *t = KVT_BOOL;
        *v = i + 11;
    } else {
        return false;
    }
    return true;
}

/*
 * The rest of that KeyValue: its value of type |t| at s[i], plain string,
 * integer, double or boolean, then "}}". Written to the heap with the key
 * s[k0, k0 + klen) as key_value would; the offset after it, or 0 with
 * nothing written for anything else.
 */
__attribute__((always_inline)) static inline size_t
kv_value_at(struct vbuf *h, const char *s, size_t n, size_t k0, size_t klen, unsigned t, size_t i)
{
    size_t used = 0;
    uint8_t *d;
    /* each type written in its own branch: key (uv length + bytes), then
     * VAL_STR + uv length + bytes or the scalar (val.h); room for 32-byte
     * copies past the end */
    if (t == KVT_STR) {
        size_t v0 = i;
        i = kv_plain_end(s, v0, n);
        if (i >= n || s[i] != '"' || n - i < 3 || memcmp(s + i + 1, "}}", 2) != 0) {
            return 0;
        }
        size_t vlen = i - v0;
        if ((d = kv_room(h, 96 + klen + vlen)) == NULL) {
            return 0;
        }
        d = kv_put_key(d, s + k0, klen);
        *d++ = VAL_STR;
        d = put_uv(d, vlen);
        if (vlen <= 32 && n - v0 >= 32) { /* the value's '"}}' plus what follows */
            memcpy(d, s + v0, 32);
        } else {
            memcpy(d, s + v0, vlen);
        }
        h->len = (size_t)(d + vlen - h->p);
        return i + 3;
    }
    uint64_t sv; /* a scalar value's bytes after its type tag (val.h) */
    size_t svn;
    uint8_t tag;
    if (t == KVT_INT) {
        bool neg = false;
        uint64_t mag;
        if (!jdnum_uint_q7(s + i, n - i, &mag, &used) &&
            (!jdnum_int(s + i, n - i, &neg, &mag, &used) || mag > (uint64_t)INT64_MAX + neg)) {
            return 0;
        }
        i += used;
        if (n - i < 2 || memcmp(s + i, "}}", 2) != 0 || (d = kv_room(h, 96 + klen)) == NULL) {
            return 0;
        }
        int64_t v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
        d = kv_put_key(d, s + k0, klen);
        *d++ = VAL_INT;
        d = put_uv(d, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63)); /* zigzag */
        h->len = (size_t)(d - h->p);
        return i + 2;
    } else if (t == KVT_DOUBLE) {
        double dv;
        if (!jdnum_f64_7(s + i, n - i, &dv, &used)) { /* smaller code in this hot loop */
            return 0;
        }
        memcpy(&sv, &dv, 8);
        tag = VAL_DOUBLE;
        svn = 8;
        i += used;
    } else {
        bool tr = memcmp(s + i, "true", 4) == 0, f = !tr && memcmp(s + i, "false", 5) == 0;
        if (!tr && !f) {
            return 0;
        }
        sv = tr;
        tag = VAL_BOOL;
        svn = 1;
        i += tr ? 4 : 5;
    }
    if (n - i < 2 || memcmp(s + i, "}}", 2) != 0 || (d = kv_room(h, 96 + klen)) == NULL) {
        return 0;
    }
    d = kv_put_key(d, s + k0, klen);
    *d++ = tag;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(d, &sv, 8); /* room for all 8; svn of them count */
#else
    for (int k = 0; k < 8; k++) {
        d[k] = (uint8_t)(sv >> (8 * k));
    }
#endif
    h->len = (size_t)(d + svn - h->p);
    return i + 2;
}

/*
 * The compact KeyValue (kv_head_at, then kv_value_at) at s[i], read by
 * exact comparison and written to the heap as key_value would; 0 with
 * nothing written for anything else, which key_value then reads the
 * general way (so it also gives every error).
 */
__attribute__((always_inline)) static inline size_t kv_fast_at(struct vbuf *h, const char *s,
                                                               size_t n, size_t i)
{
    size_t klen, v;
    unsigned t;
    if (!kv_head_at(s, n, i, &klen, &t, &v)) {
        return 0;
    }
    return kv_value_at(h, s, n, i + 8, klen, t, v);
}

/* kv_fast_at at the cursor, the cursor moved past it when it read one. */
static bool kv_fast(struct jd *j)
{
    size_t e = kv_fast_at(j->h, j->lx.s, j->lx.n, j->lx.pos);
    if (e == 0) {
        return false;
    }
    j->lx.pos = e;
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
        return val_put_key(j->h, "", 0) < 0 || val_put_empty(j->h) < 0 ? jd_nomem(j) : 0;
    }
    if (depth <= VAL_MAX_DEPTH && kv_fast(j)) {
        return 0;
    }
    if ((rc = jd_obj_open(j, "KeyValue")) < 0) {
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
            if ((rc = jd_rd_jstr(j, "key", &key)) < 0) {
                return rc;
            }
            if (key_written || val_pos != NONE) {
                redo = true;
            } else {
                if (jd_heap_jstr(j, &key) < 0) {
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
                rc = jd_any_value(j, depth, NULL);
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
        if (jd_heap_jstr(j, &key) < 0) { /* a zeroed jstr writes "" */
            return -ENOMEM;
        }
        val_written = false;
        if (val_pos != NONE) {
            size_t end = j->lx.pos;
            j->lx.pos = val_pos;
            if ((rc = jd_any_value(j, depth, NULL)) < 0) {
                return rc;
            }
            j->lx.pos = end;
            val_written = true;
        }
    }
    if (!val_written && val_put_empty(j->h) < 0) {
        return jd_nomem(j);
    }
    return 0;
}

#ifdef __SSE2__
static inline __m128i kvc_eq16(const char *s, const char *t)
{
    return _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)s),
                          _mm_loadu_si128((const __m128i *)(const void *)t));
}
#endif

/* Whether s[0, n) and t[0, n) are the same bytes, n >= 16: the last 16
 * first (where two KeyValues with one key differ: in the value), then the
 * rest: by three more 16-byte compares for 49-64 bytes (the usual), fewer
 * for fewer, memcmp for more. */
__attribute__((always_inline)) static inline bool kvc_same(const char *s, const char *t, size_t n)
{
#ifdef __SSE2__
    __m128i e = kvc_eq16(s + n - 16, t + n - 16);
    if (_mm_movemask_epi8(e) != 0xffff) {
        return false;
    }
    if (n - 49 < 16) { /* [0, 48) and the tail */
        e = _mm_and_si128(_mm_and_si128(kvc_eq16(s, t), kvc_eq16(s + 16, t + 16)),
                          kvc_eq16(s + 32, t + 32));
    } else if (n > 64) {
        return memcmp(s, t, n - 16) == 0;
    } else if (n > 32) { /* 33-48 */
        e = _mm_and_si128(kvc_eq16(s, t), kvc_eq16(s + 16, t + 16));
    } else if (n > 16) {
        e = kvc_eq16(s, t);
    }
    return _mm_movemask_epi8(e) == 0xffff;
#else
    return memcmp(s, t, n) == 0;
#endif
}

/* The kvh slot of the 16 bytes at |p| (a KeyValue's after its `{"key":"`:
 * the key's first 16 or, for a shorter key, what follows it). */
__attribute__((always_inline)) static inline unsigned kvh_slot(const char *p)
{
    uint64_t lo, hi;
    memcpy(&lo, p, 8);
    memcpy(&hi, p + 8, 8);
    return (unsigned)(((lo ^ hi) * 0x9e3779b97f4a7c15ull) >> 56); /* 256 slots */
}

/*
 * kv_fast_at with the head remembered: attribute keys repeat record after
 * record (a few dozen names), so a KeyValue whose text from '{' to its
 * value is byte for byte the head kv_head_at last read in its slot has
 * that head's key length and type, and is read from its value on. Exact:
 * kv_head_at's result is decided by those bytes and by room tests of 64
 * bytes from s[i] and 48 from the key's end, which n - i >= plen + 48
 * passes (plen >= klen + 30); then kv_value_at does what kv_fast_at would.
 * The text is in the body, which does not change while it is decoded.
 */
__attribute__((always_inline)) static inline size_t kv_keyed_at(struct jd *j, struct vbuf *h,
                                                                const char *s, size_t n, size_t i)
{
    size_t klen, v;
    unsigned t;
    if (n - i < 64) {
        return 0;
    }
    struct jd_kvh *c = &j->kvh[kvh_slot(s + i + 8)];
    if (c->plen != 0 && n - i >= c->plen + 48u && kvc_same(s + i, s + c->at, c->plen)) {
        klen = c->klen;
        t = c->type;
        v = i + c->plen;
    } else {
        if (!kv_head_at(s, n, i, &klen, &t, &v)) {
            return 0;
        }
        if (v - i <= 64 && i <= UINT32_MAX) {
            *c = (struct jd_kvh){(uint32_t)i, (uint8_t)(v - i), (uint8_t)klen, (uint8_t)t};
        }
    }
    return kv_value_at(h, s, n, i + 8, klen, t, v);
}

/* An attributes list: KeyValue entries back to back in the heap. */
int jd_attr_list(struct jd *j, const char *what, struct attrs *out)
{
    size_t off = j->h->len;
    uint32_t count = 0;
    bool first = true;
    int rc = arr_open(j, what);
    if (rc < 0) {
        return rc;
    }
    /* compact KeyValues back to back go to kv_fast in a loop of their own;
     * the general loop takes over at anything else (the cursor then at the
     * element or the ',' before it) */
    const char *s = j->lx.s;
    size_t n = j->lx.n, pos = j->lx.pos, e;
    struct vbuf *h = j->h;
    /* locals, not j->lx: the heap's byte stores may alias it */
    while (pos < n && s[pos] == (first ? '{' : ',') &&
           (e = kv_keyed_at(j, h, s, n, pos + !first)) != 0) {
        pos = e;
        first = false;
        count++;
    }
    j->lx.pos = pos;
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

/*
 * Exporters repeat most of a point's attributes point after point (the
 * route, the status code; the method or the state differ). The c-th compact
 * KeyValue whose text, '{' through "}}", is byte for byte kvc[c]'s is
 * therefore copied from where kv_fast_at wrote kvc[c] in the heap. Exact by
 * construction: kv_fast_at's every branch is decided by the bytes of that
 * text and by room tests (n - x >= 64 at most, x inside it), which the
 * 64 bytes asked for after it pass, so it would write the same bytes and
 * end at the same place. The copied bytes are intact: an entry is only
 * made by a point's attributes read whole, and nothing truncates the heap
 * below a point's attributes once read except a failed decode (jd goes
 * with it).
 */

/* 64 bytes from |from| to |d|, all loaded before any is stored: the
 * source may end where the heap does, so the two may overlap past it. */
__attribute__((always_inline)) static inline void kvc_move64(uint8_t *d, const uint8_t *from)
{
#ifdef __SSE2__
    __m128i v0 = _mm_loadu_si128((const __m128i *)(const void *)from);
    __m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(from + 16));
    __m128i v2 = _mm_loadu_si128((const __m128i *)(const void *)(from + 32));
    __m128i v3 = _mm_loadu_si128((const __m128i *)(const void *)(from + 48));
    _mm_storeu_si128((__m128i *)(void *)d, v0);
    _mm_storeu_si128((__m128i *)(void *)(d + 16), v1);
    _mm_storeu_si128((__m128i *)(void *)(d + 32), v2);
    _mm_storeu_si128((__m128i *)(void *)(d + 48), v3);
#else
    memmove(d, from, 64);
#endif
}

/* Whether kvc entry |e| is the text at s[at] (n - at bytes to the end). */
__attribute__((always_inline)) static inline bool kvc_is(const struct jd_kvc *e, const char *s,
                                                         size_t n, size_t at)
{
    return e->tlen != 0 && n - at >= e->tlen + 64 && kvc_same(s + at, s + e->at, e->tlen);
}

/* The way of kvc[c] for the 16 bytes at |p|. */
__attribute__((always_inline)) static inline unsigned kvc_way(const char *p)
{
    uint64_t lo, hi;
    memcpy(&lo, p, 8);
    memcpy(&hi, p + 8, 8);
    return (unsigned)(((lo ^ hi) * 0x9e3779b97f4a7c15ull) >> 60); /* JD_KVC_WAYS 16 */
}

/*
 * The c-th KeyValue at s[at] when jd_point_attrs' inline copy did not take
 * it, |w| its way (JD_KVC_WAYS when it has none yet): copied from the way
 * when its text is the way's, else read by kv_keyed_at (kv_fast_at's
 * bytes, its head perhaps remembered) and, for c < JD_KVC_MAX, kept in its
 * way. The offset after it, or 0 when neither
 * (nothing written; the general loop then reads it, errors and all).
 */
static __attribute__((noinline)) size_t kvc_miss(struct jd *j, const char *s, size_t n, size_t at,
                                                 uint32_t c, unsigned w)
{
    struct vbuf *h = j->h;
    if (c >= JD_KVC_MAX) {
        return kv_keyed_at(j, h, s, n, at);
    }
    struct jd_kvc *e = w < JD_KVC_WAYS ? &j->kvc[c][w] : NULL;
    if (e != NULL && kvc_is(e, s, n, at)) { /* long, or the heap needs room */
        if (h->cap - h->len < e->hlen + 64 && vbuf_reserve(h, e->hlen + 64) < 0) {
            return 0;
        }
        if (e->hlen <= 64) {
            kvc_move64(h->p + h->len, h->p + e->hoff);
        } else {
            memcpy(h->p + h->len, h->p + e->hoff, e->hlen); /* below the heap's end */
        }
        h->len += e->hlen;
        return at + e->tlen;
    }
    size_t before = h->len, end = kv_keyed_at(j, h, s, n, at);
    if (end == 0) {
        return 0;
    }
    if (j->kvc_voff[c] == 0 && end - at <= UINT16_MAX && n - end >= 8) {
        /* the first: its last 8 bytes and the 8 after them */
        j->kvc_voff[c] = (uint16_t)(end - at - 8);
        e = &j->kvc[c][kvc_way(s + end - 8)];
    }
    if (e != NULL && end <= UINT32_MAX && h->len <= UINT32_MAX) {
        *e = (struct jd_kvc){(uint32_t)at, (uint32_t)(end - at), (uint32_t)before,
                             (uint32_t)(h->len - before)};
    }
    return end;
}

/* Whether the heap has room for jd_point_attrs' copies of (at most 64
 * bytes) for each KeyValue from the |count|-th below JD_KVC_MAX, made so
 * if not (false when it cannot grow: no copies then, kvc_miss reads). */
static inline bool kvc_room(struct vbuf *h, uint32_t count)
{
    size_t need = count < JD_KVC_MAX ? 64u * (JD_KVC_MAX - count) : 0;
    return h->cap - h->len >= need || vbuf_reserve(h, need) == 0;
}

/* kvc_same for 16 <= n <= 64. */
__attribute__((always_inline)) static inline bool kvc_same_short(const char *s, const char *t,
                                                                 size_t n)
{
    if (n > 64) {
        __builtin_unreachable();
    }
    return kvc_same(s, t, n);
}

void jd_kvc_drop(struct jd *j, size_t mark)
{
    for (size_t c = 0; c < JD_KVC_MAX; c++) {
        for (size_t w = 0; w < JD_KVC_WAYS; w++) {
            struct jd_kvc *e = &j->kvc[c][w];
            if (e->tlen != 0 && (size_t)e->hoff + e->hlen > mark) {
                e->tlen = 0;
            }
        }
    }
}

int jd_point_attrs(struct jd *j, struct attrs *out)
{
    size_t off = j->h->len;
    uint32_t count = 0;
    ws(j);
    size_t open = j->lx.pos;
    int rc = arr_open(j, "attributes");
    if (rc < 0) {
        return rc;
    }
    const char *s = j->lx.s;
    size_t n = j->lx.n, pos = j->lx.pos, i = pos;
    struct vbuf *h = j->h;
    /* the heap in locals while KeyValues are copied (its stores may alias
     * anything); put back before kvc_miss and read again after it */
    bool room = kvc_room(h, 0);
    uint8_t *hp = h->p;
    size_t hl = h->len;
    if (i < n && s[i] == '{') {
        for (;;) {
            unsigned w = JD_KVC_WAYS;
            size_t vo;
            if (count < JD_KVC_MAX && (vo = j->kvc_voff[count]) != 0 && n - i >= vo + 16) {
                w = kvc_way(s + i + vo);
                const struct jd_kvc *c = &j->kvc[count][w];
                size_t tl = c->tlen; /* 0 (none) fails the first test */
                if (room && tl - 16 <= 48 && c->hlen <= 64 && n - i >= tl + 64 &&
                    kvc_same_short(s + i, s + c->at, tl)) {
                    kvc_move64(hp + hl, hp + c->hoff);
                    hl += c->hlen;
                    i += tl;
                    count++;
                    goto next;
                }
            }
            h->len = hl;
            size_t e = kvc_miss(j, s, n, i, count, w);
            if (e == 0) {
                hl = h->len;
                break;
            }
            i = e;
            count++;
            room = kvc_room(h, count);
            hp = h->p, hl = h->len;
        next:
            pos = i; /* the end of the last KeyValue read */
            if (i >= n || s[i] != ',') {
                break;
            }
            i++; /* the next one's '{' */
        }
    }
    h->len = hl;
    if (pos < n && s[pos] == ']') { /* the list's end, as jsonlex_arr_next takes it */
        j->lx.pos = pos + 1;
        out->blob.off = (uint32_t)off;
        out->blob.len = (uint32_t)(h->len - off);
        out->count = count;
        return 0;
    }
    /* anything else: the list read again from its '[' by jd_attr_list, whose
     * fast loop reads the same KeyValues (by kv_fast_at, which wrote or
     * would have written what was copied) into the same places and stops
     * where this loop did; then its general loop, errors and all */
    h->len = off;
    j->lx.pos = open;
    return jd_attr_list(j, "attributes", out);
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
    int rc = jd_attr_list(j, what, out);
    j->lx.pos = end;
    return rc;
}

/* u32 count + u32 nbytes + the attributes found at |pos|. */
int jd_counted_attrs_at(struct jd *j, size_t pos, const char *what)
{
    size_t hdr = j->h->len;
    struct attrs at;
    int rc;
    if (vbuf_put_u32(j->h, 0) < 0 || vbuf_put_u32(j->h, 0) < 0) {
        return jd_nomem(j);
    }
    if ((rc = attr_list_at(j, pos, what, &at)) < 0) {
        return rc;
    }
    hpatch_u32(j, hdr, at.count);
    hpatch_u32(j, hdr + 4, at.blob.len);
    return 0;
}

/*
 * The attributes member of a blob whose fixed part comes first (span
 * events and links), met at the cursor: read now when no other has been
 * (*here: the offset at the heap's end of its u32 count, u32 nbytes and
 * attributes), instead of skipped now and read again at the end. When the
 * read fails, heap, cursor and error text are put back and the member is
 * deferred as before (*pos), so a refusal comes where and as it did: the
 * deferred read fails the same way unless a later member fails first. A
 * second attributes member replaces the first, as before.
 */
int jd_counted_attrs_now(struct jd *j, const char *what, size_t *pos, size_t *here)
{
    size_t mark = j->h->len, start = (ws(j), j->lx.pos);
    if (*here != NONE) { /* a repeat: the last one wins */
        j->h->len = *here;
        mark = *here;
        *here = NONE;
    }
    if (j->h->cap - mark >= 8 || vbuf_reserve(j->h, 8) == 0) {
        struct attrs at;
        j->h->len = mark + 8;
        if (jd_attr_list(j, what, &at) == 0) {
            hpatch_u32(j, mark, at.count);
            hpatch_u32(j, mark + 4, at.blob.len);
            *here = mark;
            *pos = NONE;
            return 0;
        }
        if (j->err != NULL && j->errlen != 0) {
            j->err[0] = '\0';
        }
    }
    j->h->len = mark;
    j->lx.pos = start;
    return defer(j, pos);
}

/* The fixed part just written at |fixed| (the heap's end) moved before the
 * attributes read in place at |here|, as the blob's layout has it. */
int jd_counted_attrs_put_first(struct jd *j, size_t here, size_t fixed)
{
    size_t h = j->h->len - fixed, l = fixed - here;
    uint8_t *p = j->h->p;
    if (h <= 64 && j->h->cap - fixed >= 64) { /* the usual: saved in a local, no reserve */
        uint8_t save[64];
        memcpy(save, p + fixed, 64);
        memmove(p + here + h, p + here, l);
        memcpy(p + here, save, h);
        return 0;
    }
    if (vbuf_reserve(j->h, h) < 0) {
        return jd_nomem(j);
    }
    p = j->h->p;
    memcpy(p + fixed + h, p + fixed, h); /* past the end: the fixed part saved */
    memmove(p + here + h, p + here, l);
    memcpy(p + here, p + fixed + h, h);
    return 0;
}

/* A list of events or links into one blob. */
int jd_blob_list(struct jd *j, const char *what, int (*one)(struct jd *), struct blob *out,
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
