/*
 * manifest.c - checks decoded batches against test-vector manifests (see
 * manifest.h for the canonical form).
 *
 * Record keys compared when present (OTLP/JSON camelCase names):
 *   logs     timeUnixNano observedTimeUnixNano severityNumber severityText body
 *            attributes droppedAttributesCount flags traceId spanId eventName scope
 *   traces   traceId spanId parentSpanId traceState flags name kind
 *            startTimeUnixNano endTimeUnixNano attributes droppedAttributesCount
 *            events[] {name timeUnixNano attributes droppedAttributesCount}
 *            droppedEventsCount links[] {traceId spanId traceState flags attributes
 *            droppedAttributesCount} droppedLinksCount status {code message} scope
 *   metrics  name description unit type ("gauge" "sum" "histogram"
 *            "exponential_histogram" "summary" "none") temporality monotonic
 *            (null = false) metadata scope dataPoints[]:
 *            startTimeUnixNano timeUnixNano attributes flags value ({"int"} /
 *            {"double"} / {} = none) count sum min max (null = absent)
 *            bucketCounts explicitBounds scale zeroCount zeroThreshold
 *            positive/negative {offset bucketCounts} quantileValues[] {quantile
 *            value} exemplars[] {timeUnixNano value traceId spanId
 *            filteredAttributes}
 * Events, links, exemplars, buckets and quantiles are compared in order;
 * records, metrics and points are matched by content.
 */
#include "tests/util/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <libdeflate.h>

#include "lib/hex.h"

/* ---- differences ---- */

struct diff {
    int n;
    size_t len;
    char buf[2048];
};

__attribute__((format(printf, 2, 3))) static void diff_add(struct diff *d, const char *fmt, ...)
{
    d->n++;
    if (d->len + 8 >= sizeof(d->buf)) {
        return;
    }
    if (d->len != 0) {
        d->len += (size_t)snprintf(d->buf + d->len, sizeof(d->buf) - d->len, "; ");
    }
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(d->buf + d->len, sizeof(d->buf) - d->len, fmt, ap);
    va_end(ap);
    if (k > 0) {
        d->len += (size_t)k;
    }
    if (d->len >= sizeof(d->buf)) {
        d->len = sizeof(d->buf) - 1;
    }
}

__attribute__((format(printf, 3, 4))) static void why_set(char *why, size_t wl, const char *fmt,
                                                          ...)
{
    if (why == NULL || wl == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, wl, fmt, ap);
    va_end(ap);
}

/* Prefixes |why| with |pfx| (a path component). */
static void why_prefix(char *why, size_t wl, const char *pfx)
{
    if (why == NULL || wl == 0) {
        return;
    }
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s%s", pfx, why);
    snprintf(why, wl, "%s", tmp);
}

/* Compact JSON text of |j| (or "<none>"), at most |cap|-1 chars. */
static const char *dump(const json_t *j, char *buf, size_t cap)
{
    if (j == NULL) {
        snprintf(buf, cap, "<none>");
        return buf;
    }
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s == NULL) {
        snprintf(buf, cap, "<unprintable>");
        return buf;
    }
    snprintf(buf, cap, "%s", s);
    if (strlen(s) >= cap && cap > 4) {
        memcpy(buf + cap - 4, "...", 4);
    }
    free(s);
    return buf;
}

/* Canonical hex text against bytes; case-insensitive. */
static bool hex_eq(const char *h, size_t hn, const uint8_t *p, size_t n)
{
    if (hn != 2 * n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        int hi = hex_digit((unsigned char)h[2 * i]), lo = hex_digit((unsigned char)h[2 * i + 1]);
        if (hi < 0 || lo < 0 || (uint8_t)(hi << 4 | lo) != p[i]) {
            return false;
        }
    }
    return true;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

/* ---- canonical scalars ---- */

static bool canon_u64(const json_t *j, uint64_t *out)
{
    if (json_is_integer(j)) {
        if (json_integer_value(j) < 0) {
            return false;
        }
        *out = (uint64_t)json_integer_value(j);
        return true;
    }
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        char *end;
        if (*s == '\0' || *s == '-') {
            return false;
        }
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0') {
            return false;
        }
        *out = v;
        return true;
    }
    return false;
}

static bool canon_i64(const json_t *j, int64_t *out)
{
    if (json_is_integer(j)) {
        *out = json_integer_value(j);
        return true;
    }
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        char *end;
        if (*s == '\0') {
            return false;
        }
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno != 0 || *end != '\0') {
            return false;
        }
        *out = v;
        return true;
    }
    return false;
}

static bool canon_f64(const json_t *j, double *out)
{
    if (json_is_number(j)) {
        *out = json_number_value(j);
        return true;
    }
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        if (strcmp(s, "NaN") == 0) {
            *out = NAN;
        } else if (strcmp(s, "Infinity") == 0) {
            *out = INFINITY;
        } else if (strcmp(s, "-Infinity") == 0) {
            *out = -INFINITY;
        } else {
            char *end;
            *out = strtod(s, &end);
            return *s != '\0' && *end == '\0';
        }
        return true;
    }
    return false;
}

static bool f64_same(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static bool mstr_eq_json(const json_t *j, struct mstr m)
{
    if (!json_is_string(j)) {
        return false;
    }
    size_t n = json_string_length(j);
    return n == m.len && (n == 0 || memcmp(json_string_value(j), m.p, n) == 0);
}

/* ---- decoded values to canonical JSON ---- */

static json_t *val_to_json(const struct val *v, int depth);

static json_t *attrs_to_json(struct val_rd r, uint32_t count, int depth)
{
    json_t *o = json_object();
    for (uint32_t i = 0; i < count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) < 0) {
            json_decref(o);
            return NULL;
        }
        json_t *jv = val_to_json(&v, depth + 1);
        if (jv == NULL) {
            json_decref(o);
            return NULL;
        }
        json_object_setn_new_nocheck(o, k, kn, jv);
    }
    return o;
}

