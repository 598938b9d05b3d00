/*
 * traces_tags.c - tag names and tag values: from the resource and scope
 * dictionaries when that is enough, else from the spans of the newest
 * sources first, until the sets are full (see traces.h).
 */
#include "query/traces_int.h"

/* ---- tags and tag values -------------------------------------------------- */

/* A set of distinct (type, string) pairs, strings copied into an arena. */
struct sentry {
    uint64_t h;
    const char *s;
    uint32_t n;
    uint8_t type; /* enum traceql_type */
    bool used;
};

struct strset {
    struct sentry *v;
    size_t cap, n, max;
    arena *a;       /* the query's (qctx_arena_bind) */
    struct qctx *q; /* charged for the table */
    size_t charged; /* bytes of v charged to q */
    bool full;
};

static uint64_t str_hash(uint8_t type, const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ type;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    }
    return h;
}

/* 0, or -ENOMEM. Silently ignores additions once |max| are held. */
static int strset_add(struct strset *ss, uint8_t type, const char *s, size_t n)
{
    uint64_t h = str_hash(type, s, n);
    if ((ss->n + 1) * 2 > ss->cap) {
        size_t cap = ss->cap ? ss->cap * 2 : 64;
        if (qctx_charge(ss->q, cap * sizeof(struct sentry)) < 0) {
            return -ENOMEM;
        }
        struct sentry *v = calloc(cap, sizeof(*v));
        if (v == NULL) {
            qctx_uncharge(ss->q, cap * sizeof(struct sentry));
            return -ENOMEM;
        }
        for (size_t i = 0; i < ss->cap; i++) {
            if (ss->v[i].used) {
                size_t k = ss->v[i].h & (cap - 1);
                while (v[k].used) {
                    k = (k + 1) & (cap - 1);
                }
                v[k] = ss->v[i];
            }
        }
        free(ss->v);
        qctx_uncharge(ss->q, ss->charged);
        ss->charged = cap * sizeof(struct sentry);
        ss->v = v;
        ss->cap = cap;
    }
    size_t i = h & (ss->cap - 1);
    while (ss->v[i].used) {
        struct sentry *x = &ss->v[i];
        if (x->h == h && x->type == type && x->n == n && (n == 0 || memcmp(x->s, s, n) == 0)) {
            return 0;
        }
        i = (i + 1) & (ss->cap - 1);
    }
    if (ss->n >= ss->max) {
        ss->full = true;
        return 0;
    }
    char *c = arena_strndup(ss->a, s, n);
    if (c == NULL) {
        return -ENOMEM;
    }
    ss->v[i] = (struct sentry){.h = h, .s = c, .n = (uint32_t)n, .type = type, .used = true};
    ss->n++;
    return 0;
}

static int sentry_cmp(const void *pa, const void *pb)
{
    const struct sentry *a = pa, *b = pb;
    size_t m = a->n < b->n ? a->n : b->n;
    int c = m ? memcmp(a->s, b->s, m) : 0;
    if (c == 0 && a->n != b->n) {
        c = a->n < b->n ? -1 : 1;
    }
    return c != 0 ? c : (int)a->type - (int)b->type;
}

/* The entries, sorted (compacted in place). */
static size_t strset_sorted(struct strset *ss)
{
    size_t n = 0;
    for (size_t i = 0; i < ss->cap; i++) {
        if (ss->v[i].used) {
            ss->v[n++] = ss->v[i];
        }
    }
    qsort(ss->v, n, sizeof(*ss->v), sentry_cmp);
    ss->cap = 0; /* no longer a hash table */
    return n;
}

static void strset_fini(struct strset *ss)
{
    free(ss->v);
    ss->v = NULL;
    qctx_uncharge(ss->q, ss->charged);
    ss->charged = 0;
}

static const char *const type_names[] = {
    [TRACEQL_T_STRING] = "string",     [TRACEQL_T_INT] = "int",
    [TRACEQL_T_FLOAT] = "float",       [TRACEQL_T_BOOL] = "bool",
    [TRACEQL_T_DURATION] = "duration", [TRACEQL_T_STATUS] = "keyword",
    [TRACEQL_T_KIND] = "keyword",
};

