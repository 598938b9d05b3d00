/*
 * prom.c - the Prometheus HTTP API routes (see prom.h; PROMQL.md A).
 *
 * Parameters are read the way Prometheus 2.42's web/api/v1/api.go reads
 * them: FormValue semantics (a value from the form body wins over the URL's,
 * "" is the same as absent), the checks in Prometheus's order, and its
 * error texts with their "invalid parameter" prefixes exactly where
 * Prometheus adds them (an instant query's parse error has it, a range
 * query's does not). Everything that needs no data is decided here on the
 * I/O thread; the rest becomes a qhttp job, answered by qhttp's table in
 * the Prometheus column ({"status":"error","errorType":..,"error":..}).
 *
 * A job, on a worker: an arena charged to the query (--query-memory), a qctx snapshot
 * of the metrics signal with the runner's limits (and the deadline of the
 * `timeout` parameter when it is sooner), a pmsrc over it, then pm_eval
 * or the pmsrc call the endpoint needs, and the whole answer rendered in
 * one piece.
 *
 * Not taken from 2.42 on purpose: a step under one millisecond (which
 * 2.42's engine turns into a zero interval and then loops or answers an
 * instant vector) is refused like a zero step; GET and POST are accepted on
 * every endpoint (2.42 answers 405 to a POST on label values; Grafana's
 * client retries such a POST as a GET anyway). `lookback_delta` and `limit`
 * on series/labels are later than 2.42 and ignored as 2.42 ignores them.
 */
#include "server/prom.h"
#include "server/promcheck.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "lib/clock.h"
#include "lib/jsonw.h"
#include "query/pmeval.h"
#include "query/pmsrc.h"
#include "query/promql.h"
#include "query/qctx.h"
#include "server/config.h"
#include "server/http1.h"
#include "server/prom_params.h"
#include "server/prom_render.h"
#include "server/qhttp.h"

#define MAX_POINTS 11000
#define MAX_SELS QHTTP_MAX_PARAMS
#define ARENA_CHUNK (64u << 10)

/* ---- counters for /metrics ------------------------------------------------------ */

static uint64_t n_series_selected, n_samples_selected, n_points_scanned;

