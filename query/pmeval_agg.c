/*
 * pmeval_agg.c - one step of a PromQL aggregation (sum avg min max count
 * group stddev stdvar topk bottomk quantile count_values, by / without),
 * as Prometheus 2.42's evaluator.aggregation does it, float for float:
 * avg's incremental mean with its Inf cases, Welford for stddev / stdvar
 * (population), quantile as promql/quantile.go, topk / bottomk through
 * the same binary heap as Go's container/heap (so ties and NaN come out
 * in the same order for up to 12 elements per group, where Go's sort is an
 * insertion sort; past that ties may differ, which Prometheus leaves
 * unspecified), count_values labels as FormatFloat(v, 'f', -1, 64).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/pmeval_eng.h"
#include "storage/promname.h"

struct agg_group {
    struct pm_labels labels;
    double value, mean;
    uint64_t count;
    bool has_float, has_hist;
    struct pm_hist *hist;
    size_t off, n; /* its elements in g->heap (topk / bottomk / quantile) */
    size_t cap;
};

struct agg_elem {
    struct pm_labels labels;
    double v;
};

static int cmp_name(const void *x, const void *y)
{
    const char *a = *(const char *const *)x, *b = *(const char *const *)y;
    return strcmp(a, b);
}

int pe_agg_init(struct pe_ev *ev, struct pe_agg *g, const struct promql_expr *e)
{
    arena *a = ev->sh->a;
    memset(g, 0, sizeof *g);
    g->e = e;
    size_t n = e->n_grouping;
    bool cv = e->agg == PROMQL_AGG_COUNT_VALUES;
    if (cv) {
        const struct promql_expr *p = e->param;
        while (p->kind == PROMQL_PAREN) {
            p = p->inner;
        }
        g->label = p->str;
    }
    size_t cap = n + 1;
    g->names = (const char **)arena_alloc(a, cap * sizeof *g->names);
    g->lens = (uint32_t *)arena_alloc(a, cap * sizeof *g->lens);
    if (g->names == NULL || g->lens == NULL) {
        return pe_fail(ev->sh, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        g->names[i] = e->grouping[i].s;
    }
    if (cv && !e->without) {
        g->names[n++] = g->label.s;
    }
    qsort(g->names, n, sizeof *g->names, cmp_name);
    for (size_t i = 0; i < n; i++) {
        g->lens[i] = (uint32_t)strlen(g->names[i]);
    }
    g->n_names = n;
    g->stamp = 1; /* gstamp starts at 0: no group seen yet */
    return 0;
}

/* model.LabelName.IsValid (2.42: the legacy character set). */
static bool label_name_valid(const struct promql_str *s)
{
    if (s->n == 0) {
        return false;
    }
    for (size_t i = 0; i < s->n; i++) {
        unsigned char c = (unsigned char)s->s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (i > 0 && c >= '0' && c <= '9');
        if (!ok) {
            return false;
        }
    }
    return true;
}

static void *grow(arena *a, void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) {
        return p;
    }
    size_t n = *cap != 0 ? *cap : 16;
    while (n < need) {
        n *= 2;
    }
    void *q = arena_alloc(a, n * size);
    if (q == NULL) {
        return NULL;
    }
    *cap = n;
    return q;
}

/* vectorByValueHeap.Less / vectorByReverseValueHeap.Less */
static bool less_heap(const struct agg_elem *x, const struct agg_elem *y, bool reverse)
{
    if (isnan(x->v)) {
        return true;
    }
    return reverse ? x->v > y->v : x->v < y->v;
}

static void swap_el(struct agg_elem *h, long i, long j)
{
    struct agg_elem t = h[i];
    h[i] = h[j];
    h[j] = t;
}

/* container/heap up / down */
static void heap_up(struct agg_elem *h, long j, bool rev)
{
    for (;;) {
        long i = (j - 1) / 2;
        if (i == j || !less_heap(&h[j], &h[i], rev)) {
            break;
        }
        swap_el(h, i, j);
        j = i;
    }
}

