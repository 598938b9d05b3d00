/*
 * pmeval_call.c - function calls in the PromQL evaluator (pmeval.h): the
 * per-step dispatch to pmfn_call (pmeval_int.h) as Prometheus 2.42's
 * engine does it, and the engine-side special cases: timestamp(<selector>)
 * with the samples' own times, range-vector arguments (selectors and
 * subqueries) as sliding windows, series by series as 2.42 loops (its
 * output order, its samples-limit checks), absent / absent_over_time
 * called with empty input, the order of sort / sort_desc, and the
 * duplicate-labelset checks after the call (per step, and over the whole
 * range for range-vector functions, which keep one output series per
 * input series).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "query/pmeval_eng.h"

/* ---- function calls -------------------------------------------------------- */

struct call_ctx {
    const struct promql_expr *e;
    const struct promql_expr *sel; /* timestamp(<selector>) */
    struct pm_fnarg *args;
};

static int cmp_sort_asc(const void *x, const void *y)
{
    const struct pm_velem *a = x, *b = y;
    bool an = isnan(a->v), bn = isnan(b->v);
    if (an != bn) {
        return an ? 1 : -1;
    }
    if (!an && a->v != b->v) {
        return a->v < b->v ? -1 : 1;
    }
    return a->t < b->t ? -1 : a->t > b->t; /* t holds the input position here */
}

static int cmp_sort_desc(const void *x, const void *y)
{
    const struct pm_velem *a = x, *b = y;
    bool an = isnan(a->v), bn = isnan(b->v);
    if (an != bn) {
        return an ? 1 : -1;
    }
    if (!an && a->v != b->v) {
        return a->v > b->v ? -1 : 1;
    }
    return a->t < b->t ? -1 : a->t > b->t;
}

/* sort / sort_desc: by value, NaN last, ties in input order. */
static void sort_vec(struct pm_vec *v, bool desc)
{
    if (v->n < 2) {
        return;
    }
    int64_t t0 = v->e[0].t;
    for (size_t i = 0; i < v->n; i++) {
        v->e[i].t = (int64_t)i;
    }
    qsort(v->e, v->n, sizeof *v->e, desc ? cmp_sort_desc : cmp_sort_asc);
    for (size_t i = 0; i < v->n; i++) {
        v->e[i].t = t0;
    }
}

static int fn_env(struct pe_ev *ev, const struct promql_expr *e, int64_t ts, struct pm_fnenv *env)
{
    memset(env, 0, sizeof *env);
    env->a = ev->sh->a;
    env->call = e;
    env->ts = ts;
    env->range_start = env->range_end = ts;
    env->err = ev->sh->err;
    env->errlen = ev->sh->errlen;
    return 0;
}

static int call_result(struct pe_shared *sh, int rc)
{
    if (rc == -ENOMEM) {
        return pe_nomem(sh);
    }
    if (rc != 0 && sh->errlen != 0 && sh->err[0] == '\0') {
        return pe_fail(sh, rc, "%s", strerror(-rc));
    }
    return rc;
}

static int step_call(struct pe_ev *ev, void *vctx, int64_t ts, const struct pm_vec *vecs,
                     const double *scs, uint32_t *const *sidx, struct pm_vec *out)
{
    (void)sidx;
    struct call_ctx *c = vctx;
    const struct promql_expr *e = c->e;
    for (size_t i = 0; i < e->n_args; i++) {
        struct pm_fnarg *a = &c->args[i];
        memset(a, 0, sizeof *a);
        a->type = e->args[i]->type;
        switch (a->type) {
        case PROMQL_TYPE_SCALAR:
            a->scalar = scs[i];
            break;
        case PROMQL_TYPE_VECTOR:
            a->vec = &vecs[i];
            break;
        case PROMQL_TYPE_STRING:
            a->str = pe_unparen(e->args[i])->str;
            break;
        default:
            break;
        }
    }
    struct pm_fnenv env;
    fn_env(ev, e, ts, &env);
    int rc = pmfn_call(&env, c->args, e->n_args, out);
    if (rc != 0) {
        return call_result(ev->sh, rc);
    }
    if (e->func->id == PROMQL_FN_SORT || e->func->id == PROMQL_FN_SORT_DESC) {
        sort_vec(out, e->func->id == PROMQL_FN_SORT_DESC);
    }
    return 0;
}

