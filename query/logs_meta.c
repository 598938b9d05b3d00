/*
 * logs_meta.c - metadata endpoints (labels, label values, series) over
 * the resource dictionaries, and the index endpoints (stats, volume,
 * detected labels) (see logs.h).
 */
#include "query/logs_int.h"

#include "query/pool.h"

/* ---- metadata: labels, values, series ------------------------------------- */

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
        rc = logs_src_rinfo_all(&src, NULL);
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
                ok = sels[k] == NULL || logs_selector_match(sels[k], ri->idx, ri->n_idx);
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
            logs_w_labels_obj(w, sa.sets[i], sa.ns[i], -1);
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

/* ---- index: stats, volume, detected labels -------------------------------- */

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
    logs_scan_src_run(s, &s->srcs[i], on_index_match);
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
    if (r->q.a == NULL || logs_query_open(&r->q) < 0) {
        logs_result_free(r);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    struct scan *s = &r->scan;
    s->q = &r->q;
    s->log = &rq->expr->log;
    s->lo = rq->start_ns;
    s->hi = rq->end_ns + 1;
    s->range = rq->expr; /* scan every row of the window (no limit) */
    logs_plan_needs(s, false);
    rc = logs_scan_plan(s);
    if (rc == 0) {
        qpool_parallel(s->n_srcs, scan_item_index, s);
        rc = qctx_err(&r->q.c);
    }
    qstats_scan_add(&r->q.c.st);
    if (rc < 0) {
        const char *m = qctx_message(&r->q.c);
        snprintf(err, errlen, "%s", m[0] ? m : "out of memory");
        logs_result_free(r);
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
            logs_w_labels_obj(w, g[m].l, g[m].nl, -1);
            jsonw_key(w, "value");
            jsonw_arr_begin(w);
            logs_w_sec(w, rq->end_ns);
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
    logs_result_free(r);
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
