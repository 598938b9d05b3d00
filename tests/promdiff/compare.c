/*
 * compare.c - the differential suite's comparer (tests/promdiff/README.md):
 * runs every query of a list against two Prometheus HTTP APIs on loopback
 * (A = the reference Prometheus 2.42, B = MiraDB, or A again with --self),
 * as range queries and as instant queries at fixed times, and compares the
 * answers.
 *
 *   promdiff-compare run --a PORT --b PORT --queries FILE --base SEC
 *                        [--golden FILE] [--filter REGEX] [--budget SEC]
 *                        [--verbose]
 *   promdiff-compare sync --a PORT --b PORT --base SEC --query Q
 *                         --at REL_SEC --deadline SEC
 *   promdiff-compare count --a PORT --base SEC --query Q --at REL_SEC
 *   promdiff-compare free-port
 *
 * run: every line of FILE that is not blank or a '#' comment is a query;
 * "{T+N}" in it becomes the number base+N (for '@'). Each query is asked at
 * the range and instant times below (relative to --base, the dataset's
 * first slot; two of them are form POSTs, as Grafana sends by default, the
 * others GETs); --filter keeps the queries matching an extended regex. Two
 * answers match when both have the same HTTP status and status; errors the
 * same errorType and error text (a bracketed series list in the text is
 * not compared: its order is storage order); results the same resultType;
 * scalars and strings the same [time, value]; vectors the same series
 * (label sets) as an unordered set, each with the same timestamp and value,
 * and in the same order of values when the query's outermost call is sort
 * or sort_desc; matrices the same series in the same order with the same
 * samples. Values are equal when the same text, both NaN, the same
 * infinity, or within relative 1e-9. Prints the first difference of every
 * failing (query, time) and "N passed, M failed" (queries); exit 1 on any
 * failure, 2 on a usage or setup error. Queries not started within --budget
 * seconds (default 240; each request has httpc's 30 s deadline) count as
 * failed, so a stuck server cannot stretch the stage past its bound.
 *
 * --golden FILE: before the list, checks answers known in advance: each
 * line "REL_SEC<TAB>EXPECTED<TAB>QUERY" is an instant query at base+REL_SEC
 * whose answer from A and from B must be EXPECTED exactly: "none" (an empty
 * vector), "scalar V", or "LABELS V; LABELS V..." with labels written as
 * {a="1", b="2"} (names sorted) and values as Prometheus prints them. Each
 * line counts as one query in the summary.
 *
 * sync: polls the instant query Q at base+REL_SEC on both until the
 * answers match (success on both) or DEADLINE seconds pass: how the runner
 * waits for MiraDB to answer with all of the data.
 *
 * count: prints "series N samples M" of an instant query's matrix answer
 * from A (how the runner checks what Prometheus holds).
 *
 * free-port: prints a TCP port that was free on 127.0.0.1 a moment ago.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/util/httpc.h"
#include "tests/util/tclock.h"

#define REL_TOL 1e-9

struct eval {
    bool range;
    double start, end, step; /* relative to base; instant: start only */
    bool post;               /* asked as a form POST (Grafana's default), else GET */
};

/* Range windows: whole set at 1 m; an odd step from an odd start with ms;
 * the second hour at 15 s running past the end of the data (staleness). */
static const struct eval evals[] = {
    {true, 0, 7200, 60}, {true, 1234.567, 5000, 137}, {true, 3600, 7500, 15}, {false, 95.5, 0, 0},
    {false, 1800, 0, 0}, {false, 3000.25, 0, 0},      {false, 7230, 0, 0},
};
#define N_EVALS (sizeof(evals) / sizeof(evals[0]))

static int port_a, port_b;
static double base_s;
static bool verbose;
static const char *name_a = "prometheus", *name_b = "miradb";
static long long budget_ms = 240000; /* run: queries not started by then count as failed */

/* ---- fetching ---- */

struct answer {
    int http;
    json_t *root; /* NULL when the body is not JSON */
    char *body;
};

static void answer_free(struct answer *a)
{
    json_decref(a->root);
    free(a->body);
    memset(a, 0, sizeof(*a));
}

static void fmt_time(double rel, char *out, size_t cap)
{
    /* ms resolution, as Prometheus parses it */
    long long ms = llround((base_s + rel) * 1000.0);
    snprintf(out, cap, "%lld.%03lld", ms / 1000, ms % 1000);
}