/* Adds a typed value as its text (v1 answers use the text only). */
static int strset_add_tv(struct strset *ss, const struct tv *v, bool typed)
{
    char b[40];
    int n;
    uint8_t t = typed ? (uint8_t)v->t : (uint8_t)TRACEQL_T_STRING;
    switch (v->t) {
    case TRACEQL_T_STRING:
        return strset_add(ss, t, v->s, v->n);
    case TRACEQL_T_INT:
    case TRACEQL_T_DURATION:
        n = snprintf(b, sizeof(b), "%lld", (long long)v->i);
        return strset_add(ss, t, b, (size_t)n);
    case TRACEQL_T_FLOAT:
        n = (int)jsonw_fmt_double(b, v->f);
        return strset_add(ss, t, b, (size_t)n);
    case TRACEQL_T_BOOL:
        return strset_add(ss, t, v->i ? "true" : "false", v->i ? 4 : 5);
    default:
        return 0;
    }
}

static const char *const intrinsic_tags[] = {
    "duration",
    "event:name",
    "event:timeSinceStart",
    "instrumentation:name",
    "instrumentation:version",
    "kind",
    "link:spanID",
    "link:traceID",
    "name",
    "rootName",
    "rootServiceName",
    "span:childCount",
    "span:duration",
    "span:id",
    "span:kind",
    "span:name",
    "span:parentID",
    "span:status",
    "span:statusMessage",
    "status",
    "statusMessage",
    "trace:duration",
    "trace:id",
    "trace:rootName",
    "trace:rootService",
    "traceDuration",
};

/* What a tag scan collects per span or dictionary entry. */
enum { TS_RES, TS_SPAN, TS_EVENT, TS_LINK, TS_INSTR, TS_N };

struct tagscan {
    struct qctx q;
    const struct traces_tags_req *rq;
    struct seeds seeds;
    unsigned want;
    /* tags: one set per scope; values: sets[0] */
    struct strset sets[TS_N];
    unsigned scopes;
    /* values */
    const struct traceql_field *field; /* NULL for tag names */
    bool v2;
};