static json_t *val_to_json(const struct val *v, int depth)
{
    char buf[64];
    if (depth > VAL_MAX_DEPTH + 8) {
        return NULL;
    }
    switch (v->type) {
    case VAL_EMPTY:
        return json_object();
    case VAL_STR: {
        json_t *s = json_stringn(v->s, v->n);
        if (s == NULL) { /* invalid UTF-8: show the bytes */
            char *h = malloc(2 * v->n + 1);
            hex_encode(h, (const uint8_t *)v->s, v->n);
            json_t *o = json_pack("{s:s}", "string(hex, invalid UTF-8)", h);
            free(h);
            return o;
        }
        return json_pack("{s:o}", "string", s);
    }
    case VAL_INT:
        snprintf(buf, sizeof(buf), "%" PRId64, v->i);
        return json_pack("{s:s}", "int", buf);
    case VAL_DOUBLE:
        if (isnan(v->d)) {
            return json_pack("{s:s}", "double", "NaN");
        }
        if (isinf(v->d)) {
            return json_pack("{s:s}", "double", v->d > 0 ? "Infinity" : "-Infinity");
        }
        return json_pack("{s:f}", "double", v->d);
    case VAL_BOOL:
        return json_pack("{s:b}", "bool", v->b);
    case VAL_BYTES: {
        char *h = malloc(2 * v->n + 1);
        hex_encode(h, (const uint8_t *)v->s, v->n);
        json_t *o = json_pack("{s:s}", "bytes", h);
        free(h);
        return o;
    }
    case VAL_ARRAY: {
        json_t *a = json_array();
        struct val_rd r = v->inner;
        for (uint32_t i = 0; i < v->count; i++) {
            struct val m;
            json_t *jm;
            if (val_rd_value(&r, &m) < 0 || (jm = val_to_json(&m, depth + 1)) == NULL) {
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, jm);
        }
        return json_pack("{s:o}", "array", a);
    }
    case VAL_KVLIST: {
        json_t *o = attrs_to_json(v->inner, v->count, depth);
        return o ? json_pack("{s:o}", "kvlist", o) : NULL;
    }
    }
    return NULL;
}

json_t *manifest_val_to_json(const struct val *v)
{
    return val_to_json(v, 1);
}

json_t *manifest_attrs_to_json(const uint8_t *p, size_t n, uint32_t count)
{
    struct val_rd r = {p, p + n};
    return attrs_to_json(r, count, 0);
}

/* ---- value comparison ---- */

static bool attrs_eq(const json_t *c, struct val_rd r, uint32_t count, char *why, size_t wl,
                     int depth);

static const char *type_name(enum val_type t)
{
    static const char *names[] = {"empty",  "string", "bool",   "int",
                                  "double", "array",  "kvlist", "bytes"};
    return (unsigned)t < 8 ? names[t] : "?";
}

static bool any_eq(const json_t *c, const struct val *v, char *why, size_t wl, int depth)
{
    char e[256], g[256];
    if (depth > VAL_MAX_DEPTH + 8) {
        why_set(why, wl, "nesting too deep to compare");
        return false;
    }
    if (c == NULL || json_is_null(c) || (json_is_object(c) && json_object_size(c) == 0)) {
        if (v->type == VAL_EMPTY) {
            return true;
        }
        goto mismatch;
    }
    if (!json_is_object(c) || json_object_size(c) != 1) {
        why_set(why, wl, "manifest value %s is not canonical", dump(c, e, sizeof(e)));
        return false;
    }
    const char *k = json_object_iter_key(json_object_iter((json_t *)c));
    const json_t *x = json_object_iter_value(json_object_iter((json_t *)c));
    if (strcmp(k, "string") == 0) {
        if (v->type != VAL_STR || !json_is_string(x) || json_string_length(x) != v->n ||
            memcmp(json_string_value(x), v->s, v->n) != 0) {
            goto mismatch;
        }
        return true;
    }
    if (strcmp(k, "int") == 0) {
        int64_t i;
        if (!canon_i64(x, &i)) {
            why_set(why, wl, "manifest int %s unreadable", dump(x, e, sizeof(e)));
            return false;
        }
        if (v->type != VAL_INT || v->i != i) {
            goto mismatch;
        }
        return true;
    }
    if (strcmp(k, "double") == 0) {
        double d;
        if (!canon_f64(x, &d)) {
            why_set(why, wl, "manifest double %s unreadable", dump(x, e, sizeof(e)));
            return false;
        }
        if (v->type != VAL_DOUBLE || !f64_same(v->d, d)) {
            goto mismatch;
        }
        return true;
    }
    if (strcmp(k, "bool") == 0) {
        if (v->type != VAL_BOOL || !json_is_boolean(x) || json_is_true(x) != v->b) {
            goto mismatch;
        }
        return true;
    }
    if (strcmp(k, "bytes") == 0) {
        if (v->type != VAL_BYTES || !json_is_string(x) ||
            !hex_eq(json_string_value(x), json_string_length(x), (const uint8_t *)v->s, v->n)) {
            goto mismatch;
        }
        return true;
    }
    if (strcmp(k, "array") == 0) {
        if (v->type != VAL_ARRAY || !json_is_array(x) || json_array_size(x) != v->count) {
            goto mismatch;
        }
        struct val_rd r = v->inner;
        for (uint32_t i = 0; i < v->count; i++) {
            struct val m;
            if (val_rd_value(&r, &m) < 0) {
                why_set(why, wl, "[%u]: malformed encoding", i);
                return false;
            }
            if (!any_eq(json_array_get(x, i), &m, why, wl, depth + 1)) {
                char pfx[32];
                snprintf(pfx, sizeof(pfx), "[%u]", i);
                why_prefix(why, wl, pfx);
                return false;
            }
        }
        if (r.p != r.end) {
            why_set(why, wl, "array: %td trailing bytes", r.end - r.p);
            return false;
        }
        return true;
    }
    if (strcmp(k, "kvlist") == 0) {
        if (v->type != VAL_KVLIST) {
            goto mismatch;
        }
        return attrs_eq(x, v->inner, v->count, why, wl, depth + 1);
    }
    why_set(why, wl, "manifest value kind \"%s\" unknown", k);
    return false;

mismatch : {
    json_t *gj = val_to_json(v, depth);
    why_set(why, wl, "expected %s, got %s (%s)", dump(c, e, sizeof(e)), dump(gj, g, sizeof(g)),
            type_name(v->type));
    json_decref(gj);
    return false;
}
}

static bool attrs_eq(const json_t *c, struct val_rd r, uint32_t count, char *why, size_t wl,
                     int depth)
{
    if (c == NULL || json_is_null(c)) {
        if (count == 0) {
            return true;
        }
        why_set(why, wl, "%u entries, want none", count);
        return false;
    }
    if (!json_is_object(c)) {
        why_set(why, wl, "manifest attributes are not an object");
        return false;
    }
    if (json_object_size(c) != count) {
        char e[256], g[256];
        json_t *gj = attrs_to_json(r, count, depth);
        why_set(why, wl, "%u entries, want %zu: expected %s, got %s", count, json_object_size(c),
                dump(c, e, sizeof(e)), dump(gj, g, sizeof(g)));
        json_decref(gj);
        return false;
    }
    const char *key;
    const json_t *want;
    json_object_foreach((json_t *)c, key, want)
    {
        struct val_rd it = r;
        size_t keylen = strlen(key);
        bool found = false;
        for (uint32_t i = 0; i < count && !found; i++) {
            const char *k;
            size_t kn;
            struct val v;
            if (val_rd_kv(&it, &k, &kn, &v) < 0) {
                why_set(why, wl, "entry %u: malformed encoding", i);
                return false;
            }
            if (kn == keylen && memcmp(k, key, kn) == 0) {
                found = true;
                if (!any_eq(want, &v, why, wl, depth)) {
                    char pfx[160];
                    snprintf(pfx, sizeof(pfx), "[\"%.120s\"]: ", key);
                    why_prefix(why, wl, pfx);
                    return false;
                }
            }
        }
        if (!found) {
            why_set(why, wl, "key \"%s\" missing", key);
            return false;
        }
    }
    return true;
}

