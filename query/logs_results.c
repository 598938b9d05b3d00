/*
 * logs_results.c - log query results: pass 1 keeps the best |limit| rows
 * per source (top-k), sources visited in batches ordered by time; pass 2
 * materializes the winners' lines and labels (see logs_int.h).
 */
#include "query/logs_int.h"

#include "query/pool.h"

/* ---- log query results ---------------------------------------------------- */

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
    logs_scan_item_log(ba->s, ba->order[ba->base + i]);
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
    if (!logs_eval_row(c, &v, cd->ts)) {
        return -EAGAIN; /* cannot happen: the row matched in pass 1 */
    }
    if (!c->built) {
        logs_build_labels(c);
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
        if (logs_lidx_lookup(&c->eidx, &kept, l->n, l->nn) != NULL) {
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

/* Pass 2 materialized every entry of source |i| (copies in the query's
 * arena): the native rendering reads its rows again, the others do not. */
static void pass2_done(struct logs_result *res, uint32_t i)
{
    if (!res->native) {
        qctx_done(&res->q.c, res->scan.srcs[i].qs);
    }
}

int logs_run_log_query(struct logs_result *res)
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
    logs_plan_needs(s, true);
    if (res->native) {
        s->want = BLK_ALL;
    }
    int rc = logs_scan_plan(s);
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
    int (*cmp)(const void *, const void *) = s->forward ? logs_cand_cmp_fwd : logs_cand_cmp_bwd;
    while (done < s->n_srcs && !qctx_err(&q->c)) {
        if (n_best >= s->limit) {
            const struct src *nx = &s->srcs[order[done]];
            uint64_t worst = best[s->limit - 1].ts;
            if (nx->qs->b != NULL &&
                ((s->forward && nx->qs->tmin > worst) || (!s->forward && nx->qs->tmax < worst))) {
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
                logs_rctx_fini(&c);
                have_ctx = false;
                pass2_done(res, cur);
            }
            cur = best[i].src;
            /* pass 1 let it go (logs_scan_item_log): pinned and loaded again */
            rc = qctx_load(&q->c, s->srcs[cur].qs, s->want);
            if (rc < 0) {
                break;
            }
            if (logs_rctx_init(&c, s, &s->srcs[cur]) < 0) {
                pass2_done(res, cur);
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
        logs_rctx_fini(&c);
        pass2_done(res, cur);
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