/* GET, or a form POST as Grafana sends by default (|post|). */
static int ask(int port, const char *q, const struct eval *e, bool post, struct answer *out)
{
    static char enc[65536], args[70000], path[70100];
    char t1[40], t2[40], st[40];
    httpc_url_enc(enc, sizeof(enc), q);
    fmt_time(e->start, t1, sizeof(t1));
    if (e->range) {
        fmt_time(e->end, t2, sizeof(t2));
        snprintf(st, sizeof(st), "%g", e->step);
        snprintf(args, sizeof(args), "query=%s&start=%s&end=%s&step=%s", enc, t1, t2, st);
    } else {
        snprintf(args, sizeof(args), "query=%s&time=%s", enc, t1);
    }
    const char *ep = e->range ? "/api/v1/query_range" : "/api/v1/query";
    static const char *const form[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    struct http_resp r;
    int rc;
    memset(out, 0, sizeof(*out));
    if (post) {
        rc = httpc_request(port, "POST", ep, form, args, strlen(args), 0, &r);
    } else {
        snprintf(path, sizeof(path), "%s?%s", ep, args);
        rc = httpc_request(port, "GET", path, NULL, NULL, 0, 0, &r);
    }
    if (rc != 0) {
        return -1;
    }
    out->http = r.status;
    out->body = (char *)r.body; /* taken */
    json_error_t err;
    out->root = json_loadb(out->body, r.body_len, 0, &err);
    return 0;
}

/* ---- comparing ---- */

static char diff[8192]; /* the first difference found */

/* Records the difference; returns false, so "return DIFF(...)" fails. */
__attribute__((format(printf, 1, 2))) static bool DIFF(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(diff, sizeof(diff), fmt, ap);
    va_end(ap);
    return false;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A label set as {a="1", b="2"}, names sorted (malloc'd). */
static char *labels_str(json_t *metric)
{
    const char *keys[128];
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(metric, k, v)
    {
        if (n < 128) {
            keys[n++] = k;
        }
    }
    qsort(keys, n, sizeof(keys[0]), key_cmp);
    size_t cap = 16;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_object_get(metric, keys[i]));
        cap += strlen(keys[i]) + (s ? strlen(s) : 0) + 6;
    }
    char *out = malloc(cap);
    if (out == NULL) {
        fprintf(stderr, "promdiff: out of memory\n");
        exit(2);
    }
    size_t o = 0;
    out[o++] = '{';
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_object_get(metric, keys[i]));
        o += (size_t)snprintf(out + o, cap - o, "%s%s=\"%s\"", i ? ", " : "", keys[i],
                              s ? s : "<not a string>");
    }
    snprintf(out + o, cap - o, "}");
    return out;
}

static bool parse_val(const char *s, double *v)
{
    if (s == NULL) {
        return false;
    }
    if (strcmp(s, "NaN") == 0) {
        *v = NAN;
    } else if (strcmp(s, "+Inf") == 0) {
        *v = INFINITY;
    } else if (strcmp(s, "-Inf") == 0) {
        *v = -INFINITY;
    } else {
        char *end;
        *v = strtod(s, &end);
        return end != s && *end == '\0';
    }
    return true;
}

static bool vals_equal(const char *a, const char *b)
{
    double x, y;
    if (a != NULL && b != NULL && strcmp(a, b) == 0) {
        return true;
    }
    if (!parse_val(a, &x) || !parse_val(b, &y)) {
        return false;
    }
    if (isnan(x) || isnan(y)) {
        return isnan(x) && isnan(y);
    }
    if (isinf(x) || isinf(y)) {
        return x == y;
    }
    return x == y || fabs(x - y) <= REL_TOL * fmax(fabs(x), fabs(y));
}

/* A sample [t, "v"]: time in ms and the value text. */
static bool sample(json_t *s, long long *ms, const char **v)
{
    if (!json_is_array(s) || json_array_size(s) != 2 || !json_is_number(json_array_get(s, 0))) {
        return false;
    }
    *ms = llround(json_number_value(json_array_get(s, 0)) * 1000.0);
    *v = json_string_value(json_array_get(s, 1));
    return *v != NULL;
}