bool manifest_anyvalue_eq(const json_t *canon, const struct val *v, char *why, size_t whylen)
{
    return any_eq(canon, v, why, whylen, 1);
}

bool manifest_attrs_raw_eq(const json_t *canon, const uint8_t *p, size_t n, uint32_t count,
                           char *why, size_t whylen)
{
    struct val_rd r = {p, p + n};
    if (val_check_attrs(p, n, count) < 0) {
        why_set(why, whylen, "attribute blob malformed (%u entries, %zu bytes)", count, n);
        return false;
    }
    return attrs_eq(canon, r, count, why, whylen, 1);
}

bool manifest_attrs_eq(const json_t *canon, const struct batch *b, struct attrs a, char *why,
                       size_t whylen)
{
    if ((size_t)a.blob.off + a.blob.len > b->heap.len) {
        why_set(why, whylen, "attribute blob [%u,+%u) outside the heap (%zu bytes)", a.blob.off,
                a.blob.len, b->heap.len);
        return false;
    }
    const uint8_t *p = a.blob.len ? batch_blob(b, a.blob) : (const uint8_t *)"";
    return manifest_attrs_raw_eq(canon, p, a.blob.len, a.count, why, whylen);
}

/* ---- field comparators (skip when the manifest lacks the key) ---- */

static void cmp_u64(struct diff *d, const char *label, const json_t *j, uint64_t got)
{
    uint64_t want;
    if (j == NULL) {
        return;
    }
    if (json_is_null(j)) {
        want = 0;
    } else if (!canon_u64(j, &want)) {
        char e[128];
        diff_add(d, "%s: manifest value %s unreadable", label, dump(j, e, sizeof(e)));
        return;
    }
    if (want != got) {
        diff_add(d, "%s: expected %" PRIu64 ", got %" PRIu64, label, want, got);
    }
}

static void cmp_i64(struct diff *d, const char *label, const json_t *j, int64_t got)
{
    int64_t want;
    if (j == NULL) {
        return;
    }
    if (json_is_null(j)) {
        want = 0;
    } else if (!canon_i64(j, &want)) {
        char e[128];
        diff_add(d, "%s: manifest value %s unreadable", label, dump(j, e, sizeof(e)));
        return;
    }
    if (want != got) {
        diff_add(d, "%s: expected %" PRId64 ", got %" PRId64, label, want, got);
    }
}

static void cmp_f64(struct diff *d, const char *label, const json_t *j, double got)
{
    double want;
    if (j == NULL) {
        return;
    }
    if (!canon_f64(j, &want)) {
        char e[128];
        diff_add(d, "%s: manifest value %s unreadable", label, dump(j, e, sizeof(e)));
        return;
    }
    if (!f64_same(want, got)) {
        diff_add(d, "%s: expected %.17g, got %.17g", label, want, got);
    }
}

/* An optional double: null asserts absence. */
static void cmp_opt_f64(struct diff *d, const char *label, const json_t *j, bool has, double got)
{
    if (j == NULL) {
        return;
    }
    if (json_is_null(j)) {
        if (has) {
            diff_add(d, "%s: expected absent, got %.17g", label, got);
        }
        return;
    }
    if (!has) {
        diff_add(d, "%s: expected present, got absent", label);
        return;
    }
    cmp_f64(d, label, j, got);
}

static void cmp_bool(struct diff *d, const char *label, const json_t *j, bool got)
{
    if (j == NULL) {
        return;
    }
    bool want = json_is_true(j); /* null = false */
    if (!json_is_boolean(j) && !json_is_null(j)) {
        diff_add(d, "%s: manifest value is not a boolean", label);
    } else if (want != got) {
        diff_add(d, "%s: expected %s, got %s", label, want ? "true" : "false",
                 got ? "true" : "false");
    }
}

static void cmp_str(struct diff *d, const char *label, const json_t *j, struct mstr got)
{
    if (j == NULL) {
        return;
    }
    if (json_is_null(j)) {
        if (got.len != 0) {
            diff_add(d, "%s: expected empty, got \"%.*s\"", label, (int)got.len, got.p);
        }
        return;
    }
    if (!mstr_eq_json(j, got)) {
        diff_add(d, "%s: expected \"%.200s\", got \"%.*s\"", label,
                 json_is_string(j) ? json_string_value(j) : "<not a string>",
                 (int)(got.len > 200 ? 200 : got.len), got.len ? got.p : "");
    }
}

/* An id: "" asserts absence (!present, or all-zero bytes when there is no flag). */
static void cmp_id(struct diff *d, const char *label, const json_t *j, const uint8_t *got, size_t n,
                   bool present)
{
    char g[40];
    if (j == NULL) {
        return;
    }
    hex_encode(g, got, n);
    const char *w = json_is_string(j) ? json_string_value(j) : "";
    size_t wn = strlen(w);
    if (wn == 0) {
        if (present && !all_zero(got, n)) {
            diff_add(d, "%s: expected absent, got %s", label, g);
        }
        return;
    }
    if (!present) {
        diff_add(d, "%s: expected %s, got absent", label, w);
    } else if (!hex_eq(w, wn, got, n)) {
        diff_add(d, "%s: expected %s, got %s", label, w, g);
    }
}

static void cmp_attrs(struct diff *d, const char *label, const json_t *j, const struct batch *b,
                      struct attrs a)
{
    char why[1024];
    if (j == NULL) {
        return;
    }
    if (!manifest_attrs_eq(j, b, a, why, sizeof(why))) {
        diff_add(d, "%s%s%s", label, why[0] == '[' ? "" : ": ", why);
    }
}

/* Attributes inside a blob being read: u32 count, u32 nbytes, kv entries. */
static bool rd_attrs(struct val_rd *r, const uint8_t **p, uint32_t *count, uint32_t *nbytes)
{
    const void *q;
    if (val_rd_u32(r, count) < 0 || val_rd_u32(r, nbytes) < 0 || val_rd_bytes(r, &q, *nbytes) < 0) {
        return false;
    }
    *p = q;
    return true;
}

