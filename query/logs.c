/*
 * logs.c - the LogQL executor (see logs.h).
 *
 * SHAPE OF A QUERY
 *   logs_exec takes one catalog snapshot. Every log expression in the tree
 *   (the log query itself, or each range aggregation) is one `struct scan`:
 *   its candidate sources (sealed blocks that survive the zone map, bloom
 *   and dictionary checks, plus the open blocks) are scanned one source per
 *   qpool_parallel item, each item with its own row context (label arrays,
 *   a scratch arena reset per row) so no row allocates with malloc.
 *
 *   Log queries run in two passes: pass 1 evaluates the pipeline and keeps
 *   only (time, source, row) of the best |limit| matches per source (sealed
 *   blocks are time-sorted, so a scan in query direction stops after
 *   |limit| matches, and sources are visited in batches ordered by time, so
 *   blocks that cannot beat the current |limit|-th entry are never read);
 *   pass 2 re-evaluates only the |limit| winners to materialize lines and
 *   labels. Metric queries accumulate per-step values per series in each
 *   item and merge them by series key.
 *
 * Limits are checked every ROW_CHECK rows per item: --query-max-rows (rows
 * scanned by the whole query), --query-memory (arenas and series held),
 * the deadline and the cancel flag; the first one hit stops every item.
 * The deadline, the cancel flag and a regex that hit its PCRE2 match limit
 * are also looked at every CLOCK_CHECK rows (q_tick) and between the
 * operators of a metric query.
 */
#include "query/logs.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "query/jsonw.h"
#include "query/pool.h"
#include "query/qctx.h"
#include "storage/arena.h"
#include "storage/block.h"
#include "storage/bloom.h"
#include "storage/catalog.h"
#include "storage/oblock.h"
#include "storage/val.h"

#define ROW_CHECK 1024
/* Rows between two looks at the clock (and at qlex_re_take_limit_hit): one
 * row can cost milliseconds (| json on a line of 100,000 keys, a regex
 * near its match limit), so ROW_CHECK rows could overshoot the deadline by
 * seconds. */
#define CLOCK_CHECK 16

/* ---- small helpers -------------------------------------------------------- */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A growable byte buffer reused across rows (never shrinks). */
struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
};

static bool sb_reserve(struct sbuf *b, size_t more)
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

static void sb_add(struct sbuf *b, const void *p, size_t n)
{
    if (n == 0 || !sb_reserve(b, n)) {
        return;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void sb_addc(struct sbuf *b, char c)
{
    sb_add(b, &c, 1);
}

static void sb_adds(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
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

static void sb_fini(struct sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

static const char hexd[] = "0123456789abcdef";

static void sb_hex(struct sbuf *b, const uint8_t *p, size_t n)
{
    if (!sb_reserve(b, 2 * n)) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        b->p[b->n++] = hexd[p[i] >> 4];
        b->p[b->n++] = hexd[p[i] & 15];
    }
}

static void sb_base64(struct sbuf *b, const uint8_t *p, size_t n)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (!sb_reserve(b, (n + 2) / 3 * 4)) {
        return;
    }
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        b->p[b->n++] = t[v >> 18];
        b->p[b->n++] = t[(v >> 12) & 63];
        b->p[b->n++] = t[(v >> 6) & 63];
        b->p[b->n++] = t[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        b->p[b->n++] = t[v >> 18];
        b->p[b->n++] = t[(v >> 12) & 63];
        b->p[b->n++] = '=';
        b->p[b->n++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        b->p[b->n++] = t[v >> 18];
        b->p[b->n++] = t[(v >> 12) & 63];
        b->p[b->n++] = t[(v >> 6) & 63];
        b->p[b->n++] = '=';
    }
}

/* ES6 Number.prototype.toString (pdata AsString for doubles). */
static void sb_es6_double(struct sbuf *b, double v)
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
static void sb_json_str(struct sbuf *b, const char *s, size_t n)
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

struct kvref {
    const char *k;
    size_t kn;
    struct val v;
};

static int kvref_cmp(const void *a, const void *b)
{
    const struct kvref *x = a, *y = b;
    size_t n = x->kn < y->kn ? x->kn : y->kn;
    int c = memcmp(x->k, y->k, n);
    if (c != 0) {
        return c;
    }
    return x->kn < y->kn ? -1 : x->kn > y->kn;
}

static void sb_val_json(struct sbuf *b, const struct val *v, int depth);

/* kvlist members sorted by key (pdata AsString: json.Marshal of a map). */
static void sb_kvlist_json(struct sbuf *b, const struct val *v, int depth)
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

static void sb_val_json(struct sbuf *b, const struct val *v, int depth)
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
static void sb_val_str(struct sbuf *b, const struct val *v)
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

/* ---- label names ---------------------------------------------------------- */

static bool is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

size_t logs_label_name(const char *key, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    if (cap == 0) {
        return 0;
    }
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (o + 1 < cap) {                                                                         \
            out[o++] = (c);                                                                        \
        }                                                                                          \
    } while (0)
    /* __x__ keeps its wrapper */
    bool wrapped =
        n > 4 && key[0] == '_' && key[1] == '_' && key[n - 1] == '_' && key[n - 2] == '_';
    size_t from = 0, to = n;
    if (wrapped) {
        from = 2;
        to = n - 2;
        PUT('_');
        PUT('_');
    } else if (n > 0 && key[0] >= '0' && key[0] <= '9') {
        PUT('k');
        PUT('e');
        PUT('y');
        PUT('_');
    }
    bool in_run = false;
    for (size_t i = from; i < to; i++) {
        unsigned char c = (unsigned char)key[i];
        if (is_alnum(c)) {
            PUT((char)c);
            in_run = false;
        } else if (!in_run) {
            PUT('_');
            in_run = true;
        }
    }
    if (wrapped) {
        PUT('_');
        PUT('_');
    }
#undef PUT
    out[o] = '\0';
    return o;
}

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

static bool is_index_key(const char *k, size_t n)
{
    for (size_t i = 0; i < N_INDEX_KEYS; i++) {
        if (strlen(index_keys[i]) == n && memcmp(index_keys[i], k, n) == 0) {
            return true;
        }
    }
    return false;
}

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

static bool name_eq(const char *a, size_t an, const char *b)
{
    return strlen(b) == an && memcmp(a, b, an) == 0;
}

/* ---- labels ---------------------------------------------------------------- */

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

static struct lbl *lset_push(struct lset *s, const char *n, size_t nn, const char *v, size_t vn,
                             uint8_t cat)
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

static struct lbl *lset_get(const struct lset *s, const char *n, size_t nn)
{
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->a[i].nn == nn && memcmp(s->a[i].n, n, nn) == 0) {
            return &s->a[i];
        }
    }
    return NULL;
}

static void lset_del(struct lset *s, uint32_t i)
{
    memmove(&s->a[i], &s->a[i + 1], (s->n - i - 1) * sizeof(s->a[0]));
    s->n--;
}

static int lbl_cmp(const void *a, const void *b)
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
static void sb_labels_key(struct sbuf *b, const struct lbl *l, uint32_t n)
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

/* ---- query state ----------------------------------------------------------- */

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

/* The query's snapshot of the logs signal, with q->rq's limits. */
static int query_open(struct query *q)
{
    struct qctx_limits lim = {.max_rows = q->rq.max_rows,
                              .max_memory = q->rq.max_memory,
                              .deadline_ns = q->rq.deadline_ns,
                              .cancel = q->rq.cancel};
    return qctx_open(&q->c, SIG_LOGS, &lim, "rows");
}

/* ---- per-item row context --------------------------------------------------- */

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

/* Below this many labels a linear lset_get is cheaper than an index. */
#define LIDX_MIN 32

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

static const char *scratch_dup(struct rctx *c, const char *p, size_t n)
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
static const char *sb_take(struct rctx *c, size_t *n)
{
    *n = c->sb.n;
    const char *p = scratch_dup(c, c->sb.p ? c->sb.p : "", c->sb.n);
    c->sb.n = 0;
    return p;
}

/* Copies into an arena that lives with the query. */
static const char *adup(arena *a, const char *p, size_t n)
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

/* ---- resources, scopes, record labels ------------------------------------- */

/* Pushes an attribute as label(s): kvlists flatten to name_child
 * (FACTS.md B.2). Strings come from |a| (names) and |sb| scratch. */
static void push_attr(struct lset *out, arena *a, struct sbuf *sb, const char *prefix, size_t pn,
                      const char *k, size_t kn, const struct val *v, uint8_t cat, int depth)
{
    char raw[512], name[600];
    size_t rn = 0;
    if (pn > 0) {
        size_t cp = pn < 255 ? pn : 255;
        memcpy(raw, prefix, cp);
        raw[cp] = '_';
        rn = cp + 1;
    }
    size_t ck = kn < sizeof(raw) - rn ? kn : sizeof(raw) - rn;
    memcpy(raw + rn, k, ck);
    rn += ck;
    size_t nn = logs_label_name(raw, rn, name, sizeof(name));
    if (v->type == VAL_KVLIST && depth < 16) {
        struct val_rd r = v->inner;
        for (uint32_t i = 0; i < v->count; i++) {
            const char *ck2;
            size_t ckn;
            struct val cv;
            if (val_rd_kv(&r, &ck2, &ckn, &cv) != 0) {
                break;
            }
            push_attr(out, a, sb, name, nn, ck2, ckn, &cv, cat, depth + 1);
        }
        return;
    }
    const char *np = adup(a, name, nn);
    const char *vp;
    size_t vn;
    if (v->type == VAL_STR) {
        vp = v->s;
        vn = v->n;
    } else {
        sb->n = 0;
        sb_val_str(sb, v);
        vn = sb->n;
        vp = adup(a, sb->p ? sb->p : "", vn);
    }
    if (np == NULL || vp == NULL) {
        out->oom = true;
        return;
    }
    lset_push(out, np, nn, vp, vn, cat);
}

static const char *const svc_fallback[] = {"container_name", "k8s_container_name", "k8s_job_name"};

static bool selector_match(const struct logql_log *log, const struct lbl *idx, uint32_t n)
{
    for (size_t i = 0; i < log->n_matchers; i++) {
        const struct logql_matcher *m = &log->matchers[i];
        const struct lbl *hit = NULL;
        for (uint32_t j = 0; j < n; j++) {
            if (idx[j].nn == m->name.n && memcmp(idx[j].n, m->name.s, m->name.n) == 0) {
                hit = &idx[j];
                break;
            }
        }
        if (!logql_match_label(m, hit ? hit->v : NULL, hit ? hit->vn : 0)) {
            return false;
        }
    }
    return true;
}

/* Builds the stream labels and resource SM of |rv| into |ri| (arena |a|). */
static int build_rinfo(const struct res_view *rv, arena *a, const struct logql_log *sel,
                       struct rinfo *ri)
{
    struct lset idx = {0}, sm = {0};
    struct sbuf sb = {0};
    struct val_rd r = {rv->attrs.p, rv->attrs.p + rv->attrs.len};
    bool has_svc = false;
    int rc = 0;
    for (uint32_t i = 0; i < rv->attrs.count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) != 0) {
            break;
        }
        if (is_index_key(k, kn)) {
            size_t before = idx.n;
            push_attr(&idx, a, &sb, NULL, 0, k, kn, &v, LC_INDEX, 0);
            /* an empty value is no label (Prometheus) */
            if (idx.n > before && idx.a[idx.n - 1].vn == 0) {
                idx.n--;
            } else if (idx.n > before && name_eq(k, kn, "service.name")) {
                has_svc = true;
            }
        } else {
            push_attr(&sm, a, &sb, NULL, 0, k, kn, &v, LC_SM, 0);
        }
    }
    if (!has_svc) {
        const char *val = "unknown_service";
        size_t vn = strlen(val);
        for (size_t f = 0; f < 3; f++) {
            struct lbl *l = lset_get(&idx, svc_fallback[f], strlen(svc_fallback[f]));
            if (l != NULL) {
                val = l->v;
                vn = l->vn;
                break;
            }
        }
        lset_push(&idx, "service_name", 12, val, vn, LC_INDEX);
    }
    if (idx.oom || sm.oom || sb.oom) {
        rc = -ENOMEM;
        goto out;
    }
    qsort(idx.a, idx.n, sizeof(idx.a[0]), lbl_cmp);
    /* a duplicate name after sanitizing: keep the first */
    for (uint32_t i = 1; i < idx.n;) {
        if (idx.a[i].nn == idx.a[i - 1].nn &&
            memcmp(idx.a[i].n, idx.a[i - 1].n, idx.a[i].nn) == 0) {
            lset_del(&idx, i);
        } else {
            i++;
        }
    }
    ri->idx = arena_alloc(a, (idx.n + 1) * sizeof(struct lbl));
    ri->sm = arena_alloc(a, (sm.n + 1) * sizeof(struct lbl));
    if (ri->idx == NULL || ri->sm == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    if (idx.n > 0) {
        memcpy(ri->idx, idx.a, idx.n * sizeof(struct lbl));
    }
    ri->n_idx = idx.n;
    if (sm.n > 0) {
        memcpy(ri->sm, sm.a, sm.n * sizeof(struct lbl));
    }
    ri->n_sm = sm.n;
    sb.n = 0;
    sb_labels_key(&sb, ri->idx, ri->n_idx);
    ri->key = adup(a, sb.p ? sb.p : "", sb.n);
    ri->keylen = (uint32_t)sb.n;
    if (ri->key == NULL || sb.oom) {
        rc = -ENOMEM;
        goto out;
    }
    ri->match = sel == NULL || selector_match(sel, ri->idx, ri->n_idx);
    ri->done = true;
out:
    free(idx.a);
    free(sm.a);
    sb_fini(&sb);
    return rc;
}


/* Makes the per-resource cache of |s| and fills every entry (resources
 * are few: a dictionary per block). */
static int src_rinfo_all(struct src *s, const struct logql_log *sel)
{
    if (s->ri != NULL) {
        return 0;
    }
    uint32_t n = qctx_n_resources(s->qs);
    s->ri = arena_alloc(s->a, (n + 1) * sizeof(*s->ri));
    if (s->ri == NULL) {
        return -ENOMEM;
    }
    memset(s->ri, 0, (n + 1) * sizeof(*s->ri));
    s->n_ri = n;
    for (uint32_t i = 0; i < n; i++) {
        const struct res_view *rv = qctx_resource(s->qs, i);
        if (rv == NULL) {
            continue;
        }
        int rc = build_rinfo(rv, s->a, sel, &s->ri[i]);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

static const struct sinfo *src_sinfo(struct rctx *c, const struct scope_view *sv)
{
    struct src *s = c->src;
    if (s->si == NULL) {
        uint32_t n = qctx_n_scopes(s->qs);
        s->si = arena_alloc(s->a, (n + 1) * sizeof(*s->si));
        if (s->si == NULL) {
            return NULL;
        }
        memset(s->si, 0, (n + 1) * sizeof(*s->si));
        s->n_si = n;
    }
    if (sv == NULL || sv->id >= s->n_si) {
        return NULL;
    }
    struct sinfo *si = &s->si[sv->id];
    if (si->done) {
        return si;
    }
    struct lset sm = {0};
    struct val_rd r = {sv->attrs.p, sv->attrs.p + sv->attrs.len};
    for (uint32_t i = 0; i < sv->attrs.count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) != 0) {
            break;
        }
        push_attr(&sm, s->a, &c->sb, NULL, 0, k, kn, &v, LC_SM, 0);
    }
    if (sv->name.len > 0) {
        lset_push(&sm, "scope_name", 10, sv->name.p, sv->name.len, LC_SM);
    }
    if (sv->version.len > 0) {
        lset_push(&sm, "scope_version", 13, sv->version.p, sv->version.len, LC_SM);
    }
    if (sv->dropped_attrs != 0) {
        char num[16];
        int nn = snprintf(num, sizeof(num), "%u", sv->dropped_attrs);
        lset_push(&sm, "scope_dropped_attributes_count", 30, adup(s->a, num, (size_t)nn),
                  (size_t)nn, LC_SM);
    }
    c->sb.n = 0;
    si->sm = arena_alloc(s->a, (sm.n + 1) * sizeof(struct lbl));
    if (si->sm == NULL || sm.oom) {
        free(sm.a);
        return NULL;
    }
    if (sm.n > 0) {
        memcpy(si->sm, sm.a, sm.n * sizeof(struct lbl));
    }
    si->n_sm = sm.n;
    si->done = true;
    free(sm.a);
    return si;
}

/* FACTS.md B.7 */
static const char *const level_names[] = {
    "level",    "LEVEL",         "Level",         "log.level",     "severity",
    "SEVERITY", "Severity",      "SeverityText",  "lvl",           "LVL",
    "Lvl",      "severity_text", "Severity_Text", "SEVERITY_TEXT",
};

static bool ieq(const char *a, size_t an, const char *b)
{
    return strlen(b) == an && strncasecmp(a, b, an) == 0;
}

static void normalize_level(const char *v, size_t n, const char **out, size_t *on)
{
    static const struct {
        const char *in, *out;
    } map[] = {
        {"trace", "trace"},       {"trc", "trace"},    {"debug", "debug"},      {"dbg", "debug"},
        {"info", "info"},         {"inf", "info"},     {"information", "info"}, {"warn", "warn"},
        {"wrn", "warn"},          {"warning", "warn"}, {"error", "error"},      {"err", "error"},
        {"critical", "critical"}, {"fatal", "fatal"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (ieq(v, n, map[i].in)) {
            *out = map[i].out;
            *on = strlen(map[i].out);
            return;
        }
    }
    *out = v;
    *on = n;
}

static const char *level_of_number(int32_t sn)
{
    if (sn >= 1 && sn <= 4) {
        return "trace";
    }
    if (sn >= 5 && sn <= 8) {
        return "debug";
    }
    if (sn >= 9 && sn <= 12) {
        return "info";
    }
    if (sn >= 13 && sn <= 16) {
        return "warn";
    }
    if (sn >= 17 && sn <= 20) {
        return "error";
    }
    if (sn >= 21 && sn <= 24) {
        return "fatal";
    }
    return NULL;
}

static void push_num(struct rctx *c, const char *name, uint64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%" PRIu64, v);
    lset_push(&c->l, name, strlen(name), scratch_dup(c, num, (size_t)n), (size_t)n, LC_SM);
}

/* Stream labels + structured metadata of the current row (FACTS.md B.3 order). */
static void build_labels(struct rctx *c)
{
    const struct log_view *v = c->v;
    const struct rinfo *ri = c->ri;
    c->built = true;
    c->l.n = 0;
    for (uint32_t i = 0; i < ri->n_idx; i++) {
        lset_push(&c->l, ri->idx[i].n, ri->idx[i].nn, ri->idx[i].v, ri->idx[i].vn, LC_INDEX);
    }
    if (!c->s->need_labels) {
        return;
    }
    if (c->s->attrs) {
        struct val_rd r = {v->attrs.p, v->attrs.p + v->attrs.len};
        for (uint32_t i = 0; i < v->attrs.count; i++) {
            const char *k;
            size_t kn;
            struct val av;
            if (val_rd_kv(&r, &k, &kn, &av) != 0) {
                break;
            }
            if (v->event_name.len > 0 && name_eq(k, kn, "event_name")) {
                continue;
            }
            push_attr(&c->l, c->scratch, &c->sb, NULL, 0, k, kn, &av, LC_SM, 0);
        }
    }
    if (v->time_ns != 0 && v->observed_ns != 0) {
        push_num(c, "observed_timestamp", v->observed_ns);
    }
    if (v->severity_number != 0) {
        char num[16];
        int n = snprintf(num, sizeof(num), "%d", v->severity_number);
        lset_push(&c->l, "severity_number", 15, scratch_dup(c, num, (size_t)n), (size_t)n, LC_SM);
    }
    if (v->severity_text.len > 0) {
        lset_push(&c->l, "severity_text", 13, v->severity_text.p, v->severity_text.len, LC_SM);
    }
    if (v->dropped_attrs != 0) {
        push_num(c, "dropped_attributes_count", v->dropped_attrs);
    }
    if (v->flags != 0) {
        push_num(c, "flags", v->flags);
    }
    if (v->has_trace_id) {
        c->sb.n = 0;
        sb_hex(&c->sb, v->trace_id, 16);
        size_t n;
        const char *p = sb_take(c, &n);
        lset_push(&c->l, "trace_id", 8, p, n, LC_SM);
    }
    if (v->has_span_id) {
        c->sb.n = 0;
        sb_hex(&c->sb, v->span_id, 8);
        size_t n;
        const char *p = sb_take(c, &n);
        lset_push(&c->l, "span_id", 7, p, n, LC_SM);
    }
    if (v->event_name.len > 0) {
        lset_push(&c->l, "event_name", 10, v->event_name.p, v->event_name.len, LC_SM);
    }
    for (uint32_t i = 0; i < ri->n_sm; i++) {
        lset_push(&c->l, ri->sm[i].n, ri->sm[i].nn, ri->sm[i].v, ri->sm[i].vn, LC_SM);
    }
    const struct sinfo *si = src_sinfo(c, v->scope);
    if (si != NULL) {
        for (uint32_t i = 0; i < si->n_sm; i++) {
            lset_push(&c->l, si->sm[i].n, si->sm[i].nn, si->sm[i].v, si->sm[i].vn, LC_SM);
        }
    }
    /* detected_level: an existing one is normalised; else the first level
     * name among the labels; else severity_number; else unknown. */
    struct lbl *dl = lset_get(&c->l, "detected_level", 14);
    if (dl != NULL) {
        const char *o;
        size_t on;
        normalize_level(dl->v, dl->vn, &o, &on);
        dl->v = o;
        dl->vn = (uint32_t)on;
        return;
    }
    const char *lv = NULL;
    size_t ln = 0;
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]) && lv == NULL; i++) {
        struct lbl *l = lset_get(&c->l, level_names[i], strlen(level_names[i]));
        if (l != NULL && l->vn > 0) {
            normalize_level(l->v, l->vn, &lv, &ln);
        }
    }
    if (lv == NULL) {
        lv = level_of_number(v->severity_number);
        if (lv == NULL) {
            lv = "unknown";
        }
        ln = strlen(lv);
    }
    lset_push(&c->l, "detected_level", 14, lv, ln, LC_SM);
}

