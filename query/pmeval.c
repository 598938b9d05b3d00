/*
 * pmeval.c - the PromQL evaluator (pmeval.h): selectors, steps, subqueries,
 * step-invariant subtrees, function calls, unary minus and the result
 * shapes, as Prometheus 2.42's promql/engine.go evaluates them.
 * Function calls are in pmeval_call.c, aggregations in pmeval_agg.c,
 * binary operators in pmeval_bin.c.
 *
 * FLOW. pm_eval first walks the AST once (prep): every selector node reads
 * its series from the source, once, over the time range the whole query
 * needs for it (Prometheus's populateSeries / getTimeRangesForSelector),
 * and the nodes Prometheus would wrap in a StepInvariantExpr
 * (preprocessExpr: subtrees whose every selector has an @) are noted.
 * Then pe_eval evaluates the root over the query's steps. A step-invariant
 * node is evaluated at the evaluator's first step only and its points are
 * repeated on the other steps.
 *
 * @ AND OFFSET. Prometheus folds @ into the selectors' offsets relative to
 * the evaluator's start time (setOffsetForAtModifier); the answers are
 * those of reading a selector with @T at T - offset on every step, which
 * is what this file does directly. The one place 2.42 differs is
 * timestamp(x @ T offset d): it reads at T, the offset lost, and so do we.
 *
 * SAMPLES. sh->cur follows Prometheus's currentSamples: points a node's
 * value holds, plus the points gathered for the step being computed.
 */
#include "query/pmeval.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/pmeval_eng.h"
#include "storage/promname.h"

#define PE_DEFAULT_SUBQUERY_STEP_MS 60000 /* Prometheus's default evaluation interval */

struct pe_sel {
    const struct promql_expr *node; /* PROMQL_VECTOR */
    struct pm_set set;              /* staleness markers kept */
};

/* ---- small helpers ---------------------------------------------------- */

int pe_fail(struct pe_shared *sh, int rc, const char *fmt, ...)
{
    if (sh->errlen != 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->err, sh->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int pe_too_many(struct pe_shared *sh)
{
    return pe_fail(sh, -E2BIG,
                   "query processing would load too many samples into memory in query execution");
}

int pe_dup_error(struct pe_shared *sh)
{
    return pe_fail(sh, -EDOM, "vector cannot contain metrics with the same labelset");
}

int pe_check(struct pe_shared *sh)
{
    if (sh->q == NULL) {
        return 0;
    }
    int rc = qctx_check(sh->q);
    if (rc == 0) {
        return 0;
    }
    /* Prometheus's words for its own two (contextDone); the qctx's for the rest */
    if (rc == -ETIMEDOUT) {
        return pe_fail(sh, rc, "query timed out in expression evaluation");
    }
    if (rc == -ECANCELED) {
        return pe_fail(sh, rc, "query was canceled in expression evaluation");
    }
    const char *m = qctx_message(sh->q);
    if (m != NULL && m[0] != '\0') {
        return pe_fail(sh, rc, "%s", m);
    }
    return pe_fail(sh, rc, "%s", strerror(-rc));
}

int pe_nomem(struct pe_shared *sh)
{
    return pe_fail(sh, -ENOMEM, "out of memory");
}

const struct promql_expr *pe_unparen(const struct promql_expr *e)
{
    while (e != NULL && e->kind == PROMQL_PAREN) {
        e = e->inner;
    }
    return e;
}

int64_t pe_at_time(const struct pe_shared *sh, const struct promql_mod *m)
{
    switch (m->at) {
    case PROMQL_AT_START:
        return sh->qstart;
    case PROMQL_AT_END:
        return sh->qend;
    default:
        return m->at_ms;
    }
}

void pe_go_quote(const char *s, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t w = 0;
    if (cap < 3) {
        if (cap != 0) {
            out[0] = '\0';
        }
        return;
    }
    out[w++] = '"';
    for (size_t i = 0; i < n && w + 6 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out[w++] = '\\';
            out[w++] = (char)c;
        } else if (c == '\n') {
            out[w++] = '\\';
            out[w++] = 'n';
        } else if (c == '\t') {
            out[w++] = '\\';
            out[w++] = 't';
        } else if (c == '\r') {
            out[w++] = '\\';
            out[w++] = 'r';
        } else if (c < 0x20 || c == 0x7f) {
            out[w++] = '\\';
            out[w++] = 'x';
            out[w++] = hex[c >> 4];
            out[w++] = hex[c & 15];
        } else {
            out[w++] = (char)c;
        }
    }
    out[w++] = '"';
    out[w] = '\0';
}

char *pe_fmt_labels(arena *a, const struct pm_labels *ls)
{
    size_t cap = 3;
    for (uint32_t i = 0; i < ls->n; i++) {
        cap += ls->v[i].name_len + 4 * (size_t)ls->v[i].value_len + 12;
    }
    char *b = (char *)arena_alloc(a, cap);
    if (b == NULL) {
        return NULL;
    }
    size_t w = 0;
    b[w++] = '{';
    for (uint32_t i = 0; i < ls->n; i++) {
        if (i > 0) {
            b[w++] = ',';
            b[w++] = ' ';
        }
        memcpy(b + w, ls->v[i].name, ls->v[i].name_len);
        w += ls->v[i].name_len;
        b[w++] = '=';
        pe_go_quote(ls->v[i].value, ls->v[i].value_len, b + w, cap - w);
        w += strlen(b + w);
    }
    b[w++] = '}';
    b[w] = '\0';
    return b;
}

/* ---- hash map ----------------------------------------------------------- */

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

int pe_hmap_init(arena *a, struct pe_hmap *m, size_t hint)
{
    uint32_t cap = 16;
    while (cap < 2 * hint && cap < (1u << 30)) {
        cap *= 2;
    }
    m->k = (uint64_t *)arena_alloc(a, cap * sizeof *m->k);
    m->v = (int32_t *)arena_alloc(a, cap * sizeof *m->v);
    if (m->k == NULL || m->v == NULL) {
        return -ENOMEM;
    }
    memset(m->v, 0xff, cap * sizeof *m->v);
    m->cap = cap;
    m->n = 0;
    return 0;
}

void pe_hmap_clear(struct pe_hmap *m)
{
    if (m->n != 0) {
        memset(m->v, 0xff, m->cap * sizeof *m->v);
        m->n = 0;
    }
}

int32_t pe_hmap_get(const struct pe_hmap *m, uint64_t k)
{
    if (m->cap == 0) {
        return -1;
    }
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)mix(k) & mask;; i = (i + 1) & mask) {
        if (m->v[i] < 0) {
            return -1;
        }
        if (m->k[i] == k) {
            return m->v[i];
        }
    }
}

