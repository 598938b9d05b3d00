/*
 * logs_int.h - what the files of the LogQL executor (query/logs*.c) share;
 * nothing outside them includes it. logs.h is the module's public surface.
 *
 * THE FILES
 *   logs.c           the query (struct query on a query/qctx.h context) and
 *                    the entry points logs_exec, logs_exec_native
 *   logs_labels.c    label names (logs_label_name), the per-source resource
 *                    and scope caches (stream labels, selector verdict) and
 *                    the labels of one record
 *   logs_pipeline.c  the per-row context and the pipeline stages (line and
 *                    label filters, parsers - its own | json parser, which
 *                    the shared JSON lexer replaces later - formats, unwrap)
 *   logs_plan.c      planning (zone map, blooms, dictionaries), the block
 *                    scan of one source, and what a scan must read
 *   logs_results.c   log queries: per-source top-k, the merge, pass 2
 *   logs_metric.c    metric queries: series, range and vector aggregations,
 *                    binary operators
 *   logs_render.c    Loki JSON rendering and the native records
 *   logs_meta.c      metadata (labels, values, series) and index endpoints
 *                    (stats, volume, detected labels)
 *
 * The small helpers below (byte buffer, label sets) are static inline:
 * they run per row or per byte, as they did inside the one file.
 */
#ifndef MIRADB_LOGS_INT_H
#define MIRADB_LOGS_INT_H

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/base64.h"
#include "lib/clock.h"
#include "lib/hex.h"
#include "lib/jsonw.h"
#include "query/logs.h"
#include "query/qctx.h"
#include "storage/arena.h"
#include "storage/block.h"
#include "storage/oblock.h"
#include "storage/val.h"

/* ---- small helpers ---- */

/* A growable byte buffer reused across rows (never shrinks). */
struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
};

struct kvref {
    const char *k;
    size_t kn;
    struct val v;
};

static void sb_val_json(struct sbuf *b, const struct val *v, int depth);

/* ---- label names ---- */

/* Resource attributes Loki indexes by default (FACTS.md B.1). */
static const char *const index_keys[] = {
    "service.name",
    "service.namespace",
    "service.instance.id",
    "deployment.environment",
    "deployment.environment.name",
    "cloud.region",
    "cloud.availability_zone",
    "k8s.cluster.name",
    "k8s.namespace.name",
    "k8s.pod.name",
    "k8s.container.name",
    "container.name",
    "k8s.replicaset.name",
    "k8s.deployment.name",
    "k8s.statefulset.name",
    "k8s.daemonset.name",
    "k8s.cronjob.name",
    "k8s.job.name",
};
#define N_INDEX_KEYS (sizeof(index_keys) / sizeof(index_keys[0]))

/* Names of record-level structured metadata (FACTS.md B.3) that need no
 * attribute table. */
static const char *const fixed_sm[] = {
    "observed_timestamp",
    "severity_number",
    "severity_text",
    "dropped_attributes_count",
    "flags",
    "trace_id",
    "span_id",
    "event_name",
    "scope_name",
    "scope_version",
    "scope_dropped_attributes_count",
    "detected_level",
};

/* ---- labels ---- */

enum lcat {
    LC_INDEX = 0,
    LC_SM = 1,
    LC_PARSED = 2,
};

struct lbl {
    const char *n, *v;
    uint32_t nn, vn;
    uint8_t cat;
};

struct lset {
    struct lbl *a;
    uint32_t n, cap;
    bool oom;
};

/* ---- query state ---- */

/* Per source, per resource: stream labels, selector verdict, resource SM. */
struct rinfo {
    bool done, match;
    struct lbl *idx; /* sorted by name */
    uint32_t n_idx;
    struct lbl *sm;
    uint32_t n_sm;
    const char *key; /* label string of idx (stream identity) */
    uint32_t keylen;
};

struct sinfo {
    bool done;
    struct lbl *sm; /* scope attrs, scope_name, scope_version, scope_dropped... */
    uint32_t n_sm;
};

/* A log query candidate. */
struct cand {
    uint64_t ts;
    uint32_t src;
    uint64_t row;
};

struct series;
struct smap {
    struct series **slots;
    size_t cap, n;
};

/* A candidate source of one scan. */
struct src {
    struct qctx_src *qs; /* the block, in the query's snapshot */
    struct rinfo *ri;
    uint32_t n_ri;
    struct sinfo *si;
    uint32_t n_si;
    arena *a; /* caches above, lives with the query */
    /* pass 1 of a log query */
    struct cand *c;
    size_t n_c, cap_c;
    /* metric scans */
    struct smap m;
    /* index scans: bytes and entries per resource id */
    uint64_t *vb, *ve;
};