/* ---- pipeline stages ---------------------------------------------------------- */

static void set_label(struct rctx *c, const char *n, size_t nn, const char *v, size_t vn,
                      uint8_t cat)
{
    struct lbl *l = lset_get(&c->l, n, nn);
    if (l != NULL) {
        l->v = v;
        l->vn = (uint32_t)vn;
        l->cat = cat;
        return;
    }
    lset_push(&c->l, n, nn, v, vn, cat);
}

static uint64_t hash_bytes(const char *p, size_t n);

static void lidx_insert(struct lidx *x, const struct lset *s, uint32_t i)
{
    const struct lbl *l = &s->a[i];
    uint32_t mask = x->cap - 1;
    for (uint32_t k = (uint32_t)hash_bytes(l->n, l->nn) & mask;; k = (k + 1) & mask) {
        uint32_t j = x->slot[k];
        if (j == 0) {
            x->slot[k] = i + 1;
            return;
        }
        const struct lbl *o = &s->a[j - 1];
        if (o->nn == l->nn && memcmp(o->n, l->n, l->nn) == 0) {
            return; /* the first of a name stays */
        }
    }
}

/* lset_get(s, ...) in O(1) once |s| has LIDX_MIN labels, through |x|
 * (which must be off, or on over this |s| with only pushes since). */
static struct lbl *lidx_lookup(struct lidx *x, const struct lset *s, const char *n, size_t nn)
{
    if (!x->on && s->n < LIDX_MIN) {
        return lset_get(s, n, nn);
    }
    if (!x->on || x->n > s->n || (size_t)s->n * 2 > x->cap) {
        /* (re)build; keeps the load factor at most 1/2 */
        uint32_t cap = x->cap ? x->cap : 2 * LIDX_MIN;
        while ((size_t)s->n * 2 > cap) {
            cap *= 2;
        }
        if (cap != x->cap) {
            uint32_t *slot = realloc(x->slot, (size_t)cap * sizeof(*slot));
            if (slot == NULL) {
                x->on = false;
                return lset_get(s, n, nn);
            }
            x->slot = slot;
            x->cap = cap;
        }
        memset(x->slot, 0, (size_t)x->cap * sizeof(*x->slot));
        x->n = 0;
        x->on = true;
    }
    for (; x->n < s->n; x->n++) {
        lidx_insert(x, s, x->n);
    }
    uint32_t mask = x->cap - 1;
    for (uint32_t k = (uint32_t)hash_bytes(n, nn) & mask;; k = (k + 1) & mask) {
        uint32_t j = x->slot[k];
        if (j == 0) {
            return NULL;
        }
        struct lbl *o = &s->a[j - 1];
        if (o->nn == nn && memcmp(o->n, n, nn) == 0) {
            return o;
        }
    }
}

static struct lbl *lidx_get(struct rctx *c, const char *n, size_t nn)
{
    return lidx_lookup(&c->idx, &c->l, n, nn);
}

/* A parser's label: a name taken by a stream label or structured metadata
 * becomes <name>_extracted (FACTS.md C.4). */
static void set_parsed(struct rctx *c, const char *n, size_t nn, const char *v, size_t vn)
{
    struct lbl *l = lidx_get(c, n, nn);
    if (l != NULL && l->cat != LC_PARSED) {
        char buf[600];
        size_t bn = nn < 580 ? nn : 580;
        memcpy(buf, n, bn);
        memcpy(buf + bn, "_extracted", 10);
        bn += 10;
        n = scratch_dup(c, buf, bn);
        nn = bn;
        l = lidx_get(c, n, nn);
    }
    if (l != NULL) {
        l->v = v;
        l->vn = (uint32_t)vn;
        return;
    }
    lset_push(&c->l, n, nn, v, vn, LC_PARSED);
}

static void set_error(struct rctx *c, const char *err, const char *details)
{
    if (lset_get(&c->l, "__error__", 9) != NULL) {
        return; /* the first error stays */
    }
    lset_push(&c->l, "__error__", 9, err, strlen(err), LC_PARSED);
    if (details != NULL) {
        lset_push(&c->l, "__error_details__", 17, details, strlen(details), LC_PARSED);
    }
}

/* Loki's sanitizeLabelKey for parsed keys: trim, [^A-Za-z0-9_] -> _,
 * leading digit -> _ prefix. Into c->sb; returns a scratch copy. */
static const char *parsed_key(struct rctx *c, const char *pre, size_t pn, const char *k, size_t kn,
                              size_t *out_n)
{
    while (kn > 0 && (k[0] == ' ' || k[0] == '\t')) {
        k++;
        kn--;
    }
    while (kn > 0 && (k[kn - 1] == ' ' || k[kn - 1] == '\t')) {
        kn--;
    }
    c->sb.n = 0;
    if (pn > 0) {
        sb_add(&c->sb, pre, pn);
        sb_addc(&c->sb, '_');
    } else if (kn > 0 && k[0] >= '0' && k[0] <= '9') {
        sb_addc(&c->sb, '_');
    }
    for (size_t i = 0; i < kn; i++) {
        unsigned char ch = (unsigned char)k[i];
        sb_addc(&c->sb, is_alnum(ch) || ch == '_' ? (char)ch : '_');
    }
    return sb_take(c, out_n);
}

/* -- JSON -- */

struct jp {
    const char *p, *e;
};

static void jws(struct jp *j)
{
    while (j->p < j->e && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) {
        j->p++;
    }
}

static int hexv(char ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

static void sb_utf8(struct sbuf *b, uint32_t cp)
{
    if (cp < 0x80) {
        sb_addc(b, (char)cp);
    } else if (cp < 0x800) {
        sb_addc(b, (char)(0xc0 | (cp >> 6)));
        sb_addc(b, (char)(0x80 | (cp & 63)));
    } else if (cp < 0x10000) {
        sb_addc(b, (char)(0xe0 | (cp >> 12)));
        sb_addc(b, (char)(0x80 | ((cp >> 6) & 63)));
        sb_addc(b, (char)(0x80 | (cp & 63)));
    } else {
        sb_addc(b, (char)(0xf0 | (cp >> 18)));
        sb_addc(b, (char)(0x80 | ((cp >> 12) & 63)));
        sb_addc(b, (char)(0x80 | ((cp >> 6) & 63)));
        sb_addc(b, (char)(0x80 | (cp & 63)));
    }
}

static int u4(const char *p, const char *e, uint32_t *out)
{
    if (e - p < 4) {
        return -1;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexv(p[i]);
        if (h < 0) {
            return -1;
        }
        v = v << 4 | (uint32_t)h;
    }
    *out = v;
    return 0;
}

/* A JSON string at j->p (the opening quote); decoded into a scratch copy
 * (or borrowed when it has no escapes). */
static int jstr(struct rctx *c, struct jp *j, const char **out, size_t *n)
{
    if (j->p >= j->e || *j->p != '"') {
        return -1;
    }
    const char *s = ++j->p;
    bool esc = false;
    while (j->p < j->e && *j->p != '"') {
        if (*j->p == '\\') {
            esc = true;
            j->p++;
        }
        j->p++;
    }
    if (j->p >= j->e) {
        return -1;
    }
    const char *end = j->p++;
    if (!esc) {
        *out = s;
        *n = (size_t)(end - s);
        return 0;
    }
    c->sb.n = 0;
    for (const char *p = s; p < end; p++) {
        if (*p != '\\') {
            sb_addc(&c->sb, *p);
            continue;
        }
        p++;
        switch (*p) {
        case 'n':
            sb_addc(&c->sb, '\n');
            break;
        case 't':
            sb_addc(&c->sb, '\t');
            break;
        case 'r':
            sb_addc(&c->sb, '\r');
            break;
        case 'b':
            sb_addc(&c->sb, '\b');
            break;
        case 'f':
            sb_addc(&c->sb, '\f');
            break;
        case 'u': {
            uint32_t cp;
            if (u4(p + 1, end, &cp) < 0) {
                return -1;
            }
            p += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && end - p > 6 && p[1] == '\\' && p[2] == 'u') {
                uint32_t lo;
                if (u4(p + 3, end, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    p += 6;
                }
            }
            if (cp >= 0xd800 && cp < 0xe000) {
                cp = 0xfffd;
            }
            sb_utf8(&c->sb, cp);
            break;
        }
        default:
            sb_addc(&c->sb, *p);
            break;
        }
    }
    *out = sb_take(c, n);
    return 0;
}

static int jskip(struct rctx *c, struct jp *j, int depth);

static int jskip_container(struct rctx *c, struct jp *j, char close, int depth)
{
    j->p++;
    jws(j);
    if (j->p < j->e && *j->p == close) {
        j->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            const char *k;
            size_t kn;
            jws(j);
            if (jstr(c, j, &k, &kn) < 0) {
                return -1;
            }
            jws(j);
            if (j->p >= j->e || *j->p != ':') {
                return -1;
            }
            j->p++;
        }
        if (jskip(c, j, depth + 1) < 0) {
            return -1;
        }
        jws(j);
        if (j->p >= j->e) {
            return -1;
        }
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p == close) {
            j->p++;
            return 0;
        }
        return -1;
    }
}

/* Skips one value; a scalar's text is left in [start, j->p). */
static int jskip(struct rctx *c, struct jp *j, int depth)
{
    if (depth > 64) {
        return -1;
    }
    jws(j);
    if (j->p >= j->e) {
        return -1;
    }
    switch (*j->p) {
    case '{':
        return jskip_container(c, j, '}', depth);
    case '[':
        return jskip_container(c, j, ']', depth);
    case '"': {
        const char *s;
        size_t n;
        return jstr(c, j, &s, &n);
    }
    default: {
        const char *s = j->p;
        while (j->p < j->e &&
               (isalnum((unsigned char)*j->p) || *j->p == '-' || *j->p == '+' || *j->p == '.')) {
            j->p++;
        }
        return j->p > s ? 0 : -1;
    }
    }
}

/* | json (all fields): every leaf string/number/bool becomes a label,
 * objects flatten with _, arrays and null are skipped. */
static int json_obj(struct rctx *c, struct jp *j, const char *pre, size_t pn, int depth)
{
    if (depth > 64) {
        return -1;
    }
    jws(j);
    if (j->p >= j->e || *j->p != '{') {
        return -1;
    }
    j->p++;
    jws(j);
    if (j->p < j->e && *j->p == '}') {
        j->p++;
        return 0;
    }
    for (;;) {
        const char *k;
        size_t kn;
        jws(j);
        if (jstr(c, j, &k, &kn) < 0) {
            return -1;
        }
        size_t nn;
        const char *name = parsed_key(c, pre, pn, k, kn, &nn);
        jws(j);
        if (j->p >= j->e || *j->p != ':') {
            return -1;
        }
        j->p++;
        jws(j);
        if (j->p >= j->e) {
            return -1;
        }
        char ch = *j->p;
        if (ch == '{') {
            if (json_obj(c, j, name, nn, depth + 1) < 0) {
                return -1;
            }
        } else if (ch == '"') {
            const char *v;
            size_t vn;
            if (jstr(c, j, &v, &vn) < 0) {
                return -1;
            }
            set_parsed(c, name, nn, v, vn);
        } else if (ch == '[' || ch == 'n') {
            if (jskip(c, j, depth + 1) < 0) {
                return -1;
            }
        } else {
            const char *s = j->p;
            if (jskip(c, j, depth + 1) < 0) {
                return -1;
            }
            set_parsed(c, name, nn, s, (size_t)(j->p - s));
        }
        jws(j);
        if (j->p >= j->e) {
            return -1;
        }
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p == '}') {
            j->p++;
            return 0;
        }
        return -1;
    }
}

/* Follows a json path from the value at j->p; leaves j->p at the target. */
static int json_path(struct rctx *c, struct jp *j, const struct logql_json_step *st, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        jws(j);
        if (j->p >= j->e) {
            return -1;
        }
        if (st[i].key.s != NULL) {
            if (*j->p != '{') {
                return -1;
            }
            j->p++;
            bool found = false;
            for (;;) {
                jws(j);
                if (j->p < j->e && *j->p == '}') {
                    return -1;
                }
                const char *k;
                size_t kn;
                if (jstr(c, j, &k, &kn) < 0) {
                    return -1;
                }
                jws(j);
                if (j->p >= j->e || *j->p != ':') {
                    return -1;
                }
                j->p++;
                if (kn == st[i].key.n && memcmp(k, st[i].key.s, kn) == 0) {
                    found = true;
                    break;
                }
                if (jskip(c, j, 0) < 0) {
                    return -1;
                }
                jws(j);
                if (j->p < j->e && *j->p == ',') {
                    j->p++;
                    continue;
                }
                return -1;
            }
            if (!found) {
                return -1;
            }
        } else {
            if (*j->p != '[') {
                return -1;
            }
            j->p++;
            for (int64_t k = 0; k < st[i].index; k++) {
                jws(j);
                if (j->p < j->e && *j->p == ']') {
                    return -1;
                }
                if (jskip(c, j, 0) < 0) {
                    return -1;
                }
                jws(j);
                if (j->p >= j->e || *j->p != ',') {
                    return -1;
                }
                j->p++;
            }
            jws(j);
            if (j->p < j->e && *j->p == ']') {
                return -1;
            }
        }
    }
    jws(j);
    return 0;
}

static void stage_json(struct rctx *c, const struct logql_stage *st)
{
    struct jp j = {c->line, c->line + c->line_n};
    if (st->n_params == 0) {
        size_t before = c->l.n;
        jws(&j);
        if (j.p >= j.e || *j.p != '{') {
            set_error(c, "JSONParserErr",
                      "Value looks like object, but can't find closing '}' symbol");
            return;
        }
        if (json_obj(c, &j, NULL, 0, 0) < 0) {
            (void)before;
            set_error(c, "JSONParserErr", "malformed JSON");
        }
        return;
    }
    for (size_t i = 0; i < st->n_params; i++) {
        const struct logql_param *prm = &st->params[i];
        struct jp k = {c->line, c->line + c->line_n};
        if (json_path(c, &k, prm->path, prm->n_path) < 0 || k.p >= k.e) {
            continue;
        }
        const char *v;
        size_t vn;
        if (*k.p == '"') {
            if (jstr(c, &k, &v, &vn) < 0) {
                continue;
            }
        } else if (*k.p == 'n') {
            v = "";
            vn = 0;
        } else {
            const char *s = k.p;
            if (jskip(c, &k, 0) < 0) {
                continue;
            }
            v = s;
            vn = (size_t)(k.p - s);
        }
        set_parsed(c, prm->name.s, prm->name.n, v, vn);
    }
}

/* | unpack: top-level string fields become labels; _entry replaces the line. */
static void stage_unpack(struct rctx *c)
{
    struct jp j = {c->line, c->line + c->line_n};
    jws(&j);
    if (j.p >= j.e || *j.p != '{') {
        set_error(c, "JSONParserErr", "not a JSON object");
        return;
    }
    j.p++;
    jws(&j);
    if (j.p < j.e && *j.p == '}') {
        return;
    }
    const char *entry = NULL;
    size_t entry_n = 0;
    for (;;) {
        const char *k;
        size_t kn;
        jws(&j);
        if (jstr(c, &j, &k, &kn) < 0) {
            break;
        }
        k = scratch_dup(c, k, kn);
        jws(&j);
        if (j.p >= j.e || *j.p != ':') {
            break;
        }
        j.p++;
        jws(&j);
        if (j.p < j.e && *j.p == '"') {
            const char *v;
            size_t vn;
            if (jstr(c, &j, &v, &vn) < 0) {
                break;
            }
            if (name_eq(k, kn, "_entry")) {
                entry = v;
                entry_n = vn;
            } else {
                size_t nn;
                const char *name = parsed_key(c, NULL, 0, k, kn, &nn);
                set_parsed(c, name, nn, v, vn);
            }
        } else if (jskip(c, &j, 0) < 0) {
            break;
        }
        jws(&j);
        if (j.p < j.e && *j.p == ',') {
            j.p++;
            continue;
        }
        break;
    }
    if (entry != NULL) {
        c->line = entry;
        c->line_n = entry_n;
    }
}

/* -- logfmt -- */

static bool lf_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static void stage_logfmt(struct rctx *c, const struct logql_stage *st)
{
    const char *p = c->line, *e = c->line + c->line_n;
    while (p < e) {
        while (p < e && lf_space(*p)) {
            p++;
        }
        if (p >= e) {
            break;
        }
        const char *k = p;
        while (p < e && !lf_space(*p) && *p != '=' && *p != '"') {
            p++;
        }
        size_t kn = (size_t)(p - k);
        const char *v = "";
        size_t vn = 0;
        bool bad = kn == 0;
        if (p < e && *p == '=') {
            p++;
            if (p < e && *p == '"') {
                const char *s = ++p;
                bool esc = false;
                while (p < e && *p != '"') {
                    if (*p == '\\') {
                        esc = true;
                        p++;
                    }
                    p++;
                }
                if (p >= e) {
                    bad = true;
                    v = s;
                    vn = (size_t)(e - s);
                } else {
                    if (!esc) {
                        v = s;
                        vn = (size_t)(p - s);
                    } else {
                        struct jp j = {s - 1, p + 1};
                        if (jstr(c, &j, &v, &vn) < 0) {
                            bad = true;
                        }
                    }
                    p++;
                }
            } else {
                const char *s = p;
                while (p < e && !lf_space(*p)) {
                    if (*p == '"' || *p == '=') {
                        bad = true;
                    }
                    p++;
                }
                v = s;
                vn = (size_t)(p - s);
            }
        } else if (p < e && *p == '"') {
            bad = true;
            while (p < e && !lf_space(*p)) {
                p++;
            }
        }
        if (bad) {
            if (st->logfmt_strict) {
                set_error(c, "LogfmtParserErr", "malformed logfmt pair");
                return;
            }
            continue;
        }
        if (vn == 0 && !st->logfmt_keep_empty) {
            continue;
        }
        if (st->n_params > 0) {
            for (size_t i = 0; i < st->n_params; i++) {
                const struct logql_param *prm = &st->params[i];
                const struct logql_str *want = prm->value.s != NULL ? &prm->value : &prm->name;
                if (want->n == kn && memcmp(want->s, k, kn) == 0) {
                    set_parsed(c, prm->name.s, prm->name.n, v, vn);
                }
            }
            continue;
        }
        size_t nn;
        const char *name = parsed_key(c, NULL, 0, k, kn, &nn);
        set_parsed(c, name, nn, v, vn);
    }
}

/* -- pattern -- */

static void stage_pattern(struct rctx *c, const struct logql_pattern *pt)
{
    const char *s = c->line;
    size_t n = c->line_n, off = 0;
    const struct logql_pattern_part *pending = NULL;
    size_t cap_start = 0;
    for (size_t k = 0; k < pt->n_parts; k++) {
        const struct logql_pattern_part *part = &pt->parts[k];
        if (part->lit.n > 0) {
            const char *hit = memmem(s + off, n - off, part->lit.s, part->lit.n);
            if (hit == NULL) {
                return;
            }
            size_t at = (size_t)(hit - s);
            if (pending != NULL && pending->named) {
                set_parsed(c, pending->capture.s, pending->capture.n, s + cap_start,
                           at - cap_start);
            }
            pending = NULL;
            off = at + part->lit.n;
        }
        if (part->capture.s != NULL) {
            pending = part;
            cap_start = off;
        }
    }
    if (pending != NULL && pending->named) {
        set_parsed(c, pending->capture.s, pending->capture.n, s + cap_start, n - cap_start);
    }
}

/* -- label filters -- */

/* An address as 16 bytes (IPv4 mapped into ::ffff:0:0/96). */
static bool ip_parse(const char *s, size_t n, uint8_t out[16], bool *v4)
{
    char buf[64];
    if (n == 0 || n >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, out + 12) == 1) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        *v4 = true;
        return true;
    }
    *v4 = false;
    return inet_pton(AF_INET6, buf, out) == 1;
}

/* Loki's ip("..."): an address, a CIDR prefix or a range "a-b". -EINVAL
 * when the argument is none of them. */
static int ip_match(const struct logql_str *pat, const char *v, size_t vn)
{
    uint8_t a[16], lo[16], hi[16];
    bool v4, p4;
    if (v == NULL || !ip_parse(v, vn, a, &v4)) {
        return 0;
    }
    const char *slash = memchr(pat->s, '/', pat->n);
    const char *dash = memchr(pat->s, '-', pat->n);
    if (slash != NULL) {
        if (!ip_parse(pat->s, (size_t)(slash - pat->s), lo, &p4)) {
            return -EINVAL;
        }
        char *end;
        long bits = strtol(slash + 1, &end, 10);
        if (end != pat->s + pat->n || bits < 0 || bits > (p4 ? 32 : 128)) {
            return -EINVAL;
        }
        if (p4) {
            bits += 96;
        }
        for (long i = 0; i < bits; i++) {
            uint8_t m = (uint8_t)(0x80 >> (i % 8));
            if ((a[i / 8] & m) != (lo[i / 8] & m)) {
                return 0;
            }
        }
        return 1;
    }
    if (dash != NULL) {
        if (!ip_parse(pat->s, (size_t)(dash - pat->s), lo, &p4) ||
            !ip_parse(dash + 1, (size_t)(pat->s + pat->n - dash - 1), hi, &p4)) {
            return -EINVAL;
        }
        return memcmp(a, lo, 16) >= 0 && memcmp(a, hi, 16) <= 0;
    }
    if (!ip_parse(pat->s, pat->n, lo, &p4)) {
        return -EINVAL;
    }
    return memcmp(a, lo, 16) == 0;
}

