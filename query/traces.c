/*
 * traces.c - TraceQL execution and trace lookup (see traces.h for the
 * plan; traces_int.h lists the module's files): the query context of a
 * trace query and the wording of its errors.
 *
 * A query runs on a query context (query/qctx.h): one catalog snapshot
 * for its whole life, sealed blocks (referenced) and open blocks with the
 * row count visible when it was taken, so span views (which point into
 * the blocks) stay valid until the query ends. Scans fan out one source
 * (block) per qpool_parallel item; each item writes only its own slot,
 * merged once afterwards, so no lock is taken per row. Limits are checked
 * every SCAN_STRIDE rows; the clock (deadline, cancel) and a regex that
 * hit its match limit every CLOCK_STRIDE rows where rows run the query's
 * filters, and per trace.
 */
#include "query/traces.h"

#include "query/traces_int.h"

/* ---- query context -------------------------------------------------------- */

/* The query's snapshot of the traces signal (query/qctx.h). */
int traces_query_open(struct qctx *q, const struct traces_limits *lim)
{
    struct qctx_limits l = {0};
    if (lim != NULL) {
        l = (struct qctx_limits){.max_rows = lim->max_rows,
                                 .max_memory = lim->max_memory,
                                 .deadline_ns = lim->deadline_ns,
                                 .cancel = lim->cancel};
    }
    int rc = qctx_open(q, SIG_TRACES, &l, "spans");
    if (rc < 0) {
        return rc;
    }
    q->st.blocks_considered = q->n_src;
    return 0;
}

void traces_set_err(char *err, size_t errlen, int rc)
{
    switch (rc) {
    case -ETIMEDOUT:
        snprintf(err, errlen, "query timed out (--query-timeout)");
        break;
    case -ECANCELED:
        snprintf(err, errlen, "query canceled: the client went away");
        break;
    case -E2BIG:
        snprintf(err, errlen, "query scanned more rows than --query-max-rows allows");
        break;
    case -ENOMEM:
        snprintf(err, errlen, "query needs more memory than --query-memory allows");
        break;
    default:
        snprintf(err, errlen, "query failed: %s", strerror(-rc));
        break;
    }
}

/* set_err for the query's error, with the regex case told apart. */
int traces_err_msg(struct qctx *q, char *err, size_t errlen, int rc)
{
    if (rc == -E2BIG && qctx_cause(q) == QCTX_REGEX) {
        snprintf(err, errlen,
                 "a regular expression of the query needs too much backtracking (PCRE2 match "
                 "limit); simplify it, e.g. avoid nested or overlapping repetitions such as "
                 "(a|aa)+ or (a+)+");
        return rc;
    }
    if (qctx_answer_rc(q, rc) != rc) {
        snprintf(err, errlen, "%s", qctx_message(q));
        return qctx_answer_rc(q, rc);
    }
    traces_set_err(err, errlen, rc);
    return rc;
}

int traces_parse_id(const char *s, size_t n, uint8_t id[16])
{
    if (n == 0 || n > 32) {
        return -EINVAL;
    }
    memset(id, 0, 16);
    for (size_t i = 0; i < n; i++) {
        char c = s[n - 1 - i];
        unsigned d;
        if (c >= '0' && c <= '9') {
            d = (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            d = (unsigned)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            d = (unsigned)(c - 'A' + 10);
        } else {
            return -EINVAL;
        }
        id[15 - i / 2] |= (uint8_t)(i % 2 == 0 ? d : d << 4);
    }
    return 0;
}