static void cmp_attrs_raw(struct diff *d, const char *label, const json_t *j, const uint8_t *p,
                          uint32_t nbytes, uint32_t count)
{
    char why[1024];
    if (j == NULL) {
        return;
    }
    if (!manifest_attrs_raw_eq(j, nbytes ? p : (const uint8_t *)"", nbytes, count, why,
                               sizeof(why))) {
        diff_add(d, "%s%s%s", label, why[0] == '[' ? "" : ": ", why);
    }
}

static bool blob_ok(const struct batch *b, struct blob x)
{
    return (size_t)x.off + x.len <= b->heap.len;
}

static struct val_rd blob_rd(const struct batch *b, struct blob x)
{
    struct val_rd r = {b->heap.p + x.off, b->heap.p + x.off + x.len};
    if (x.len == 0) {
        r.p = r.end = (const uint8_t *)"";
    }
    return r;
}

static const json_t *jget(const json_t *o, const char *k)
{
    return json_is_object(o) ? json_object_get(o, k) : NULL;
}

/* ---- resource and scope ---- */

static void cmp_scope(struct diff *d, const json_t *rec, const struct batch *b, uint32_t si)
{
    const json_t *sc = jget(rec, "scope");
    if (si >= b->n_scopes) {
        diff_add(d, "scope index %u out of range (%u scopes)", si, b->n_scopes);
        return;
    }
    const struct scope_row *s = &b->scopes[si];
    if (s->resource >= b->n_resources) {
        diff_add(d, "resource index %u out of range (%u resources)", s->resource, b->n_resources);
    }
    if (sc == NULL) {
        return;
    }
    cmp_str(d, "scope.name", jget(sc, "name"), s->name);
    cmp_str(d, "scope.version", jget(sc, "version"), s->version);
    cmp_attrs(d, "scope.attributes", jget(sc, "attributes"), b, s->attrs);
    cmp_u64(d, "scope.droppedAttributesCount", jget(sc, "droppedAttributesCount"),
            s->dropped_attrs);
    cmp_str(d, "scope.schemaUrl", jget(sc, "schemaUrl"), s->schema_url);
}

static void check_resources(const char *what, const json_t *doc, const struct batch *b)
{
    const json_t *res = jget(doc, "resource");
    if (res == NULL) {
        return;
    }
    if (b->n_rows != 0) {
        cr_expect(b->n_resources >= 1, "%s: rows but no resource", what);
    }
    for (uint32_t i = 0; i < b->n_resources; i++) {
        struct diff d = {0};
        cmp_attrs(&d, "attributes", jget(res, "attributes"), b, b->resources[i].attrs);
        cmp_str(&d, "schemaUrl", jget(res, "schemaUrl"), b->resources[i].schema_url);
        cmp_u64(&d, "droppedAttributesCount", jget(res, "droppedAttributesCount"),
                b->resources[i].dropped_attrs);
        cr_expect(d.n == 0, "%s: resource %u: %s", what, i, d.buf);
    }
}

/* ---- logs ---- */

static void cmp_log(struct diff *d, const json_t *rec, const struct batch *b, uint32_t row)
{
    const struct log_row *l = &b->logs[row];
    cmp_u64(d, "timeUnixNano", jget(rec, "timeUnixNano"), l->time_ns);
    cmp_u64(d, "observedTimeUnixNano", jget(rec, "observedTimeUnixNano"), l->observed_ns);
    cmp_i64(d, "severityNumber", jget(rec, "severityNumber"), l->severity_number);
    cmp_str(d, "severityText", jget(rec, "severityText"), l->severity_text);
    if (json_is_object(rec) && json_object_get(rec, "body") != NULL) {
        const json_t *body = json_object_get(rec, "body");
        struct val v = {.type = VAL_EMPTY};
        char why[1024];
        bool ok = true;
        if (l->body_type == VAL_STR) {
            v.type = VAL_STR;
            v.s = l->body_str.len ? l->body_str.p : "";
            v.n = l->body_str.len;
        } else if (l->body_type != VAL_EMPTY) {
            struct val_rd r = blob_rd(b, l->body_val);
            if (!blob_ok(b, l->body_val) || val_rd_value(&r, &v) < 0 || r.p != r.end ||
                v.type != l->body_type) {
                diff_add(d, "body: blob malformed or of another type than body_type %d",
                         (int)l->body_type);
                ok = false;
            }
        }
        if (ok && !manifest_anyvalue_eq(body, &v, why, sizeof(why))) {
            diff_add(d, "body%s%s", why[0] == '[' ? "" : ": ", why);
        }
    }
    cmp_attrs(d, "attributes", jget(rec, "attributes"), b, l->attrs);
    cmp_u64(d, "droppedAttributesCount", jget(rec, "droppedAttributesCount"), l->dropped_attrs);
    cmp_u64(d, "flags", jget(rec, "flags"), l->flags);
    cmp_id(d, "traceId", jget(rec, "traceId"), l->trace_id, 16, l->has_trace_id);
    cmp_id(d, "spanId", jget(rec, "spanId"), l->span_id, 8, l->has_span_id);
    cmp_str(d, "eventName", jget(rec, "eventName"), l->event_name);
    cmp_scope(d, rec, b, l->scope);
}

/* ---- traces ---- */

static void cmp_events(struct diff *d, const json_t *evs, const struct batch *b,
                       const struct span_row *sp)
{
    if (evs == NULL) {
        return;
    }
    if (json_array_size(evs) != sp->n_events) {
        diff_add(d, "events: %u, want %zu", sp->n_events, json_array_size(evs));
        return;
    }
    if (!blob_ok(b, sp->events)) {
        diff_add(d, "events: blob outside the heap");
        return;
    }
    struct val_rd r = blob_rd(b, sp->events);
    for (uint32_t i = 0; i < sp->n_events; i++) {
        const json_t *e = json_array_get(evs, i);
        uint64_t t;
        const char *name;
        size_t nlen;
        uint32_t dropped, count, nbytes;
        const uint8_t *ap;
        char label[64];
        if (val_rd_u64(&r, &t) < 0 || val_rd_str(&r, &name, &nlen) < 0 ||
            val_rd_u32(&r, &dropped) < 0 || !rd_attrs(&r, &ap, &count, &nbytes)) {
            diff_add(d, "events[%u]: blob malformed", i);
            return;
        }
        snprintf(label, sizeof(label), "events[%u].timeUnixNano", i);
        cmp_u64(d, label, jget(e, "timeUnixNano"), t);
        snprintf(label, sizeof(label), "events[%u].name", i);
        cmp_str(d, label, jget(e, "name"), (struct mstr){name, (uint32_t)nlen});
        snprintf(label, sizeof(label), "events[%u].droppedAttributesCount", i);
        cmp_u64(d, label, jget(e, "droppedAttributesCount"), dropped);
        snprintf(label, sizeof(label), "events[%u].attributes", i);
        cmp_attrs_raw(d, label, jget(e, "attributes"), ap, nbytes, count);
    }
    if (r.p != r.end) {
        diff_add(d, "events: %td trailing bytes in the blob", r.end - r.p);
    }
}