static void heap_down(struct agg_elem *h, long i, long n, bool rev)
{
    for (;;) {
        long j1 = 2 * i + 1;
        if (j1 >= n || j1 < 0) {
            break;
        }
        long j = j1;
        long j2 = j1 + 1;
        if (j2 < n && less_heap(&h[j2], &h[j1], rev)) {
            j = j2;
        }
        if (!less_heap(&h[j], &h[i], rev)) {
            break;
        }
        swap_el(h, i, j);
        i = j;
    }
}

static bool g_rev;
static int cmp_rev_sort(const void *x, const void *y)
{
    /* sort.Reverse(heap): a sorts before b when heap.Less(b, a). */
    const struct agg_elem *a = x, *b = y;
    bool ab = less_heap(b, a, g_rev), ba = less_heap(a, b, g_rev);
    return ab == ba ? 0 : ab ? -1 : 1;
}

/* sort.Sort(sort.Reverse(heap)): Go's insertion sort for short slices. */
static void reverse_sort(struct agg_elem *h, size_t n, bool rev)
{
    if (n <= 12) {
        for (size_t i = 1; i < n; i++) {
            for (size_t j = i; j > 0 && less_heap(&h[j - 1], &h[j], rev); j--) {
                swap_el(h, (long)j, (long)j - 1);
            }
        }
        return;
    }
    g_rev = rev;
    qsort(h, n, sizeof *h, cmp_rev_sort);
}

/* quantile over a group: its values through the function library's
 * quantile (the one quantile_over_time uses: promql/quantile.go). */
static int group_quantile(arena *a, double q, const struct agg_elem *v, size_t n, double *out)
{
    double *x = n != 0 ? (double *)arena_alloc(a, n * sizeof *x) : NULL;
    if (n != 0 && x == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        x[i] = v[i].v;
    }
    *out = pmfn_quantile(q, x, n);
    return 0;
}

/* The group labels of |ls| (cached per grouping key across steps). */
static int group_labels(struct pe_ev *ev, struct pe_agg *g, const struct pm_labels *ls,
                        struct pm_labels *out)
{
    const struct promql_expr *e = g->e;
    struct pm_lb b;
    if (!e->without && g->n_names == 0) {
        out->v = NULL;
        out->n = 0;
        return 0;
    }
    pm_lb_init(&b, ev->sh->a, ls);
    if (e->without) {
        pm_lb_keep(&b, false, g->names, g->lens, g->n_names, true);
    } else {
        pm_lb_keep(&b, true, g->names, g->lens, g->n_names, false);
    }
    return pm_lb_done(&b, out);
}

/* A group not seen before in this query: its labels into g->lv (index
 * *li), its key into the cache, room in the per-step marks. 0 or -ENOMEM
 * (with the message). */
static int new_group(struct pe_ev *ev, struct pe_agg *g, const struct pm_labels *metric,
                     uint64_t key, int32_t *li)
{
    struct pe_shared *sh = ev->sh;
    arena *a = sh->a;
    struct pm_labels *lv = grow(a, g->lv, &g->lcap, g->ln + 1, sizeof *lv);
    if (lv == NULL) {
        return pe_fail(sh, -ENOMEM, "out of memory");
    }
    if (lv != g->lv && g->ln != 0) {
        memcpy(lv, g->lv, g->ln * sizeof *lv);
    }
    g->lv = lv;
    if (g->ln + 1 > g->gcap) {
        size_t cap = g->gcap != 0 ? 2 * g->gcap : 16;
        int32_t *gs = (int32_t *)arena_alloc(a, cap * sizeof *gs);
        uint32_t *st = (uint32_t *)arena_alloc(a, cap * sizeof *st);
        if (gs == NULL || st == NULL) {
            return pe_fail(sh, -ENOMEM, "out of memory");
        }
        memset(st, 0, cap * sizeof *st);
        if (g->gcap != 0) {
            memcpy(gs, g->gstep, g->gcap * sizeof *gs);
            memcpy(st, g->gstamp, g->gcap * sizeof *st);
        }
        g->gstep = gs;
        g->gstamp = st;
        g->gcap = cap;
    }
    *li = (int32_t)g->ln;
    if (group_labels(ev, g, metric, &g->lv[*li]) != 0 ||
        pe_hmap_put(a, &g->lcache, key, *li) != 0) {
        return pe_fail(sh, -ENOMEM, "out of memory");
    }
    g->ln++;
    return 0;
}