static void bump(uint64_t *c, uint64_t v)
{
    __atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

/* ---- parameters: Go's FormValue over the body and the URL ------------------------ */

struct preq {
    struct qhttp_params body, url; /* body values first, as Go's r.Form has them */
};

static int preq_parse(struct preq *p, struct http1_req *r)
{
    size_t blen = 0;
    const void *body = http1_req_body(r, &blen);
    const char *ct = http1_req_header(r, "Content-Type");
    bool form = strcmp(http1_req_method(r), "POST") == 0 && blen > 0 &&
                (ct == NULL || strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0);
    if (qhttp_params_parse(&p->body, "", form ? body : NULL, blen) < 0) {
        return -ENOMEM;
    }
    if (qhttp_params_parse(&p->url, http1_req_query(r), NULL, 0) < 0) {
        qhttp_params_fini(&p->body);
        return -ENOMEM;
    }
    return 0;
}

static void preq_fini(struct preq *p)
{
    qhttp_params_fini(&p->body);
    qhttp_params_fini(&p->url);
}

/* r.FormValue(name): the first value, body before URL; NULL for "" or absent. */
static const char *fv(const struct preq *p, const char *name, size_t *len)
{
    size_t n = 0;
    const char *v = qhttp_param(&p->body, name, &n);
    if (v == NULL) {
        v = qhttp_param(&p->url, name, &n);
    }
    if (v == NULL || n == 0) {
        *len = 0;
        return NULL;
    }
    *len = n;
    return v;
}

/* r.Form[name]: the |i|th value (body values first), or NULL past the end. */
static const char *form_at(const struct preq *p, const char *name, size_t i, size_t *len)
{
    const struct qhttp_params *sets[2] = {&p->body, &p->url};
    size_t nl = strlen(name);
    for (int k = 0; k < 2; k++) {
        const struct qhttp_params *ps = sets[k];
        for (size_t j = 0; j < ps->n; j++) {
            if (ps->name_len[j] == nl && memcmp(ps->name[j], name, nl) == 0 && i-- == 0) {
                *len = ps->value_len[j];
                return ps->value[j];
            }
        }
    }
    return NULL;
}

/* ---- jobs ----------------------------------------------------------------------- */

enum pkind {
    PK_QUERY,
    PK_RANGE,
    PK_SERIES,
    PK_LABELS,
    PK_VALUES,
    PK_METADATA,
    PK_EXEMPLARS,
};

struct pjob {
    struct qhttp_job q; /* first */
    enum pkind kind;
    struct promql_expr *expr;           /* query, query_range, query_exemplars */
    struct promql_expr *sels[MAX_SELS]; /* match[] */
    size_t n_sels;
    int64_t start_ms, end_ms, step_ms; /* instant: start == end, step 0 */
    uint64_t deadline_ns;              /* the runner's, or the timeout parameter's */
    char *name;                        /* label values: the label; metadata: the metric */
    size_t name_len;
    int64_t limit; /* metadata; -1: none */
};

static struct pjob *job_of(struct qhttp_job *q)
{
    return (struct pjob *)q;
}

/* Any thread. */
static void job_free(struct qhttp_job *q)
{
    struct pjob *j = job_of(q);
    promql_free(j->expr);
    for (size_t i = 0; i < j->n_sels; i++) {
        promql_free(j->sels[i]);
    }
    free(j->name);
    free(j);
}

/* What one job holds while it runs. */
struct run {
    arena *a;
    struct qctx qc;
    bool have_qc;
    struct pmsrc *src;
    uint64_t series, samples; /* selected through pm_source */
};

static int sel_count(void *ctx, const struct promql_matcher *m, size_t n, int64_t mint_ms,
                     int64_t maxt_ms, struct pm_set *out)
{
    struct run *st = ctx;
    int rc = pmsrc_select(st->src, m, n, mint_ms, maxt_ms, out);
    if (rc == 0) {
        st->series += out->n;
        for (size_t i = 0; i < out->n; i++) {
            st->samples += out->s[i].nf + out->s[i].nh;
        }
    }
    return rc;
}

static int run_open(struct pjob *j, struct run *st)
{
    const struct qhttp_limits *l = qhttp_limits();
    st->a = arena_new(ARENA_CHUNK);
    if (st->a == NULL) {
        return -ENOMEM;
    }
    struct qctx_limits lim = {.max_rows = l->max_rows,
                              .max_memory = l->max_memory,
                              .deadline_ns = j->deadline_ns,
                              .cancel = &j->q.cancel};
    if (qctx_open(&st->qc, SIG_METRICS, &lim, "points") < 0) {
        return -ENOMEM;
    }
    st->have_qc = true;
    /* binds st->a to the qctx: the evaluator's values and the source's
     * series are charged to the query, chunk by chunk, as they grow */
    return pmsrc_open(&st->src, &st->qc, st->a);
}

static void run_close(struct run *st)
{
    if (st->src != NULL) {
        pmsrc_close(st->src);
        promcheck_reads();
    }
    arena_free(st->a); /* uncharges its chunks from the qctx: before it closes */
    st->a = NULL;
    if (st->have_qc) {
        qstats_scan_add(&st->qc.st);
        bump(&n_points_scanned, __atomic_load_n(&st->qc.rows, __ATOMIC_RELAXED));
        qctx_close(&st->qc);
    }
    bump(&n_series_selected, st->series);
    bump(&n_samples_selected, st->samples);
}

/* The message of a failed run: Prometheus's words for a deadline or a
 * cancel, else the callee's (|msg|), else the qctx's. */
static int failed(struct run *st, int rc, const char *msg, struct qhttp_answer *a)
{
    int qerr = st->have_qc ? qctx_err(&st->qc) : 0;
    if (rc == -ETIMEDOUT) {
        snprintf(a->err, sizeof(a->err), "query timed out in expression evaluation");
    } else if (rc == -ECANCELED) {
        snprintf(a->err, sizeof(a->err), "query was canceled in expression evaluation");
    } else if (rc == -ENOMEM && qerr == rc && qctx_message(&st->qc)[0] != '\0') {
        /* a memory limit's words over the allocation failure it caused */
        snprintf(a->err, sizeof(a->err), "%s", qctx_message(&st->qc));
    } else if (msg != NULL && msg[0] != '\0') {
        snprintf(a->err, sizeof(a->err), "%s", msg);
    } else if (qerr == rc && qctx_message(&st->qc)[0] != '\0') {
        snprintf(a->err, sizeof(a->err), "%s", qctx_message(&st->qc));
    } else if (rc == -ENOMEM) {
        snprintf(a->err, sizeof(a->err),
                 "the query needs more than %" PRIu64 " bytes of memory (--query-memory)",
                 qhttp_limits()->max_memory);
    }
    /* the open queries' bound: 503 + Retry-After, not the per-query 422 */
    return st->have_qc && qerr == rc ? qctx_answer_rc(&st->qc, rc) : rc;
}

/* The warnings of the result and of the qctx (a quarantined block). */
static size_t collect_warnings(struct run *st, const char *const *extra, const char ***out)
{
    size_t n = 0;
    for (const char *const *w = extra; w != NULL && *w != NULL; w++) {
        n++;
    }
    for (struct qctx_warning *w = st->qc.warnings; w != NULL; w = w->next) {
        n++;
    }
    *out = NULL;
    if (n == 0) {
        return 0;
    }
    const char **v = arena_alloc(st->a, n * sizeof(*v));
    if (v == NULL) {
        return 0;
    }
    size_t k = 0;
    for (const char *const *w = extra; w != NULL && *w != NULL; w++) {
        v[k++] = *w;
    }
    for (struct qctx_warning *w = st->qc.warnings; w != NULL; w = w->next) {
        v[k++] = w->msg;
    }
    *out = v;
    return k;
}

static int run_query(struct pjob *j, struct run *st, struct jsonw *w, struct qhttp_answer *a)
{
    struct pm_eval_opts o = {.start_ms = j->start_ms,
                             .end_ms = j->end_ms,
                             .step_ms = j->step_ms,
                             .lookback_ms = PM_DEFAULT_LOOKBACK_MS,
                             .max_samples = PM_DEFAULT_MAX_SAMPLES,
                             .q = &st->qc};
    struct pm_source src = {.ctx = st, .select = sel_count};
    struct pm_result res;
    char err[512] = "";
    int rc = qctx_check(&st->qc); /* a timeout parameter already past */
    if (rc == 0) {
        rc = pm_eval(j->expr, &o, &src, st->a, &res, err, sizeof(err));
    }
    if (rc < 0) {
        return failed(st, rc, err, a);
    }
    const char **warn;
    size_t nw = collect_warnings(st, res.warnings, &warn);
    prom_render_begin(w);
    prom_render_result(w, &res);
    prom_render_end(w, warn, nw);
    return 0;
}

/* The series of every match[] set (OR-ed), sorted by labels, each once;
 * every series with a sample in range when there are no sets. */
static int select_series(struct pjob *j, struct run *st, struct pm_set *out)
{
    if (j->n_sels == 0) {
        return pmsrc_series(st->src, NULL, 0, j->start_ms, j->end_ms, out);
    }
    if (j->n_sels == 1) {
        const struct promql_sel *s = &j->sels[0]->sel;
        return pmsrc_series(st->src, s->matchers, s->n_matchers, j->start_ms, j->end_ms, out);
    }
    struct pm_set parts[MAX_SELS];
    size_t total = 0;
    for (size_t i = 0; i < j->n_sels; i++) {
        const struct promql_sel *s = &j->sels[i]->sel;
        int rc =
            pmsrc_series(st->src, s->matchers, s->n_matchers, j->start_ms, j->end_ms, &parts[i]);
        if (rc < 0) {
            return rc;
        }
        total += parts[i].n;
    }
    out->n = 0;
    out->s = arena_alloc(st->a, (total ? total : 1) * sizeof(*out->s));
    if (out->s == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < j->n_sels; i++) {
        memcpy(out->s + out->n, parts[i].s, parts[i].n * sizeof(*out->s));
        out->n += parts[i].n;
    }
    pm_set_sort(out);
    size_t k = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (k == 0 || !pm_labels_equal(&out->s[k - 1].labels, &out->s[i].labels)) {
            out->s[k++] = out->s[i];
        }
    }
    out->n = k;
    return 0;
}