static void cmp_links(struct diff *d, const json_t *links, const struct batch *b,
                      const struct span_row *sp)
{
    if (links == NULL) {
        return;
    }
    if (json_array_size(links) != sp->n_links) {
        diff_add(d, "links: %u, want %zu", sp->n_links, json_array_size(links));
        return;
    }
    if (!blob_ok(b, sp->links)) {
        diff_add(d, "links: blob outside the heap");
        return;
    }
    struct val_rd r = blob_rd(b, sp->links);
    for (uint32_t i = 0; i < sp->n_links; i++) {
        const json_t *e = json_array_get(links, i);
        const void *tid, *sid;
        const char *ts;
        size_t tslen;
        uint32_t flags, dropped, count, nbytes;
        const uint8_t *ap;
        char label[64];
        if (val_rd_bytes(&r, &tid, 16) < 0 || val_rd_bytes(&r, &sid, 8) < 0 ||
            val_rd_str(&r, &ts, &tslen) < 0 || val_rd_u32(&r, &flags) < 0 ||
            val_rd_u32(&r, &dropped) < 0 || !rd_attrs(&r, &ap, &count, &nbytes)) {
            diff_add(d, "links[%u]: blob malformed", i);
            return;
        }
        snprintf(label, sizeof(label), "links[%u].traceId", i);
        cmp_id(d, label, jget(e, "traceId"), tid, 16, true);
        snprintf(label, sizeof(label), "links[%u].spanId", i);
        cmp_id(d, label, jget(e, "spanId"), sid, 8, true);
        snprintf(label, sizeof(label), "links[%u].traceState", i);
        cmp_str(d, label, jget(e, "traceState"), (struct mstr){ts, (uint32_t)tslen});
        snprintf(label, sizeof(label), "links[%u].flags", i);
        cmp_u64(d, label, jget(e, "flags"), flags);
        snprintf(label, sizeof(label), "links[%u].droppedAttributesCount", i);
        cmp_u64(d, label, jget(e, "droppedAttributesCount"), dropped);
        snprintf(label, sizeof(label), "links[%u].attributes", i);
        cmp_attrs_raw(d, label, jget(e, "attributes"), ap, nbytes, count);
    }
    if (r.p != r.end) {
        diff_add(d, "links: %td trailing bytes in the blob", r.end - r.p);
    }
}

static void cmp_span(struct diff *d, const json_t *rec, const struct batch *b, uint32_t row)
{
    const struct span_row *sp = &b->spans[row];
    cmp_id(d, "traceId", jget(rec, "traceId"), sp->trace_id, 16, true);
    cmp_id(d, "spanId", jget(rec, "spanId"), sp->span_id, 8, true);
    cmp_id(d, "parentSpanId", jget(rec, "parentSpanId"), sp->parent_span_id, 8, sp->has_parent);
    cmp_str(d, "traceState", jget(rec, "traceState"), sp->trace_state);
    cmp_u64(d, "flags", jget(rec, "flags"), sp->flags);
    cmp_str(d, "name", jget(rec, "name"), sp->name);
    cmp_i64(d, "kind", jget(rec, "kind"), sp->kind);
    cmp_u64(d, "startTimeUnixNano", jget(rec, "startTimeUnixNano"), sp->start_ns);
    cmp_u64(d, "endTimeUnixNano", jget(rec, "endTimeUnixNano"), sp->end_ns);
    cmp_attrs(d, "attributes", jget(rec, "attributes"), b, sp->attrs);
    cmp_u64(d, "droppedAttributesCount", jget(rec, "droppedAttributesCount"), sp->dropped_attrs);
    cmp_events(d, jget(rec, "events"), b, sp);
    cmp_u64(d, "droppedEventsCount", jget(rec, "droppedEventsCount"), sp->dropped_events);
    cmp_links(d, jget(rec, "links"), b, sp);
    cmp_u64(d, "droppedLinksCount", jget(rec, "droppedLinksCount"), sp->dropped_links);
    const json_t *st = jget(rec, "status");
    if (st != NULL) {
        cmp_i64(d, "status.code", jget(st, "code"), sp->status_code);
        cmp_str(d, "status.message", jget(st, "message"), sp->status_message);
    }
    cmp_scope(d, rec, b, sp->scope);
}

/* ---- metrics ---- */

static const char *kind_name(enum metric_kind k)
{
    switch (k) {
    case MK_NONE:
        return "none";
    case MK_GAUGE:
        return "gauge";
    case MK_SUM:
        return "sum";
    case MK_HISTOGRAM:
        return "histogram";
    case MK_EXP_HISTOGRAM:
        return "exponential_histogram";
    case MK_SUMMARY:
        return "summary";
    }
    return "?";
}

static void cmp_metric(struct diff *d, const json_t *rec, const struct batch *b, uint32_t mi)
{
    const struct metric_row *m = &b->metrics[mi];
    cmp_str(d, "name", jget(rec, "name"), m->name);
    cmp_str(d, "description", jget(rec, "description"), m->description);
    cmp_str(d, "unit", jget(rec, "unit"), m->unit);
    const json_t *t = jget(rec, "type");
    if (t != NULL) {
        const char *want = json_is_string(t) ? json_string_value(t) : "";
        if (strcmp(want, "exponentialHistogram") == 0) {
            want = "exponential_histogram";
        }
        if (strcmp(want, kind_name(m->kind)) != 0) {
            diff_add(d, "type: expected %s, got %s", want, kind_name(m->kind));
        }
    }
    cmp_i64(d, "temporality", jget(rec, "temporality"), m->temporality);
    cmp_bool(d, "monotonic", jget(rec, "monotonic"), m->monotonic);
    cmp_attrs(d, "metadata", jget(rec, "metadata"), b, m->metadata);
    cmp_scope(d, rec, b, m->scope);
}

/* A u32 n then n u64 (bucket counts) against a JSON array. */
static bool cmp_u64_list(struct diff *d, const char *label, const json_t *j, struct val_rd *r)
{
    uint32_t n;
    if (val_rd_u32(r, &n) < 0 || (size_t)(r->end - r->p) / 8 < n) {
        diff_add(d, "%s: detail blob malformed", label);
        return false;
    }
    if (j != NULL && json_array_size(j) != n) {
        diff_add(d, "%s: %u entries, want %zu", label, n, json_array_size(j));
        j = NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v;
        val_rd_u64(r, &v);
        if (j != NULL) {
            char l[80];
            snprintf(l, sizeof(l), "%s[%u]", label, i);
            cmp_u64(d, l, json_array_get(j, i), v);
        }
    }
    return true;
}

