/*
 * logs_plan.c - planning and scanning: the candidate sources of a scan
 * (zone map, blooms, resource dictionary), the scan of one source on the
 * query context's row cursor (query/qctx.h), and what a scan must read
 * (see logs_int.h).
 */
#include "query/logs_int.h"

#define ROW_CHECK 1024 /* rows between two qctx_rows of a scan */

/* ---- planning ------------------------------------------------------------- */

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

/* false: the body gram bloom says no line of |b| passes stage |ss|. */
static bool substage_may_match(const blk *b, const struct logql_substage *ss)
{
    for (size_t a = 0; a < ss->n_alts; a++) {
        const struct logql_subalt *alt = &ss->alts[a];
        bool may = true;
        for (size_t k = 0; k < alt->n_lits && may; k++) {
            may = blk_may_have_substr(b, alt->lits[k].s, alt->lits[k].n);
        }
        if (may) {
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

void logs_scan_fini(struct scan *s)
{
    for (size_t i = 0; i < s->n_srcs; i++) {
        logs_smap_free_samples(&s->srcs[i].m);
        src_fini(&s->srcs[i]);
        logs_smap_free(&s->srcs[i].m);
    }
    free(s->srcs);
    s->srcs = NULL;
    s->n_srcs = 0;
}

/* Candidate sources for [s->lo, s->hi). */
int logs_scan_plan(struct scan *s)
{
    struct query *q = s->q;
    size_t cap = 0;
    size_t n_needles = 0;
    const struct logql_str *needles = logql_log_needles(s->log, &n_needles);
    size_t n_subs = 0;
    const struct logql_substage *subs = logql_log_substrs(s->log, &n_subs);
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
        for (size_t k = 0; k < n_subs && !skip; k++) {
            skip = !substage_may_match(qs->b, &subs[k]);
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
        if (logs_src_rinfo_all(src, s->log) < 0) {
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

/* ---- scanning ------------------------------------------------------------- */

int logs_rctx_init(struct rctx *c, struct scan *s, struct src *src)
{
    memset(c, 0, sizeof(*c));
    c->s = s;
    c->src = src;
    c->scratch = arena_new(64 << 10);
    return c->scratch ? 0 : -ENOMEM;
}

void logs_rctx_fini(struct rctx *c)
{
    arena_free(c->scratch);
    sb_fini(&c->sb);
    free(c->l.a);
    free(c->idx.slot);
    free(c->eidx.slot);
}

int logs_cand_cmp_fwd(const void *a, const void *b)
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

int logs_cand_cmp_bwd(const void *a, const void *b)
{
    return logs_cand_cmp_fwd(b, a);
}

static void src_trim(struct scan *s, struct src *src)
{
    if (src->n_c <= s->limit) {
        return;
    }
    qsort(src->c, src->n_c, sizeof(*src->c), s->forward ? logs_cand_cmp_fwd : logs_cand_cmp_bwd);
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

/* Evaluates row |i| of |qs|, read into |*v| (without its body when
 * s->n_pre > 0: the leading label filters decide first, and only a row
 * they keep has its body read). true: it matched. *rc: a read's error. */
static bool eval_row(struct scan *s, struct rctx *c, const struct qctx_src *qs, uint64_t i,
                     struct log_view *v, uint64_t ts, int *rc)
{
    if (s->n_pre == 0) {
        return logs_eval_row(c, v, ts);
    }
    int pre = logs_eval_pre(c, v, ts);
    if (pre == 0 || (*rc = qctx_read_log_body(qs, i, v)) < 0) {
        return false;
    }
    return pre == 1 ? logs_eval_rest(c, v) : logs_eval_row(c, v, ts);
}

/* Evaluates the rows of |src| in [s->lo, s->hi): every match goes to
 * |on_match|. */
void logs_scan_src_run(struct scan *s, struct src *src, row_fn on_match)
{
    struct query *q = s->q;
    struct qctx_src *qs = src->qs;
    struct rctx c;
    if (logs_rctx_init(&c, s, src) < 0) {
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
        unsigned want = s->n_pre > 0 ? s->want | BLK_NOBODY : s->want;
        int rc = qctx_load(&q->c, qs, want);
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
            rc = qctx_read_log(qs, i, want, &v);
            bool match = rc == 0 && eval_row(s, &c, qs, i, &v, times[i], &rc);
            if (rc == -EBADMSG) {
                qctx_src_fail(&q->c, qs, qctx_scan_left(&it));
                break;
            }
            if (rc == -ENOMEM) {
                qctx_fail(&q->c, -ENOMEM, "out of memory reading a block");
                break;
            }
            if (match && !on_match(&c, i)) {
                break;
            }
            if (c.err < 0 || c.l.oom || c.sb.oom) {
                qctx_fail(&q->c, -ENOMEM, "out of memory");
                break;
            }
        }
    } else {
        if (logs_src_rinfo_all(src, s->log) < 0) {
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
            int rc = 0;
            if (eval_row(s, &c, qs, i, &v, ts, &rc) && !on_match(&c, i)) {
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
    logs_rctx_fini(&c);
}

void logs_scan_item_log(void *arg, size_t i)
{
    struct scan *s = arg;
    if (qctx_err(&s->q->c)) {
        return;
    }
    logs_scan_src_run(s, &s->srcs[i], on_log_match);
    /* Candidates are (time, source, row): pass 2 loads the block again. */
    qctx_done(&s->q->c, s->srcs[i].qs);
}

void logs_scan_item_metric(void *arg, size_t i)
{
    struct scan *s = arg;
    if (qctx_err(&s->q->c)) {
        return;
    }
    logs_scan_src_run(s, &s->srcs[i], logs_on_metric_match);
    qctx_done(&s->q->c, s->srcs[i].qs); /* the series copied what they keep */
}

/* ---- what a scan must read ------------------------------------------------ */

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
void logs_plan_needs(struct scan *s, bool all)
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
    s->n_pre = 0;
    while (s->n_pre < log->n_stages && log->stages[s->n_pre].kind == LOGQL_STAGE_LABEL_FILTER) {
        s->n_pre++;
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
        if (lf->kind == LOGQL_LF_IP && logql_ip_match(&lf->ip, "::1", 3) < 0) {
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
int logs_check_log(const struct logql_log *log, char *err, size_t errlen)
{
    for (size_t i = 0; i < log->n_stages; i++) {
        const struct logql_stage *st = &log->stages[i];
        switch (st->kind) {
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