static bool cmp_sample(json_t *a, json_t *b, const char *where)
{
    long long ta, tb;
    const char *va, *vb;
    if (!sample(a, &ta, &va)) {
        return DIFF("%s: %s sample is not [time, \"value\"]", where, name_a);
    }
    if (!sample(b, &tb, &vb)) {
        return DIFF("%s: %s sample is not [time, \"value\"]", where, name_b);
    }
    if (ta != tb) {
        return DIFF("%s: time %s %.3f, %s %.3f", where, name_a, ta / 1000.0, name_b, tb / 1000.0);
    }
    if (!vals_equal(va, vb)) {
        return DIFF("%s @ %.3f: value %s %s, %s %s", where, ta / 1000.0, name_a, va, name_b, vb);
    }
    return true;
}

struct vel {
    char *key;
    json_t *el;
};

static int vel_cmp(const void *a, const void *b)
{
    return strcmp(((const struct vel *)a)->key, ((const struct vel *)b)->key);
}

static struct vel *vels(json_t *arr, size_t *n)
{
    *n = json_array_size(arr);
    struct vel *v = calloc(*n + 1, sizeof(*v));
    if (v == NULL) {
        fprintf(stderr, "promdiff: out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < *n; i++) {
        v[i].el = json_array_get(arr, i);
        v[i].key = labels_str(json_object_get(v[i].el, "metric"));
    }
    return v;
}

static void vels_free(struct vel *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].key);
    }
    free(v);
}

/* Vectors as sets; with |ordered|, also the order of values (ties in sort
 * may come out in any order, so labels are compared as a set only). */
static bool cmp_vector(json_t *a, json_t *b, bool ordered)
{
    size_t na, nb;
    struct vel *va = vels(a, &na), *vb = vels(b, &nb);
    bool ok = true;
    if (ordered) {
        for (size_t i = 0; i < na && i < nb && ok; i++) {
            const char *x =
                json_string_value(json_array_get(json_object_get(va[i].el, "value"), 1));
            const char *y =
                json_string_value(json_array_get(json_object_get(vb[i].el, "value"), 1));
            if (!vals_equal(x, y)) {
                ok = DIFF("sorted vector element %zu: %s %s %s, %s %s %s", i, name_a, va[i].key,
                          x ? x : "?", name_b, vb[i].key, y ? y : "?");
            }
        }
    }
    qsort(va, na, sizeof(*va), vel_cmp);
    qsort(vb, nb, sizeof(*vb), vel_cmp);
    size_t i = 0, j = 0;
    while (ok && (i < na || j < nb)) {
        int c = i == na ? 1 : j == nb ? -1 : strcmp(va[i].key, vb[j].key);
        if (c < 0) {
            ok = DIFF("series %s only in %s's answer (%zu vs %zu series)", va[i].key, name_a, na,
                      nb);
        } else if (c > 0) {
            ok = DIFF("series %s only in %s's answer (%zu vs %zu series)", vb[j].key, name_b, na,
                      nb);
        } else {
            ok = cmp_sample(json_object_get(va[i].el, "value"), json_object_get(vb[j].el, "value"),
                            va[i].key);
            i++, j++;
        }
    }
    vels_free(va, na);
    vels_free(vb, nb);
    return ok;
}

static bool cmp_matrix(json_t *a, json_t *b)
{
    size_t na, nb;
    struct vel *va = vels(a, &na), *vb = vels(b, &nb);
    bool ok = true;
    for (size_t i = 0; ok && i < na && i < nb; i++) {
        if (strcmp(va[i].key, vb[i].key) != 0) {
            ok = DIFF("series %zu: %s %s, %s %s", i, name_a, va[i].key, name_b, vb[i].key);
            break;
        }
        json_t *sa = json_object_get(va[i].el, "values"), *sb = json_object_get(vb[i].el, "values");
        if (json_object_get(va[i].el, "histograms") || json_object_get(vb[i].el, "histograms")) {
            if (!json_equal(json_object_get(va[i].el, "histograms"),
                            json_object_get(vb[i].el, "histograms"))) {
                ok = DIFF("%s: histograms differ", va[i].key);
                break;
            }
        }
        size_t ka = json_array_size(sa), kb = json_array_size(sb);
        for (size_t k = 0; ok && k < ka && k < kb; k++) {
            ok = cmp_sample(json_array_get(sa, k), json_array_get(sb, k), va[i].key);
        }
        if (ok && ka != kb) {
            json_t *extra = ka > kb ? json_array_get(sa, kb) : json_array_get(sb, ka);
            ok = DIFF("%s: %zu samples from %s, %zu from %s; first unmatched at %.3f", va[i].key,
                      ka, name_a, kb, name_b, json_number_value(json_array_get(extra, 0)));
        }
    }
    if (ok && na != nb) {
        ok = DIFF("%zu series from %s, %zu from %s; first unmatched %s", na, name_a, nb, name_b,
                  na > nb ? va[nb].key : vb[na].key);
    }
    vels_free(va, na);
    vels_free(vb, nb);
    return ok;
}

