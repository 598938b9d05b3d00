/*
 * logs.c - the LogQL executor (see logs.h; logs_int.h lists its files).
 *
 * SHAPE OF A QUERY
 *   logs_exec takes one catalog snapshot. Every log expression in the tree
 *   (the log query itself, or each range aggregation) is one `struct scan`:
 *   its candidate sources (sealed blocks that survive the zone map, bloom
 *   and dictionary checks, plus the open blocks) are scanned one source per
 *   qpool_parallel item, each item with its own row context (label arrays,
 *   a scratch arena reset per row) so no row allocates with malloc.
 *
 *   Log queries run in two passes: pass 1 evaluates the pipeline and keeps
 *   only (time, source, row) of the best |limit| matches per source (sealed
 *   blocks are time-sorted, so a scan in query direction stops after
 *   |limit| matches, and sources are visited in batches ordered by time, so
 *   blocks that cannot beat the current |limit|-th entry are never read);
 *   pass 2 re-evaluates only the |limit| winners to materialize lines and
 *   labels. Metric queries accumulate per-step values per series in each
 *   item and merge them by series key.
 *
 * A query runs on a query context (query/qctx.h): its snapshot, sources,
 * limits, first error and warnings. Limits are checked every ROW_CHECK
 * rows per item: --query-max-rows (rows scanned by the whole query),
 * --query-memory (arenas and series held), the deadline and the cancel
 * flag; the first one hit stops every item. The deadline, the cancel flag
 * and a regex that hit its PCRE2 match limit are also looked at every
 * QCTX_CLOCK_ROWS rows (qctx_tick) and between the operators of a metric
 * query.
 */
#include "query/logs.h"

#include "query/logs_int.h"

/* ---- query state ---------------------------------------------------------- */

/* The query's snapshot of the logs signal, with q->rq's limits. */
int logs_query_open(struct query *q)
{
    struct qctx_limits lim = {.max_rows = q->rq.max_rows,
                              .max_memory = q->rq.max_memory,
                              .deadline_ns = q->rq.deadline_ns,
                              .cancel = q->rq.cancel};
    return qctx_open(&q->c, SIG_LOGS, &lim, "rows");
}

/* ---- entry points --------------------------------------------------------- */

void logs_result_free(struct logs_result *r)
{
    if (r == NULL) {
        return;
    }
    logs_scan_fini(&r->scan);
    free(r->e);
    free(r->ser);
    qctx_close(&r->q.c);
    arena_free(r->q.a);
    free(r);
}

const struct qs_scan *logs_result_scan(const struct logs_result *r)
{
    return &r->q.c.st;
}

static int exec_common(const struct logs_req *rq, bool native, struct logs_result **out, char *err,
                       size_t errlen)
{
    uint64_t t0 = clock_mono_ns();
    *out = NULL;
    (void)qlex_re_take_limit_hit(); /* a note left by an earlier request on this thread */
    int rc = logs_check_tree(rq->expr, rq->instant, err, errlen);
    if (rc < 0) {
        return rc;
    }
    struct logs_result *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->q.rq = *rq;
    r->native = native;
    r->q.a = arena_new(64 << 10);
    if (r->q.a == NULL || logs_query_open(&r->q) < 0) {
        logs_result_free(r);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (rq->expr->kind == LOGQL_EXPR_LOG) {
        r->kind = RK_STREAMS;
        if (r->q.rq.limit == 0) {
            r->q.rq.limit = 100;
        }
        rc = logs_run_log_query(r);
    } else {
        rc = logs_run_metric_query(r);
    }
    r->exec_ns = clock_mono_ns() - t0;
    qstats_scan_add(&r->q.c.st);
    if (rc == 0) {
        rc = qctx_err(&r->q.c);
    }
    if (rc < 0) {
        const char *m = qctx_message(&r->q.c);
        snprintf(err, errlen, "%s", m[0] ? m : strerror(-rc));
        rc = qctx_answer_rc(&r->q.c, rc);
        logs_result_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int logs_exec(const struct logs_req *rq, struct logs_result **out, char *err, size_t errlen)
{
    return exec_common(rq, false, out, err, errlen);
}

int logs_exec_native(const struct logs_req *rq, struct logs_result **out, char *err, size_t errlen)
{
    if (rq->expr->kind != LOGQL_EXPR_LOG) {
        snprintf(err, errlen, "the native logs API takes log queries only, not metric queries");
        return -EINVAL;
    }
    return exec_common(rq, true, out, err, errlen);
}
