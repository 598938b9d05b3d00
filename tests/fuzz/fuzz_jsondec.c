/*
 * fuzz_jsondec.c - libFuzzer target for the OTLP/JSON decoder.
 *
 * Every input is decoded as each of the three Export requests into one reused
 * batch and arena. A refusal must be -EPROTO with a reason (or -ENOMEM at the
 * arena cap) and leave the batch empty. An acceptance must produce blobs that
 * readers accept (attribute lists, bodies, events, links, exemplars, metric
 * details, all inside the heap), and jansson must accept the same bytes as
 * JSON: the decoder is stricter than a JSON parser, never laxer, except for
 * integers beyond 64 bits and reals beyond double range that jansson refuses
 * (we accept the former where OTLP has uint64, and skip both inside unknown
 * members).
 *
 * The number readers are checked against strtod on the same bytes: every
 * number jdnum_f64_fast / jdnum_f64 accept where a value may start (after
 * ':', '[' or ','), and jdnum_dec_to_f64 on the input's first bytes taken
 * as a mantissa and an exponent.
 *
 * Seeds: tests/fuzz/corpus/jsondec/ (the captured http-json vectors and a few
 * hand-made requests covering every metric kind and the quirks).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proto/jsondec.h"
#include "proto/jsondec_num.h"
#include "storage/arena.h"
#include "storage/batch.h"
#include "storage/val.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, enum signal s)
{
    fprintf(stderr, "fuzz_jsondec: %s (%s)\n", what, signal_name(s));
    abort();
}

static bool in_heap(const struct batch *b, struct blob x)
{
    return (size_t)x.off + x.len <= b->heap.len;
}

static void check_attrs(const struct batch *b, struct attrs a, enum signal s)
{
    if (!in_heap(b, a.blob) ||
        (a.blob.len != 0 && val_check_attrs(batch_blob(b, a.blob), a.blob.len, a.count) != 0) ||
        (a.blob.len == 0 && a.count != 0)) {
        die("malformed attribute blob", s);
    }
}

/* u32 count, u32 nbytes, attrs: inside a blob being walked. */
static void walk_attrs(struct val_rd *r, enum signal s)
{
    uint32_t count, nbytes;
    const void *p;
    if (val_rd_u32(r, &count) < 0 || val_rd_u32(r, &nbytes) < 0 ||
        val_rd_bytes(r, &p, nbytes) < 0 ||
        (nbytes != 0 && val_check_attrs(p, nbytes, count) != 0) || (nbytes == 0 && count != 0)) {
        die("malformed nested attributes", s);
    }
}

static struct val_rd rd(const struct batch *b, struct blob x, enum signal s)
{
    if (!in_heap(b, x)) {
        die("blob outside the heap", s);
    }
    struct val_rd r = {b->heap.p + x.off, b->heap.p + x.off + x.len};
    return r;
}

static void check_logs(const struct batch *b)
{
    static uint8_t tmp[1 << 20];
    for (uint32_t i = 0; i < b->n_rows; i++) {
        const struct log_row *l = &b->logs[i];
        check_attrs(b, l->attrs, SIG_LOGS);
        if (l->body_type == VAL_STR || l->body_type == VAL_EMPTY) {
            continue;
        }
        /* the body as the value of a one-entry attribute list with key "" */
        struct val_rd r = rd(b, l->body_val, SIG_LOGS);
        struct val v;
        if (val_rd_value(&r, &v) < 0 || r.p != r.end || v.type != l->body_type) {
            die("malformed body", SIG_LOGS);
        }
        if (l->body_val.len + 1 <= sizeof(tmp)) {
            tmp[0] = 0;
            memcpy(tmp + 1, batch_blob(b, l->body_val), l->body_val.len);
            if (val_check_attrs(tmp, l->body_val.len + 1, 1) != 0) {
                die("body nesting", SIG_LOGS);
            }
        }
    }
}

