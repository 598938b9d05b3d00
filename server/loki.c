/*
 * loki.c - Loki HTTP API routes (FACTS.md A) and GET /api/v1/logs.
 *
 * A handler parses the parameters and the query on the I/O thread (cheap,
 * bounded by the request size) and answers bad requests at once. A valid
 * query becomes a job for the query runner (qhttp.h): a worker runs it
 * with the LogQL executor (query/logs.h) and renders the JSON, the
 * answer of a log query piece by piece; the runner keeps the timeout, the
 * client abort, the streaming and the counting, and answers errors by its
 * table in Loki's column.
 */
#include "server/loki.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>

#include "lib/clock.h"
#include "lib/jsonw.h"
#include "query/logql.h"
#include "query/logs.h"
#include "query/qstats.h"
#include "server/config.h"
#include "server/http1.h"
#include "server/log.h"
#include "server/qhttp.h"

#define DEFAULT_LIMIT 100
#define DEFAULT_SINCE_NS (3600ull * 1000000000ull)
#define MAX_SELECTORS QHTTP_MAX_PARAMS

static const char *param(const struct qhttp_params *ps, const char *name)
{
    return qhttp_param(ps, name, NULL);
}

/* ---- parameter values (FACTS.md A.2) ------------------------------------------- */

static int days_from_civil(int y, unsigned m, unsigned d, int64_t *out)
{
    y -= m <= 2;
    int era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    *out = (int64_t)era * 146097 + (int64_t)doe - 719468;
    return 0;
}

/* RFC3339 / RFC3339Nano -> ns since the epoch. */
static int parse_rfc3339(const char *s, uint64_t *out)
{
    int y, mo, d, h, mi, sec, n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n != 19) {
        return -EINVAL;
    }
    const char *p = s + n;
    uint64_t frac = 0;
    if (*p == '.') {
        p++;
        int digits = 0;
        while (isdigit((unsigned char)*p)) {
            if (digits < 9) {
                frac = frac * 10 + (uint64_t)(*p - '0');
            }
            digits++;
            p++;
        }
        if (digits == 0) {
            return -EINVAL;
        }
        for (; digits < 9; digits++) {
            frac *= 10;
        }
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2 || strlen(p) != 6) {
            return -EINVAL;
        }
        off = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -EINVAL;
    }
    if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) {
        return -EINVAL;
    }
    int64_t days;
    days_from_civil(y, (unsigned)mo, (unsigned)d, &days);
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - off;
    if (secs < 0) {
        return -EINVAL;
    }
    *out = (uint64_t)secs * 1000000000ull + frac;
    return 0;
}

static int parse_time(const char *s, uint64_t *out)
{
    if (*s == '\0') {
        return -EINVAL;
    }
    if (strchr(s, '.') != NULL && strchr(s, 'T') == NULL) {
        char *end;
        double d = strtod(s, &end);
        if (*end != '\0' || !(d >= 0) || d > 9.2e9) {
            return -EINVAL;
        }
        *out = (uint64_t)llround(d * 1000.0) * 1000000ull; /* ms precision */
        return 0;
    }
    bool digits = true;
    size_t n = 0;
    for (const char *p = s; *p; p++, n++) {
        digits = digits && isdigit((unsigned char)*p);
    }
    if (digits) {
        unsigned long long v = strtoull(s, NULL, 10);
        *out = n <= 10 ? (uint64_t)v * 1000000000ull : (uint64_t)v;
        return 0;
    }
    return parse_rfc3339(s, out);
}

/* step / interval: float seconds or a duration. */
static int parse_step(const char *s, uint64_t *out)
{
    char *end;
    double d = strtod(s, &end);
    if (end != s && *end == '\0') {
        if (!(d > 0) || d > 1e9) {
            return -EINVAL;
        }
        *out = (uint64_t)llround(d * 1e9);
        return 0;
    }
    int64_t ns;
    if (qlex_parse_duration(s, strlen(s), true, &ns) != 0 || ns <= 0) {
        return -EINVAL;
    }
    *out = (uint64_t)ns;
    return 0;
}

/* ---- jobs ------------------------------------------------------------------------- */

enum job_kind {
    JK_QUERY,  /* query_range, query, native */
    JK_LABELS, /* labels, label values */
    JK_SERIES,
    JK_INDEX_STATS,
    JK_VOLUME,
    JK_DETECTED,
};

