/*
 * tqmx_series.c - from accumulators to series (Tempo's labels: by()
 * values, __name__ for an ungrouped query, p for quantiles, __bucket for
 * histograms, __meta_type for compare()), arithmetic between series and
 * scalars, second stages and metric filters, and the JSON answers of
 * /api/metrics/query_range and /api/metrics/query (see tqmx.h).
 */
#include "query/tqmx_int.h"

#include <math.h>
#include <time.h>

static const char *const fn_name[] = {
    [TQMX_RATE] = "rate",
    [TQMX_COUNT_OVER_TIME] = "count_over_time",
    [TQMX_MIN_OVER_TIME] = "min_over_time",
    [TQMX_MAX_OVER_TIME] = "max_over_time",
    [TQMX_AVG_OVER_TIME] = "avg_over_time",
    [TQMX_SUM_OVER_TIME] = "sum_over_time",
    [TQMX_QUANTILE_OVER_TIME] = "quantile_over_time",
    [TQMX_HISTOGRAM_OVER_TIME] = "histogram_over_time",
    [TQMX_COMPARE] = "compare",
};

static void *salloc(struct tqmx_run *x, size_t n)
{
    void *p = arena_alloc(x->a, n ? n : 1);
    if (p == NULL) {
        qctx_fail(&x->q, -ENOMEM, "the metrics query needs more memory than allowed");
    } else {
        memset(p, 0, n ? n : 1);
    }
    return p;
}

/* The label name of a by() field, as Tempo spells the attribute. */
static const char *field_label(struct tqmx_run *x, const struct traceql_field *f)
{
    if (f->kind == TRACEQL_F_INTRINSIC) {
        return traceql_intrinsic_name(f->intrinsic);
    }
    static const char *const pre[] = {
        [TRACEQL_SCOPE_ANY] = ".",
        [TRACEQL_SCOPE_SPAN] = "span.",
        [TRACEQL_SCOPE_RESOURCE] = "resource.",
        [TRACEQL_SCOPE_EVENT] = "event.",
        [TRACEQL_SCOPE_LINK] = "link.",
        [TRACEQL_SCOPE_INSTRUMENTATION] = "instrumentation.",
    };
    size_t pl = strlen(pre[f->scope]);
    char *s = salloc(x, pl + f->name_len + 1);
    if (s != NULL) {
        memcpy(s, pre[f->scope], pl);
        memcpy(s + pl, f->name, f->name_len);
    }
    return s;
}

/* Go's strconv.FormatFloat(v, 'g', -1, 64) closely enough: shortest round trip. */
static void fmt_float(char *buf, size_t cap, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) {
            return;
        }
    }
}

/* A label value as promLabels shows it (Tempo's Labels.String). */
static void prom_value(char *buf, size_t cap, const struct tv *v)
{
    switch (v->t) {
    case TRACEQL_T_STRING:
        if (v->n == 0) {
            snprintf(buf, cap, "<empty>");
        } else if (v->n == 3 && memcmp(v->s, "nil", 3) == 0) {
            snprintf(buf, cap, "<nil>");
        } else {
            snprintf(buf, cap, "%.*s", (int)v->n, v->s);
        }
        return;
    case TRACEQL_T_INT:
        snprintf(buf, cap, "int(%lld)", (long long)v->i);
        return;
    case TRACEQL_T_FLOAT:
        fmt_float(buf, cap, v->f);
        return;
    case TRACEQL_T_BOOL:
        snprintf(buf, cap, "%s", v->i ? "true" : "false");
        return;
    case TRACEQL_T_DURATION:
        snprintf(buf, cap, "%lldns", (long long)v->i);
        return;
    case TRACEQL_T_STATUS:
        snprintf(buf, cap, "%s", traceql_status_word(v->i));
        return;
    case TRACEQL_T_KIND:
        snprintf(buf, cap, "%s", traceql_kind_word(v->i));
        return;
    default:
        snprintf(buf, cap, "<nil>");
        return;
    }
}

static int label_cmp(const void *pa, const void *pb)
{
    const struct tqmx_label *a = pa, *b = pb;
    return strcmp(a->k, b->k);
}