static void check_spans(const struct batch *b)
{
    for (uint32_t i = 0; i < b->n_rows; i++) {
        const struct span_row *sp = &b->spans[i];
        check_attrs(b, sp->attrs, SIG_TRACES);
        struct val_rd r = rd(b, sp->events, SIG_TRACES);
        for (uint32_t k = 0; k < sp->n_events; k++) {
            uint64_t t;
            const char *name;
            size_t n;
            uint32_t dropped;
            if (val_rd_u64(&r, &t) < 0 || val_rd_str(&r, &name, &n) < 0 ||
                val_rd_u32(&r, &dropped) < 0) {
                die("malformed event", SIG_TRACES);
            }
            walk_attrs(&r, SIG_TRACES);
        }
        if (r.p != r.end) {
            die("events blob has trailing bytes", SIG_TRACES);
        }
        r = rd(b, sp->links, SIG_TRACES);
        for (uint32_t k = 0; k < sp->n_links; k++) {
            const void *ids;
            const char *ts;
            size_t n;
            uint32_t flags, dropped;
            if (val_rd_bytes(&r, &ids, 24) < 0 || val_rd_str(&r, &ts, &n) < 0 ||
                val_rd_u32(&r, &flags) < 0 || val_rd_u32(&r, &dropped) < 0) {
                die("malformed link", SIG_TRACES);
            }
            walk_attrs(&r, SIG_TRACES);
        }
        if (r.p != r.end) {
            die("links blob has trailing bytes", SIG_TRACES);
        }
    }
}

static void skip_u64s(struct val_rd *r, size_t width)
{
    uint32_t n;
    const void *p;
    if (val_rd_u32(r, &n) < 0 || val_rd_bytes(r, &p, (size_t)n * width) < 0) {
        die("malformed detail list", SIG_METRICS);
    }
}

static void check_points(const struct batch *b)
{
    for (uint32_t i = 0; i < b->n_metrics; i++) {
        check_attrs(b, b->metrics[i].metadata, SIG_METRICS);
    }
    for (uint32_t i = 0; i < b->n_rows; i++) {
        const struct point_row *p = &b->points[i];
        if (p->metric >= b->n_metrics) {
            die("point names a missing metric", SIG_METRICS);
        }
        check_attrs(b, p->attrs, SIG_METRICS);
        struct val_rd r = rd(b, p->detail, SIG_METRICS);
        uint32_t u;
        uint64_t z;
        switch (b->metrics[p->metric].kind) {
        case MK_HISTOGRAM:
            skip_u64s(&r, 8);
            skip_u64s(&r, 8);
            break;
        case MK_EXP_HISTOGRAM:
            if (val_rd_u32(&r, &u) < 0 || val_rd_u64(&r, &z) < 0 || val_rd_u64(&r, &z) < 0 ||
                val_rd_u32(&r, &u) < 0) {
                die("malformed exponential histogram", SIG_METRICS);
            }
            skip_u64s(&r, 8);
            if (val_rd_u32(&r, &u) < 0) {
                die("malformed exponential histogram", SIG_METRICS);
            }
            skip_u64s(&r, 8);
            break;
        case MK_SUMMARY:
            skip_u64s(&r, 16);
            if (!p->has_sum) {
                die("a summary point without a sum", SIG_METRICS);
            }
            break;
        default:
            break;
        }
        if (r.p != r.end) {
            die("detail blob has trailing bytes", SIG_METRICS);
        }
        r = rd(b, p->exemplars, SIG_METRICS);
        for (uint32_t k = 0; k < p->n_exemplars; k++) {
            const void *fixed;
            if (val_rd_bytes(&r, &fixed, 8 + 1 + 8 + 1 + 16 + 1 + 8) < 0) {
                die("malformed exemplar", SIG_METRICS);
            }
            walk_attrs(&r, SIG_METRICS);
        }
        if (r.p != r.end) {
            die("exemplars blob has trailing bytes", SIG_METRICS);
        }
    }
}