struct strv {
    const char *s;
    uint32_t n;
};

static int strv_cmp(const void *pa, const void *pb)
{
    const struct strv *a = pa, *b = pb;
    int c = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
    return c != 0 ? c : (a->n > b->n) - (a->n < b->n);
}

/* Label names (|name| NULL) or the values of |name|, sorted, each once. */
static int run_labels(struct pjob *j, struct run *st, struct jsonw *w)
{
    if (j->n_sels == 0) { /* no match[]: the blocks' label indexes answer */
        struct pmsrc_str *sv;
        size_t ns;
        int rc =
            pmsrc_label_values(st->src, j->name, j->name_len, j->start_ms, j->end_ms, &sv, &ns);
        if (rc < 0) {
            return rc;
        }
        const char **warn;
        size_t nw = collect_warnings(st, NULL, &warn);
        prom_render_begin(w);
        jsonw_arr_begin(w);
        for (size_t i = 0; i < ns; i++) {
            jsonw_str(w, sv[i].s, sv[i].n);
        }
        jsonw_arr_end(w);
        prom_render_end(w, warn, nw);
        return 0;
    }
    struct pm_set set;
    int rc = select_series(j, st, &set);
    if (rc < 0) {
        return rc;
    }
    size_t cap = 0;
    for (size_t i = 0; i < set.n; i++) {
        cap += j->name != NULL ? 1 : set.s[i].labels.n;
    }
    struct strv *v = arena_alloc(st->a, (cap ? cap : 1) * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < set.n; i++) {
        const struct pm_labels *ls = &set.s[i].labels;
        if (j->name != NULL) {
            uint32_t len;
            const char *val = pm_labels_get(ls, j->name, j->name_len, &len);
            if (val != NULL) {
                v[n++] = (struct strv){val, len};
            }
            continue;
        }
        for (uint32_t k = 0; k < ls->n; k++) {
            v[n++] = (struct strv){ls->v[k].name, ls->v[k].name_len};
        }
    }
    qsort(v, n, sizeof(*v), strv_cmp);
    const char **warn;
    size_t nw = collect_warnings(st, NULL, &warn);
    prom_render_begin(w);
    jsonw_arr_begin(w);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strv_cmp(&v[i - 1], &v[i]) != 0) {
            jsonw_str(w, v[i].s, v[i].n);
        }
    }
    jsonw_arr_end(w);
    prom_render_end(w, warn, nw);
    return 0;
}