int pe_agg_step(struct pe_ev *ev, struct pe_agg *g, double param, const struct pm_vec *in,
                const uint32_t *sidx, struct pm_vec *out)
{
    struct pe_shared *sh = ev->sh;
    arena *a = sh->a;
    const struct promql_expr *e = g->e;
    enum promql_agg_op op = e->agg;
    int64_t k = 0;
    double q = 0;
    char buf[PROMNAME_FMT_MAX];
    int rc;

    if (op == PROMQL_AGG_TOPK || op == PROMQL_AGG_BOTTOMK) {
        if (!(param <= 9223372036854775807.0 && param >= -9223372036854775808.0)) {
            promql_format_float(param, buf, sizeof buf);
            return pe_fail(sh, -EDOM, "Scalar value %s overflows int64", buf);
        }
        k = (int64_t)param;
        if (k < 1) {
            return 0;
        }
    } else if (op == PROMQL_AGG_QUANTILE) {
        q = param;
    } else if (op == PROMQL_AGG_COUNT_VALUES && !label_name_valid(&g->label)) {
        char qb[512];
        pe_go_quote(g->label.s, g->label.n, qb, sizeof qb);
        return pe_fail(sh, -EDOM, "invalid label name %s", qb);
    }
    if (in->n == 0) {
        return 0;
    }
    if (++g->stamp == 0) {
        /* wrapped: forget every step's marks */
        if (g->gcap != 0) {
            memset(g->gstamp, 0, g->gcap * sizeof *g->gstamp);
        }
        g->stamp = 1;
    }

    /* Pass 1: group of every element; elements per group. */
    struct agg_group *gr = grow(a, g->scratch, &g->scratch_cap, in->n, sizeof *gr);
    if (gr == NULL) {
        return pe_fail(sh, -ENOMEM, "out of memory");
    }
    g->scratch = gr;
    int32_t *gidx = grow(a, g->gidx, &g->gidx_cap, in->n, sizeof *gidx);
    if (gidx == NULL) {
        return pe_fail(sh, -ENOMEM, "out of memory");
    }
    g->gidx = gidx;
    struct pm_labels *metric = grow(a, g->metric, &g->metric_cap, in->n, sizeof *metric);
    if (metric == NULL) {
        return pe_fail(sh, -ENOMEM, "out of memory");
    }
    g->metric = metric;
    size_t ng = 0;
    for (size_t i = 0; i < in->n; i++) {
        metric[i] = in->e[i].labels;
        if (op == PROMQL_AGG_COUNT_VALUES) {
            struct pm_lb b;
            size_t n = promname_fmt_le(in->e[i].h != NULL ? 0 : in->e[i].v, buf);
            pm_lb_init(&b, a, &in->e[i].labels);
            pm_lb_set_copy(&b, g->label.s, g->label.n, buf, n);
            if (pm_lb_done(&b, &metric[i]) != 0) {
                return pe_fail(sh, -ENOMEM, "out of memory");
            }
        }
        /* li: the group across steps (an index in g->lv), cached per
         * input series; gi: its index in this step's groups */
        int32_t li = -1;
        bool cached = op != PROMQL_AGG_COUNT_VALUES && sidx != NULL;
        if (cached && pe_cache_room(a, &g->keys, sidx[i]) != 0) {
            return pe_fail(sh, -ENOMEM, "out of memory");
        }
        if (cached && g->keys.set[sidx[i]]) {
            li = (int32_t)g->keys.v[sidx[i]];
        } else {
            uint64_t key =
                e->without
                    ? pm_labels_hash_on(&metric[i], false, g->names, g->lens, g->n_names, true)
                    : pm_labels_hash_on(&metric[i], true, g->names, g->lens, g->n_names, false);
            li = pe_hmap_get(&g->lcache, key);
            if (li < 0) {
                if ((rc = new_group(ev, g, &metric[i], key, &li)) != 0) {
                    return rc;
                }
            }
            if (cached) {
                g->keys.v[sidx[i]] = (uint64_t)li;
                g->keys.set[sidx[i]] = 1;
            }
        }
        int32_t gi;
        if (g->gstamp[li] == g->stamp) {
            gi = g->gstep[li];
        } else {
            gi = (int32_t)ng++;
            memset(&gr[gi], 0, sizeof gr[gi]);
            gr[gi].labels = g->lv[li];
            g->gstep[li] = gi;
            g->gstamp[li] = g->stamp;
        }
        gidx[i] = gi;
        gr[gi].n++;
    }
    bool heaped = op == PROMQL_AGG_TOPK || op == PROMQL_AGG_BOTTOMK || op == PROMQL_AGG_QUANTILE;
    struct agg_elem *heap = NULL;
    if (heaped) {
        size_t off = 0;
        for (size_t i = 0; i < ng; i++) {
            size_t c = gr[i].n;
            if (op != PROMQL_AGG_QUANTILE && (uint64_t)k < c) {
                c = (size_t)k;
            }
            gr[i].off = off;
            gr[i].cap = c;
            gr[i].n = 0;
            off += c;
        }
        heap = grow(a, g->heap, &g->heap_cap, off, sizeof *heap);
        if (heap == NULL) {
            return pe_fail(sh, -ENOMEM, "out of memory");
        }
        g->heap = heap;
    }
    for (size_t i = 0; i < ng; i++) {
        gr[i].count = 0;
    }

    /* Pass 2: Prometheus's per-element updates, in input order. */
    bool rev = op == PROMQL_AGG_BOTTOMK;
    for (size_t i = 0; i < in->n; i++) {
        struct agg_group *grp = &gr[gidx[i]];
        const struct pm_velem *s = &in->e[i];
        double v = s->h != NULL ? 0 : s->v;
        if (grp->count == 0) {
            grp->count = 1;
            grp->value = v;
            grp->mean = v;
            if (s->h == NULL) {
                grp->has_float = true;
            } else if (op == PROMQL_AGG_SUM) {
                grp->hist = pm_hist_dup(a, s->h);
                if (grp->hist == NULL) {
                    return pe_fail(sh, -ENOMEM, "out of memory");
                }
                grp->has_hist = true;
            }
            switch (op) {
            case PROMQL_AGG_STDVAR:
            case PROMQL_AGG_STDDEV:
                grp->value = 0;
                break;
            case PROMQL_AGG_TOPK:
            case PROMQL_AGG_BOTTOMK:
            case PROMQL_AGG_QUANTILE:
                heap[grp->off] = (struct agg_elem){.labels = s->labels, .v = v};
                grp->n = 1;
                break;
            case PROMQL_AGG_GROUP:
                grp->value = 1;
                break;
            default:
                break;
            }
            continue;
        }
        switch (op) {
        case PROMQL_AGG_SUM:
            if (s->h != NULL) {
                grp->has_hist = true;
                if (grp->hist != NULL) {
                    struct pm_hist *r = s->h->schema >= grp->hist->schema
                                            ? pm_hist_add(a, grp->hist, s->h)
                                            : pm_hist_add(a, s->h, grp->hist);
                    if (r == NULL) {
                        return pe_fail(sh, -ENOMEM, "out of memory");
                    }
                    grp->hist = r;
                }
            } else {
                grp->has_float = true;
                grp->value += v;
            }
            break;
        case PROMQL_AGG_AVG:
            grp->count++;
            if (isinf(grp->mean)) {
                if (isinf(v) && (grp->mean > 0) == (v > 0)) {
                    break;
                }
                if (!isinf(v) && !isnan(v)) {
                    break;
                }
            }
            grp->mean += v / (double)grp->count - grp->mean / (double)grp->count;
            break;
        case PROMQL_AGG_GROUP:
            break;
        case PROMQL_AGG_MAX:
            if (grp->value < v || isnan(grp->value)) {
                grp->value = v;
            }
            break;
        case PROMQL_AGG_MIN:
            if (grp->value > v || isnan(grp->value)) {
                grp->value = v;
            }
            break;
        case PROMQL_AGG_COUNT:
        case PROMQL_AGG_COUNT_VALUES:
            grp->count++;
            break;
        case PROMQL_AGG_STDVAR:
        case PROMQL_AGG_STDDEV: {
            grp->count++;
            double delta = v - grp->mean;
            grp->mean += delta / (double)grp->count;
            grp->value += delta * (v - grp->mean);
            break;
        }
        case PROMQL_AGG_TOPK:
        case PROMQL_AGG_BOTTOMK: {
            struct agg_elem *h = &heap[grp->off];
            struct agg_elem el = {.labels = s->labels, .v = v};
            bool better = rev ? h[0].v > v : h[0].v < v;
            if ((int64_t)grp->n < k || better || isnan(h[0].v)) {
                if ((int64_t)grp->n == k) {
                    if (k == 1) {
                        h[0] = el;
                        break;
                    }
                    /* heap.Pop */
                    long n = (long)grp->n - 1;
                    swap_el(h, 0, n);
                    heap_down(h, 0, n, rev);
                    grp->n--;
                }
                /* heap.Push */
                h[grp->n++] = el;
                heap_up(h, (long)grp->n - 1, rev);
            }
            break;
        }
        case PROMQL_AGG_QUANTILE:
            heap[grp->off + grp->n++] = (struct agg_elem){.labels = s->labels, .v = v};
            break;
        }
    }

    /* The result, groups in first-seen order. */
    for (size_t i = 0; i < ng; i++) {
        struct agg_group *grp = &gr[i];
        struct pm_velem el = {.labels = grp->labels};
        switch (op) {
        case PROMQL_AGG_AVG:
            grp->value = grp->mean;
            break;
        case PROMQL_AGG_COUNT:
        case PROMQL_AGG_COUNT_VALUES:
            grp->value = (double)grp->count;
            break;
        case PROMQL_AGG_STDVAR:
            grp->value = grp->value / (double)grp->count;
            break;
        case PROMQL_AGG_STDDEV:
            grp->value = sqrt(grp->value / (double)grp->count);
            break;
        case PROMQL_AGG_TOPK:
        case PROMQL_AGG_BOTTOMK: {
            struct agg_elem *h = &heap[grp->off];
            if (grp->n > 1) {
                reverse_sort(h, grp->n, rev);
            }
            for (size_t j = 0; j < grp->n; j++) {
                struct pm_velem o = {.labels = h[j].labels, .v = h[j].v};
                if (pm_vec_push(a, out, &o) != 0) {
                    return pe_fail(sh, -ENOMEM, "out of memory");
                }
            }
            continue;
        }
        case PROMQL_AGG_QUANTILE:
            if (group_quantile(a, q, &heap[grp->off], grp->n, &grp->value) != 0) {
                return pe_fail(sh, -ENOMEM, "out of memory");
            }
            break;
        case PROMQL_AGG_SUM:
            if (grp->has_float && grp->has_hist) {
                continue;
            }
            break;
        default:
            break;
        }
        el.v = grp->value;
        el.h = grp->hist;
        if (pm_vec_push(a, out, &el) != 0) {
            return pe_fail(sh, -ENOMEM, "out of memory");
        }
    }
    return 0;
}