/* Sets s->prom: {k="v", ...} sorted by name (Prometheus' Labels.String). */
static int set_prom(struct tqmx_run *x, struct tqmx_series *s)
{
    struct tqmx_label sorted[TQMX_MAX_BY + 2];
    uint32_t n = s->n_lb < TQMX_MAX_BY + 2 ? s->n_lb : TQMX_MAX_BY + 2;
    memcpy(sorted, s->lb, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), label_cmp);
    char buf[2048];
    size_t at = 0;
    buf[at++] = '{';
    for (uint32_t i = 0; i < n && at < sizeof(buf) - 8; i++) {
        char v[1100];
        prom_value(v, sizeof(v), &sorted[i].v);
        int w = snprintf(buf + at, sizeof(buf) - at, "%s%s=\"", i ? ", " : "", sorted[i].k);
        at += w > 0 ? (size_t)w : 0;
        for (const char *c = v; *c != '\0' && at < sizeof(buf) - 4; c++) {
            if (*c == '"' || *c == '\\') {
                buf[at++] = '\\';
            }
            buf[at++] = *c == '\n' ? 'n' : *c;
        }
        buf[at++] = '"';
    }
    buf[at < sizeof(buf) - 1 ? at++ : sizeof(buf) - 2] = '}';
    s->prom = salloc(x, at + 1);
    if (s->prom == NULL) {
        return -ENOMEM;
    }
    memcpy(s->prom, buf, at);
    return 0;
}

static struct tqmx_series *set_push(struct tqmx_run *x, struct tqmx_set *out, size_t *cap,
                                    uint32_t n_lb)
{
    if (out->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct tqmx_series *nv = salloc(x, ncap * sizeof(*nv));
        if (nv == NULL) {
            return NULL;
        }
        if (out->n > 0) {
            memcpy(nv, out->v, out->n * sizeof(*nv));
        }
        out->v = nv;
        *cap = ncap;
    }
    struct tqmx_series *s = &out->v[out->n++];
    uint32_t nb = x->rq->range.n;
    s->lb = salloc(x, (n_lb + 1) * sizeof(*s->lb));
    s->v = salloc(x, nb * sizeof(double));
    s->has = salloc(x, nb);
    if (s->lb == NULL || s->v == NULL || s->has == NULL) {
        return NULL;
    }
    return s;
}

/* The labels of a by() accumulator: non-nil values (all nil: the first, nil). */
static void by_labels(const struct tqmx_query *q, const struct acc *a, const char *const *names,
                      struct tqmx_series *s)
{
    for (uint32_t i = 0; i < a->n_lb; i++) {
        if (a->lv[i].t != TRACEQL_T_NIL) {
            s->lb[s->n_lb++] = (struct tqmx_label){names[i], a->lv[i]};
        }
    }
    if (s->n_lb == 0 && q->n_by > 0) {
        s->lb[s->n_lb++] = (struct tqmx_label){names[0], tv_nil};
    }
}

static int dbl_cmp(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return a < b ? -1 : a > b;
}

/* Linear interpolation between the closest ranks (sorted values). */
static double quantile(const double *v, uint32_t n, double p)
{
    double rank = p * (double)(n - 1);
    uint32_t lo = (uint32_t)floor(rank), hi = lo + 1 < n ? lo + 1 : lo;
    double w = rank - (double)lo;
    return v[lo] * (1 - w) + v[hi] * w;
}

static struct tv tv_float(double f)
{
    return (struct tv){.t = TRACEQL_T_FLOAT, .f = f};
}

static int acc_cmp_total(const void *pa, const void *pb)
{
    const struct acc *a = *(struct acc *const *)pa, *b = *(struct acc *const *)pb;
    if (a->sel != b->sel) {
        return a->sel ? 1 : -1;
    }
    int c = strcmp(a->name, b->name);
    if (c != 0) {
        return c;
    }
    if (a->total != b->total) {
        return a->total > b->total ? -1 : 1;
    }
    return a->klen != b->klen ? (a->klen < b->klen ? -1 : 1) : memcmp(a->key, b->key, a->klen);
}

static struct tv tv_cstr(const char *s)
{
    return tv_str(s, strlen(s));
}