static int run_series(struct pjob *j, struct run *st, struct jsonw *w)
{
    struct pm_set set;
    int rc = select_series(j, st, &set);
    if (rc < 0) {
        return rc;
    }
    const char **warn;
    size_t nw = collect_warnings(st, NULL, &warn);
    prom_render_begin(w);
    jsonw_arr_begin(w);
    for (size_t i = 0; i < set.n; i++) {
        prom_render_labels(w, &set.s[i].labels);
    }
    jsonw_arr_end(w);
    prom_render_end(w, warn, nw);
    return 0;
}

static int run_metadata(struct pjob *j, struct run *st, struct jsonw *w)
{
    struct pm_meta *m;
    size_t n;
    int rc = pmsrc_metadata(st->src, j->name, j->name_len, &m, &n);
    if (rc < 0) {
        return rc;
    }
    prom_render_begin(w);
    jsonw_obj_begin(w);
    int64_t groups = 0;
    for (size_t i = 0; i < n;) {
        if (j->limit >= 0 && groups >= j->limit) {
            break;
        }
        groups++;
        jsonw_key(w, m[i].name);
        jsonw_arr_begin(w);
        size_t k = i;
        for (; k < n && strcmp(m[k].name, m[i].name) == 0; k++) {
            jsonw_obj_begin(w);
            jsonw_key(w, "type");
            jsonw_cstr(w, m[k].type);
            jsonw_key(w, "help");
            jsonw_cstr(w, m[k].help);
            jsonw_key(w, "unit");
            jsonw_cstr(w, m[k].unit);
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
        i = k;
    }
    jsonw_obj_end(w);
    prom_render_end(w, NULL, 0);
    return 0;
}

/* The vector selectors of |e| (parser.ExtractSelectors). */
static void extract_selectors(const struct promql_expr *e, const struct promql_sel **out, size_t *n,
                              size_t cap)
{
    if (e == NULL) {
        return;
    }
    switch (e->kind) {
    case PROMQL_VECTOR:
        if (*n < cap) {
            out[(*n)++] = &e->sel;
        }
        return;
    case PROMQL_CALL:
        for (size_t i = 0; i < e->n_args; i++) {
            extract_selectors(e->args[i], out, n, cap);
        }
        return;
    case PROMQL_AGG:
        extract_selectors(e->param, out, n, cap);
        extract_selectors(e->inner, out, n, cap);
        return;
    case PROMQL_BINARY:
        extract_selectors(e->lhs, out, n, cap);
        extract_selectors(e->rhs, out, n, cap);
        return;
    case PROMQL_MATRIX:
    case PROMQL_SUBQUERY:
    case PROMQL_UNARY:
    case PROMQL_PAREN:
        extract_selectors(e->inner, out, n, cap);
        return;
    default:
        return;
    }
}

#define MAX_EXEMPLAR_SELS 256

static int ex_cmp(const void *pa, const void *pb)
{
    const struct pm_exemplar_series *a = pa, *b = pb;
    return pm_labels_cmp(&a->series, &b->series);
}

static int run_exemplars(struct pjob *j, struct run *st, struct jsonw *w)
{
    const struct promql_sel *sels[MAX_EXEMPLAR_SELS];
    size_t ns = 0;
    extract_selectors(j->expr, sels, &ns, MAX_EXEMPLAR_SELS);
    struct pm_exemplar_series *all = NULL;
    size_t n = 0;
    for (size_t i = 0; i < ns; i++) {
        struct pm_exemplar_series *es;
        size_t k;
        int rc = pmsrc_exemplars(st->src, sels[i]->matchers, sels[i]->n_matchers, j->start_ms,
                                 j->end_ms, &es, &k);
        if (rc < 0) {
            return rc;
        }
        if (ns == 1 || k == 0) {
            if (n == 0) {
                all = es;
                n = k;
                continue;
            }
        }
        struct pm_exemplar_series *m = arena_alloc(st->a, (n + k + 1) * sizeof(*m));
        if (m == NULL) {
            return -ENOMEM;
        }
        if (n > 0) {
            memcpy(m, all, n * sizeof(*m));
        }
        memcpy(m + n, es, k * sizeof(*m));
        all = m;
        n += k;
    }
    if (ns > 1 && n > 1) {
        /* a series matched by two selectors is answered once */
        qsort(all, n, sizeof(*all), ex_cmp);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (k == 0 || !pm_labels_equal(&all[k - 1].series, &all[i].series)) {
                all[k++] = all[i];
            }
        }
        n = k;
    }
    prom_render_begin(w);
    prom_render_exemplars(w, all, n);
    prom_render_end(w, NULL, 0);
    return 0;
}