static bool lf_eval(struct rctx *c, const struct logql_lf *lf)
{
    switch (lf->kind) {
    case LOGQL_LF_AND:
        return lf_eval(c, lf->left) && lf_eval(c, lf->right);
    case LOGQL_LF_OR:
        return lf_eval(c, lf->left) || lf_eval(c, lf->right);
    default:
        break;
    }
    const struct lbl *l = lset_get(&c->l, lf->m.name.s, lf->m.name.n);
    if (l != NULL && l->vn == 0) {
        l = NULL; /* an empty label is no label */
    }
    if (lf->kind == LOGQL_LF_IP) {
        int m = ip_match(&lf->ip, l ? l->v : NULL, l ? l->vn : 0);
        return lf->cmp == LOGQL_CMP_NE ? m == 0 : m == 1;
    }
    int rc = logql_lf_test(lf, l ? l->v : NULL, l ? l->vn : 0);
    if (rc < 0) {
        set_error(c, "LabelFilterErr", "cannot parse the label value for the filter");
        return true;
    }
    return rc == 1;
}

static void stage_drop(struct rctx *c, const struct logql_stage *st)
{
    for (size_t k = 0; k < st->n_labels; k++) {
        const struct logql_matcher *m = &st->labels[k];
        for (uint32_t i = 0; i < c->l.n;) {
            struct lbl *l = &c->l.a[i];
            if (l->nn == m->name.n && memcmp(l->n, m->name.s, l->nn) == 0 &&
                (m->value.s == NULL || logql_match_label(m, l->v, l->vn))) {
                if (name_eq(l->n, l->nn, "__error__")) {
                    /* dropping __error__ also drops its details */
                    struct lbl *d = lset_get(&c->l, "__error_details__", 17);
                    if (d != NULL && (m->value.s == NULL)) {
                        lset_del(&c->l, (uint32_t)(d - c->l.a));
                        if (d < l) {
                            i--;
                        }
                    }
                }
                lset_del(&c->l, i);
                continue;
            }
            i++;
        }
    }
}

static void stage_keep(struct rctx *c, const struct logql_stage *st)
{
    for (uint32_t i = 0; i < c->l.n;) {
        struct lbl *l = &c->l.a[i];
        bool keep = name_eq(l->n, l->nn, "__error__") || name_eq(l->n, l->nn, "__error_details__");
        for (size_t k = 0; k < st->n_labels && !keep; k++) {
            const struct logql_matcher *m = &st->labels[k];
            keep = l->nn == m->name.n && memcmp(l->n, m->name.s, l->nn) == 0 &&
                   (m->value.s == NULL || logql_match_label(m, l->v, l->vn));
        }
        if (!keep) {
            lset_del(&c->l, i);
            continue;
        }
        i++;
    }
}

/* Templates: literal text, {{.label}} and {{__line__}} (spaces allowed
 * inside the braces). Returns false for anything else (checked at plan
 * time, so at run time it never fails). */
static bool tmpl_next(const char **p, const char *e, const char **name, size_t *nn, bool *is_line)
{
    const char *s = *p + 2;
    while (s < e && *s == ' ') {
        s++;
    }
    const char *end = memmem(s, (size_t)(e - s), "}}", 2);
    if (end == NULL) {
        return false;
    }
    const char *t = end;
    while (t > s && t[-1] == ' ') {
        t--;
    }
    *is_line = false;
    if ((size_t)(t - s) == 8 && memcmp(s, "__line__", 8) == 0) {
        *is_line = true;
    } else if (t - s >= 2 && *s == '.') {
        for (const char *q = s + 1; q < t; q++) {
            if (!is_alnum((unsigned char)*q) && *q != '_') {
                return false;
            }
        }
        *name = s + 1;
        *nn = (size_t)(t - s - 1);
    } else {
        return false;
    }
    *p = end + 2;
    return true;
}

static bool tmpl_ok(const struct logql_str *t)
{
    const char *p = t->s, *e = t->s + t->n;
    while (p < e) {
        const char *o = memmem(p, (size_t)(e - p), "{{", 2);
        if (o == NULL) {
            return true;
        }
        const char *name;
        size_t nn;
        bool is_line;
        p = o;
        if (!tmpl_next(&p, e, &name, &nn, &is_line)) {
            return false;
        }
    }
    return true;
}

static const char *tmpl_render(struct rctx *c, const struct logql_str *t, size_t *n)
{
    const char *p = t->s, *e = t->s + t->n;
    c->sb.n = 0;
    while (p < e) {
        const char *o = memmem(p, (size_t)(e - p), "{{", 2);
        if (o == NULL) {
            sb_add(&c->sb, p, (size_t)(e - p));
            break;
        }
        sb_add(&c->sb, p, (size_t)(o - p));
        const char *name = NULL;
        size_t nn = 0;
        bool is_line = false;
        p = o;
        if (!tmpl_next(&p, e, &name, &nn, &is_line)) {
            break;
        }
        if (is_line) {
            sb_add(&c->sb, c->line, c->line_n);
        } else {
            const struct lbl *l = lset_get(&c->l, name, nn);
            if (l != NULL) {
                sb_add(&c->sb, l->v, l->vn);
            }
        }
    }
    return sb_take(c, n);
}

static void stage_label_format(struct rctx *c, const struct logql_stage *st)
{
    for (size_t i = 0; i < st->n_params; i++) {
        const struct logql_param *prm = &st->params[i];
        if (prm->is_template) {
            size_t vn;
            const char *v = tmpl_render(c, &prm->value, &vn);
            set_label(c, prm->name.s, prm->name.n, v, vn, LC_PARSED);
            continue;
        }
        struct lbl *src = lset_get(&c->l, prm->value.s, prm->value.n);
        if (src == NULL) {
            continue;
        }
        const char *v = src->v;
        size_t vn = src->vn;
        if (!(prm->name.n == prm->value.n && memcmp(prm->name.s, prm->value.s, prm->name.n) == 0)) {
            lset_del(&c->l, (uint32_t)(src - c->l.a));
        }
        set_label(c, prm->name.s, prm->name.n, v, vn, LC_PARSED);
    }
}

static void stage_decolorize(struct rctx *c)
{
    const char *s = c->line;
    size_t n = c->line_n;
    if (memchr(s, 0x1b, n) == NULL) {
        return;
    }
    c->sb.n = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == 0x1b && i + 1 < n && s[i + 1] == '[') {
            size_t j = i + 2;
            while (j < n && !((unsigned char)s[j] >= 0x40 && (unsigned char)s[j] <= 0x7e)) {
                j++;
            }
            i = j;
            continue;
        }
        sb_addc(&c->sb, s[i]);
    }
    c->line = sb_take(c, &c->line_n);
}

static void stage_unwrap(struct rctx *c, const struct logql_stage *st)
{
    const struct lbl *l = lset_get(&c->l, st->unwrap_label.s, st->unwrap_label.n);
    c->has_unwrap_val = false;
    if (l == NULL) {
        set_error(c, "SampleExtractionErr", "the unwrapped label is missing");
        return;
    }
    double d = 0;
    int rc = -EINVAL;
    switch (st->unwrap_conv) {
    case LOGQL_CONV_NONE: {
        char buf[64];
        if (l->vn > 0 && l->vn < sizeof(buf)) {
            memcpy(buf, l->v, l->vn);
            buf[l->vn] = '\0';
            char *end;
            d = strtod(buf, &end);
            rc = *end == '\0' ? 0 : -EINVAL;
        }
        break;
    }
    case LOGQL_CONV_BYTES:
        rc = qlex_parse_bytes(l->v, l->vn, &d);
        break;
    case LOGQL_CONV_DURATION:
    case LOGQL_CONV_DURATION_SECONDS: {
        int64_t ns;
        rc = qlex_parse_duration(l->v, l->vn, false, &ns);
        d = (double)ns / 1e9;
        break;
    }
    }
    if (rc != 0) {
        set_error(c, "SampleExtractionErr", "the unwrapped label does not parse as a number");
        return;
    }
    c->has_unwrap_val = true;
    c->unwrap_val = d;
}

/* Does attribute key |k| become label name |n| (logs_label_name)? */
static bool key_is_name(const char *k, size_t kn, const char *n, size_t nn)
{
    if (kn == nn) {
        /* same length: no run was collapsed and no prefix added, unless the
         * key starts with a digit or is __wrapped__ (then compare fully) */
        bool plain =
            !(kn > 0 && k[0] >= '0' && k[0] <= '9') &&
            !(kn > 4 && k[0] == '_' && k[1] == '_' && k[kn - 1] == '_' && k[kn - 2] == '_');
        if (plain) {
            bool prev_special = false;
            for (size_t i = 0; i < kn; i++) {
                bool sp = !is_alnum((unsigned char)k[i]);
                if (sp ? (n[i] != '_' || prev_special) : n[i] != k[i]) {
                    return false;
                }
                prev_special = sp;
            }
            return true;
        }
    } else if (nn > kn + 4) {
        return false;
    } else {
        /* a different length needs a run of specials or a digit prefix */
        bool odd = kn > 0 && k[0] >= '0' && k[0] <= '9';
        for (size_t i = 1; i < kn && !odd; i++) {
            odd = !is_alnum((unsigned char)k[i]) && !is_alnum((unsigned char)k[i - 1]);
        }
        if (!odd) {
            return false;
        }
    }
    char buf[600];
    size_t bn = logs_label_name(k, kn, buf, sizeof(buf));
    return bn == nn && memcmp(buf, n, nn) == 0;
}

/* One label of the current row by name without building the set.
 * 1 found (*v, *vn), 0 absent, -1 cannot tell cheaply (build the set). */
static int lazy_get(struct rctx *c, const char *n, size_t nn, const char **v, size_t *vn,
                    double *num, bool *has_num)
{
    *has_num = false;
    const struct rinfo *ri = c->ri;
    const struct log_view *lv = c->v;
    for (uint32_t i = 0; i < ri->n_idx; i++) {
        if (ri->idx[i].nn == nn && memcmp(ri->idx[i].n, n, nn) == 0) {
            *v = ri->idx[i].v;
            *vn = ri->idx[i].vn;
            return 1;
        }
    }
    if (!c->s->need_labels || name_eq(n, nn, "detected_level") || name_eq(n, nn, "__error__") ||
        name_eq(n, nn, "__error_details__")) {
        return -1;
    }
    if (c->s->attrs) {
        struct val_rd r = {lv->attrs.p, lv->attrs.p + lv->attrs.len};
        for (uint32_t i = 0; i < lv->attrs.count; i++) {
            const char *k;
            size_t kn;
            struct val av;
            if (val_rd_kv(&r, &k, &kn, &av) != 0) {
                break;
            }
            if (av.type == VAL_KVLIST) {
                return -1; /* flattened names: let the full build decide */
            }
            if (!key_is_name(k, kn, n, nn) ||
                (lv->event_name.len > 0 && name_eq(k, kn, "event_name"))) {
                continue;
            }
            if (av.type == VAL_STR) {
                *v = av.s;
                *vn = av.n;
            } else if (num != NULL && (av.type == VAL_INT || av.type == VAL_DOUBLE)) {
                /* a numeric filter compares the number itself: its rendering
                 * (ES6 shortest / decimal) parses back to the same double */
                *num = av.type == VAL_INT ? (double)av.i : av.d;
                *has_num = true;
                *v = "";
                *vn = 0;
            } else {
                c->sb.n = 0;
                sb_val_str(&c->sb, &av);
                *v = sb_take(c, vn);
            }
            return 1;
        }
    }
    char nb[24];
    int k = -1;
    if (name_eq(n, nn, "severity_text")) {
        if (lv->severity_text.len == 0) {
            return 0;
        }
        *v = lv->severity_text.p;
        *vn = lv->severity_text.len;
        return 1;
    }
    if (name_eq(n, nn, "severity_number")) {
        if (lv->severity_number == 0) {
            return 0;
        }
        k = snprintf(nb, sizeof(nb), "%d", lv->severity_number);
    } else if (name_eq(n, nn, "observed_timestamp")) {
        if (lv->time_ns == 0 || lv->observed_ns == 0) {
            return 0;
        }
        k = snprintf(nb, sizeof(nb), "%" PRIu64, lv->observed_ns);
    } else if (name_eq(n, nn, "dropped_attributes_count")) {
        if (lv->dropped_attrs == 0) {
            return 0;
        }
        k = snprintf(nb, sizeof(nb), "%u", lv->dropped_attrs);
    } else if (name_eq(n, nn, "flags")) {
        if (lv->flags == 0) {
            return 0;
        }
        k = snprintf(nb, sizeof(nb), "%u", lv->flags);
    } else if (name_eq(n, nn, "trace_id") || name_eq(n, nn, "span_id")) {
        bool trace = nn == 8;
        if (!(trace ? lv->has_trace_id : lv->has_span_id)) {
            return 0;
        }
        c->sb.n = 0;
        sb_hex(&c->sb, trace ? lv->trace_id : lv->span_id, trace ? 16 : 8);
        *v = sb_take(c, vn);
        return 1;
    } else if (name_eq(n, nn, "event_name")) {
        if (lv->event_name.len == 0) {
            return 0;
        }
        *v = lv->event_name.p;
        *vn = lv->event_name.len;
        return 1;
    }
    if (k >= 0) {
        *v = scratch_dup(c, nb, (size_t)k);
        *vn = (size_t)k;
        return 1;
    }
    for (uint32_t i = 0; i < ri->n_sm; i++) {
        if (ri->sm[i].nn == nn && memcmp(ri->sm[i].n, n, nn) == 0) {
            *v = ri->sm[i].v;
            *vn = ri->sm[i].vn;
            return 1;
        }
    }
    const struct sinfo *si = src_sinfo(c, lv->scope);
    if (si != NULL) {
        for (uint32_t i = 0; i < si->n_sm; i++) {
            if (si->sm[i].nn == nn && memcmp(si->sm[i].n, n, nn) == 0) {
                *v = si->sm[i].v;
                *vn = si->sm[i].vn;
                return 1;
            }
        }
    }
    return 0;
}

/* One predicate of lf_eval_lazy, out of line: its frame (some hundred
 * bytes) is not repeated per and/or level of the recursion. */
static bool __attribute__((noinline))
lf_leaf_lazy(struct rctx *c, const struct logql_lf *lf, bool *full)
{
    if (lf->kind == LOGQL_LF_IP) {
        *full = true;
        return false;
    }
    const char *v = NULL;
    size_t vn = 0;
    double num = 0;
    bool has_num = false;
    int got = lazy_get(c, lf->m.name.s, lf->m.name.n, &v, &vn,
                       lf->kind == LOGQL_LF_NUMBER ? &num : NULL, &has_num);
    if (got < 0) {
        *full = true;
        return false;
    }
    if (has_num) {
        if (isnan(num)) {
            *full = true; /* "NaN" parses, but let the general path say so */
            return false;
        }
        switch (lf->cmp) {
        case LOGQL_CMP_EQ:
            return num == lf->num;
        case LOGQL_CMP_NE:
            return num != lf->num;
        case LOGQL_CMP_GT:
            return num > lf->num;
        case LOGQL_CMP_GE:
            return num >= lf->num;
        case LOGQL_CMP_LT:
            return num < lf->num;
        case LOGQL_CMP_LE:
            return num <= lf->num;
        }
        return false;
    }
    if (got == 1 && vn == 0) {
        got = 0; /* an empty label is no label (as lf_eval) */
    }
    int rc = logql_lf_test(lf, got ? v : NULL, got ? vn : 0);
    if (rc < 0) {
        *full = true;
        return false;
    }
    return rc == 1;
}

/* A label filter before any label was built: *full = true when it cannot
 * be decided this way (then the caller builds the labels and uses lf_eval,
 * which also records __error__). */
static bool lf_eval_lazy(struct rctx *c, const struct logql_lf *lf, bool *full)
{
    switch (lf->kind) {
    case LOGQL_LF_AND:
        return lf_eval_lazy(c, lf->left, full) && !*full && lf_eval_lazy(c, lf->right, full);
    case LOGQL_LF_OR:
        return (lf_eval_lazy(c, lf->left, full) && !*full) ||
               (!*full && lf_eval_lazy(c, lf->right, full));
    default:
        return lf_leaf_lazy(c, lf, full);
    }
}

/* The line of the current row: the body, a non-string body as JSON/text. */
static void row_line(struct rctx *c)
{
    const struct log_view *v = c->v;
    if (v->body_type == VAL_STR) {
        c->line = v->body_str.p;
        c->line_n = v->body_str.len;
        return;
    }
    if (v->body_type == VAL_EMPTY) {
        c->line = "";
        c->line_n = 0;
        return;
    }
    struct val_rd r = {v->body_val.p, v->body_val.p + v->body_val.len};
    struct val val;
    c->sb.n = 0;
    if (val_rd_value(&r, &val) == 0) {
        sb_val_str(&c->sb, &val);
    }
    c->line = sb_take(c, &c->line_n);
}

/* Runs the pipeline on the current row. true: the row is kept. */
static bool run_stages(struct rctx *c, const struct logql_log *log)
{
    for (size_t i = 0; i < log->n_stages; i++) {
        const struct logql_stage *st = &log->stages[i];
        c->idx.on = false; /* the last stage may have deleted or moved labels */
        if (st->kind == LOGQL_STAGE_LINE_FILTER) {
            if (!logql_line_filter_match(st, c->line, c->line_n)) {
                return false;
            }
            continue;
        }
        if (!c->built && st->kind == LOGQL_STAGE_LABEL_FILTER) {
            /* before any parser: look the names up without building every
             * label of the row */
            bool full = false;
            bool keep = lf_eval_lazy(c, st->lf, &full);
            if (!full) {
                if (!keep) {
                    return false;
                }
                continue;
            }
        }
        if (!c->built) {
            build_labels(c);
        }
        switch (st->kind) {
        case LOGQL_STAGE_JSON:
            stage_json(c, st);
            break;
        case LOGQL_STAGE_LOGFMT:
            stage_logfmt(c, st);
            break;
        case LOGQL_STAGE_PATTERN:
            stage_pattern(c, &st->pattern);
            break;
        case LOGQL_STAGE_UNPACK:
            stage_unpack(c);
            break;
        case LOGQL_STAGE_DECOLORIZE:
            stage_decolorize(c);
            break;
        case LOGQL_STAGE_LABEL_FILTER:
            if (!lf_eval(c, st->lf)) {
                return false;
            }
            break;
        case LOGQL_STAGE_LINE_FORMAT: {
            size_t n;
            const char *p = tmpl_render(c, &st->text, &n);
            c->line = p;
            c->line_n = n;
            break;
        }
        case LOGQL_STAGE_LABEL_FORMAT:
            stage_label_format(c, st);
            break;
        case LOGQL_STAGE_DROP:
            stage_drop(c, st);
            break;
        case LOGQL_STAGE_KEEP:
            stage_keep(c, st);
            break;
        case LOGQL_STAGE_UNWRAP:
            stage_unwrap(c, st);
            break;
        case LOGQL_STAGE_REGEXP:
        case LOGQL_STAGE_LINE_FILTER:
            break;
        }
    }
    return true;
}

/* ---- planning -------------------------------------------------------------- */

/* The resource attribute key behind an index label name, or NULL. */
static const char *index_key_of(const char *name, size_t n)
{
    char buf[64];
    for (size_t i = 0; i < N_INDEX_KEYS; i++) {
        size_t bn = logs_label_name(index_keys[i], strlen(index_keys[i]), buf, sizeof(buf));
        if (bn == n && memcmp(buf, name, n) == 0) {
            return index_keys[i];
        }
    }
    return NULL;
}

/* Could a non-string attribute render as |v|? Then the string-only bloom
 * may not rule the block out. */
static bool could_be_nonstring(const char *v, size_t n)
{
    if (n == 0) {
        return true;
    }
    if (v[0] == '[' || v[0] == '{' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
        return true;
    }
    return name_eq(v, n, "true") || name_eq(v, n, "false") || name_eq(v, n, "NaN") ||
           name_eq(v, n, "Infinity");
}

/* false: the resource-value bloom says no stream of |b| can match |m|. */
static bool bloom_may_match(blk *b, const struct logql_matcher *m)
{
    if (m->op != LOGQL_MATCH_EQ || could_be_nonstring(m->value.s, m->value.n)) {
        return true;
    }
    const char *key = index_key_of(m->name.s, m->name.n);
    if (key == NULL) {
        if (!name_eq(m->name.s, m->name.n, "service_name")) {
            return true;
        }
        key = "service.name";
    }
    if (blk_may_have_resource_value(b, key, strlen(key), m->value.s, m->value.n)) {
        return true;
    }
    if (strcmp(key, "service.name") != 0) {
        return false;
    }
    /* service_name may also come from a fallback label or be the default */
    if (name_eq(m->value.s, m->value.n, "unknown_service")) {
        return true;
    }
    static const char *const fb[] = {"container.name", "k8s.container.name", "k8s.job.name"};
    for (size_t i = 0; i < 3; i++) {
        if (blk_may_have_resource_value(b, fb[i], strlen(fb[i]), m->value.s, m->value.n)) {
            return true;
        }
    }
    return false;
}