/* compare(): top values per attribute and side, and the totals per attribute. */
static int compare_series(struct tqmx_run *x, struct qrun *qr, struct tqmx_set *out)
{
    const struct tqmx_query *q = qr->q;
    uint32_t nb = x->rq->range.n;
    size_t cap = 0, n = 0;
    struct acc **v = salloc(x, (qr->accs.n + 1) * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < qr->accs.cap; i++) {
        if (qr->accs.v[i] != NULL) {
            v[n++] = qr->accs.v[i];
        }
    }
    qsort(v, n, sizeof(*v), acc_cmp_total);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j]->sel == v[i]->sel && strcmp(v[j]->name, v[i]->name) == 0) {
            j++;
        }
        const char *side = v[i]->sel ? "selection" : "baseline";
        struct tqmx_series *t = set_push(x, out, &cap, 2);
        if (t == NULL) {
            return -ENOMEM;
        }
        t->lb[0] = (struct tqmx_label){"__meta_type",
                                       tv_cstr(v[i]->sel ? "selection_total" : "baseline_total")};
        t->lb[1] = (struct tqmx_label){v[i]->name, tv_nil};
        t->n_lb = 2;
        for (uint32_t b = 0; b < nb; b++) {
            t->has[b] = 1;
        }
        for (size_t k = i; k < j; k++) {
            for (uint32_t b = 0; b < nb; b++) {
                t->v[b] += (double)tqmx_acc_count(v[k], b);
            }
            if (k - i >= q->topn) {
                continue;
            }
            struct tqmx_series *s = set_push(x, out, &cap, 2);
            if (s == NULL) {
                return -ENOMEM;
            }
            s->lb[0] = (struct tqmx_label){"__meta_type", tv_cstr(side)};
            s->lb[1] = (struct tqmx_label){v[k]->name, v[k]->lv[0]};
            s->n_lb = 2;
            for (uint32_t b = 0; b < nb; b++) {
                s->v[b] = (double)tqmx_acc_count(v[k], b);
                s->has[b] = 1;
            }
            s->ex = v[k]->ex;
            s->n_ex = v[k]->n_ex;
        }
        i = j;
    }
    return 0;
}

/* The series of one metrics query's accumulators. */
static int query_series(struct tqmx_run *x, struct qrun *qr, struct tqmx_set *out)
{
    const struct tqmx_query *q = qr->q;
    if (q->fn == TQMX_COMPARE) {
        return compare_series(x, qr, out);
    }
    const struct tqmx_range *r = &x->rq->range;
    double secs = (double)r->step / 1e9;
    const char *names[TQMX_MAX_BY];
    for (size_t i = 0; i < q->n_by; i++) {
        if ((names[i] = field_label(x, &q->by[i])) == NULL) {
            return -ENOMEM;
        }
    }
    size_t cap = 0;
    for (size_t ai = 0; ai < qr->accs.cap; ai++) {
        const struct acc *a = qr->accs.v[ai];
        if (a == NULL) {
            continue;
        }
        size_t reps = q->fn == TQMX_QUANTILE_OVER_TIME ? q->n_qs : 1;
        for (size_t qi = 0; qi < reps; qi++) {
            struct tqmx_series *s = set_push(x, out, &cap, TQMX_MAX_BY + 1);
            if (s == NULL) {
                return -ENOMEM;
            }
            by_labels(q, a, names, s);
            if (q->fn == TQMX_QUANTILE_OVER_TIME) {
                s->lb[s->n_lb++] = (struct tqmx_label){"p", tv_float(q->qs[qi])};
            } else if (q->fn == TQMX_HISTOGRAM_OVER_TIME) {
                s->lb[s->n_lb++] = (struct tqmx_label){"__bucket", tv_float(a->bucket)};
            } else if (q->n_by == 0) {
                s->lb[s->n_lb++] = (struct tqmx_label){"__name__", tv_cstr(fn_name[q->fn])};
            }
            for (uint32_t b = 0; b < r->n; b++) {
                double c = (double)a->cnt[b];
                switch (q->fn) {
                case TQMX_RATE:
                    s->v[b] = c / secs;
                    s->has[b] = 1;
                    break;
                case TQMX_COUNT_OVER_TIME:
                case TQMX_HISTOGRAM_OVER_TIME:
                    s->v[b] = c;
                    s->has[b] = 1;
                    break;
                case TQMX_AVG_OVER_TIME:
                    s->v[b] = c > 0 ? a->v[b] / c : 0;
                    s->has[b] = c > 0;
                    break;
                case TQMX_QUANTILE_OVER_TIME:
                    if (a->qv != NULL && a->qv[b].n > 0) {
                        if (qi == 0) {
                            qsort(a->qv[b].v, a->qv[b].n, sizeof(double), dbl_cmp);
                        }
                        s->v[b] = quantile(a->qv[b].v, a->qv[b].n, q->qs[qi]);
                        s->has[b] = 1;
                    }
                    break;
                default:
                    s->v[b] = a->v[b];
                    s->has[b] = c > 0;
                    break;
                }
            }
            s->ex = a->ex;
            s->n_ex = a->n_ex;
        }
    }
    return 0;
}