/* An error text without its bracketed series lists. */
static void strip_brackets(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    int depth = 0;
    for (; *s && o + 4 < cap; s++) {
        if (*s == '[' && depth++ == 0) {
            memcpy(out + o, "[...", 4);
            o += 4;
        } else if (*s == ']' && depth > 0) {
            depth--;
            if (depth == 0) {
                out[o++] = ']';
            }
        } else if (depth == 0) {
            out[o++] = *s;
        }
    }
    out[o] = '\0';
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s != NULL ? s : "";
}

static bool outer_sort(const char *q)
{
    while (isspace((unsigned char)*q) || *q == '(') {
        q++;
    }
    return strncmp(q, "sort(", 5) == 0 || strncmp(q, "sort_desc(", 10) == 0 ||
           strncmp(q, "sort (", 6) == 0 || strncmp(q, "sort_desc (", 11) == 0;
}

static bool cmp_answers(const struct answer *a, const struct answer *b, const char *q)
{
    if (a->root == NULL) {
        return DIFF("%s answered HTTP %d, not JSON: %.200s", name_a, a->http, a->body);
    }
    if (b->root == NULL) {
        return DIFF("%s answered HTTP %d, not JSON: %.200s", name_b, b->http, b->body);
    }
    const char *sa = jstr(a->root, "status"), *sb = jstr(b->root, "status");
    if (a->http != b->http || strcmp(sa, sb) != 0) {
        return DIFF("%s HTTP %d %s %s, %s HTTP %d %s %s", name_a, a->http, sa,
                    jstr(a->root, "error"), name_b, b->http, sb, jstr(b->root, "error"));
    }
    if (strcmp(sa, "success") != 0) {
        static char ea[4096], eb[4096];
        strip_brackets(jstr(a->root, "error"), ea, sizeof(ea));
        strip_brackets(jstr(b->root, "error"), eb, sizeof(eb));
        if (strcmp(jstr(a->root, "errorType"), jstr(b->root, "errorType")) != 0 ||
            strcmp(ea, eb) != 0) {
            return DIFF("error: %s %s \"%s\", %s %s \"%s\"", name_a, jstr(a->root, "errorType"),
                        jstr(a->root, "error"), name_b, jstr(b->root, "errorType"),
                        jstr(b->root, "error"));
        }
        return true;
    }
    json_t *da = json_object_get(a->root, "data"), *db = json_object_get(b->root, "data");
    const char *ta = jstr(da, "resultType"), *tb = jstr(db, "resultType");
    if (strcmp(ta, tb) != 0) {
        return DIFF("resultType %s %s, %s %s", name_a, ta, name_b, tb);
    }
    json_t *ra = json_object_get(da, "result"), *rb = json_object_get(db, "result");
    if (strcmp(ta, "scalar") == 0 || strcmp(ta, "string") == 0) {
        if (strcmp(ta, "string") == 0) {
            if (!json_equal(ra, rb)) {
                return DIFF("string result differs");
            }
            return true;
        }
        return cmp_sample(ra, rb, "scalar");
    }
    if (!json_is_array(ra) || !json_is_array(rb)) {
        return DIFF("result is not an array (%s %s, %s %s)", name_a, ra ? "ok" : "missing", name_b,
                    rb ? "ok" : "missing");
    }
    if (strcmp(ta, "vector") == 0) {
        return cmp_vector(ra, rb, outer_sort(q));
    }
    if (strcmp(ta, "matrix") == 0) {
        return cmp_matrix(ra, rb);
    }
    return DIFF("unknown resultType %s", ta);
}

static void eval_str(const struct eval *e, char *out, size_t cap)
{
    char t1[40], t2[40];
    fmt_time(e->start, t1, sizeof(t1));
    if (e->range) {
        fmt_time(e->end, t2, sizeof(t2));
        snprintf(out, cap, "range start=%s (T+%g) end=%s (T+%g) step=%g%s", t1, e->start, t2,
                 e->end, e->step, e->post ? " (POST)" : "");
    } else {
        snprintf(out, cap, "instant time=%s (T+%g)%s", t1, e->start, e->post ? " (POST)" : "");
    }
}

