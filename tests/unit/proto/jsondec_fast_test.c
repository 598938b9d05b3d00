/*
 * jsondec_fast_test.c - the OTLP/JSON decoder's fast paths: number, hex and
 * member-name reading straight from the text (proto/jsondec_num.c), the
 * 16-byte string scan (lib/jsonlex.c), the compact KeyValue, and the
 * histogram / exponential histogram / summary details read in place.
 *
 * Each fast path is checked against exact values and against the general
 * path it must equal: the same request with blanks inserted (which every
 * fast path declines) or with members reordered (which defers the details)
 * must decode to the same bytes.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jsonlex.h"
#include "proto/jsondec.h"
#include "proto/jsondec_num.h"
#include "storage/arena.h"
#include "storage/batch.h"
#include "storage/val.h"

/* ---- helpers ---- */

struct dec {
    arena *a;
    struct batch *b;
    int rc;
    char err[256];
};

/* |s| with ' turned into " (owned). */
static char *q(const char *s)
{
    char *t = strdup(s);
    cr_assert(t != NULL);
    for (char *c = t; *c; c++) {
        if (*c == '\'') {
            *c = '"';
        }
    }
    return t;
}

/* |s| with a blank after every ',' ':' '{' '[' outside strings (owned). */
static char *spaced(const char *s)
{
    char *t = malloc(strlen(s) * 2 + 1), *d = t;
    bool in = false;
    cr_assert(t != NULL);
    for (const char *c = s; *c; c++) {
        *d++ = *c;
        if (*c == '\\' && in) {
            *d++ = *++c;
            continue;
        }
        if (*c == '"') {
            in = !in;
        } else if (!in && strchr(",:{[", *c) != NULL) {
            *d++ = ' ';
        }
    }
    *d = '\0';
    return t;
}

static void run(struct dec *d, enum signal s, const char *body)
{
    d->a = arena_new(0);
    d->b = batch_new(s);
    cr_assert(d->a != NULL && d->b != NULL);
    size_t n = strlen(body);
    char *copy = malloc(n + 1);
    memcpy(copy, body, n);
    d->rc = jsondec_decode(s, copy, n, d->a, d->b, d->err, sizeof(d->err));
    memset(copy, 'X', n); /* nothing may point into the body */
    free(copy);
}

static void done(struct dec *d)
{
    batch_free(d->b);
    arena_free(d->a);
}

static void ok(struct dec *d, enum signal s, const char *json)
{
    char *body = q(json);
    run(d, s, body);
    cr_assert_eq(d->rc, 0, "refused (%d): %s\n  input: %s", d->rc, d->err, body);
    free(body);
}

static void same_blob(const struct batch *x, struct blob bx, const struct batch *y, struct blob by,
                      const char *what)
{
    cr_assert_eq(bx.len, by.len, "%s: %u bytes vs %u", what, bx.len, by.len);
    cr_assert(memcmp(batch_blob(x, bx), batch_blob(y, by), bx.len) == 0, "%s: bytes differ", what);
}

static void same_mstr(struct mstr x, struct mstr y, const char *what)
{
    cr_assert_eq(x.len, y.len, "%s: length %u vs %u", what, x.len, y.len);
    cr_assert(x.len == 0 || memcmp(x.p, y.p, x.len) == 0, "%s: %.*s vs %.*s", what, (int)x.len, x.p,
              (int)y.len, y.p);
}

/* Every field of every row of two batches of the same signal. */
static void same_batch(const struct batch *x, const struct batch *y)
{
    cr_assert_eq(x->n_rows, y->n_rows);
    cr_assert_eq(x->n_resources, y->n_resources);
    cr_assert_eq(x->n_scopes, y->n_scopes);
    cr_assert_eq(x->n_metrics, y->n_metrics);
    for (uint32_t i = 0; i < x->n_resources; i++) {
        same_blob(x, x->resources[i].attrs.blob, y, y->resources[i].attrs.blob, "resource attrs");
    }
    for (uint32_t i = 0; i < x->n_scopes; i++) {
        same_mstr(x->scopes[i].name, y->scopes[i].name, "scope name");
    }
    for (uint32_t i = 0; i < x->n_metrics; i++) {
        cr_assert_eq(x->metrics[i].kind, y->metrics[i].kind);
        same_mstr(x->metrics[i].name, y->metrics[i].name, "metric name");
    }
    for (uint32_t i = 0; i < x->n_rows; i++) {
        if (x->signal == SIG_LOGS) {
            const struct log_row *a = &x->logs[i], *b = &y->logs[i];
            cr_assert_eq(a->time_ns, b->time_ns);
            cr_assert_eq(a->observed_ns, b->observed_ns);
            cr_assert_eq(a->severity_number, b->severity_number);
            cr_assert_eq(a->body_type, b->body_type);
            same_mstr(a->body_str, b->body_str, "body");
            same_blob(x, a->body_val, y, b->body_val, "body value");
            same_blob(x, a->attrs.blob, y, b->attrs.blob, "log attrs");
            cr_assert_eq(a->attrs.count, b->attrs.count);
            cr_assert_eq(a->has_trace_id, b->has_trace_id);
            cr_assert(memcmp(a->trace_id, b->trace_id, 16) == 0);
            cr_assert(memcmp(a->span_id, b->span_id, 8) == 0);
        } else if (x->signal == SIG_TRACES) {
            const struct span_row *a = &x->spans[i], *b = &y->spans[i];
            cr_assert_eq(a->start_ns, b->start_ns);
            cr_assert_eq(a->end_ns, b->end_ns);
            cr_assert(memcmp(a->trace_id, b->trace_id, 16) == 0);
            cr_assert(memcmp(a->span_id, b->span_id, 8) == 0);
            cr_assert(memcmp(a->parent_span_id, b->parent_span_id, 8) == 0);
            same_mstr(a->name, b->name, "span name");
            same_blob(x, a->attrs.blob, y, b->attrs.blob, "span attrs");
        } else {
            const struct point_row *a = &x->points[i], *b = &y->points[i];
            cr_assert_eq(a->start_ns, b->start_ns);
            cr_assert_eq(a->time_ns, b->time_ns);
            cr_assert_eq(a->value_type, b->value_type);
            cr_assert_eq(a->value.i, b->value.i);
            cr_assert_eq(a->count, b->count);
            cr_assert(memcmp(&a->sum, &b->sum, 8) == 0);
            same_blob(x, a->attrs.blob, y, b->attrs.blob, "point attrs");
            same_blob(x, a->detail, y, b->detail, "point detail");
            same_blob(x, a->exemplars, y, b->exemplars, "exemplars");
        }
    }
}

/* |json| (single-quoted) and its spaced-out form decode the same. */
static void same_as_general(enum signal s, const char *json, struct dec *fast)
{
    struct dec slow;
    char *body = q(json), *sp = spaced(body);
    run(fast, s, body);
    cr_assert_eq(fast->rc, 0, "refused (%d): %s\n  input: %s", fast->rc, fast->err, body);
    run(&slow, s, sp);
    cr_assert_eq(slow.rc, 0, "spaced form refused (%d): %s\n  input: %s", slow.rc, slow.err, sp);
    same_batch(fast->b, slow.b);
    done(&slow);
    free(body);
    free(sp);
}

/* |items| inside a request's envelope |pre| ... |post| (owned). */
static char *wrap(const char *pre, const char *items, const char *post)
{
    char *s = malloc(strlen(pre) + strlen(items) + strlen(post) + 1);
    cr_assert(s != NULL);
    strcpy(s, pre);
    strcat(s, items);
    strcat(s, post);
    return s;
}

static char *log_req(const char *records)
{
    return wrap("{'resourceLogs':[{'scopeLogs':[{'logRecords':[", records, "]}]}]}");
}

static char *metric_req(const char *metrics)
{
    return wrap("{'resourceMetrics':[{'scopeMetrics':[{'metrics':[", metrics, "]}]}]}");
}

/* |req| (single-quoted, owned: freed here) is refused with an error naming |needle|. */
static void refused(enum signal s, char *req, const char *needle)
{
    struct dec d;
    char *body = q(req);
    free(req);
    run(&d, s, body);
    cr_assert_eq(d.rc, -EPROTO, "accepted (%d, %s): %s", d.rc, d.err, body);
    cr_assert(strstr(d.err, needle) != NULL, "error \"%s\" does not name \"%s\"", d.err, needle);
    done(&d);
    free(body);
}

/* A string attribute of the heap, as val.h writes it. */
static void expect_str_attr(const struct batch *b, struct attrs at, const char *k, const char *v)
{
    struct vbuf w;
    vbuf_init(&w);
    cr_assert(val_put_key(&w, k, strlen(k)) == 0 && val_put_str(&w, v, strlen(v)) == 0);
    cr_assert_eq(at.count, 1);
    cr_assert_eq(at.blob.len, w.len, "attr bytes %u, want %zu", at.blob.len, w.len);
    cr_assert(memcmp(batch_blob(b, at.blob), w.p, w.len) == 0);
    vbuf_fini(&w);
}

/* ---- numbers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

Test(jsondec_fast, dec_to_f64_matches_strtod)
{
    uint64_t p10[20] = {1};
    for (int k = 1; k < 20; k++) {
        p10[k] = p10[k - 1] * 10;
    }
    char text[64];
    for (int k = 0; k < 200000; k++) {
        int digits = 1 + (int)(rnd() % 19);
        uint64_t m = rnd() % p10[digits];
        int e = (int)(rnd() % 39) - 19;
        if (k % 4 == 0) { /* near halfway between doubles above 2^53 */
            m = (1ull << 53) + (rnd() % 1024) * 2 + 1;
            m <<= rnd() % 10;
        }
        snprintf(text, sizeof(text), "%llue%d", (unsigned long long)m, e);
        double want = strtod(text, NULL), got = jdnum_dec_to_f64(m, e);
        cr_assert(memcmp(&want, &got, 8) == 0, "%s: %.17g, strtod %.17g", text, got, want);
    }
    /* ties to even at 2^53 + 1 and + 3; 17 significant digits the generator writes */
    cr_assert_eq(jdnum_dec_to_f64(9007199254740993ull, 0), 9007199254740992.0);
    cr_assert_eq(jdnum_dec_to_f64(9007199254740995ull, 0), 9007199254740996.0);
    cr_assert_eq(jdnum_dec_to_f64(11638899999999998ull, -14), 116.38899999999998);
    cr_assert_eq(jdnum_dec_to_f64(18446744073709551615ull, -19), 1.8446744073709551615);
}

/* How many inputs the multiply tests below take: MIRADB_F64_CASES when
 * set (a longer run by hand), else |def|. */
static long f64_cases(long def)
{
    const char *e = getenv("MIRADB_F64_CASES");
    return e != NULL && atol(e) > 0 ? atol(e) : def;
}

static void dec_is_strtod(uint64_t m, int e)
{
    char text[64];
    snprintf(text, sizeof(text), "%llue%d", (unsigned long long)m, e);
    double want = strtod(text, NULL), got = jdnum_dec_to_f64(m, e);
    cr_assert(memcmp(&want, &got, 8) == 0, "%s: %.17g, strtod %.17g", text, got, want);
}

/*
 * e < 0 with m > 2^53 goes through the multiply by a truncated 10^e (the
 * Eisel-Lemire shape) unless a midpoint could lie within its error; every
 * case must equal strtod. Random mantissas of 16-20 digits at every
 * negative exponent; exact midpoints between doubles (odd * 5^j / 10^j,
 * also with trailing zeros) and their neighbours, which must fall back or
 * round the same; mantissas at powers of two and ten, and the largest.
 */
Test(jsondec_fast, negative_exponents_by_multiply_equal_strtod)
{
    long cases = f64_cases(1000000);
    for (long c = 0; c < cases; c++) {
        uint64_t m = rnd();
        switch (c % 4) {
        case 0: /* any 64-bit mantissa above 2^53 */
            m |= 1ull << 53;
            break;
        case 1: /* 17 digits, as the generator's doubles */
            m = 10000000000000000ull + m % 90000000000000000ull;
            break;
        case 2: /* 18-19 digits */
            m = 100000000000000000ull + m % 9900000000000000000ull;
            break;
        default: /* 54-64 significant bits */
            m >>= rnd() % 11;
            m |= 1ull << 53;
            break;
        }
        dec_is_strtod(m, -1 - (int)(rnd() % 19));
    }
    static const uint64_t p5[5] = {1, 5, 25, 125, 625};
    for (long c = 0; c < cases / 4; c++) {
        int jx = 1 + (int)(rnd() % 4);
        uint64_t a = (1ull << 52) | (rnd() >> 12), odd = 2 * a + 1;
        if (c % 64 == 0) {
            odd = (1ull << 54) - 1; /* rounds up into the next binade */
        }
        uint64_t mid = odd * p5[jx];
        for (int t = 0; jx + t <= 19 && mid <= UINT64_MAX / 10 + (t == 0); t++) {
            for (int64_t dm = -2; dm <= 2; dm++) {
                dec_is_strtod(mid + (uint64_t)dm, -(jx + t));
            }
            if (mid > UINT64_MAX / 10) {
                break;
            }
            mid *= 10;
        }
    }
    for (int e = -19; e <= -1; e++) {
        for (int b = 54; b < 64; b++) {
            for (int64_t dm = -3; dm <= 3; dm++) {
                dec_is_strtod((1ull << b) + (uint64_t)dm, e);
            }
        }
        for (uint64_t p = 100000000000000000ull; p != 0;
             p = p == 10000000000000000000ull ? 0 : p * 10) {
            for (int64_t dm = -3; dm <= 3; dm++) {
                dec_is_strtod(p + (uint64_t)dm, e);
            }
        }
        dec_is_strtod(UINT64_MAX, e);
        dec_is_strtod(UINT64_MAX - 1, e);
        dec_is_strtod(9999999999999999999ull, e);
    }
}

/* The same as JSON text: 16-19 digits with the point anywhere (and "0."
 * with leading fraction zeros), read by jdnum_f64_fast and jdnum_f64;
 * every accepted text equals strtod, and every one of this shape is
 * accepted. */
Test(jsondec_fast, long_fraction_texts_equal_strtod)
{
    long cases = f64_cases(1000000) / 2;
    char digs[32], text[64];
    for (long c = 0; c < cases; c++) {
        int nd = 16 + (int)(rnd() % 4);
        for (int i = 0; i < nd; i++) {
            digs[i] = (char)('0' + rnd() % 10);
        }
        digs[0] = (char)('1' + rnd() % 9);
        digs[nd] = '\0';
        int ip = (int)(rnd() % 8); /* integer digits; 0: "0." and the fraction */
        int lz = ip == 0 ? (int)(rnd() % 3) : 0;
        if (nd + lz > 19) {
            lz = 19 - nd;
        }
        int len = snprintf(text, sizeof(text), "%s%.*s%s%.*s%s,        ", c % 2 ? "-" : "",
                           ip == 0 ? 1 : ip, ip == 0 ? "0" : digs, ".", lz, "000", digs + ip);
        double want = strtod(text, NULL), got1, got2;
        size_t u1, u2;
        cr_assert(jdnum_f64_fast(text, (size_t)len, &got1, &u1), "%s declined", text);
        cr_assert(jdnum_f64(text, (size_t)len, &got2, &u2), "%s declined", text);
        cr_assert(memcmp(&got1, &want, 8) == 0, "%s: %.17g, strtod %.17g", text, got1, want);
        cr_assert(memcmp(&got2, &want, 8) == 0, "%s: %.17g, strtod %.17g", text, got2, want);
        cr_assert_eq(u1, (size_t)len - 9);
        cr_assert_eq(u2, (size_t)len - 9);
    }
}

/*
 * jdnum_point16 over its whole shape: 1-7 integer digits (or a lone "0"),
 * '.', 1-21 fraction digits (random, or the 17-19 digits nearest a midpoint
 * between two doubles), then a terminator. It must take exactly those with at
 * most 19 digits in all and no '.', 'e', 'E', '+' or '-' after, each equal to
 * strtod through jdnum_f64_fast, with its length.
 */
Test(jsondec_fast, point16_takes_its_shape_and_equals_strtod)
{
    static const char ends[] = ",]} \"x.eE+-";
    long cases = f64_cases(1000000);
    char text[96];
    for (long c = 0; c < cases; c++) {
        int a = 1 + (int)(rnd() % 7), f = 1 + (int)(rnd() % 21), len = 0;
        if (c % 3 == 0) { /* near a midpoint: 17-19 significant digits of it */
            uint64_t bits = (0x3ffull + rnd() % 23) << 52 | (rnd() & ((1ull << 52) - 1));
            double lo, hi;
            memcpy(&lo, &bits, 8);
            hi = nextafter(lo, INFINITY);
            long double mid = ((long double)lo + (long double)hi) / 2;
            len = snprintf(text, 64, "%.*Lf", 0, mid); /* its integer digits */
            a = len;
            f = 17 + (int)(rnd() % 3) - a;
            if (a > 7 || f < 1) {
                continue;
            }
            len = snprintf(text, 64, "%.*Lf", f, mid + (long double)(rnd() % 3) - 1.0L);
            if (len != a + 1 + f) {
                continue; /* a carry into one more integer digit */
            }
        } else {
            for (int i = 0; i < a; i++) {
                text[len++] = (char)('0' + rnd() % 10);
            }
            if (a > 1 && text[0] == '0') {
                text[0] = (char)('1' + rnd() % 9);
            }
            text[len++] = '.';
            for (int i = 0; i < f; i++) {
                text[len++] = (char)('0' + rnd() % 10);
            }
        }
        char end = ends[rnd() % (sizeof(ends) - 1)];
        text[len] = end;
        memcpy(text + len + 1, "0123456789abcdefghijklmnop", 27);
        bool want_take = a + f <= 19 && strchr(".eE+-", end) == NULL;
        uint64_t m = 0;
        int e = 0;
        unsigned got = jdnum_point16(text, &m, &e);
        cr_assert_eq(got != 0, want_take, "%.*s%c: point16 %u", len, text, end, got);
        if (got == 0) {
            continue;
        }
        cr_assert_eq(got, (unsigned)len, "%.*s: length %u", len, text, got);
        text[len] = '\0';
        double want = strtod(text, NULL), v;
        text[len] = end;
        size_t used;
        cr_assert(jdnum_f64_fast(text, (size_t)len + 27, &v, &used));
        cr_assert(memcmp(&v, &want, 8) == 0 && used == (size_t)len, "%.*s: %.17g, strtod %.17g",
                  len, text, v, want);
        cr_assert(memcmp(&v, &(double){jdnum_dec_to_f64(m, e)}, 8) == 0);
    }
    /* declined: a leading zero, eight integer digits, no fraction digit */
    uint64_t m;
    int e;
    cr_assert_eq(jdnum_point16("01.5,0123456789abcdefghijk", &m, &e), 0);
    cr_assert_eq(jdnum_point16("12345678.5,0123456789abcdefghi", &m, &e), 0);
    cr_assert_eq(jdnum_point16("12.,0123456789abcdefghijklmn", &m, &e), 0);
    cr_assert_eq(jdnum_point16("0.000000000000000001,012345", &m, &e), 20);
    cr_assert(m == 1 && e == -18);
}

/*
 * jdnum_point16 past its 16 bytes: 1-7 integer digits and the fraction to
 * byte 15, then 0-5 more digits and a terminator.
 * One or two more digits are read by two byte tests, three or four by the
 * 8-byte run, five declined (20 digits); exact m, e and length, the value
 * strtod's through jdnum_f64_fast, signed or not; after the terminator
 * digits or letters (a digit there must not be taken for one).
 */