static bool cmp_f64_list(struct diff *d, const char *label, const json_t *j, struct val_rd *r)
{
    uint32_t n;
    if (val_rd_u32(r, &n) < 0 || (size_t)(r->end - r->p) / 8 < n) {
        diff_add(d, "%s: detail blob malformed", label);
        return false;
    }
    if (j != NULL && json_array_size(j) != n) {
        diff_add(d, "%s: %u entries, want %zu", label, n, json_array_size(j));
        j = NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        double v;
        val_rd_f64(r, &v);
        if (j != NULL) {
            char l[80];
            snprintf(l, sizeof(l), "%s[%u]", label, i);
            cmp_f64(d, l, json_array_get(j, i), v);
        }
    }
    return true;
}

static void cmp_detail(struct diff *d, const json_t *rec, const struct batch *b,
                       const struct point_row *p, enum metric_kind kind)
{
    if (!blob_ok(b, p->detail)) {
        diff_add(d, "detail blob outside the heap");
        return;
    }
    struct val_rd r = blob_rd(b, p->detail);
    switch (kind) {
    case MK_HISTOGRAM:
        if (!cmp_u64_list(d, "bucketCounts", jget(rec, "bucketCounts"), &r) ||
            !cmp_f64_list(d, "explicitBounds", jget(rec, "explicitBounds"), &r)) {
            return;
        }
        break;
    case MK_EXP_HISTOGRAM: {
        uint32_t scale, off;
        uint64_t zc;
        double zt;
        if (val_rd_u32(&r, &scale) < 0 || val_rd_u64(&r, &zc) < 0 || val_rd_f64(&r, &zt) < 0) {
            diff_add(d, "exponential histogram detail blob malformed");
            return;
        }
        cmp_i64(d, "scale", jget(rec, "scale"), (int32_t)scale);
        cmp_u64(d, "zeroCount", jget(rec, "zeroCount"), zc);
        cmp_f64(d, "zeroThreshold", jget(rec, "zeroThreshold"), zt);
        static const char *const sides[2] = {"positive", "negative"};
        for (int s = 0; s < 2; s++) {
            const json_t *bk = jget(rec, sides[s]);
            char l[48];
            if (val_rd_u32(&r, &off) < 0) {
                diff_add(d, "%s: detail blob malformed", sides[s]);
                return;
            }
            snprintf(l, sizeof(l), "%s.offset", sides[s]);
            cmp_i64(d, l, jget(bk, "offset"), (int32_t)off);
            snprintf(l, sizeof(l), "%s.bucketCounts", sides[s]);
            if (!cmp_u64_list(d, l, jget(bk, "bucketCounts"), &r)) {
                return;
            }
        }
        break;
    }
    case MK_SUMMARY: {
        const json_t *q = jget(rec, "quantileValues");
        uint32_t n;
        if (val_rd_u32(&r, &n) < 0 || (size_t)(r.end - r.p) / 16 < n) {
            diff_add(d, "summary detail blob malformed");
            return;
        }
        if (q != NULL && json_array_size(q) != n) {
            diff_add(d, "quantileValues: %u entries, want %zu", n, json_array_size(q));
            q = NULL;
        }
        for (uint32_t i = 0; i < n; i++) {
            double qq, vv;
            char l[64];
            val_rd_f64(&r, &qq);
            val_rd_f64(&r, &vv);
            if (q != NULL) {
                snprintf(l, sizeof(l), "quantileValues[%u].quantile", i);
                cmp_f64(d, l, jget(json_array_get(q, i), "quantile"), qq);
                snprintf(l, sizeof(l), "quantileValues[%u].value", i);
                cmp_f64(d, l, jget(json_array_get(q, i), "value"), vv);
            }
        }
        break;
    }
    default:
        break;
    }
    if (r.p != r.end) {
        diff_add(d, "detail: %td trailing bytes in the blob", r.end - r.p);
    }
}

/* {"int": "..."} / {"double": x} / {} against a point value. */
static void cmp_value(struct diff *d, const char *label, const json_t *j, uint8_t type, int64_t i,
                      double f)
{
    if (j == NULL) {
        return;
    }
    const json_t *ji = jget(j, "int"), *jd = jget(j, "double");
    if (ji != NULL) {
        if (type != PV_INT) {
            diff_add(d, "%s: expected an int, got value type %u", label, type);
        } else {
            cmp_i64(d, label, ji, i);
        }
    } else if (jd != NULL) {
        if (type != PV_DOUBLE) {
            diff_add(d, "%s: expected a double, got value type %u", label, type);
        } else {
            cmp_f64(d, label, jd, f);
        }
    } else if (type != PV_NONE) {
        diff_add(d, "%s: expected no value, got value type %u", label, type);
    }
}

static void cmp_exemplars(struct diff *d, const json_t *exs, const struct batch *b,
                          const struct point_row *p)
{
    if (exs == NULL) {
        return;
    }
    if (json_array_size(exs) != p->n_exemplars) {
        diff_add(d, "exemplars: %u, want %zu", p->n_exemplars, json_array_size(exs));
        return;
    }
    if (!blob_ok(b, p->exemplars)) {
        diff_add(d, "exemplars: blob outside the heap");
        return;
    }
    struct val_rd r = blob_rd(b, p->exemplars);
    for (uint32_t i = 0; i < p->n_exemplars; i++) {
        const json_t *e = json_array_get(exs, i);
        uint64_t t, raw;
        uint8_t vt, ht, hs;
        const void *tid, *sid;
        uint32_t count, nbytes;
        const uint8_t *ap;
        char l[64];
        if (val_rd_u64(&r, &t) < 0 || val_rd_u8(&r, &vt) < 0 || val_rd_u64(&r, &raw) < 0 ||
            val_rd_u8(&r, &ht) < 0 || val_rd_bytes(&r, &tid, 16) < 0 || val_rd_u8(&r, &hs) < 0 ||
            val_rd_bytes(&r, &sid, 8) < 0 || !rd_attrs(&r, &ap, &count, &nbytes)) {
            diff_add(d, "exemplars[%u]: blob malformed", i);
            return;
        }
        double f;
        memcpy(&f, &raw, 8);
        snprintf(l, sizeof(l), "exemplars[%u].timeUnixNano", i);
        cmp_u64(d, l, jget(e, "timeUnixNano"), t);
        snprintf(l, sizeof(l), "exemplars[%u].value", i);
        cmp_value(d, l, jget(e, "value"), vt, (int64_t)raw, f);
        snprintf(l, sizeof(l), "exemplars[%u].traceId", i);
        cmp_id(d, l, jget(e, "traceId"), tid, 16, ht != 0);
        snprintf(l, sizeof(l), "exemplars[%u].spanId", i);
        cmp_id(d, l, jget(e, "spanId"), sid, 8, hs != 0);
        snprintf(l, sizeof(l), "exemplars[%u].filteredAttributes", i);
        cmp_attrs_raw(d, l, jget(e, "filteredAttributes"), ap, nbytes, count);
    }
    if (r.p != r.end) {
        diff_add(d, "exemplars: %td trailing bytes in the blob", r.end - r.p);
    }
}