struct query;

/* What a scan needs from rows. */
struct scan {
    struct query *q;
    const struct logql_log *log;
    uint64_t lo, hi;  /* ts in [lo, hi) */
    unsigned want;    /* BLK_ROOT [| BLK_ATTRS] */
    size_t n_pre;     /* the pipeline's leading label filters (logs_eval_pre) */
    bool need_labels; /* build SM at all */
    bool attrs;       /* record attributes are read */
    struct src *srcs;
    size_t n_srcs;
    /* log query */
    uint32_t limit;
    bool forward;
    /* metric (range aggregation) */
    const struct logql_expr *range;
    bool has_unwrap;
    /* the label a series drops: the unwrapped one, as Loki's extractor
     * does unless the range aggregation has a by (...) of its own */
    struct logql_str unwrap_drop;
    const struct logql_str *by; /* sum by pushdown: only these labels make the series */
    size_t n_by;
    bool by_pushdown;
    size_t K; /* steps */
    uint64_t start, step;
};

struct query {
    struct qctx c; /* snapshot, sources, limits, first error, warnings, tally */
    struct logs_req rq;
    arena *a; /* result arena */
};

/* ---- per-item row context ---- */

/* A hash index of label names over an lset, so that a parser stage adding
 * k labels costs O(k), not O(k^2) (| json on a line with 100,000 keys).
 * slot[] holds 1 + the label's position in the lset (0: empty), for the
 * first label of each name, as lset_get finds it; labels a[0 .. n) are
 * in it. Only lset_push may happen while it is on: stages that delete or
 * reorder labels run with it off (run_stages turns it off per stage). */
struct lidx {
    uint32_t *slot;
    uint32_t cap; /* power of two, or 0 */
    uint32_t n;
    bool on;
};

struct rctx {
    struct scan *s;
    struct src *src;
    arena *scratch; /* reset per row */
    struct sbuf sb;
    struct lset l;
    struct lidx idx;  /* over l, for set_parsed; valid within one stage */
    struct lidx eidx; /* materialize: over the labels kept so far */
    bool built;
    const char *line;
    size_t line_n;
    uint64_t ts;
    const struct log_view *v;
    const struct rinfo *ri;
    bool has_unwrap_val;
    double unwrap_val;
    uint64_t bytes;
    int err; /* -ENOMEM inside the row */
};

/* ---- scanning ---- */

typedef bool (*row_fn)(struct rctx *c, uint64_t row); /* false: stop this source */

/* ---- log query results ---- */

struct entry {
    uint64_t ts;
    const char *line;
    uint32_t line_n;
    uint32_t nl;
    struct lbl *l;   /* sorted by name */
    const char *key; /* stream identity */
    uint32_t keylen;
    uint32_t src;
    uint64_t row;
};

/* One metric series: labels and per-step values. */
struct series {
    uint64_t hash;
    const char *key;
    uint32_t keylen;
    struct lbl *l; /* sorted */
    uint32_t nl;
    double *v;   /* K values */
    double *aux; /* avg / stdvar / first-last helpers (K), or NULL */
    double *aux2;
    uint32_t *cnt; /* samples per step (0: no point) */
    /* quantile_over_time: every sample, malloc'd (series_finish frees) */
    struct qsamp *samp;
    size_t ns, cap_s;
};

struct qsamp {
    uint64_t ts;
    double v;
};

enum rkind {
    RK_STREAMS,
    RK_MATRIX,
    RK_VECTOR,
    RK_SCALAR,
};

struct logs_result {
    struct query q;
    enum rkind kind;
    bool native;
    struct entry *e;
    size_t n_e;
    struct scan scan; /* log queries: the sources entries point into */
    /* metric */
    struct series **ser;
    size_t n_ser;
    size_t K;
    uint64_t start, step;
    uint64_t exec_ns;
    /* logs_render's state */
    struct jsonw rd_w;
    int rd_stage; /* 0 not started, 1 items, 2 tail, 3 done */
    size_t rd_i;
};

/* ---- logs_labels.c: stream labels, resources, scopes and record labels ---- */

size_t logs_label_name(const char *key, size_t n, char *out, size_t cap);
bool logs_selector_match(const struct logql_log *log, const struct lbl *idx, uint32_t n);
int logs_src_rinfo_all(struct src *s, const struct logql_log *sel);
const struct sinfo *logs_src_sinfo(struct rctx *c, const struct scope_view *sv);
void logs_build_labels(struct rctx *c);