Test(jsondec_fast, point16_digits_past_its_16_bytes)
{
    static const char ends[] = ",]} \"x.eE+-";
    char text[96];
    for (int a = 1; a <= 7; a++) {
        for (int r = 0; r <= 5; r++) {
            for (size_t k = 0; k < sizeof(ends) - 1; k++) {
                for (int rep = 0; rep < 40; rep++) {
                    int len = 0;
                    uint64_t m = 0;
                    text[len++] = '-';
                    for (int i = 0; i < 16 + r; i++) {
                        if (i == a) {
                            text[len++] = '.';
                            continue;
                        }
                        int dg = (int)(rnd() % 10);
                        if (i == 0 && a > 1 && dg == 0) {
                            dg = 1 + (int)(rnd() % 9);
                        }
                        text[len++] = (char)('0' + dg);
                        m = m * 10 + (uint64_t)dg;
                    }
                    text[len] = ends[k];
                    /* digits after the terminator, or none */
                    memcpy(text + len + 1,
                           rep % 2 ? "0123456789012345678901234" : "abcdefghijklmnopqrstuvwxy", 26);
                    bool take = r <= 4 && strchr(".eE+-", ends[k]) == NULL;
                    uint64_t gm = 0;
                    int ge = 0;
                    unsigned got = jdnum_point16(text + 1, &gm, &ge);
                    cr_assert_eq(got != 0, take, "%.*s: point16 %u", len, text, got);
                    if (!take) {
                        continue;
                    }
                    cr_assert_eq(got, (unsigned)len - 1, "%.*s: length %u", len, text, got);
                    cr_assert(gm == m && ge == -(15 - a + r), "%.*s: %llu e%d", len, text,
                              (unsigned long long)gm, ge);
                    for (int sign = 0; sign < 2; sign++) {
                        const char *t = text + 1 - sign;
                        text[len] = '\0';
                        double want = strtod(t, NULL), v;
                        text[len] = ends[k];
                        size_t used;
                        cr_assert(jdnum_f64_fast(t, strlen(t), &v, &used), "%s declined", t);
                        cr_assert(memcmp(&v, &want, 8) == 0 && used == (size_t)len - 1 + sign,
                                  "%.*s: %.17g (%zu), strtod %.17g", len, text, v, used, want);
                    }
                }
            }
        }
    }
}

/*
 * jdnum_num_byte is true for exactly '.', 'e', 'E', '+' and '-' of the 256
 * bytes; and every reader that tests it leaves a number followed by one of
 * them to the rest of the grammar: an exponent read in full, the others
 * not taken as a number ending there. Shapes: within 8 bytes (jdnum_dec8),
 * 8-15 bytes (the 8-byte runs), 16-18 bytes with a tail (point16), 9
 * integer digits (jdnum_f64_fast's second path).
 */
Test(jsondec_fast, number_continuation_bytes)
{
    for (int c = 0; c < 256; c++) {
        bool want = c != 0 && strchr(".eE+-", c) != NULL;
        cr_assert_eq(jdnum_num_byte((char)c), want, "byte 0x%02x", c);
    }
    static const char *const nums[] = {"5",
                                       "0.25",
                                       "-12.5",
                                       "1234567.1",
                                       "1234567.12345",
                                       "2.9721053293940667",
                                       "0.69446136761976",
                                       "-8364.951517012665",
                                       "123456789.5"};
    static const char cont[] = ".eE+-";
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        for (size_t k = 0; k < sizeof(cont) - 1; k++) {
            char text[96];
            size_t nl = strlen(nums[i]);
            int len =
                snprintf(text, sizeof text, "%s%c5,                         ", nums[i], cont[k]);
            bool expo = cont[k] == 'e' || cont[k] == 'E';
            double want = strtod(text, NULL), v = 0;
            size_t used = 0;
            bool ok[3] = {jdnum_f64_fast(text, (size_t)len, &v, &used), false, false};
            for (int r = 0; r < 3; r++) {
                if (r == 1) {
                    ok[1] = jdnum_f64(text, (size_t)len, &v, &used);
                } else if (r == 2) {
                    ok[2] = jdnum_f64_7(text, (size_t)len, &v, &used);
                }
                if (expo) {
                    cr_assert(ok[r] && used == nl + 2 && memcmp(&v, &want, 8) == 0,
                              "%s: reader %d: %d %.17g (%zu)", text, r, ok[r], v, used);
                } else {
                    cr_assert(!ok[r] || used != nl, "%s: reader %d took %zu bytes", text, r, used);
                }
            }
        }
    }
}

static void f64_is(const char *text, double want, size_t used)
{
    double got;
    size_t n;
    cr_assert(jdnum_f64(text, strlen(text), &got, &n), "%s declined", text);
    cr_assert(memcmp(&got, &want, 8) == 0, "%s: %.17g, want %.17g", text, got, want);
    cr_assert_eq(n, used, "%s: used %zu, want %zu", text, n, used);
}

static void f64_declines(const char *text)
{
    double got;
    size_t n;
    cr_assert(!jdnum_f64(text, strlen(text), &got, &n), "%s taken (%.17g)", text, got);
}

Test(jsondec_fast, f64_reads_json_numbers_and_declines_the_rest)
{
    f64_is("0", 0.0, 1);
    f64_is("-0", -0.0, 2);
    f64_is("-0.0,", -0.0, 4);
    f64_is("2.5e+2}", 250.0, 6);
    f64_is("1.5E-3]", 0.0015, 6);
    f64_is("0.000123", 0.000123, 8);
    f64_is("116.38899999999998", 116.38899999999998, 18);
    f64_is("8364.9515170126651", 8364.9515170126651, 18);
    f64_is("1e19", 1e19, 4);
    f64_is("123e-19", 1.23e-17, 7);
    f64_declines("123e-21");                /* 10^21 does not fit 64 bits */
    f64_declines("1e23");                   /* beyond the exact range: strtod */
    f64_declines("12345678901234567890");   /* 20 digits */
    f64_declines("0.30000000000000000004"); /* 20 significant digits */
    f64_declines("1.");                     /* not JSON */
    f64_declines("-");                      /* not JSON */
    f64_declines(".5");                     /* not JSON */
    f64_declines("1e");                     /* not JSON */
    f64_declines("01");                     /* a leading zero */
    f64_declines("\"1.5\"");                /* quoted */
    f64_declines("1.5e3.2");                /* what follows is not a delimiter */
    for (int k = 0; k < 20000; k++) {       /* random text forms against strtod */
        char text[64];
        double got;
        size_t n;
        uint64_t m = rnd() % 100000000000000000ull;
        int frac = (int)(rnd() % 8), e = (int)(rnd() % 9) - 4;
        int len = snprintf(text, sizeof(text), "%llu", (unsigned long long)m);
        if (frac != 0 && frac < len) {
            memmove(text + len - frac + 1, text + len - frac, (size_t)frac + 1);
            text[len - frac] = '.';
        }
        if (rnd() % 2) {
            snprintf(text + strlen(text), 16, "e%d", e);
        }
        if (jdnum_f64(text, strlen(text), &got, &n)) {
            double want = strtod(text, NULL);
            cr_assert(memcmp(&got, &want, 8) == 0, "%s: %.17g, strtod %.17g", text, got, want);
            cr_assert_eq(n, strlen(text));
        }
    }
}

static void int_is(const char *text, bool neg, uint64_t mag, size_t used)
{
    bool n_;
    uint64_t m;
    size_t u;
    cr_assert(jdnum_int(text, strlen(text), &n_, &m, &u), "%s declined", text);
    cr_assert_eq(n_, neg, "%s: sign", text);
    cr_assert_eq(m, mag, "%s: %llu", text, (unsigned long long)m);
    cr_assert_eq(u, used, "%s: used %zu", text, u);
}

static void int_declines(const char *text)
{
    bool neg;
    uint64_t m;
    size_t u;
    cr_assert(!jdnum_int(text, strlen(text), &neg, &m, &u), "%s taken", text);
}

Test(jsondec_fast, int_reads_digits_eight_at_a_time_and_declines_the_rest)
{
    int_is("0,", false, 0, 1);
    int_is("\"0\"", false, 0, 3);
    int_is("12345678}", false, 12345678, 8);
    int_is("\"1234567890123456\"", false, 1234567890123456ull, 18);
    int_is("\"9223372036854775807\"", false, 9223372036854775807ull, 21);
    int_is("\"-9223372036854775808\"", true, 9223372036854775808ull, 22);
    int_is("\"9999999999999999999\"", false, 9999999999999999999ull, 21);
    int_is("1767225600000288020]", false, 1767225600000288020ull, 19);
    int_is("-17,", true, 17, 3);
    int_declines("17");                       /* a bare number must be followed by something */
    int_declines("\"18446744073709551615\""); /* 20 digits: the general path */
    int_declines("18446744073709551616");
    int_declines("01");
    int_declines("\"01\"");
    int_declines("1e3");
    int_declines("1.0");
    int_declines("\"12a\"");
    int_declines("\"1234567a\"");  /* a non-digit inside the first eight */
    int_declines("\"12345678/\""); /* '/' and ':' border the digits */
    int_declines("\"1234567:\"");
    int_declines("\"\"");
    int_declines("-");
    int_declines("\"12");
}

Test(jsondec_fast, hex_any_case_and_no_neighbours)
{
    uint8_t b[8];
    cr_assert(jdnum_hex(b, "0123456789ABCDEF", 8));
    cr_assert(memcmp(b, "\x01\x23\x45\x67\x89\xab\xcd\xef", 8) == 0);
    cr_assert(jdnum_hex(b, "aBcDeF09", 4));
    cr_assert(memcmp(b, "\xab\xcd\xef\x09", 4) == 0);
    const char *bad[] = {"0g", ":0", "0/", "@0", "G0", "`0", "0 "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert(!jdnum_hex(b, bad[i], 1), "%s taken", bad[i]);
    }
}

/* ---- strings ---- */

Test(jsondec_fast, string_scan_stops_at_every_position_of_a_chunk)
{
    /* a stop byte at each offset 0..40 of a string, after a run of 'a' */
    for (size_t at = 0; at <= 40; at++) {
        for (int kind = 0; kind < 3; kind++) {
            char text[128];
            memset(text, 'a', sizeof(text));
            text[0] = '"';
            text[1 + at] = kind == 0 ? '"' : kind == 1 ? '\\' : '\x01';
            if (kind == 1) {
                text[2 + at] = 'n';
                text[3 + at] = '"';
            }
            size_t n = kind == 1 ? 4 + at : 2 + at + 20;
            struct jsonlex x;
            struct jsonlex_str js;
            jsonlex_init(&x, text, n);
            int rc = jsonlex_str(&x, &js);
            if (kind == 2) {
                cr_assert_eq(rc, -EPROTO, "control byte at %zu accepted", at);
                cr_assert_eq(x.err_at, 1 + at);
                continue;
            }
            cr_assert_eq(rc, 0, "stop at %zu: %s", at, x.err);
            cr_assert_eq(js.raw, kind == 0 ? at : at + 2);
            cr_assert_eq(js.len, kind == 0 ? at : at + 1);
            cr_assert_eq(x.pos, kind == 0 ? at + 2 : at + 4);
            cr_assert_eq(jsonlex_plain_end(text, 1, n), 1 + at);
        }
    }
}

Test(jsondec_fast, compact_keyvalues_equal_the_general_path)
{
    struct dec d;
    /* strings of 7, 8, 15, 16, 31, 32 and 33 bytes, an escape at a 16-byte
     * border, a non-ASCII key, int64 extremes as strings, an exponent double,
     * a double that needs strtod, both booleans, and values the fast path
     * declines (a quoted double, a bare int, an escaped key) */
    char *r = log_req("{'timeUnixNano':'1767225600000288020','attributes':["
                      "{'key':'k7','value':{'stringValue':'abcdefg'}},"
                      "{'key':'k8','value':{'stringValue':'abcdefgh'}},"
                      "{'key':'k15','value':{'stringValue':'abcdefghijklmno'}},"
                      "{'key':'k16','value':{'stringValue':'abcdefghijklmnop'}},"
                      "{'key':'k31','value':{'stringValue':'abcdefghijklmnopqrstuvwxyz01234'}},"
                      "{'key':'k32','value':{'stringValue':'abcdefghijklmnopqrstuvwxyz012345'}},"
                      "{'key':'k33','value':{'stringValue':'abcdefghijklmnopqrstuvwxyz0123456'}},"
                      "{'key':'esc','value':{'stringValue':'abcdefghijklmno\\nxyz'}},"
                      "{'key':'esc16','value':{'stringValue':'abcdefghijklmnop\\u00e9'}},"
                      "{'key':'caf\xc3\xa9','value':{'stringValue':'\xe2\x82\xac'}},"
                      "{'key':'max','value':{'intValue':'9223372036854775807'}},"
                      "{'key':'min','value':{'intValue':'-9223372036854775808'}},"
                      "{'key':'bare','value':{'intValue':42}},"
                      "{'key':'exp','value':{'doubleValue':2.5e-3}},"
                      "{'key':'long','value':{'doubleValue':0.30000000000000004441}},"
                      "{'key':'qd','value':{'doubleValue':'1.5'}},"
                      "{'key':'t','value':{'boolValue':true}},"
                      "{'key':'f','value':{'boolValue':false}},"
                      "{'key':'k\\u0065y','value':{'stringValue':'v'}}]},"
                      "{'attributes':[{'value':{'stringValue':'v'},'key':'late'}]}");
    same_as_general(SIG_LOGS, r, &d);
    const struct log_row *l = &d.b->logs[0];
    cr_assert_eq(l->time_ns, 1767225600000288020ull);
    cr_assert_eq(l->attrs.count, 19);
    /* one exact check of each kind, read back */
    struct val_rd rd = {batch_blob(d.b, l->attrs.blob),
                        batch_blob(d.b, l->attrs.blob) + l->attrs.blob.len};
    const char *k;
    size_t kn;
    struct val v;
    int seen = 0;
    while (rd.p < rd.end && val_rd_str(&rd, &k, &kn) == 0 && val_rd_value(&rd, &v) == 0) {
        if (kn == 3 && memcmp(k, "k33", 3) == 0) {
            cr_assert_eq(v.type, VAL_STR);
            cr_assert_eq(v.n, 33);
            seen++;
        } else if (kn == 5 && memcmp(k, "esc16", 5) == 0) {
            cr_assert_eq(v.n, 18);
            cr_assert(memcmp(v.s, "abcdefghijklmnop\xc3\xa9", 18) == 0);
            seen++;
        } else if (kn == 3 && memcmp(k, "min", 3) == 0) {
            cr_assert_eq(v.type, VAL_INT);
            cr_assert_eq(v.i, INT64_MIN);
            seen++;
        } else if (kn == 4 && memcmp(k, "long", 4) == 0) {
            cr_assert_eq(v.type, VAL_DOUBLE);
            cr_assert_eq(v.d, 0.30000000000000004);
            seen++;
        } else if (kn == 3 && memcmp(k, "key", 3) == 0) {
            seen++;
        }
    }
    cr_assert_eq(seen, 5, "read back %d of the 5 checked attributes", seen);
    expect_str_attr(d.b, d.b->logs[1].attrs, "late", "v");
    done(&d);
    free(r);
}

Test(jsondec_fast, member_order_may_change_between_objects)
{
    struct dec d;
    /* the decoder guesses each member from the previous record's order */
    char *r = log_req("{'timeUnixNano':'1','severityNumber':9,'body':{'stringValue':'a'}},"
                      "{'body':{'stringValue':'b'},'severityNumber':10,'timeUnixNano':'2'},"
                      "{'severity_number':11,'time_unix_nano':'3','unknown':{'x':[1]}},"
                      "{'timeUnixNano':'4','traceId':'0123456789ABCDEF0123456789abcdef',"
                      "'spanId':'FEDCBA9876543210','severityNumber':'SEVERITY_NUMBER_WARN'}");
    ok(&d, SIG_LOGS, r);
    cr_assert_eq(d.b->n_rows, 4);
    const struct log_row *l = d.b->logs;
    cr_assert_eq(l[0].time_ns, 1);
    cr_assert_eq(l[1].time_ns, 2);
    cr_assert_eq(l[2].time_ns, 3);
    cr_assert_eq(l[3].time_ns, 4);
    cr_assert_eq(l[0].severity_number, 9);
    cr_assert_eq(l[1].severity_number, 10);
    cr_assert_eq(l[2].severity_number, 11);
    cr_assert_eq(l[3].severity_number, 13);
    same_mstr(l[1].body_str, (struct mstr){"b", 1}, "body");
    cr_assert(l[3].has_trace_id && l[3].has_span_id);
    cr_assert(memcmp(l[3].trace_id,
                     "\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67\x89\xab\xcd\xef", 16) == 0);
    cr_assert(memcmp(l[3].span_id, "\xfe\xdc\xba\x98\x76\x54\x32\x10", 8) == 0);
    done(&d);
    free(r);
}

Test(jsondec_fast, bad_hex_ids_still_refused)
{
    refused(SIG_LOGS, log_req("{'traceId':'0123456789abcdef0123456789abcdeg'}"),
            "traceId: not a hex string");
}

/* ---- details read in place ---- */

/* The detail of point 0 of each request must be the same bytes. */
static void same_details(const char *a, const char *b)
{
    struct dec x, y;
    char *ra = metric_req(a), *rb = metric_req(b);
    ok(&x, SIG_METRICS, ra);
    ok(&y, SIG_METRICS, rb);
    cr_assert_eq(x.b->n_rows, y.b->n_rows);
    for (uint32_t i = 0; i < x.b->n_rows; i++) {
        same_blob(x.b, x.b->points[i].detail, y.b, y.b->points[i].detail, "detail");
        same_blob(x.b, x.b->points[i].exemplars, y.b, y.b->points[i].exemplars, "exemplars");
        same_blob(x.b, x.b->points[i].attrs.blob, y.b, y.b->points[i].attrs.blob, "attrs");
    }
    done(&x);
    done(&y);
    free(ra);
    free(rb);
}

/* The metric |m| (single-quoted) decodes as its spaced form does, then
 * again into |d|; returns the request, the caller's to free after done(). */
static char *details_as_spaced(struct dec *d, const char *m)
{
    char *sp = spaced(m);
    same_details(m, sp);
    free(sp);
    char *r = metric_req(m);
    ok(d, SIG_METRICS, r);
    return r;
}