int pe_hmap_put(arena *a, struct pe_hmap *m, uint64_t k, int32_t v)
{
    if (m->cap == 0 || 2 * (m->n + 1) > m->cap) {
        struct pe_hmap n;
        if (pe_hmap_init(a, &n, m->cap != 0 ? m->cap : 8) != 0) {
            return -ENOMEM;
        }
        for (uint32_t i = 0; i < m->cap; i++) {
            if (m->v[i] >= 0 && pe_hmap_put(a, &n, m->k[i], m->v[i]) != 0) {
                return -ENOMEM;
            }
        }
        *m = n;
    }
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)mix(k) & mask;; i = (i + 1) & mask) {
        if (m->v[i] < 0) {
            m->k[i] = k;
            m->v[i] = v;
            m->n++;
            return 0;
        }
        if (m->k[i] == k) {
            m->v[i] = v;
            return 0;
        }
    }
}

bool pe_hashes_have_dup(struct pe_shared *sh, const uint64_t *h, size_t n)
{
    if (n < 2) {
        return false;
    }
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            for (size_t j = 0; j < i; j++) {
                if (h[j] == h[i]) {
                    return true;
                }
            }
        }
        return false;
    }
    struct pe_hmap *m = &sh->dup;
    pe_hmap_clear(m);
    for (size_t i = 0; i < n; i++) {
        if (pe_hmap_get(m, h[i]) >= 0) {
            return true;
        }
        if (pe_hmap_put(sh->a, m, h[i], 0) != 0) {
            return false; /* the next allocation fails the query */
        }
    }
    return false;
}

/* Vector.ContainsSameLabelset: label hashes compared. */
bool pe_vec_has_dup(struct pe_shared *sh, const struct pm_vec *v)
{
    if (v->n < 2) {
        return false;
    }
    if (v->n <= 16) {
        uint64_t h[16];
        for (size_t i = 0; i < v->n; i++) {
            h[i] = pm_labels_hash(&v->e[i].labels);
            for (size_t j = 0; j < i; j++) {
                if (h[j] == h[i]) {
                    return true;
                }
            }
        }
        return false;
    }
    struct pe_hmap *m = &sh->dup;
    pe_hmap_clear(m);
    for (size_t i = 0; i < v->n; i++) {
        uint64_t h = pm_labels_hash(&v->e[i].labels);
        if (pe_hmap_get(m, h) >= 0) {
            return true;
        }
        if (pe_hmap_put(sh->a, m, h, 0) != 0) {
            return false; /* the next allocation fails the query */
        }
    }
    return false;
}

static bool mat_has_dup(struct pe_shared *sh, const struct pe_mat *m)
{
    struct pm_vec v = {0};
    for (size_t i = 0; i < m->n; i++) {
        struct pm_velem e = {.labels = m->s[i].labels};
        if (pm_vec_push(sh->a, &v, &e) != 0) {
            return false;
        }
    }
    return pe_vec_has_dup(sh, &v);
}

int pe_cache_room(arena *a, struct pe_cache *c, size_t i)
{
    if (i < c->cap) {
        return 0;
    }
    size_t cap = c->cap != 0 ? c->cap : 16;
    while (cap <= i) {
        cap *= 2;
    }
    uint64_t *v = (uint64_t *)arena_alloc(a, cap * sizeof *v);
    struct pm_labels *l = (struct pm_labels *)arena_alloc(a, cap * sizeof *l);
    uint8_t *set = (uint8_t *)arena_alloc(a, cap);
    if (v == NULL || l == NULL || set == NULL) {
        return -ENOMEM;
    }
    memset(set, 0, cap);
    if (c->cap != 0) {
        memcpy(v, c->v, c->cap * sizeof *v);
        memcpy(l, c->l, c->cap * sizeof *l);
        memcpy(set, c->set, c->cap);
    }
    c->v = v;
    c->l = l;
    c->set = set;
    c->cap = cap;
    return 0;
}

/* ---- matrices ----------------------------------------------------------- */

int pe_series_push(arena *a, struct pe_series *s, int64_t t, double v, const struct pm_hist *h)
{
    if (h == NULL) {
        if (s->nf == s->fcap) {
            size_t cap = s->fcap != 0 ? 2 * s->fcap : 4;
            struct pm_fsample *n = (struct pm_fsample *)arena_alloc(a, cap * sizeof *n);
            if (n == NULL) {
                return -ENOMEM;
            }
            if (s->nf != 0) {
                memcpy(n, s->f, s->nf * sizeof *n);
            }
            s->f = n;
            s->fcap = cap;
        }
        s->f[s->nf].t = t;
        s->f[s->nf].v = v;
        s->nf++;
        return 0;
    }
    if (s->nh == s->hcap) {
        size_t cap = s->hcap != 0 ? 2 * s->hcap : 4;
        struct pm_hsample *n = (struct pm_hsample *)arena_alloc(a, cap * sizeof *n);
        if (n == NULL) {
            return -ENOMEM;
        }
        if (s->nh != 0) {
            memcpy(n, s->h, s->nh * sizeof *n);
        }
        s->h = n;
        s->hcap = cap;
    }
    s->h[s->nh].t = t;
    s->h[s->nh].h = h;
    s->nh++;
    return 0;
}

int pe_mat_add(arena *a, struct pe_mat *m, const struct pm_labels *labels, size_t *idx)
{
    if (m->n == m->cap) {
        size_t cap = m->cap != 0 ? 2 * m->cap : 8;
        struct pe_series *n = (struct pe_series *)arena_alloc(a, cap * sizeof *n);
        if (n == NULL) {
            return -ENOMEM;
        }
        if (m->n != 0) {
            memcpy(n, m->s, m->n * sizeof *n);
        }
        m->s = n;
        m->cap = cap;
    }
    memset(&m->s[m->n], 0, sizeof m->s[m->n]);
    m->s[m->n].labels = *labels;
    *idx = m->n++;
    return 0;
}

/* ---- prep: selectors and step invariance ------------------------------- */

/* The enclosing subqueries' offset and range (Prometheus's subqueryTimes). */
struct pe_sq {
    int64_t off, range;
    bool has_ts;
    int64_t ts;
};

static int add_inv(struct pe_shared *sh, const struct promql_expr *e)
{
    e = pe_unparen(e);
    if (e->kind == PROMQL_NUMBER || e->kind == PROMQL_STRING) {
        return 0; /* evaluating a literal once or per step is the same */
    }
    if (sh->n_inv == sh->inv_cap) {
        size_t cap = sh->inv_cap != 0 ? 2 * sh->inv_cap : 16;
        const struct promql_expr **n =
            (const struct promql_expr **)arena_alloc(sh->a, cap * sizeof *n);
        if (n == NULL) {
            return pe_nomem(sh);
        }
        if (sh->n_inv != 0) {
            memcpy(n, sh->inv, sh->n_inv * sizeof *n);
        }
        sh->inv = n;
        sh->inv_cap = cap;
    }
    sh->inv[sh->n_inv++] = e;
    return 0;
}