/* "{T+N}" -> base+N (an integer when base and N are). */
static int expand(const char *q, char *out, size_t cap)
{
    size_t o = 0;
    while (*q && o + 64 < cap) {
        if (strncmp(q, "{T+", 3) == 0) {
            char *end;
            double n = strtod(q + 3, &end);
            if (*end != '}') {
                return -1;
            }
            o += (size_t)snprintf(out + o, cap - o, "%.3f", base_s + n);
            q = end + 1;
        } else {
            out[o++] = *q++;
        }
    }
    out[o] = '\0';
    return *q ? -1 : 0;
}

/* ---- golden answers ---- */

/* An instant answer against "none", "scalar V" or "LABELS V; LABELS V...":
 * values compared as text, exactly (Prometheus's float formatting is part of
 * the answer), vectors as sets. */
static bool cmp_golden(const struct answer *a, const char *name, const char *want)
{
    if (a->root == NULL || strcmp(jstr(a->root, "status"), "success") != 0) {
        return DIFF("%s: HTTP %d %s %s", name, a->http, a->root ? jstr(a->root, "errorType") : "",
                    a->root ? jstr(a->root, "error") : "(not JSON)");
    }
    json_t *d = json_object_get(a->root, "data");
    json_t *r = json_object_get(d, "result");
    const char *type = jstr(d, "resultType");
    if (strncmp(want, "scalar ", 7) == 0) {
        const char *v = json_string_value(json_array_get(r, 1));
        if (strcmp(type, "scalar") != 0 || v == NULL || strcmp(v, want + 7) != 0) {
            return DIFF("%s: %s %s, want scalar %s", name, type, v ? v : "", want + 7);
        }
        return true;
    }
    if (strcmp(type, "vector") != 0) {
        return DIFF("%s: resultType %s, want vector", name, type);
    }
    size_t n;
    struct vel *v = vels(r, &n);
    static char got[16384];
    size_t o = 0;
    got[0] = '\0';
    qsort(v, n, sizeof(*v), vel_cmp);
    for (size_t i = 0; i < n && o < sizeof(got); i++) {
        const char *val = json_string_value(json_array_get(json_object_get(v[i].el, "value"), 1));
        o += (size_t)snprintf(got + o, sizeof(got) - o, "%s%s %s", i ? "; " : "", v[i].key,
                              val ? val : "?");
    }
    vels_free(v, n);
    /* the expected elements, sorted the same way */
    static char buf[16384], exp[16384];
    char *parts[256];
    size_t np = 0;
    snprintf(buf, sizeof(buf), "%s", strcmp(want, "none") == 0 ? "" : want);
    for (char *tok = strtok(buf, ";"); tok != NULL && np < 256; tok = strtok(NULL, ";")) {
        while (*tok == ' ') {
            tok++;
        }
        parts[np++] = tok;
    }
    qsort(parts, np, sizeof(parts[0]), key_cmp);
    o = 0;
    exp[0] = '\0';
    for (size_t i = 0; i < np && o < sizeof(exp); i++) {
        o += (size_t)snprintf(exp + o, sizeof(exp) - o, "%s%s", i ? "; " : "", parts[i]);
    }
    if (strcmp(got, exp) != 0) {
        return DIFF("%s: got \"%s\", want \"%s\"", name, n ? got : "none", np ? exp : "none");
    }
    return true;
}

/*
 * The golden file: "REL_SEC<TAB>EXPECTED<TAB>QUERY" per line ('#' comments),
 * each asked as an instant query at base+REL_SEC of A and of B, both of
 * which must give EXPECTED (cmp_golden). Counts into |passed|/|failed|.
 */