Test(jsondec_fast, histogram_detail_in_place_equals_deferred)
{
    struct dec d;
    const char *in_order = "{'name':'h','histogram':{'dataPoints':[{'attributes':[{'key':'a','"
                           "value':{'intValue':'1'}}],"
                           "'count':'6','bucketCounts':['1','2','3'],'explicitBounds':[0.5,1e1],"
                           "'exemplars':[{'asInt':'5','filteredAttributes':[{'key':'x','value':{'"
                           "boolValue':true}}]}]}]}}";
    const char *reversed =
        "{'name':'h','histogram':{'dataPoints':[{'explicitBounds':[0.5,1e1],"
        "'exemplars':[{'asInt':'5','filteredAttributes':[{'key':'x','value':{'boolValue':true}}]}],"
        "'count':'6','bucketCounts':['1','2','3'],'attributes':[{'key':'a','value':{'intValue':'1'}"
        "}]}]}}";
    same_details(in_order, reversed);
    char *r = metric_req(in_order);
    ok(&d, SIG_METRICS, r);
    const uint8_t *p = batch_blob(d.b, d.b->points[0].detail);
    cr_assert_eq(d.b->points[0].detail.len, 4 + 3 * 8 + 4 + 2 * 8);
    uint32_t n;
    uint64_t c2;
    double b1;
    memcpy(&n, p, 4);
    memcpy(&c2, p + 4 + 16, 8);
    memcpy(&b1, p + 4 + 24 + 4 + 8, 8);
    cr_assert_eq(n, 3);
    cr_assert_eq(c2, 3);
    cr_assert_eq(b1, 10.0);
    done(&d);
    free(r);
    /* no bounds; bounds before buckets; a repeated list (the last wins);
     * blanks inside a list; a bound list the fast loop hands over mid-way */
    same_details("{'histogram':{'dataPoints':[{'bucketCounts':['4']},{'bucketCounts':['4']}]}}",
                 "{'histogram':{'dataPoints':[{'bucketCounts': ['4']},{'bucketCounts':[ '4' ]}]}}");
    same_details("{'histogram':{'dataPoints':[{'bucketCounts':['1'],'explicitBounds':[2]}]}}",
                 "{'histogram':{'dataPoints':[{'explicitBounds':[2],'bucketCounts':['1']}]}}");
    same_details("{'histogram':{'dataPoints':[{'bucketCounts':['9'],'bucketCounts':['1'],'"
                 "explicitBounds':[2]}]}}",
                 "{'histogram':{'dataPoints':[{'explicitBounds':[2],'bucketCounts':['1']}]}}");
    same_details(
        "{'histogram':{'dataPoints':[{'bucketCounts':['1','2'],'explicitBounds':[2, 3.5]}]}}",
        "{'histogram':{'dataPoints':[{'explicitBounds':[2,3.5],'bucketCounts':['1','2']}]}}");
    same_details("{'histogram':{'dataPoints':[{'bucketCounts':['1',2,'3'],'explicitBounds':"
                 "[1,'2',1e23,3]}]}}",
                 "{'histogram':{'dataPoints':[{'explicitBounds':[1,'2',1e23,3],'bucketCounts':"
                 "['1',2,'3']}]}}");
}

Test(jsondec_fast, bad_bucket_list_in_place_gives_the_deferred_error)
{
    refused(SIG_METRICS, metric_req("{'histogram':{'dataPoints':[{'bucketCounts':['1','-2']}]}}"),
            "bucketCounts: negative value for an unsigned field");
    /* a syntax error after the list is what is reported, not the list */
    refused(SIG_METRICS,
            metric_req("{'histogram':{'dataPoints':[{'bucketCounts':['1','x'],'count':tru}]}}"),
            "count: expected a number or a numeric string");
}

Test(jsondec_fast, exponential_histogram_and_summary_in_place_equal_deferred)
{
    struct dec d;
    const char *in_order =
        "{'exponentialHistogram':{'dataPoints':[{'scale':2,'zeroCount':'3','positive':{'offset':"
        "10,'bucketCounts':['1','39']},'negative':{'offset':-2,'bucketCounts':['5']},"
        "'zeroThreshold':0.25,'min':1,'max':2}]}}";
    const char *deferred =
        "{'exponentialHistogram':{'dataPoints':[{'negative':{'offset':-2,'bucketCounts':['5']},"
        "'zeroThreshold':0.25,'positive':{'offset':10,'bucketCounts':['1','39']},'scale':2,"
        "'zeroCount':'3','min':1,'max':2}]}}";
    same_details(in_order, deferred);
    char *r = metric_req(in_order);
    ok(&d, SIG_METRICS, r);
    const uint8_t *p = batch_blob(d.b, d.b->points[0].detail);
    uint32_t scale, off, n;
    uint64_t zc;
    double zt;
    memcpy(&scale, p, 4);
    memcpy(&zc, p + 4, 8);
    memcpy(&zt, p + 12, 8);
    memcpy(&off, p + 20, 4);
    memcpy(&n, p + 24, 4);
    cr_assert_eq(scale, 2);
    cr_assert_eq(zc, 3);
    cr_assert_eq(zt, 0.25);
    cr_assert_eq(off, 10);
    cr_assert_eq(n, 2);
    cr_assert_eq(d.b->points[0].detail.len, 20 + 8 + 16 + 8 + 8);
    done(&d);
    free(r);
    /* positive only; negative only; positive after the scale; a repeat */
    same_details("{'exponentialHistogram':{'dataPoints':[{'positive':{'bucketCounts':['7']}}]}}",
                 "{'exponentialHistogram':{'dataPoints':[{'negative':{},'positive':{"
                 "'bucketCounts':['7']},'scale':0}]}}");
    same_details(
        "{'exponentialHistogram':{'dataPoints':[{'negative':{'offset':1}}]}}",
        "{'exponentialHistogram':{'dataPoints':[{'negative':{'offset':1},'positive':{}}]}}");
    same_details("{'exponentialHistogram':{'dataPoints':[{'positive':{'bucketCounts':['1']},"
                 "'positive':{'offset':3,'bucketCounts':['2']},'scale':-1}]}}",
                 "{'exponentialHistogram':{'dataPoints':[{'scale':-1,'positive':{'offset':3,"
                 "'bucketCounts':['2']}}]}}");
    same_details("{'summary':{'dataPoints':[{'count':'2','quantileValues':[{'quantile':0.5,"
                 "'value':1.5},{'value':3}]}]}}",
                 "{'summary':{'dataPoints':[{'quantileValues':[{'quantile':0.5,'value':1.5},"
                 "{'value':3}],'count':'2'}]}}");
    same_details("{'summary':{'dataPoints':[{'quantileValues':[{'value':9}],'quantileValues':"
                 "[{'quantile':1,'value':2}]}]}}",
                 "{'summary':{'dataPoints':[{'quantileValues':[{'quantile':1,'value':2}]}]}}");
}

/* ---- round 2: digit runs, short doubles, SSE2 hex, KeyValue loop,
 * ValueAtQuantile, repeated bound lists ---- */

/* Every length of digit run, quoted and bare, with every kind of byte
 * after it inside the 8-byte window (the non-digit mask must find the
 * first one, ':' and '/' border the digits, 0xfa..0xff carry), and at the
 * very end of the text (no window: the byte loop). */
Test(jsondec_fast, int_digit_runs_of_every_length_and_neighbour)
{
    static const char after[] = {',', ']', '}', ':', '/', ' ', '"', (char)0xfa, (char)0xff, 'x'};
    for (int nd = 1; nd <= 20; nd++) {
        char digits[24];
        for (int i = 0; i < nd; i++) {
            digits[i] = (char)('1' + (i * 7 + nd) % 9);
        }
        digits[nd] = '\0';
        unsigned long long want = strtoull(digits, NULL, 10);
        for (size_t a = 0; a < sizeof(after); a++) {
            for (int quoted = 0; quoted <= 1; quoted++) {
                char text[64];
                int len = snprintf(text, sizeof(text), "%s%s%s%c0123456789", quoted ? "\"" : "",
                                   digits, quoted ? "\"" : "", after[a]);
                bool neg;
                uint64_t m;
                size_t u;
                bool took = jdnum_int(text, (size_t)len, &neg, &m, &u);
                bool expect = nd <= 19;
                cr_assert_eq(took, expect, "%s: taken %d", text, took);
                if (took) {
                    cr_assert_eq(m, want, "%s: %llu", text, (unsigned long long)m);
                    cr_assert_eq(u, (size_t)(nd + 2 * quoted), "%s: used %zu", text, u);
                    cr_assert(!neg);
                }
                /* the same digits ending the text: a quoted one still reads */
                size_t end = (size_t)(nd + 2 * quoted);
                took = jdnum_int(text, end, &neg, &m, &u);
                cr_assert_eq(took, quoted && nd <= 19, "%.*s at the end", (int)end, text);
                if (took) {
                    cr_assert_eq(m, want);
                }
            }
        }
    }
    int_declines("\"0123456\""); /* a leading zero inside one run */
    int_declines("01234567,,");  /* and in a full run of eight */
    int_is("-1234567,xxxxxxxx", true, 1234567, 8);
}

/* Doubles of the 8-byte-run shape (1-7 integer digits, a fraction of up to
 * 19 digits, leading zeros of the fraction) against strtod, with what ends
 * them; the shapes it must leave to the general loop still read right. */
Test(jsondec_fast, short_doubles_of_every_shape_equal_strtod)
{
    static const char *const ends[] = {",", "]", "}", " ", "e5", "E-2", "e+1", ".5", "+", "-", "x"};
    for (int k = 0; k < 40000; k++) {
        char text[96];
        int ni = 1 + (int)(rnd() % 8), nf = (int)(rnd() % 23), lz = (int)(rnd() % 4), len = 0;
        if (rnd() % 4 == 0) {
            text[len++] = '-';
        }
        for (int i = 0; i < ni; i++) {
            text[len++] = (char)(i == 0 ? (ni == 1 && rnd() % 3 == 0 ? '0' : '1' + rnd() % 9)
                                        : '0' + rnd() % 10);
        }
        if (nf > 0) {
            text[len++] = '.';
            for (int i = 0; i < nf; i++) {
                text[len++] = (char)(i < lz ? '0' : '0' + rnd() % 10);
            }
        }
        const char *e = ends[rnd() % (sizeof(ends) / sizeof(ends[0]))];
        size_t nlen = (size_t)len;
        len += snprintf(text + len, 40, "%s0123456789abcdef", e);
        double got;
        size_t used;
        if (jdnum_f64(text, (size_t)len, &got, &used)) {
            char c[96];
            memcpy(c, text, used);
            c[used] = '\0';
            double want = strtod(c, NULL);
            cr_assert(memcmp(&got, &want, 8) == 0, "%s: %.17g, strtod %.17g", text, got, want);
            bool ext = e[0] == 'e' || e[0] == 'E' || (e[0] == '.' && nf == 0);
            cr_assert(used == nlen || (ext && used > nlen), "%s: used %zu", text, used);
        } else {
            /* declined: only for what the fast paths do not read */
            int sig = 0;
            for (size_t i = 0; i < nlen; i++) {
                sig += text[i] >= '0' && text[i] <= '9';
            }
            cr_assert(sig > 19 || strchr(".+-", e[0]) != NULL || e[0] == 'e' || e[0] == 'E',
                      "%s declined", text);
        }
    }
    f64_is("0.005,0.01", 0.005, 5);
    f64_is("1234567.123456789012,", 1234567.123456789012, 20);
    f64_is("0.0000001234567890123,", 1.234567890123e-7, 21); /* leading zeros: 19 digits */
    f64_declines("12345678.123456789012x");                  /* 20 significant digits */
    f64_declines("1.5.0000000000");
    f64_declines("1.-00000000000");
}

/* The 16-digit SSE2 hex loop: a bad byte at every position of a trace id,
 * bytes just outside each range, both cases. */
Test(jsondec_fast, hex_sixteen_at_a_time_refuses_a_bad_byte_anywhere)
{
    static const char good[] = "0123456789abcdefABCDEF0a1b2c3d4e";
    static const uint8_t want[16] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                                     0xab, 0xcd, 0xef, 0x0a, 0x1b, 0x2c, 0x3d, 0x4e};
    static const char bad[] = {'/', ':', '@',        'G',        '`',        'g',
                               ' ', '"', (char)0x80, (char)0xc1, (char)0xe6, (char)0xff};
    uint8_t out[16];
    cr_assert(jdnum_hex(out, good, 16));
    cr_assert(memcmp(out, want, 16) == 0);
    for (int pos = 0; pos < 32; pos++) {
        for (size_t b = 0; b < sizeof(bad); b++) {
            char t[33];
            memcpy(t, good, 33);
            t[pos] = bad[b];
            cr_assert(!jdnum_hex(out, t, 16), "bad byte 0x%02x at %d taken", (uint8_t)bad[b], pos);
        }
    }
    /* 8 + 2: the SSE2 block, then the byte loop */
    uint8_t ten[10];
    cr_assert(jdnum_hex(ten, "00ff10EeDd99887766aa", 10));
    cr_assert_eq(ten[1], 0xff);
    cr_assert_eq(ten[3], 0xee);
    cr_assert_eq(ten[4], 0xdd);
    cr_assert_eq(ten[9], 0xaa);
    cr_assert(!jdnum_hex(ten, "00ff10EeDd998877g6aa", 10));
}

/* Compact KeyValues in a loop of their own: the loop hands over to the
 * general one at a blank, a null, a reordered or a duplicated member, an
 * unknown member or an escape, and takes nothing it cannot read. */
Test(jsondec_fast, keyvalue_loop_hands_over_and_equals_the_general_path)
{
    struct dec d;
    char *r = log_req("{'attributes':["
                      "{'key':'a','value':{'stringValue':'x'}},"
                      "{'key':'b','value':{'intValue':'-5'}}, "
                      "{'key':'c','value':{'doubleValue':1.25}},"
                      "null,"
                      "{'key':'d','value':{'boolValue':true}},"
                      "{'key':'e','value':{'intValue':'1'},'value':{'intValue':'2'}},"
                      "{'key':'f','value':{'stringValue':'y'},'x':1},"
                      "{'value':{'stringValue':'z'},'key':'g'},"
                      "{'key':'h\\u0041','value':{'stringValue':'w'}},"
                      "{'key':'i','value':{'doubleValue':1e300}},"
                      "{'key':'j','value':{'stringValue':'last'}}]}");
    same_as_general(SIG_LOGS, r, &d);
    const struct log_row *l = &d.b->logs[0];
    cr_assert_eq(l->attrs.count, 11);
    struct val_rd rd = {batch_blob(d.b, l->attrs.blob),
                        batch_blob(d.b, l->attrs.blob) + l->attrs.blob.len};
    const char *k;
    size_t kn;
    struct val v;
    char keys[16] = {0};
    int n = 0;
    while (rd.p < rd.end && val_rd_str(&rd, &k, &kn) == 0 && val_rd_value(&rd, &v) == 0) {
        keys[n] = kn > 0 ? k[0] : '-';
        if (kn == 1 && k[0] == 'b') {
            cr_assert_eq(v.type, VAL_INT);
            cr_assert_eq(v.i, -5);
        } else if (kn == 1 && k[0] == 'c') {
            cr_assert_eq(v.type, VAL_DOUBLE);
            cr_assert_eq(v.d, 1.25);
        } else if (kn == 1 && k[0] == 'e') {
            cr_assert_eq(v.type, VAL_INT);
            cr_assert_eq(v.i, 2, "the last value member wins");
        } else if (kn == 1 && k[0] == 'i') {
            cr_assert_eq(v.type, VAL_DOUBLE);
            cr_assert_eq(v.d, 1e300); /* beyond the fast paths: strtod */
        }
        n++;
    }
    cr_assert_eq(n, 11);
    cr_assert_str_eq(keys, "abc-defghij");
    done(&d);
    free(r);
}

/* ValueAtQuantile read in place: both compact shapes, and every other
 * shape handed to the general loop with the same result. */
Test(jsondec_fast, quantile_objects_compact_and_not_read_the_same)
{
    struct dec d;
    char *r = metric_req("{'summary':{'dataPoints':[{'quantileValues':["
                         "{'value':0.99070177646468893},"
                         "{'quantile':0.5,'value':2.9721053293940667},"
                         "{'value':3,'quantile':0.25},"
                         "{'quantile':0.9,'value':'7.5'},"
                         "{'quantile':0.95,'value':1,'value':8},"
                         "{'quantile':0.99,'value':9,'x':[1]},"
                         "{'quantile':null,'value':10},"
                         "{'quantile':1,'value':1.1e1},"
                         "null]}]}}");
    char *body = q(r);
    run(&d, SIG_METRICS, body);
    cr_assert_eq(d.rc, 0, "%s", d.err);
    const uint8_t *p = batch_blob(d.b, d.b->points[0].detail);
    static const double want[][2] = {{0, 0.99070177646468893},
                                     {0.5, 2.9721053293940667},
                                     {0.25, 3},
                                     {0.9, 7.5},
                                     {0.95, 8},
                                     {0.99, 9},
                                     {0, 10},
                                     {1, 11},
                                     {0, 0}};
    uint32_t n;
    memcpy(&n, p, 4);
    cr_assert_eq(n, 9);
    cr_assert_eq(d.b->points[0].detail.len, 4 + 9 * 16);
    for (uint32_t i = 0; i < n; i++) {
        double qv, vv;
        memcpy(&qv, p + 4 + 16 * i, 8);
        memcpy(&vv, p + 12 + 16 * i, 8);
        cr_assert(qv == want[i][0] && vv == want[i][1], "quantile %u: %.17g %.17g", i, qv, vv);
    }
    done(&d);
    free(body);
    free(r);
    same_details("{'summary':{'dataPoints':[{'quantileValues':[{'quantile':0.5,'value':1.5e-3},"
                 "{'value':-2}]}]}}",
                 "{'summary':{'dataPoints':[{'quantileValues':[ {'quantile': 0.5,'value':1.5e-3},"
                 "{ 'value':-2}]}]}}");
    refused(
        SIG_METRICS,
        metric_req("{'summary':{'dataPoints':[{'quantileValues':[{'quantile':0.5,'value':1.}]}]}}"),
        "malformed number");
}

/* A bound list equal to the previous one is copied; one that differs in
 * any byte up to its ']' is read. */
Test(jsondec_fast, repeated_bound_lists_copied_only_when_equal)
{
    struct dec d;
    char *r = metric_req("{'histogram':{'dataPoints':["
                         "{'bucketCounts':['1'],'explicitBounds':[0.5,1]},"
                         "{'bucketCounts':['2'],'explicitBounds':[0.5,1]},"
                         "{'bucketCounts':['3'],'explicitBounds':[0.5,10]},"
                         "{'bucketCounts':['4'],'explicitBounds':[0.5,1,2]},"
                         "{'bucketCounts':['5'],'explicitBounds':[0.5,1]},"
                         "{'bucketCounts':['6'],'explicitBounds':[0.5, 1]},"
                         "{'bucketCounts':['7'],'explicitBounds':[]},"
                         "{'bucketCounts':['8'],'explicitBounds':[]}]}}");
    char *body = q(r);
    run(&d, SIG_METRICS, body);
    cr_assert_eq(d.rc, 0, "%s", d.err);
    static const double b[][3] = {{0.5, 1}, {0.5, 1}, {0.5, 10}, {0.5, 1, 2},
                                  {0.5, 1}, {0.5, 1}, {0},       {0}};
    static const uint32_t nb[] = {2, 2, 2, 3, 2, 2, 0, 0};
    cr_assert_eq(d.b->n_rows, 8);
    for (uint32_t i = 0; i < 8; i++) {
        const uint8_t *p = batch_blob(d.b, d.b->points[i].detail);
        uint32_t nc, n;
        uint64_t c;
        memcpy(&nc, p, 4);
        memcpy(&c, p + 4, 8);
        memcpy(&n, p + 12, 4);
        cr_assert_eq(nc, 1);
        cr_assert_eq(c, i + 1);
        cr_assert_eq(n, nb[i], "point %u: %u bounds", i, n);
        cr_assert_eq(d.b->points[i].detail.len, 16 + 8 * nb[i]);
        for (uint32_t k = 0; k < n; k++) {
            double v;
            memcpy(&v, p + 16 + 8 * k, 8);
            cr_assert_eq(v, b[i][k], "point %u bound %u: %g", i, k, v);
        }
    }
    done(&d);
    free(body);
    free(r);
}

/* jdnum_f64_fast and jdnum_f64_7 (the inline short shapes) against jdnum_f64 over texts of
 * every nearby shape: leading zeros, 0-9 integer and 0-21 fraction digits,
 * a point with nothing after it, exponents and signs after, and texts
 * shorter than its 18-byte minimum. Same acceptance, bits and length. */