static int add_src(struct scan *s, size_t *cap, struct src **out)
{
    if (s->n_srcs == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        struct src *a = realloc(s->srcs, nc * sizeof(*a));
        if (a == NULL) {
            return -ENOMEM;
        }
        s->srcs = a;
        *cap = nc;
    }
    struct src *src = &s->srcs[s->n_srcs];
    memset(src, 0, sizeof(*src));
    src->a = arena_new(16 << 10);
    if (src->a == NULL) {
        return -ENOMEM;
    }
    s->n_srcs++;
    *out = src;
    return 0;
}

static void src_fini(struct src *src)
{
    arena_free(src->a);
    free(src->vb);
    free(src->ve);
    src->vb = src->ve = NULL;
    free(src->c);
    src->a = NULL;
    src->c = NULL;
}

static void smap_free(struct smap *m);

static void smap_free_samples(struct smap *m);

static void scan_fini(struct scan *s)
{
    for (size_t i = 0; i < s->n_srcs; i++) {
        smap_free_samples(&s->srcs[i].m);
        src_fini(&s->srcs[i]);
        smap_free(&s->srcs[i].m);
    }
    free(s->srcs);
    s->srcs = NULL;
    s->n_srcs = 0;
}

/* Candidate sources for [s->lo, s->hi). */
static int scan_plan(struct scan *s)
{
    struct query *q = s->q;
    size_t cap = 0;
    size_t n_needles = 0;
    const struct logql_str *needles = logql_log_needles(s->log, &n_needles);
    for (size_t i = 0; i < q->c.n_src; i++) {
        struct qctx_src *qs = &q->c.src[i];
        q->c.st.blocks_considered++;
        if (qs->rows == 0 || (qs->b != NULL && (qs->tmax < s->lo || qs->tmin >= s->hi))) {
            q->c.st.blocks_skipped_zone++;
            continue;
        }
        struct src *src;
        if (qs->b == NULL) {
            if (add_src(s, &cap, &src) < 0) {
                return -ENOMEM;
            }
            src->qs = qs;
            continue;
        }
        bool skip = false;
        for (size_t k = 0; k < n_needles && !skip; k++) {
            skip = !blk_may_have_token(qs->b, needles[k].s, needles[k].n);
        }
        for (size_t k = 0; k < s->log->n_matchers && !skip; k++) {
            skip = !bloom_may_match(qs->b, &s->log->matchers[k]);
        }
        if (skip) {
            q->c.st.blocks_skipped_bloom++;
            continue;
        }
        if (add_src(s, &cap, &src) < 0) {
            return -ENOMEM;
        }
        src->qs = qs;
        if (src_rinfo_all(src, s->log) < 0) {
            return -ENOMEM;
        }
        bool any = false;
        for (uint32_t r = 0; r < src->n_ri && !any; r++) {
            any = src->ri[r].done && src->ri[r].match;
        }
        if (!any) {
            q->c.st.blocks_skipped_dict++;
            src_fini(src);
            s->n_srcs--;
            continue;
        }
        qctx_charge(&q->c, (uint64_t)arena_footprint(src->a));
    }
    return 0;
}

/* ---- scanning ------------------------------------------------------------------ */

static int rctx_init(struct rctx *c, struct scan *s, struct src *src)
{
    memset(c, 0, sizeof(*c));
    c->s = s;
    c->src = src;
    c->scratch = arena_new(64 << 10);
    return c->scratch ? 0 : -ENOMEM;
}

static void rctx_fini(struct rctx *c)
{
    arena_free(c->scratch);
    sb_fini(&c->sb);
    free(c->l.a);
    free(c->idx.slot);
    free(c->eidx.slot);
}

/* Loads the row view and evaluates the row. true: it matched. */
static bool eval_row(struct rctx *c, const struct log_view *v, uint64_t ts)
{
    struct src *src = c->src;
    if (v->resource == NULL || v->resource->id >= src->n_ri) {
        return false;
    }
    const struct rinfo *ri = &src->ri[v->resource->id];
    if (!ri->done || !ri->match) {
        return false;
    }
    arena_reset(c->scratch);
    c->built = false;
    c->l.n = 0;
    c->v = v;
    c->ri = ri;
    c->ts = ts;
    c->has_unwrap_val = false;
    row_line(c);
    c->bytes += c->line_n;
    return run_stages(c, c->s->log);
}

typedef bool (*row_fn)(struct rctx *c, uint64_t row); /* false: stop this source */

static int cand_cmp_fwd(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->ts != y->ts) {
        return x->ts < y->ts ? -1 : 1;
    }
    if (x->src != y->src) {
        return x->src < y->src ? -1 : 1;
    }
    return x->row < y->row ? -1 : x->row > y->row;
}

static int cand_cmp_bwd(const void *a, const void *b)
{
    return cand_cmp_fwd(b, a);
}

static void src_trim(struct scan *s, struct src *src)
{
    if (src->n_c <= s->limit) {
        return;
    }
    qsort(src->c, src->n_c, sizeof(*src->c), s->forward ? cand_cmp_fwd : cand_cmp_bwd);
    src->n_c = s->limit;
}

/* Log query pass 1: remember the match. */
static bool on_log_match(struct rctx *c, uint64_t row)
{
    struct scan *s = c->s;
    struct src *src = c->src;
    if (src->n_c == src->cap_c) {
        size_t nc = src->cap_c ? src->cap_c * 2 : 64;
        struct cand *a = realloc(src->c, nc * sizeof(*a));
        if (a == NULL) {
            c->err = -ENOMEM;
            return false;
        }
        qctx_charge(&s->q->c, (uint64_t)((nc - src->cap_c) * sizeof(*a)));
        src->c = a;
        src->cap_c = nc;
    }
    src->c[src->n_c++] = (struct cand){.ts = c->ts, .src = (uint32_t)(src - s->srcs), .row = row};
    if (src->qs->b != NULL) {
        return src->n_c < s->limit; /* sorted block read in query direction */
    }
    if (src->n_c >= 2 * (size_t)s->limit) {
        src_trim(s, src);
    }
    return true;
}

static bool on_metric_match(struct rctx *c, uint64_t row);

/* Evaluates the rows of |src| in [s->lo, s->hi): every match goes to
 * |on_match|. */
static void scan_src_run(struct scan *s, struct src *src, row_fn on_match)
{
    struct query *q = s->q;
    struct qctx_src *qs = src->qs;
    struct rctx c;
    if (rctx_init(&c, s, src) < 0) {
        qctx_fail(&q->c, -ENOMEM, "out of memory");
        return;
    }
    struct log_view v;
    struct qctx_scan it;
    uint64_t i;
    qctx_add(&q->c.st.blocks_scanned, 1);
    (void)qlex_re_take_limit_hit(); /* a note left by an earlier request on this thread */
    if (qs->b != NULL) {
        blk *b = qs->b;
        int rc = qctx_load(&q->c, qs, s->want);
        const uint64_t *times = rc == 0 ? blk_col_time(b) : NULL;
        if (rc == -EBADMSG) {
            goto out;
        }
        if (rc < 0 || times == NULL) {
            qctx_fail(&q->c, -ENOMEM, "out of memory reading a block");
            goto out;
        }
        uint64_t lo = blk_lower_bound(b, s->lo), hi = blk_lower_bound(b, s->hi);
        qctx_scan_begin(&it, &q->c, lo, hi, s->range == NULL && !s->forward, ROW_CHECK, true);
        while (qctx_scan_next(&it, &i)) {
            rc = qctx_read_log(qs, i, s->want, &v);
            if (rc == -EBADMSG) {
                qctx_src_fail(&q->c, qs, qctx_scan_left(&it));
                break;
            }
            if (rc < 0) {
                continue;
            }
            if (eval_row(&c, &v, times[i]) && !on_match(&c, i)) {
                break;
            }
            if (c.err < 0 || c.l.oom || c.sb.oom) {
                qctx_fail(&q->c, -ENOMEM, "out of memory");
                break;
            }
        }
    } else {
        if (src_rinfo_all(src, s->log) < 0) {
            qctx_fail(&q->c, -ENOMEM, "out of memory");
            goto out;
        }
        qctx_scan_begin(&it, &q->c, 0, qs->rows, false, ROW_CHECK, true);
        while (qctx_scan_next(&it, &i)) {
            if (qctx_read_log(qs, i, 0, &v) < 0) {
                continue;
            }
            uint64_t ts = v.time_ns != 0 ? v.time_ns : v.observed_ns;
            if (ts < s->lo || ts >= s->hi) {
                continue;
            }
            if (eval_row(&c, &v, ts) && !on_match(&c, i)) {
                break;
            }
            if (c.err < 0 || c.l.oom || c.sb.oom) {
                qctx_fail(&q->c, -ENOMEM, "out of memory");
                break;
            }
        }
        if (s->range == NULL) {
            src_trim(s, src);
        }
    }
    qctx_scan_end(&it);
out:
    qctx_add(&q->c.st.bytes_read, c.bytes);
    rctx_fini(&c);
}

static void scan_item_log(void *arg, size_t i)
{
    struct scan *s = arg;
    if (qctx_err(&s->q->c)) {
        return;
    }
    scan_src_run(s, &s->srcs[i], on_log_match);
}

static void scan_item_metric(void *arg, size_t i)
{
    struct scan *s = arg;
    if (qctx_err(&s->q->c)) {
        return;
    }
    scan_src_run(s, &s->srcs[i], on_metric_match);
}

/* ---- what a scan must read ---------------------------------------------------------- */

static bool is_index_name(const char *n, size_t nn)
{
    return name_eq(n, nn, "service_name") || index_key_of(n, nn) != NULL;
}

static void need_name(struct scan *s, const char *n, size_t nn)
{
    if (is_index_name(n, nn) || name_eq(n, nn, "__error__") ||
        name_eq(n, nn, "__error_details__")) {
        return;
    }
    s->need_labels = true;
    for (size_t i = 0; i < sizeof(fixed_sm) / sizeof(fixed_sm[0]); i++) {
        if (name_eq(n, nn, fixed_sm[i])) {
            /* detected_level may come from a record attribute named level */
            if (i == sizeof(fixed_sm) / sizeof(fixed_sm[0]) - 1) {
                s->attrs = true;
            }
            return;
        }
    }
    s->attrs = true;
}

static void need_lf(struct scan *s, const struct logql_lf *lf)
{
    if (lf == NULL) {
        return;
    }
    if (lf->kind == LOGQL_LF_AND || lf->kind == LOGQL_LF_OR) {
        need_lf(s, lf->left);
        need_lf(s, lf->right);
        return;
    }
    need_name(s, lf->m.name.s, lf->m.name.n);
}

/* Decides s->need_labels / s->attrs / s->want. |all|: every label is
 * rendered or makes a series. */
static void plan_needs(struct scan *s, bool all)
{
    const struct logql_log *log = s->log;
    if (all) {
        s->need_labels = s->attrs = true;
    }
    for (size_t i = 0; i < log->n_stages; i++) {
        const struct logql_stage *st = &log->stages[i];
        switch (st->kind) {
        case LOGQL_STAGE_LINE_FILTER:
        case LOGQL_STAGE_DECOLORIZE:
            break;
        case LOGQL_STAGE_LABEL_FILTER:
            need_lf(s, st->lf);
            break;
        case LOGQL_STAGE_DROP:
        case LOGQL_STAGE_KEEP:
            for (size_t k = 0; k < st->n_labels; k++) {
                need_name(s, st->labels[k].name.s, st->labels[k].name.n);
            }
            break;
        case LOGQL_STAGE_UNWRAP:
            need_name(s, st->unwrap_label.s, st->unwrap_label.n);
            break;
        default:
            /* parsers must know every existing name (_extracted), templates
             * may name anything */
            s->need_labels = s->attrs = true;
            break;
        }
    }
    for (size_t i = 0; i < s->n_by; i++) {
        need_name(s, s->by[i].s, s->by[i].n);
    }
    s->want = BLK_ROOT;
    if (s->need_labels) {
        s->want |= BLK_DETAIL;
    }
    if (s->attrs) {
        s->want |= BLK_ATTRS;
    }
}

/* ip() arguments must parse. (A fixed stack of 64 here skipped the rest of
 * longer and/or chains.) Recursion depth: the tree's, bounded by the
 * parser (LOGQL_MAX_OPS). */
static int check_lf_ip(const struct logql_lf *lf, char *err, size_t errlen)
{
    for (; lf != NULL; lf = lf->left) {
        if (lf->kind == LOGQL_LF_IP && ip_match(&lf->ip, "::1", 3) < 0) {
            snprintf(err, errlen, "invalid ip(\"%.*s\"): not an address, prefix or range",
                     (int)lf->ip.n, lf->ip.s);
            return -EINVAL;
        }
        if (lf->kind != LOGQL_LF_AND && lf->kind != LOGQL_LF_OR) {
            break;
        }
        if (check_lf_ip(lf->right, err, errlen) < 0) {
            return -EINVAL;
        }
    }
    return 0;
}

/* Unsupported pieces answer 400 before any block is read. */
static int check_log(const struct logql_log *log, char *err, size_t errlen)
{
    for (size_t i = 0; i < log->n_stages; i++) {
        const struct logql_stage *st = &log->stages[i];
        switch (st->kind) {
        case LOGQL_STAGE_REGEXP:
            snprintf(err, errlen, "the | regexp stage is not supported yet");
            return -EINVAL;
        case LOGQL_STAGE_LINE_FORMAT:
            if (!tmpl_ok(&st->text)) {
                snprintf(err, errlen,
                         "line_format: only literal text, {{.label}} and {{__line__}} are "
                         "supported");
                return -EINVAL;
            }
            break;
        case LOGQL_STAGE_LABEL_FORMAT:
            for (size_t k = 0; k < st->n_params; k++) {
                if (st->params[k].is_template && !tmpl_ok(&st->params[k].value)) {
                    snprintf(err, errlen,
                             "label_format: only literal text, {{.label}} and {{__line__}} are "
                             "supported");
                    return -EINVAL;
                }
            }
            break;
        case LOGQL_STAGE_LABEL_FILTER:
            if (check_lf_ip(st->lf, err, errlen) < 0) {
                return -EINVAL;
            }
            break;
        default:
            break;
        }
    }
    return 0;
}

/* ---- log query results ------------------------------------------------------------ */

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

static int entry_cmp_fwd(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
    int c = memcmp(x->key, y->key, n);
    if (c != 0) {
        return c;
    }
    if (x->keylen != y->keylen) {
        return x->keylen < y->keylen ? -1 : 1;
    }
    if (x->ts != y->ts) {
        return x->ts < y->ts ? -1 : 1;
    }
    if (x->src != y->src) {
        return x->src < y->src ? -1 : 1;
    }
    return x->row < y->row ? -1 : x->row > y->row;
}

static int entry_cmp_bwd(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
    int c = memcmp(x->key, y->key, n);
    if (c != 0) {
        return c;
    }
    if (x->keylen != y->keylen) {
        return x->keylen < y->keylen ? -1 : 1;
    }
    if (x->ts != y->ts) {
        return x->ts > y->ts ? -1 : 1;
    }
    if (x->src != y->src) {
        return x->src > y->src ? -1 : 1;
    }
    return x->row > y->row ? -1 : x->row < y->row;
}

struct batch_arg {
    struct scan *s;
    size_t *order;
    size_t base;
};

static void batch_item(void *arg, size_t i)
{
    struct batch_arg *ba = arg;
    scan_item_log(ba->s, ba->order[ba->base + i]);
}

static int src_order_cmp(const void *a, const void *b, void *arg)
{
    struct scan *s = arg;
    const struct src *x = &s->srcs[*(const size_t *)a], *y = &s->srcs[*(const size_t *)b];
    bool xo = x->qs->b == NULL, yo = y->qs->b == NULL;
    if (xo != yo) {
        return xo ? -1 : 1; /* open blocks first: they hold the newest rows */
    }
    if (s->forward) {
        return x->qs->tmin < y->qs->tmin ? -1 : x->qs->tmin > y->qs->tmin;
    }
    return x->qs->tmax > y->qs->tmax ? -1 : x->qs->tmax < y->qs->tmax;
}

/* Materializes candidate |cd| into entry |e| (pass 2). */
static int materialize(struct logs_result *res, struct rctx *c, const struct cand *cd,
                       struct entry *e)
{
    struct scan *s = c->s;
    struct src *src = c->src;
    struct log_view v;
    int rc = qctx_read_log(src->qs, cd->row, s->want, &v);
    if (rc < 0) {
        return rc;
    }
    if (!eval_row(c, &v, cd->ts)) {
        return -EAGAIN; /* cannot happen: the row matched in pass 1 */
    }
    if (!c->built) {
        build_labels(c);
    }
    arena *a = res->q.a;
    e->ts = cd->ts;
    e->src = cd->src;
    e->row = cd->row;
    e->line = adup(a, c->line, c->line_n);
    e->line_n = (uint32_t)c->line_n;
    e->l = arena_alloc(a, (c->l.n + 1) * sizeof(struct lbl));
    if (e->line == NULL || e->l == NULL) {
        return -ENOMEM;
    }
    uint32_t n = 0;
    /* the labels kept so far, indexed: a line of 100,000 keys is linear */
    struct lset kept = {.a = e->l, .n = 0, .cap = c->l.n + 1};
    c->eidx.on = false;
    for (uint32_t i = 0; i < c->l.n; i++) {
        const struct lbl *l = &c->l.a[i];
        if (l->vn == 0) {
            continue; /* an empty label is no label */
        }
        /* a name seen already (SM repeating a stream label): keep the first */
        kept.n = n;
        if (lidx_lookup(&c->eidx, &kept, l->n, l->nn) != NULL) {
            continue;
        }
        e->l[n] = *l;
        e->l[n].n = adup(a, l->n, l->nn);
        e->l[n].v = adup(a, l->v, l->vn);
        if (e->l[n].n == NULL || e->l[n].v == NULL) {
            return -ENOMEM;
        }
        n++;
    }
    e->nl = n;
    /* keep the pipeline's order for metadata; the stream key sorts */
    c->sb.n = 0;
    struct lbl tmp[64];
    struct lbl *sorted = n <= 64 ? tmp : malloc(n * sizeof(struct lbl));
    if (sorted == NULL) {
        return -ENOMEM;
    }
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!res->q.rq.categorize || e->l[i].cat == LC_INDEX) {
            sorted[m++] = e->l[i];
        }
    }
    qsort(sorted, m, sizeof(struct lbl), lbl_cmp);
    sb_labels_key(&c->sb, sorted, m);
    if (sorted != tmp) {
        free(sorted);
    }
    e->key = adup(a, c->sb.p ? c->sb.p : "", c->sb.n);
    e->keylen = (uint32_t)c->sb.n;
    return e->key != NULL && !c->sb.oom ? 0 : -ENOMEM;
}

static int idx_src_cmp(const void *a, const void *b, void *arg)
{
    const struct cand *best = arg;
    const struct cand *x = &best[*(const size_t *)a], *y = &best[*(const size_t *)b];
    if (x->src != y->src) {
        return x->src < y->src ? -1 : 1;
    }
    return x->row < y->row ? -1 : x->row > y->row;
}