/* ---- logs_pipeline.c: the row context and the pipeline stages ---- */

struct lbl *logs_lidx_lookup(struct lidx *x, const struct lset *s, const char *n, size_t nn);
/* Evaluates row |v| (its line counted in c->bytes). true: it matched. */
bool logs_eval_row(struct rctx *c, const struct log_view *v, uint64_t ts);
/* The row's leading label filters (s->n_pre of them), decided without its
 * line (|v| may lack its body): 0 the row is dropped, 1 all keep it (then
 * logs_eval_rest, with the body), -1 not decided so (then logs_eval_row).
 * A dropped row's line is neither read nor counted. */
int logs_eval_pre(struct rctx *c, const struct log_view *v, uint64_t ts);
bool logs_eval_rest(struct rctx *c, const struct log_view *v);

/* ---- logs_plan.c: planning and scanning ---- */

void logs_scan_fini(struct scan *s);
int logs_scan_plan(struct scan *s);
int logs_rctx_init(struct rctx *c, struct scan *s, struct src *src);
void logs_rctx_fini(struct rctx *c);
int logs_cand_cmp_fwd(const void *a, const void *b);
int logs_cand_cmp_bwd(const void *a, const void *b);
void logs_scan_src_run(struct scan *s, struct src *src, row_fn on_match);
void logs_scan_item_log(void *arg, size_t i);
void logs_scan_item_metric(void *arg, size_t i);
void logs_plan_needs(struct scan *s, bool all);
int logs_check_log(const struct logql_log *log, char *err, size_t errlen);

/* ---- logs_results.c: log query results ---- */

int logs_run_log_query(struct logs_result *res);

/* ---- logs_metric.c: metric queries ---- */

uint64_t logs_hash_bytes(const char *p, size_t n);
void logs_smap_free(struct smap *m);
void logs_smap_free_samples(struct smap *m);
bool logs_on_metric_match(struct rctx *c, uint64_t row);
int logs_check_tree(const struct logql_expr *e, bool instant, char *err, size_t errlen);
int logs_run_metric_query(struct logs_result *res);

/* ---- logs_render.c: rendering ---- */

void logs_w_labels_obj(struct jsonw *w, const struct lbl *l, uint32_t n, int cat);
void logs_w_sec(struct jsonw *w, uint64_t ns);

/* ---- logs.c: the query and the entry points ---- */

int logs_query_open(struct query *q);
void logs_result_free(struct logs_result *r);

/* ---- small helpers, inline (they run per row or per byte) ---- */