static void cmp_point(struct diff *d, const json_t *rec, const struct batch *b, uint32_t row)
{
    const struct point_row *p = &b->points[row];
    enum metric_kind kind = p->metric < b->n_metrics ? b->metrics[p->metric].kind : MK_NONE;
    cmp_u64(d, "startTimeUnixNano", jget(rec, "startTimeUnixNano"), p->start_ns);
    cmp_u64(d, "timeUnixNano", jget(rec, "timeUnixNano"), p->time_ns);
    cmp_attrs(d, "attributes", jget(rec, "attributes"), b, p->attrs);
    cmp_u64(d, "flags", jget(rec, "flags"), p->flags);
    cmp_value(d, "value", jget(rec, "value"), (uint8_t)p->value_type, p->value.i, p->value.d);
    cmp_u64(d, "count", jget(rec, "count"), p->count);
    if (kind == MK_SUMMARY && jget(rec, "sum") != NULL && !p->has_sum) {
        diff_add(d, "sum: a summary's sum must be present");
    }
    cmp_opt_f64(d, "sum", jget(rec, "sum"), p->has_sum, p->sum);
    cmp_opt_f64(d, "min", jget(rec, "min"), p->has_min, p->min);
    cmp_opt_f64(d, "max", jget(rec, "max"), p->has_max, p->max);
    cmp_detail(d, rec, b, p, kind);
    cmp_exemplars(d, jget(rec, "exemplars"), b, p);
}

/* ---- matching records to rows ---- */

typedef void (*cmp_fn)(struct diff *d, const json_t *rec, const struct batch *b, uint32_t row);

/* |s| 0 labels a data point. */
static void record_label(enum signal s, const json_t *rec, size_t i, char *out, size_t cap)
{
    const json_t *x;
    if (s == SIG_LOGS) {
        x = jget(rec, "token");
        snprintf(out, cap, "logs record %zu%s%s%s", i, x ? " (token " : "",
                 x ? json_string_value(x) ? json_string_value(x) : "?" : "", x ? ")" : "");
    } else if ((int)s == 0) {
        snprintf(out, cap, "data point %zu", i);
    } else if (s == SIG_TRACES) {
        const json_t *id = jget(rec, "spanId"), *nm = jget(rec, "name");
        snprintf(out, cap, "span %zu (spanId %s, \"%s\")", i,
                 json_is_string(id) ? json_string_value(id) : "?",
                 json_is_string(nm) ? json_string_value(nm) : "?");
    } else {
        x = jget(rec, "name");
        snprintf(out, cap, "metric %zu \"%s\"", i, json_is_string(x) ? json_string_value(x) : "?");
    }
}

/*
 * Pairs every record of |recs| with a distinct row among |rows| whose compare
 * shows no difference. Returns, in |found| (may be NULL), the row paired with
 * each record or UINT32_MAX.
 */
static void match(const char *what, const char *ctx, enum signal s, const json_t *recs,
                  const struct batch *b, const uint32_t *rows, uint32_t nrows, cmp_fn f,
                  uint32_t *found)
{
    bool *used = calloc(nrows ? nrows : 1, sizeof(bool));
    struct diff *best = malloc(sizeof(*best)), *d = malloc(sizeof(*d));
    cr_assert(used != NULL && best != NULL && d != NULL);
    for (size_t i = 0; i < json_array_size(recs); i++) {
        const json_t *rec = json_array_get(recs, i);
        uint32_t best_row = UINT32_MAX;
        bool ok = false;
        best->n = 0;
        for (uint32_t k = 0; k < nrows && !ok; k++) {
            if (used[k]) {
                continue;
            }
            memset(d, 0, sizeof(*d));
            f(d, rec, b, rows[k]);
            if (d->n == 0) {
                used[k] = true;
                ok = true;
                best_row = rows[k];
            } else if (best_row == UINT32_MAX || d->n < best->n) {
                best_row = rows[k];
                memcpy(best, d, sizeof(*d));
            }
        }
        char label[256];
        record_label(s, rec, i, label, sizeof(label));
        if (!ok) {
            if (best_row == UINT32_MAX) {
                cr_expect(ok, "%s: %s%s: no decoded row left to match", what, ctx, label);
            } else {
                cr_expect(
                    ok, "%s: %s%s: no decoded row matches; closest is row %u (%d differences): %s",
                    what, ctx, label, best_row, best->n, best->buf);
            }
        }
        if (found != NULL) {
            found[i] = ok ? best_row : UINT32_MAX;
        }
    }
    free(used);
    free(best);
    free(d);
}

static uint32_t *all_rows(uint32_t n)
{
    uint32_t *r = malloc(sizeof(uint32_t) * (n ? n : 1));
    cr_assert(r != NULL);
    for (uint32_t i = 0; i < n; i++) {
        r[i] = i;
    }
    return r;
}

static void check_count(const char *what, const char *label, const json_t *j, size_t got)
{
    uint64_t want;
    if (j != NULL && canon_u64(j, &want)) {
        cr_expect(want == got, "%s: %s: manifest says %" PRIu64 ", batch has %zu", what, label,
                  want, got);
    }
}

static void check_metrics(const char *what, const json_t *exp, const struct batch *b)
{
    const json_t *ms = jget(exp, "metrics");
    cr_assert(json_is_array(ms), "%s: expected.metrics.metrics is not an array", what);
    size_t npoints = 0;
    for (size_t i = 0; i < json_array_size(ms); i++) {
        npoints += json_array_size(jget(json_array_get(ms, i), "dataPoints"));
    }
    cr_expect(b->n_metrics == json_array_size(ms), "%s: %u metrics decoded, manifest lists %zu",
              what, b->n_metrics, json_array_size(ms));
    cr_expect(b->n_rows == npoints, "%s: %u data points decoded, manifest lists %zu", what,
              b->n_rows, npoints);
    check_count(what, "metricCount", jget(exp, "metricCount"), b->n_metrics);
    check_count(what, "dataPointCount", jget(exp, "dataPointCount"), b->n_rows);
    for (uint32_t r = 0; r < b->n_rows; r++) {
        cr_expect(b->points[r].metric < b->n_metrics, "%s: point row %u names metric %u of %u",
                  what, r, b->points[r].metric, b->n_metrics);
    }

    uint32_t *rows = all_rows(b->n_metrics);
    uint32_t *found = malloc(sizeof(uint32_t) * (json_array_size(ms) + 1));
    uint32_t *prow = malloc(sizeof(uint32_t) * (b->n_rows + 1));
    cr_assert(found != NULL && prow != NULL);
    match(what, "", SIG_METRICS, ms, b, rows, b->n_metrics, cmp_metric, found);
    for (size_t i = 0; i < json_array_size(ms); i++) {
        if (found[i] == UINT32_MAX) {
            continue;
        }
        const json_t *m = json_array_get(ms, i);
        const json_t *dps = jget(m, "dataPoints");
        uint32_t n = 0;
        for (uint32_t r = 0; r < b->n_rows; r++) {
            if (b->points[r].metric == found[i]) {
                prow[n++] = r;
            }
        }
        char ctx[256];
        record_label(SIG_METRICS, m, i, ctx, sizeof(ctx));
        cr_expect(n == json_array_size(dps), "%s: %s: %u points decoded, manifest lists %zu", what,
                  ctx, n, json_array_size(dps));
        strncat(ctx, ", ", sizeof(ctx) - strlen(ctx) - 1);
        match(what, ctx, (enum signal)0, dps, b, prow, n, cmp_point, NULL);
    }
    free(rows);
    free(found);
    free(prow);
}