static int run_log_query(struct logs_result *res)
{
    struct query *q = &res->q;
    struct scan *s = &res->scan;
    const struct logql_expr *ex = q->rq.expr;
    memset(s, 0, sizeof(*s));
    s->q = q;
    s->log = &ex->log;
    s->lo = q->rq.start_ns;
    s->hi = q->rq.end_ns;
    s->limit = q->rq.limit;
    s->forward = q->rq.forward;
    plan_needs(s, true);
    if (res->native) {
        s->want = BLK_ALL;
    }
    int rc = scan_plan(s);
    if (rc < 0) {
        qctx_fail(&q->c, rc, "out of memory");
        return rc;
    }
    size_t *order = malloc((s->n_srcs + 1) * sizeof(size_t));
    struct cand *best = malloc(((size_t)s->limit * 2 + 1) * sizeof(struct cand));
    if (order == NULL || best == NULL) {
        free(order);
        free(best);
        qctx_fail(&q->c, -ENOMEM, "out of memory");
        return -ENOMEM;
    }
    for (size_t i = 0; i < s->n_srcs; i++) {
        order[i] = i;
    }
    qsort_r(order, s->n_srcs, sizeof(size_t), src_order_cmp, s);
    size_t n_best = 0;
    size_t batch = (size_t)(qpool_workers() > 0 ? qpool_workers() : 1) * 2;
    size_t done = 0;
    int (*cmp)(const void *, const void *) = s->forward ? cand_cmp_fwd : cand_cmp_bwd;
    while (done < s->n_srcs && !qctx_err(&q->c)) {
        if (n_best >= s->limit) {
            const struct src *nx = &s->srcs[order[done]];
            uint64_t worst = best[s->limit - 1].ts;
            if (nx->qs->b != NULL && ((s->forward && nx->qs->tmin > worst) ||
                                      (!s->forward && nx->qs->tmax < worst))) {
                break; /* no later block can beat what we have */
            }
        }
        size_t nb = s->n_srcs - done < batch ? s->n_srcs - done : batch;
        struct batch_arg ba = {s, order, done};
        qpool_parallel(nb, batch_item, &ba);
        for (size_t k = done; k < done + nb; k++) {
            struct src *src = &s->srcs[order[k]];
            for (size_t j = 0; j < src->n_c; j++) {
                best[n_best++] = src->c[j];
                if (n_best == (size_t)s->limit * 2) {
                    qsort(best, n_best, sizeof(*best), cmp);
                    n_best = s->limit;
                }
            }
        }
        qsort(best, n_best, sizeof(*best), cmp);
        if (n_best > s->limit) {
            n_best = s->limit;
        }
        done += nb;
    }
    free(order);
    if (qctx_err(&q->c)) {
        free(best);
        return qctx_err(&q->c);
    }
    /* interval: drop entries closer than interval to the last one kept */
    if (q->rq.interval_ns > 0 && n_best > 0) {
        size_t w = 1;
        uint64_t last = best[0].ts;
        for (size_t i = 1; i < n_best; i++) {
            uint64_t d = best[i].ts > last ? best[i].ts - last : last - best[i].ts;
            if (d >= q->rq.interval_ns) {
                best[w++] = best[i];
                last = best[i].ts;
            }
        }
        n_best = w;
    }
    /* pass 2, source by source */
    res->e = calloc(n_best + 1, sizeof(struct entry));
    if (res->e == NULL) {
        free(best);
        qctx_fail(&q->c, -ENOMEM, "out of memory");
        return -ENOMEM;
    }
    size_t *idx = malloc((n_best + 1) * sizeof(size_t));
    if (idx == NULL) {
        free(best);
        qctx_fail(&q->c, -ENOMEM, "out of memory");
        return -ENOMEM;
    }
    for (size_t i = 0; i < n_best; i++) {
        idx[i] = i;
    }
    qsort_r(idx, n_best, sizeof(size_t), idx_src_cmp, best);
    rc = 0;
    struct rctx c;
    uint32_t cur = UINT32_MAX;
    bool have_ctx = false;
    size_t n_out = 0;
    /* entries of one source are materialized with one context; order by source */
    for (size_t pass = 0; pass < n_best && rc == 0; pass++) {
        size_t i = idx[pass];
        if (best[i].src != cur) {
            if (have_ctx) {
                rctx_fini(&c);
                have_ctx = false;
            }
            cur = best[i].src;
            if (rctx_init(&c, s, &s->srcs[cur]) < 0) {
                rc = -ENOMEM;
                break;
            }
            have_ctx = true;
        }
        rc = materialize(res, &c, &best[i], &res->e[n_out]);
        if (rc == 0) {
            n_out++;
        } else if (rc == -EAGAIN) {
            rc = 0;
        }
        if (rc == 0 && qctx_tick(&q->c) != 0) {
            rc = qctx_err(&q->c); /* one entry can take long: a line of many keys */
        }
    }
    if (have_ctx) {
        rctx_fini(&c);
    }
    free(idx);
    res->n_e = n_out;
    free(best);
    if (rc == -EBADMSG) {
        /* a table went bad between the passes: report and serve the rest */
        qctx_warn(&q->c, "a block failed verification while rendering; some entries are missing");
        rc = 0;
    }
    if (rc < 0) {
        qctx_fail(&q->c, rc, "out of memory");
        return rc;
    }
    qctx_charge(&q->c, (uint64_t)arena_footprint(q->a));
    qsort(res->e, res->n_e, sizeof(struct entry), s->forward ? entry_cmp_fwd : entry_cmp_bwd);
    return qctx_err(&q->c);
}

/* ---- metric queries: series ------------------------------------------------------------ */

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static struct series *smap_get(struct smap *m, uint64_t h, const char *key, size_t kn)
{
    if (m->cap == 0) {
        return NULL;
    }
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct series *s = m->slots[i];
        if (s == NULL) {
            return NULL;
        }
        if (s->hash == h && s->keylen == kn && memcmp(s->key, key, kn) == 0) {
            return s;
        }
    }
}

static int smap_put(struct smap *m, struct series *s)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 64;
        struct series **sl = calloc(nc, sizeof(*sl));
        if (sl == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (m->slots[i] != NULL) {
                size_t j = m->slots[i]->hash & (nc - 1);
                while (sl[j] != NULL) {
                    j = (j + 1) & (nc - 1);
                }
                sl[j] = m->slots[i];
            }
        }
        free(m->slots);
        m->slots = sl;
        m->cap = nc;
    }
    size_t j = s->hash & (m->cap - 1);
    while (m->slots[j] != NULL) {
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j] = s;
    m->n++;
    return 0;
}

static void smap_free(struct smap *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

static void smap_free_samples(struct smap *m)
{
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i] != NULL) {
            free(m->slots[i]->samp);
            m->slots[i]->samp = NULL;
            m->slots[i]->ns = m->slots[i]->cap_s = 0;
        }
    }
}

/* Appends n samples; false on out of memory. */
static bool samp_add(struct query *q, struct series *se, const struct qsamp *x, size_t n)
{
    if (se->ns + n > se->cap_s) {
        size_t nc = se->cap_s ? se->cap_s : 64;
        while (nc < se->ns + n) {
            nc *= 2;
        }
        struct qsamp *a = realloc(se->samp, nc * sizeof(*a));
        if (a == NULL) {
            return false;
        }
        qctx_charge(&q->c, (uint64_t)((nc - se->cap_s) * sizeof(*a)));
        se->samp = a;
        se->cap_s = nc;
    }
    memcpy(se->samp + se->ns, x, n * sizeof(*x));
    se->ns += n;
    return true;
}

static int qsamp_ts_cmp(const void *a, const void *b)
{
    const struct qsamp *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Prometheus quantile: linear interpolation between the closest ranks. */
static double quantile_of(double phi, double *v, size_t n)
{
    if (phi < 0) {
        return -INFINITY;
    }
    if (phi > 1) {
        return INFINITY;
    }
    qsort(v, n, sizeof(double), dbl_cmp);
    double rank = phi * (double)(n - 1);
    size_t lo = (size_t)rank;
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    double w = rank - (double)lo;
    return v[lo] * (1 - w) + v[hi] * w;
}

static bool range_unwrapped(enum logql_range_op op)
{
    return op >= LOGQL_RANGE_RATE_COUNTER;
}

/* Range aggregations whose window value is a sum: a row adds to every
 * step of its window through a difference array (O(1) per row however
 * many steps the window spans), summed up once in series_finish. */
static bool range_additive(enum logql_range_op op)
{
    switch (op) {
    case LOGQL_RANGE_COUNT_OVER_TIME:
    case LOGQL_RANGE_RATE:
    case LOGQL_RANGE_BYTES_OVER_TIME:
    case LOGQL_RANGE_BYTES_RATE:
    case LOGQL_RANGE_ABSENT_OVER_TIME:
    case LOGQL_RANGE_SUM_OVER_TIME:
    case LOGQL_RANGE_AVG_OVER_TIME:
        return true;
    default:
        return false;
    }
}

/* Creates a series (arena |a|) with copies of |l| and K-step arrays. */
static struct series *series_new(struct query *q, arena *a, const struct lbl *l, uint32_t nl,
                                 const char *key, size_t kn, uint64_t h, size_t K, bool aux)
{
    struct series *s = arena_alloc(a, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    s->hash = h;
    s->key = adup(a, key, kn);
    s->keylen = (uint32_t)kn;
    s->l = arena_alloc(a, (nl + 1) * sizeof(struct lbl));
    /* K + 1: additive range aggregations keep a difference array */
    s->v = arena_alloc(a, (K + 1) * sizeof(double));
    s->cnt = arena_alloc(a, (K + 1) * sizeof(uint32_t));
    if (s->key == NULL || s->l == NULL || s->v == NULL || s->cnt == NULL) {
        return NULL;
    }
    memset(s->v, 0, (K + 1) * sizeof(double));
    memset(s->cnt, 0, (K + 1) * sizeof(uint32_t));
    if (aux) {
        s->aux = arena_alloc(a, K * sizeof(double));
        s->aux2 = arena_alloc(a, K * sizeof(double));
        if (s->aux == NULL || s->aux2 == NULL) {
            return NULL;
        }
        memset(s->aux, 0, K * sizeof(double));
        memset(s->aux2, 0, K * sizeof(double));
    }
    for (uint32_t i = 0; i < nl; i++) {
        s->l[i] = l[i];
        s->l[i].n = adup(a, l[i].n, l[i].nn);
        s->l[i].v = adup(a, l[i].v, l[i].vn);
        if (s->l[i].n == NULL || s->l[i].v == NULL) {
            return NULL;
        }
    }
    s->nl = nl;
    qctx_charge(&q->c, (uint64_t)(sizeof(*s) + kn + K * (sizeof(double) + sizeof(uint32_t)) +
                       (aux ? 2 * K * sizeof(double) : 0)));
    return s;
}

/* Labels of a series from the row's labels: sorted, non-empty, projected
 * by |keep| (names, n_keep) when |project|, or minus |drop| names. */
static uint32_t series_labels(const struct lset *in, struct lbl *out, uint32_t cap, bool project,
                              const struct logql_str *names, size_t n_names, bool without)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < in->n && n < cap; i++) {
        const struct lbl *l = &in->a[i];
        if (l->vn == 0) {
            continue;
        }
        if (project) {
            bool listed = false;
            for (size_t k = 0; k < n_names && !listed; k++) {
                listed = names[k].n == l->nn && memcmp(names[k].s, l->n, l->nn) == 0;
            }
            if (listed == without) {
                continue;
            }
        }
        bool dup = false;
        for (uint32_t k = 0; k < n && !dup; k++) {
            dup = out[k].nn == l->nn && memcmp(out[k].n, l->n, l->nn) == 0;
        }
        if (!dup) {
            out[n++] = *l;
        }
    }
    qsort(out, n, sizeof(*out), lbl_cmp);
    return n;
}

/* Adds the current row to its series at every step whose window holds it. */
static bool on_metric_match(struct rctx *c, uint64_t row)
{
    (void)row;
    struct scan *s = c->s;
    struct query *q = s->q;
    const struct logql_expr *r = s->range;
    if (!c->built) {
        build_labels(c);
    }
    const struct lbl *err = lset_get(&c->l, "__error__", 9);
    if (err != NULL) {
        c->sb.n = 0;
        sb_labels_key(&c->sb, c->l.a, c->l.n);
        qctx_fail(&q->c, -EINVAL,
               "pipeline error: '%.*s' for series: '%.*s'. Use a label filter to intentionally "
               "skip this error. (e.g | __error__!=\"%.*s\"). To skip all potential errors you "
               "can match empty errors.(e.g __error__=\"\")",
               (int)err->vn, err->v, (int)(c->sb.n < 120 ? c->sb.n : 120), c->sb.p ? c->sb.p : "",
               (int)err->vn, err->v);
        return false;
    }
    double x = 0;
    if (range_unwrapped(r->range_op) || s->has_unwrap) {
        if (!c->has_unwrap_val) {
            return true;
        }
        x = c->unwrap_val;
    } else if (r->range_op == LOGQL_RANGE_BYTES_OVER_TIME ||
               r->range_op == LOGQL_RANGE_BYTES_RATE) {
        x = (double)c->line_n;
    } else {
        x = 1;
    }
    /* steps k with t_k - off - range < ts <= t_k - off */
    int64_t ts = (int64_t)c->ts + r->offset_ns;
    int64_t st = (int64_t)s->start, step = (int64_t)(s->step ? s->step : 1);
    int64_t klo = ts <= st ? 0 : (ts - st + step - 1) / step;
    int64_t lim = ts + r->range_ns; /* t_k < lim */
    int64_t khi = lim <= st ? -1 : (lim - st - 1) / step;
    if (khi >= (int64_t)s->K) {
        khi = (int64_t)s->K - 1;
    }
    if (klo > khi) {
        return true;
    }
    struct lbl tmp[128];
    uint32_t nl;
    if (s->by_pushdown) {
        nl = series_labels(&c->l, tmp, 128, true, s->by, s->n_by, false);
    } else if (r->grouping.has) {
        nl = series_labels(&c->l, tmp, 128, true, r->grouping.labels, r->grouping.n_labels,
                           r->grouping.without);
    } else {
        nl = series_labels(&c->l, tmp, 128, false, NULL, 0, false);
    }
    c->sb.n = 0;
    sb_labels_key(&c->sb, tmp, nl);
    if (c->sb.oom) {
        c->err = -ENOMEM;
        return false;
    }
    uint64_t h = hash_bytes(c->sb.p, c->sb.n);
    struct src *src = c->src;
    struct series *se = smap_get(&src->m, h, c->sb.p, c->sb.n);
    if (se == NULL) {
        bool aux = r->range_op == LOGQL_RANGE_STDVAR_OVER_TIME ||
                   r->range_op == LOGQL_RANGE_STDDEV_OVER_TIME ||
                   r->range_op == LOGQL_RANGE_FIRST_OVER_TIME ||
                   r->range_op == LOGQL_RANGE_LAST_OVER_TIME;
        se = series_new(q, src->a, tmp, nl, c->sb.p, c->sb.n, h, s->K, aux);
        if (se == NULL || smap_put(&src->m, se) < 0) {
            c->err = -ENOMEM;
            return false;
        }
    }
    if (r->range_op == LOGQL_RANGE_QUANTILE_OVER_TIME) {
        struct qsamp qs = {c->ts, x};
        if (!samp_add(q, se, &qs, 1)) {
            c->err = -ENOMEM;
            return false;
        }
        return true;
    }
    if (range_additive(r->range_op)) {
        se->v[klo] += x;
        se->v[khi + 1] -= x;
        se->cnt[klo]++;
        se->cnt[khi + 1]--; /* unsigned: wraps back in the prefix sum */
        return true;
    }
    for (int64_t k = klo; k <= khi; k++) {
        uint32_t n = se->cnt[k]++;
        switch (r->range_op) {
        case LOGQL_RANGE_MIN_OVER_TIME:
            se->v[k] = n == 0 || x < se->v[k] ? x : se->v[k];
            break;
        case LOGQL_RANGE_MAX_OVER_TIME:
            se->v[k] = n == 0 || x > se->v[k] ? x : se->v[k];
            break;
        case LOGQL_RANGE_FIRST_OVER_TIME:
            if (n == 0 || (double)c->ts < se->aux[k]) {
                se->v[k] = x;
                se->aux[k] = (double)c->ts;
            }
            break;
        case LOGQL_RANGE_LAST_OVER_TIME:
            if (n == 0 || (double)c->ts >= se->aux[k]) {
                se->v[k] = x;
                se->aux[k] = (double)c->ts;
            }
            break;
        case LOGQL_RANGE_STDVAR_OVER_TIME:
        case LOGQL_RANGE_STDDEV_OVER_TIME:
            se->aux[k] += x;
            se->aux2[k] += x * x;
            break;
        default:
            se->v[k] += x;
            break;
        }
    }
    return true;
}

/* Merges |from| into |into| (same key). */
static void series_merge(const struct logql_expr *r, size_t K, struct series *into,
                         const struct series *from)
{
    if (range_additive(r->range_op)) {
        for (size_t k = 0; k <= K; k++) {
            into->v[k] += from->v[k];
            into->cnt[k] += from->cnt[k];
        }
        return;
    }
    if (r->range_op == LOGQL_RANGE_QUANTILE_OVER_TIME) {
        return; /* samples: see merge_samples */
    }
    for (size_t k = 0; k < K; k++) {
        if (from->cnt[k] == 0) {
            continue;
        }
        bool first = into->cnt[k] == 0;
        into->cnt[k] += from->cnt[k];
        double x = from->v[k];
        switch (r->range_op) {
        case LOGQL_RANGE_MIN_OVER_TIME:
            into->v[k] = first || x < into->v[k] ? x : into->v[k];
            break;
        case LOGQL_RANGE_MAX_OVER_TIME:
            into->v[k] = first || x > into->v[k] ? x : into->v[k];
            break;
        case LOGQL_RANGE_FIRST_OVER_TIME:
            if (first || from->aux[k] < into->aux[k]) {
                into->v[k] = x;
                into->aux[k] = from->aux[k];
            }
            break;
        case LOGQL_RANGE_LAST_OVER_TIME:
            if (first || from->aux[k] >= into->aux[k]) {
                into->v[k] = x;
                into->aux[k] = from->aux[k];
            }
            break;
        case LOGQL_RANGE_STDVAR_OVER_TIME:
        case LOGQL_RANGE_STDDEV_OVER_TIME:
            into->aux[k] += from->aux[k];
            into->aux2[k] += from->aux2[k];
            break;
        default:
            into->v[k] += x;
            break;
        }
    }
}

/* Final values from the accumulators. */
/* quantile_over_time: per step, the quantile of the samples in its window;
 * frees the samples. false on out of memory. */
static bool quantile_finish(const struct logql_expr *r, size_t K, uint64_t start, uint64_t step,
                            struct series *s)
{
    bool ok = true;
    if (s->ns > 1) {
        qsort(s->samp, s->ns, sizeof(*s->samp), qsamp_ts_cmp);
    }
    double *tmp = malloc((s->ns + 1) * sizeof(double));
    if (tmp == NULL) {
        ok = false;
        s->ns = 0;
    }
    size_t lo = 0, hi = 0;
    for (size_t k = 0; k < K; k++) {
        /* window (t - off - range, t - off] */
        int64_t t = (int64_t)(start + k * step) - r->offset_ns;
        int64_t from = t - r->range_ns;
        while (lo < s->ns && (int64_t)s->samp[lo].ts <= from) {
            lo++;
        }
        if (hi < lo) {
            hi = lo;
        }
        while (hi < s->ns && (int64_t)s->samp[hi].ts <= t) {
            hi++;
        }
        s->cnt[k] = (uint32_t)(hi - lo);
        if (hi > lo) {
            for (size_t i = lo; i < hi; i++) {
                tmp[i - lo] = s->samp[i].v;
            }
            s->v[k] = quantile_of(r->param, tmp, hi - lo);
        }
    }
    free(tmp);
    free(s->samp);
    s->samp = NULL;
    s->ns = s->cap_s = 0;
    return ok;
}

static void series_finish(const struct logql_expr *r, size_t K, struct series *s, bool unwrap)
{
    double secs = (double)r->range_ns / 1e9;
    if (range_additive(r->range_op)) {
        double acc = 0;
        uint32_t cacc = 0;
        for (size_t k = 0; k < K; k++) {
            acc += s->v[k];
            cacc += s->cnt[k];
            s->v[k] = cacc != 0 ? acc : 0;
            s->cnt[k] = cacc;
        }
    }
    for (size_t k = 0; k < K; k++) {
        double n = s->cnt[k];
        if (n == 0) {
            continue;
        }
        switch (r->range_op) {
        case LOGQL_RANGE_COUNT_OVER_TIME:
            s->v[k] = n;
            break;
        case LOGQL_RANGE_RATE:
            s->v[k] = (unwrap ? s->v[k] : n) / secs;
            break;
        case LOGQL_RANGE_BYTES_RATE:
            s->v[k] = s->v[k] / secs;
            break;
        case LOGQL_RANGE_AVG_OVER_TIME:
            s->v[k] = s->v[k] / n;
            break;
        case LOGQL_RANGE_STDVAR_OVER_TIME:
        case LOGQL_RANGE_STDDEV_OVER_TIME: {
            double mean = s->aux[k] / n;
            double var = s->aux2[k] / n - mean * mean;
            if (var < 0) {
                var = 0;
            }
            s->v[k] = r->range_op == LOGQL_RANGE_STDDEV_OVER_TIME ? sqrt(var) : var;
            break;
        }
        default:
            break;
        }
    }
}

/* ---- metric queries: evaluation ------------------------------------------------------ */

/* A set of series with finished values (cnt[k] != 0: a point at step k). */
struct mat {
    struct series **s;
    size_t n, cap;
    bool scalar; /* one label-less series, a point at every step */
};

static int mat_add(struct mat *m, struct series *s)
{
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 16;
        struct series **a = realloc(m->s, nc * sizeof(*a));
        if (a == NULL) {
            return -ENOMEM;
        }
        m->s = a;
        m->cap = nc;
    }
    m->s[m->n++] = s;
    return 0;
}

static void mat_free(struct mat *m)
{
    free(m->s);
    memset(m, 0, sizeof(*m));
}

struct eval {
    struct logs_result *res;
    struct query *q;
    size_t K;
    uint64_t start, step;
    struct sbuf sb;
};

static struct series *ev_series(struct eval *ev, const struct lbl *l, uint32_t nl)
{
    ev->sb.n = 0;
    sb_labels_key(&ev->sb, l, nl);
    if (ev->sb.oom) {
        return NULL;
    }
    return series_new(ev->q, ev->q->a, l, nl, ev->sb.p, ev->sb.n, hash_bytes(ev->sb.p, ev->sb.n),
                      ev->K, false);
}

static int eval_expr(struct eval *ev, const struct logql_expr *e, struct mat *out);
static int eval_chain(struct eval *ev, const struct logql_expr *e, struct mat *out);

