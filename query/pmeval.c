/*
 * pmeval.c - the PromQL evaluator (pmeval.h): the entry, steps (rangeEval),
 * subqueries, step-invariant subtrees, unary minus and the result shapes,
 * as Prometheus 2.42's promql/engine.go evaluates them. Selectors are in
 * pmeval_sel.c, function calls in pmeval_call.c, aggregations in
 * pmeval_agg.c, binary operators in pmeval_bin.c.
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

#define PE_DEFAULT_SUBQUERY_STEP_MS 60000 /* Prometheus's default evaluation interval */

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
        return pe_eval_vector_sel(ev, e, out);
    case PROMQL_MATRIX:
        return pe_eval_matrix_sel(ev, e, out);
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
    if (ev->start != ev->end && pe_is_inv(ev->sh, e)) {
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
    if ((rc = pe_prep(&sh, root)) != 0) {
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