/* timestamp(<selector>): the selector's samples with their own times. */
static int step_timestamp(struct pe_ev *ev, void *vctx, int64_t ts, const struct pm_vec *vecs,
                          const double *scs, uint32_t *const *sidx, struct pm_vec *out)
{
    (void)vecs, (void)scs, (void)sidx;
    struct call_ctx *c = vctx;
    struct pe_shared *sh = ev->sh;
    const struct promql_expr *vs = c->sel;
    const struct pm_set *set = pe_sel_set(sh, vs);
    struct pm_vec in = {0};
    /* 2.42 sets the offset to ts - @ for every step: the @ time, offset lost. */
    int64_t ref = vs->sel.mod.at != PROMQL_AT_NONE ? pe_at_time(sh, &vs->sel.mod)
                                                   : ts - vs->sel.mod.offset_ms;
    for (size_t i = 0; set != NULL && i < set->n; i++) {
        struct pm_velem el = {.labels = set->s[i].labels};
        if (!pe_sample_at(&set->s[i], ref, sh->lookback, &el.t, &el.v, &el.h)) {
            continue;
        }
        if (pm_vec_push(sh->a, &in, &el) != 0) {
            return pe_nomem(sh);
        }
        sh->cur++;
        if (sh->cur > sh->max_samples) {
            return pe_too_many(sh);
        }
    }
    c->args[0] = (struct pm_fnarg){.type = PROMQL_TYPE_VECTOR, .vec = &in};
    struct pm_fnenv env;
    fn_env(ev, c->e, ts, &env);
    int rc = pmfn_call(&env, c->args, 1, out);
    return rc != 0 ? call_result(sh, rc) : 0;
}

/* A range-vector call's inputs, for matrix_by_series. */
struct by_series {
    const struct promql_expr *e;
    size_t mi; /* the range-vector argument */
    struct pe_slide *slides;
    size_t n_series;
    const struct pe_val *other; /* the other arguments, evaluated */
    struct pm_fnarg *args;
    int64_t range, offset;
    bool at;
    int64_t at_ms;
    uint64_t orig; /* samples held before the call's arguments were evaluated */
};

/* Prometheus 2.42's loop for a range-vector function whose outputs cannot
 * collide (every input series' result labels distinct): series by series,
 * every step of one series before the next (its samples stay in cache),
 * the first element of each call's result taken, one output series per
 * input series that has a point, in input order; the samples limit
 * checked where matrixIterSlice (the window held, on top of the outputs
 * of the series before) and the end of each series (plus its outputs)
 * check it. */
static int matrix_by_series(struct pe_ev *ev, const struct by_series *bs, struct pe_val *out)
{
    struct pe_shared *sh = ev->sh;
    arena *a = sh->a;
    const struct promql_expr *e = bs->e;
    struct pm_fnarg *args = bs->args;
    uint64_t held = sh->cur, outputs = 0;
    size_t nsteps = pe_nsteps(ev);
    struct pm_vec res = {0};
    int rc;
    for (size_t i = 0; i < e->n_args; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].type = e->args[i]->type;
        if (i == bs->mi) {
            args[i].type = PROMQL_TYPE_MATRIX;
            args[i].nwin = 1;
        } else if (args[i].type == PROMQL_TYPE_STRING) {
            args[i].str = pe_unparen(e->args[i])->str;
        }
    }
    for (size_t si = 0; si < bs->n_series; si++) {
        if ((rc = pe_check(sh)) != 0) {
            return rc;
        }
        struct pe_series *os = NULL;
        size_t last_n = 0, step = 0;
        struct pm_win w;
        args[bs->mi].win = &w;
        for (int64_t ts = ev->start; ts <= ev->end; ts += ev->interval, step++) {
            if ((rc = pe_tick(sh)) != 0) {
                return rc;
            }
            int64_t maxt = (bs->at ? bs->at_ms : ts) - bs->offset, mint = maxt - bs->range;
            pe_slide_window(&bs->slides[si], mint, maxt, &w);
            last_n = w.nf + w.nh;
            if (last_n == 0) {
                continue;
            }
            if (held + outputs + last_n > sh->max_samples) {
                return pe_too_many(sh);
            }
            for (size_t i = 0; i < e->n_args; i++) {
                if (i != bs->mi && bs->other[i].type == PROMQL_TYPE_SCALAR) {
                    args[i].scalar = bs->other[i].sc[step];
                }
            }
            struct pm_fnenv env;
            fn_env(ev, e, ts, &env);
            env.range_start = mint;
            env.range_end = maxt;
            res.n = 0;
            if ((rc = pmfn_call(&env, args, e->n_args, &res)) != 0) {
                return call_result(sh, rc);
            }
            if (res.n == 0) {
                continue;
            }
            if (os == NULL) {
                size_t n;
                if (pe_mat_add(a, &out->m, &res.e[0].labels, &n) != 0 ||
                    pe_series_reserve(a, &out->m.s[n], res.e[0].h != NULL, nsteps - step) != 0) {
                    return pe_nomem(sh);
                }
                os = &out->m.s[n];
            }
            if (pe_series_push(a, os, ts, res.e[0].v, res.e[0].h) != 0) {
                return pe_nomem(sh);
            }
        }
        if (os != NULL) {
            if (held + outputs + last_n + os->nf + os->nh > sh->max_samples) {
                return pe_too_many(sh);
            }
            outputs += os->nf + os->nh;
        }
    }
    sh->cur = bs->orig + outputs;
    return 0;
}