static bool is_inv(const struct pe_shared *sh, const struct promql_expr *e)
{
    for (size_t i = 0; i < sh->n_inv; i++) {
        if (sh->inv[i] == e) {
            return true;
        }
    }
    return false;
}

const struct pm_set *pe_sel_set(const struct pe_shared *sh, const struct promql_expr *node)
{
    for (size_t i = 0; i < sh->n_sels; i++) {
        if (sh->sels[i].node == node) {
            return &sh->sels[i].set;
        }
    }
    return NULL;
}

static int src_error(struct pe_shared *sh, int rc)
{
    if (sh->q != NULL) {
        const char *m = qctx_message(sh->q);
        if (m != NULL && m[0] != '\0') {
            return pe_fail(sh, rc, "%s", m);
        }
    }
    if (rc == -E2BIG) {
        return pe_too_many(sh);
    }
    return pe_fail(sh, rc, "%s", strerror(-rc));
}

static int load_selector(struct pe_shared *sh, const struct promql_expr *e, const struct pe_sq *sq,
                         int64_t eval_range, bool ts_quirk)
{
    const struct promql_sel *s = &e->sel;
    int64_t start = sh->qstart, end = sh->qend;
    if (sq->has_ts) {
        start = end = sq->ts;
    }
    if (s->mod.at != PROMQL_AT_NONE) {
        start = end = pe_at_time(sh, &s->mod);
    } else {
        start -= sq->off + sq->range;
        end -= sq->off;
    }
    start -= eval_range == 0 ? sh->lookback : eval_range;
    start -= s->mod.offset_ms;
    end -= s->mod.offset_ms;
    if (ts_quirk) {
        /* timestamp(x @ T offset d) reads at T (step_timestamp); Prometheus
         * gets that sample from the chunks it loaded anyway. */
        int64_t t = pe_at_time(sh, &s->mod);
        if (t - sh->lookback < start) {
            start = t - sh->lookback;
        }
        if (t > end) {
            end = t;
        }
    }

    if (sh->n_sels % 16 == 0) {
        struct pe_sel *n = (struct pe_sel *)arena_alloc(sh->a, (sh->n_sels + 16) * sizeof *n);
        if (n == NULL) {
            return pe_nomem(sh);
        }
        if (sh->n_sels != 0) {
            memcpy(n, sh->sels, sh->n_sels * sizeof *n);
        }
        sh->sels = n;
    }
    struct pe_sel *sel = &sh->sels[sh->n_sels];
    memset(sel, 0, sizeof *sel);
    sel->node = e;
    int rc = sh->src->select(sh->src->ctx, s->matchers, s->n_matchers, start, end, &sel->set);
    if (rc < 0) {
        return src_error(sh, rc);
    }
    sh->n_sels++;
    return pe_check(sh);
}

static bool call_at_unsafe(enum promql_func_id id)
{
    switch (id) {
    case PROMQL_FN_DAYS_IN_MONTH:
    case PROMQL_FN_DAY_OF_MONTH:
    case PROMQL_FN_DAY_OF_WEEK:
    case PROMQL_FN_DAY_OF_YEAR:
    case PROMQL_FN_HOUR:
    case PROMQL_FN_MINUTE:
    case PROMQL_FN_MONTH:
    case PROMQL_FN_YEAR:
    case PROMQL_FN_PREDICT_LINEAR:
    case PROMQL_FN_TIME:
    case PROMQL_FN_TIMESTAMP:
        return true;
    default:
        return false;
    }
}

/* Loads the selectors under |e| and tells whether |e| is step-invariant
 * (preprocessExprHelper), noting the subtrees Prometheus wraps. */
static int prep(struct pe_shared *sh, const struct promql_expr *e, struct pe_sq sq,
                int64_t eval_range, bool *inv)
{
    int rc;
    bool a, b;
    *inv = false;
    switch (e->kind) {
    case PROMQL_NUMBER:
    case PROMQL_STRING:
        *inv = true;
        return 0;
    case PROMQL_VECTOR:
        *inv = e->sel.mod.at != PROMQL_AT_NONE;
        return load_selector(sh, e, &sq, eval_range, false);
    case PROMQL_MATRIX:
        return prep(sh, e->inner, sq, e->range_ms, inv);
    case PROMQL_SUBQUERY: {
        struct pe_sq in = sq;
        in.off += e->mod.offset_ms;
        in.range += e->range_ms;
        if (e->mod.at != PROMQL_AT_NONE) {
            in.off = e->mod.offset_ms;
            in.range = e->range_ms;
            in.has_ts = true;
            in.ts = pe_at_time(sh, &e->mod);
        }
        if ((rc = prep(sh, e->inner, in, 0, &a)) != 0) {
            return rc;
        }
        if (a && (rc = add_inv(sh, e->inner)) != 0) {
            return rc;
        }
        *inv = e->mod.at != PROMQL_AT_NONE;
        return 0;
    }
    case PROMQL_CALL: {
        bool all = !call_at_unsafe(e->func->id);
        bool flags[8];
        bool *f = flags;
        if (e->n_args > 8) {
            f = (bool *)arena_alloc(sh->a, e->n_args * sizeof *f);
            if (f == NULL) {
                return pe_nomem(sh);
            }
        }
        for (size_t i = 0; i < e->n_args; i++) {
            const struct promql_expr *u = pe_unparen(e->args[i]);
            if (e->func->id == PROMQL_FN_TIMESTAMP && u->kind == PROMQL_VECTOR &&
                u->sel.mod.at != PROMQL_AT_NONE) {
                f[i] = true;
                rc = load_selector(sh, u, &sq, 0, true);
            } else {
                rc = prep(sh, e->args[i], sq, 0, &f[i]);
            }
            if (rc != 0) {
                return rc;
            }
            all = all && f[i];
        }
        if (all) {
            *inv = true;
            return 0;
        }
        for (size_t i = 0; i < e->n_args; i++) {
            if (f[i] && (rc = add_inv(sh, e->args[i])) != 0) {
                return rc;
            }
        }
        return 0;
    }
    case PROMQL_AGG:
        /* 2.42 looks at the body only, not at the parameter. */
        if (e->param != NULL && (rc = prep(sh, e->param, sq, 0, &a)) != 0) {
            return rc;
        }
        return prep(sh, e->inner, sq, 0, inv);
    case PROMQL_BINARY:
        if ((rc = prep(sh, e->lhs, sq, 0, &a)) != 0 || (rc = prep(sh, e->rhs, sq, 0, &b)) != 0) {
            return rc;
        }
        if (a && b) {
            *inv = true;
            return 0;
        }
        if (a && (rc = add_inv(sh, e->lhs)) != 0) {
            return rc;
        }
        if (b && (rc = add_inv(sh, e->rhs)) != 0) {
            return rc;
        }
        return 0;
    case PROMQL_UNARY:
    case PROMQL_PAREN:
        return prep(sh, e->inner, sq, 0, inv);
    }
    return 0;
}