struct job {
    struct qhttp_job q; /* first */
    enum job_kind kind;
    bool native;
    struct logs_req rq;
    struct logql_expr *expr;
    struct logql_expr *sels[MAX_SELECTORS];
    size_t n_sels;
    char label[256]; /* label values: the name */
    bool all_streams;
    /* index/volume */
    char targets_buf[512];
    struct logql_str targets[32];
    size_t n_targets;
    bool agg_labels;
    uint32_t vol_limit;
    /* a log query's answer, rendered piece by piece on a worker */
    struct logs_result *res;
};

#define PIECE_BYTES (256u << 10)

/* |q| is the first member */
static struct job *job_of(struct qhttp_job *q)
{
    return (struct job *)q;
}

/* Any thread. */
static void job_free(struct qhttp_job *q)
{
    struct job *j = job_of(q);
    logs_result_free(j->res);
    logql_free(j->expr);
    for (size_t i = 0; i < j->n_sels; i++) {
        logql_free(j->sels[i]);
    }
    free(j);
}

/* Worker: runs the query, renders the answer (of a log query, its first piece). */
static int job_run(struct qhttp_job *q, struct qhttp_answer *a)
{
    struct job *j = job_of(q);
    char *err = a->err;
    size_t errlen = sizeof(a->err);
    struct jsonw w;
    jsonw_init(&w, a->body);
    int rc = 0;
    bool more = false;
    switch (j->kind) {
    case JK_QUERY: {
        struct logs_result *res = NULL;
        j->rq.cancel = &q->cancel;
        rc = j->native ? logs_exec_native(&j->rq, &res, err, errlen)
                       : logs_exec(&j->rq, &res, err, errlen);
        if (rc == 0) {
            more = !logs_render(res, a->body, PIECE_BYTES);
            rc = logs_render_error(res);
            snprintf(err, errlen, "out of memory rendering the answer");
            if (more && rc == 0) {
                j->res = res; /* the rest comes piece by piece */
            } else {
                logs_result_free(res);
                more = false;
            }
        }
        break;
    }
    case JK_LABELS:
        rc = logs_labels(j->expr ? &j->expr->log : NULL, j->label[0] ? j->label : NULL,
                         j->rq.start_ns, j->rq.end_ns, &w);
        snprintf(err, errlen, "out of memory");
        break;
    case JK_INDEX_STATS:
    case JK_VOLUME:
        j->rq.expr = j->expr;
        j->rq.cancel = &q->cancel;
        rc = logs_index(&j->rq, j->kind == JK_VOLUME ? LOGS_INDEX_VOLUME : LOGS_INDEX_STATS,
                        j->targets, j->n_targets, j->agg_labels, j->vol_limit, &w, err, errlen);
        break;
    case JK_DETECTED:
        rc = logs_detected_labels(j->expr ? &j->expr->log : NULL, j->rq.start_ns, j->rq.end_ns, &w);
        snprintf(err, errlen, "out of memory");
        break;
    case JK_SERIES: {
        const struct logql_log *sels[MAX_SELECTORS];
        for (size_t i = 0; i < j->n_sels; i++) {
            sels[i] = &j->sels[i]->log;
        }
        rc = logs_series(sels, j->all_streams ? 0 : j->n_sels, j->rq.start_ns, j->rq.end_ns, &w);
        snprintf(err, errlen, "out of memory");
        break;
    }
    }
    if (rc == 0 && w.err < 0) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory rendering the answer");
    }
    return rc < 0 ? rc : more;
}

/* Worker: the next piece of a log query's answer. */
static int job_more(struct qhttp_job *q, struct evbuffer *body)
{
    struct job *j = job_of(q);
    bool more = !logs_render(j->res, body, PIECE_BYTES);
    int rc = logs_render_error(j->res);
    if (!more || rc < 0) {
        /* done (or out of memory: the answer is cut, so it does not look
         * complete); drop the blocks here */
        logs_result_free(j->res);
        j->res = NULL;
    }
    return rc < 0 ? rc : more;
}

static const struct qhttp_dialect loki_dialect = {
    .api = QHTTP_LOKI,
    /* the executor's words (logs.c), so both ways to time out read the same */
    .timeout_msg = "request timed out (--query-timeout), decrease the duration of the request or "
                   "add more label matchers",
};

static const struct qhttp_ops loki_ops = {
    .dialect = &loki_dialect,
    .run = job_run,
    .more = job_more,
    .free = job_free,
};