/* ---- arithmetic and stages --------------------------------------------------------- */

static double apply(char op, double a, double b, bool *ok)
{
    *ok = true;
    switch (op) {
    case '+':
        return a + b;
    case '-':
        return a - b;
    case '*':
        return a * b;
    default:
        if (b == 0) {
            *ok = false; /* no sample: JSON has no Inf */
            return 0;
        }
        return a / b;
    }
}

/* Drops __name__ (arithmetic matches series on their other labels). */
static void strip_name(struct tqmx_series *s)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n_lb; i++) {
        if (strcmp(s->lb[i].k, "__name__") != 0) {
            s->lb[k++] = s->lb[i];
        }
    }
    s->n_lb = k;
}

static int eval_node(struct tqmx_run *x, const struct tqmx_node *n, struct tqmx_set *out);

static int eval_binary(struct tqmx_run *x, const struct tqmx_node *n, struct tqmx_set *out)
{
    uint32_t nb = x->rq->range.n;
    struct tqmx_set l = {0}, r = {0};
    if (n->l->kind != TQMX_N_SCALAR && eval_node(x, n->l, &l) != 0) {
        return qctx_err(&x->q);
    }
    if (n->r->kind != TQMX_N_SCALAR && eval_node(x, n->r, &r) != 0) {
        return qctx_err(&x->q);
    }
    if (n->l->kind == TQMX_N_SCALAR || n->r->kind == TQMX_N_SCALAR) {
        bool left_scalar = n->l->kind == TQMX_N_SCALAR;
        struct tqmx_set *s = left_scalar ? &r : &l;
        double c = left_scalar ? n->l->v : n->r->v;
        for (size_t i = 0; i < s->n; i++) {
            struct tqmx_series *se = &s->v[i];
            strip_name(se);
            for (uint32_t b = 0; b < nb; b++) {
                bool ok;
                se->v[b] =
                    left_scalar ? apply(n->op, c, se->v[b], &ok) : apply(n->op, se->v[b], c, &ok);
                se->has[b] = se->has[b] && ok;
            }
        }
        *out = *s;
        return 0;
    }
    for (size_t i = 0; i < l.n; i++) {
        strip_name(&l.v[i]);
        if (set_prom(x, &l.v[i]) < 0) {
            return -ENOMEM;
        }
    }
    size_t k = 0;
    for (size_t j = 0; j < r.n; j++) {
        strip_name(&r.v[j]);
        if (set_prom(x, &r.v[j]) < 0) {
            return -ENOMEM;
        }
    }
    /* a side of one series without labels applies to every series of the other (Tempo's fan-out) */
    bool l_one = l.n == 1 && l.v[0].n_lb == 0, r_one = r.n == 1 && r.v[0].n_lb == 0;
    bool fan_left = l_one && !r_one;
    struct tqmx_set *target = fan_left ? &r : &l;
    for (size_t i = 0; i < target->n; i++) {
        const struct tqmx_series *m = NULL;
        if (fan_left) {
            m = &l.v[0];
        } else if (r_one && !l_one) {
            m = &r.v[0];
        }
        for (size_t j = 0; j < r.n && m == NULL; j++) {
            if (strcmp(l.v[i].prom, r.v[j].prom) == 0) {
                m = &r.v[j];
            }
        }
        if (m == NULL) {
            continue; /* no partner: no series */
        }
        struct tqmx_series *s = &target->v[i];
        for (uint32_t b = 0; b < nb; b++) {
            bool ok;
            s->v[b] = fan_left ? apply(n->op, m->v[b], s->v[b], &ok)
                               : apply(n->op, s->v[b], m->v[b], &ok);
            s->has[b] = s->has[b] && m->has[b] && ok;
        }
        target->v[k++] = *s;
    }
    target->n = k;
    *out = *target;
    return 0;
}