Test(jsondec_fast, inline_short_doubles_equal_the_general_reader)
{
    static const char *const ends[] = {",", "]",  "}", " ", "e5", "E-2",
                                       ".", ".5", "+", "-", "x",  "\""};
    for (int k = 0; k < 200000; k++) {
        char text[64];
        int ni = (int)(rnd() % 10), nf = (int)(rnd() % 22), len = 0;
        if (rnd() % 4 == 0) {
            text[len++] = '-';
        }
        for (int i = 0; i < ni; i++) {
            text[len++] = (char)('0' + rnd() % (i == 0 && rnd() % 2 ? 1 : 10));
        }
        if (rnd() % 5 != 0) {
            text[len++] = '.';
            for (int i = 0; i < nf; i++) {
                text[len++] = (char)('0' + rnd() % 10);
            }
        }
        const char *e = ends[rnd() % (sizeof(ends) / sizeof(ends[0]))];
        len += snprintf(text + len, 32, "%s0123456789abcdefghij", e);
        size_t n = rnd() % 3 == 0 ? (size_t)(rnd() % (unsigned)len) : (size_t)len;
        double a = -1, b = -1;
        size_t ua = 0, ub = 0;
        bool ta = jdnum_f64_fast(text, n, &a, &ua), tb = jdnum_f64(text, n, &b, &ub);
        cr_assert_eq(ta, tb, "%.*s: fast %d, general %d", (int)n, text, ta, tb);
        if (ta) {
            cr_assert(memcmp(&a, &b, 8) == 0 && ua == ub, "%.*s: %.17g/%zu vs %.17g/%zu", (int)n,
                      text, a, ua, b, ub);
        }
        a = -1, ua = 0;
        ta = jdnum_f64_7(text, n, &a, &ua); /* the attribute loop's smaller one */
        cr_assert_eq(ta, tb, "%.*s: f64_7 %d, general %d", (int)n, text, ta, tb);
        if (ta) {
            cr_assert(memcmp(&a, &b, 8) == 0 && ua == ub, "%.*s: f64_7 %.17g/%zu vs %.17g/%zu",
                      (int)n, text, a, ua, b, ub);
        }
    }
    double v;
    size_t u;
    cr_assert(jdnum_f64_fast("651.62,\"0123456789abcdef", 24, &v, &u));
    cr_assert(v == 651.62 && u == 6);
    cr_assert(jdnum_f64_fast("-0,0123456789abcdefgh", 21, &v, &u));
    cr_assert(v == 0 && signbit(v) && u == 2);
}

static uint64_t log_time(const char *ts)
{
    char json[512];
    struct dec d;
    snprintf(json, sizeof json,
             "{'resourceLogs':[{'scopeLogs':[{'logRecords':[{'timeUnixNano':%s,'body':{}}]}]}]}",
             ts);
    ok(&d, SIG_LOGS, json);
    cr_assert_eq(d.b->n_rows, 1);
    uint64_t t = d.b->logs[0].time_ns;
    done(&d);
    return t;
}

static void log_time_refused(const char *ts)
{
    char json[512];
    struct dec d;
    snprintf(json, sizeof json,
             "{'resourceLogs':[{'scopeLogs':[{'logRecords':[{'timeUnixNano':%s,'body':{}}]}]}]}",
             ts);
    char *body = q(json);
    run(&d, SIG_LOGS, body);
    cr_assert_eq(d.rc, -EPROTO, "%s accepted", ts);
    cr_assert(strstr(d.err, "timeUnixNano") != NULL, "%s: %s", ts, d.err);
    free(body);
    done(&d);
}

/* Quoted 19-digit integers (u64_19: three 8-byte loads) give the exact
 * value, and a bad byte at any of the 19 places is still refused by the
 * general reader; the lengths around 19 read as before. */
Test(jsondec_fast, nineteen_digit_timestamps_read_exactly)
{
    cr_assert_eq(log_time("'1767225600000288020'"), 1767225600000288020ull);
    cr_assert_eq(log_time("'9999999999999999999'"), 9999999999999999999ull);
    cr_assert_eq(log_time("'1000000000000000001'"), 1000000000000000001ull);
    cr_assert_eq(log_time("'176722560000028802'"), 176722560000028802ull);     /* 18 */
    cr_assert_eq(log_time("'17672256000002880201'"), 17672256000002880201ull); /* 20 */
    cr_assert_eq(log_time("1767225600000288020"), 1767225600000288020ull);     /* bare */
    for (int k = 0; k < 19; k++) {
        char ts[32] = "'1767225600000288020'";
        ts[1 + k] = k % 3 == 0 ? 'a' : k % 3 == 1 ? '/' : ':';
        log_time_refused(ts);
    }
}

static char *span_events(const char *events)
{
    return wrap("{'resourceSpans':[{'scopeSpans':[{'spans':[{'traceId':"
                "'0123456789abcdef0123456789abcdef','spanId':'0123456789abcdef','events':[",
                events, "]}]}]}]}");
}

/* The events blob of the one span (|s| SIG_TRACES) or the exemplars blob
 * of the one point (SIG_METRICS) of |req| (single-quoted, owned). */
static void row_list_blob(enum signal s, char *req, uint8_t *out, size_t cap, size_t *n,
                          uint32_t *count)
{
    struct dec d;
    ok(&d, s, req);
    free(req);
    cr_assert_eq(d.b->n_rows, 1);
    struct blob b = s == SIG_TRACES ? d.b->spans[0].events : d.b->points[0].exemplars;
    cr_assert_leq(b.len, cap);
    memcpy(out, batch_blob(d.b, b), b.len);
    *n = b.len;
    *count = s == SIG_TRACES ? d.b->spans[0].n_events : d.b->points[0].n_exemplars;
    done(&d);
}

static void events_blob(char *req, uint8_t *out, size_t cap, size_t *n, uint32_t *count)
{
    row_list_blob(SIG_TRACES, req, out, cap, n, count);
}

/* An event's attributes are read where they come (time, attributes, name is
 * the generator's and the collector's order) and the fixed part moved
 * before them: the blob equals the one from the schema order, byte for
 * byte; a repeated attributes member still replaces the first; a bad
 * attribute still loses to an earlier-read member's error and gives its own
 * otherwise. */
Test(jsondec_fast, event_attributes_in_place_equal_the_schema_order)
{
    uint8_t a[512], b[512];
    size_t na, nb;
    uint32_t ca, cb;
    events_blob(
        span_events("{'timeUnixNano':'5','attributes':[{'key':'k','value':{'intValue':'7'}},"
                    "{'key':'s','value':{'stringValue':'v'}}],'name':'ev','droppedAttribu"
                    "tesCount':2},{'timeUnixNano':'6','attributes':[],'name':'e2'}"),
        a, sizeof a, &na, &ca);
    events_blob(span_events("{'name':'ev','timeUnixNano':'5','droppedAttributesCount':2,'attributes"
                            "':[{'key':'k','value':{'intValue':'7'}},{'key':'s','value':{'stringVa"
                            "lue':'v'}}]},{'name':'e2','attributes':[],'timeUnixNano':'6'}"),
                b, sizeof b, &nb, &cb);
    cr_assert_eq(ca, 2);
    cr_assert_eq(cb, 2);
    cr_assert_eq(na, nb);
    cr_assert(memcmp(a, b, na) == 0);
    /* u64 time 5, name "ev", u32 dropped 2, u32 count 2, u32 nbytes: the event's layout */
    cr_assert_eq(a[0], 5);
    cr_assert(a[8] == 2 && a[9] == 'e' && a[10] == 'v');
    cr_assert(a[11] == 2 && a[15] == 2);

    /* the last attributes member wins, whether the first was good or bad */
    events_blob(span_events("{'attributes':[{'key':'k','value':{'intValue':'x'}}],'attributes':"
                            "[{'key':'j','value':{'boolValue':true}}],'name':'n'}"),
                a, sizeof a, &na, &ca);
    events_blob(span_events("{'attributes':[{'key':'q','value':{'intValue':'1'}}],'name':'n',"
                            "'attributes':[{'key':'j','value':{'boolValue':true}}]}"),
                b, sizeof b, &nb, &cb);
    events_blob(span_events("{'name':'n','attributes':[{'key':'j','value':{'boolValue':true}}]}"),
                b, sizeof b, &nb, &cb);
    cr_assert_eq(na, nb);
    cr_assert(memcmp(a, b, na) == 0);

    /* errors as when the attributes were skipped first and read last */
    refused(SIG_TRACES,
            span_events("{'timeUnixNano':'5','attributes':[{'key':'k','value':{'intValue':'x'}}],"
                        "'name':tru}"),
            "events.name: expected a string");
    refused(SIG_TRACES,
            span_events("{'timeUnixNano':'5','attributes':[{'key':'k','value':{'intValue':'x'}}],"
                        "'name':'n'}"),
            "intValue: not a 64-bit signed integer");
    refused(SIG_TRACES,
            span_events("{'attributes':[{'key':'k','value':{'intValue':'x'}}],'timeUnixNano':'q'}"),
            "events.timeUnixNano: not an integer in range");
    refused(SIG_TRACES, span_events("{'attributes':[{'key':'k','value':{'intValue':'1'}},]}"),
            "at offset");
}

/* Links too: attributes between the ids and the flags. */
Test(jsondec_fast, link_attributes_in_place_equal_the_schema_order)
{
    const char *env = "{'resourceSpans':[{'scopeSpans':[{'spans':[{'traceId':'0123456789abcdef01"
                      "23456789abcdef','spanId':'0123456789abcdef','links':[";
    char *x = wrap(env,
                   "{'traceId':'00000000000000000000000000000001','spanId':'0000000000000002',"
                   "'attributes':[{'key':'a','value':{'stringValue':'b'}}],'flags':257,"
                   "'traceState':'t=1'}",
                   "]}]}]}]}");
    char *y = wrap(env,
                   "{'traceId':'00000000000000000000000000000001','spanId':'0000000000000002',"
                   "'traceState':'t=1','flags':257,'attributes':[{'key':'a','value':{'stringValue"
                   "':'b'}}]}",
                   "]}]}]}]}");
    struct dec d, e;
    ok(&d, SIG_TRACES, x);
    ok(&e, SIG_TRACES, y);
    cr_assert_eq(d.b->spans[0].n_links, 1);
    same_blob(d.b, d.b->spans[0].links, e.b, e.b->spans[0].links, "links");
    cr_assert_eq(d.b->spans[0].links.len, 16 + 8 + 4 + 4 + 4 + 4 + 4 + 1 + 1 + 1 + 1 + 1);
    done(&d);
    done(&e);
    free(x);
    free(y);
}

/* ---- attribute lists (h-jattr): remembered KeyValue heads, the inline
 * string scan, the event's fixed part moved before its attributes ---- */

/* Appends printf output to the growing string |*s| (of |*n| bytes). */
static void cat(char **s, size_t *n, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    cr_assert(k >= 0);
    *s = realloc(*s, *n + (size_t)k + 1);
    cr_assert(*s != NULL);
    vsnprintf(*s + *n, (size_t)k + 1, fmt, ap2);
    va_end(ap2);
    *n += (size_t)k;
}

/* A key of the pool: |k| picks its length (0-60, or 100-250 now and then)
 * and bytes; neighbours differ in one byte at the start, middle or end,
 * and some are one another's prefixes. */
static void pool_key(char *out, unsigned k)
{
    static const unsigned lens[] = {0,  1,  2,  7,  8,  9,  15, 16, 17, 22,  23,  24, 31,
                                    32, 33, 40, 47, 48, 49, 55, 56, 60, 100, 180, 250};
    unsigned len = lens[k % (sizeof(lens) / sizeof(lens[0]))];
    for (unsigned i = 0; i < len; i++) {
        out[i] = (char)('a' + (i * 7 + k / 25) % 26);
    }
    if (len != 0) {
        unsigned at = (k / 25) % 3 == 0 ? 0 : (k / 25) % 3 == 1 ? len / 2 : len - 1;
        out[at] = (char)('A' + (k / 75) % 26);
    }
    out[len] = '\0';
}

/* One KeyValue of the pool: key |k|, value kind and text by |v|. */
static void pool_kv(char **s, size_t *n, unsigned k, unsigned v)
{
    char key[256];
    pool_key(key, k);
    switch (v % 7) {
    case 0:
        cat(s, n, "{'key':'%s','value':{'stringValue':'v%u'}}", key, v % 5);
        break;
    case 1:
        cat(s, n, "{'key':'%s','value':{'intValue':'%u'}}", key, v % 300);
        break;
    case 2:
        cat(s, n, "{'key':'%s','value':{'intValue':%d}}", key, (int)(v % 9) - 4);
        break;
    case 3:
        cat(s, n, "{'key':'%s','value':{'doubleValue':%u.5}}", key, v % 4);
        break;
    case 4:
        cat(s, n, "{'key':'%s','value':{'boolValue':%s}}", key, v % 2 ? "true" : "false");
        break;
    case 5: /* the same key as a string of another length */
        cat(s, n, "{'key':'%s','value':{'stringValue':'%.*s'}}", key, (int)(v % 40),
            "0123456789012345678901234567890123456789");
        break;
    default: /* declined: an escape in the key, then a blank */
        cat(s, n,
            v % 2 ? "{'key':'%s\\u0041','value':{'boolValue':true}}"
                  : "{'key':'%s', 'value':{'boolValue':true}}",
            key);
        break;
    }
}

/* Log records whose attributes are drawn from a pool of 600 keys (more
 * than the 256 kvh slots, so heads of other lengths meet in a slot; the
 * same key with every type; keys past the 64-byte head kept), the last
 * record's ending the body: every list as the general path reads it, and
 * the heap the lists back to back. */
Test(jsondec_fast, attribute_heads_remembered_only_for_the_same_text)
{
    char *s = NULL;
    size_t n = 0;
    uint64_t x = 88172645463325252ull;
    cat(&s, &n, "{'resourceLogs':[{'scopeLogs':[{'logRecords':[");
    for (int r = 0; r < 800; r++) {
        cat(&s, &n, "%s{'attributes':[", r == 0 ? "" : ",");
        int na = (int)(x % 13);
        for (int a = 0; a < na; a++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            unsigned k = (unsigned)(x % 600), v = (unsigned)((x >> 20) % 1000);
            if (a != 0) {
                cat(&s, &n, ",");
            }
            pool_kv(&s, &n, k, v % 20 < 17 ? v - v % 7 + (k % 6) : v);
        }
        cat(&s, &n, "]}");
    }
    cat(&s, &n, "]}]}]}");
    struct dec d;
    same_as_general(SIG_LOGS, s, &d);
    cr_assert_eq(d.b->n_rows, 800);
    uint32_t off = d.b->logs[0].attrs.blob.off;
    for (uint32_t i = 0; i < d.b->n_rows; i++) {
        cr_assert_eq(d.b->logs[i].attrs.blob.off, off, "record %u: the lists back to back", i);
        off += d.b->logs[i].attrs.blob.len;
    }
    done(&d);
    free(s);
}

/* Heads exact: keys whose heads share a kvh slot, each shorter than the
 * one kept; a key read first as one type, then the same key bytes with
 * another type, another key of the same length one byte apart, and a key
 * one byte longer; each value as val.h writes it. */
Test(jsondec_fast, attribute_heads_exact_by_type_and_key)
{
    struct dec d;
    char *r;
    /* "route.0093", the text r\t0000077 (an escape, the same length) and
     * "host.0000" share a kvh slot (the hash of their text's bytes 8-23),
     * as "route.0089" and "ht.0000" do: heads with the same last 16 bytes
     * as the one kept there, the escape one of the same length */
    r = log_req("{'attributes':[{'key':'route.0093','value':{'stringValue':'abcdef'}},"
                "{'key':'r\\t0000077','value':{'stringValue':'abcdef'}},"
                "{'key':'host.0000','value':{'stringValue':'abcdef'}},"
                "{'key':'route.0089','value':{'stringValue':'abcdef'}},"
                "{'key':'ht.0000','value':{'stringValue':'abcdef'}}]}");
    same_as_general(SIG_LOGS, r, &d);
    cr_assert_eq(d.b->logs[0].attrs.count, 5);
    const uint8_t *p = batch_blob(d.b, d.b->logs[0].attrs.blob);
    cr_assert_eq(d.b->logs[0].attrs.blob.len, 19 + 18 + 18 + 19 + 16);
    cr_assert(memcmp(p + 19,
                     "\x09r\t0000077\x01\x06"
                     "abcdef",
                     18) == 0,
              "the escape read");
    cr_assert(memcmp(p + 19 + 18,
                     "\x09host.0000\x01\x06"
                     "abcdef",
                     18) == 0);
    cr_assert(memcmp(p + 19 + 18 + 18 + 19,
                     "\x07ht.0000\x01\x06"
                     "abcdef",
                     16) == 0);
    done(&d);
    free(r);
    /* a key of 250 bytes, its head (280 bytes) not kept: read from its
     * text, though the bytes 24 past its '{' read as the integer 5 */
    char key[251], *kv = NULL;
    size_t kn = 0;
    memset(key, 'k', 250);
    memcpy(key + 16, "5}}", 3);
    key[250] = '\0';
    cat(&kv, &kn,
        "{'attributes':[{'key':'%s','value':{'intValue':'7'}},"
        "{'key':'%s','value':{'intValue':'7'}}]}",
        key, key);
    r = log_req(kv);
    free(kv);
    same_as_general(SIG_LOGS, r, &d);
    cr_assert_eq(d.b->logs[0].attrs.count, 2);
    cr_assert_eq(d.b->logs[0].attrs.blob.len, 2 * (2 + 250 + 2));
    p = batch_blob(d.b, d.b->logs[0].attrs.blob) + 254;
    cr_assert(p[0] == 0xfa && p[1] == 0x01 && memcmp(p + 2, key, 250) == 0);
    cr_assert(p[252] == VAL_INT && p[253] == 14);
    done(&d);
    free(r);
    r = log_req("{'attributes':[{'key':'status.code','value':{'stringValue':'ok'}}]},"
                "{'attributes':[{'key':'status.code','value':{'intValue':'200'}}]},"
                "{'attributes':[{'key':'status.codf','value':{'intValue':'201'}}]},"
                "{'attributes':[{'key':'status.code','value':{'boolValue':true}}]},"
                "{'attributes':[{'key':'status.codes','value':{'doubleValue':0.5}}]},"
                "{'attributes':[{'key':'status.code','value':{'stringValue':'ok'}}]}");
    same_as_general(SIG_LOGS, r, &d);
    static const uint8_t want[][20] = {
        {16, 11, 's', 't', 'a', 't', 'u', 's', '.', 'c', 'o', 'd', 'e', VAL_STR, 2, 'o', 'k'},
        {15, 11, 's', 't', 'a', 't', 'u', 's', '.', 'c', 'o', 'd', 'e', VAL_INT, 0x90, 0x03},
        {15, 11, 's', 't', 'a', 't', 'u', 's', '.', 'c', 'o', 'd', 'f', VAL_INT, 0x92, 0x03},
        {14, 11, 's', 't', 'a', 't', 'u', 's', '.', 'c', 'o', 'd', 'e', VAL_BOOL, 1},
        {0},
        {16, 11, 's', 't', 'a', 't', 'u', 's', '.', 'c', 'o', 'd', 'e', VAL_STR, 2, 'o', 'k'},
    };
    for (int i = 0; i < 6; i++) {
        const struct log_row *l = &d.b->logs[i];
        cr_assert_eq(l->attrs.count, 1);
        if (want[i][0] == 0) {
            cr_assert_eq(l->attrs.blob.len, 1 + 12 + 1 + 8);
            continue;
        }
        cr_assert_eq(l->attrs.blob.len, want[i][0], "record %d: %u bytes", i, l->attrs.blob.len);
        cr_assert(memcmp(batch_blob(d.b, l->attrs.blob), want[i] + 1, want[i][0]) == 0,
                  "record %d: bytes differ", i);
    }
    done(&d);
    free(r);
}

/* String values of 0-100 bytes with a byte at each place: a '"' (the
 * end), an escape, a blank, DEL, UTF-8 (c3 a9, e2 82 ac: bytes the scan
 * must pass), or a control byte (refused as the general path refuses it);
 * and a value that runs to the end of the body (ASan: not read past). */