static int add_keys(struct strset *ss, const struct oattrs *a)
{
    struct val_rd r = {a->p, a->p + a->len};
    for (uint32_t i = 0; i < a->count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) < 0) {
            return 0;
        }
        if (strset_add(ss, TRACEQL_T_STRING, k, kn) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* Tag names of one span (scopes the request asked for). */
static int span_tags(struct tagscan *t, const struct span_view *v)
{
    int rc = 0;
    if (t->scopes & TRACES_SCOPE_SPAN) {
        rc |= add_keys(&t->sets[TS_SPAN], &v->attrs);
    }
    if (t->scopes & TRACES_SCOPE_RESOURCE) {
        rc |= add_keys(&t->sets[TS_RES], &v->resource->attrs);
    }
    if (t->scopes & TRACES_SCOPE_INSTRUMENTATION) {
        rc |= add_keys(&t->sets[TS_INSTR], &v->scope->attrs);
    }
    if (t->scopes & TRACES_SCOPE_EVENT) {
        struct val_rd r = {v->events.p, v->events.p + v->events.len};
        for (uint32_t i = 0; i < v->n_events; i++) {
            uint64_t tm;
            const char *nm;
            size_t nn;
            struct oattrs at;
            if (otlpenc_event_next(&r, &tm, &nm, &nn, &at) < 0) {
                break;
            }
            rc |= add_keys(&t->sets[TS_EVENT], &at);
        }
    }
    if (t->scopes & TRACES_SCOPE_LINK) {
        struct val_rd r = {v->links.p, v->links.p + v->links.len};
        for (uint32_t i = 0; i < v->n_links; i++) {
            const uint8_t *tid, *sid;
            struct oattrs at;
            if (otlpenc_link_next(&r, &tid, &sid, &at) < 0) {
                break;
            }
            rc |= add_keys(&t->sets[TS_LINK], &at);
        }
    }
    return rc < 0 ? -ENOMEM : 0;
}

static bool values_cb(void *ctx, const struct tv *v)
{
    struct tagscan *t = ctx;
    if (strset_add_tv(&t->sets[0], v, t->v2) < 0) {
        qctx_fail(&t->q, -ENOMEM, "out of memory");
        return false;
    }
    return true;
}

/* Values of the field on one span (the root-only intrinsics need no trace:
 * a span without a parent is a root). */
static int span_values(struct tagscan *t, struct ectx *e, const struct espan *sp)
{
    const struct traceql_field *f = t->field;
    const struct span_view *v = &sp->v;
    struct tv x = tv_nil;
    if (f->kind == TRACEQL_F_ATTR || is_multi(f)) {
        traces_leaf_each(e, f, sp, values_cb, t);
        return qctx_err(&t->q) == -ENOMEM ? -ENOMEM : 0;
    }
    switch (f->intrinsic) {
    case TRACEQL_I_NAME:
    case TRACEQL_I_STATUS_MESSAGE:
    case TRACEQL_I_INSTR_NAME:
    case TRACEQL_I_INSTR_VERSION:
        x = traces_intrinsic(e, f->intrinsic, sp);
        break;
    case TRACEQL_I_ROOT_NAME:
        if (!v->has_parent) {
            x = tv_str(v->name.p, v->name.len);
        }
        break;
    case TRACEQL_I_ROOT_SERVICE: {
        struct mstr m;
        if (!v->has_parent && service_name(v->resource, &m)) {
            x = tv_str(m.p, m.len);
        }
        break;
    }
    default:
        return 0;
    }
    if (x.t == TRACEQL_T_STRING && x.n == 0) {
        return 0; /* an empty statusMessage or scope version is no value */
    }
    return x.t == TRACEQL_T_NIL ? 0 : strset_add_tv(&t->sets[0], &x, t->v2);
}

/* Resource or scope dictionary entries of one source, without reading rows. */
static int dict_pass(struct tagscan *t, size_t si)
{
    struct qctx_src *src = &t->q.src[si];
    uint32_t nr = qctx_n_resources(src);
    uint32_t ns = qctx_n_scopes(src);
    const struct traceql_field *f = t->field;
    for (uint32_t i = 0; i < nr; i++) {
        const struct res_view *r = qctx_resource(src, i);
        if (r == NULL) {
            continue;
        }
        if (f == NULL && (t->scopes & TRACES_SCOPE_RESOURCE) &&
            add_keys(&t->sets[TS_RES], &r->attrs) < 0) {
            return -ENOMEM;
        }
        if (f != NULL && f->kind == TRACEQL_F_ATTR && f->scope == TRACEQL_SCOPE_RESOURCE) {
            struct visit vi = {.fn = values_cb, .ctx = t};
            traces_visit_attrs(&vi, &r->attrs, f);
        }
    }
    for (uint32_t i = 0; i < ns; i++) {
        const struct scope_view *sc = qctx_scope(src, i);
        if (sc == NULL) {
            continue;
        }
        if (f == NULL && (t->scopes & TRACES_SCOPE_INSTRUMENTATION) &&
            add_keys(&t->sets[TS_INSTR], &sc->attrs) < 0) {
            return -ENOMEM;
        }
        if (f != NULL && f->kind == TRACEQL_F_ATTR && f->scope == TRACEQL_SCOPE_INSTRUMENTATION) {
            struct visit vi = {.fn = values_cb, .ctx = t};
            traces_visit_attrs(&vi, &sc->attrs, f);
        }
        if (f != NULL && f->kind == TRACEQL_F_INTRINSIC &&
            (f->intrinsic == TRACEQL_I_INSTR_NAME || f->intrinsic == TRACEQL_I_INSTR_VERSION)) {
            const struct mstr *m = f->intrinsic == TRACEQL_I_INSTR_NAME ? &sc->name : &sc->version;
            if (m->len > 0 && strset_add(&t->sets[0], TRACEQL_T_STRING, m->p, m->len) < 0) {
                return -ENOMEM;
            }
        }
    }
    return qctx_err(&t->q) == -ENOMEM ? -ENOMEM : 0;
}

static bool sets_full(const struct tagscan *t)
{
    for (int i = 0; i < TS_N; i++) {
        if (t->sets[i].full) {
            return true;
        }
    }
    return false;
}

struct src_order {
    uint64_t newest;
    size_t si;
};

static int order_cmp(const void *pa, const void *pb)
{
    const struct src_order *a = pa, *b = pb;
    if (a->newest != b->newest) {
        return a->newest > b->newest ? -1 : 1;
    }
    return a->si < b->si ? -1 : a->si > b->si;
}

/*
 * Walks the sources newest first: dictionaries when |dict_only|, rows
 * otherwise (spans in the time range matching the seeds). Stops quietly
 * at --query-max-rows or when a set is full: tags are a hint, a partial
 * list is better than none. 0, or -ENOMEM / -ETIMEDOUT / -ECANCELED.
 */
static int tag_walk(struct tagscan *t, bool dict_only, bool (*want_rows)(struct tagscan *t))
{
    struct qctx *q = &t->q;
    struct src_order *order = calloc(q->n_src + 1, sizeof(*order));
    if (order == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < q->n_src; i++) {
        order[i].si = i;
        order[i].newest = UINT64_MAX; /* open blocks hold the newest rows */
        if (q->src[i].b != NULL) {
            uint64_t mn;
            blk_time_range(q->src[i].b, &mn, &order[i].newest);
        }
    }
    qsort(order, q->n_src, sizeof(*order), order_cmp);
    struct traces_search_req range = {.start_ns = t->rq->start_ns, .end_ns = t->rq->end_ns};
    int rc = 0;
    for (size_t oi = 0; oi < q->n_src && rc == 0 && !sets_full(t); oi++) {
        size_t si = order[oi].si;
        int may = traces_source_may(q, &range, &t->seeds, si);
        if (may != MAY) {
            q->st.blocks_skipped_zone += may == NO_ZONE;
            q->st.blocks_skipped_bloom += may == NO_BLOOM;
            q->st.blocks_skipped_dict += may == NO_DICT;
            continue;
        }
        if (dict_only) {
            rc = dict_pass(t, si);
            continue;
        }
        if (!want_rows(t) || qctx_load(q, &q->src[si], BLK_ROOT | t->want) < 0) {
            continue;
        }
        q->st.blocks_scanned++;
        struct etrace lone = {.n = 1, .root = -1, .whole = false};
        struct espan sp = {.parent = -1};
        lone.s = &sp;
        struct ectx e = {.tr = &lone};
        uint64_t lo, hi, done = 0;
        traces_row_window(q, &range, si, &lo, &hi);
        (void)qlex_re_take_limit_hit(); /* a note left by an earlier request on this thread */
        for (uint64_t r = lo; r < hi && rc == 0; r++) {
            if (qctx_span(q, &q->src[si], r, t->want, &sp.v) < 0) {
                break;
            }
            if (in_range(&range, &sp.v)) {
                bool hit = t->seeds.all || t->seeds.n == 0;
                for (size_t k = 0; !hit && k < t->seeds.n; k++) {
                    hit = traces_eval_bool(&e, t->seeds.f[k], &sp);
                }
                if (hit) {
                    rc = t->field == NULL ? span_tags(t, &sp.v) : span_values(t, &e, &sp);
                }
            }
            if (++done == SCAN_STRIDE) {
                q->st.rows_scanned += done;
                q->rows += done;
                done = 0;
                if (sets_full(t) || (q->lim.max_rows != 0 && q->rows >= q->lim.max_rows)) {
                    break;
                }
                rc = qctx_tick(q);
            } else if (rc == 0 && done % CLOCK_STRIDE == 0) {
                rc = qctx_tick(q);
            }
        }
        if (rc == 0) {
            rc = qctx_tick(q);
        }
        /* the sets hold copies (strset_add: the query's arena), nothing of
         * the block: its pin goes, and over the table cap its tables */
        qctx_done(q, &q->src[si]);
        q->st.rows_scanned += done;
        q->rows += done;
        if (q->lim.max_rows != 0 && q->rows >= q->lim.max_rows) {
            break;
        }
    }
    free(order);
    return rc != 0 ? rc : qctx_check(q);
}

static int tagscan_open(struct tagscan *t, const struct traces_tags_req *rq)
{
    memset(t, 0, sizeof(*t));
    t->rq = rq;
    t->v2 = rq->v2;
    int rc = traces_query_open(&t->q, &rq->lim);
    if (rc < 0) {
        return rc;
    }
    arena *a = arena_new(0);
    if (a == NULL) {
        qctx_close(&t->q);
        return -ENOMEM;
    }
    qctx_arena_bind(&t->q, a); /* the copied strings, charged to the query */
    for (int i = 0; i < TS_N; i++) {
        t->sets[i].a = a;
        t->sets[i].q = &t->q;
        t->sets[i].max = rq->limit ? rq->limit : TRACES_TAGS_MAX;
    }
    if (rq->expr != NULL && rq->expr->root != NULL) {
        traces_seeds_of(rq->expr->root, &t->seeds);
        for (size_t i = 0; i < t->seeds.n; i++) {
            t->want |= traces_field_tables(t->seeds.f[i]);
        }
    } else {
        t->seeds.all = true;
    }
    return 0;
}

static void tagscan_close(struct tagscan *t)
{
    arena *a = t->sets[0].a;
    for (int i = 0; i < TS_N; i++) {
        strset_fini(&t->sets[i]);
    }
    arena_free(a);
    qstats_scan_add(&t->q.st);
    qctx_close(&t->q);
}

static bool filtered(const struct tagscan *t)
{
    return !t->seeds.all && t->seeds.n > 0;
}

static bool rows_for_tags(struct tagscan *t)
{
    return (t->scopes & (TRACES_SCOPE_SPAN | TRACES_SCOPE_EVENT | TRACES_SCOPE_LINK)) != 0 ||
           filtered(t);
}

static void write_names(struct jsonw *w, struct strset *ss)
{
    size_t n = strset_sorted(ss);
    jsonw_arr_begin(w);
    for (size_t i = 0; i < n; i++) {
        jsonw_str(w, ss->v[i].s, ss->v[i].n);
    }
    jsonw_arr_end(w);
}

static void write_metrics(struct jsonw *w, const struct qctx *q)
{
    jsonw_key(w, "metrics");
    jsonw_obj_begin(w);
    jsonw_key(w, "inspectedBytes");
    jsonw_cstr(w, "0");
    jsonw_key(w, "totalBlocks");
    jsonw_uint(w, q->n_src);
    jsonw_obj_end(w);
}

int traces_tags(const struct traces_tags_req *rq, struct jsonw *w, char *err, size_t errlen)
{
    struct tagscan t;
    int rc = tagscan_open(&t, rq);
    if (rc < 0) {
        traces_set_err(err, errlen, rc);
        return rc;
    }
    t.scopes =
        rq->scopes
            ? rq->scopes
            : (TRACES_SCOPE_RESOURCE | TRACES_SCOPE_SPAN | TRACES_SCOPE_INTRINSIC |
               (rq->v2 ? TRACES_SCOPE_EVENT | TRACES_SCOPE_LINK | TRACES_SCOPE_INSTRUMENTATION
                       : 0));
    if (!rq->v2) {
        t.scopes &= ~(unsigned)TRACES_SCOPE_INTRINSIC;
    }
    if (filtered(&t)) {
        t.want |= (t.scopes & TRACES_SCOPE_SPAN ? BLK_ATTRS : 0) |
                  (t.scopes & (TRACES_SCOPE_EVENT | TRACES_SCOPE_LINK) ? BLK_DETAIL : 0);
        rc = tag_walk(&t, false, rows_for_tags);
    } else {
        /* resource and scope attributes from the dictionaries; the rest from rows */
        unsigned keep = t.scopes;
        t.want |= (t.scopes & TRACES_SCOPE_SPAN ? BLK_ATTRS : 0) |
                  (t.scopes & (TRACES_SCOPE_EVENT | TRACES_SCOPE_LINK) ? BLK_DETAIL : 0);
        rc = tag_walk(&t, true, rows_for_tags);
        t.scopes &= ~(unsigned)(TRACES_SCOPE_RESOURCE | TRACES_SCOPE_INSTRUMENTATION);
        if (rc == 0 && rows_for_tags(&t)) {
            rc = tag_walk(&t, false, rows_for_tags);
        }
        t.scopes = keep;
    }
    if (rc != 0) {
        rc = traces_err_msg(&t.q, err, errlen, rc);
        tagscan_close(&t);
        return rc;
    }
    jsonw_obj_begin(w);
    if (!rq->v2) {
        /* v1: span and resource names together, unscoped */
        for (size_t i = 0; i < t.sets[TS_RES].cap; i++) {
            struct sentry *x = &t.sets[TS_RES].v[i];
            if (x->used && strset_add(&t.sets[TS_SPAN], x->type, x->s, x->n) < 0) {
                rc = -ENOMEM;
            }
        }
        jsonw_key(w, "tagNames");
        write_names(w, &t.sets[TS_SPAN]);
    } else {
        static const struct {
            const char *name;
            unsigned bit;
            int set;
        } order[] = {
            {"resource", TRACES_SCOPE_RESOURCE, TS_RES},
            {"span", TRACES_SCOPE_SPAN, TS_SPAN},
            {"intrinsic", TRACES_SCOPE_INTRINSIC, -1},
            {"event", TRACES_SCOPE_EVENT, TS_EVENT},
            {"link", TRACES_SCOPE_LINK, TS_LINK},
            {"instrumentation", TRACES_SCOPE_INSTRUMENTATION, TS_INSTR},
        };
        jsonw_key(w, "scopes");
        jsonw_arr_begin(w);
        for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
            if (!(t.scopes & order[k].bit)) {
                continue;
            }
            /* scopes nobody asked for by name appear only when they have tags */
            if (rq->scopes == 0 && order[k].set >= TS_EVENT && t.sets[order[k].set].n == 0) {
                continue;
            }
            jsonw_obj_begin(w);
            jsonw_key(w, "name");
            jsonw_cstr(w, order[k].name);
            jsonw_key(w, "tags");
            if (order[k].set < 0) {
                jsonw_arr_begin(w);
                for (size_t i = 0; i < sizeof(intrinsic_tags) / sizeof(intrinsic_tags[0]); i++) {
                    jsonw_cstr(w, intrinsic_tags[i]);
                }
                jsonw_arr_end(w);
            } else {
                write_names(w, &t.sets[order[k].set]);
            }
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
    }
    write_metrics(w, &t.q);
    jsonw_obj_end(w);
    tagscan_close(&t);
    if (rc != 0) {
        rc = traces_err_msg(&t.q, err, errlen, rc);
    }
    return rc;
}

static bool rows_for_values(struct tagscan *t)
{
    const struct traceql_field *f = t->field;
    if (filtered(t)) {
        return true;
    }
    if (f->kind == TRACEQL_F_ATTR) {
        return f->scope != TRACEQL_SCOPE_RESOURCE && f->scope != TRACEQL_SCOPE_INSTRUMENTATION;
    }
    return f->intrinsic != TRACEQL_I_INSTR_NAME && f->intrinsic != TRACEQL_I_INSTR_VERSION;
}

int traces_tag_values(const struct traces_tags_req *rq, const char *tag, size_t tag_len,
                      struct jsonw *w, char *err, size_t errlen)
{
    struct traceql_field f;
    char name[512];
    if (rq->v2) {
        int prc = traceql_parse_identifier(tag, tag_len, &f, name, sizeof(name));
        if (prc < 0) {
            snprintf(err, errlen, "invalid tag: %.*s is not a TraceQL identifier",
                     (int)(tag_len > 200 ? 200 : tag_len), tag);
            return -EINVAL;
        }
    } else {
        /* v1: an unscoped attribute name, looked up on spans then resources */
        if (tag_len == 0 || tag_len >= sizeof(name)) {
            snprintf(err, errlen, "invalid tag name");
            return -EINVAL;
        }
        memcpy(name, tag, tag_len);
        name[tag_len] = '\0';
        f = (struct traceql_field){.kind = TRACEQL_F_ATTR,
                                   .type = TRACEQL_T_ANY,
                                   .scope = TRACEQL_SCOPE_ANY,
                                   .name = name,
                                   .name_len = tag_len};
    }
    struct tagscan t;
    int rc = tagscan_open(&t, rq);
    if (rc < 0) {
        traces_set_err(err, errlen, rc);
        return rc;
    }
    t.field = &f;
    bool fixed = false;
    static const char *const kinds[] = {"client",   "consumer", "internal",
                                        "producer", "server",   "unspecified"};
    static const char *const statuses[] = {"error", "ok", "unset"};
    if (f.kind == TRACEQL_F_INTRINSIC) {
        switch (f.intrinsic) {
        case TRACEQL_I_STATUS:
        case TRACEQL_I_KIND:
        case TRACEQL_I_DURATION:
        case TRACEQL_I_TRACE_DURATION:
        case TRACEQL_I_EVENT_TIME_SINCE_START:
        case TRACEQL_I_SPAN_ID:
        case TRACEQL_I_PARENT_ID:
        case TRACEQL_I_TRACE_ID:
        case TRACEQL_I_LINK_SPAN_ID:
        case TRACEQL_I_LINK_TRACE_ID:
        case TRACEQL_I_CHILD_COUNT:
            fixed = true; /* fixed lists, or nothing worth listing */
            break;
        default:
            break;
        }
    }
    if (!fixed) {
        t.want |= traces_field_tables(&f);
        bool rows = rows_for_values(&t);
        rc = tag_walk(&t, !rows, rows_for_values);
    }
    if (rc != 0) {
        rc = traces_err_msg(&t.q, err, errlen, rc);
        tagscan_close(&t);
        return rc;
    }
    jsonw_obj_begin(w);
    jsonw_key(w, "tagValues");
    jsonw_arr_begin(w);
    if (fixed) {
        const char *const *list = NULL;
        size_t n = 0;
        if (f.intrinsic == TRACEQL_I_STATUS) {
            list = statuses;
            n = 3;
        } else if (f.intrinsic == TRACEQL_I_KIND) {
            list = kinds;
            n = 6;
        }
        for (size_t i = 0; i < n; i++) {
            if (rq->v2) {
                jsonw_obj_begin(w);
                jsonw_key(w, "type");
                jsonw_cstr(w, "keyword");
                jsonw_key(w, "value");
                jsonw_cstr(w, list[i]);
                jsonw_obj_end(w);
            } else {
                jsonw_cstr(w, list[i]);
            }
        }
    } else {
        size_t n = strset_sorted(&t.sets[0]);
        for (size_t i = 0; i < n; i++) {
            const struct sentry *x = &t.sets[0].v[i];
            if (rq->v2) {
                jsonw_obj_begin(w);
                jsonw_key(w, "type");
                jsonw_cstr(w, x->type < sizeof(type_names) / sizeof(type_names[0]) &&
                                      type_names[x->type] != NULL
                                  ? type_names[x->type]
                                  : "string");
                jsonw_key(w, "value");
                jsonw_str(w, x->s, x->n);
                jsonw_obj_end(w);
            } else {
                jsonw_str(w, x->s, x->n);
            }
        }
    }
    jsonw_arr_end(w);
    write_metrics(w, &t.q);
    jsonw_obj_end(w);
    tagscan_close(&t);
    return 0;
}