static bool cmp_holds(enum traceql_op op, double a, double b)
{
    switch (op) {
    case TRACEQL_OP_EQ:
        return a == b;
    case TRACEQL_OP_NE:
        return a != b;
    case TRACEQL_OP_GT:
        return a > b;
    case TRACEQL_OP_GE:
        return a >= b;
    case TRACEQL_OP_LT:
        return a < b;
    default:
        return a <= b;
    }
}

static int prom_cmp(const void *pa, const void *pb)
{
    const struct tqmx_series *a = pa, *b = pb;
    return strcmp(a->prom, b->prom);
}

static int ex_cmp(const void *pa, const void *pb)
{
    const struct tqmx_ex *a = pa, *b = pb;
    if (a->ts_ns != b->ts_ns) {
        return a->ts_ns < b->ts_ns ? -1 : 1;
    }
    return memcmp(a->span_id, b->span_id, 8);
}

/* A metric filter keeps the exemplars whose value passes it too (Tempo's
 * MetricsFilter); the array may be shared, so the kept ones are copied. */
static int filter_exemplars(struct tqmx_run *x, struct tqmx_series *s, const struct tqmx_stage *st)
{
    if (s->n_ex == 0) {
        return 0;
    }
    struct tqmx_ex *kept = salloc(x, s->n_ex * sizeof(*kept));
    if (kept == NULL) {
        return -ENOMEM;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n_ex; i++) {
        if (!isnan(s->ex[i].v) && cmp_holds(st->op, s->ex[i].v, st->v)) {
            kept[k++] = s->ex[i];
        }
    }
    s->ex = kept;
    s->n_ex = k;
    return 0;
}

struct rank {
    double v;
    size_t i;
};

static int rank_desc(const void *pa, const void *pb)
{
    const struct rank *a = pa, *b = pb;
    if (a->v != b->v) {
        return a->v > b->v ? -1 : 1;
    }
    return a->i < b->i ? -1 : a->i > b->i;
}

static int rank_asc(const void *pa, const void *pb)
{
    const struct rank *a = pa, *b = pb;
    if (a->v != b->v) {
        return a->v < b->v ? -1 : 1;
    }
    return a->i < b->i ? -1 : a->i > b->i;
}

/* topk/bottomk per bucket (as Prometheus): the k highest (lowest) samples stay. */
static int top_bottom(struct tqmx_run *x, struct tqmx_set *s, const struct tqmx_stage *st)
{
    uint32_t nb = x->rq->range.n;
    struct rank *rk = salloc(x, (s->n + 1) * sizeof(*rk));
    uint8_t *keep = salloc(x, s->n + 1);
    if (rk == NULL || keep == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < s->n; i++) {
        if (set_prom(x, &s->v[i]) < 0) {
            return -ENOMEM;
        }
    }
    if (s->n > 1) {
        qsort(s->v, s->n, sizeof(*s->v), prom_cmp); /* ties go to the first by labels */
    }
    for (uint32_t b = 0; b < nb; b++) {
        size_t m = 0;
        for (size_t i = 0; i < s->n; i++) {
            if (s->v[i].has[b]) {
                rk[m++] = (struct rank){s->v[i].v[b], i};
            }
        }
        qsort(rk, m, sizeof(*rk), st->kind == TQMX_ST_TOPK ? rank_desc : rank_asc);
        memset(keep, 0, s->n);
        for (size_t k = 0; k < m && k < st->k; k++) {
            keep[rk[k].i] = 1;
        }
        for (size_t i = 0; i < s->n; i++) {
            s->v[i].has[b] = s->v[i].has[b] && keep[i];
        }
    }
    return 0;
}