Test(jsondec_fast, string_values_scanned_to_their_first_stop_byte)
{
    static const char *const ins[] = {"\\\\n", "\\\\\\\"", " ", "\x7f", "\xc3\xa9", "\xe2\x82\xac"};
    for (int len = 0; len <= 100; len += len < 20 ? 1 : 7) {
        for (int at = 0; at <= len; at += 1 + len / 9) {
            for (size_t b = 0; b < sizeof(ins) / sizeof(ins[0]); b++) {
                char v[256];
                memset(v, 'x', (size_t)len);
                v[len] = '\0';
                snprintf(v + at, sizeof(v) - (size_t)at, "%s%s", ins[b], "yz");
                char *s = NULL;
                size_t n = 0;
                cat(&s, &n, "{'resourceLogs':[{'scopeLogs':[{'logRecords':[{'attributes':[");
                cat(&s, &n, "{'key':'k','value':{'stringValue':'%s'}},", v);
                cat(&s, &n, "{'key':'k','value':{'stringValue':'%.*s'}}]}]}]}]}", len,
                    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
                struct dec d;
                same_as_general(SIG_LOGS, s, &d);
                cr_assert_eq(d.b->logs[0].attrs.count, 2);
                done(&d);
                free(s);
            }
            char *s = NULL;
            size_t n = 0;
            cat(&s, &n,
                "{'resourceLogs':[{'scopeLogs':[{'logRecords':[{'attributes':[{'key':'k',"
                "'value':{'stringValue':'%.*s\x01'}}]}]}]}]}",
                at,
                "0123456789012345678901234567890123456789012345678901234567890123456789"
                "012345678901234567890123456789");
            refused(SIG_LOGS, s, "control character 0x01");
        }
    }
    char *s = NULL;
    size_t n = 0;
    cat(&s, &n,
        "{'resourceLogs':[{'scopeLogs':[{'logRecords':[{'attributes':[{'key':'k',"
        "'value':{'stringValue':'");
    for (int i = 0; i < 90; i++) {
        cat(&s, &n, "%c", 'a' + i % 26);
    }
    refused(SIG_LOGS, s, "unterminated string");
}

/* An event's fixed part (time, name, dropped count) of 17-100 bytes moved
 * before attributes read in place, around the 64 bytes kept in a local:
 * the same blob as when the attributes come last. */
Test(jsondec_fast, event_fixed_parts_of_every_size_put_before_their_attributes)
{
    for (int len = 0; len <= 86; len++) {
        char name[100];
        for (int i = 0; i < len; i++) {
            name[i] = (char)('a' + i % 26);
        }
        name[len] = '\0';
        char ev_a[512], ev_b[512];
        snprintf(ev_a, sizeof ev_a,
                 "{'timeUnixNano':'5','attributes':[{'key':'k','value':{'intValue':'7'}},"
                 "{'key':'s','value':{'stringValue':'%.*s'}}],'name':'%s'}",
                 len % 40, name, name);
        snprintf(ev_b, sizeof ev_b,
                 "{'timeUnixNano':'5','name':'%s','attributes':[{'key':'k','value':{'intValue':"
                 "'7'}},{'key':'s','value':{'stringValue':'%.*s'}}]}",
                 name, len % 40, name);
        uint8_t a[1024], b[1024];
        size_t na, nb;
        uint32_t ca, cb;
        events_blob(span_events(ev_a), a, sizeof a, &na, &ca);
        events_blob(span_events(ev_b), b, sizeof b, &nb, &cb);
        cr_assert_eq(ca, 1);
        cr_assert_eq(na, nb, "name of %d bytes: %zu vs %zu", len, na, nb);
        cr_assert(memcmp(a, b, na) == 0, "name of %d bytes: bytes differ", len);
        cr_assert_eq(a[8], len, "the name's length after the time");
        cr_assert(memcmp(a + 9 + (len > 127), name, (size_t)len) == 0);
    }
}

/* A body string cut right after a '\' at every offset of the one-pass
 * unescape's 16-byte chunks: refused, and nothing read past the text (the
 * body is copied into a buffer of exactly its length, for ASan). */
Test(jsondec_fast, body_cut_after_a_backslash_is_refused_without_reading_past_it)
{
    /* severityText first: it takes the string block the body is unescaped into */
    const char *pre = "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[{\"severityText\":"
                      "\"x\",\"body\":{\"stringValue\":\"";
    for (int k = 0; k < 48; k++) {
        char text[256];
        int n = snprintf(text, sizeof text, "%s%.*s\\", pre, k,
                         "a\\tbcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ");
        if (text[n - 2] == '\\') { /* keep the cut escape the last byte */
            continue;
        }
        char *exact = malloc((size_t)n);
        cr_assert(exact != NULL);
        memcpy(exact, text, (size_t)n);
        arena *a = arena_new(0);
        struct batch *b = batch_new(SIG_LOGS);
        char err[256];
        int rc = jsondec_decode(SIG_LOGS, exact, (size_t)n, a, b, err, sizeof err);
        cr_assert_eq(rc, -EPROTO, "%d bytes accepted", n);
        cr_assert_eq(b->n_rows, 0);
        batch_free(b);
        arena_free(a);
        free(exact);
    }
}

/*
 * Bucket counts read by num_list's loop of quoted 1-7 digit counts (which
 * refills its heap room every 32 elements) against exact values and
 * against the same lists with blanks (every fast path declines those):
 * lists of 0-80 counts of 1-8 digits, some with an element the loop hands
 * over at (a bare number, "0", a 20-digit count, a blank), in histograms
 * and exponential histograms.
 */
Test(jsondec_fast, quoted_count_lists_equal_exact_values_and_the_general_path)
{
    static const char *odd[] = {"7", "'0'", "'18446744073709551615'", " '5'", "'12345678'", "0"};
    static const uint64_t odd_v[] = {7, 0, UINT64_MAX, 5, 12345678, 0};
    char list[4096], m[8192];
    uint64_t want[96];
    for (int c = 0; c < 400; c++) {
        int nv = c < 81 ? c : (int)(rnd() % 81), at = c % 3 == 0 ? (int)(rnd() % (nv + 1)) : -1;
        size_t len = 0;
        list[len++] = '[';
        for (int i = 0; i < nv; i++) {
            if (i != 0) {
                list[len++] = ',';
            }
            if (i == at) {
                int o = (int)(rnd() % 6);
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s", odd[o]);
                want[i] = odd_v[o];
                continue;
            }
            int digits = 1 + (int)(rnd() % 8);
            uint64_t v = rnd() % jdnum_pow10[digits];
            want[i] = v;
            len +=
                (size_t)snprintf(list + len, sizeof(list) - len, "'%llu'", (unsigned long long)v);
        }
        list[len++] = ']';
        list[len] = '\0';
        const char *kind = c % 2 ? "histogram" : "exponentialHistogram";
        const char *pre = c % 2 ? "" : "'positive':{'offset':3,";
        snprintf(m, sizeof(m), "{'%s':{'dataPoints':[{'count':'1',%s'bucketCounts':%s%s}]}}", kind,
                 pre, list, c % 2 ? "" : "}");
        struct dec d;
        char *r = details_as_spaced(&d, m);
        const uint8_t *p = batch_blob(d.b, d.b->points[0].detail);
        size_t off = c % 2 ? 0 : 4 + 8 + 8 + 4; /* scale, zero count, zero threshold, offset */
        uint32_t n;
        memcpy(&n, p + off, 4);
        cr_assert_eq(n, (uint32_t)nv, "%s: %u counts", m, n);
        for (int i = 0; i < nv; i++) {
            uint64_t v;
            memcpy(&v, p + off + 4 + 8 * (size_t)i, 8);
            cr_assert_eq(v, want[i], "%s: count %d is %llu", m, i, (unsigned long long)v);
        }
        done(&d);
        free(r);
    }
}

/*
 * Quantile values read by vaq_run's loop of compact objects against exact
 * values and against the same lists with blanks (the loop declines those):
 * lists of 0-40 objects with 17-digit doubles, the zero quantile left out or
 * not, some with an element the loop hands over at (members swapped, a
 * quoted value, a null, an exponent, a blank, an unknown member).
 */
Test(jsondec_fast, quantile_lists_equal_exact_values_and_the_general_path)
{
    static const char *odd[] = {"{'value':2,'quantile':0.5}",
                                "{'quantile':0.5,'value':'2'}",
                                "null",
                                "{'quantile':0.5,'value':2e0}",
                                "{ 'quantile':0.5,'value':2}",
                                "{'quantile':0.5,'value':2,'x':1}"};
    static const double odd_q[] = {0.5, 0.5, 0, 0.5, 0.5, 0.5}, odd_v[] = {2, 2, 0, 2, 2, 2};
    char list[4096], m[8192];
    double want[48][2];
    for (int c = 0; c < 300; c++) {
        int nv = c < 41 ? c : (int)(rnd() % 41), at = c % 3 == 0 ? (int)(rnd() % (nv + 1)) : -1;
        size_t len = 0;
        list[len++] = '[';
        for (int i = 0; i < nv; i++) {
            if (i != 0) {
                list[len++] = ',';
            }
            if (i == at) {
                int o = (int)(rnd() % 6);
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s", odd[o]);
                want[i][0] = odd_q[o];
                want[i][1] = odd_v[o];
                continue;
            }
            char qt[32], vt[32];
            snprintf(qt, sizeof qt, "%.17g", (double)(rnd() % 1000) / 1000);
            snprintf(vt, sizeof vt, "%.17g", (double)(rnd() % 100000) / 7.0);
            want[i][0] = rnd() % 4 == 0 ? 0 : strtod(qt, NULL);
            want[i][1] = strtod(vt, NULL);
            if (want[i][0] == 0) {
                len += (size_t)snprintf(list + len, sizeof(list) - len, "{'value':%s}", vt);
            } else {
                len += (size_t)snprintf(list + len, sizeof(list) - len,
                                        "{'quantile':%s,'value':%s}", qt, vt);
            }
        }
        list[len++] = ']';
        list[len] = '\0';
        snprintf(m, sizeof(m), "{'summary':{'dataPoints':[{'count':'1','quantileValues':%s}]}}",
                 list);
        struct dec d;
        char *r = details_as_spaced(&d, m);
        const uint8_t *p = batch_blob(d.b, d.b->points[0].detail);
        uint32_t n;
        memcpy(&n, p, 4);
        cr_assert_eq(n, (uint32_t)nv, "%s: %u quantiles", m, n);
        cr_assert_eq(d.b->points[0].detail.len, 4 + 16 * (uint32_t)nv);
        for (int i = 0; i < nv; i++) {
            double qv, vv;
            memcpy(&qv, p + 4 + 16 * (size_t)i, 8);
            memcpy(&vv, p + 12 + 16 * (size_t)i, 8);
            cr_assert(memcmp(&qv, &want[i][0], 8) == 0 && memcmp(&vv, &want[i][1], 8) == 0,
                      "%s: quantile %d is %.17g %.17g", m, i, qv, vv);
        }
        done(&d);
        free(r);
    }
    /* a byte other than ',' or ']' between two compact objects is refused
     * as the general loop refuses it, not skipped */
    refused(SIG_METRICS,
            metric_req("{'summary':{'dataPoints':[{'quantileValues':[{'value':1}x{'value':2}],"
                       "'attributes':[{'key':'k','value':{'stringValue':'0123456789abcdef'}}]}]}}"),
            "expected ',' or ']'");
}

/* A count with a leading zero is what the general path makes of it (the
 * quoted-count loop declines it), compact or with blanks. */
/* The metric |m| (single-quoted) and its spaced form give the same answer:
 * the same first point's detail when accepted, an error naming bucketCounts
 * when refused. Returns the answer. */
static int counts_as_spaced(const char *m)
{
    char *sp = spaced(m), *ma = metric_req(m), *mb = metric_req(sp), *ra = q(ma), *rb = q(mb);
    struct dec x, y;
    run(&x, SIG_METRICS, ra);
    run(&y, SIG_METRICS, rb);
    cr_assert_eq(x.rc, y.rc, "%s: %d vs %d", m, x.rc, y.rc);
    if (x.rc == 0) {
        same_blob(x.b, x.b->points[0].detail, y.b, y.b->points[0].detail, "detail");
    } else {
        cr_assert(strstr(x.err, "bucketCounts") != NULL, "%s: %s", m, x.err);
    }
    int rc = x.rc;
    done(&x);
    done(&y);
    free(sp);
    free(ma);
    free(mb);
    free(ra);
    free(rb);
    return rc;
}

Test(jsondec_fast, quoted_count_with_a_leading_zero_as_the_general_path)
{
    static const char *lists[] = {"['1','05','2']", "['00']", "['1','2','3','007']", "['0','0']"};
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        char m[256];
        snprintf(m, sizeof(m), "{'histogram':{'dataPoints':[{'bucketCounts':%s}]}}", lists[i]);
        counts_as_spaced(m);
    }
}

/* An event's name read in place when it has no escape, unescaped when it
 * has: the blob's bytes (u64 time, uv length, name, u32 dropped) either
 * way, a missing name as "", a control byte or a bad escape refused. */