/* Worker. */
static int job_run(struct qhttp_job *q, struct qhttp_answer *a)
{
    struct pjob *j = job_of(q);
    struct run st = {0};
    struct jsonw w;
    prom_jsonw_init(&w, a->body);
    (void)qlex_re_take_limit_hit(); /* a note left by an earlier request on this thread */
    int rc = run_open(j, &st);
    if (rc == 0) {
        switch (j->kind) {
        case PK_QUERY:
        case PK_RANGE:
            rc = run_query(j, &st, &w, a);
            break;
        case PK_SERIES:
            rc = run_series(j, &st, &w);
            break;
        case PK_LABELS:
        case PK_VALUES:
            rc = run_labels(j, &st, &w);
            break;
        case PK_METADATA:
            rc = run_metadata(j, &st, &w);
            break;
        case PK_EXEMPLARS:
            rc = run_exemplars(j, &st, &w);
            break;
        }
    }
    if (rc == 0 && w.err < 0) {
        rc = -ENOMEM;
        snprintf(a->err, sizeof(a->err), "out of memory rendering the answer");
    }
    if (rc < 0 && a->err[0] == '\0') {
        failed(&st, rc, NULL, a);
    }
    run_close(&st);
    return rc < 0 ? rc : 0;
}

static void prom_error_body(struct evbuffer *b, const struct qhttp_error *e, const char *msg)
{
    prom_render_error(b, e->type, msg);
}

static const struct qhttp_dialect prom_dialect = {
    .api = QHTTP_PROM,
    .timeout_msg = "query timed out in expression evaluation",
    .error_ctype = "application/json",
    .error_body = prom_error_body,
};

static const struct qhttp_ops prom_ops = {
    .dialect = &prom_dialect,
    .run = job_run,
    .more = NULL,
    .free = job_free,
};

/* ---- parameter checks (I/O thread) ----------------------------------------------- */

/* Reads |j|'s parameters: 0, 1 (answered already: no job to run), or
 * -EINVAL with the 400's text in |err|. */
typedef int (*args_fn)(struct pjob *j, const struct preq *p, struct http1_req *r, char *err,
                       size_t errlen);

static int bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* parseTimeParam: |def| when absent. */
static int time_param(const struct preq *p, const char *name, int64_t def, int64_t *ms,
                      struct prom_time *t, char *err, size_t errlen)
{
    size_t n;
    const char *v = fv(p, name, &n);
    if (v == NULL) {
        *ms = def;
        if (t != NULL) {
            *t = prom_time_of_ms(def);
        }
        return 0;
    }
    struct prom_time pt;
    if (prom_parse_time(v, n, &pt) < 0) {
        char q[300];
        prom_go_quote(v, n, q, sizeof(q));
        return bad(err, errlen,
                   "invalid parameter \"%s\": Invalid time value for '%s': cannot parse %s to a "
                   "valid timestamp",
                   name, name, q);
    }
    *ms = prom_time_ms(&pt);
    if (t != NULL) {
        *t = pt;
    }
    return 0;
}

/* The `timeout` parameter: a deadline sooner than the runner's. */
static int timeout_param(struct pjob *j, const struct preq *p, char *err, size_t errlen)
{
    size_t n;
    const char *v = fv(p, "timeout", &n);
    j->deadline_ns = qhttp_deadline_ns(&j->q);
    if (v == NULL) {
        return 0;
    }
    int64_t ns;
    char e[400];
    if (prom_parse_duration(v, n, &ns, e, sizeof(e)) < 0) {
        return bad(err, errlen, "invalid parameter \"timeout\": %s", e);
    }
    /* context.WithTimeout: zero or negative is already past */
    uint64_t d = j->q.t0 + (ns > 0 ? (uint64_t)ns : 0);
    if (ns > 0 && d < j->q.t0) {
        d = UINT64_MAX;
    }
    if (j->deadline_ns == 0 || d < j->deadline_ns) {
        j->deadline_ns = d;
    }
    return 0;
}