static int eval_range(struct eval *ev, const struct logql_expr *e, const struct logql_expr *parent,
                      struct mat *out)
{
    struct query *q = ev->q;
    if (e->range_op == LOGQL_RANGE_RATE_COUNTER) {
        qctx_fail(&q->c, -EINVAL, "rate_counter is not supported yet");
        return -EINVAL;
    }
    struct scan s;
    memset(&s, 0, sizeof(s));
    s.q = q;
    s.log = &e->log;
    s.range = e;
    s.K = ev->K;
    s.start = ev->start;
    s.step = ev->step;
    for (size_t i = 0; i < e->log.n_stages; i++) {
        s.has_unwrap = s.has_unwrap || e->log.stages[i].kind == LOGQL_STAGE_UNWRAP;
    }
    /* sum by (labels) right above a plain range aggregation: the series
     * need only those labels (and so, often, no attribute table) */
    if (parent != NULL && parent->kind == LOGQL_EXPR_VECTOR_AGG &&
        parent->agg_op == LOGQL_AGG_SUM && !parent->grouping.without && !e->grouping.has &&
        e->range_op != LOGQL_RANGE_ABSENT_OVER_TIME) {
        s.by_pushdown = true; /* sum (...) without by: no label at all */
        s.by = parent->grouping.has ? parent->grouping.labels : NULL;
        s.n_by = parent->grouping.has ? parent->grouping.n_labels : 0;
    } else if (e->grouping.has && !e->grouping.without) {
        s.by_pushdown = false;
    }
    bool all = !s.by_pushdown && !(e->grouping.has && !e->grouping.without);
    if (e->grouping.has && !e->grouping.without) {
        s.by = e->grouping.labels;
        s.n_by = e->grouping.n_labels;
    }
    plan_needs(&s, all);
    int64_t lo = (int64_t)ev->start - e->offset_ns - e->range_ns + 1;
    int64_t hi = (int64_t)(ev->start + (ev->K - 1) * ev->step) - e->offset_ns + 1;
    s.lo = lo < 0 ? 0 : (uint64_t)lo;
    s.hi = hi < 0 ? 0 : (uint64_t)hi;
    int rc = s.hi > s.lo ? scan_plan(&s) : 0;
    if (rc < 0) {
        qctx_fail(&q->c, rc, "out of memory");
        scan_fini(&s);
        return rc;
    }
    qpool_parallel(s.n_srcs, scan_item_metric, &s);
    if (qctx_err(&q->c)) {
        scan_fini(&s);
        return qctx_err(&q->c);
    }
    /* merge the per-source maps into series owned by the query arena */
    struct smap all_m = {0};
    for (size_t i = 0; i < s.n_srcs && rc == 0; i++) {
        struct smap *m = &s.srcs[i].m;
        for (size_t j = 0; j < m->cap && rc == 0; j++) {
            struct series *se = m->slots[j];
            if (se == NULL) {
                continue;
            }
            struct series *into = smap_get(&all_m, se->hash, se->key, se->keylen);
            if (into == NULL) {
                into = series_new(q, q->a, se->l, se->nl, se->key, se->keylen, se->hash, ev->K,
                                  se->aux != NULL);
                if (into == NULL || smap_put(&all_m, into) < 0 || mat_add(out, into) < 0) {
                    rc = -ENOMEM;
                    break;
                }
            }
            series_merge(e, ev->K, into, se);
            if (se->ns > 0 && !samp_add(q, into, se->samp, se->ns)) {
                rc = -ENOMEM;
            }
        }
    }
    smap_free(&all_m);
    if (rc < 0) {
        for (size_t i = 0; i < out->n; i++) {
            free(out->s[i]->samp);
            out->s[i]->samp = NULL;
        }
        scan_fini(&s);
        qctx_fail(&q->c, rc, "out of memory");
        return rc;
    }
    for (size_t i = 0; i < out->n; i++) {
        if (e->range_op == LOGQL_RANGE_QUANTILE_OVER_TIME) {
            if (!quantile_finish(e, ev->K, ev->start, ev->step, out->s[i]) && rc == 0) {
                rc = -ENOMEM;
            }
            continue;
        }
        series_finish(e, ev->K, out->s[i], s.has_unwrap);
    }
    if (e->range_op == LOGQL_RANGE_ABSENT_OVER_TIME) {
        /* one series, 1 where nothing was seen; labels from = matchers */
        struct lbl l[32];
        uint32_t nl = 0;
        for (size_t i = 0; i < e->log.n_matchers && nl < 32; i++) {
            const struct logql_matcher *m = &e->log.matchers[i];
            if (m->op == LOGQL_MATCH_EQ) {
                l[nl++] = (struct lbl){m->name.s, m->value.s, (uint32_t)m->name.n,
                                       (uint32_t)m->value.n, LC_INDEX};
            }
        }
        qsort(l, nl, sizeof(l[0]), lbl_cmp);
        struct series *a = ev_series(ev, l, nl);
        if (a == NULL) {
            scan_fini(&s);
            return -ENOMEM;
        }
        for (size_t k = 0; k < ev->K; k++) {
            bool any = false;
            for (size_t i = 0; i < out->n && !any; i++) {
                any = out->s[i]->cnt[k] != 0;
            }
            a->cnt[k] = any ? 0 : 1;
            a->v[k] = 1;
        }
        out->n = 0;
        rc = mat_add(out, a);
    }
    scan_fini(&s);
    return rc;
}

static bool listed(const struct logql_str *names, size_t n, const char *s, size_t sn)
{
    for (size_t i = 0; i < n; i++) {
        if (names[i].n == sn && memcmp(names[i].s, s, sn) == 0) {
            return true;
        }
    }
    return false;
}

/* The labels of |s| projected: on/by keep the names, ignoring/without drop them. */
static uint32_t project(const struct series *s, const struct logql_str *names, size_t n, bool keep,
                        struct lbl *out, uint32_t cap)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < s->nl && m < cap; i++) {
        if (listed(names, n, s->l[i].n, s->l[i].nn) == keep) {
            out[m++] = s->l[i];
        }
    }
    return m;
}

struct dv {
    double v;
    size_t i;
};

static int dv_desc(const void *a, const void *b)
{
    const struct dv *x = a, *y = b;
    if (x->v != y->v) {
        return x->v > y->v ? -1 : 1;
    }
    return x->i < y->i ? -1 : x->i > y->i;
}

static int dv_asc(const void *a, const void *b)
{
    const struct dv *x = a, *y = b;
    if (x->v != y->v) {
        return x->v < y->v ? -1 : 1;
    }
    return x->i < y->i ? -1 : x->i > y->i;
}

static int eval_vector_agg(struct eval *ev, const struct logql_expr *e, struct mat *out)
{
    struct mat in = {0};
    int rc;
    if (e->inner->kind == LOGQL_EXPR_RANGE) {
        rc = eval_range(ev, e->inner, e, &in);
    } else {
        rc = eval_expr(ev, e->inner, &in);
    }
    if (rc < 0) {
        mat_free(&in);
        return rc;
    }
    if (e->agg_op == LOGQL_AGG_SORT || e->agg_op == LOGQL_AGG_SORT_DESC) {
        *out = in;
        out->scalar = false;
        return 0;
    }
    const struct logql_grouping *g = &e->grouping;
    size_t K = ev->K;
    /* group of each input series */
    size_t *grp = calloc(in.n + 1, sizeof(size_t));
    struct mat groups = {0};
    struct smap gm = {0};
    if (grp == NULL) {
        mat_free(&in);
        return -ENOMEM;
    }
    for (size_t i = 0; i < in.n && rc == 0; i++) {
        struct lbl l[128];
        uint32_t nl = 0;
        if (g->has) {
            nl = project(in.s[i], g->labels, g->n_labels, !g->without, l, 128);
        }
        ev->sb.n = 0;
        sb_labels_key(&ev->sb, l, nl);
        uint64_t h = hash_bytes(ev->sb.p ? ev->sb.p : "", ev->sb.n);
        struct series *gs = smap_get(&gm, h, ev->sb.p ? ev->sb.p : "", ev->sb.n);
        if (gs == NULL) {
            gs = series_new(ev->q, ev->q->a, l, nl, ev->sb.p ? ev->sb.p : "", ev->sb.n, h, K, true);
            if (gs == NULL || smap_put(&gm, gs) < 0 || mat_add(&groups, gs) < 0) {
                rc = -ENOMEM;
                break;
            }
            gs->hash = h;
            gs->aux2[0] = (double)(groups.n - 1); /* group index, read below */
        }
        grp[i] = (size_t)gs->aux2[0];
    }
    smap_free(&gm);
    if (rc < 0) {
        free(grp);
        mat_free(&in);
        mat_free(&groups);
        return rc;
    }
    for (size_t i = 0; i < groups.n; i++) {
        memset(groups.s[i]->aux2, 0, K * sizeof(double));
    }
    if (e->agg_op == LOGQL_AGG_TOPK || e->agg_op == LOGQL_AGG_BOTTOMK) {
        size_t kk = e->param < 1 ? 0 : (size_t)e->param;
        struct dv *tmp = malloc((in.n + 1) * sizeof(*tmp));
        /* one output series per input series, points only where selected */
        struct series **outs = calloc(in.n + 1, sizeof(*outs));
        if (tmp == NULL || outs == NULL) {
            free(tmp);
            free(outs);
            free(grp);
            mat_free(&in);
            mat_free(&groups);
            return -ENOMEM;
        }
        for (size_t k = 0; k < K && rc == 0; k++) {
            for (size_t gi = 0; gi < groups.n && rc == 0; gi++) {
                size_t n = 0;
                for (size_t i = 0; i < in.n; i++) {
                    if (grp[i] == gi && in.s[i]->cnt[k] != 0) {
                        tmp[n++] = (struct dv){in.s[i]->v[k], i};
                    }
                }
                qsort(tmp, n, sizeof(*tmp), e->agg_op == LOGQL_AGG_TOPK ? dv_desc : dv_asc);
                for (size_t j = 0; j < n && j < kk; j++) {
                    size_t i = tmp[j].i;
                    if (outs[i] == NULL) {
                        outs[i] = ev_series(ev, in.s[i]->l, in.s[i]->nl);
                        if (outs[i] == NULL || mat_add(out, outs[i]) < 0) {
                            rc = -ENOMEM;
                            break;
                        }
                    }
                    outs[i]->v[k] = tmp[j].v;
                    outs[i]->cnt[k] = 1;
                }
            }
        }
        free(tmp);
        free(outs);
        free(grp);
        mat_free(&in);
        mat_free(&groups);
        return rc;
    }
    for (size_t i = 0; i < in.n; i++) {
        struct series *gs = groups.s[grp[i]];
        const struct series *s = in.s[i];
        for (size_t k = 0; k < K; k++) {
            if (s->cnt[k] == 0) {
                continue;
            }
            double x = s->v[k];
            uint32_t n = gs->cnt[k]++;
            switch (e->agg_op) {
            case LOGQL_AGG_MIN:
                gs->v[k] = n == 0 || x < gs->v[k] ? x : gs->v[k];
                break;
            case LOGQL_AGG_MAX:
                gs->v[k] = n == 0 || x > gs->v[k] ? x : gs->v[k];
                break;
            case LOGQL_AGG_COUNT:
                gs->v[k] += 1;
                break;
            case LOGQL_AGG_STDDEV:
            case LOGQL_AGG_STDVAR:
                gs->aux[k] += x;
                gs->aux2[k] += x * x;
                break;
            default: /* sum, avg */
                gs->v[k] += x;
                break;
            }
        }
    }
    for (size_t gi = 0; gi < groups.n; gi++) {
        struct series *gs = groups.s[gi];
        for (size_t k = 0; k < K; k++) {
            double n = gs->cnt[k];
            if (n == 0) {
                continue;
            }
            if (e->agg_op == LOGQL_AGG_AVG) {
                gs->v[k] /= n;
            } else if (e->agg_op == LOGQL_AGG_STDDEV || e->agg_op == LOGQL_AGG_STDVAR) {
                double mean = gs->aux[k] / n;
                double var = gs->aux2[k] / n - mean * mean;
                if (var < 0) {
                    var = 0;
                }
                gs->v[k] = e->agg_op == LOGQL_AGG_STDDEV ? sqrt(var) : var;
            }
        }
        if (mat_add(out, gs) < 0) {
            rc = -ENOMEM;
            break;
        }
    }
    free(grp);
    mat_free(&in);
    mat_free(&groups);
    return rc;
}

static bool bin_cmp(enum logql_bin_op op)
{
    return op >= LOGQL_BIN_EQ && op <= LOGQL_BIN_LE;
}

/* Arithmetic or comparison; *keep = false drops the point (filtering
 * comparison that is false). */
static double bin_apply(enum logql_bin_op op, bool ret_bool, double a, double b, bool *keep)
{
    *keep = true;
    bool t;
    switch (op) {
    case LOGQL_BIN_ADD:
        return a + b;
    case LOGQL_BIN_SUB:
        return a - b;
    case LOGQL_BIN_MUL:
        return a * b;
    case LOGQL_BIN_DIV:
        return a / b;
    case LOGQL_BIN_MOD:
        return fmod(a, b);
    case LOGQL_BIN_POW:
        return pow(a, b);
    case LOGQL_BIN_EQ:
        t = a == b;
        break;
    case LOGQL_BIN_NE:
        t = a != b;
        break;
    case LOGQL_BIN_GT:
        t = a > b;
        break;
    case LOGQL_BIN_GE:
        t = a >= b;
        break;
    case LOGQL_BIN_LT:
        t = a < b;
        break;
    case LOGQL_BIN_LE:
        t = a <= b;
        break;
    default:
        return a;
    }
    if (ret_bool) {
        return t ? 1 : 0;
    }
    *keep = t;
    return a;
}

/* One binary operator over its evaluated operands |L| and |R| (freed
 * here) into the empty |out|. */
static int eval_binop(struct eval *ev, const struct logql_expr *e, struct mat L, struct mat R,
                      struct mat *out)
{
    int rc = 0;
    size_t K = ev->K;
    enum logql_bin_op op = e->bin_op;
    bool setop = op == LOGQL_BIN_AND || op == LOGQL_BIN_OR || op == LOGQL_BIN_UNLESS;
    if (L.scalar || R.scalar) {
        /* scalar with scalar or vector: apply per point */
        const struct mat *V = L.scalar ? &R : &L;
        const struct series *sc = L.scalar ? L.s[0] : R.s[0];
        out->scalar = L.scalar && R.scalar;
        for (size_t i = 0; i < V->n && rc == 0; i++) {
            const struct series *s = V->s[i];
            struct series *o = ev_series(ev, s->l, s->nl);
            if (o == NULL || mat_add(out, o) < 0) {
                rc = -ENOMEM;
                break;
            }
            for (size_t k = 0; k < K; k++) {
                if (s->cnt[k] == 0 || sc->cnt[k] == 0) {
                    continue;
                }
                bool keep;
                double a = L.scalar ? sc->v[k] : s->v[k];
                double b = L.scalar ? s->v[k] : sc->v[k];
                double v = bin_apply(op, e->return_bool || out->scalar, a, b, &keep);
                if (bin_cmp(op) && !e->return_bool && !out->scalar && L.scalar) {
                    v = s->v[k]; /* a filtering comparison keeps the vector's value */
                }
                if (keep) {
                    o->v[k] = v;
                    o->cnt[k] = 1;
                }
            }
        }
        mat_free(&L);
        mat_free(&R);
        return rc;
    }
    /* vector with vector: one-to-one matching on the label set (or on / ignoring) */
    struct lbl l[128];
    struct smap rm = {0};
    struct series **rkeys = calloc(R.n + 1, sizeof(*rkeys));
    if (rkeys == NULL) {
        mat_free(&L);
        mat_free(&R);
        return -ENOMEM;
    }
    for (size_t i = 0; i < R.n && rc == 0; i++) {
        uint32_t nl = e->has_matching
                          ? project(R.s[i], e->match_labels, e->n_match_labels, e->on, l, 128)
                          : project(R.s[i], NULL, 0, false, l, 128);
        rkeys[i] = ev_series(ev, l, nl);
        if (rkeys[i] == NULL) {
            rc = -ENOMEM;
            break;
        }
        rkeys[i]->aux = (double *)R.s[i]; /* the matched series */
        if (smap_get(&rm, rkeys[i]->hash, rkeys[i]->key, rkeys[i]->keylen) == NULL &&
            smap_put(&rm, rkeys[i]) < 0) {
            rc = -ENOMEM;
        }
    }
    struct smap lm = {0};
    for (size_t i = 0; i < L.n && rc == 0; i++) {
        const struct series *s = L.s[i];
        uint32_t nl = e->has_matching
                          ? project(s, e->match_labels, e->n_match_labels, e->on, l, 128)
                          : project(s, NULL, 0, false, l, 128);
        ev->sb.n = 0;
        sb_labels_key(&ev->sb, l, nl);
        uint64_t h = hash_bytes(ev->sb.p ? ev->sb.p : "", ev->sb.n);
        struct series *mk = smap_get(&rm, h, ev->sb.p ? ev->sb.p : "", ev->sb.n);
        const struct series *r = mk ? (const struct series *)mk->aux : NULL;
        /* result labels: the left side's (on(...) keeps only those for arithmetic) */
        const struct lbl *ol = s->l;
        uint32_t onl = s->nl;
        if (!setop && !bin_cmp(op) && e->has_matching) {
            ol = l;
            onl = nl;
        }
        struct series *o = ev_series(ev, ol, onl);
        if (o == NULL || mat_add(out, o) < 0) {
            rc = -ENOMEM;
            break;
        }
        if (op == LOGQL_BIN_OR) {
            struct series *lk = ev_series(ev, l, nl);
            if (lk == NULL || smap_put(&lm, lk) < 0) {
                rc = -ENOMEM;
                break;
            }
            lk->aux = (double *)s;
        }
        for (size_t k = 0; k < K; k++) {
            if (s->cnt[k] == 0) {
                continue;
            }
            bool rp = r != NULL && r->cnt[k] != 0;
            if (op == LOGQL_BIN_AND || op == LOGQL_BIN_UNLESS || op == LOGQL_BIN_OR) {
                if ((op == LOGQL_BIN_AND && rp) || (op == LOGQL_BIN_UNLESS && !rp) ||
                    op == LOGQL_BIN_OR) {
                    o->v[k] = s->v[k];
                    o->cnt[k] = 1;
                }
                continue;
            }
            if (!rp) {
                continue;
            }
            bool keep;
            double v = bin_apply(op, e->return_bool, s->v[k], r->v[k], &keep);
            if (keep) {
                o->v[k] = v;
                o->cnt[k] = 1;
            }
        }
    }
    if (op == LOGQL_BIN_OR && rc == 0) {
        /* right-side points whose key the left side lacks at that step */
        for (size_t i = 0; i < R.n && rc == 0; i++) {
            const struct series *r = R.s[i];
            const struct series *lk =
                smap_get(&lm, rkeys[i]->hash, rkeys[i]->key, rkeys[i]->keylen);
            const struct series *ls = lk ? (const struct series *)lk->aux : NULL;
            struct series *o = ev_series(ev, r->l, r->nl);
            if (o == NULL || mat_add(out, o) < 0) {
                rc = -ENOMEM;
                break;
            }
            for (size_t k = 0; k < K; k++) {
                if (r->cnt[k] != 0 && (ls == NULL || ls->cnt[k] == 0)) {
                    o->v[k] = r->v[k];
                    o->cnt[k] = 1;
                }
            }
        }
    }
    smap_free(&lm);
    smap_free(&rm);
    free(rkeys);
    mat_free(&L);
    mat_free(&R);
    return rc;
}

/* A binary operator and the binary operators down its left operand, in a
 * loop: the parser builds left-deep trees for chains (1+1+...+1, up to
 * LOGQL_MAX_OPS), which recursion would follow one stack frame (and an
 * eval_binop frame of some KiB) per operator. Only right operands recurse,
 * and their depth is bounded by the parser's nesting limit. */
static int eval_chain(struct eval *ev, const struct logql_expr *e, struct mat *out)
{
    size_t n = 0;
    const struct logql_expr *x;
    for (x = e; x->kind == LOGQL_EXPR_BINARY; x = x->lhs) {
        n++;
    }
    const struct logql_expr **spine = malloc(n * sizeof(*spine));
    if (spine == NULL) {
        return -ENOMEM;
    }
    size_t i = n;
    for (x = e; x->kind == LOGQL_EXPR_BINARY; x = x->lhs) {
        spine[--i] = x; /* spine[0]: the innermost operator; x ends at its left operand */
    }
    struct mat acc = {0};
    int rc = eval_expr(ev, x, &acc);
    for (i = 0; i < n && rc == 0; i++) {
        struct mat R = {0}, o = {0};
        rc = qctx_tick(&ev->q->c); /* one operator can be 500 series x 11,000 points */
        if (rc == 0) {
            rc = eval_expr(ev, spine[i]->rhs, &R);
        }
        if (rc < 0) {
            mat_free(&R);
            break;
        }
        rc = eval_binop(ev, spine[i], acc, R, &o); /* frees acc and R */
        acc = o;
    }
    free(spine);
    if (rc < 0) {
        mat_free(&acc);
        return rc;
    }
    *out = acc;
    return 0;
}

static int eval_expr(struct eval *ev, const struct logql_expr *e, struct mat *out)
{
    if (qctx_err(&ev->q->c)) {
        return qctx_err(&ev->q->c);
    }
    switch (e->kind) {
    case LOGQL_EXPR_RANGE:
        return eval_range(ev, e, NULL, out);
    case LOGQL_EXPR_VECTOR_AGG:
        return eval_vector_agg(ev, e, out);
    case LOGQL_EXPR_BINARY:
        return eval_chain(ev, e, out);
    case LOGQL_EXPR_NUMBER:
    case LOGQL_EXPR_VECTOR: {
        struct series *s = ev_series(ev, NULL, 0);
        if (s == NULL || mat_add(out, s) < 0) {
            return -ENOMEM;
        }
        for (size_t k = 0; k < ev->K; k++) {
            s->v[k] = e->value;
            s->cnt[k] = 1;
        }
        out->scalar = e->kind == LOGQL_EXPR_NUMBER;
        return 0;
    }
    case LOGQL_EXPR_LABEL_REPLACE: {
        struct mat in = {0};
        int rc = eval_expr(ev, e->inner, &in);
        if (rc < 0) {
            mat_free(&in);
            return rc;
        }
        for (size_t i = 0; i < in.n && rc == 0; i++) {
            struct series *s = in.s[i];
            const struct lbl *src = NULL;
            for (uint32_t j = 0; j < s->nl; j++) {
                if (s->l[j].nn == e->src.n && memcmp(s->l[j].n, e->src.s, e->src.n) == 0) {
                    src = &s->l[j];
                }
            }
            bool m = qlex_re_match(e->regex, src ? src->v : "", src ? src->vn : 0) == 1;
            if (!m) {
                rc = mat_add(out, s);
                continue;
            }
            struct lbl l[129];
            uint32_t nl = 0;
            for (uint32_t j = 0; j < s->nl && nl < 128; j++) {
                if (!(s->l[j].nn == e->dst.n && memcmp(s->l[j].n, e->dst.s, e->dst.n) == 0)) {
                    l[nl++] = s->l[j];
                }
            }
            if (e->replacement.n > 0) {
                l[nl++] = (struct lbl){e->dst.s, e->replacement.s, (uint32_t)e->dst.n,
                                       (uint32_t)e->replacement.n, LC_PARSED};
            }
            qsort(l, nl, sizeof(l[0]), lbl_cmp);
            struct series *o = ev_series(ev, l, nl);
            if (o == NULL) {
                rc = -ENOMEM;
                break;
            }
            memcpy(o->v, s->v, ev->K * sizeof(double));
            memcpy(o->cnt, s->cnt, ev->K * sizeof(uint32_t));
            rc = mat_add(out, o);
        }
        mat_free(&in);
        return rc < 0 ? rc : qctx_tick(&ev->q->c); /* the regex's match limit */
    }
    case LOGQL_EXPR_LOG:
        break;
    }
    return -EINVAL;
}