/* A call with a range-vector argument (selector or subquery). Each
 * series' windows slide across the steps (pe_slide). When the input
 * series' result labels are all distinct (the usual case) the loop is
 * 2.42's, series by series (matrix_by_series); else, and for
 * absent_over_time (which comes out of the function itself when no window
 * has samples), one call per step with every series' window and the
 * duplicate checks per step and across the range. */
static int eval_call_matrix(struct pe_ev *ev, const struct promql_expr *e, size_t mi,
                            struct pe_val *out)
{
    struct pe_shared *sh = ev->sh;
    arena *a = sh->a;
    int rc;
    uint64_t orig = sh->cur;
    const struct promql_expr *m = pe_unparen(e->args[mi]);
    struct pe_val *other = (struct pe_val *)arena_alloc(a, e->n_args * sizeof *other);
    struct pm_fnarg *args = (struct pm_fnarg *)arena_alloc(a, e->n_args * sizeof *args);
    if (other == NULL || args == NULL) {
        return pe_nomem(sh);
    }
    memset(other, 0, e->n_args * sizeof *other);

    /* The series the windows come from. */
    const struct pm_series *series = NULL;
    size_t n_series = 0;
    int64_t range, offset;
    const struct promql_mod *mod;
    if (m->kind == PROMQL_MATRIX) {
        const struct pm_set *set = pe_sel_set(sh, m->inner);
        if (set != NULL) {
            series = set->s;
            n_series = set->n;
        }
        range = m->range_ms;
        mod = &m->inner->sel.mod;
    } else {
        struct pe_val sv;
        if ((rc = pe_eval_subquery(ev, m, &sv)) != 0) {
            return rc;
        }
        struct pm_series *ps = NULL;
        if (sv.m.n != 0) {
            ps = (struct pm_series *)arena_alloc(a, sv.m.n * sizeof *ps);
            if (ps == NULL) {
                return pe_nomem(sh);
            }
        }
        for (size_t i = 0; i < sv.m.n; i++) {
            ps[i] = (struct pm_series){.labels = sv.m.s[i].labels,
                                       .f = sv.m.s[i].f,
                                       .nf = sv.m.s[i].nf,
                                       .h = sv.m.s[i].h,
                                       .nh = sv.m.s[i].nh};
        }
        series = ps;
        n_series = sv.m.n;
        range = m->range_ms;
        mod = &m->mod;
    }
    offset = mod->offset_ms;
    bool at = mod->at != PROMQL_AT_NONE;
    int64_t at_ms = at ? pe_at_time(sh, mod) : 0;

    for (size_t i = 0; i < e->n_args; i++) {
        if (i != mi && e->args[i]->type != PROMQL_TYPE_STRING &&
            (rc = pe_eval(ev, e->args[i], &other[i])) != 0) {
            return rc;
        }
    }

