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
    cr_assert_eq(d.rc, -EPROTO, "accepted: %s", body);
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