Test(jsondec_fast, event_names_plain_escaped_and_missing)
{
    static const struct {
        const char *ev, *name;
    } cases[] = {
        {"{'timeUnixNano':'9','name':'plain.name','attributes':[]}", "plain.name"},
        {"{'timeUnixNano':'9','name':'a\\'b\\u00e9\\n','attributes':[]}", "a\"b\xc3\xa9\n"},
        {"{'timeUnixNano':'9','name':'','attributes':[]}", ""},
        {"{'timeUnixNano':'9','attributes':[]}", ""},
        {"{'timeUnixNano':'9','attributes':[],'name':'a-name-longer-than-sixteen-bytes-here'}",
         "a-name-longer-than-sixteen-bytes-here"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t a[512];
        size_t na;
        uint32_t ca;
        events_blob(span_events(cases[i].ev), a, sizeof a, &na, &ca);
        size_t nl = strlen(cases[i].name);
        cr_assert_eq(ca, 1);
        cr_assert_eq(a[0], 9, "%s", cases[i].ev);
        cr_assert_eq(a[8], nl, "%s: name length %u", cases[i].ev, a[8]);
        cr_assert(memcmp(a + 9, cases[i].name, nl) == 0, "%s", cases[i].ev);
        cr_assert_eq(na, 8 + 1 + nl + 4 + 4 + 4, "%s: %zu bytes", cases[i].ev, na);
    }
    refused(SIG_TRACES, span_events("{'name':'a\tb'}"), "at offset");
    refused(SIG_TRACES, span_events("{'name':'a\\qb'}"), "at offset");
    refused(SIG_TRACES, span_events("{'name':'unterminated"), "at offset");
}

/* ---- h-json5: the one-compare member path, the second guess, the SSE2 timestamp ---- */

static char *span_req(const char *spans)
{
    return wrap("{'resourceSpans':[{'scopeSpans':[{'spans':[", spans, "]}]}]}");
}

/*
 * next_field takes the guessed member by one 32-byte compare of ,"name":
 * and, when that misses, the member that came before it in that place.
 * Spans whose optional members rotate (so the first guess, the second guess
 * and a table search each take some), a blank before a ':' or after the '{',
 * keys one byte longer or shorter than a member's name (unknown: skipped),
 * an escaped key and snake_case: every span's values exact.
 */
Test(jsondec_fast, member_guesses_rotating_blank_and_near_names)
{
    static const char *const tails[] = {
        "'attributes':[],'flags':1",
        "'attributes':[],'status':{'code':2},'flags':2",
        "'attributes':[],'events':[{'name':'e'}],'flags':3",
        "'attributes':[],'flags':4",
        "'attributes':[],'status':{'code':1},'flags':5",
        "'attributes':[],'flags' :6",
        "'attributes':[],'flagsX':99,'flags':7",
        "'attributes':[],'flag':98,'flags':8",
        "'attributes':[],'fl\\u0061gs':9",
        "'attributes':[],'events':[],'status':{'code':2},'flags':10",
    };
    char buf[8192], *p = buf;
    int n = 0;
    for (int r = 0; r < 3; r++) {
        for (size_t k = 0; k < sizeof(tails) / sizeof(tails[0]); k++, n++) {
            const char *open = n % 7 == 3 ? "{ " : "{";
            const char *name = n % 5 == 4 ? "'name' :" : "'name':";
            const char *start = n % 6 == 5 ? "'start_time_unix_nano'" : "'startTimeUnixNano'";
            p += snprintf(p, (size_t)(buf + sizeof buf - p),
                          "%s%s'traceId':'0123456789abcdef0123456789abcdef','spanId':"
                          "'0123456789abcdef',%s's%d','kind':%d,%s:'%d',%s}",
                          n ? "," : "", open, name, n, n % 5 + 1, start, 1000 + n, tails[k]);
        }
    }
    char *req = span_req(buf);
    struct dec d;
    ok(&d, SIG_TRACES, req);
    cr_assert_eq(d.b->n_rows, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        const struct span_row *s = &d.b->spans[i];
        char want[16];
        int wl = snprintf(want, sizeof want, "s%d", i);
        same_mstr(s->name, (struct mstr){want, (uint32_t)wl}, "name");
        cr_assert_eq(s->kind, i % 5 + 1, "span %d kind %d", i, s->kind);
        cr_assert_eq(s->start_ns, (uint64_t)(1000 + i), "span %d start", i);
        int t = i % 10;
        cr_assert_eq(s->flags, (uint32_t)(t + 1), "span %d flags %u", i, s->flags);
        int code = t == 1 || t == 9 ? 2 : t == 4 ? 1 : 0;
        cr_assert_eq(s->status_code, code, "span %d status %d", i, s->status_code);
        cr_assert_eq(s->n_events, t == 2 ? 1u : 0u, "span %d events", i);
    }
    done(&d);
    free(req);
}

/* Quoted 19-digit timestamps read by the SSE2 path: random values exact,
 * and a byte that is not a digit (below '0', above '9', 0x80 and up, the
 * bytes that wrap below '0' to large values) at each of the 19 places is
 * refused by the general reader. */
Test(jsondec_fast, nineteen_digit_timestamps_random_and_every_bad_byte)
{
    char ts[32];
    for (int k = 0; k < 3000; k++) {
        char dig[20];
        for (int i = 0; i < 19; i++) {
            dig[i] = (char)('0' + (i == 0 ? 1 + rnd() % 9 : k % 3 == 0 ? 9 : rnd() % 10));
        }
        dig[19] = '\0';
        snprintf(ts, sizeof ts, "'%s'", dig);
        uint64_t want = strtoull(dig, NULL, 10);
        cr_assert_eq(log_time(ts), want, "%s", ts);
    }
    static const char bad[] = {'/', ':', ' ', 'a', '\\'};
    for (size_t b = 0; b < sizeof(bad); b++) {
        for (int k = 0; k < 19; k++) {
            snprintf(ts, sizeof ts, "'1767225600000288020'");
            ts[1 + k] = bad[b];
            if (bad[b] != '\\') {
                log_time_refused(ts);
            }
        }
    }
    /* bytes 0x80 and up (which wrap to small values if compared signed):
     * a two-byte UTF-8 sequence in place of two digits, so that the text
     * stays 19 bytes and valid UTF-8 */
    static const unsigned char two[][2] = {{0xc2, 0x80}, {0xd0, 0x90}, {0xdf, 0xbf}};
    for (size_t b = 0; b < sizeof(two) / sizeof(two[0]); b++) {
        for (int k = 0; k < 18; k++) {
            snprintf(ts, sizeof ts, "'1767225600000288020'");
            ts[1 + k] = (char)two[b][0];
            ts[2 + k] = (char)two[b][1];
            log_time_refused(ts);
        }
    }
}

/* jdnum_dec8 through jdnum_f64_7: every shape of "-"? 0-8 integer digits,
 * an optional '.' with 0-8 fraction digits and each terminator, leading
 * zeros included, against jdnum_f64 (acceptance, bits and length). */
Test(jsondec_fast, eight_byte_decimals_of_every_shape_equal_the_general_reader)
{
    static const char *const ends[] = {",", "]", "}", " ", "e5", "E-2", ".", ".5", "+", "-", "x"};
    int tried = 0, taken = 0;
    for (int neg = 0; neg < 2; neg++) {
        for (int ni = 0; ni <= 8; ni++) {
            for (int nf = -1; nf <= 8; nf++) {
                for (int lead = 0; lead < 3; lead++) {
                    for (size_t e = 0; e < sizeof(ends) / sizeof(ends[0]); e++) {
                        char text[64];
                        int len = 0;
                        if (neg) {
                            text[len++] = '-';
                        }
                        for (int i = 0; i < ni; i++) {
                            text[len++] = (char)(i == 0 && lead == 1 ? '0' : '1' + (i + lead) % 9);
                        }
                        if (nf >= 0) {
                            text[len++] = '.';
                            for (int i = 0; i < nf; i++) {
                                text[len++] = (char)('0' + (7 * i + lead) % 10);
                            }
                        }
                        len += snprintf(text + len, 32, "%s0123456789abcdefghij", ends[e]);
                        double a = -1, b = -1;
                        size_t ua = 0, ub = 0;
                        bool ta = jdnum_f64_7(text, (size_t)len, &a, &ua),
                             tb = jdnum_f64(text, (size_t)len, &b, &ub);
                        cr_assert_eq(ta, tb, "%s: f64_7 %d, general %d", text, ta, tb);
                        if (ta) {
                            cr_assert(memcmp(&a, &b, 8) == 0 && ua == ub,
                                      "%s: %.17g/%zu vs %.17g/%zu", text, a, ua, b, ub);
                            taken++;
                        }
                        tried++;
                    }
                }
            }
        }
    }
    cr_assert_gt(taken, tried / 4, "%d of %d", taken, tried);
}

/* One KeyValue's text for point_attributes_copied_only_for_the_same_text:
 * value kind |t| of the pool, |v| picking among near-equal values. */
static void pa_kv(char *d, size_t cap, unsigned key, unsigned t, unsigned v)
{
    static const char *const keys[] = {"http.request.method",
                                       "http.route",
                                       "state",
                                       "k",
                                       "kk",
                                       "a.long.attribute.key.of.more.than.thirty-two.bytes"};
    /* 24-byte values that differ in one byte at their 6th (text bytes 32-47
     * for the short keys) or their last, plus short and 70-byte ones */
    static const char *const strs[] = {
        "GET",
        "POST",
        "abcdefghijklmnopqrstuvwx",
        "abcdeXghijklmnopqrstuvwx",
        "abcdefghijklmnopqrstuvwX",
        "",
        "0123456789012345678901234567890123456789012345678901234567890123456789",
        "0123456789012345678901234567890123456789012345678901234567890123456788",
        "esc\\u0041ped",
        "/api/v1/orders",
        "/api/v1/orders/*"};
    const char *k = keys[key % 6];
    switch (t % 6) {
    case 0:
    case 1:
        snprintf(d, cap, "{'key':'%s','value':{'stringValue':'%s'}}", k, strs[v % 11]);
        break;
    case 2:
        snprintf(d, cap, "{'key':'%s','value':{'intValue':'%u'}}", k, 200 + v % 4);
        break;
    case 3:
        snprintf(d, cap, "{'key':'%s','value':{'intValue':%u}}", k, 200 + v % 4);
        break;
    case 4:
        snprintf(d, cap, "{'key':'%s','value':{'doubleValue':%s}}", k,
                 v % 3 == 0   ? "0.5"
                 : v % 3 == 1 ? "0.25"
                              : "1e-7");
        break;
    default:
        snprintf(d, cap, "{'key':'%s','value':{'boolValue':%s}}", k, v % 2 ? "true" : "false");
        break;
    }
}

/* A data point's KeyValue whose text is the same as one read before at its
 * place in the list is copied; any other is read. Points whose attributes
 * repeat, differ in one byte (in a value's first, middle or last 16 bytes,
 * in its key, its kind, quoted or not), come at another place, run past
 * the eight places kept, hold an escape (read the general way), are longer
 * than 64 bytes, or a blank: every point's attributes the same bytes as the
 * spaced form's (the general path), the counts as written. */
Test(jsondec_fast, point_attributes_copied_only_for_the_same_text)
{
    enum { POINTS = 600 };
    size_t cap = (size_t)POINTS * 12 * 200 + 256;
    char *body = malloc(cap), kv[256];
    unsigned counts[POINTS];
    cr_assert(body != NULL);
    size_t len = (size_t)snprintf(body, cap, "{'name':'m','gauge':{'dataPoints':[");
    rng_state = 0x2545f4914f6cdd1dull;
    for (unsigned p = 0; p < POINTS; p++) {
        unsigned n = (unsigned)(rnd() % 12); /* 0-11: past JD_KVC_MAX (8) too */
        counts[p] = n;
        len += (size_t)snprintf(body + len, cap - len, "%s{'attributes':[", p ? "," : "");
        for (unsigned c = 0; c < n; c++) {
            uint64_t r = rnd();
            /* mostly the place's usual key and kind, a few values: repeats */
            unsigned key = r % 8 < 6 ? c : (unsigned)(r >> 8),
                     t = r % 16 < 13 ? c : (unsigned)(r >> 16);
            pa_kv(kv, sizeof kv, key, t, (unsigned)(r >> 24) % (r % 4 == 0 ? 11 : 3));
            len += (size_t)snprintf(body + len, cap - len, "%s%s",
                                    c ? (r % 97 == 0 ? ", " : ",") : "", kv);
        }
        len += (size_t)snprintf(body + len, cap - len, "],'asInt':'%u'}", p);
    }
    snprintf(body + len, cap - len, "]}}");
    char *r = metric_req(body);
    struct dec d;
    same_as_general(SIG_METRICS, r, &d);
    cr_assert_eq(d.b->n_rows, POINTS);
    uint32_t at = 0; /* gauge points: the heap is their attributes, back to back */
    for (unsigned p = 0; p < POINTS; p++) {
        cr_assert_eq(d.b->points[p].attrs.count, counts[p], "point %u", p);
        cr_assert_eq(d.b->points[p].attrs.blob.off, at, "point %u", p);
        at += d.b->points[p].attrs.blob.len;
        cr_assert_eq(d.b->points[p].value.i, (int64_t)p);
    }
    cr_assert_eq(d.b->heap.len, at);
    done(&d);
    free(r);
    free(body);
}

/* Points with one string KeyValue each, key and value from |kv|; each
 * decoded exactly (the points' attributes as val.h writes them). */
static void pa_exact(const char *const (*kv)[2], int n)
{
    char body[8192];
    size_t len = (size_t)snprintf(body, sizeof body, "{'name':'m','sum':{'dataPoints':[");
    for (int p = 0; p < n; p++) {
        len += (size_t)snprintf(body + len, sizeof body - len,
                                "{'attributes':[{'key':'%s','value':{'stringValue':'%s'}}],"
                                "'asInt':'%d'},",
                                kv[p][0], kv[p][1], p);
    }
    /* room after the last: its copy asks for 64 bytes after it */
    snprintf(body + len, sizeof body - len, "{},{},{},{},{},{},{},{},{},{},{},{},{'asInt':'0'}]}}");
    struct dec d;
    char *r = metric_req(body);
    ok(&d, SIG_METRICS, r);
    free(r);
    cr_assert_eq(d.b->n_rows, n + 13);
    for (int p = 0; p < n; p++) {
        expect_str_attr(d.b, d.b->points[p].attrs, kv[p][0], kv[p][1]);
    }
    done(&d);
}

/* Exact bytes: a point's KeyValue copied from one before it at its place
 * when their texts are the same, read when they differ in any 16 bytes of
 * them (the first, the second, the third or the last), each as val.h
 * writes it. Each one comes right after the one it must not be taken for,
 * in the same way (the 16 bytes that choose it are the same). */
Test(jsondec_fast, point_attributes_copied_exact)
{
    static const char *const kv[][2] = {
        /* the way chosen by text bytes 54-69 (the first text's last 8, the 8 after) */
        {"k", "abcdefghijklmnopqrstuvwx"},
        {"K", "abcdefghijklmnopqrstuvwx"}, /* text byte 8 */
        {"k", "abcdefghijklmnopqrstuvwx"},
        {"k", "abcdeXghijklmnopqrstuvwx"}, /* byte 40 */
        {"kkkkkkkkkkkkkkkA", "abcdefghijk"},
        {"kkkkkkkkkkkkkkkB", "abcdefghijk"},                            /* byte 23 of 64 */
        {"a.key.of.thirty.bytes.00000000", "abcdefghijklmnopqrstuvwx"}, /* 57 heap bytes */
        {"a.key.of.thirty.bytes.00000000", "abcdefghijklmnopqrstuvwx"},
        {"route", "/api/v1/orders"},
        {"route", "/api/v1/orders"},
        {"route", "/api/v1/order"},
        {"route", "/api/v1/orders"},
    };
    pa_exact(kv, sizeof(kv) / sizeof(kv[0]));
    static const char *const tail[][2] = {
        /* chosen by bytes 31-46: the two differ only in their last 16 */
        {"x", "y"},
        {"k", "abcdefghijklmnopqrstuvwx"},
        {"k", "abcdefghijklmnopqrstuvwX"},
    };
    pa_exact(tail, sizeof(tail) / sizeof(tail[0]));
    static const char *const short_texts[][2] = {
        /* 33-48 bytes, chosen by bytes 39-54 */
        {"abcdefghX", "v"},
        {"abcdefghY", "v"}, /* byte 16 of 47 */
        {"k", "v"},
        {"K", "v"}, /* byte 8 of 39 */
    };
    pa_exact(short_texts, sizeof(short_texts) / sizeof(short_texts[0]));
}

/* Point attributes copied into a heap at every length from 600 bytes
 * below its first capacity (4,096) to 64 past it: eight short KeyValues
 * read at point 0, a string that moves the heap on at point 1, the same
 * eight copied at point 2 (room for all eight is made before the first).
 * Exact bytes against the spaced form; ASan sees a copy past the heap. */
Test(jsondec_fast, point_attributes_copied_at_every_heap_length)
{
    char kvs[1024], body[8192];
    size_t kl = 0;
    for (int c = 0; c < 8; c++) {
        kl += (size_t)snprintf(kvs + kl, sizeof kvs - kl,
                               "%s{'key':'k%d','value':{'stringValue':'value %d'}}", c ? "," : "",
                               c, c);
    }
    char pad[4800];
    for (size_t len = 3400; len <= 4100; len++) {
        memset(pad, 'p', len);
        pad[len] = '\0';
        snprintf(body, sizeof body,
                 "{'name':'m','gauge':{'dataPoints':[{'attributes':[%s],'asInt':'0'},"
                 "{'attributes':[{'key':'pad','value':{'stringValue':'%s'}}],'asInt':'1'},"
                 "{'attributes':[%s],'asInt':'2'},{},{},{},{},{},{},{},{},{}]}}",
                 kvs, pad, kvs);
        char *r = metric_req(body);
        struct dec d;
        same_as_general(SIG_METRICS, r, &d);
        cr_assert_eq(d.b->n_rows, 12);
        const struct point_row *p = d.b->points;
        cr_assert_eq(p[2].attrs.count, 8);
        cr_assert_eq(p[2].attrs.blob.len, p[0].attrs.blob.len, "pad %zu", len);
        cr_assert(memcmp(batch_blob(d.b, p[2].attrs.blob), batch_blob(d.b, p[0].attrs.blob),
                         p[0].attrs.blob.len) == 0,
                  "pad %zu", len);
        done(&d);
        free(r);
    }
}

/* The counts before the one a test puts in: none (|at| 0), one (1), or a
 * 32-count chunk (2), each followed by ','. */
static void counts_before(char *pre, size_t cap, int at)
{
    size_t pl = 0;
    pre[0] = '\0';
    for (int e = 0; e < (at == 0 ? 0 : at == 1 ? 1 : 32); e++) {
        pl += (size_t)snprintf(pre + pl, cap - pl, "'%d',", e % 3 == 0 ? 10 : 99);
    }
}

/* A quoted bucket count of 1-7 digits with one of them replaced by a byte
 * or a UTF-8 sequence that is no digit (bytes whose xor with '0' is 0x8a or
 * more among them): refused as the spaced form is ("-0" read as it), wherever the
 * count stands (first, second, after a 32-count chunk). Digits before and
 * after it exact: "10", "99", "100" read as numbers. */
Test(jsondec_fast, quoted_counts_refuse_a_bad_byte_anywhere)
{
    static const char *const bad[] = {"/",        ":",        "a",           " ",
                                      "-",        "\xc2\xb0", "\xc3\xa9",    "\xdf\xbf",
                                      "\xc2\x8a", "\xc2\xba", "\xe2\x82\xac"};
    char m[1024], cnt[16], pre[200] = "";
    for (int at = 0; at < 3; at++) {
        counts_before(pre, sizeof pre, at);
        for (int len = 1; len <= 7; len++) {
            for (int p = 0; p < len; p++) {
                for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
                    size_t cl = 0;
                    for (int d = 0; d < len; d++) {
                        cl += (size_t)snprintf(cnt + cl, sizeof cnt - cl, "%s",
                                               d == p   ? bad[b]
                                               : d == 0 ? "1"
                                                        : "0");
                    }
                    snprintf(m, sizeof m,
                             "{'histogram':{'dataPoints':[{'bucketCounts':[%s'%s','100']}]}}", pre,
                             cnt);
                    /* "-0" is the general reader's zero */
                    cr_assert(counts_as_spaced(m) != 0 || (p == 0 && bad[b][0] == '-'),
                              "%s accepted", m);
                }
            }
        }
    }
    /* the digits around: exact */
    struct dec d;
    char *r = metric_req("{'histogram':{'dataPoints':[{'bucketCounts':['10','99','100','7','0',"
                         "'1234567','12','3']}]}}");
    ok(&d, SIG_METRICS, r);
    free(r);
    static const uint64_t want[] = {10, 99, 100, 7, 0, 1234567, 12, 3};
    const uint8_t *p = batch_blob(d.b, d.b->points[0].detail);
    uint32_t n;
    memcpy(&n, p, 4);
    cr_assert_eq(n, 8);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, p + 4 + 8 * i, 8);
        cr_assert_eq(v, want[i], "count %u: %llu", i, (unsigned long long)v);
    }
    done(&d);
}

/* A quoted count of 1-3 digits whose opening or closing quote or the ','
 * after it is another byte: refused as the spaced form is, first, second or after a
 * 32-count chunk, with a count after it. */
Test(jsondec_fast, quoted_counts_refuse_a_bad_quote_or_comma)
{
    static const char *const bad[] = {"x", " ", "]", ":", "}", "\\\\", "\x01"};
    char m[1024], cnt[16], pre[200] = "";
    for (int at = 0; at < 3; at++) {
        counts_before(pre, sizeof pre, at);
        for (int len = 1; len <= 3; len++) {
            for (int p = 0; p < 3; p++) { /* the closing quote, the ',', the opening quote */
                for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
                    snprintf(cnt, sizeof cnt, "%s%.*s%s%s", p == 2 ? bad[b] : "'", len, "987",
                             p == 0 ? bad[b] : "'", p == 1 ? bad[b] : ",");
                    snprintf(m, sizeof m,
                             "{'histogram':{'dataPoints':[{'bucketCounts':[%s%s'100']}]}}", pre,
                             cnt);
                    char *r = metric_req(m), *body = q(r), *sp = spaced(body);
                    struct dec d, e;
                    run(&d, SIG_METRICS, body);
                    run(&e, SIG_METRICS, sp);
                    cr_assert(d.rc != 0 && d.rc == e.rc, "%s: %d, spaced %d", body, d.rc, e.rc);
                    done(&d);
                    done(&e);
                    free(sp);
                    free(body);
                    free(r);
                }
            }
        }
    }
}

/* A quantile whose text is the one the previous summary point had at its
 * place, followed by ',', takes that value; any other text is read: texts
 * one the other's prefix ("0.9", "0.99"), of one length ("0.5", "0.9"),
 * of 7 bytes and of 8 or more (not kept), signed, with an exponent; a zero
 * quantile left out now and then. 250 points in one request: every value
 * strtod's, the details the spaced form's. */
Test(jsondec_fast, quantile_texts_repeated_read_the_same)
{
    static const char *const qt[] = {"0.9", "0.99",    "0.999",   "0.5",      "0.1",
                                     "1",   "0.12345", "0.12346", "0.123456", "5e-1",
                                     "-0",  "0.9e0",   "0.25",    "1.0"};
    enum { POINTS = 250, NQ = sizeof(qt) / sizeof(qt[0]) };
    size_t cap = (size_t)POINTS * 20 * 64 + 256, len = 0;
    char *m = malloc(cap);
    static double want[POINTS][20][2];
    static int nq[POINTS];
    cr_assert(m != NULL);
    len += (size_t)snprintf(m, cap, "{'summary':{'dataPoints':[");
    for (int p = 0; p < POINTS; p++) {
        nq[p] = 1 + (int)(rnd() % 20);
        len +=
            (size_t)snprintf(m + len, cap - len, "%s{'count':'1','quantileValues':[", p ? "," : "");
        for (int i = 0; i < nq[p]; i++) {
            /* mostly the place's usual text: repeats */
            const char *t = qt[rnd() % 4 != 0 ? (unsigned)i % NQ : rnd() % NQ];
            char vt[32];
            snprintf(vt, sizeof vt, "%.17g", (double)(rnd() % 1000000) / 7.0);
            bool omit = rnd() % 8 == 0;
            want[p][i][0] = omit ? 0 : strtod(t, NULL);
            want[p][i][1] = strtod(vt, NULL);
            len += omit ? (size_t)snprintf(m + len, cap - len, "%s{'value':%s}", i ? "," : "", vt)
                        : (size_t)snprintf(m + len, cap - len, "%s{'quantile':%s,'value':%s}",
                                           i ? "," : "", t, vt);
        }
        len += (size_t)snprintf(m + len, cap - len, "]}");
    }
    snprintf(m + len, cap - len, "]}}");
    struct dec d;
    char *r = details_as_spaced(&d, m);
    cr_assert_eq(d.b->n_rows, POINTS);
    for (int p = 0; p < POINTS; p++) {
        const uint8_t *b = batch_blob(d.b, d.b->points[p].detail);
        uint32_t n;
        memcpy(&n, b, 4);
        cr_assert_eq(n, (uint32_t)nq[p]);
        for (int i = 0; i < nq[p]; i++) {
            double qv, vv;
            memcpy(&qv, b + 4 + 16 * (size_t)i, 8);
            memcpy(&vv, b + 12 + 16 * (size_t)i, 8);
            cr_assert(memcmp(&qv, &want[p][i][0], 8) == 0 && memcmp(&vv, &want[p][i][1], 8) == 0,
                      "point %d quantile %d: %.17g %.17g", p, i, qv, vv);
        }
    }
    done(&d);
    free(r);
    free(m);
    /* the text kept, then another byte where the ',' was: refused as the
     * general loop refuses it */
    refused(SIG_METRICS,
            metric_req("{'summary':{'dataPoints':[{'quantileValues':[{'quantile':0.5,'value':1}]},"
                       "{'quantileValues':[{'quantile':0.5x'value':2}],'count':'12345678901'}]}}"),
            "expected ',' or '}'");
}