    /* Which input series each output series came from, for the check over
     * the whole range (Prometheus keeps one output series per input). */
    bool keep_name = e->func->id == PROMQL_FN_LAST_OVER_TIME;
    uint64_t *derived = NULL;
    struct pm_win *wins = NULL;
    int32_t *win_src = NULL;
    struct pe_slide *slides = NULL;
    /* rate / increase read each window's counter resets from a list made
     * once per series */
    bool with_resets = e->func->id == PROMQL_FN_RATE || e->func->id == PROMQL_FN_INCREASE;
    if (n_series != 0) {
        derived = (uint64_t *)arena_alloc(a, n_series * sizeof *derived);
        wins = (struct pm_win *)arena_alloc(a, n_series * sizeof *wins);
        win_src = (int32_t *)arena_alloc(a, n_series * sizeof *win_src);
        slides = (struct pe_slide *)arena_alloc(a, n_series * sizeof *slides);
        if (derived == NULL || wins == NULL || win_src == NULL || slides == NULL) {
            return pe_nomem(sh);
        }
        for (size_t i = 0; i < n_series; i++) {
            if ((rc = pe_slide_init(a, &slides[i], &series[i], with_resets)) != 0) {
                return rc == -E2BIG ? pe_too_many(sh) : pe_nomem(sh);
            }
            derived[i] = keep_name
                             ? pm_labels_hash(&series[i].labels)
                             : pm_labels_hash_on(&series[i].labels, false, NULL, NULL, 0, true);
        }
    }
    struct pe_hmap by_derived = {0}, outmap = {0};
    /* When the input series' result labels (derived) are all distinct, an
     * element that says which window it came from (src1) can neither
     * collide with another in its step nor with another series' across
     * steps: it goes to its series' output without hashing. */
    bool derived_unique = true;
    int32_t *out_of = NULL; /* input series -> output series, -1 none yet */
    if (n_series != 0) {
        out_of = (int32_t *)arena_alloc(a, n_series * sizeof *out_of);
        if (out_of == NULL) {
            return pe_nomem(sh);
        }
        for (size_t i = 0; i < n_series && derived_unique; i++) {
            if (pe_hmap_get(&by_derived, derived[i]) >= 0) {
                derived_unique = false;
            } else if (pe_hmap_put(a, &by_derived, derived[i], (int32_t)i) != 0) {
                return pe_nomem(sh);
            }
        }
        for (size_t i = 0; i < n_series; i++) {
            out_of[i] = -1;
        }
    }
    memset(out, 0, sizeof *out);
    out->type = PROMQL_TYPE_VECTOR;
    if (derived_unique && e->func->id != PROMQL_FN_ABSENT_OVER_TIME) {
        struct by_series bs = {.e = e,
                               .mi = mi,
                               .slides = slides,
                               .n_series = n_series,
                               .other = other,
                               .args = args,
                               .range = range,
                               .offset = offset,
                               .at = at,
                               .at_ms = at_ms,
                               .orig = orig};
        rc = matrix_by_series(ev, &bs, out);
        if (rc == 0 && e->type == PROMQL_TYPE_SCALAR) {
            rc = pe_mat_to_scalar(ev, out);
        }
        return rc;
    }
    int32_t *out_src = NULL;
    size_t out_src_cap = 0;
    struct pm_vec res = {0};
    uint64_t held = sh->cur, npoints = 0;
    size_t step = 0, nsteps = pe_nsteps(ev);
    for (int64_t ts = ev->start; ts <= ev->end; ts += ev->interval, step++) {
        if ((rc = pe_check(sh)) != 0) {
            return rc;
        }
        int64_t maxt = (at ? at_ms : ts) - offset, mint = maxt - range;
        size_t nw = 0;
        if (!derived_unique) {
            pe_hmap_clear(&by_derived);
        }
        for (size_t i = 0; i < n_series; i++) {
            if ((rc = pe_tick(sh)) != 0) {
                return rc;
            }
            pe_slide_window(&slides[i], mint, maxt, &wins[nw]);
            size_t n = wins[nw].nf + wins[nw].nh;
            if (n == 0) {
                continue;
            }
            if (held + npoints + n > sh->max_samples) {
                return pe_too_many(sh);
            }
            if (!derived_unique && pe_hmap_get(&by_derived, derived[i]) < 0 &&
                pe_hmap_put(a, &by_derived, derived[i], (int32_t)i) != 0) {
                return pe_nomem(sh);
            }
            win_src[nw] = (int32_t)i;
            nw++;
        }
        for (size_t i = 0; i < e->n_args; i++) {
            memset(&args[i], 0, sizeof args[i]);
            args[i].type = e->args[i]->type;
            if (i == mi) {
                args[i].type = PROMQL_TYPE_MATRIX;
                args[i].win = wins;
                args[i].nwin = nw;
            } else if (other[i].type == PROMQL_TYPE_SCALAR) {
                args[i].scalar = other[i].sc[step];
            } else if (args[i].type == PROMQL_TYPE_STRING) {
                args[i].str = pe_unparen(e->args[i])->str;
            }
        }
        struct pm_fnenv env;
        fn_env(ev, e, ts, &env);
        env.range_start = mint;
        env.range_end = maxt;
        res.n = 0;
        if ((rc = pmfn_call(&env, args, e->n_args, &res)) != 0) {
            return call_result(sh, rc);
        }
        bool placed = derived_unique;
        for (size_t i = 0; i < res.n && placed; i++) {
            placed = res.e[i].src1 != 0 && res.e[i].src1 <= nw;
        }
        if (placed) {
            for (size_t i = 0; i < res.n; i++) {
                int32_t src = win_src[res.e[i].src1 - 1];
                if (out_of[src] < 0) {
                    size_t n;
                    if (pe_mat_add(a, &out->m, &res.e[i].labels, &n) != 0 ||
                        pe_series_reserve(a, &out->m.s[n], res.e[i].h != NULL, nsteps - step) !=
                            0) {
                        return pe_nomem(sh);
                    }
                    out_of[src] = (int32_t)n;
                }
                if (pe_series_push(a, &out->m.s[out_of[src]], ts, res.e[i].v, res.e[i].h) != 0) {
                    return pe_nomem(sh);
                }
            }
            npoints += res.n;
            if (held + npoints > sh->max_samples) {
                return pe_too_many(sh);
            }
            continue;
        }
        if (pe_vec_has_dup(sh, &res)) {
            return pe_dup_error(sh);
        }
        for (size_t i = 0; i < res.n; i++) {
            uint64_t h = pm_labels_hash(&res.e[i].labels);
            int32_t src = pe_hmap_get(&by_derived, h);
            int32_t idx = pe_hmap_get(&outmap, h);
            if (idx < 0) {
                size_t n;
                if (pe_mat_add(a, &out->m, &res.e[i].labels, &n) != 0 ||
                    pe_hmap_put(a, &outmap, h, (int32_t)n) != 0 ||
                    pe_series_reserve(a, &out->m.s[n], res.e[i].h != NULL,
                                      n <= n_series ? nsteps - step : 0) != 0) {
                    return pe_nomem(sh);
                }
                idx = (int32_t)n;
                if (n >= out_src_cap) {
                    size_t cap = out_src_cap != 0 ? 2 * out_src_cap : 16;
                    int32_t *ns = (int32_t *)arena_alloc(a, cap * sizeof *ns);
                    if (ns == NULL) {
                        return pe_nomem(sh);
                    }
                    if (out_src_cap != 0) {
                        memcpy(ns, out_src, out_src_cap * sizeof *ns);
                    }
                    out_src = ns;
                    out_src_cap = cap;
                }
                out_src[n] = src;
            } else if (src >= 0 && out_src[idx] >= 0 && out_src[idx] != src) {
                return pe_dup_error(sh);
            }
            if (pe_series_push(a, &out->m.s[idx], ts, res.e[i].v, res.e[i].h) != 0) {
                return pe_nomem(sh);
            }
        }
        npoints += res.n;
        if (held + npoints > sh->max_samples) {
            return pe_too_many(sh);
        }
    }
    sh->cur = orig + npoints;
    if (e->type == PROMQL_TYPE_SCALAR) {
        return pe_mat_to_scalar(ev, out);
    }
    return 0;
}