static inline bool sb_reserve(struct sbuf *b, size_t more)
{
    if (b->n + more <= b->cap) {
        return true;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more) {
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static inline void sb_add(struct sbuf *b, const void *p, size_t n)
{
    if (n == 0 || !sb_reserve(b, n)) {
        return;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static inline void sb_addc(struct sbuf *b, char c)
{
    sb_add(b, &c, 1);
}

static inline void sb_adds(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static inline void sb_printf(struct sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0) {
        sb_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
    }
}

static inline void sb_fini(struct sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

static inline void sb_hex(struct sbuf *b, const uint8_t *p, size_t n)
{
    if (!sb_reserve(b, 2 * n + 1)) { /* hex_encode writes a NUL after the digits */
        return;
    }
    hex_encode(b->p + b->n, p, n);
    b->n += 2 * n;
}

static inline void sb_base64(struct sbuf *b, const uint8_t *p, size_t n)
{
    if (!sb_reserve(b, BASE64_ENCODED_LEN(n) + 1)) { /* and base64_encode one after the text */
        return;
    }
    b->n += base64_encode(b->p + b->n, p, n, true);
}

/* ES6 Number.prototype.toString (pdata AsString for doubles). */
static inline void sb_es6_double(struct sbuf *b, double v)
{
    if (isnan(v)) {
        sb_adds(b, "NaN");
        return;
    }
    if (isinf(v)) {
        sb_adds(b, v > 0 ? "Infinity" : "-Infinity");
        return;
    }
    if (v == 0) {
        sb_addc(b, '0');
        return;
    }
    char e[40];
    /* 15 significant digits first: any decimal of <= DBL_DIG digits comes
     * back unchanged, so when it round-trips, stripping its trailing zeros
     * gives the shortest form; else 16, then 17 digits. */
    for (int prec = 14; prec <= 16; prec++) {
        snprintf(e, sizeof(e), "%.*e", prec, v);
        if (strtod(e, NULL) == v) {
            break;
        }
    }
    /* e = [-]d[.ddd]e[+-]xx */
    char digits[24];
    size_t nd = 0;
    const char *s = e;
    bool neg = false;
    if (*s == '-') {
        neg = true;
        s++;
    }
    while (*s != 'e' && *s != '\0') {
        if (*s != '.') {
            digits[nd++] = *s;
        }
        s++;
    }
    int exp = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0') {
        nd--;
    }
    if (neg) {
        sb_addc(b, '-');
    }
    int n = exp + 1; /* position of the decimal point */
    if (n >= 1 && n <= 21) {
        if ((size_t)n >= nd) {
            sb_add(b, digits, nd);
            for (size_t i = nd; i < (size_t)n; i++) {
                sb_addc(b, '0');
            }
        } else {
            sb_add(b, digits, (size_t)n);
            sb_addc(b, '.');
            sb_add(b, digits + n, nd - (size_t)n);
        }
    } else if (n <= 0 && n > -6) {
        sb_adds(b, "0.");
        for (int i = 0; i < -n; i++) {
            sb_addc(b, '0');
        }
        sb_add(b, digits, nd);
    } else {
        sb_addc(b, digits[0]);
        if (nd > 1) {
            sb_addc(b, '.');
            sb_add(b, digits + 1, nd - 1);
        }
        sb_printf(b, "e%c%d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

/* JSON string body escaping without HTML escapes, into an sbuf. */
static inline void sb_json_str(struct sbuf *b, const char *s, size_t n)
{
    sb_addc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            sb_addc(b, '\\');
            sb_addc(b, (char)c);
        } else if (c == '\n') {
            sb_adds(b, "\\n");
        } else if (c == '\r') {
            sb_adds(b, "\\r");
        } else if (c == '\t') {
            sb_adds(b, "\\t");
        } else if (c < 0x20) {
            sb_printf(b, "\\u%04x", c);
        } else {
            sb_addc(b, (char)c);
        }
    }
    sb_addc(b, '"');
}

static inline int kvref_cmp(const void *a, const void *b)
{
    const struct kvref *x = a, *y = b;
    size_t n = x->kn < y->kn ? x->kn : y->kn;
    int c = memcmp(x->k, y->k, n);
    if (c != 0) {
        return c;
    }
    return x->kn < y->kn ? -1 : x->kn > y->kn;
}

/* kvlist members sorted by key (pdata AsString: json.Marshal of a map). */
static inline void sb_kvlist_json(struct sbuf *b, const struct val *v, int depth)
{
    struct val_rd r = v->inner;
    struct kvref small[16];
    struct kvref *m = small;
    if (v->count > 16) {
        m = malloc(v->count * sizeof(*m));
        if (m == NULL) {
            b->oom = true;
            return;
        }
    }
    uint32_t n = 0;
    for (; n < v->count; n++) {
        if (val_rd_kv(&r, &m[n].k, &m[n].kn, &m[n].v) != 0) {
            break;
        }
    }
    qsort(m, n, sizeof(*m), kvref_cmp);
    sb_addc(b, '{');
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            sb_addc(b, ',');
        }
        sb_json_str(b, m[i].k, m[i].kn);
        sb_addc(b, ':');
        sb_val_json(b, &m[i].v, depth + 1);
    }
    sb_addc(b, '}');
    if (m != small) {
        free(m);
    }
}

static inline void sb_val_json(struct sbuf *b, const struct val *v, int depth)
{
    if (depth > VAL_MAX_DEPTH) {
        sb_adds(b, "null");
        return;
    }
    switch (v->type) {
    case VAL_EMPTY:
        sb_adds(b, "null");
        break;
    case VAL_STR:
        sb_json_str(b, v->s, v->n);
        break;
    case VAL_BOOL:
        sb_adds(b, v->b ? "true" : "false");
        break;
    case VAL_INT:
        sb_printf(b, "%" PRId64, v->i);
        break;
    case VAL_DOUBLE:
        if (isnan(v->d) || isinf(v->d)) {
            sb_addc(b, '"');
            sb_es6_double(b, v->d);
            sb_addc(b, '"');
        } else {
            sb_es6_double(b, v->d);
        }
        break;
    case VAL_BYTES:
        sb_addc(b, '"');
        sb_base64(b, (const uint8_t *)v->s, v->n);
        sb_addc(b, '"');
        break;
    case VAL_ARRAY: {
        struct val_rd r = v->inner;
        sb_addc(b, '[');
        for (uint32_t i = 0; i < v->count; i++) {
            struct val e;
            if (val_rd_value(&r, &e) != 0) {
                break;
            }
            if (i > 0) {
                sb_addc(b, ',');
            }
            sb_val_json(b, &e, depth + 1);
        }
        sb_addc(b, ']');
        break;
    }
    case VAL_KVLIST:
        sb_kvlist_json(b, v, depth);
        break;
    }
}

/* pdata AsString (FACTS.md B.4). */
static inline void sb_val_str(struct sbuf *b, const struct val *v)
{
    switch (v->type) {
    case VAL_EMPTY:
        break;
    case VAL_STR:
        sb_add(b, v->s, v->n);
        break;
    case VAL_BOOL:
        sb_adds(b, v->b ? "true" : "false");
        break;
    case VAL_INT:
        sb_printf(b, "%" PRId64, v->i);
        break;
    case VAL_DOUBLE:
        sb_es6_double(b, v->d);
        break;
    case VAL_BYTES:
        sb_base64(b, (const uint8_t *)v->s, v->n);
        break;
    case VAL_ARRAY:
    case VAL_KVLIST:
        sb_val_json(b, v, 0);
        break;
    }
}

static inline bool is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static inline bool name_eq(const char *a, size_t an, const char *b)
{
    return strlen(b) == an && memcmp(a, b, an) == 0;
}

static inline struct lbl *lset_push(struct lset *s, const char *n, size_t nn, const char *v,
                                    size_t vn, uint8_t cat)
{
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 32;
        struct lbl *a = realloc(s->a, cap * sizeof(*a));
        if (a == NULL) {
            s->oom = true;
            return NULL;
        }
        s->a = a;
        s->cap = cap;
    }
    struct lbl *l = &s->a[s->n++];
    l->n = n;
    l->nn = (uint32_t)nn;
    l->v = v;
    l->vn = (uint32_t)vn;
    l->cat = cat;
    return l;
}

static inline struct lbl *lset_get(const struct lset *s, const char *n, size_t nn)
{
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->a[i].nn == nn && memcmp(s->a[i].n, n, nn) == 0) {
            return &s->a[i];
        }
    }
    return NULL;
}