/* Series without a sample left go. */
static void drop_empty(struct tqmx_run *x, struct tqmx_set *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        bool any = false;
        for (uint32_t b = 0; b < x->rq->range.n && !any; b++) {
            any = s->v[i].has[b];
        }
        if (any) {
            s->v[k++] = s->v[i];
        }
    }
    s->n = k;
}

static int eval_node(struct tqmx_run *x, const struct tqmx_node *n, struct tqmx_set *out)
{
    int rc = 0;
    memset(out, 0, sizeof(*out));
    if (n->kind == TQMX_N_QUERY) {
        struct qrun qr = {.q = n->q};
        rc = tqmx_scan(x, &qr);
        if (rc == 0) {
            rc = query_series(x, &qr, out);
        }
    } else if (n->kind == TQMX_N_BINARY) {
        rc = eval_binary(x, n, out);
    }
    for (size_t i = 0; rc == 0 && i < n->n_stages; i++) {
        const struct tqmx_stage *st = &n->stages[i];
        if (st->kind == TQMX_ST_FILTER) {
            for (size_t k = 0; k < out->n && rc == 0; k++) {
                for (uint32_t b = 0; b < x->rq->range.n; b++) {
                    out->v[k].has[b] = out->v[k].has[b] && cmp_holds(st->op, out->v[k].v[b], st->v);
                }
                rc = filter_exemplars(x, &out->v[k], st);
            }
        } else {
            rc = top_bottom(x, out, st);
        }
        drop_empty(x, out);
    }
    if (rc != 0 && qctx_err(&x->q) == 0) {
        qctx_fail(&x->q, rc, "the metrics query needs more memory than allowed");
    }
    return qctx_err(&x->q);
}

/* ---- the answer ---------------------------------------------------------------------- */

static void json_labels(struct jsonw *w, const struct tqmx_label *lb, uint32_t n)
{
    jsonw_key(w, "labels");
    jsonw_arr_begin(w);
    for (uint32_t i = 0; i < n; i++) {
        jsonw_obj_begin(w);
        jsonw_key(w, "key");
        jsonw_cstr(w, lb[i].k);
        jsonw_key(w, "value");
        traces_json_tv(w, &lb[i].v);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
}

static void json_num(struct jsonw *w, double v)
{
    if (isnan(v) || isinf(v)) {
        jsonw_cstr(w, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf"); /* protobuf-JSON */
    } else {
        jsonw_double(w, v);
    }
}

static void json_ms(struct jsonw *w, uint64_t ns)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(ns / 1000000u));
    jsonw_cstr(w, buf);
}