int pe_eval_call(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out)
{
    struct pe_shared *sh = ev->sh;
    struct call_ctx c = {.e = e};
    int rc;
    c.args =
        (struct pm_fnarg *)arena_alloc(sh->a, (e->n_args != 0 ? e->n_args : 1) * sizeof *c.args);
    if (c.args == NULL) {
        return pe_nomem(sh);
    }
    if (e->func->id == PROMQL_FN_TIMESTAMP && e->n_args == 1) {
        const struct promql_expr *arg = pe_unparen(e->args[0]);
        if (arg->kind == PROMQL_VECTOR) {
            c.sel = arg;
            return pe_range_eval(ev, NULL, 0, step_timestamp, &c, out);
        }
    }
    for (size_t i = 0; i < e->n_args; i++) {
        const struct promql_expr *arg = pe_unparen(e->args[i]);
        if (arg->kind == PROMQL_MATRIX || arg->kind == PROMQL_SUBQUERY) {
            return eval_call_matrix(ev, e, i, out);
        }
    }
    rc = pe_range_eval(ev, (const struct promql_expr *const *)e->args, e->n_args, step_call, &c,
                       out);
    if (rc == 0 && e->type == PROMQL_TYPE_SCALAR) {
        rc = pe_mat_to_scalar(ev, out);
    }
    return rc;
}