static int parse_query(struct pjob *j, const struct preq *p, bool prefix, char *err, size_t errlen)
{
    size_t n;
    const char *q = fv(p, "query", &n);
    char e[480];
    if (promql_parse(q != NULL ? q : "", n, &j->expr, e, sizeof(e)) < 0) {
        return prefix ? bad(err, errlen, "invalid parameter \"query\": %s", e)
                      : bad(err, errlen, "%s", e);
    }
    return 0;
}

static int query_args(struct pjob *j, const struct preq *p, struct http1_req *r, char *err,
                      size_t errlen)
{
    (void)r;
    int64_t now = (int64_t)(clock_wall_ns() / 1000000u), t;
    if (time_param(p, "time", now, &t, NULL, err, errlen) < 0 ||
        timeout_param(j, p, err, errlen) < 0 || parse_query(j, p, true, err, errlen) < 0) {
        return -EINVAL;
    }
    j->start_ms = j->end_ms = t;
    return 0;
}

static int range_time(const struct preq *p, const char *name, struct prom_time *t, char *err,
                      size_t errlen)
{
    size_t n;
    const char *v = fv(p, name, &n);
    if (v == NULL || prom_parse_time(v, n, t) < 0) {
        char q[300];
        prom_go_quote(v != NULL ? v : "", n, q, sizeof(q));
        return bad(err, errlen, "invalid parameter \"%s\": cannot parse %s to a valid timestamp",
                   name, q);
    }
    return 0;
}

static int range_args(struct pjob *j, const struct preq *p, struct http1_req *r, char *err,
                      size_t errlen)
{
    (void)r;
    struct prom_time start, end;
    if (range_time(p, "start", &start, err, errlen) < 0 ||
        range_time(p, "end", &end, err, errlen) < 0) {
        return -EINVAL;
    }
    if (prom_time_before(&end, &start)) {
        return bad(err, errlen,
                   "invalid parameter \"end\": end timestamp must not be before start time");
    }
    size_t n;
    const char *v = fv(p, "step", &n);
    int64_t step;
    char e[400];
    if (prom_parse_duration(v != NULL ? v : "", n, &step, e, sizeof(e)) < 0) {
        return bad(err, errlen, "invalid parameter \"step\": %s", e);
    }
    /* below 1 ms the engine's interval would be 0 (see the top) */
    if (step < 1000000) {
        return bad(err, errlen,
                   "invalid parameter \"step\": zero or negative query resolution step widths "
                   "are not accepted. Try a positive integer");
    }
    if (prom_time_sub_ns(&end, &start) / step > MAX_POINTS) {
        return bad(err, errlen,
                   "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing "
                   "the query resolution (?step=XX)");
    }
    if (timeout_param(j, p, err, errlen) < 0 || parse_query(j, p, false, err, errlen) < 0) {
        return -EINVAL;
    }
    if (j->expr->type != PROMQL_TYPE_VECTOR && j->expr->type != PROMQL_TYPE_SCALAR) {
        return bad(err, errlen,
                   "invalid expression type \"%s\" for range query, must be Scalar or instant "
                   "Vector",
                   promql_type_name(j->expr->type));
    }
    j->start_ms = prom_time_ms(&start);
    j->end_ms = prom_time_ms(&end);
    j->step_ms = step / 1000000;
    return 0;
}

/* parseMatchersParam over r.Form["match[]"]; |prefix|: the series
 * endpoint's "invalid parameter" prefix. */
static int matchers_param(struct pjob *j, const struct preq *p, bool prefix, char *err,
                          size_t errlen)
{
    const char *pre = prefix ? "invalid parameter \"match[]\": " : "";
    size_t n;
    const char *v;
    for (size_t i = 0; (v = form_at(p, "match[]", i, &n)) != NULL; i++) {
        char e[480];
        if (j->n_sels == MAX_SELS) {
            return bad(err, errlen, "%stoo many match[] parameters", pre);
        }
        if (promql_parse_selector(v, n, &j->sels[j->n_sels], e, sizeof(e)) < 0) {
            return bad(err, errlen, "%s%s", pre, e);
        }
        j->n_sels++;
    }
    for (size_t i = 0; i < j->n_sels; i++) {
        const struct promql_sel *s = &j->sels[i]->sel;
        bool ok = false;
        for (size_t k = 0; k < s->n_matchers && !ok; k++) {
            ok = !promql_matcher_matches(&s->matchers[k], "", 0);
        }
        if (!ok) {
            return bad(err, errlen, "%smatch[] must contain at least one non-empty matcher", pre);
        }
    }
    return 0;
}