/* Checks every log expression of a metric tree before scanning. */
static int check_tree(const struct logql_expr *e, char *err, size_t errlen)
{
    if (e == NULL) {
        return 0;
    }
    switch (e->kind) {
    case LOGQL_EXPR_RANGE:
        return check_log(&e->log, err, errlen);
    case LOGQL_EXPR_VECTOR_AGG:
    case LOGQL_EXPR_LABEL_REPLACE:
        if (e->kind == LOGQL_EXPR_LABEL_REPLACE &&
            memchr(e->replacement.s, '$', e->replacement.n)) {
            snprintf(err, errlen,
                     "label_replace: $ references in the replacement are not "
                     "supported yet");
            return -EINVAL;
        }
        return check_tree(e->inner, err, errlen);
    case LOGQL_EXPR_BINARY:
        for (; e->kind == LOGQL_EXPR_BINARY; e = e->lhs) { /* the left spine in a loop */
            if (e->group_side != 0) {
                snprintf(err, errlen, "group_left / group_right are not supported yet");
                return -EINVAL;
            }
            if (check_tree(e->rhs, err, errlen) < 0) {
                return -EINVAL;
            }
        }
        return check_tree(e, err, errlen);
    case LOGQL_EXPR_LOG:
        return check_log(&e->log, err, errlen);
    default:
        return 0;
    }
}

static int run_metric_query(struct logs_result *res)
{
    struct query *q = &res->q;
    struct eval ev = {.res = res, .q = q};
    if (q->rq.instant) {
        ev.K = 1;
        ev.start = q->rq.start_ns;
        ev.step = 1;
    } else {
        ev.step = q->rq.step_ns ? q->rq.step_ns : 1;
        ev.start = q->rq.start_ns;
        ev.K = (size_t)((q->rq.end_ns - q->rq.start_ns) / ev.step) + 1;
        if (ev.K > LOGS_MAX_POINTS) {
            qctx_fail(&q->c, -E2BIG,
                   "exceeded maximum resolution of 11,000 points per time series. Try increasing "
                   "the value of the step parameter");
            return -E2BIG;
        }
    }
    res->K = ev.K;
    res->start = ev.start;
    res->step = ev.step;
    struct mat m = {0};
    int rc = eval_expr(&ev, q->rq.expr, &m);
    sb_fini(&ev.sb);
    if (rc < 0 || qctx_err(&q->c)) {
        mat_free(&m);
        if (qctx_err(&q->c) == 0) {
            qctx_fail(&q->c, rc, rc == -ENOMEM ? "out of memory" : "query failed");
        }
        return qctx_err(&q->c);
    }
    /* drop series without any point; sort by label string */
    size_t w = 0;
    for (size_t i = 0; i < m.n; i++) {
        bool any = false;
        for (size_t k = 0; k < ev.K && !any; k++) {
            any = m.s[i]->cnt[k] != 0;
        }
        if (any) {
            m.s[w++] = m.s[i];
        }
    }
    m.n = w;
    if (m.n > LOGS_MAX_SERIES) {
        mat_free(&m);
        qctx_fail(&q->c, -E2BIG,
               "maximum number of series (%d) reached for a single query; consider reducing "
               "query cardinality by adding more filters",
               LOGS_MAX_SERIES);
        return -E2BIG;
    }
    res->ser = m.s;
    res->n_ser = m.n;
    if (m.scalar) {
        res->kind = q->rq.instant ? RK_SCALAR : RK_MATRIX;
    } else {
        res->kind = q->rq.instant ? RK_VECTOR : RK_MATRIX;
    }
    return 0;
}

/* ---- rendering ---------------------------------------------------------------- */

static void w_labels_obj(struct jsonw *w, const struct lbl *l, uint32_t n, int cat)
{
    jsonw_obj_begin(w);
    for (uint32_t i = 0; i < n; i++) {
        if (cat >= 0 && l[i].cat != cat) {
            continue;
        }
        jsonw_keyn(w, l[i].n, l[i].nn);
        jsonw_str(w, l[i].v, l[i].vn);
    }
    jsonw_obj_end(w);
}

/* Matrix/vector timestamps: seconds with ms precision as a JSON number. */
static void w_sec(struct jsonw *w, uint64_t ns)
{
    uint64_t ms = ns / 1000000;
    char buf[40];
    int n;
    if (ms % 1000 == 0) {
        n = snprintf(buf, sizeof(buf), "%" PRIu64, ms / 1000);
    } else {
        n = snprintf(buf, sizeof(buf), "%" PRIu64 ".%03u", ms / 1000, (unsigned)(ms % 1000));
        while (buf[n - 1] == '0') {
            buf[--n] = '\0';
        }
    }
    jsonw_raw(w, buf, (size_t)n);
}

static int series_key_cmp(const void *a, const void *b)
{
    const struct series *x = *(const struct series *const *)a,
                        *y = *(const struct series *const *)b;
    size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
    int c = memcmp(x->key, y->key, n);
    if (c != 0) {
        return c;
    }
    return x->keylen < y->keylen ? -1 : x->keylen > y->keylen;
}

static void w_stats(struct jsonw *w, const struct logs_result *r)
{
    double secs = (double)r->exec_ns / 1e9;
    uint64_t bytes = r->q.c.st.bytes_read, lines = r->q.c.st.rows_scanned;
    jsonw_key(w, "stats");
    jsonw_obj_begin(w);
    jsonw_key(w, "summary");
    jsonw_obj_begin(w);
    jsonw_key(w, "bytesProcessedPerSecond");
    jsonw_uint(w, secs > 0 ? (uint64_t)((double)bytes / secs) : bytes);
    jsonw_key(w, "linesProcessedPerSecond");
    jsonw_uint(w, secs > 0 ? (uint64_t)((double)lines / secs) : lines);
    jsonw_key(w, "totalBytesProcessed");
    jsonw_uint(w, bytes);
    jsonw_key(w, "totalLinesProcessed");
    jsonw_uint(w, lines);
    jsonw_key(w, "execTime");
    jsonw_double(w, secs);
    jsonw_key(w, "totalEntriesReturned");
    jsonw_uint(w, r->kind == RK_STREAMS ? r->n_e : r->n_ser);
    jsonw_obj_end(w);
    jsonw_key(w, "miradb");
    jsonw_obj_begin(w);
    jsonw_key(w, "blocksConsidered");
    jsonw_uint(w, r->q.c.st.blocks_considered);
    jsonw_key(w, "blocksSkippedZone");
    jsonw_uint(w, r->q.c.st.blocks_skipped_zone);
    jsonw_key(w, "blocksSkippedBloom");
    jsonw_uint(w, r->q.c.st.blocks_skipped_bloom);
    jsonw_key(w, "blocksSkippedDict");
    jsonw_uint(w, r->q.c.st.blocks_skipped_dict);
    jsonw_key(w, "blocksScanned");
    jsonw_uint(w, r->q.c.st.blocks_scanned);
    jsonw_obj_end(w);
    jsonw_obj_end(w);
}

static void w_warnings(struct jsonw *w, const struct logs_result *r)
{
    if (r->q.c.warnings == NULL) {
        return;
    }
    jsonw_key(w, "warnings");
    jsonw_arr_begin(w);
    for (const struct qctx_warning *x = r->q.c.warnings; x != NULL; x = x->next) {
        jsonw_cstr(w, x->msg);
    }
    jsonw_arr_end(w);
}

/* One stream (entries [*i, j) sharing a key) into w; *i moves past it. */
static void w_stream(const struct logs_result *r, struct jsonw *w, size_t *i)
{
    bool cat = r->q.rq.categorize;
    const struct entry *e0 = &r->e[*i];
    jsonw_obj_begin(w);
    jsonw_key(w, "stream");
    if (cat) {
        /* index labels, sorted */
        struct lbl tmp[128];
        uint32_t m = 0;
        for (uint32_t k = 0; k < e0->nl && m < 128; k++) {
            if (e0->l[k].cat == LC_INDEX) {
                tmp[m++] = e0->l[k];
            }
        }
        qsort(tmp, m, sizeof(tmp[0]), lbl_cmp);
        w_labels_obj(w, tmp, m, -1);
    } else {
        struct lbl *tmp = malloc((e0->nl + 1) * sizeof(struct lbl));
        if (tmp != NULL) {
            memcpy(tmp, e0->l, e0->nl * sizeof(struct lbl));
            qsort(tmp, e0->nl, sizeof(tmp[0]), lbl_cmp);
            w_labels_obj(w, tmp, e0->nl, -1);
            free(tmp);
        } else {
            w_labels_obj(w, e0->l, e0->nl, -1);
        }
    }
    jsonw_key(w, "values");
    jsonw_arr_begin(w);
    size_t j = *i;
    for (; j < r->n_e && r->e[j].keylen == e0->keylen &&
           memcmp(r->e[j].key, e0->key, e0->keylen) == 0;
         j++) {
        const struct entry *e = &r->e[j];
        jsonw_arr_begin(w);
        jsonw_uint_str(w, e->ts);
        jsonw_str(w, e->line, e->line_n);
        if (cat) {
            jsonw_obj_begin(w);
            bool sm = false, parsed = false;
            for (uint32_t k = 0; k < e->nl; k++) {
                sm = sm || e->l[k].cat == LC_SM;
                parsed = parsed || e->l[k].cat == LC_PARSED;
            }
            if (sm) {
                jsonw_key(w, "structuredMetadata");
                w_labels_obj(w, e->l, e->nl, LC_SM);
            }
            if (parsed) {
                jsonw_key(w, "parsed");
                w_labels_obj(w, e->l, e->nl, LC_PARSED);
            }
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
    }
    jsonw_arr_end(w);
    jsonw_obj_end(w);
    *i = j;
}

static void w_series(const struct logs_result *r, struct jsonw *w, const struct series *s)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "metric");
    w_labels_obj(w, s->l, s->nl, -1);
    if (r->kind == RK_VECTOR) {
        jsonw_key(w, "value");
        jsonw_arr_begin(w);
        w_sec(w, r->start);
        jsonw_double_str(w, s->v[0]);
        jsonw_arr_end(w);
    } else {
        jsonw_key(w, "values");
        jsonw_arr_begin(w);
        for (size_t k = 0; k < r->K; k++) {
            if (s->cnt[k] == 0) {
                continue;
            }
            jsonw_arr_begin(w);
            w_sec(w, r->start + k * r->step);
            jsonw_double_str(w, s->v[k]);
            jsonw_arr_end(w);
        }
        jsonw_arr_end(w);
    }
    jsonw_obj_end(w);
}

static void w_record(struct jsonw *w, const struct log_view *v, uint64_t ts);
static int entry_time_fwd(const void *a, const void *b);
static int entry_time_bwd(const void *a, const void *b);

/* The head of the answer, up to the opening of the result list. */
static void render_head(struct logs_result *r, struct jsonw *w)
{
    static const char *const kinds[] = {"streams", "matrix", "vector", "scalar"};
    jsonw_obj_begin(w);
    jsonw_key(w, "status");
    jsonw_cstr(w, "success");
    w_warnings(w, r);
    jsonw_key(w, "data");
    jsonw_obj_begin(w);
    if (r->native) {
        jsonw_key(w, "records");
        jsonw_arr_begin(w);
        /* one list in query direction */
        qsort(r->e, r->n_e, sizeof(r->e[0]), r->q.rq.forward ? entry_time_fwd : entry_time_bwd);
        return;
    }
    jsonw_key(w, "resultType");
    jsonw_cstr(w, kinds[r->kind]);
    if (r->q.rq.categorize) {
        jsonw_key(w, "encodingFlags");
        jsonw_arr_begin(w);
        jsonw_cstr(w, "categorize-labels");
        jsonw_arr_end(w);
    }
    jsonw_key(w, "result");
    if (r->kind == RK_SCALAR) {
        jsonw_arr_begin(w);
        w_sec(w, r->start);
        jsonw_double_str(w, r->n_ser > 0 ? r->ser[0]->v[0] : 0);
        return; /* the tail closes it */
    }
    jsonw_arr_begin(w);
    if (r->n_ser > 1) {
        qsort(r->ser, r->n_ser, sizeof(r->ser[0]), series_key_cmp);
    }
}

/* The next item of the result list; false when there is none left. */
static bool render_item(struct logs_result *r, struct jsonw *w)
{
    size_t *i = &r->rd_i;
    if (r->native) {
        if (*i >= r->n_e) {
            return false;
        }
        const struct entry *e = &r->e[(*i)++];
        const struct src *src = &r->scan.srcs[e->src];
        struct log_view v;
        int rc = qctx_read_log(src->qs, e->row, BLK_ALL, &v);
        if (rc == 0) {
            w_record(w, &v, e->ts);
        }
        return true;
    }
    switch (r->kind) {
    case RK_STREAMS:
        if (*i >= r->n_e) {
            return false;
        }
        w_stream(r, w, i);
        return true;
    case RK_MATRIX:
    case RK_VECTOR:
        if (*i >= r->n_ser) {
            return false;
        }
        w_series(r, w, r->ser[(*i)++]);
        return true;
    case RK_SCALAR:
        break;
    }
    return false;
}

static void render_tail(struct logs_result *r, struct jsonw *w)
{
    jsonw_arr_end(w);
    w_stats(w, r);
    jsonw_obj_end(w);
    jsonw_obj_end(w);
}

bool logs_render(struct logs_result *r, struct evbuffer *out, size_t budget)
{
    struct jsonw *w = &r->rd_w;
    if (r->rd_stage == 0) {
        jsonw_init(w, out);
        render_head(r, w);
        r->rd_stage = 1;
    }
    w->out = out;
    size_t start = evbuffer_get_length(out);
    while (r->rd_stage == 1) {
        if (!render_item(r, w)) {
            r->rd_stage = 2;
            break;
        }
        if (budget > 0 && evbuffer_get_length(out) - start >= budget) {
            break;
        }
    }
    if (r->rd_stage == 2) {
        render_tail(r, w);
        r->rd_stage = 3;
    }
    return r->rd_stage == 3;
}

int logs_render_error(const struct logs_result *r)
{
    return r->rd_w.err;
}

void logs_write_loki(struct logs_result *r, struct jsonw *w)
{
    (void)logs_render(r, w->out, 0);
    if (r->rd_w.err < 0) {
        w->err = r->rd_w.err;
    }
}

/* ---- native records ------------------------------------------------------------------ */

static void w_anyvalue(struct jsonw *w, const struct val *v, int depth);

static void w_attrs_list(struct jsonw *w, const uint8_t *p, size_t len, uint32_t count, int depth)
{
    struct val_rd r = {p, p + len};
    jsonw_arr_begin(w);
    for (uint32_t i = 0; i < count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) != 0) {
            break;
        }
        jsonw_obj_begin(w);
        jsonw_key(w, "key");
        jsonw_str(w, k, kn);
        jsonw_key(w, "value");
        w_anyvalue(w, &v, depth + 1);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
}

/* OTLP/JSON AnyValue: {"stringValue":...}, {"intValue":"5"}, ... */
static void w_anyvalue(struct jsonw *w, const struct val *v, int depth)
{
    jsonw_obj_begin(w);
    if (depth > VAL_MAX_DEPTH) {
        jsonw_obj_end(w);
        return;
    }
    switch (v->type) {
    case VAL_EMPTY:
        break;
    case VAL_STR:
        jsonw_key(w, "stringValue");
        jsonw_str(w, v->s, v->n);
        break;
    case VAL_BOOL:
        jsonw_key(w, "boolValue");
        jsonw_bool(w, v->b);
        break;
    case VAL_INT:
        jsonw_key(w, "intValue");
        jsonw_strf(w, "%" PRId64, v->i);
        break;
    case VAL_DOUBLE:
        jsonw_key(w, "doubleValue");
        if (isnan(v->d) || isinf(v->d)) {
            jsonw_cstr(w, isnan(v->d) ? "NaN" : v->d > 0 ? "Infinity" : "-Infinity");
        } else {
            jsonw_double(w, v->d);
        }
        break;
    case VAL_BYTES: {
        struct sbuf sb = {0};
        sb_base64(&sb, (const uint8_t *)v->s, v->n);
        jsonw_key(w, "bytesValue");
        jsonw_str(w, sb.p ? sb.p : "", sb.n);
        sb_fini(&sb);
        break;
    }
    case VAL_ARRAY: {
        jsonw_key(w, "arrayValue");
        jsonw_obj_begin(w);
        jsonw_key(w, "values");
        jsonw_arr_begin(w);
        struct val_rd r = v->inner;
        for (uint32_t i = 0; i < v->count; i++) {
            struct val e;
            if (val_rd_value(&r, &e) != 0) {
                break;
            }
            w_anyvalue(w, &e, depth + 1);
        }
        jsonw_arr_end(w);
        jsonw_obj_end(w);
        break;
    }
    case VAL_KVLIST:
        jsonw_key(w, "kvlistValue");
        jsonw_obj_begin(w);
        jsonw_key(w, "values");
        w_attrs_list(w, v->inner.p, (size_t)(v->inner.end - v->inner.p), v->count, depth);
        jsonw_obj_end(w);
        break;
    }
    jsonw_obj_end(w);
}

static void w_hex(struct jsonw *w, const uint8_t *p, size_t n)
{
    char buf[33];
    for (size_t i = 0; i < n; i++) {
        buf[2 * i] = hexd[p[i] >> 4];
        buf[2 * i + 1] = hexd[p[i] & 15];
    }
    jsonw_str(w, buf, 2 * n);
}

static void w_record(struct jsonw *w, const struct log_view *v, uint64_t ts)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "timestamp");
    jsonw_uint_str(w, ts);
    jsonw_key(w, "timeUnixNano");
    jsonw_uint_str(w, v->time_ns);
    jsonw_key(w, "observedTimeUnixNano");
    jsonw_uint_str(w, v->observed_ns);
    jsonw_key(w, "severityNumber");
    jsonw_int(w, v->severity_number);
    jsonw_key(w, "severityText");
    jsonw_str(w, v->severity_text.p, v->severity_text.len);
    jsonw_key(w, "body");
    if (v->body_type == VAL_STR) {
        jsonw_obj_begin(w);
        jsonw_key(w, "stringValue");
        jsonw_str(w, v->body_str.p, v->body_str.len);
        jsonw_obj_end(w);
    } else {
        struct val bv = {.type = VAL_EMPTY};
        struct val_rd r = {v->body_val.p, v->body_val.p + v->body_val.len};
        if (v->body_type != VAL_EMPTY && val_rd_value(&r, &bv) != 0) {
            bv.type = VAL_EMPTY;
        }
        w_anyvalue(w, &bv, 0);
    }
    jsonw_key(w, "attributes");
    w_attrs_list(w, v->attrs.p, v->attrs.len, v->attrs.count, 0);
    jsonw_key(w, "droppedAttributesCount");
    jsonw_uint(w, v->dropped_attrs);
    jsonw_key(w, "flags");
    jsonw_uint(w, v->flags);
    jsonw_key(w, "traceId");
    if (v->has_trace_id) {
        w_hex(w, v->trace_id, 16);
    } else {
        jsonw_cstr(w, "");
    }
    jsonw_key(w, "spanId");
    if (v->has_span_id) {
        w_hex(w, v->span_id, 8);
    } else {
        jsonw_cstr(w, "");
    }
    jsonw_key(w, "eventName");
    jsonw_str(w, v->event_name.p, v->event_name.len);
    if (v->resource != NULL) {
        jsonw_key(w, "resource");
        jsonw_obj_begin(w);
        jsonw_key(w, "attributes");
        w_attrs_list(w, v->resource->attrs.p, v->resource->attrs.len, v->resource->attrs.count, 0);
        jsonw_key(w, "droppedAttributesCount");
        jsonw_uint(w, v->resource->dropped_attrs);
        jsonw_key(w, "schemaUrl");
        jsonw_str(w, v->resource->schema_url.p, v->resource->schema_url.len);
        jsonw_obj_end(w);
    }
    if (v->scope != NULL) {
        jsonw_key(w, "scope");
        jsonw_obj_begin(w);
        jsonw_key(w, "name");
        jsonw_str(w, v->scope->name.p, v->scope->name.len);
        jsonw_key(w, "version");
        jsonw_str(w, v->scope->version.p, v->scope->version.len);
        jsonw_key(w, "attributes");
        w_attrs_list(w, v->scope->attrs.p, v->scope->attrs.len, v->scope->attrs.count, 0);
        jsonw_key(w, "droppedAttributesCount");
        jsonw_uint(w, v->scope->dropped_attrs);
        jsonw_key(w, "schemaUrl");
        jsonw_str(w, v->scope->schema_url.p, v->scope->schema_url.len);
        jsonw_obj_end(w);
    }
    jsonw_obj_end(w);
}