/* start/end/since: Loki's defaults. */
static int range_params(const struct qhttp_params *ps, uint64_t *start, uint64_t *end, char *err,
                        size_t errlen)
{
    uint64_t now = clock_wall_ns();
    const char *s = param(ps, "start"), *e = param(ps, "end"), *since = param(ps, "since");
    *end = now;
    if (e != NULL && *e != '\0' && parse_time(e, end) < 0) {
        snprintf(err, errlen, "could not parse 'end' parameter: invalid timestamp '%s'", e);
        return -EINVAL;
    }
    uint64_t back = DEFAULT_SINCE_NS;
    if (since != NULL && *since != '\0') {
        int64_t ns;
        if (qlex_parse_duration(since, strlen(since), true, &ns) != 0 || ns <= 0) {
            snprintf(err, errlen, "could not parse 'since' parameter: '%s'", since);
            return -EINVAL;
        }
        back = (uint64_t)ns;
    }
    uint64_t base = *end < now ? *end : now;
    *start = base > back ? base - back : 0;
    if (s != NULL && *s != '\0' && parse_time(s, start) < 0) {
        snprintf(err, errlen, "could not parse 'start' parameter: invalid timestamp '%s'", s);
        return -EINVAL;
    }
    if (*end < *start) {
        snprintf(err, errlen, "end timestamp must not be before or equal to start time");
        return -EINVAL;
    }
    return 0;
}

static int parse_query(const char *q, struct logql_expr **out, char *err, size_t errlen)
{
    if (q == NULL || *q == '\0') {
        snprintf(err, errlen, "parse error : query must not be empty");
        return -EINVAL;
    }
    return logql_parse(q, strlen(q), out, err, errlen);
}

/* Reads a request's parameters into |j| on the I/O thread: 0, or -EINVAL
 * with the 400's text in |err|. */
typedef int (*args_fn)(struct job *j, const struct qhttp_params *ps, struct http1_req *r, char *err,
                       size_t errlen);

/* Every Loki endpoint: a job of |kind|, its parameters read by |args|, run
 * by the query runner (or refused at once). */
static void handle(struct http1_req *r, enum qs_endpoint ep, enum job_kind kind, args_fn args)
{
    struct qhttp_params ps;
    char err[512];
    struct job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        qhttp_fail(r, &loki_dialect, ep, -ENOBUFS, NULL);
        return;
    }
    qhttp_job_init(&j->q, &loki_ops, ep);
    j->kind = kind;
    if (qhttp_params_of_req(&ps, r) < 0) {
        qhttp_refuse(r, &j->q, -ENOBUFS, NULL);
        return;
    }
    int rc = args(j, &ps, r, err, sizeof(err));
    qhttp_params_fini(&ps);
    if (rc < 0) {
        qhttp_refuse(r, &j->q, rc, err);
    } else {
        qhttp_submit(r, &j->q);
    }
}

/* query_range, query, native logs */
static int query_args(struct job *j, const struct qhttp_params *ps, struct http1_req *r, char *err,
                      size_t errlen)
{
    j->native = j->q.ep == QS_EP_NATIVE_LOGS;
    struct logs_req *rq = &j->rq;
    rq->max_rows = qhttp_limits()->max_rows;
    rq->max_memory = qhttp_limits()->max_memory;
    rq->deadline_ns = qhttp_deadline_ns(&j->q);
    const char *flags = http1_req_header(r, "X-Loki-Response-Encoding-Flags");
    rq->categorize = !j->native && flags != NULL && strstr(flags, "categorize-labels") != NULL;

    const char *v;
    rq->limit = DEFAULT_LIMIT;
    if ((v = param(ps, "limit")) != NULL && *v != '\0') {
        char *end;
        long long l = strtoll(v, &end, 10);
        if (*end != '\0') {
            snprintf(err, errlen, "invalid limit '%s'", v);
            return -EINVAL;
        }
        if (l <= 0) {
            snprintf(err, errlen, "limit must be a positive value");
            return -EINVAL;
        }
        if (l > LOGS_MAX_ENTRIES) {
            snprintf(err, errlen,
                     "max entries limit per query exceeded, limit > max_entries_limit_per_query "
                     "(%lld > %d)",
                     l, LOGS_MAX_ENTRIES);
            return -EINVAL;
        }
        rq->limit = (uint32_t)l;
    }
    rq->forward = false;
    if ((v = param(ps, "direction")) != NULL && *v != '\0') {
        if (strcasecmp(v, "forward") == 0) {
            rq->forward = true;
        } else if (strcasecmp(v, "backward") != 0) {
            snprintf(err, errlen, "invalid direction '%s'", v);
            return -EINVAL;
        }
    }
    if (parse_query(param(ps, "query"), &j->expr, err, errlen) < 0) {
        return -EINVAL;
    }
    rq->expr = j->expr;
    bool metric = logql_is_metric(j->expr);
    if (j->q.ep == QS_EP_QUERY) {
        if (!metric) {
            snprintf(err, errlen,
                     "log queries are not supported as an instant query type, please change "
                     "your query to a range query type");
            return -EINVAL;
        }
        uint64_t t = clock_wall_ns();
        if ((v = param(ps, "time")) != NULL && *v != '\0' && parse_time(v, &t) < 0) {
            snprintf(err, errlen, "could not parse 'time' parameter: invalid timestamp '%s'", v);
            return -EINVAL;
        }
        rq->instant = true;
        rq->start_ns = rq->end_ns = t;
    } else {
        if (range_params(ps, &rq->start_ns, &rq->end_ns, err, errlen) < 0) {
            return -EINVAL;
        }
        if (metric) {
            if (j->native) {
                snprintf(err, errlen,
                         "the native logs API takes log queries only, not metric queries");
                return -EINVAL;
            }
            uint64_t span = rq->end_ns - rq->start_ns;
            uint64_t step = span / 250 / 1000000000ull * 1000000000ull;
            if (step < 1000000000ull) {
                step = 1000000000ull;
            }
            if ((v = param(ps, "step")) != NULL && *v != '\0' && parse_step(v, &step) < 0) {
                snprintf(err, errlen,
                         "invalid parameter 'step': zero or negative query resolution step widths "
                         "are not accepted. Try a positive integer");
                return -EINVAL;
            }
            if (span / step > LOGS_MAX_POINTS) {
                snprintf(err, errlen,
                         "exceeded maximum resolution of 11,000 points per time series. Try "
                         "increasing the value of the step parameter");
                return -EINVAL;
            }
            rq->step_ns = step;
        } else if ((v = param(ps, "interval")) != NULL && *v != '\0') {
            if (parse_step(v, &rq->interval_ns) < 0) {
                snprintf(err, errlen, "invalid parameter 'interval'");
                return -EINVAL;
            }
        }
    }
    return 0;
}