static int golden(const char *file, const regex_t *re, int *passed, int *failed)
{
    FILE *f = fopen(file, "r");
    if (f == NULL) {
        fprintf(stderr, "promdiff: %s: %s\n", file, strerror(errno));
        return -1;
    }
    static char line[16384], q[20000];
    int lineno = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#') {
            continue;
        }
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (t2 == NULL) {
            printf("FAIL %s:%d: not REL_SEC<TAB>EXPECTED<TAB>QUERY\n", file, lineno);
            (*failed)++;
            continue;
        }
        *t1 = *t2 = '\0';
        const char *want = t1 + 1, *query = t2 + 1;
        if (re != NULL && regexec(re, query, 0, NULL, 0) != 0) {
            continue;
        }
        if (expand(query, q, sizeof(q)) != 0) {
            printf("FAIL %s:%d: bad {T+N} placeholder\n", file, lineno);
            (*failed)++;
            continue;
        }
        struct eval e = {false, strtod(line, NULL), 0, 0, false};
        bool ok = true;
        for (int side = 0; side < 2 && ok; side++) {
            struct answer a;
            const char *name = side ? name_b : name_a;
            if (ask(side ? port_b : port_a, q, &e, false, &a) != 0) {
                ok = DIFF("%s: request failed (connection or 30 s timeout)", name);
                continue;
            }
            ok = cmp_golden(&a, name, want);
            answer_free(&a);
        }
        if (ok) {
            (*passed)++;
            if (verbose) {
                printf("ok   %s:%d: %s @ T+%s\n", file, lineno, q, line);
            }
        } else {
            (*failed)++;
            printf("FAIL %s:%d: %s @ T+%s\n    %s\n", file, lineno, q, line, diff);
        }
    }
    fclose(f);
    return 0;
}

/* ---- modes ---- */

static int run(const char *file, const char *filter, const char *gold)
{
    FILE *f = fopen(file, "r");
    if (f == NULL) {
        fprintf(stderr, "promdiff: %s: %s\n", file, strerror(errno));
        return 2;
    }
    regex_t re;
    if (filter != NULL && regcomp(&re, filter, REG_EXTENDED | REG_NOSUB) != 0) {
        fprintf(stderr, "promdiff: bad --filter regex %s\n", filter);
        fclose(f);
        return 2;
    }
    static char line[16384], q[20000];
    int passed = 0, failed = 0, lineno = 0, skipped = 0;
    long long t0 = tclock_ms();
    if (gold != NULL && golden(gold, filter != NULL ? &re : NULL, &passed, &failed) != 0) {
        failed++;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        char *s = line;
        while (isspace((unsigned char)*s)) {
            s++;
        }
        if (*s == '\0' || *s == '#') {
            continue;
        }
        if (filter != NULL && regexec(&re, s, 0, NULL, 0) != 0) {
            continue;
        }
        if (tclock_ms() - t0 > budget_ms) {
            if (skipped++ == 0) {
                printf("FAIL promdiff: %.0f s budget spent: the remaining queries are not run\n",
                       budget_ms / 1000.0);
            }
            failed++;
            continue;
        }
        if (expand(s, q, sizeof(q)) != 0) {
            fprintf(stderr, "promdiff: %s:%d: bad {T+N} placeholder\n", file, lineno);
            failed++;
            continue;
        }
        int bad = 0;
        for (size_t e = 0; e < N_EVALS; e++) {
            struct answer a, b;
            char ev[200];
            eval_str(&evals[e], ev, sizeof(ev));
            bool ok;
            if (ask(port_a, q, &evals[e], evals[e].post, &a) != 0) {
                ok = DIFF("%s: request failed (connection or 30 s timeout)", name_a);
            } else if (ask(port_b, q, &evals[e], evals[e].post, &b) != 0) {
                ok = DIFF("%s: request failed (connection or 30 s timeout)", name_b);
                answer_free(&a);
            } else {
                ok = cmp_answers(&a, &b, q);
                if (verbose) {
                    json_t *d = json_object_get(a.root, "data");
                    printf("  %s: %s %s, %zu results\n", ev, jstr(a.root, "status"),
                           jstr(d, "resultType"), json_array_size(json_object_get(d, "result")));
                }
                answer_free(&a);
                answer_free(&b);
            }
            if (!ok) {
                if (bad++ == 0) {
                    printf("FAIL %s:%d: %s\n", file, lineno, q);
                }
                printf("  %s\n    %s\n", ev, diff);
            }
        }
        if (bad == 0) {
            passed++;
            if (verbose) {
                printf("ok   %s:%d: %s\n", file, lineno, q);
            }
        } else {
            failed++;
        }
    }
    fclose(f);
    if (filter != NULL) {
        regfree(&re);
    }
    printf("promdiff: %d evaluations per query (%zu range, %zu instant), %.1f s\n", (int)N_EVALS,
           (size_t)3, N_EVALS - 3, (tclock_ms() - t0) / 1000.0);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}