/* ---- reading series ------------------------------------------------------ */

static bool hist_stale(const struct pm_hist *h)
{
    return promname_is_stale_nan(h->sum);
}

/* Number of float samples with t <= ref. */
int pe_series_reserve(arena *a, struct pe_series *s, bool hist, size_t n)
{
    if (hist) {
        if (s->hcap >= n) {
            return 0;
        }
        struct pm_hsample *p = (struct pm_hsample *)arena_alloc(a, n * sizeof *p);
        if (p == NULL) {
            return -ENOMEM;
        }
        if (s->nh != 0) {
            memcpy(p, s->h, s->nh * sizeof *p);
        }
        s->h = p;
        s->hcap = n;
        return 0;
    }
    if (s->fcap >= n) {
        return 0;
    }
    struct pm_fsample *p = (struct pm_fsample *)arena_alloc(a, n * sizeof *p);
    if (p == NULL) {
        return -ENOMEM;
    }
    if (s->nf != 0) {
        memcpy(p, s->f, s->nf * sizeof *p);
    }
    s->f = p;
    s->fcap = n;
    return 0;
}

static size_t f_upto(const struct pm_fsample *f, size_t n, int64_t ref)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f[mid].t <= ref) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static size_t h_upto(const struct pm_hsample *h, size_t n, int64_t ref)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h[mid].t <= ref) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* vectorSelectorSingle: the newest sample at or before |ref|, if it is at
 * most |lookback| old and not the staleness marker. */
bool pe_sample_at(const struct pm_series *s, int64_t ref, int64_t lookback, int64_t *t, double *v,
                  const struct pm_hist **h)
{
    size_t i = f_upto(s->f, s->nf, ref);
    size_t j = h_upto(s->h, s->nh, ref);
    bool hf = i > 0, hh = j > 0;
    if (!hf && !hh) {
        return false;
    }
    if (hh && (!hf || s->h[j - 1].t > s->f[i - 1].t)) {
        *t = s->h[j - 1].t;
        *h = s->h[j - 1].h;
        *v = 0;
        if (*t < ref - lookback || hist_stale(*h)) {
            return false;
        }
        return true;
    }
    *t = s->f[i - 1].t;
    *v = s->f[i - 1].v;
    *h = NULL;
    return *t >= ref - lookback && !promname_is_stale_nan(*v);
}

/* pe_sample_at with cursors for a rising |ref|: *fi / *hi count the samples
 * at or before the previous ref (start both at 0). */
static bool sample_at_cursor(const struct pm_series *s, int64_t ref, int64_t lookback, size_t *fi,
                             size_t *hi, int64_t *t, double *v, const struct pm_hist **h)
{
    while (*fi < s->nf && s->f[*fi].t <= ref) {
        (*fi)++;
    }
    while (*hi < s->nh && s->h[*hi].t <= ref) {
        (*hi)++;
    }
    bool hf = *fi > 0, hh = *hi > 0;
    if (!hf && !hh) {
        return false;
    }
    if (hh && (!hf || s->h[*hi - 1].t > s->f[*fi - 1].t)) {
        *t = s->h[*hi - 1].t;
        *h = s->h[*hi - 1].h;
        *v = 0;
        return *t >= ref - lookback && !hist_stale(*h);
    }
    *t = s->f[*fi - 1].t;
    *v = s->f[*fi - 1].v;
    *h = NULL;
    return *t >= ref - lookback && !promname_is_stale_nan(*v);
}

/* An instant selector over the steps: two passes per series (count, then
 * fill exactly sized arrays), cursors moving with the steps. */