/* 400 gauge points in one request, each with |member| (startTimeUnixNano
 * or timeUnixNano) of a text from |tx| (one of its first |common| two times
 * in three): exact values and the spaced form's. */
static void times_read_exactly(const char *member, const char *const *tx, size_t nt,
                               unsigned common)
{
    enum { POINTS = 400 };
    bool start = strcmp(member, "startTimeUnixNano") == 0;
    char *m = malloc((size_t)POINTS * 80 + 256);
    uint64_t want[POINTS];
    cr_assert(m != NULL);
    size_t len = (size_t)sprintf(m, "{'gauge':{'dataPoints':[");
    for (int p = 0; p < POINTS; p++) {
        const char *t = tx[rnd() % 3 != 0 ? rnd() % common : rnd() % nt];
        want[p] = strtoull(t + (t[0] == '\''), NULL, 10);
        len += (size_t)sprintf(m + len, "%s{'%s':%s,'asInt':'%d'}", p ? "," : "", member, t, p);
    }
    sprintf(m + len, "]}}");
    char *r = metric_req(m);
    struct dec d;
    same_as_general(SIG_METRICS, r, &d);
    for (int p = 0; p < POINTS; p++) {
        const struct point_row *pr = &d.b->points[p];
        cr_assert_eq(start ? pr->start_ns : pr->time_ns, want[p], "point %d", p);
    }
    done(&d);
    free(r);
    free(m);
}

/* A startTimeUnixNano whose quoted 19-digit text is the last one read is
 * its value; any other is read: texts that differ in their first, middle
 * (bytes 13-15, where the two compares overlap) or last digits, bare
 * numbers, 20 digits, a short one. Exact values and the
 * spaced form's, 400 points in one request. */
Test(jsondec_fast, start_times_repeated_read_the_same)
{
    static const char *const st[] = {"'1767225540000000000'",  "'1767225540000000001'",
                                     "'2767225540000000000'",  "'1767225540001000000'",
                                     "'1767225540000100000'",  "'1767225540000010000'",
                                     "'1767225541000000000'",  "1767225540000000000",
                                     "'17672255400000000000'", "'5'",
                                     "'1767225540000000000'"};
    times_read_exactly("startTimeUnixNano", st, sizeof(st) / sizeof(st[0]), 1);
}

/* The decode of one gauge point with timeUnixNano |a| then one with |b|. */
static void two_times(struct dec *d, const char *a, const char *b)
{
    char m[256];
    snprintf(m, sizeof m,
             "{'gauge':{'dataPoints':[{'timeUnixNano':%s,'asInt':'1'},"
             "{'timeUnixNano':%s,'asInt':'2'}]}}",
             a, b);
    char *r = metric_req(m), *body = q(r);
    run(d, SIG_METRICS, body);
    free(body);
    free(r);
}

/* A timeUnixNano whose first 12 bytes (the quote, 11 digits) are the last
 * one u64_19 read is that prefix's value plus its last 8 digits; any other
 * is read whole: texts that differ from the last in byte 1, in bytes 8-11
 * (the second compare's), in the low digits only, 18 and 20 digits with
 * the same first 12 bytes, a bare number, a short one. Exact values and
 * the spaced form's, 400 points in one request; then a non-digit among
 * the low 8 refused as when no prefix is kept. */
Test(jsondec_fast, time_prefixes_repeated_read_exactly)
{
    static const char *const tm[] = {
        "'1767225540123456789'", "'1767225540199999999'", "'1767225540100000000'",
        "'1767225540133456789'", "'1767225540223456789'", "'2767225540123456789'",
        "'1767225550123456789'", "'1767225640123456789'", "'17672255401234567890'",
        "'176722554012345678'",  "1767225540123456789",   "'5'",
        "'9767225540123456780'"};
    times_read_exactly("timeUnixNano", tm, sizeof(tm) / sizeof(tm[0]), 4);
    static const char *const bad[] = {"'17672255401234567x9'", "'1767225540123456 89'",
                                      "'176722554012345678\"'"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct dec kept, none;
        two_times(&kept, "'1767225540100000000'", bad[i]);
        two_times(&none, "'2767225540100000000'", bad[i]); /* no prefix in common */
        cr_assert_eq(kept.rc, -EPROTO, "%s accepted", bad[i]);
        cr_assert_eq(none.rc, -EPROTO, "%s accepted", bad[i]);
        cr_assert_str_eq(kept.err, none.err);
        done(&kept);
        done(&none);
    }
}

/* ---- a point's members in the order the last point of its kind had ---- */

/* Members with a value text each; the kind bit says whose they are (bit
 * MK_*), 0 for names no point has. */
static const struct {
    const char *name, *val;
    unsigned kinds;
} pm_pool[] = {
#define PM_ALL (2u | 4u | 8u | 16u | 32u)
    {"attributes", "[{'key':'a','value':{'intValue':'%u'}}]", PM_ALL},
    {"startTimeUnixNano", "'%u'", PM_ALL},
    {"timeUnixNano", "'17672256000000%05u'", PM_ALL},
    {"flags", "%u", PM_ALL},
    {"asDouble", "%u.5", 2u | 4u},
    {"asInt", "'%u'", 2u | 4u},
    {"exemplars", "[{'asInt':'%u'}]", 2u | 4u | 8u | 16u},
    {"count", "'%u'", 8u | 16u | 32u},
    {"sum", "%u.25", 8u | 16u | 32u},
    {"min", "0.%u", 8u | 16u},
    {"max", "%u", 8u | 16u},
    {"bucketCounts", "['%u','2']", 8u},
    {"explicitBounds", "[%u.5]", 8u},
    {"scale", "%u", 16u},
    {"zeroCount", "'%u'", 16u},
    {"positive", "{'offset':1,'bucketCounts':['%u']}", 16u},
    {"negative", "{'offset':2,'bucketCounts':['%u']}", 16u},
    {"zeroThreshold", "0.%u", 16u},
    {"quantileValues", "[{'quantile':0.5,'value':%u}]", 32u},
    {"unknownMember", "{'x':[%u]}", 0},
};
enum { PM_N = sizeof(pm_pool) / sizeof(pm_pool[0]) };

/* Every field of the points of two batches same_batch leaves out. */
static void same_point_scalars(const struct batch *x, const struct batch *y)
{
    for (uint32_t i = 0; i < x->n_rows; i++) {
        const struct point_row *a = &x->points[i], *b = &y->points[i];
        cr_assert_eq(a->flags, b->flags, "point %u", i);
        cr_assert(memcmp(&a->min, &b->min, 8) == 0 && memcmp(&a->max, &b->max, 8) == 0);
        cr_assert(a->has_sum == b->has_sum && a->has_min == b->has_min && a->has_max == b->has_max,
                  "point %u", i);
        cr_assert_eq(a->n_exemplars, b->n_exemplars, "point %u", i);
    }
}

/* The metrics |m| (single-quoted) read as their spaced form is, every
 * point field same_batch and same_point_scalars compare. */
static void points_as_spaced(const char *m)
{
    char *r = metric_req(m), *body = q(r), *sp = spaced(body);
    struct dec d, slow;
    same_as_general(SIG_METRICS, r, &d);
    run(&slow, SIG_METRICS, sp);
    cr_assert_eq(slow.rc, 0, "%s", slow.err);
    same_point_scalars(d.b, slow.b);
    done(&slow);
    done(&d);
    free(sp);
    free(body);
    free(r);
}

/*
 * 40 metrics of the five kinds, 2-12 points each; a kind's points mostly
 * have its last point's members in the same order, else two swapped, one
 * dropped, a member of another kind or an unknown one put in, a null
 * value, or 17-40 members (repeats past the 16 places kept). Every point
 * field as the spaced form's, which reads no member by the learned order.
 */
Test(jsondec_fast, point_members_in_learned_order_read_as_the_general_path)
{
    static const char *const kinds[] = {
        "", "gauge", "sum", "histogram", "exponentialHistogram", "summary"};
    size_t cap = 1u << 20, len = 0;
    char *m = malloc(cap);
    cr_assert(m != NULL);
    int order[6][48], no[6] = {0};
    for (int k = 1; k <= 5; k++) { /* a first order: the kind's members in pool order */
        for (int i = 0; i < PM_N; i++) {
            if (pm_pool[i].kinds & (1u << k)) {
                order[k][no[k]++] = i;
            }
        }
    }
    for (int mi = 0; mi < 40; mi++) {
        int k = 1 + (int)(rnd() % 5);
        len += (size_t)snprintf(m + len, cap - len, "%s{'name':'m%d','%s':{'dataPoints':[",
                                mi ? "," : "", mi, kinds[k]);
        int np = 2 + (int)(rnd() % 11);
        for (int p = 0; p < np; p++) {
            int cur[48], n = no[k];
            memcpy(cur, order[k], sizeof cur);
            unsigned what = (unsigned)(rnd() % 12);
            if (what == 0 && n > 1) { /* two swapped */
                int a = (int)(rnd() % (unsigned)n), b = (int)(rnd() % (unsigned)n), t = cur[a];
                cur[a] = cur[b];
                cur[b] = t;
            } else if (what == 1 && n > 1) { /* one dropped */
                int a = (int)(rnd() % (unsigned)n);
                memmove(cur + a, cur + a + 1, sizeof(int) * (size_t)(n - a - 1));
                n--;
            } else if (what == 2 && n < 47) { /* any member, this kind's or not */
                int a = (int)(rnd() % (unsigned)(n + 1));
                memmove(cur + a + 1, cur + a, sizeof(int) * (size_t)(n - a));
                cur[a] = (int)(rnd() % PM_N);
                n++;
            } else if (what == 3) { /* repeats: more members than orders kept */
                while (n < 17 + (int)(rnd() % 24)) {
                    cur[n++] = 3; /* flags */
                }
            }
            if (what <= 2) { /* the new order is learned */
                memcpy(order[k], cur, sizeof cur);
                no[k] = n;
            }
            len += (size_t)snprintf(m + len, cap - len, "%s{", p ? "," : "");
            for (int i = 0; i < n; i++) {
                char v[96];
                if (rnd() % 16 == 0) {
                    snprintf(v, sizeof v, "null");
                } else {
                    snprintf(v, sizeof v, pm_pool[cur[i]].val, (unsigned)(rnd() % 100));
                }
                len += (size_t)snprintf(m + len, cap - len, "%s'%s':%s", i ? "," : "",
                                        pm_pool[cur[i]].name, v);
            }
            len += (size_t)snprintf(m + len, cap - len, "}");
        }
        len += (size_t)snprintf(m + len, cap - len, "]}}");
        cr_assert(len < cap - 4096);
    }
    points_as_spaced(m);
    free(m);
}

/* ---- round 10: the learned order as a superset, short counts, exemplars ---- */

/*
 * Points of one kind that leave out members the last one had (one, two or
 * three places on, the third read by next_field), put in one it had not,
 * at the start too (the old first member moved down), alternate asInt and
 * asDouble: every field as the spaced form's. Then the compares' two
 * separators: a ',' right after the '{' (entry 1 and later ask for one), a
 * member with no ',' before it after an unknown first member and after
 * the first member was put in before the old one: refused.
 */
Test(jsondec_fast, point_members_left_out_or_put_in_read_as_the_general_path)
{
    static const char *const pts[] = {
        /* exponential histograms: scale, zeroCount, negative come and go */
        "{'attributes':[],'startTimeUnixNano':'1','timeUnixNano':'2','count':'3','sum':1.5,"
        "'scale':2,'zeroCount':'4','positive':{'offset':1,'bucketCounts':['5']},"
        "'negative':{'offset':2,'bucketCounts':['6']},'min':0.5,'max':9}",
        "{'attributes':[],'startTimeUnixNano':'1','timeUnixNano':'2','count':'3','sum':1.5,"
        "'zeroCount':'4','positive':{'offset':1,'bucketCounts':['5']},'min':0.5,'max':9}",
        "{'attributes':[],'startTimeUnixNano':'1','timeUnixNano':'2','count':'3','sum':1.5,"
        "'positive':{'offset':1,'bucketCounts':['5']},'min':0.5,'max':9}",
        "{'attributes':[],'startTimeUnixNano':'1','timeUnixNano':'2','count':'3','sum':1.5,"
        "'max':9}",
        "{'startTimeUnixNano':'1','timeUnixNano':'2','count':'3','sum':1.5,'scale':-1,"
        "'zeroCount':'4','positive':{'offset':1,'bucketCounts':['5']},'min':0.5,'max':9}",
        "{'flags':1,'attributes':[],'startTimeUnixNano':'1','timeUnixNano':'2','count':'3',"
        "'sum':1.5,'scale':2,'negative':{'offset':2,'bucketCounts':['6']},'min':0.5,'max':9}",
        "{'attributes':[],'startTimeUnixNano':'1','timeUnixNano':'2','count':'3','sum':1.5,"
        "'scale':2,'zeroCount':'4','positive':{'offset':1,'bucketCounts':['5']},"
        "'negative':{'offset':2,'bucketCounts':['6']},'min':0.5,'max':9,'flags':2}",
        "{'unknown':{'a':[1]},'attributes':[],'count':'3','asInt':'5','sum':1.5}",
        "{'attributes':null,'startTimeUnixNano':null,'timeUnixNano':'2','count':'3','sum':1.5}",
        "{}",
    };
    enum { NP = sizeof(pts) / sizeof(pts[0]) };
    size_t cap = 1u << 18, len = 0;
    char *m = malloc(cap);
    cr_assert(m != NULL);
    len += (size_t)snprintf(m, cap, "{'name':'e','exponentialHistogram':{'dataPoints':[");
    for (int p = 0; p < 300; p++) {
        len += (size_t)snprintf(m + len, cap - len, "%s%s", p ? "," : "",
                                pts[p < NP           ? (uint64_t)p
                                    : rnd() % 3 != 0 ? rnd() % 4
                                                     : rnd() % NP]);
    }
    len += (size_t)snprintf(m + len, cap - len, "]}},{'name':'g','gauge':{'dataPoints':[");
    for (int p = 0; p < 100; p++) { /* asInt and asDouble in turn */
        len +=
            (size_t)snprintf(m + len, cap - len,
                             "%s{'attributes':[],'startTimeUnixNano':'1','timeUnixNano':'%d',%s}",
                             p ? "," : "", p, rnd() % 2 ? "'asInt':'7'" : "'asDouble':2.5");
    }
    snprintf(m + len, cap - len, "]}}");
    points_as_spaced(m);
    free(m);

    /* each bad point followed by a good one: the compares need 36 bytes after the cursor */
    const char *first = "{'attributes':[],'startTimeUnixNano':'1','timeUnixNano':'2','asInt':'3'}";
    char t[1024];
    snprintf(t, sizeof t, "{'gauge':{'dataPoints':[%s,{,'startTimeUnixNano':'1'},%s]}}", first,
             first);
    refused(SIG_METRICS, metric_req(t), "at offset");
    snprintf(t, sizeof t, "{'gauge':{'dataPoints':[%s,{'x':1'attributes':[]},%s]}}", first, first);
    refused(SIG_METRICS, metric_req(t), "at offset");
    snprintf(t, sizeof t,
             "{'gauge':{'dataPoints':[%s,{'x':1,'attributes':[]'startTimeUnixNano':'1'},%s]}}",
             first, first);
    refused(SIG_METRICS, metric_req(t), "at offset");
    /* exponential buckets: after the offset's compare, a member with no ',' before it */
    snprintf(t, sizeof t,
             "{'exponentialHistogram':{'dataPoints':[{'positive':{'offset':1'bucketCounts':['1']"
             "}},%s]}}",
             first);
    refused(SIG_METRICS, metric_req(t), "at offset");
    /* the first member put in before the old first one, which moves to entry 1 */
    snprintf(t, sizeof t,
             "{'gauge':{'dataPoints':[{'startTimeUnixNano':'1','asInt':'2'},{'flags':1,"
             "'startTimeUnixNano':'1','asInt':'2'},{'flags':1'startTimeUnixNano':'1'},%s]}}",
             first);
    refused(SIG_METRICS, metric_req(t), "at offset");
}

/* metric_req(|m|) with ' turned into " (owned). */
static char *metric_body(const char *m)
{
    char *r = metric_req(m), *b = q(r);
    free(r);
    return b;
}

/*
 * count, zeroCount and asInt of 1-7 quoted digits are read by the short
 * path, anything else by the general reader: each text reads as it does
 * for timeUnixNano (count, zeroCount) and an exemplar's asInt (asInt),
 * which take the general readers: the same value, or refused alike.
 */
Test(jsondec_fast, point_counts_and_ints_read_as_the_general_readers)
{
    static const char *const texts[] = {
        "'0'",
        "'7'",
        "'10'",
        "'1234567'",
        "'9999999'",
        "'12345678'",
        "'01'",
        "'00'",
        "'-5'",
        "'-0'",
        "5",
        "'5 '",
        "' 5'",
        "'5'",
        "'1e3'",
        "'1.0'",
        "''",
        "'18446744073709551615'",
        "'9223372036854775807'",
        "'-9223372036854775808'",
        "'12\\u0033'",
        "'123456789012'",
        "1234567",
        "'1234567x'",
        "'3'",
    };
    enum { NT = sizeof(texts) / sizeof(texts[0]) };
    for (int i = 0; i < NT; i++) {
        char a[512], b[512];
        struct dec x, y;
        /* count and zeroCount against timeUnixNano */
        snprintf(a, sizeof a,
                 "{'exponentialHistogram':{'dataPoints':[{'count':%s,'zeroCount':%s,"
                 "'positive':{'offset':0,'bucketCounts':['1']}}]}}",
                 texts[i], texts[i]);
        snprintf(b, sizeof b, "{'gauge':{'dataPoints':[{'timeUnixNano':%s}]}}", texts[i]);
        char *ra = metric_body(a), *rb = metric_body(b);
        run(&x, SIG_METRICS, ra);
        run(&y, SIG_METRICS, rb);
        cr_assert_eq(x.rc == 0, y.rc == 0, "%s: %d (%s) against %d (%s)", texts[i], x.rc, x.err,
                     y.rc, y.err);
        if (x.rc == 0) {
            const uint8_t *dt = batch_blob(x.b, x.b->points[0].detail);
            uint64_t zc;
            memcpy(&zc, dt + 4, 8); /* after the scale */
            cr_assert_eq(x.b->points[0].count, y.b->points[0].time_ns, "%s", texts[i]);
            cr_assert_eq(zc, y.b->points[0].time_ns, "%s", texts[i]);
        }
        done(&x);
        done(&y);
        free(ra);
        free(rb);
        /* asInt against an exemplar's asInt (raw after u64 time and u8 type) */
        snprintf(a, sizeof a, "{'gauge':{'dataPoints':[{'asInt':%s}]}}", texts[i]);
        snprintf(b, sizeof b, "{'gauge':{'dataPoints':[{'exemplars':[{'asInt':%s}]}]}}", texts[i]);
        ra = metric_body(a);
        rb = metric_body(b);
        run(&x, SIG_METRICS, ra);
        run(&y, SIG_METRICS, rb);
        cr_assert_eq(x.rc == 0, y.rc == 0, "asInt %s: %d (%s) against %d (%s)", texts[i], x.rc,
                     x.err, y.rc, y.err);
        if (x.rc == 0) {
            int64_t v;
            memcpy(&v, batch_blob(y.b, y.b->points[0].exemplars) + 9, 8);
            cr_assert_eq(x.b->points[0].value_type, PV_INT);
            cr_assert_eq(x.b->points[0].value.i, v, "asInt %s", texts[i]);
        }
        done(&x);
        done(&y);
        free(ra);
        free(rb);
    }
}