static void check_batch(const struct batch *b, enum signal s)
{
    for (uint32_t i = 0; i < b->n_resources; i++) {
        check_attrs(b, b->resources[i].attrs, s);
    }
    for (uint32_t i = 0; i < b->n_scopes; i++) {
        check_attrs(b, b->scopes[i].attrs, s);
        if (b->scopes[i].resource >= b->n_resources) {
            die("scope names a missing resource", s);
        }
    }
    if (s == SIG_LOGS) {
        check_logs(b);
    } else if (s == SIG_TRACES) {
        check_spans(b);
    } else {
        check_points(b);
    }
    for (uint32_t i = 0; i < b->n_rows; i++) {
        uint32_t scope = s == SIG_LOGS     ? b->logs[i].scope
                         : s == SIG_TRACES ? b->spans[i].scope
                                           : b->metrics[b->points[i].metric].scope;
        if (scope >= b->n_scopes) {
            die("row names a missing scope", s);
        }
    }
}

/* jansson must agree the body is JSON (see the file comment for the exceptions). */
static void check_json(const uint8_t *data, size_t size)
{
    json_error_t e;
    json_t *j = json_loadb((const char *)data, size, JSON_ALLOW_NUL, &e);
    if (j != NULL) {
        json_decref(j);
        return;
    }
    if (strstr(e.text, "too big") == NULL && strstr(e.text, "real number overflow") == NULL &&
        strstr(e.text, "maximum parsing depth") == NULL) {
        fprintf(stderr, "fuzz_jsondec: accepted what jansson refuses: %s at %d\n", e.text,
                e.position);
        abort();
    }
}

static void same_double(double got, const char *text, size_t n)
{
    char buf[128];
    if (n >= sizeof(buf)) {
        return;
    }
    memcpy(buf, text, n);
    buf[n] = '\0';
    double want = strtod(buf, NULL);
    if (memcmp(&got, &want, 8) != 0) {
        fprintf(stderr, "fuzz_jsondec: %s read as %.17g, strtod %.17g\n", buf, got, want);
        abort();
    }
}

static void check_numbers(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    if (size >= 9) {
        uint64_t m;
        memcpy(&m, data, 8);
        int e = (int)(data[8] % 39) - 19;
        char buf[48];
        snprintf(buf, sizeof(buf), "%llue%d", (unsigned long long)m, e);
        double got = jdnum_dec_to_f64(m, e);
        same_double(got, buf, strlen(buf));
    }
    int tried = 0;
    for (size_t i = 0; i + 1 < size && tried < 256; i++) {
        if (s[i] != ':' && s[i] != '[' && s[i] != ',') {
            continue;
        }
        tried++;
        double d;
        size_t used;
        if (jdnum_f64_fast(s + i + 1, size - i - 1, &d, &used)) {
            same_double(d, s + i + 1, used);
        }
        if (jdnum_f64(s + i + 1, size - i - 1, &d, &used)) {
            same_double(d, s + i + 1, used);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct batch *b;
    static arena *a;
    char err[256];
    bool accepted = false;
    if (b == NULL) {
        b = batch_new(SIG_LOGS);
        a = arena_new(0);
        if (b == NULL || a == NULL) {
            abort();
        }
        arena_set_limit(a, 256u << 20);
    }
    for (int s = SIG_LOGS; s <= SIG_METRICS; s++) {
        batch_reset(b, (enum signal)s);
        arena_reset(a);
        err[0] = '\0';
        int rc = jsondec_decode((enum signal)s, (const char *)data, size, a, b, err, sizeof(err));
        if (rc == 0) {
            check_batch(b, (enum signal)s);
            accepted = true;
        } else if (rc == -EPROTO || rc == -ENOMEM) {
            if (err[0] == '\0') {
                die("refused without a reason", (enum signal)s);
            }
            if (b->n_rows != 0 || b->n_resources != 0 || b->heap.len != 0) {
                die("a refusal left rows behind", (enum signal)s);
            }
        } else {
            die("unexpected return code", (enum signal)s);
        }
    }
    if (accepted) {
        check_json(data, size);
    }
    check_numbers(data, size);
    return 0;
}