static int series_args(struct pjob *j, const struct preq *p, struct http1_req *r, char *err,
                       size_t errlen)
{
    (void)r;
    size_t n;
    if (form_at(p, "match[]", 0, &n) == NULL) {
        return bad(err, errlen, "no match[] parameter provided");
    }
    if (time_param(p, "start", PROM_MIN_TIME_MS, &j->start_ms, NULL, err, errlen) < 0 ||
        time_param(p, "end", PROM_MAX_TIME_MS, &j->end_ms, NULL, err, errlen) < 0 ||
        matchers_param(j, p, true, err, errlen) < 0) {
        return -EINVAL;
    }
    return 0;
}

static int labels_args(struct pjob *j, const struct preq *p, struct http1_req *r, char *err,
                       size_t errlen)
{
    (void)r;
    if (time_param(p, "start", PROM_MIN_TIME_MS, &j->start_ms, NULL, err, errlen) < 0 ||
        time_param(p, "end", PROM_MAX_TIME_MS, &j->end_ms, NULL, err, errlen) < 0 ||
        matchers_param(j, p, false, err, errlen) < 0) {
        return -EINVAL;
    }
    return 0;
}

static const char VALUES_PRE[] = "/api/v1/label/";
static const char VALUES_POST[] = "/values";

static int values_args(struct pjob *j, const struct preq *p, struct http1_req *r, char *err,
                       size_t errlen)
{
    const char *path = http1_req_path(r) + sizeof(VALUES_PRE) - 1;
    size_t pl = strlen(path);
    j->name = malloc(pl + 1);
    if (j->name == NULL) {
        return -ENOBUFS;
    }
    memcpy(j->name, path, pl + 1);
    size_t n = qhttp_url_decode(j->name, pl, false);
    size_t tail = sizeof(VALUES_POST) - 1;
    if (n <= tail || memcmp(j->name + n - tail, VALUES_POST, tail) != 0 ||
        memchr(j->name, '/', n - tail) != NULL) {
        return -ENOENT; /* not a route of Prometheus's */
    }
    n -= tail;
    j->name[n] = '\0';
    j->name_len = n;
    if (!prom_label_name_valid(j->name, n)) {
        char q[300];
        prom_go_quote(j->name, n, q, sizeof(q));
        return bad(err, errlen, "invalid label name: %s", q);
    }
    return labels_args(j, p, r, err, errlen);
}

static int metadata_args(struct pjob *j, const struct preq *p, struct http1_req *r, char *err,
                         size_t errlen)
{
    (void)r;
    size_t n;
    const char *v = fv(p, "limit", &n);
    j->limit = -1;
    if (v != NULL && prom_parse_int(v, n, &j->limit) < 0) {
        return bad(err, errlen, "limit must be a number");
    }
    if ((v = fv(p, "metric", &n)) != NULL) {
        j->name = malloc(n + 1);
        if (j->name == NULL) {
            return -ENOBUFS;
        }
        memcpy(j->name, v, n);
        j->name[n] = '\0';
        j->name_len = n;
    }
    return 0;
}

static int exemplars_args(struct pjob *j, const struct preq *p, struct http1_req *r, char *err,
                          size_t errlen)
{
    (void)r;
    struct prom_time start, end;
    if (time_param(p, "start", PROM_MIN_TIME_MS, &j->start_ms, &start, err, errlen) < 0 ||
        time_param(p, "end", PROM_MAX_TIME_MS, &j->end_ms, &end, err, errlen) < 0) {
        return -EINVAL;
    }
    if (prom_time_before(&end, &start)) {
        return bad(err, errlen, "end timestamp must not be before start timestamp");
    }
    if (parse_query(j, p, false, err, errlen) < 0) {
        return -EINVAL;
    }
    const struct promql_sel *one[1];
    size_t ns = 0;
    extract_selectors(j->expr, one, &ns, 1);
    return ns == 0 ? 1 : 0; /* no selector: Prometheus answers 204 without a body */
}

/* Every endpoint: a job of |kind| read by |args|, run by the query runner
 * (or refused at once). */
static void handle(struct http1_req *r, enum qs_endpoint ep, enum pkind kind, args_fn args)
{
    char err[512] = "";
    struct pjob *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        qhttp_fail(r, &prom_dialect, ep, -ENOBUFS, NULL);
        return;
    }
    qhttp_job_init(&j->q, &prom_ops, ep);
    j->kind = kind;
    j->deadline_ns = qhttp_deadline_ns(&j->q);
    struct preq p;
    if (preq_parse(&p, r) < 0) {
        qhttp_refuse(r, &j->q, -ENOBUFS, NULL);
        return;
    }
    int rc = args(j, &p, r, err, sizeof(err));
    preq_fini(&p);
    if (rc == -ENOENT) {
        static const char nf[] = "404 page not found\n";
        qstats_query_done(ep, QS_BAD_REQUEST, clock_mono_ns() - j->q.t0);
        http1_resp_start(r, 404, "text/plain; charset=utf-8");
        evbuffer_add(http1_resp_body(r), nf, sizeof(nf) - 1);
        http1_resp_end(r);
        job_free(&j->q);
    } else if (rc == 1) {
        qstats_query_done(ep, QS_OK, clock_mono_ns() - j->q.t0);
        http1_resp_start(r, 204, NULL);
        http1_resp_end(r);
        job_free(&j->q);
    } else if (rc < 0) {
        qhttp_refuse(r, &j->q, rc, err);
    } else {
        qhttp_submit(r, &j->q);
    }
}