/*
 * An exemplar's filteredAttributes read where they are, first, between or
 * last: the exemplar's layout (the fixed part, then u32 count, u32 nbytes
 * and the attributes, as val.h writes them); the last of two wins; errors
 * as when they were skipped first and read last.
 */
Test(jsondec_fast, exemplar_attributes_in_place_equal_the_layout)
{
    static const char *const forms[] = {
        "{'filteredAttributes':[{'key':'k','value':{'stringValue':'v'}}],'timeUnixNano':'9',"
        "'asInt':'-2','spanId':'0102030405060708'}",
        "{'timeUnixNano':'9','filteredAttributes':[{'key':'k','value':{'stringValue':'v'}}],"
        "'asInt':'-2','spanId':'0102030405060708'}",
        "{'timeUnixNano':'9','asInt':'-2','spanId':'0102030405060708','filteredAttributes':"
        "[{'key':'k','value':{'stringValue':'v'}}]}",
        "{'filteredAttributes':[{'key':'x','value':{'intValue':'1'}}],'timeUnixNano':'9',"
        "'asInt':'-2','filteredAttributes':[{'key':'k','value':{'stringValue':'v'}}],"
        "'filteredAttributes':null,'spanId':'0102030405060708'}",
        "{'filteredAttributes':[{'key':'x','value':{'intValue':'q'}}],'timeUnixNano':'9',"
        "'asInt':'-2','filteredAttributes':[{'key':'k','value':{'stringValue':'v'}}],"
        "'spanId':'0102030405060708'}",
    };
    struct vbuf w;
    vbuf_init(&w);
    uint64_t t = 9, raw = (uint64_t)-2;
    cr_assert(vbuf_put_u64(&w, t) == 0 && vbuf_put_u8(&w, PV_INT) == 0 &&
              vbuf_put_u64(&w, raw) == 0 && vbuf_put_u8(&w, 0) == 0);
    uint8_t zero[16] = {0}, sid[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cr_assert(vbuf_put(&w, zero, 16) == 0 && vbuf_put_u8(&w, 1) == 0 && vbuf_put(&w, sid, 8) == 0);
    struct vbuf kv;
    vbuf_init(&kv);
    cr_assert(val_put_key(&kv, "k", 1) == 0 && val_put_str(&kv, "v", 1) == 0);
    cr_assert(vbuf_put_u32(&w, 1) == 0 && vbuf_put_u32(&w, (uint32_t)kv.len) == 0 &&
              vbuf_put(&w, kv.p, kv.len) == 0);
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        char m[1024];
        uint8_t b[256];
        size_t n;
        /* two exemplars, so that the second's attributes move past the first's */
        snprintf(m, sizeof m, "{'gauge':{'dataPoints':[{'asInt':'1','exemplars':[%s,%s]}]}}",
                 forms[i], forms[(i + 1) % 5]);
        uint32_t cnt;
        row_list_blob(SIG_METRICS, metric_req(m), b, sizeof b, &n, &cnt);
        cr_assert_eq(cnt, 2);
        cr_assert_eq(n, 2 * w.len, "form %zu: %zu bytes, want %zu", i, n, 2 * w.len);
        cr_assert(memcmp(b, w.p, w.len) == 0 && memcmp(b + w.len, w.p, w.len) == 0, "form %zu", i);
    }
    vbuf_fini(&kv);
    vbuf_fini(&w);
    refused(SIG_METRICS,
            metric_req("{'gauge':{'dataPoints':[{'exemplars':[{'filteredAttributes':[{'key':'k',"
                       "'value':{'intValue':'x'}}],'asInt':tru}]}]}}"),
            "exemplars.asInt");
    refused(SIG_METRICS,
            metric_req("{'gauge':{'dataPoints':[{'exemplars':[{'filteredAttributes':[{'key':'k',"
                       "'value':{'intValue':'x'}}],'asInt':'1'}]}]}}"),
            "intValue: not a 64-bit signed integer");
    refused(SIG_METRICS,
            metric_req("{'gauge':{'dataPoints':[{'exemplars':[{'filteredAttributes':[{'key':'k',"
                       "'value':{'intValue':'1'}},],'asInt':'1'}]}]}}"),
            "at offset");
}

/*
 * A ValueAtQuantile's text through "value": compared whole with the one the
 * last summary point had at its place: texts of 31, 32 (kept) and 33 bytes
 * (not kept), the {"value": form, each followed by another value; then
 * the kept text with its '{' replaced, and with a byte changed inside:
 * read as the general loop reads them (refused, or exact).
 */
Test(jsondec_fast, quantile_prefixes_compared_whole)
{
    static const char *const qs[] = {"0.123456789", "0.12345678", "0.1234567891", "0.5", ""};
    char m[4096];
    for (int a = 0; a < 5; a++) {
        size_t len = (size_t)snprintf(m, sizeof m, "{'summary':{'dataPoints':[");
        double want[8][2];
        for (int p = 0; p < 8; p++) {
            const char *t = qs[p % 2 ? a : (a + p) % 5];
            want[p][0] = *t ? strtod(t, NULL) : 0;
            want[p][1] = p + 0.25;
            len += *t ? (size_t)snprintf(m + len, sizeof m - len,
                                         "%s{'quantileValues':[{'value':1},{'quantile':%s,'value':"
                                         "%d.25}]}",
                                         p ? "," : "", t, p)
                      : (size_t)snprintf(m + len, sizeof m - len,
                                         "%s{'quantileValues':[{'value':1},{'value':%d.25}]}",
                                         p ? "," : "", p);
        }
        snprintf(m + len, sizeof m - len, "]}}");
        struct dec d;
        char *r = details_as_spaced(&d, m);
        for (int p = 0; p < 8; p++) {
            const uint8_t *b = batch_blob(d.b, d.b->points[p].detail);
            double qv, vv;
            memcpy(&qv, b + 4 + 16, 8);
            memcpy(&vv, b + 12 + 16, 8);
            cr_assert(qv == want[p][0] && vv == want[p][1], "%d %d: %g %g", a, p, qv, vv);
        }
        done(&d);
        free(r);
    }
    const char *kept = "{'summary':{'dataPoints':[{'quantileValues':[{'value':1},{'quantile':0.5,"
                       "'value':2}]},";
    char t[512];
    snprintf(t, sizeof t, "%s{'quantileValues':[{'value':1},['quantile':0.5,'value':2}]}]}}", kept);
    refused(SIG_METRICS, metric_req(t), "at offset");
    snprintf(t, sizeof t, "%s{'quantileValues':[{'value':1},{'quantile':0.5,'valuf':2}]}]}}", kept);
    struct dec d;
    char *r = metric_body(t);
    run(&d, SIG_METRICS, r);
    cr_assert_eq(d.rc, 0, "%s", d.err);
    double qv, vv;
    const uint8_t *b = batch_blob(d.b, d.b->points[1].detail);
    memcpy(&qv, b + 4 + 16, 8);
    memcpy(&vv, b + 12 + 16, 8);
    cr_assert(qv == 0.5 && vv == 0, "%g %g", qv, vv); /* an unknown member: no value */
    done(&d);
    free(r);
}

/*
 * Quoted counts of one and two digits in runs longer than one call of the
 * loop takes (32 counts, or fewer by its byte bound), alone, mixed, with a
 * longer count or a bad one anywhere: exact values and the spaced form's.
 */
Test(jsondec_fast, quoted_count_runs_across_calls_exact)
{
    char list[8192], m[9000];
    uint64_t want[600];
    for (int c = 0; c < 120; c++) {
        int nv = 1 + (int)(rnd() % 300), shape = c % 4, odd = c % 5 == 0 ? (int)(rnd() % nv) : -1;
        size_t len = 0;
        list[len++] = '[';
        for (int i = 0; i < nv; i++) {
            int digits = shape == 0   ? 1
                         : shape == 1 ? 2
                         : shape == 2 ? 1 + i % 2
                                      : 1 + (int)(rnd() % 3);
            uint64_t v = digits == 1
                             ? rnd() % 10
                             : jdnum_pow10[digits - 1] + rnd() % (9 * jdnum_pow10[digits - 1]);
            if (i == odd) {
                v = 1234567;
            }
            want[i] = v;
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s'%llu'", i ? "," : "",
                                    (unsigned long long)v);
        }
        list[len++] = ']';
        list[len] = '\0';
        snprintf(m, sizeof(m),
                 "{'exponentialHistogram':{'dataPoints':[{'count':'1','positive':{'offset':3,"
                 "'bucketCounts':%s}}]}}",
                 list);
        struct dec d;
        char *r = details_as_spaced(&d, m);
        const uint8_t *p = batch_blob(d.b, d.b->points[0].detail) + 4 + 8 + 8 + 4;
        uint32_t n;
        memcpy(&n, p, 4);
        cr_assert_eq(n, (uint32_t)nv);
        for (int i = 0; i < nv; i++) {
            uint64_t v;
            memcpy(&v, p + 4 + 8 * (size_t)i, 8);
            cr_assert_eq(v, want[i], "list %d count %d: %llu", c, i, (unsigned long long)v);
        }
        done(&d);
        free(r);
    }
    /* a run of 40 one-digit counts starting at every heap offset near the
     * end of the heap's first 4096 bytes (a long attribute before it): the
     * loop writes only the room it asked for (ASan) */
    for (int l = 3700; l < 3900; l++) {
        char *v = malloc((size_t)l + 1), *mm = malloc((size_t)l + 512);
        cr_assert(v != NULL && mm != NULL);
        memset(v, 'a', (size_t)l);
        v[l] = '\0';
        sprintf(mm,
                "{'exponentialHistogram':{'dataPoints':[{'attributes':[{'key':'k','value':{'str"
                "ingValue':'%s'}}],'positive':{'offset':0,'bucketCounts':['1','2','3','4','5','6"
                "','7','8','9','0','1','2','3','4','5','6','7','8','9','0','1','2','3','4','5','6"
                "','7','8','9','0','1','2','3','4','5','6','7','8','9','0']}}]}}",
                v);
        char *r = metric_body(mm);
        struct dec d;
        run(&d, SIG_METRICS, r);
        cr_assert_eq(d.rc, 0, "%s", d.err);
        const uint8_t *p = batch_blob(d.b, d.b->points[0].detail) + 4 + 8 + 8 + 4;
        for (int i = 0; i < 40; i++) {
            uint64_t c;
            memcpy(&c, p + 4 + 8 * (size_t)i, 8);
            cr_assert_eq(c, (uint64_t)((i + 1) % 10));
        }
        done(&d);
        free(r);
        free(mm);
        free(v);
    }
}

/* ---- round 11: the readers of point's switch take the cursor as it is ---- */

/* |m| (single-quoted) with blank text |b| after every ':' outside strings (owned). */
static char *blank_after_colons(const char *m, const char *b)
{
    char *t = malloc(strlen(m) * (strlen(b) + 1) + 1), *d = t;
    bool in = false;
    cr_assert(t != NULL);
    for (const char *c = m; *c; c++) {
        *d++ = *c;
        if (*c == '\'') {
            in = !in;
        } else if (!in && *c == ':') {
            d += sprintf(d, "%s", b);
        }
    }
    *d = '\0';
    return t;
}

/*
 * Points of every kind, three of each so that the later ones are read by
 * the learned compares, with blanks (of each kind, one or several) after
 * every ':' and nulls after them: every field as the compact form's. The
 * readers skip no blank of their own now (take_null did).
 */
Test(jsondec_fast, point_values_after_blanks_read_as_compact)
{
    static const char *const pt[] = {
        "{'attributes':[{'key':'a','value':{'stringValue':'x'}}],'startTimeUnixNano':"
        "'1767225540000000000','timeUnixNano':'1767225540123456789','asDouble':1.5,'flags':1}",
        "{'startTimeUnixNano':'1767225540000000000','timeUnixNano':'1767225540123456790',"
        "'asInt':'-7','exemplars':[]}",
        "{'startTimeUnixNano':'1','timeUnixNano':'1767225540123456791','count':'3','sum':2.25,"
        "'bucketCounts':['1','2'],'explicitBounds':[1.5],'min':0.5,'max':9}",
        "{'startTimeUnixNano':'1','timeUnixNano':'2','count':'30','sum':1.5,'scale':2,"
        "'zeroCount':'4','zeroThreshold':0.001,'positive':{'offset':1,'bucketCounts':['5']},"
        "'min':0.5,'max':9}",
        "{'startTimeUnixNano':'1','timeUnixNano':'2','count':'3','sum':1.5,"
        "'quantileValues':[{'quantile':0.5,'value':1.25}]}",
        "{'startTimeUnixNano':null,'timeUnixNano':null,'asDouble':null,'flags':null}",
    };
    static const char *const kinds[] = {"gauge",   "sum",  "histogram", "exponentialHistogram",
                                        "summary", "gauge"};
    static const char *const blanks[] = {" ", "\n", "\t", "\r", " \n\t "};
    char m[8192];
    size_t len = 0;
    for (int k = 0; k < 6; k++) {
        len += (size_t)snprintf(m + len, sizeof m - len, "%s{'%s':{'dataPoints':[%s,%s,%s]}}",
                                k ? "," : "", kinds[k], pt[k], pt[k], pt[k]);
    }
    cr_assert(len < sizeof m - 1);
    struct dec compact, blank;
    char *r = metric_req(m);
    ok(&compact, SIG_METRICS, r);
    cr_assert_eq(compact.b->n_rows, 18);
    for (size_t b = 0; b < sizeof(blanks) / sizeof(blanks[0]); b++) {
        char *mb = blank_after_colons(m, blanks[b]), *rb = metric_req(mb);
        ok(&blank, SIG_METRICS, rb);
        same_batch(compact.b, blank.b);
        same_point_scalars(compact.b, blank.b);
        done(&blank);
        free(rb);
        free(mb);
    }
    done(&compact);
    free(r);
}

/* ---- round 11: the line path (members in metrics.proto's order) ---- */

/* Each kind's members as metrics.proto declares them (pm_pool indices),
 * the order point_line tries them in. */
static const int pl_order[6][15] = {
    [1] = {0, 1, 2, 4, 5, 6, 3, -1},
    [2] = {0, 1, 2, 4, 5, 6, 3, -1},
    [3] = {0, 1, 2, 7, 8, 11, 12, 6, 3, 9, 10, -1},
    [4] = {0, 1, 2, 7, 8, 13, 14, 15, 16, 3, 6, 9, 10, 17, -1},
    [5] = {0, 1, 2, 7, 8, 18, 3, -1},
};

/*
 * 400 bodies of one kind's points each, 1-10 points, their members in
 * metrics.proto's order with any of them left out; at a random point (or
 * none) one thing the line path does not read: a null value, a blank
 * before a value, an unknown member, two members swapped, one repeated, a
 * snake_case name. That point is read again by the general loop, as are
 * the kind's later points of the body: every field as the spaced form's
 * (which the line path never reads).
 */
Test(jsondec_fast, point_line_path_and_its_fallback_read_as_the_general_path)
{
    static const char *const kinds[] = {
        "", "gauge", "sum", "histogram", "exponentialHistogram", "summary"};
    static const char *const snake[] = {"start_time_unix_nano", "time_unix_nano"};
    char *m = malloc(1u << 16);
    cr_assert(m != NULL);
    rng_state = 0x61c8864680b583ebull;
    for (int body = 0; body < 400; body++) {
        int k = 1 + (int)(rnd() % 5), np = 1 + (int)(rnd() % 10);
        int odd_at = (int)(rnd() % (unsigned)(np + 2)); /* np, np + 1: none */
        size_t len = (size_t)snprintf(m, 1u << 16, "{'name':'m','%s':{'dataPoints':[", kinds[k]);
        for (int p = 0; p < np; p++) {
            int cur[20], n = 0;
            for (int i = 0; pl_order[k][i] >= 0; i++) {
                if (rnd() % 4 != 0) {
                    cur[n++] = pl_order[k][i];
                }
            }
            unsigned odd = p == odd_at ? (unsigned)(rnd() % 6) : 6;
            int at = n ? (int)(rnd() % (unsigned)n) : 0;
            if (odd == 2) { /* an unknown member */
                memmove(cur + at + 1, cur + at, sizeof(int) * (size_t)(n - at));
                cur[at] = PM_N - 1;
                n++;
            } else if (odd == 3 && n > 1) { /* two swapped */
                int b = (at + 1) % n, t = cur[at];
                cur[at] = cur[b];
                cur[b] = t;
            } else if (odd == 4 && n > 0) { /* one repeated */
                memmove(cur + at + 1, cur + at, sizeof(int) * (size_t)(n - at));
                n++;
            }
            len += (size_t)snprintf(m + len, (1u << 16) - len, "%s{", p ? "," : "");
            for (int i = 0; i < n; i++) {
                const char *name = pm_pool[cur[i]].name;
                char v[96];
                snprintf(v, sizeof v, pm_pool[cur[i]].val, (unsigned)(rnd() % 100));
                if (odd == 5 && i == at && cur[i] >= 1 && cur[i] <= 2) {
                    name = snake[cur[i] - 1];
                }
                len += (size_t)snprintf(m + len, (1u << 16) - len, "%s'%s':%s%s", i ? "," : "",
                                        name, odd == 1 && i == at ? " " : "",
                                        odd == 0 && i == at ? "null" : v);
            }
            len += (size_t)snprintf(m + len, (1u << 16) - len, "}");
        }
        snprintf(m + len, (1u << 16) - len, "]}}");
        points_as_spaced(m);
    }
    free(m);
}

/*
 * Exact attributes when the line path gives a point up after reading its
 * attributes: a point whose first KeyValue is the one before it had (so
 * copied, 64 bytes to the heap's end) and whose second is new, then an
 * unknown member. Read again, the first one's copy lands where the line
 * path had put the second; that second must be read again too, not
 * copied from there (the heap's bytes there are the first one's copy's).
 */
Test(jsondec_fast, point_given_up_by_the_line_path_reads_its_attributes_again)
{
    static const char *const route[] = {"/a/route/long/enough/to/be/copied", "/api/v1/products/*",
                                        "/api/v1/orders"};
    char m[4096];
    size_t len = (size_t)snprintf(m, sizeof m, "{'name':'m','gauge':{'dataPoints':[");
    for (int p = 0; p < 3; p++) {
        len += (size_t)snprintf(m + len, sizeof m - len,
                                "%s{'attributes':[{'key':'http.request.method','value':{"
                                "'stringValue':'GET'}},{'key':'http.route','value':{"
                                "'stringValue':'%s'}}],'asDouble':%d.5%s}",
                                p ? "," : "", route[p], p, p == 1 ? ",'later':1" : "");
    }
    snprintf(m + len, sizeof m - len, "]}}");
    char *r = metric_req(m);
    struct dec d;
    ok(&d, SIG_METRICS, r);
    cr_assert_eq(d.b->n_rows, 3);
    for (int p = 0; p < 3; p++) {
        struct vbuf w;
        vbuf_init(&w);
        cr_assert(val_put_key(&w, "http.request.method", 19) == 0 &&
                  val_put_str(&w, "GET", 3) == 0 && val_put_key(&w, "http.route", 10) == 0 &&
                  val_put_str(&w, route[p], strlen(route[p])) == 0);
        struct attrs at = d.b->points[p].attrs;
        cr_assert_eq(at.count, 2, "point %d", p);
        cr_assert_eq(at.blob.len, w.len, "point %d: %u bytes, want %zu", p, at.blob.len, w.len);
        cr_assert(memcmp(batch_blob(d.b, at.blob), w.p, w.len) == 0, "point %d", p);
        cr_assert_eq(d.b->points[p].value.d, p + 0.5);
        vbuf_fini(&w);
    }
    done(&d);
    free(r);
    points_as_spaced(m);
}