static void h_query_range(struct http1_req *r)
{
    handle(r, QS_EP_QUERY_RANGE, JK_QUERY, query_args);
}

static void h_query(struct http1_req *r)
{
    handle(r, QS_EP_QUERY, JK_QUERY, query_args);
}

static void h_native(struct http1_req *r)
{
    handle(r, QS_EP_NATIVE_LOGS, JK_QUERY, query_args);
}

/* An optional selector (labels, values): must be a log query. */
static int parse_selector(const char *q, struct logql_expr **out, char *err, size_t errlen)
{
    *out = NULL;
    if (q == NULL) {
        return 0;
    }
    while (*q == ' ') {
        q++;
    }
    if (*q == '\0' || strcmp(q, "{}") == 0) {
        return 0;
    }
    int rc = logql_parse(q, strlen(q), out, err, errlen);
    if (rc < 0) {
        return rc;
    }
    if (logql_is_metric(*out)) {
        logql_free(*out);
        *out = NULL;
        snprintf(err, errlen, "parse error : only a stream selector is accepted here");
        return -EINVAL;
    }
    return 0;
}

static int labels_args(struct job *j, const struct qhttp_params *ps, struct http1_req *r, char *err,
                       size_t errlen)
{
    const char *path = http1_req_path(r);
    static const char pre[] = "/loki/api/v1/label/";
    if (strncmp(path, pre, sizeof(pre) - 1) == 0) {
        const char *name = path + sizeof(pre) - 1;
        const char *slash = strchr(name, '/');
        size_t n = slash ? (size_t)(slash - name) : strlen(name);
        if (n == 0 || n >= sizeof(j->label) || (slash && strcmp(slash, "/values") != 0)) {
            snprintf(err, errlen, "invalid label name in the path");
            return -EINVAL;
        }
        memcpy(j->label, name, n);
        j->label[n] = '\0';
        qhttp_url_decode(j->label, n, true);
    }
    if (range_params(ps, &j->rq.start_ns, &j->rq.end_ns, err, errlen) < 0 ||
        parse_selector(param(ps, "query"), &j->expr, err, errlen) < 0) {
        return -EINVAL;
    }
    return 0;
}

static void h_labels(struct http1_req *r)
{
    handle(r, QS_EP_LABELS, JK_LABELS, labels_args);
}