static int eval_vector_sel(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
{
    struct pe_shared *sh = ev->sh;
    const struct pm_set *set = pe_sel_set(sh, e);
    out->type = PROMQL_TYPE_VECTOR;
    if (set == NULL) {
        return 0;
    }
    bool at = e->sel.mod.at != PROMQL_AT_NONE;
    int64_t at_ms = at ? pe_at_time(sh, &e->sel.mod) : 0;
    int64_t off = e->sel.mod.offset_ms;
    for (size_t i = 0; i < set->n; i++) {
        const struct pm_series *s = &set->s[i];
        size_t nf = 0, nh = 0, fi = 0, hi = 0;
        int64_t t;
        double v;
        const struct pm_hist *h;
        for (int64_t ts = ev->start; ts <= ev->end; ts += ev->interval) {
            if (sample_at_cursor(s, (at ? at_ms : ts) - off, sh->lookback, &fi, &hi, &t, &v, &h)) {
                nf += h == NULL;
                nh += h != NULL;
            }
        }
        if (nf + nh == 0) {
            continue;
        }
        if (sh->cur + nf + nh > sh->max_samples) {
            return pe_too_many(sh);
        }
        sh->cur += nf + nh;
        struct pe_series ss = {.labels = s->labels, .fcap = nf, .hcap = nh};
        if (nf != 0 &&
            (ss.f = (struct pm_fsample *)arena_alloc(sh->a, nf * sizeof *ss.f)) == NULL) {
            return pe_nomem(sh);
        }
        if (nh != 0 &&
            (ss.h = (struct pm_hsample *)arena_alloc(sh->a, nh * sizeof *ss.h)) == NULL) {
            return pe_nomem(sh);
        }
        fi = hi = 0;
        for (int64_t ts = ev->start; ts <= ev->end; ts += ev->interval) {
            int rc = pe_tick(sh);
            if (rc != 0) {
                return rc;
            }
            if (!sample_at_cursor(s, (at ? at_ms : ts) - off, sh->lookback, &fi, &hi, &t, &v, &h)) {
                continue;
            }
            if (h == NULL) {
                ss.f[ss.nf++] = (struct pm_fsample){ts, v};
            } else {
                ss.h[ss.nh++] = (struct pm_hsample){ts, h};
            }
        }
        size_t idx;
        if (pe_mat_add(sh->a, &out->m, &ss.labels, &idx) != 0) {
            return pe_nomem(sh);
        }
        out->m.s[idx] = ss;
    }
    return 0;
}

/* The samples of |s| in [mint, maxt] without staleness markers, copied when
 * a marker is inside (else pointing into |s|). */
int pe_window(arena *a, const struct pm_series *s, int64_t mint, int64_t maxt, struct pm_win *w)
{
    w->labels = s->labels;
    size_t f0 = f_upto(s->f, s->nf, mint - 1), f1 = f_upto(s->f, s->nf, maxt);
    size_t h0 = h_upto(s->h, s->nh, mint - 1), h1 = h_upto(s->h, s->nh, maxt);
    w->f = s->f + f0;
    w->nf = f1 > f0 ? f1 - f0 : 0;
    w->h = s->h + h0;
    w->nh = h1 > h0 ? h1 - h0 : 0;
    size_t stale = 0;
    for (size_t i = 0; i < w->nf; i++) {
        stale += promname_is_stale_nan(w->f[i].v);
    }
    if (stale != 0) {
        struct pm_fsample *c = NULL;
        size_t n = 0;
        if (w->nf > stale) {
            c = (struct pm_fsample *)arena_alloc(a, (w->nf - stale) * sizeof *c);
            if (c == NULL) {
                return -ENOMEM;
            }
        }
        for (size_t i = 0; i < w->nf; i++) {
            if (!promname_is_stale_nan(w->f[i].v)) {
                c[n++] = w->f[i];
            }
        }
        w->f = c;
        w->nf = n;
    }
    stale = 0;
    for (size_t i = 0; i < w->nh; i++) {
        stale += hist_stale(w->h[i].h);
    }
    if (stale != 0) {
        struct pm_hsample *c = NULL;
        size_t n = 0;
        if (w->nh > stale) {
            c = (struct pm_hsample *)arena_alloc(a, (w->nh - stale) * sizeof *c);
            if (c == NULL) {
                return -ENOMEM;
            }
        }
        for (size_t i = 0; i < w->nh; i++) {
            if (!hist_stale(w->h[i].h)) {
                c[n++] = w->h[i];
            }
        }
        w->h = c;
        w->nh = n;
    }
    return 0;
}

/* Instant evaluation of a range selector: raw samples, names kept. */
static int eval_matrix_sel(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
{
    struct pe_shared *sh = ev->sh;
    const struct promql_expr *vs = e->inner;
    const struct pm_set *set = pe_sel_set(sh, vs);
    out->type = PROMQL_TYPE_MATRIX;
    if (set == NULL) {
        return 0;
    }
    int64_t base = vs->sel.mod.at != PROMQL_AT_NONE ? pe_at_time(sh, &vs->sel.mod) : ev->start;
    int64_t maxt = base - vs->sel.mod.offset_ms, mint = maxt - e->range_ms;
    for (size_t i = 0; i < set->n; i++) {
        struct pm_win w;
        if (pe_window(sh->a, &set->s[i], mint, maxt, &w) != 0) {
            return pe_nomem(sh);
        }
        size_t n = w.nf + w.nh;
        if (n == 0) {
            continue;
        }
        if (sh->cur + n > sh->max_samples) {
            return pe_too_many(sh);
        }
        sh->cur += n;
        size_t idx;
        if (pe_mat_add(sh->a, &out->m, &w.labels, &idx) != 0) {
            return pe_nomem(sh);
        }
        /* Borrowed arrays: cap == n, so a push would copy first. */
        struct pe_series *ss = &out->m.s[idx];
        ss->f = (struct pm_fsample *)w.f;
        ss->nf = ss->fcap = w.nf;
        ss->h = (struct pm_hsample *)w.h;
        ss->nh = ss->hcap = w.nh;
    }
    return 0;
}

/* ---- rangeEval ----------------------------------------------------------- */

static int alloc_scalar(struct pe_ev *ev, struct pe_val *out)
{
    size_t n = pe_nsteps(ev);
    out->type = PROMQL_TYPE_SCALAR;
    out->sc = (double *)arena_alloc(ev->sh->a, (n != 0 ? n : 1) * sizeof(double));
    if (out->sc == NULL) {
        return pe_nomem(ev->sh);
    }
    for (size_t i = 0; i < n; i++) {
        out->sc[i] = NAN;
    }
    return 0;
}

/* A one-series matrix result of a scalar-typed node as a per-step array. */
int pe_mat_to_scalar(struct pe_ev *ev, struct pe_val *v)
{
    struct pe_mat m = v->m;
    int rc = alloc_scalar(ev, v);
    if (rc != 0) {
        return rc;
    }
    memset(&v->m, 0, sizeof v->m);
    if (m.n == 0) {
        return 0;
    }
    for (size_t i = 0; i < m.s[0].nf; i++) {
        int64_t d = m.s[0].f[i].t - ev->start;
        if (d >= 0 && d % ev->interval == 0) {
            v->sc[d / ev->interval] = m.s[0].f[i].v;
        }
    }
    return 0;
}

static bool n_out_series_cap(size_t inputs, size_t outputs)
{
    return outputs < inputs + 64;
}

int pe_range_eval(struct pe_ev *ev, const struct promql_expr *const *args, size_t n_args,
                  pe_step_fn fn, void *ctx, struct pe_val *res)
{
    struct pe_shared *sh = ev->sh;
    arena *a = sh->a;
    uint64_t orig = sh->cur;
    int rc;
    struct pe_val *vals = NULL;
    struct pm_vec *vecs = NULL;
    double *scs = NULL;
    size_t *cf = NULL, *ch = NULL, *base = NULL;
    uint32_t **sidx = NULL;
    size_t total = 0;
    if (n_args != 0) {
        vals = (struct pe_val *)arena_alloc(a, n_args * sizeof *vals);
        vecs = (struct pm_vec *)arena_alloc(a, n_args * sizeof *vecs);
        scs = (double *)arena_alloc(a, n_args * sizeof *scs);
        base = (size_t *)arena_alloc(a, (n_args + 1) * sizeof *base);
        sidx = (uint32_t **)arena_alloc(a, n_args * sizeof *sidx);
        if (vals == NULL || vecs == NULL || scs == NULL || base == NULL || sidx == NULL) {
            return pe_nomem(sh);
        }
        memset(vals, 0, n_args * sizeof *vals);
        memset(vecs, 0, n_args * sizeof *vecs);
        memset(sidx, 0, n_args * sizeof *sidx);
    }
    for (size_t i = 0; i < n_args; i++) {
        scs[i] = NAN;
        base[i] = total;
        if (args[i] == NULL || args[i]->type == PROMQL_TYPE_STRING) {
            continue;
        }
        if ((rc = pe_eval(ev, args[i], &vals[i])) != 0) {
            return rc;
        }
        if (vals[i].type == PROMQL_TYPE_VECTOR) {
            total += vals[i].m.n;
            if (vals[i].m.n != 0) {
                sidx[i] = (uint32_t *)arena_alloc(a, vals[i].m.n * sizeof *sidx[i]);
                if (sidx[i] == NULL) {
                    return pe_nomem(sh);
                }
            }
        }
    }
    if (n_args != 0) {
        base[n_args] = total;
    }
    if (total != 0) {
        cf = (size_t *)arena_alloc(a, total * sizeof *cf);
        ch = (size_t *)arena_alloc(a, total * sizeof *ch);
        if (cf == NULL || ch == NULL) {
            return pe_nomem(sh);
        }
        memset(cf, 0, total * sizeof *cf);
        memset(ch, 0, total * sizeof *ch);
    }
    uint64_t temp = sh->cur;
    struct pm_vec out = {0};
    struct pe_hmap outmap = {0};
    uint64_t *oh = NULL, *phash = NULL;
    size_t oh_cap = 0, ph_cap = 0, nph = 0;
    struct pe_hmap ptrmap = {0}; /* label array -> index of its hash in phash */
    bool instant = ev->start == ev->end;
    memset(res, 0, sizeof *res);
    res->type = PROMQL_TYPE_VECTOR;
    size_t step = 0, npoints = 0, nsteps = pe_nsteps(ev);
    for (int64_t ts = ev->start; ts <= ev->end; ts += ev->interval, step++) {
        if ((rc = pe_check(sh)) != 0) {
            return rc;
        }
        sh->cur = temp;
        for (size_t i = 0; i < n_args; i++) {
            if (vals[i].type == PROMQL_TYPE_SCALAR) {
                if (sh->cur >= sh->max_samples) {
                    return pe_too_many(sh);
                }
                sh->cur++;
                scs[i] = vals[i].sc[step];
                continue;
            }
            if (vals[i].type != PROMQL_TYPE_VECTOR) {
                continue;
            }
            vecs[i].n = 0;
            for (size_t si = 0; si < vals[i].m.n; si++) {
                struct pe_series *s = &vals[i].m.s[si];
                size_t *pf = &cf[base[i] + si], *ph = &ch[base[i] + si];
                struct pm_velem el = {.labels = s->labels, .t = ts};
                if (*pf < s->nf && s->f[*pf].t == ts) {
                    el.v = s->f[(*pf)++].v;
                } else if (*ph < s->nh && s->h[*ph].t == ts) {
                    el.h = s->h[(*ph)++].h;
                } else {
                    continue;
                }
                if (sh->cur >= sh->max_samples) {
                    return pe_too_many(sh);
                }
                sh->cur++;
                if ((rc = pe_tick(sh)) != 0) {
                    return rc;
                }
                sidx[i][vecs[i].n] = (uint32_t)si;
                if (pm_vec_push(a, &vecs[i], &el) != 0) {
                    return pe_nomem(sh);
                }
            }
        }
        out.n = 0;
        if ((rc = fn(ev, ctx, ts, vecs, scs, sidx, &out)) != 0) {
            return rc;
        }
        /* each result's label hash once: the duplicate check and the output map */
        if (out.n > oh_cap) {
            oh_cap = out.n * 2;
            oh = (uint64_t *)arena_alloc(a, oh_cap * sizeof *oh);
            if (oh == NULL) {
                return pe_nomem(sh);
            }
        }
        if (ptrmap.n > 2 * (res->m.n + out.n) + 1024) {
            /* the step's function makes new arrays every step: no use */
            pe_hmap_clear(&ptrmap);
            nph = 0;
        }
        for (size_t i = 0; i < out.n; i++) {
            /* label arrays are immutable in the arena: one hash per array */
            const struct pm_labels *ls = &out.e[i].labels;
            uint64_t key = (uint64_t)(uintptr_t)ls->v ^ ((uint64_t)ls->n << 56);
            int32_t hi = ls->v != NULL ? pe_hmap_get(&ptrmap, key) : -1;
            if (hi >= 0) {
                oh[i] = phash[hi];
                continue;
            }
            oh[i] = pm_labels_hash(ls);
            if (ls->v != NULL) {
                if (nph == ph_cap) {
                    size_t cap = ph_cap != 0 ? 2 * ph_cap : 64;
                    uint64_t *n = (uint64_t *)arena_alloc(a, cap * sizeof *n);
                    if (n == NULL) {
                        return pe_nomem(sh);
                    }
                    if (nph != 0) {
                        memcpy(n, phash, nph * sizeof *n);
                    }
                    phash = n;
                    ph_cap = cap;
                }
                phash[nph] = oh[i];
                if (pe_hmap_put(a, &ptrmap, key, (int32_t)nph) != 0) {
                    return pe_nomem(sh);
                }
                nph++;
            }
        }
        if (pe_hashes_have_dup(sh, oh, out.n)) {
            return pe_dup_error(sh);
        }
        sh->cur += out.n;
        temp += out.n;
        if (sh->cur > sh->max_samples) {
            return pe_too_many(sh);
        }
        if (instant) {
            for (size_t i = 0; i < out.n; i++) {
                size_t idx;
                if (pe_mat_add(a, &res->m, &out.e[i].labels, &idx) != 0 ||
                    pe_series_push(a, &res->m.s[idx], ts, out.e[i].v, out.e[i].h) != 0) {
                    return pe_nomem(sh);
                }
            }
            sh->cur = orig + out.n;
            return 0;
        }
        for (size_t i = 0; i < out.n; i++) {
            uint64_t h = oh[i];
            int32_t idx = pe_hmap_get(&outmap, h);
            if (idx < 0) {
                size_t n;
                /* sized for the steps left while the outputs are no more
                 * than the inputs (count_values can make far more) */
                size_t want = n_out_series_cap(total, res->m.n) ? nsteps - step : 0;
                if (pe_mat_add(a, &res->m, &out.e[i].labels, &n) != 0 ||
                    pe_hmap_put(a, &outmap, h, (int32_t)n) != 0 ||
                    pe_series_reserve(a, &res->m.s[n], out.e[i].h != NULL, want) != 0) {
                    return pe_nomem(sh);
                }
                idx = (int32_t)n;
            }
            if (pe_series_push(a, &res->m.s[idx], ts, out.e[i].v, out.e[i].h) != 0) {
                return pe_nomem(sh);
            }
        }
        npoints += out.n;
    }
    sh->cur = orig + npoints;
    return 0;
}

/* ---- step-invariant nodes ------------------------------------------------- */

static int eval_node(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out);

static int eval_invariant(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
{
    struct pe_shared *sh = ev->sh;
    struct pe_ev one = *ev;
    one.end = one.start;
    int rc = eval_node(&one, e, out);
    if (rc != 0) {
        return rc;
    }
    const struct promql_expr *u = pe_unparen(e);
    if (u->kind == PROMQL_MATRIX || u->kind == PROMQL_SUBQUERY || out->type == PROMQL_TYPE_STRING) {
        return 0;
    }
    size_t n = pe_nsteps(ev);
    if (out->type == PROMQL_TYPE_SCALAR) {
        double v = out->sc[0];
        if ((rc = alloc_scalar(ev, out)) != 0) {
            return rc;
        }
        for (size_t i = 0; i < n; i++) {
            out->sc[i] = v;
        }
        return 0;
    }
    for (size_t i = 0; i < out->m.n; i++) {
        struct pe_series *s = &out->m.s[i];
        double v = s->nf != 0 ? s->f[0].v : 0;
        const struct pm_hist *h = s->nf != 0 ? NULL : s->h[0].h;
        for (int64_t ts = ev->start + ev->interval; ts <= ev->end; ts += ev->interval) {
            if (pe_series_push(sh->a, s, ts, v, h) != 0) {
                return pe_nomem(sh);
            }
            sh->cur++;
            if (sh->cur > sh->max_samples) {
                return pe_too_many(sh);
            }
        }
    }
    return 0;
}

/* ---- subqueries ------------------------------------------------------------ */

/* Evaluates the subquery's inner expression over the steps the outer
 * evaluator needs (aligned to the epoch as Prometheus does). */
int pe_eval_subquery(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
{
    struct pe_shared *sh = ev->sh;
    struct pe_ev in = {.sh = sh};
    in.interval = e->step_ms != 0 ? e->step_ms : PE_DEFAULT_SUBQUERY_STEP_MS;
    int64_t bs = ev->start, be = ev->end;
    if (e->mod.at != PROMQL_AT_NONE) {
        bs = be = pe_at_time(sh, &e->mod);
    }
    in.end = be - e->mod.offset_ms;
    int64_t first = bs - e->mod.offset_ms - e->range_ms;
    in.start = in.interval * (first / in.interval);
    if (in.start < first) {
        in.start += in.interval;
    }
    int rc = pe_eval(&in, e->inner, out);
    if (rc != 0) {
        return rc;
    }
    out->type = PROMQL_TYPE_MATRIX;
    return 0;
}

/* ---- aggregations and binary operators (glue) ------------------------------ */

struct agg_ctx {
    struct pe_agg g;
    bool scalar_param;
};

static int step_agg(struct pe_ev *ev, void *vctx, int64_t ts, const struct pm_vec *vecs,
                    const double *scs, uint32_t *const *sidx, struct pm_vec *out)
{
    (void)ts;
    struct agg_ctx *c = vctx;
    return pe_agg_step(ev, &c->g, c->scalar_param ? scs[0] : 0, &vecs[1], sidx[1], out);
}

static int eval_agg(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
{
    struct agg_ctx c = {0};
    int rc = pe_agg_init(ev, &c.g, e);
    if (rc != 0) {
        return rc;
    }
    const struct promql_expr *args[2] = {NULL, e->inner};
    if (e->param != NULL && e->param->type == PROMQL_TYPE_SCALAR) {
        args[0] = e->param;
        c.scalar_param = true;
    }
    return pe_range_eval(ev, args, 2, step_agg, &c, out);
}

struct bin_ctx {
    const struct promql_expr *e;
    struct pe_bin b;
};

static int step_bin(struct pe_ev *ev, void *vctx, int64_t ts, const struct pm_vec *vecs,
                    const double *scs, uint32_t *const *sidx, struct pm_vec *out)
{
    (void)ts;
    struct bin_ctx *c = vctx;
    const struct promql_expr *e = c->e;
    enum promql_type lt = e->lhs->type, rt = e->rhs->type;
    if (lt == PROMQL_TYPE_SCALAR && rt == PROMQL_TYPE_SCALAR) {
        struct pm_velem el = {.v = pe_bin_ss(e->op, scs[0], scs[1])};
        return pm_vec_push(ev->sh->a, out, &el) != 0 ? pe_nomem(ev->sh) : 0;
    }
    if (lt == PROMQL_TYPE_VECTOR && rt == PROMQL_TYPE_VECTOR) {
        return pe_bin_vv(ev, &c->b, &vecs[0], &vecs[1], sidx[0], sidx[1], out);
    }
    if (lt == PROMQL_TYPE_VECTOR) {
        return pe_bin_vs(ev, &c->b, &vecs[0], sidx[0], scs[1], false, out);
    }
    return pe_bin_vs(ev, &c->b, &vecs[1], sidx[1], scs[0], true, out);
}

static int eval_binary(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
{
    struct bin_ctx c = {.e = e};
    int rc;
    if ((e->lhs->type == PROMQL_TYPE_VECTOR || e->rhs->type == PROMQL_TYPE_VECTOR) &&
        (rc = pe_bin_init(ev, &c.b, e)) != 0) {
        return rc;
    }
    const struct promql_expr *args[2] = {e->lhs, e->rhs};
    rc = pe_range_eval(ev, args, 2, step_bin, &c, out);
    if (rc == 0 && e->type == PROMQL_TYPE_SCALAR) {
        rc = pe_mat_to_scalar(ev, out);
    }
    return rc;
}

static int eval_unary(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
{
    struct pe_shared *sh = ev->sh;
    int rc = pe_eval(ev, e->inner, out);
    if (rc != 0 || !e->neg) {
        return rc;
    }
    if (out->type == PROMQL_TYPE_SCALAR) {
        size_t n = pe_nsteps(ev);
        for (size_t i = 0; i < n; i++) {
            out->sc[i] = -out->sc[i];
        }
        return 0;
    }
    for (size_t i = 0; i < out->m.n; i++) {
        struct pe_series *s = &out->m.s[i];
        if (pm_labels_drop_name(sh->a, &s->labels, &s->labels) != 0) {
            return pe_nomem(sh);
        }
        for (size_t j = 0; j < s->nf; j++) {
            s->f[j].v = -s->f[j].v;
        }
    }
    if (mat_has_dup(sh, &out->m)) {
        return pe_dup_error(sh);
    }
    return 0;
}

/* ---- dispatch ---------------------------------------------------------------- */

static int eval_number(struct pe_ev *ev, double v, struct pe_val *out)
{
    struct pe_shared *sh = ev->sh;
    int rc = alloc_scalar(ev, out);
    if (rc != 0) {
        return rc;
    }
    size_t n = pe_nsteps(ev);
    for (size_t i = 0; i < n; i++) {
        out->sc[i] = v;
    }
    sh->cur += n;
    return sh->cur > sh->max_samples ? pe_too_many(sh) : 0;
}

static int eval_node(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
{
    memset(out, 0, sizeof *out);
    switch (e->kind) {
    case PROMQL_NUMBER:
        return eval_number(ev, e->num, out);
    case PROMQL_STRING:
        out->type = PROMQL_TYPE_STRING;
        out->str = e->str;
        return 0;
    case PROMQL_VECTOR:
        return eval_vector_sel(ev, e, out);
    case PROMQL_MATRIX:
        return eval_matrix_sel(ev, e, out);
    case PROMQL_SUBQUERY:
        return pe_eval_subquery(ev, e, out);
    case PROMQL_CALL:
        return pe_eval_call(ev, e, out);
    case PROMQL_AGG:
        return eval_agg(ev, e, out);
    case PROMQL_BINARY:
        return eval_binary(ev, e, out);
    case PROMQL_UNARY:
        return eval_unary(ev, e, out);
    case PROMQL_PAREN:
        return pe_eval(ev, e->inner, out);
    }
    return pe_fail(ev->sh, -EINVAL, "unexpected expression node");
}

int pe_eval(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
{
    int rc = pe_check(ev->sh);
    if (rc != 0) {
        return rc;
    }
    if (ev->start != ev->end && is_inv(ev->sh, e)) {
        return eval_invariant(ev, e, out);
    }
    return eval_node(ev, e, out);
}

/* ---- entry ------------------------------------------------------------------- */

static int to_set(arena *a, const struct pe_mat *m, struct pm_set *set)
{
    set->n = m->n;
    set->s = NULL;
    if (m->n == 0) {
        return 0;
    }
    set->s = (struct pm_series *)arena_alloc(a, m->n * sizeof *set->s);
    if (set->s == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->n; i++) {
        set->s[i] = (struct pm_series){.labels = m->s[i].labels,
                                       .f = m->s[i].f,
                                       .nf = m->s[i].nf,
                                       .h = m->s[i].h,
                                       .nh = m->s[i].nh};
    }
    return 0;
}

int pm_eval(const struct promql_expr *root, const struct pm_eval_opts *o,
            const struct pm_source *src, arena *a, struct pm_result *out, char *err, size_t errlen)
{
    struct pe_shared sh = {0};
    int rc;
    memset(out, 0, sizeof *out);
    if (errlen != 0) {
        err[0] = '\0';
    }
    sh.a = a;
    sh.src = src;
    sh.q = o->q;
    sh.max_samples = o->max_samples != 0 ? o->max_samples : PM_DEFAULT_MAX_SAMPLES;
    sh.lookback = o->lookback_ms > 0 ? o->lookback_ms : PM_DEFAULT_LOOKBACK_MS;
    sh.qstart = o->start_ms;
    sh.qend = o->end_ms;
    sh.err = err;
    sh.errlen = errlen;

    bool range = o->step_ms > 0;
    if (!range && o->start_ms != o->end_ms) {
        return pe_fail(&sh, -EINVAL, "an instant query needs start == end");
    }
    if (range && o->end_ms < o->start_ms) {
        return pe_fail(&sh, -EINVAL, "end timestamp must not be before start time");
    }
    if (range && root->type != PROMQL_TYPE_SCALAR && root->type != PROMQL_TYPE_VECTOR) {
        return pe_fail(&sh, -EINVAL,
                       "invalid expression type \"%s\" for range query, must be Scalar or instant "
                       "Vector",
                       promql_type_name(root->type));
    }
    bool inv;
    struct pe_sq sq = {0};
    if ((rc = prep(&sh, root, sq, 0, &inv)) != 0) {
        return rc;
    }
    if (inv && (rc = add_inv(&sh, root)) != 0) {
        return rc;
    }
    struct pe_ev ev = {.sh = &sh, .start = o->start_ms, .end = o->end_ms};
    ev.interval = range ? o->step_ms : 1;
    struct pe_val v;
    if ((rc = pe_eval(&ev, root, &v)) != 0) {
        return rc;
    }

    switch (v.type) {
    case PROMQL_TYPE_STRING:
        /* a copy: the result must outlive the AST */
        out->type = PM_RES_STRING;
        out->t = o->start_ms;
        out->str.n = v.str.n;
        out->str.s = arena_strndup(a, v.str.s, v.str.n);
        if (out->str.s == NULL) {
            return pe_nomem(&sh);
        }
        break;
    case PROMQL_TYPE_SCALAR:
        if (!range) {
            out->type = PM_RES_SCALAR;
            out->t = o->start_ms;
            out->v = v.sc[0];
            break;
        }
        {
            /* A range query of a scalar: one series {} with every step. */
            struct pe_mat m = {0};
            struct pm_labels none = {0};
            size_t idx, step = 0;
            if (pe_mat_add(a, &m, &none, &idx) != 0) {
                return pe_nomem(&sh);
            }
            for (int64_t ts = ev.start; ts <= ev.end; ts += ev.interval, step++) {
                if (pe_series_push(a, &m.s[0], ts, v.sc[step], NULL) != 0) {
                    return pe_nomem(&sh);
                }
            }
            out->type = PM_RES_MATRIX;
            if (to_set(a, &m, &out->set) != 0) {
                return pe_nomem(&sh);
            }
        }
        break;
    case PROMQL_TYPE_VECTOR:
        if (to_set(a, &v.m, &out->set) != 0) {
            return pe_nomem(&sh);
        }
        if (!range) {
            out->type = PM_RES_VECTOR;
            out->t = o->start_ms;
            for (size_t i = 0; i < out->set.n; i++) {
                /* the evaluation time, whatever the point's own */
                struct pm_series *s = &out->set.s[i];
                if (s->nf != 0) {
                    ((struct pm_fsample *)s->f)[0].t = o->start_ms;
                    s->nf = 1;
                    s->nh = 0;
                } else if (s->nh != 0) {
                    ((struct pm_hsample *)s->h)[0].t = o->start_ms;
                    s->nh = 1;
                }
            }
            break;
        }
        out->type = PM_RES_MATRIX;
        pm_set_sort(&out->set);
        break;
    case PROMQL_TYPE_MATRIX:
        if (to_set(a, &v.m, &out->set) != 0) {
            return pe_nomem(&sh);
        }
        out->type = PM_RES_MATRIX;
        pm_set_sort(&out->set);
        break;
    default:
        return pe_fail(&sh, -EINVAL, "unexpected result type");
    }
    return 0;
}