static int entry_time_fwd(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->ts != y->ts) {
        return x->ts < y->ts ? -1 : 1;
    }
    if (x->src != y->src) {
        return x->src < y->src ? -1 : 1;
    }
    return x->row < y->row ? -1 : x->row > y->row;
}

static int entry_time_bwd(const void *a, const void *b)
{
    return entry_time_fwd(b, a);
}

void logs_write_native(struct logs_result *r, struct jsonw *w)
{
    logs_write_loki(r, w);
}

/* ---- entry points ------------------------------------------------------------------ */

static void result_free(struct logs_result *r)
{
    if (r == NULL) {
        return;
    }
    scan_fini(&r->scan);
    free(r->e);
    free(r->ser);
    qctx_close(&r->q.c);
    arena_free(r->q.a);
    free(r);
}

void logs_result_free(struct logs_result *r)
{
    result_free(r);
}

const struct qs_scan *logs_result_scan(const struct logs_result *r)
{
    return &r->q.c.st;
}

static int exec_common(const struct logs_req *rq, bool native, struct logs_result **out, char *err,
                       size_t errlen)
{
    uint64_t t0 = mono_ns();
    *out = NULL;
    (void)qlex_re_take_limit_hit(); /* a note left by an earlier request on this thread */
    int rc = check_tree(rq->expr, err, errlen);
    if (rc < 0) {
        return rc;
    }
    struct logs_result *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->q.rq = *rq;
    r->native = native;
    r->q.a = arena_new(64 << 10);
    if (r->q.a == NULL || query_open(&r->q) < 0) {
        result_free(r);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (rq->expr->kind == LOGQL_EXPR_LOG) {
        r->kind = RK_STREAMS;
        if (r->q.rq.limit == 0) {
            r->q.rq.limit = 100;
        }
        rc = run_log_query(r);
    } else {
        rc = run_metric_query(r);
    }
    r->exec_ns = mono_ns() - t0;
    qstats_scan_add(&r->q.c.st);
    if (rc == 0) {
        rc = qctx_err(&r->q.c);
    }
    if (rc < 0) {
        const char *m = qctx_message(&r->q.c);
        snprintf(err, errlen, "%s", m[0] ? m : strerror(-rc));
        result_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int logs_exec(const struct logs_req *rq, struct logs_result **out, char *err, size_t errlen)
{
    return exec_common(rq, false, out, err, errlen);
}

int logs_exec_native(const struct logs_req *rq, struct logs_result **out, char *err, size_t errlen)
{
    if (rq->expr->kind != LOGQL_EXPR_LOG) {
        snprintf(err, errlen, "the native logs API takes log queries only, not metric queries");
        return -EINVAL;
    }
    return exec_common(rq, true, out, err, errlen);
}

/* ---- metadata: labels, values, series ------------------------------------------------ */

struct strset {
    char **s;
    size_t n, cap;
};

static int strset_add(struct strset *ss, const char *p, size_t n)
{
    for (size_t i = 0; i < ss->n; i++) {
        if (strlen(ss->s[i]) == n && memcmp(ss->s[i], p, n) == 0) {
            return 0;
        }
    }
    if (ss->n == ss->cap) {
        size_t nc = ss->cap ? ss->cap * 2 : 32;
        char **a = realloc(ss->s, nc * sizeof(*a));
        if (a == NULL) {
            return -ENOMEM;
        }
        ss->s = a;
        ss->cap = nc;
    }
    ss->s[ss->n] = strndup(p, n);
    if (ss->s[ss->n] == NULL) {
        return -ENOMEM;
    }
    ss->n++;
    return 0;
}

static int cstr_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void strset_free(struct strset *ss)
{
    for (size_t i = 0; i < ss->n; i++) {
        free(ss->s[i]);
    }
    free(ss->s);
}

/* Calls fn for every distinct stream (index label set) of blocks
 * overlapping [start, end] that any selector in sels accepts. */
static int each_stream(const struct logql_log *const *sels, size_t n_sels, uint64_t start,
                       uint64_t end, int (*fn)(void *arg, const struct rinfo *ri), void *arg)
{
    struct qctx qc;
    if (qctx_open(&qc, SIG_LOGS, NULL, "rows") < 0) {
        return -ENOMEM;
    }
    struct strset seen = {0};
    int rc = 0;
    for (size_t i = 0; i < qc.n_src && rc == 0; i++) {
        struct qctx_src *qs = &qc.src[i];
        if (qs->rows == 0 || (qs->b != NULL && (qs->tmax < start || qs->tmin > end))) {
            continue;
        }
        struct src src = {.qs = qs};
        src.a = arena_new(16 << 10);
        if (src.a == NULL) {
            rc = -ENOMEM;
            break;
        }
        rc = src_rinfo_all(&src, NULL);
        /* an open block has no zone map: find the resources with a row in
         * the window (the sealed ones are judged by their time range) */
        bool *live = NULL;
        if (rc == 0 && qs->b == NULL) {
            live = calloc(src.n_ri + 1, sizeof(bool));
            if (live == NULL) {
                rc = -ENOMEM;
            }
            for (uint64_t k = 0; k < qs->rows && rc == 0; k++) {
                struct log_view v;
                if (qctx_read_log(qs, k, 0, &v) < 0 || v.resource == NULL ||
                    v.resource->id >= src.n_ri) {
                    continue;
                }
                uint64_t ts = v.time_ns != 0 ? v.time_ns : v.observed_ns;
                if (ts >= start && ts <= end) {
                    live[v.resource->id] = true;
                }
            }
        }
        for (uint32_t r = 0; r < src.n_ri && rc == 0; r++) {
            const struct rinfo *ri = &src.ri[r];
            if (!ri->done || (live != NULL && !live[r])) {
                continue;
            }
            bool ok = n_sels == 0;
            for (size_t k = 0; k < n_sels && !ok; k++) {
                ok = sels[k] == NULL || selector_match(sels[k], ri->idx, ri->n_idx);
            }
            if (!ok) {
                continue;
            }
            size_t before = seen.n;
            rc = strset_add(&seen, ri->key, ri->keylen);
            if (rc == 0 && seen.n > before) {
                rc = fn(arg, ri);
            }
        }
        free(live);
        arena_free(src.a);
    }
    strset_free(&seen);
    qctx_close(&qc);
    return rc;
}

struct lab_arg {
    const char *name;
    struct strset out;
};

static int lab_fn(void *arg, const struct rinfo *ri)
{
    struct lab_arg *la = arg;
    for (uint32_t i = 0; i < ri->n_idx; i++) {
        const struct lbl *l = &ri->idx[i];
        int rc;
        if (la->name == NULL) {
            rc = strset_add(&la->out, l->n, l->nn);
        } else if (name_eq(l->n, l->nn, la->name)) {
            rc = strset_add(&la->out, l->v, l->vn);
        } else {
            rc = 0;
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

int logs_labels(const struct logql_log *sel, const char *name, uint64_t start_ns, uint64_t end_ns,
                struct jsonw *w)
{
    struct lab_arg la = {.name = name};
    const struct logql_log *sels[1] = {sel};
    int rc = each_stream(sels, sel ? 1 : 0, start_ns, end_ns, lab_fn, &la);
    if (rc < 0) {
        strset_free(&la.out);
        return rc;
    }
    if (la.out.n > 1) {
        qsort(la.out.s, la.out.n, sizeof(char *), cstr_cmp);
    }
    jsonw_obj_begin(w);
    jsonw_key(w, "status");
    jsonw_cstr(w, "success");
    jsonw_key(w, "data");
    jsonw_arr_begin(w);
    for (size_t i = 0; i < la.out.n; i++) {
        jsonw_cstr(w, la.out.s[i]);
    }
    jsonw_arr_end(w);
    jsonw_obj_end(w);
    strset_free(&la.out);
    return 0;
}

struct ser_arg {
    struct strset keys; /* sorted output by key */
    struct lbl **sets;
    uint32_t *ns;
    size_t n, cap;
};

static int ser_fn(void *arg, const struct rinfo *ri)
{
    struct ser_arg *sa = arg;
    if (sa->n == sa->cap) {
        size_t nc = sa->cap ? sa->cap * 2 : 32;
        struct lbl **s = realloc(sa->sets, nc * sizeof(*s));
        if (s == NULL) {
            return -ENOMEM;
        }
        sa->sets = s;
        uint32_t *n = realloc(sa->ns, nc * sizeof(*n));
        if (n == NULL) {
            return -ENOMEM;
        }
        sa->ns = n;
        sa->cap = nc;
    }
    struct lbl *copy = malloc((ri->n_idx + 1) * sizeof(struct lbl));
    if (copy == NULL) {
        return -ENOMEM;
    }
    /* strings are copied: the source arena goes away after this block */
    size_t bytes = 0;
    for (uint32_t i = 0; i < ri->n_idx; i++) {
        bytes += ri->idx[i].nn + ri->idx[i].vn + 2;
    }
    char *buf = malloc(bytes + 1);
    if (buf == NULL) {
        free(copy);
        return -ENOMEM;
    }
    char *p = buf;
    for (uint32_t i = 0; i < ri->n_idx; i++) {
        copy[i] = ri->idx[i];
        memcpy(p, ri->idx[i].n, ri->idx[i].nn);
        p[ri->idx[i].nn] = '\0';
        copy[i].n = p;
        p += ri->idx[i].nn + 1;
        memcpy(p, ri->idx[i].v, ri->idx[i].vn);
        p[ri->idx[i].vn] = '\0';
        copy[i].v = p;
        p += ri->idx[i].vn + 1;
    }
    copy[ri->n_idx].n = buf; /* remembered for free */
    sa->sets[sa->n] = copy;
    sa->ns[sa->n] = ri->n_idx;
    sa->n++;
    return 0;
}

int logs_series(const struct logql_log *const *sels, size_t n, uint64_t start_ns, uint64_t end_ns,
                struct jsonw *w)
{
    struct ser_arg sa = {0};
    int rc = each_stream(sels, n, start_ns, end_ns, ser_fn, &sa);
    if (rc == 0) {
        jsonw_obj_begin(w);
        jsonw_key(w, "status");
        jsonw_cstr(w, "success");
        jsonw_key(w, "data");
        jsonw_arr_begin(w);
        for (size_t i = 0; i < sa.n; i++) {
            w_labels_obj(w, sa.sets[i], sa.ns[i], -1);
        }
        jsonw_arr_end(w);
        jsonw_obj_end(w);
    }
    for (size_t i = 0; i < sa.n; i++) {
        free((char *)sa.sets[i][sa.ns[i]].n);
        free(sa.sets[i]);
    }
    free(sa.sets);
    free(sa.ns);
    strset_free(&sa.keys);
    return rc;
}

/* ---- index: stats, volume, detected labels ------------------------------------------- */

static bool on_index_match(struct rctx *c, uint64_t row)
{
    (void)row;
    struct src *src = c->src;
    if (src->vb == NULL) {
        src->vb = calloc(src->n_ri + 1, sizeof(uint64_t));
        src->ve = calloc(src->n_ri + 1, sizeof(uint64_t));
        if (src->vb == NULL || src->ve == NULL) {
            c->err = -ENOMEM;
            return false;
        }
    }
    src->vb[c->v->resource->id] += c->line_n;
    src->ve[c->v->resource->id]++;
    return true;
}

static void scan_item_index(void *arg, size_t i)
{
    struct scan *s = arg;
    if (qctx_err(&s->q->c)) {
        return;
    }
    scan_src_run(s, &s->srcs[i], on_index_match);
}

struct vgroup {
    char *key;
    struct lbl *l;
    uint32_t nl;
    uint64_t bytes, entries;
    char *buf; /* label strings */
};

static int vgroup_cmp(const void *a, const void *b)
{
    const struct vgroup *x = a, *y = b;
    if (x->bytes != y->bytes) {
        return x->bytes > y->bytes ? -1 : 1;
    }
    return strcmp(x->key, y->key);
}

int logs_index(const struct logs_req *rq, enum logs_index_mode mode,
               const struct logql_str *targets, size_t n_targets, bool agg_labels, uint32_t limit,
               struct jsonw *w, char *err, size_t errlen)
{
    struct logs_result *r = NULL;
    int rc = 0;
    if (rq->expr == NULL || rq->expr->kind != LOGQL_EXPR_LOG) {
        snprintf(err, errlen, "a stream selector is expected");
        return -EINVAL;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->q.rq = *rq;
    r->q.a = arena_new(16 << 10);
    if (r->q.a == NULL || query_open(&r->q) < 0) {
        result_free(r);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    struct scan *s = &r->scan;
    s->q = &r->q;
    s->log = &rq->expr->log;
    s->lo = rq->start_ns;
    s->hi = rq->end_ns + 1;
    s->range = rq->expr; /* scan every row of the window (no limit) */
    plan_needs(s, false);
    rc = scan_plan(s);
    if (rc == 0) {
        qpool_parallel(s->n_srcs, scan_item_index, s);
            rc = qctx_err(&r->q.c);
    }
    qstats_scan_add(&r->q.c.st);
    if (rc < 0) {
        const char *m = qctx_message(&r->q.c);
        snprintf(err, errlen, "%s", m[0] ? m : "out of memory");
        result_free(r);
        return rc;
    }
    /* group streams: by the target labels, else by the names the matchers use */
    struct vgroup *g = NULL;
    size_t ng = 0, capg = 0;
    uint64_t chunks = 0;
    struct strset streams = {0};
    struct sbuf sb = {0};
    for (size_t i = 0; i < s->n_srcs && rc == 0; i++) {
        struct src *src = &s->srcs[i];
        if (src->ve == NULL) {
            continue;
        }
        bool any = false;
        for (uint32_t k = 0; k < src->n_ri && rc == 0; k++) {
            if (src->ve[k] == 0) {
                continue;
            }
            any = true;
            const struct rinfo *ri = &src->ri[k];
            rc = strset_add(&streams, ri->key, ri->keylen);
            if (rc < 0) {
                break;
            }
            if (mode == LOGS_INDEX_STATS) {
                if (ng == 0) {
                    ng = 1; /* one total */
                    g = calloc(1, sizeof(*g));
                    capg = 1;
                    if (g == NULL) {
                        rc = -ENOMEM;
                        break;
                    }
                }
                g[0].bytes += src->vb[k];
                g[0].entries += src->ve[k];
                continue;
            }
            /* the labels of this stream that make its group */
            struct lbl l[64];
            uint32_t nl = 0;
            for (uint32_t j = 0; j < ri->n_idx && nl < 64; j++) {
                const struct lbl *x = &ri->idx[j];
                bool keep = false;
                if (n_targets > 0) {
                    keep = listed(targets, n_targets, x->n, x->nn);
                } else {
                    for (size_t m = 0; m < s->log->n_matchers && !keep; m++) {
                        keep = s->log->matchers[m].name.n == x->nn &&
                               memcmp(s->log->matchers[m].name.s, x->n, x->nn) == 0;
                    }
                }
                if (keep) {
                    l[nl++] = *x;
                }
            }
            /* aggregateBy=labels: one group per label name, value "" */
            size_t rounds = agg_labels ? nl : 1;
            for (size_t rr = 0; rr < rounds && rc == 0; rr++) {
                struct lbl one;
                const struct lbl *gl = l;
                uint32_t gn = nl;
                if (agg_labels) {
                    one = l[rr];
                    one.v = "";
                    one.vn = 0;
                    gl = &one;
                    gn = 1;
                }
                sb.n = 0;
                sb_labels_key(&sb, gl, gn);
                sb_addc(&sb, '\0');
                if (sb.oom) {
                    rc = -ENOMEM;
                    break;
                }
                size_t at = ng;
                for (size_t m = 0; m < ng; m++) {
                    if (strcmp(g[m].key, sb.p) == 0) {
                        at = m;
                        break;
                    }
                }
                if (at == ng) {
                    if (ng == capg) {
                        size_t nc = capg ? capg * 2 : 16;
                        struct vgroup *ngp = realloc(g, nc * sizeof(*g));
                        if (ngp == NULL) {
                            rc = -ENOMEM;
                            break;
                        }
                        g = ngp;
                        capg = nc;
                    }
                    memset(&g[ng], 0, sizeof(g[ng]));
                    g[ng].key = strdup(sb.p);
                    size_t bytes = 0;
                    for (uint32_t j = 0; j < gn; j++) {
                        bytes += gl[j].nn + gl[j].vn + 2;
                    }
                    g[ng].buf = malloc(bytes + 1);
                    g[ng].l = malloc((gn + 1) * sizeof(struct lbl));
                    if (g[ng].key == NULL || g[ng].buf == NULL || g[ng].l == NULL) {
                        free(g[ng].key);
                        free(g[ng].buf);
                        free(g[ng].l);
                        rc = -ENOMEM;
                        break;
                    }
                    char *p = g[ng].buf;
                    for (uint32_t j = 0; j < gn; j++) {
                        g[ng].l[j] = gl[j];
                        memcpy(p, gl[j].n, gl[j].nn);
                        p[gl[j].nn] = '\0';
                        g[ng].l[j].n = p;
                        p += gl[j].nn + 1;
                        memcpy(p, gl[j].v, gl[j].vn);
                        p[gl[j].vn] = '\0';
                        g[ng].l[j].v = p;
                        p += gl[j].vn + 1;
                    }
                    g[ng].nl = gn;
                    ng++;
                }
                g[at].bytes += src->vb[k];
                g[at].entries += src->ve[k];
            }
        }
        chunks += any;
    }
    sb_fini(&sb);
    if (rc == 0 && mode == LOGS_INDEX_STATS) {
        jsonw_obj_begin(w);
        jsonw_key(w, "streams");
        jsonw_uint(w, streams.n);
        jsonw_key(w, "chunks");
        jsonw_uint(w, chunks);
        jsonw_key(w, "entries");
        jsonw_uint(w, ng ? g[0].entries : 0);
        jsonw_key(w, "bytes");
        jsonw_uint(w, ng ? g[0].bytes : 0);
        jsonw_obj_end(w);
    } else if (rc == 0) {
        if (ng > 1) {
            qsort(g, ng, sizeof(*g), vgroup_cmp);
        }
        jsonw_obj_begin(w);
        jsonw_key(w, "status");
        jsonw_cstr(w, "success");
        jsonw_key(w, "data");
        jsonw_obj_begin(w);
        jsonw_key(w, "resultType");
        jsonw_cstr(w, "vector");
        jsonw_key(w, "result");
        jsonw_arr_begin(w);
        for (size_t m = 0; m < ng && (limit == 0 || m < limit); m++) {
            jsonw_obj_begin(w);
            jsonw_key(w, "metric");
            w_labels_obj(w, g[m].l, g[m].nl, -1);
            jsonw_key(w, "value");
            jsonw_arr_begin(w);
            w_sec(w, rq->end_ns);
            jsonw_double_str(w, (double)g[m].bytes);
            jsonw_arr_end(w);
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
        jsonw_obj_end(w);
        jsonw_obj_end(w);
    }
    for (size_t m = 0; m < ng; m++) {
        if (mode != LOGS_INDEX_STATS) {
            free(g[m].key);
            free(g[m].buf);
            free(g[m].l);
        }
    }
    free(g);
    strset_free(&streams);
    result_free(r);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
    }
    return rc;
}

struct dl_arg {
    struct strset names;
    struct strset *values; /* per name */
    size_t cap;
    int rc;
};

static int dl_fn(void *arg, const struct rinfo *ri)
{
    struct dl_arg *da = arg;
    for (uint32_t i = 0; i < ri->n_idx; i++) {
        const struct lbl *l = &ri->idx[i];
        size_t at = da->names.n;
        for (size_t k = 0; k < da->names.n; k++) {
            if (strlen(da->names.s[k]) == l->nn && memcmp(da->names.s[k], l->n, l->nn) == 0) {
                at = k;
                break;
            }
        }
        if (at == da->names.n) {
            if (da->names.n == da->cap) {
                size_t nc = da->cap ? da->cap * 2 : 16;
                struct strset *v = realloc(da->values, nc * sizeof(*v));
                if (v == NULL) {
                    return -ENOMEM;
                }
                memset(v + da->cap, 0, (nc - da->cap) * sizeof(*v));
                da->values = v;
                da->cap = nc;
            }
            if (strset_add(&da->names, l->n, l->nn) < 0) {
                return -ENOMEM;
            }
        }
        if (strset_add(&da->values[at], l->v, l->vn) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

int logs_detected_labels(const struct logql_log *sel, uint64_t start_ns, uint64_t end_ns,
                         struct jsonw *w)
{
    struct dl_arg da = {0};
    const struct logql_log *sels[1] = {sel};
    int rc = each_stream(sels, sel ? 1 : 0, start_ns, end_ns, dl_fn, &da);
    if (rc == 0) {
        jsonw_obj_begin(w);
        jsonw_key(w, "detectedLabels");
        jsonw_arr_begin(w);
        for (size_t i = 0; i < da.names.n; i++) {
            jsonw_obj_begin(w);
            jsonw_key(w, "label");
            jsonw_cstr(w, da.names.s[i]);
            jsonw_key(w, "cardinality");
            jsonw_uint(w, da.values[i].n);
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
        jsonw_obj_end(w);
    }
    for (size_t i = 0; i < da.names.n; i++) {
        strset_free(&da.values[i]);
    }
    free(da.values);
    strset_free(&da.names);
    return rc;
}