static int series_args(struct job *j, const struct qhttp_params *ps, struct http1_req *r, char *err,
                       size_t errlen)
{
    (void)r;
    if (range_params(ps, &j->rq.start_ns, &j->rq.end_ns, err, errlen) < 0) {
        return -EINVAL;
    }
    size_t given = 0;
    for (size_t i = 0; i < ps->n; i++) {
        if (strcmp(ps->name[i], "match[]") != 0 && strcmp(ps->name[i], "match") != 0) {
            continue;
        }
        given++;
        struct logql_expr *e;
        if (parse_selector(ps->value[i], &e, err, errlen) < 0) {
            return -EINVAL;
        }
        if (e == NULL) {
            j->all_streams = true; /* {} */
            continue;
        }
        j->sels[j->n_sels++] = e;
    }
    if (given == 0) {
        j->all_streams = true;
    }
    return 0;
}

static void h_series(struct http1_req *r)
{
    handle(r, QS_EP_SERIES, JK_SERIES, series_args);
}

/* index/stats, index/volume (FACTS.md A.5) and detected_labels. */
static int index_args(struct job *j, const struct qhttp_params *ps, struct http1_req *r, char *err,
                      size_t errlen)
{
    const char *path = http1_req_path(r);
    j->kind = strcmp(path, "/loki/api/v1/index/stats") == 0    ? JK_INDEX_STATS
              : strcmp(path, "/loki/api/v1/index/volume") == 0 ? JK_VOLUME
                                                               : JK_DETECTED;
    j->rq.max_rows = qhttp_limits()->max_rows;
    j->rq.max_memory = qhttp_limits()->max_memory;
    j->rq.deadline_ns = qhttp_deadline_ns(&j->q);
    const char *v;
    if (range_params(ps, &j->rq.start_ns, &j->rq.end_ns, err, errlen) < 0) {
        return -EINVAL;
    }
    if (j->kind == JK_DETECTED) {
        if (parse_selector(param(ps, "query"), &j->expr, err, errlen) < 0) {
            return -EINVAL;
        }
    } else if (parse_query(param(ps, "query"), &j->expr, err, errlen) < 0) {
        return -EINVAL;
    } else if (logql_is_metric(j->expr)) {
        snprintf(err, errlen, "parse error : only a stream selector is accepted here");
        return -EINVAL;
    }
    j->vol_limit = 100;
    if ((v = param(ps, "limit")) != NULL && *v != '\0') {
        char *end;
        long l = strtol(v, &end, 10);
        if (*end != '\0' || l <= 0) {
            snprintf(err, errlen, "limit must be a positive value");
            return -EINVAL;
        }
        j->vol_limit = (uint32_t)l;
    }
    if ((v = param(ps, "aggregateBy")) != NULL && *v != '\0') {
        if (strcmp(v, "labels") == 0) {
            j->agg_labels = true;
        } else if (strcmp(v, "series") != 0) {
            snprintf(err, errlen, "invalid aggregateBy '%s'", v);
            return -EINVAL;
        }
    }
    if ((v = param(ps, "targetLabels")) != NULL && *v != '\0') {
        snprintf(j->targets_buf, sizeof(j->targets_buf), "%s", v);
        char *save = NULL;
        for (char *t = strtok_r(j->targets_buf, ",", &save); t != NULL && j->n_targets < 32;
             t = strtok_r(NULL, ",", &save)) {
            while (*t == ' ') {
                t++;
            }
            j->targets[j->n_targets++] = (struct logql_str){t, strlen(t)};
        }
    }
    return 0;
}

static void h_index(struct http1_req *r)
{
    handle(r, QS_EP_INDEX, JK_DETECTED, index_args);
}

static void h_buildinfo(struct http1_req *r)
{
    static const char body[] =
        "{\"version\":\"3.5.0\",\"revision\":\"miradb\",\"branch\":\"main\",\"buildUser\":"
        "\"miradb\",\"buildDate\":\"\",\"goVersion\":\"\"}";
    http1_resp_start(r, 200, "application/json");
    evbuffer_add(http1_resp_body(r), body, sizeof(body) - 1);
    http1_resp_end(r);
}

int loki_register(const struct config *c)
{
    static const struct qhttp_route routes[] = {
        {"/loki/api/v1/query_range", false, h_query_range},
        {"/loki/api/v1/query", false, h_query},
        {"/loki/api/v1/labels", false, h_labels},
        {"/loki/api/v1/label/", true, h_labels},
        {"/loki/api/v1/series", false, h_series},
        {"/loki/api/v1/status/buildinfo", false, h_buildinfo},
        {"/loki/api/v1/index/stats", false, h_index},
        {"/loki/api/v1/index/volume", false, h_index},
        {"/loki/api/v1/detected_labels", false, h_index},
        {"/api/v1/logs", false, h_native},
    };
    return qhttp_register(c, routes, sizeof(routes) / sizeof(routes[0]), true);
}