static inline void lset_del(struct lset *s, uint32_t i)
{
    memmove(&s->a[i], &s->a[i + 1], (s->n - i - 1) * sizeof(s->a[0]));
    s->n--;
}

static inline int lbl_cmp(const void *a, const void *b)
{
    const struct lbl *x = a, *y = b;
    size_t n = x->nn < y->nn ? x->nn : y->nn;
    int c = memcmp(x->n, y->n, n);
    if (c != 0) {
        return c;
    }
    return x->nn < y->nn ? -1 : x->nn > y->nn;
}

/* Prometheus-style label string of sorted labels: {a="1", b="2"}. */
static inline void sb_labels_key(struct sbuf *b, const struct lbl *l, uint32_t n)
{
    sb_addc(b, '{');
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            sb_adds(b, ", ");
        }
        sb_add(b, l[i].n, l[i].nn);
        sb_addc(b, '=');
        sb_json_str(b, l[i].v, l[i].vn);
    }
    sb_addc(b, '}');
}

static inline const char *scratch_dup(struct rctx *c, const char *p, size_t n)
{
    char *d = arena_alloc(c->scratch, n + 1);
    if (d == NULL) {
        c->err = -ENOMEM;
        return "";
    }
    memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

/* The sbuf's content, copied to the scratch arena, and the sbuf emptied. */
static inline const char *sb_take(struct rctx *c, size_t *n)
{
    *n = c->sb.n;
    const char *p = scratch_dup(c, c->sb.p ? c->sb.p : "", c->sb.n);
    c->sb.n = 0;
    return p;
}

/* Copies into an arena that lives with the query. */
static inline const char *adup(arena *a, const char *p, size_t n)
{
    char *d = arena_alloc(a, n + 1);
    if (d == NULL) {
        return NULL;
    }
    if (n > 0) {
        memcpy(d, p, n);
    }
    d[n] = '\0';
    return d;
}

static inline bool listed(const struct logql_str *names, size_t n, const char *s, size_t sn)
{
    for (size_t i = 0; i < n; i++) {
        if (names[i].n == sn && memcmp(names[i].s, s, sn) == 0) {
            return true;
        }
    }
    return false;
}

#endif
