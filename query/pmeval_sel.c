/*
 * pmeval_sel.c - the PromQL evaluator's selectors (pmeval.h): the walk
 * before evaluation that reads every selector's series from the source
 * once, over the time range the whole query needs for it (Prometheus
 * 2.42's populateSeries / getTimeRangesForSelector, subqueries widening
 * it, @ pinning it), and notes the step-invariant subtrees
 * (preprocessExpr); then instant selectors over the steps (lookback 5m
 * closed on the left, the staleness marker hiding a series) and range
 * selectors as windows [t - range, t] closed on both ends, markers left out.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/pmeval_eng.h"
#include "storage/promname.h"

struct pe_sel {
    const struct promql_expr *node; /* PROMQL_VECTOR */
    struct pm_set set;              /* staleness markers kept */
};

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

bool pe_is_inv(const struct pe_shared *sh, const struct promql_expr *e)
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
int pe_eval_vector_sel(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
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
    memset(w, 0, sizeof *w);
    w->labels = s->labels;
    size_t f0 = f_upto(s->f, s->nf, mint - 1), f1 = f_upto(s->f, s->nf, maxt);
    size_t h0 = h_upto(s->h, s->nh, mint - 1), h1 = h_upto(s->h, s->nh, maxt);
    w->nf = f1 > f0 ? f1 - f0 : 0;
    w->nh = h1 > h0 ? h1 - h0 : 0;
    w->f = w->nf != 0 ? s->f + f0 : NULL; /* NULL + 0 is undefined */
    w->h = w->nh != 0 ? s->h + h0 : NULL;
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

/* ---- sliding range windows ---------------------------------------------- */

static bool f_is_stale(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits == PROMNAME_STALE_NAN_BITS;
}

/* The reset list of the stale-free floats (sl->f). */
static int find_resets(arena *a, struct pe_slide *sl)
{
    sl->resets = true;
    if (sl->nf > UINT32_MAX) {
        return -E2BIG;
    }
    size_t n = 0;
    for (size_t i = 1; i < sl->nf; i++) {
        n += sl->f[i].v < sl->f[i - 1].v;
    }
    if (n == 0) {
        return 0;
    }
    uint32_t *rs = (uint32_t *)arena_alloc(a, n * sizeof *rs);
    if (rs == NULL) {
        return -ENOMEM;
    }
    n = 0;
    for (size_t i = 1; i < sl->nf; i++) {
        if (sl->f[i].v < sl->f[i - 1].v) {
            rs[n++] = (uint32_t)i;
        }
    }
    sl->rs = rs;
    sl->nrs = n;
    return 0;
}

/* Number of resets at or before index |i|. */
static size_t rs_upto(const uint32_t *rs, size_t n, size_t i)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rs[mid] <= i) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

int pe_slide_init(arena *a, struct pe_slide *sl, const struct pm_series *s, bool resets)
{
    memset(sl, 0, sizeof *sl);
    sl->labels = s->labels;
    sl->f = s->f;
    sl->nf = s->nf;
    sl->h = s->h;
    sl->nh = s->nh;
    size_t stale = 0;
    for (size_t i = 0; i < s->nf; i++) {
        stale += f_is_stale(s->f[i].v);
    }
    if (stale != 0) {
        struct pm_fsample *c = NULL;
        size_t n = 0;
        if (s->nf > stale &&
            (c = (struct pm_fsample *)arena_alloc(a, (s->nf - stale) * sizeof *c)) == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < s->nf; i++) {
            if (!f_is_stale(s->f[i].v)) {
                c[n++] = s->f[i];
            }
        }
        sl->f = c;
        sl->nf = n;
    }
    stale = 0;
    for (size_t i = 0; i < s->nh; i++) {
        stale += hist_stale(s->h[i].h);
    }
    if (stale != 0) {
        struct pm_hsample *c = NULL;
        size_t n = 0;
        if (s->nh > stale &&
            (c = (struct pm_hsample *)arena_alloc(a, (s->nh - stale) * sizeof *c)) == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < s->nh; i++) {
            if (!hist_stale(s->h[i].h)) {
                c[n++] = s->h[i];
            }
        }
        sl->h = c;
        sl->nh = n;
    }
    return resets ? find_resets(a, sl) : 0;
}

void pe_slide_window(struct pe_slide *sl, int64_t mint, int64_t maxt, struct pm_win *w)
{
    bool searched = !sl->placed || mint < sl->mint || maxt < sl->maxt;
    if (searched) {
        /* first window, or the bounds went back: search again */
        sl->f0 = f_upto(sl->f, sl->nf, mint - 1);
        sl->f1 = f_upto(sl->f, sl->nf, maxt);
        sl->h0 = h_upto(sl->h, sl->nh, mint - 1);
        sl->h1 = h_upto(sl->h, sl->nh, maxt);
        sl->placed = true;
    } else {
        while (sl->f0 < sl->nf && sl->f[sl->f0].t < mint) {
            sl->f0++;
        }
        while (sl->f1 < sl->nf && sl->f[sl->f1].t <= maxt) {
            sl->f1++;
        }
        while (sl->h0 < sl->nh && sl->h[sl->h0].t < mint) {
            sl->h0++;
        }
        while (sl->h1 < sl->nh && sl->h[sl->h1].t <= maxt) {
            sl->h1++;
        }
    }
    sl->mint = mint;
    sl->maxt = maxt;
    memset(w, 0, sizeof *w);
    if (sl->resets) {
        /* the window's resets r: f0 < r < f1 (the sample before is in it) */
        if (searched) {
            sl->r0 = rs_upto(sl->rs, sl->nrs, sl->f0);
            sl->r1 = sl->f1 != 0 ? rs_upto(sl->rs, sl->nrs, sl->f1 - 1) : 0;
        } else {
            while (sl->r0 < sl->nrs && sl->rs[sl->r0] <= sl->f0) {
                sl->r0++;
            }
            while (sl->r1 < sl->nrs && sl->rs[sl->r1] < sl->f1) {
                sl->r1++;
            }
        }
        w->resets_known = true;
        w->nrs = sl->r1 > sl->r0 ? sl->r1 - sl->r0 : 0;
        w->rs = w->nrs != 0 ? sl->rs + sl->r0 : NULL;
        w->rs_base = sl->f0;
    }
    w->labels = sl->labels;
    w->nf = sl->f1 > sl->f0 ? sl->f1 - sl->f0 : 0;
    w->nh = sl->h1 > sl->h0 ? sl->h1 - sl->h0 : 0;
    w->f = w->nf != 0 ? sl->f + sl->f0 : NULL; /* NULL + 0 is undefined */
    w->h = w->nh != 0 ? sl->h + sl->h0 : NULL;
}

/* Instant evaluation of a range selector: raw samples, names kept. */
int pe_eval_matrix_sel(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
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

int pe_prep(struct pe_shared *sh, const struct promql_expr *root)
{
    bool inv;
    struct pe_sq sq = {0};
    int rc = prep(sh, root, sq, 0, &inv);
    if (rc == 0 && inv) {
        rc = add_inv(sh, root);
    }
    return rc;
}