void manifest_check_doc(const json_t *doc, const char *what, enum signal s, const struct batch *b)
{
    cr_assert(b != NULL, "%s: no batch", what);
    cr_assert(b->signal == s, "%s: batch signal %d, checking %s", what, (int)b->signal,
              signal_name(s));
    const json_t *exp = jget(jget(doc, "expected"), signal_name(s));
    cr_assert(json_is_object(exp), "%s: no expected.%s section", what, signal_name(s));
    check_resources(what, doc, b);
    for (uint32_t i = 0; i < b->n_scopes; i++) {
        cr_expect(b->scopes[i].resource < b->n_resources, "%s: scope %u names resource %u of %u",
                  what, i, b->scopes[i].resource, b->n_resources);
    }
    if (s == SIG_METRICS) {
        check_metrics(what, exp, b);
        return;
    }
    const char *key = s == SIG_LOGS ? "records" : "spans";
    const json_t *recs = jget(exp, key);
    cr_assert(json_is_array(recs), "%s: expected.%s.%s is not an array", what, signal_name(s), key);
    cr_expect(b->n_rows == json_array_size(recs), "%s: %u %s decoded, manifest lists %zu", what,
              b->n_rows, key, json_array_size(recs));
    check_count(what, s == SIG_LOGS ? "count" : "spanCount",
                jget(exp, s == SIG_LOGS ? "count" : "spanCount"), b->n_rows);
    uint32_t *rows = all_rows(b->n_rows);
    match(what, "", s, recs, b, rows, b->n_rows, s == SIG_LOGS ? cmp_log : cmp_span, NULL);
    free(rows);
}

/* ---- files ---- */

const char *manifest_vectors_dir(void)
{
    const char *d = getenv("MIRADB_VECTORS");
    return d != NULL && *d != '\0' ? d : "tests/vectors";
}

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *p = malloc(cap);
    cr_assert(p != NULL);
    for (;;) {
        size_t k = fread(p + n, 1, cap - n, f);
        n += k;
        if (n < cap) {
            break;
        }
        cap *= 2;
        p = realloc(p, cap);
        cr_assert(p != NULL);
    }
    cr_assert(!ferror(f), "read error on %s", path);
    fclose(f);
    *len = n;
    return p;
}

uint8_t *manifest_load_vector(const char *name, size_t *len)
{
    char path[1024];
    size_t n;
    snprintf(path, sizeof(path), "%s/%s", manifest_vectors_dir(), name);
    uint8_t *raw = read_all(path, &n);
    size_t nl = strlen(name);
    if (nl < 3 || strcmp(name + nl - 3, ".gz") != 0) {
        *len = n;
        return raw;
    }
    cr_assert(n >= 18, "%s: too short for gzip", path);
    size_t isize = (size_t)raw[n - 4] | (size_t)raw[n - 3] << 8 | (size_t)raw[n - 2] << 16 |
                   (size_t)raw[n - 1] << 24;
    cr_assert(isize <= (256u << 20), "%s: gzip ISIZE %zu too large for a vector", path, isize);
    uint8_t *out = malloc(isize ? isize : 1);
    cr_assert(out != NULL);
    struct libdeflate_decompressor *dc = libdeflate_alloc_decompressor();
    cr_assert(dc != NULL);
    size_t got = 0;
    enum libdeflate_result r = libdeflate_gzip_decompress(dc, raw, n, out, isize, &got);
    libdeflate_free_decompressor(dc);
    cr_assert(r == LIBDEFLATE_SUCCESS && got == isize, "%s: gunzip failed (%d)", path, (int)r);
    free(raw);
    *len = got;
    return out;
}

/* "http/json" + "gzip" -> accepts "http-json", "http/json", "http-json-gzip". */
static bool protocol_matches(const json_t *doc, const char *protocol)
{
    const json_t *run = jget(doc, "run");
    const json_t *p = jget(run, "protocol");
    if (!json_is_string(p)) {
        return true;
    }
    char norm[64], want[64];
    snprintf(norm, sizeof(norm), "%s", json_string_value(p));
    snprintf(want, sizeof(want), "%s", protocol);
    for (char *c = norm; *c; c++) {
        *c = *c == '/' ? '-' : *c;
    }
    for (char *c = want; *c; c++) {
        *c = *c == '/' ? '-' : *c;
    }
    if (strcmp(norm, want) == 0) {
        return true;
    }
    const json_t *comp = jget(run, "compression");
    if (json_is_string(comp)) {
        size_t k = strlen(norm);
        snprintf(norm + k, sizeof(norm) - k, "-%s", json_string_value(comp));
        return strcmp(norm, want) == 0;
    }
    return false;
}

void manifest_check(const char *manifest_json_path, const char *protocol, enum signal s,
                    const struct batch *b)
{
    char path[1024];
    struct stat st;
    if (manifest_json_path == NULL) {
        cr_assert(protocol != NULL, "manifest_check: neither a path nor a protocol");
        snprintf(path, sizeof(path), "%s/manifests/%s.json", manifest_vectors_dir(), protocol);
    } else if (stat(manifest_json_path, &st) == 0 && S_ISDIR(st.st_mode)) {
        cr_assert(protocol != NULL, "manifest_check: a directory needs a protocol");
        snprintf(path, sizeof(path), "%s/%s.json", manifest_json_path, protocol);
    } else {
        snprintf(path, sizeof(path), "%s", manifest_json_path);
    }
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    cr_assert(doc != NULL, "cannot load manifest %s: %s (line %d)", path, jerr.text, jerr.line);
    if (protocol != NULL) {
        cr_expect(protocol_matches(doc, protocol),
                  "%s: the manifest's run.protocol/compression do not match protocol \"%s\"", path,
                  protocol);
    }
    manifest_check_doc(doc, path, s, b);
    json_decref(doc);
}