static void h_query(struct http1_req *r)
{
    handle(r, QS_EP_PROM_QUERY, PK_QUERY, query_args);
}

static void h_query_range(struct http1_req *r)
{
    handle(r, QS_EP_PROM_QUERY_RANGE, PK_RANGE, range_args);
}

static void h_series(struct http1_req *r)
{
    handle(r, QS_EP_PROM_SERIES, PK_SERIES, series_args);
}

static void h_labels(struct http1_req *r)
{
    handle(r, QS_EP_PROM_LABELS, PK_LABELS, labels_args);
}

static void h_values(struct http1_req *r)
{
    handle(r, QS_EP_PROM_LABELS, PK_VALUES, values_args);
}

static void h_metadata(struct http1_req *r)
{
    handle(r, QS_EP_PROM_METADATA, PK_METADATA, metadata_args);
}

static void h_exemplars(struct http1_req *r)
{
    handle(r, QS_EP_PROM_EXEMPLARS, PK_EXEMPLARS, exemplars_args);
}

static void answer_static(struct http1_req *r, const char *body, size_t n)
{
    http1_resp_start(r, 200, "application/json");
    evbuffer_add(http1_resp_body(r), body, n);
    http1_resp_end(r);
}

/* No "features" key: with one Grafana takes the server for Mimir (PROMQL.md 0.1). */
static void h_buildinfo(struct http1_req *r)
{
    static const char body[] =
        "{\"status\":\"success\",\"data\":{\"version\":\"" PROM_COMPAT_VERSION
        "\",\"revision\":\"miradb\",\"branch\":\"main\",\"buildUser\":"
        "\"miradb\",\"buildDate\":\"\",\"goVersion\":\"\"}}";
    answer_static(r, body, sizeof(body) - 1);
}

/* MiraDB has no rules; Grafana asks at init (PROMQL.md 0.11). */
static void h_rules(struct http1_req *r)
{
    static const char body[] = "{\"status\":\"success\",\"data\":{\"groups\":[]}}";
    answer_static(r, body, sizeof(body) - 1);
}

int prom_register(const struct config *c)
{
    static const struct qhttp_route routes[] = {
        {"/api/v1/query", false, h_query},
        {"/api/v1/query_range", false, h_query_range},
        {"/api/v1/series", false, h_series},
        {"/api/v1/labels", false, h_labels},
        {VALUES_PRE, true, h_values},
        {"/api/v1/metadata", false, h_metadata},
        {"/api/v1/query_exemplars", false, h_exemplars},
        {"/api/v1/status/buildinfo", false, h_buildinfo},
        {"/api/v1/rules", false, h_rules},
    };
    return qhttp_register(c, routes, sizeof(routes) / sizeof(routes[0]), true);
}

/* ---- /metrics ------------------------------------------------------------------- */

static void counter(struct evbuffer *o, const char *name, const char *help, uint64_t v)
{
    evbuffer_add_printf(o, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
                        (unsigned long long)v);
}

void prom_metrics_text(struct evbuffer *o)
{
    counter(o, "miradb_promql_series_selected_total",
            "Series PromQL selectors read (one per selector and series).",
            __atomic_load_n(&n_series_selected, __ATOMIC_RELAXED));
    counter(o, "miradb_promql_samples_selected_total",
            "Samples PromQL selectors read (float and histogram).",
            __atomic_load_n(&n_samples_selected, __ATOMIC_RELAXED));
    counter(o, "miradb_promql_points_scanned_total",
            "OTLP metric points the Prometheus API's queries scanned.",
            __atomic_load_n(&n_points_scanned, __ATOMIC_RELAXED));
    counter(o, "miradb_promql_unmapped_reads_total",
            "Metrics or series a PromQL read met that map to no Prometheus series, counted per "
            "read (see miradb_promql_unmapped_points_total for what ingest counted).",
            pmsrc_unmapped());
    evbuffer_add_printf(o,
                        "# HELP miradb_promql_label_index_bytes Memory the sealed blocks' label "
                        "indexes hold (part of the memory budget).\n"
                        "# TYPE miradb_promql_label_index_bytes gauge\n"
                        "miradb_promql_label_index_bytes %llu\n",
                        (unsigned long long)pmsrc_index_bytes());
}