static void json_exemplars(struct jsonw *w, const struct tqmx_series *s)
{
    if (s->n_ex > 1) {
        qsort(s->ex, s->n_ex, sizeof(*s->ex), ex_cmp); /* oldest first */
    }
    jsonw_key(w, "exemplars");
    jsonw_arr_begin(w);
    for (uint32_t i = 0; i < s->n_ex; i++) {
        const struct tqmx_ex *e = &s->ex[i];
        char tid[33], sid[17];
        hex_encode(tid, e->trace_id, 16);
        hex_encode(sid, e->span_id, 8);
        struct tqmx_label lb[2] = {{"trace:id", tv_str(tid, 32)}, {"span:id", tv_str(sid, 16)}};
        jsonw_obj_begin(w);
        json_labels(w, lb, 2);
        jsonw_key(w, "value");
        json_num(w, e->v);
        jsonw_key(w, "timestampMs");
        json_ms(w, e->ts_ns);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
}

static void render(struct tqmx_run *x, struct tqmx_set *s, struct jsonw *w)
{
    const struct tqmx_range *r = &x->rq->range;
    if (s->n > 1) {
        qsort(s->v, s->n, sizeof(*s->v), prom_cmp);
    }
    jsonw_obj_begin(w);
    jsonw_key(w, "series");
    jsonw_arr_begin(w);
    size_t shown = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct tqmx_series *se = &s->v[i];
        if (r->instant && !se->has[0]) {
            continue;
        }
        if (x->rq->max_series != 0 && shown == x->rq->max_series) {
            x->truncated = true; /* quantiles: several series per accumulator */
            break;
        }
        shown++;
        jsonw_obj_begin(w);
        json_labels(w, se->lb, se->n_lb);
        if (r->instant) {
            jsonw_key(w, "value");
            json_num(w, se->v[0]);
            jsonw_obj_end(w);
            continue;
        }
        jsonw_key(w, "promLabels");
        jsonw_cstr(w, se->prom);
        jsonw_key(w, "samples");
        jsonw_arr_begin(w);
        for (uint32_t b = 0; b < r->n; b++) {
            if (!se->has[b]) {
                continue;
            }
            jsonw_obj_begin(w);
            jsonw_key(w, "timestampMs");
            json_ms(w, tqmx_bucket_ts(r, b));
            jsonw_key(w, "value");
            json_num(w, se->v[b]);
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
        json_exemplars(w, se);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
    jsonw_key(w, "metrics");
    jsonw_obj_begin(w);
    jsonw_key(w, "inspectedTraces");
    jsonw_uint(w, x->traces);
    jsonw_key(w, "inspectedBytes");
    jsonw_cstr(w, "0");
    jsonw_key(w, "inspectedSpans");
    jsonw_uint_str(w, x->spans);
    jsonw_key(w, "totalBlocks");
    jsonw_uint(w, x->q.n_src);
    jsonw_key(w, "completedJobs");
    jsonw_uint(w, 1);
    jsonw_key(w, "totalJobs");
    jsonw_uint(w, 1);
    jsonw_obj_end(w);
    char warn[768], other[384]; /* room for both: no cut */
    qctx_warnings_join(&x->q, other, sizeof(other));
    snprintf(warn, sizeof(warn), "%s", other);
    if (x->truncated) { /* Tempo's words first, then the query's own warnings */
        snprintf(warn, sizeof(warn),
                 "Response exceeds maximum series limit of %u, a partial response is returned. "
                 "Warning: the accuracy of each individual value is not guaranteed.%s%s",
                 x->rq->max_series, other[0] != '\0' ? " " : "", other);
    }
    if (warn[0] != '\0') {
        jsonw_key(w, "status");
        jsonw_cstr(w, "PARTIAL");
        jsonw_key(w, "message");
        jsonw_cstr(w, warn);
    }
    jsonw_obj_end(w);
}

int tqmx_eval(const struct tqmx_req *rq, struct jsonw *w, char *err, size_t errlen)
{
    struct tqmx_run x = {.rq = rq};
    struct traces_limits l = {.max_rows = rq->max_rows,
                              .max_memory = rq->max_memory,
                              .deadline_ns = rq->deadline_ns,
                              .cancel = rq->cancel};
    int rc = traces_query_open(&x.q, &l);
    if (rc < 0) {
        traces_set_err(err, errlen, rc);
        return rc;
    }
    x.a = arena_new(0);
    if (x.a == NULL) {
        qctx_close(&x.q);
        traces_set_err(err, errlen, -ENOMEM);
        return -ENOMEM;
    }
    if (rq->max_memory == 0) {
        arena_set_limit(x.a, (size_t)1 << 30);
    }
    /* the series and their buckets are the query's memory: bounded by its
     * charge (max_memory), chunk by chunk */
    qctx_arena_bind(&x.q, x.a);
    struct tqmx_set out;
    rc = eval_node(&x, rq->expr->root, &out);
    for (size_t i = 0; rc == 0 && i < out.n; i++) {
        rc = set_prom(&x, &out.v[i]);
    }
    if (rc == 0) {
        render(&x, &out, w);
    }
    qstats_scan_add(&x.q.st);
    if (rc != 0) {
        enum qctx_cause c = qctx_cause(&x.q);
        if ((c == QCTX_OTHER || c == QCTX_SHARED) && qctx_message(&x.q)[0] != '\0') {
            snprintf(err, errlen, "%s", qctx_message(&x.q));
        } else if (c == QCTX_MEMORY) {
            /* the arena's charge (qctx_arena_bind) or the key buffer's */
            snprintf(err, errlen, "the metrics query needs more memory than allowed");
        } else {
            traces_err_msg(&x.q, err, errlen, rc);
        }
        rc = qctx_answer_rc(&x.q, rc);
    }
    arena_free(x.a);
    qctx_uncharge(&x.q, x.kcap);
    free(x.kbuf);
    qctx_close(&x.q);
    return rc;
}