static int sync_mode(const char *q, double at, double deadline_s)
{
    struct eval e = {false, at, 0, 0};
    long long deadline = tclock_ms() + (long long)(deadline_s * 1000);
    for (;;) {
        struct answer a, b;
        bool ok = false;
        if (ask(port_a, q, &e, false, &a) == 0) {
            if (ask(port_b, q, &e, false, &b) == 0) {
                ok = cmp_answers(&a, &b, q) && strcmp(jstr(a.root, "status"), "success") == 0;
                answer_free(&b);
            } else {
                DIFF("%s: request failed", name_b);
            }
            answer_free(&a);
        } else {
            DIFF("%s: request failed", name_a);
        }
        if (ok) {
            return 0;
        }
        if (tclock_ms() >= deadline) {
            printf("promdiff: %s at T+%g: no matching answer within %g s: %s\n", q, at, deadline_s,
                   diff);
            return 1;
        }
        tclock_nap_ms(250);
    }
}

/* The series and samples of an instant query's matrix answer from A. */
static int count_mode(const char *q, double at)
{
    struct eval e = {false, at, 0, 0};
    struct answer a;
    if (ask(port_a, q, &e, false, &a) != 0 || a.root == NULL) {
        fprintf(stderr, "promdiff: count: no JSON answer\n");
        return 2;
    }
    json_t *r = json_object_get(json_object_get(a.root, "data"), "result");
    size_t samples = 0;
    for (size_t i = 0; i < json_array_size(r); i++) {
        samples += json_array_size(json_object_get(json_array_get(r, i), "values"));
    }
    printf("series %zu samples %zu\n", json_array_size(r), samples);
    answer_free(&a);
    return 0;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        perror("promdiff: free-port");
        return 2;
    }
    printf("%d\n", ntohs(sa.sin_port));
    close(fd);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: promdiff-compare run --a PORT --b PORT --queries FILE --base SEC "
                    "[--golden FILE] [--filter REGEX] [--budget SEC] [--verbose] [--names A,B]\n"
                    "       promdiff-compare sync --a PORT --b PORT --base SEC --query Q --at SEC "
                    "--deadline SEC\n"
                    "       promdiff-compare count --a PORT --base SEC --query Q --at SEC\n"
                    "       promdiff-compare free-port\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage();
    }
    const char *mode = argv[1], *file = NULL, *filter = NULL, *query = NULL, *gold = NULL;
    double at = 0, deadline = 60;
    static char names[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "free-port") == 0) {
        return free_port();
    }
    base_s = -1;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--verbose") == 0) {
            verbose = true;
            continue;
        }
        if (i + 1 >= argc) {
            usage();
        }
        const char *v = argv[++i];
        if (strcmp(o, "--a") == 0) {
            port_a = atoi(v);
        } else if (strcmp(o, "--b") == 0) {
            port_b = atoi(v);
        } else if (strcmp(o, "--queries") == 0) {
            file = v;
        } else if (strcmp(o, "--golden") == 0) {
            gold = v;
        } else if (strcmp(o, "--base") == 0) {
            base_s = strtod(v, NULL);
        } else if (strcmp(o, "--filter") == 0) {
            filter = *v ? v : NULL;
        } else if (strcmp(o, "--query") == 0) {
            query = v;
        } else if (strcmp(o, "--at") == 0) {
            at = strtod(v, NULL);
        } else if (strcmp(o, "--deadline") == 0) {
            deadline = strtod(v, NULL);
        } else if (strcmp(o, "--budget") == 0) {
            budget_ms = (long long)(strtod(v, NULL) * 1000);
        } else if (strcmp(o, "--names") == 0) {
            snprintf(names, sizeof(names), "%s", v);
            char *comma = strchr(names, ',');
            if (comma == NULL) {
                usage();
            }
            *comma = '\0';
            name_a = names;
            name_b = comma + 1;
        } else {
            usage();
        }
    }
    if (strcmp(mode, "count") == 0 && port_a > 0 && base_s >= 0 && query != NULL) {
        return count_mode(query, at);
    }
    if (port_a <= 0 || port_b <= 0 || base_s < 0) {
        usage();
    }
    if (strcmp(mode, "run") == 0 && file != NULL) {
        return run(file, filter, gold);
    }
    if (strcmp(mode, "sync") == 0 && query != NULL) {
        return sync_mode(query, at, deadline);
    }
    usage();
    return 2;
}
