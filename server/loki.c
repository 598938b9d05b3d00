/*
 * loki.c - Loki HTTP API routes (FACTS.md A) and GET /api/v1/logs.
 *
 * A handler parses the parameters and the query on the I/O thread (cheap,
 * bounded by the request size) and answers bad requests at once. A valid
 * query becomes a job on the query pool; the worker runs it, renders the
 * JSON into an evbuffer of its own and posts the job back to the I/O
 * thread the request came from, which hands the buffer to the connection
 * (evbuffer_add_buffer moves the chains, no copy). If the client leaves
 * first, the abort callback sets the job's cancel flag (the executor polls
 * it) and marks the request gone; the completion then only frees the job.
 * Abort and completion both run on the request's I/O thread, so they
 * need no lock between them.
 *
 * --query-timeout is kept by the I/O thread too: a timer armed when the
 * job is queued answers 504 at the deadline if no answer has started by
 * then, whatever the worker is doing (queued behind other queries, or in
 * a long stretch between two of the executor's checks), and sets the
 * cancel flag so the worker gives up; the completion then only frees the
 * job. The executor's own check usually answers first, with the same 504.
 */
#include "server/loki.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "query/jsonw.h"
#include "query/logql.h"
#include "query/logs.h"
#include "query/pool.h"
#include "query/qstats.h"
#include "server/config.h"
#include "server/http1.h"
#include "server/iot.h"
#include "server/log.h"

#define LOKI_QUEUE 64
#define DEFAULT_LIMIT 100
#define DEFAULT_SINCE_NS (3600ull * 1000000000ull)

static struct {
    uint64_t timeout_ms;
    uint64_t max_rows;
    uint64_t memory;
} cfg = {30000, 1000000, 256u << 20};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- form parameters -------------------------------------------------------- */

#define MAX_PARAMS 64

struct params {
    char *buf; /* decoded names and values, NUL-separated */
    const char *name[MAX_PARAMS];
    const char *value[MAX_PARAMS];
    size_t n;
};

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = (char)tolower((unsigned char)c);
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Decodes %XX and '+' in place (form rules). */
static void url_decode(char *s)
{
    char *o = s;
    for (char *p = s; *p != '\0'; p++) {
        if (*p == '+') {
            *o++ = ' ';
        } else if (*p == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
            *o++ = (char)(hexval(p[1]) << 4 | hexval(p[2]));
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

static void params_parse_into(struct params *ps, char *s)
{
    char *save = NULL;
    for (char *tok = strtok_r(s, "&", &save); tok != NULL; tok = strtok_r(NULL, "&", &save)) {
        if (ps->n == MAX_PARAMS) {
            return;
        }
        char *eq = strchr(tok, '=');
        const char *v = "";
        if (eq != NULL) {
            *eq = '\0';
            v = eq + 1;
        }
        url_decode(tok);
        url_decode((char *)v);
        ps->name[ps->n] = tok;
        ps->value[ps->n] = v;
        ps->n++;
    }
}

/* Query string plus, for a form POST, the body. */
static int params_parse(struct params *ps, struct http1_req *r)
{
    const char *q = http1_req_query(r);
    size_t blen = 0;
    const void *body = http1_req_body(r, &blen);
    const char *ct = http1_req_header(r, "Content-Type");
    bool form = strcmp(http1_req_method(r), "POST") == 0 && blen > 0 &&
                (ct == NULL || strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0);
    size_t ql = strlen(q);
    memset(ps, 0, sizeof(*ps));
    ps->buf = malloc(ql + 1 + (form ? blen : 0) + 1);
    if (ps->buf == NULL) {
        return -ENOMEM;
    }
    memcpy(ps->buf, q, ql + 1);
    params_parse_into(ps, ps->buf);
    if (form) {
        char *b = ps->buf + ql + 1;
        memcpy(b, body, blen);
        b[blen] = '\0';
        params_parse_into(ps, b);
    }
    return 0;
}

static const char *param(const struct params *ps, const char *name)
{
    for (size_t i = 0; i < ps->n; i++) {
        if (strcmp(ps->name[i], name) == 0) {
            return ps->value[i];
        }
    }
    return NULL;
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
    struct qpool_job pj; /* first: the pool hands this back */
    struct iot_msg msg;
    struct iot *iot;
    struct http1_req *r;
    enum job_kind kind;
    enum qs_endpoint ep;
    bool native;
    bool aborted;   /* I/O thread only */
    bool timed_out; /* I/O thread: the deadline timer answered 504 */
    int cancel;     /* atomic: the executor polls it */
    struct event *deadline; /* I/O thread: until the first piece, or the 504 */
    uint64_t t0;
    struct logs_req rq;
    struct logql_expr *expr;
    struct logql_expr *sels[MAX_PARAMS];
    size_t n_sels;
    char label[256]; /* label values: the name */
    bool all_streams;
    /* index/volume */
    char targets_buf[512];
    struct logql_str targets[32];
    size_t n_targets;
    bool agg_labels;
    uint32_t vol_limit;
    /* the answer, streamed in pieces: the worker renders one into |body|
     * and posts the job back; the I/O thread sends it and, when |more|,
     * asks for the next from the connection's more-callback */
    struct logs_result *res;
    bool more;
    bool started;  /* I/O thread: response headers sent */
    bool failed;   /* a later piece failed to render: the answer is cut */
    bool inflight; /* I/O thread: the job is queued, running or posted back */
    int status;
    enum qs_outcome outcome;
    const char *ctype;
    struct evbuffer *body;
};

/* Any thread: |deadline| is gone by then (disarm on the I/O thread). */
static void job_free(struct job *j)
{
    logs_result_free(j->res);
    logql_free(j->expr);
    for (size_t i = 0; i < j->n_sels; i++) {
        logql_free(j->sels[i]);
    }
    if (j->body != NULL) {
        evbuffer_free(j->body);
    }
    free(j);
}

static void answer_text(struct http1_req *r, int status, const char *msg)
{
    http1_resp_start(r, status, "text/plain; charset=utf-8");
    evbuffer_add(http1_resp_body(r), msg, strlen(msg));
    http1_resp_end(r);
}

static void bad_request(struct http1_req *r, enum qs_endpoint ep, uint64_t t0, const char *msg)
{
    qstats_query_done(ep, QS_BAD_REQUEST, mono_ns() - t0); /* counted before the answer leaves */
    answer_text(r, 400, msg);
}

#define PIECE_BYTES (256u << 10)

/* The executor's words (logs.c), so both ways to time out read the same. */
static const char TIMEOUT_MSG[] =
    "request timed out (--query-timeout), decrease the duration of the request or add more "
    "label matchers";

/* I/O thread. */
static void disarm(struct job *j)
{
    if (j->deadline != NULL) {
        event_free(j->deadline);
        j->deadline = NULL;
    }
}

static void run_more(struct qpool_job *pj);
static void free_on_worker(struct qpool_job *pj);

/* I/O thread: the connection took most of the last piece. */
static void on_more(struct http1_req *r, void *arg)
{
    struct job *j = arg;
    (void)r;
    j->pj.fn = run_more;
    j->inflight = true;
    if (qpool_submit_urgent(&j->pj) < 0) {
        /* the pool is gone (shutdown): end the answer where it is */
        j->inflight = false;
        qstats_query_done(j->ep, QS_ERROR, mono_ns() - j->t0);
        http1_resp_end(j->r);
        job_free(j);
    }
}

/* I/O thread: a piece (or the whole answer, or an error) is ready. */
static void on_done(struct iot_msg *m)
{
    struct job *j = (struct job *)((char *)m - offsetof(struct job, msg));
    j->inflight = false;
    disarm(j);
    if (j->timed_out) {
        job_free(j); /* answered and counted at the deadline */
        return;
    }
    if (j->aborted) {
        qstats_query_done(j->ep, QS_CANCELED, mono_ns() - j->t0);
        job_free(j);
        return;
    }
    if (!j->started) {
        http1_resp_start(j->r, j->status, j->ctype);
        j->started = true;
    }
    evbuffer_add_buffer(http1_resp_body(j->r), j->body);
    if (j->more) {
        http1_resp_flush(j->r, on_more, j);
        return;
    }
    qstats_query_done(j->ep, j->outcome, mono_ns() - j->t0);
    if (j->failed) {
        http1_resp_abort(j->r);
    } else {
        http1_resp_end(j->r);
    }
    job_free(j);
}

/* I/O thread: the deadline passed with no answer started. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct job *j = arg;
    (void)fd, (void)what;
    disarm(j);
    if (!j->inflight || j->started || j->aborted) {
        return; /* an answer is under way (only armed before the first piece) */
    }
    __atomic_store_n(&j->cancel, 1, __ATOMIC_RELAXED);
    j->timed_out = true;
    qstats_query_done(j->ep, QS_TIMEOUT, mono_ns() - j->t0); /* counted before it leaves */
    answer_text(j->r, 504, TIMEOUT_MSG); /* drops the abort callback: j->r is not ours now */
    j->r = NULL;
}

/* I/O thread: the client left before the answer ended. */
static void on_abort(void *arg)
{
    struct job *j = arg;
    j->aborted = true;
    __atomic_store_n(&j->cancel, 1, __ATOMIC_RELAXED);
    disarm(j);
    if (j->inflight) {
        return; /* on_done frees it */
    }
    /* waiting for the connection between two pieces: free it (its result
     * holds blocks) on a worker */
    qstats_query_done(j->ep, QS_CANCELED, mono_ns() - j->t0);
    j->pj.fn = free_on_worker;
    if (qpool_submit_urgent(&j->pj) < 0) {
        job_free(j);
    }
}

static void fail_job(struct job *j, int rc, const char *msg)
{
    evbuffer_drain(j->body, evbuffer_get_length(j->body));
    evbuffer_add(j->body, msg, strlen(msg));
    j->ctype = "text/plain; charset=utf-8";
    switch (rc) {
    case -EINVAL:
        j->status = 400;
        j->outcome = QS_BAD_REQUEST;
        break;
    case -E2BIG:
        j->status = 400;
        j->outcome = QS_LIMIT;
        break;
    case -ENOMEM:
        j->status = 422;
        j->outcome = QS_LIMIT;
        break;
    case -ETIMEDOUT:
        j->status = 504;
        j->outcome = QS_TIMEOUT;
        break;
    case -ECANCELED:
        j->status = 499;
        j->outcome = QS_CANCELED;
        break;
    default:
        j->status = 500;
        j->outcome = QS_ERROR;
        break;
    }
}

/* Worker thread. */
static void run_job(struct qpool_job *pj)
{
    struct job *j = (struct job *)pj;
    char err[512];
    struct jsonw w;
    j->body = evbuffer_new();
    j->status = 200;
    j->outcome = QS_OK;
    j->ctype = "application/json";
    if (j->body == NULL) {
        /* nothing to answer with: a 500 without a body */
        j->status = 500;
        j->outcome = QS_ERROR;
        j->body = evbuffer_new();
    }
    if (j->body != NULL && __atomic_load_n(&j->cancel, __ATOMIC_RELAXED)) {
        /* answered at the deadline (or the client left) while queued */
        fail_job(j, -ECANCELED, "canceled");
    } else if (j->body != NULL) {
        jsonw_init(&w, j->body);
        int rc = 0;
        switch (j->kind) {
        case JK_QUERY: {
            struct logs_result *res = NULL;
            j->rq.cancel = &j->cancel;
            rc = j->native ? logs_exec_native(&j->rq, &res, err, sizeof(err))
                           : logs_exec(&j->rq, &res, err, sizeof(err));
            if (rc == 0) {
                j->more = !logs_render(res, j->body, PIECE_BYTES);
                rc = logs_render_error(res);
                snprintf(err, sizeof(err), "out of memory rendering the answer");
                if (j->more && rc == 0) {
                    j->res = res; /* the rest comes piece by piece */
                } else {
                    logs_result_free(res);
                    j->more = false;
                }
            }
            break;
        }
        case JK_LABELS:
            rc = logs_labels(j->expr ? &j->expr->log : NULL, j->label[0] ? j->label : NULL,
                             j->rq.start_ns, j->rq.end_ns, &w);
            snprintf(err, sizeof(err), "out of memory");
            break;
        case JK_INDEX_STATS:
        case JK_VOLUME:
            j->rq.expr = j->expr;
            j->rq.cancel = &j->cancel;
            rc = logs_index(&j->rq, j->kind == JK_VOLUME ? LOGS_INDEX_VOLUME : LOGS_INDEX_STATS,
                            j->targets, j->n_targets, j->agg_labels, j->vol_limit, &w, err,
                            sizeof(err));
            break;
        case JK_DETECTED:
            rc = logs_detected_labels(j->expr ? &j->expr->log : NULL, j->rq.start_ns, j->rq.end_ns,
                                      &w);
            snprintf(err, sizeof(err), "out of memory");
            break;
        case JK_SERIES: {
            const struct logql_log *sels[MAX_PARAMS];
            for (size_t i = 0; i < j->n_sels; i++) {
                sels[i] = &j->sels[i]->log;
            }
            rc =
                logs_series(sels, j->all_streams ? 0 : j->n_sels, j->rq.start_ns, j->rq.end_ns, &w);
            snprintf(err, sizeof(err), "out of memory");
            break;
        }
        }
        if (rc == 0 && w.err < 0) {
            rc = -ENOMEM;
            snprintf(err, sizeof(err), "out of memory rendering the answer");
        }
        if (rc < 0) {
            fail_job(j, rc, err);
        }
    }
    j->msg.fn = on_done;
    iot_post(j->iot, &j->msg);
}

/* Worker: the next piece of a streamed answer. */
static void run_more(struct qpool_job *pj)
{
    struct job *j = (struct job *)pj;
    if (__atomic_load_n(&j->cancel, __ATOMIC_RELAXED)) {
        j->more = false;
    } else {
        j->more = !logs_render(j->res, j->body, PIECE_BYTES);
    }
    if (!j->more || logs_render_error(j->res) < 0) {
        /* done (or out of memory: the I/O side cuts the answer so it does
         * not look complete, rather than hang); drop the blocks here */
        if (logs_render_error(j->res) < 0) {
            j->failed = true;
            j->outcome = QS_ERROR;
        }
        j->more = false;
        logs_result_free(j->res);
        j->res = NULL;
    }
    j->msg.fn = on_done;
    iot_post(j->iot, &j->msg);
}

static void free_on_worker(struct qpool_job *pj)
{
    job_free((struct job *)pj);
}

static void submit(struct job *j)
{
    j->pj.fn = run_job;
    j->iot = iot_self();
    j->inflight = true;
    /* armed before the job is queued: the worker never touches it */
    uint64_t due = j->t0 + cfg.timeout_ms * 1000000ull, now = mono_ns();
    uint64_t left = due > now ? due - now : 0;
    struct timeval tv = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull / 1000u)};
    j->deadline = evtimer_new(j->iot->base, on_deadline, j);
    if (j->deadline == NULL || evtimer_add(j->deadline, &tv) < 0) {
        disarm(j); /* then only the executor's own check keeps the timeout */
    }
    int rc = qpool_submit(&j->pj);
    if (rc < 0) {
        http1_resp_start(j->r, 503, "text/plain; charset=utf-8");
        http1_resp_header(j->r, "Retry-After", "1");
        const char *msg = "too many queries in flight; retry later";
        evbuffer_add(http1_resp_body(j->r), msg, strlen(msg));
        qstats_query_done(j->ep, QS_OVERLOADED, mono_ns() - j->t0);
        http1_resp_end(j->r);
        disarm(j);
        job_free(j);
        return;
    }
    http1_req_on_abort(j->r, on_abort, j);
}

static struct job *job_new(struct http1_req *r, enum qs_endpoint ep, uint64_t t0)
{
    struct job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        answer_text(r, 503, "out of memory");
        qstats_query_done(ep, QS_ERROR, mono_ns() - t0);
        return NULL;
    }
    j->r = r;
    j->ep = ep;
    j->t0 = t0;
    return j;
}

/* start/end/since: Loki's defaults. */
static int range_params(const struct params *ps, uint64_t *start, uint64_t *end, char *err,
                        size_t errlen)
{
    uint64_t now = real_ns();
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

/* query_range, query, native logs */
static void handle_query(struct http1_req *r, enum qs_endpoint ep)
{
    uint64_t t0 = mono_ns();
    struct params ps;
    char err[512];
    if (params_parse(&ps, r) < 0) {
        answer_text(r, 503, "out of memory");
        return;
    }
    struct job *j = job_new(r, ep, t0);
    if (j == NULL) {
        free(ps.buf);
        return;
    }
    j->kind = JK_QUERY;
    j->native = ep == QS_EP_NATIVE_LOGS;
    struct logs_req *rq = &j->rq;
    rq->max_rows = cfg.max_rows;
    rq->max_memory = cfg.memory;
    rq->deadline_ns = t0 + cfg.timeout_ms * 1000000ull;
    const char *flags = http1_req_header(r, "X-Loki-Response-Encoding-Flags");
    rq->categorize = !j->native && flags != NULL && strstr(flags, "categorize-labels") != NULL;

    const char *v;
    rq->limit = DEFAULT_LIMIT;
    if ((v = param(&ps, "limit")) != NULL && *v != '\0') {
        char *end;
        long long l = strtoll(v, &end, 10);
        if (*end != '\0') {
            snprintf(err, sizeof(err), "invalid limit '%s'", v);
            goto bad;
        }
        if (l <= 0) {
            snprintf(err, sizeof(err), "limit must be a positive value");
            goto bad;
        }
        if (l > LOGS_MAX_ENTRIES) {
            snprintf(err, sizeof(err),
                     "max entries limit per query exceeded, limit > max_entries_limit_per_query "
                     "(%lld > %d)",
                     l, LOGS_MAX_ENTRIES);
            goto bad;
        }
        rq->limit = (uint32_t)l;
    }
    rq->forward = false;
    if ((v = param(&ps, "direction")) != NULL && *v != '\0') {
        if (strcasecmp(v, "forward") == 0) {
            rq->forward = true;
        } else if (strcasecmp(v, "backward") != 0) {
            snprintf(err, sizeof(err), "invalid direction '%s'", v);
            goto bad;
        }
    }
    if (parse_query(param(&ps, "query"), &j->expr, err, sizeof(err)) < 0) {
        goto bad;
    }
    rq->expr = j->expr;
    bool metric = logql_is_metric(j->expr);
    if (ep == QS_EP_QUERY) {
        if (!metric) {
            snprintf(err, sizeof(err),
                     "log queries are not supported as an instant query type, please change "
                     "your query to a range query type");
            goto bad;
        }
        uint64_t t = real_ns();
        if ((v = param(&ps, "time")) != NULL && *v != '\0' && parse_time(v, &t) < 0) {
            snprintf(err, sizeof(err), "could not parse 'time' parameter: invalid timestamp '%s'",
                     v);
            goto bad;
        }
        rq->instant = true;
        rq->start_ns = rq->end_ns = t;
    } else {
        if (range_params(&ps, &rq->start_ns, &rq->end_ns, err, sizeof(err)) < 0) {
            goto bad;
        }
        if (metric) {
            if (j->native) {
                snprintf(err, sizeof(err),
                         "the native logs API takes log queries only, not metric queries");
                goto bad;
            }
            uint64_t span = rq->end_ns - rq->start_ns;
            uint64_t step = span / 250 / 1000000000ull * 1000000000ull;
            if (step < 1000000000ull) {
                step = 1000000000ull;
            }
            if ((v = param(&ps, "step")) != NULL && *v != '\0' && parse_step(v, &step) < 0) {
                snprintf(err, sizeof(err),
                         "invalid parameter 'step': zero or negative query resolution step widths "
                         "are not accepted. Try a positive integer");
                goto bad;
            }
            if (span / step > LOGS_MAX_POINTS) {
                snprintf(err, sizeof(err),
                         "exceeded maximum resolution of 11,000 points per time series. Try "
                         "increasing the value of the step parameter");
                goto bad;
            }
            rq->step_ns = step;
        } else if ((v = param(&ps, "interval")) != NULL && *v != '\0') {
            if (parse_step(v, &rq->interval_ns) < 0) {
                snprintf(err, sizeof(err), "invalid parameter 'interval'");
                goto bad;
            }
        }
    }
    free(ps.buf);
    submit(j);
    return;
bad:
    free(ps.buf);
    job_free(j);
    bad_request(r, ep, t0, err);
}

static void h_query_range(struct http1_req *r)
{
    handle_query(r, QS_EP_QUERY_RANGE);
}

static void h_query(struct http1_req *r)
{
    handle_query(r, QS_EP_QUERY);
}

static void h_native(struct http1_req *r)
{
    handle_query(r, QS_EP_NATIVE_LOGS);
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

static void h_labels(struct http1_req *r)
{
    uint64_t t0 = mono_ns();
    struct params ps;
    char err[512];
    if (params_parse(&ps, r) < 0) {
        answer_text(r, 503, "out of memory");
        return;
    }
    struct job *j = job_new(r, QS_EP_LABELS, t0);
    if (j == NULL) {
        free(ps.buf);
        return;
    }
    j->kind = JK_LABELS;
    const char *path = http1_req_path(r);
    static const char pre[] = "/loki/api/v1/label/";
    if (strncmp(path, pre, sizeof(pre) - 1) == 0) {
        const char *name = path + sizeof(pre) - 1;
        const char *slash = strchr(name, '/');
        size_t n = slash ? (size_t)(slash - name) : strlen(name);
        if (n == 0 || n >= sizeof(j->label) || (slash && strcmp(slash, "/values") != 0)) {
            snprintf(err, sizeof(err), "invalid label name in the path");
            goto bad;
        }
        memcpy(j->label, name, n);
        j->label[n] = '\0';
        url_decode(j->label);
    }
    if (range_params(&ps, &j->rq.start_ns, &j->rq.end_ns, err, sizeof(err)) < 0 ||
        parse_selector(param(&ps, "query"), &j->expr, err, sizeof(err)) < 0) {
        goto bad;
    }
    free(ps.buf);
    submit(j);
    return;
bad:
    free(ps.buf);
    job_free(j);
    bad_request(r, QS_EP_LABELS, t0, err);
}

static void h_series(struct http1_req *r)
{
    uint64_t t0 = mono_ns();
    struct params ps;
    char err[512];
    if (params_parse(&ps, r) < 0) {
        answer_text(r, 503, "out of memory");
        return;
    }
    struct job *j = job_new(r, QS_EP_SERIES, t0);
    if (j == NULL) {
        free(ps.buf);
        return;
    }
    j->kind = JK_SERIES;
    if (range_params(&ps, &j->rq.start_ns, &j->rq.end_ns, err, sizeof(err)) < 0) {
        goto bad;
    }
    size_t given = 0;
    for (size_t i = 0; i < ps.n; i++) {
        if (strcmp(ps.name[i], "match[]") != 0 && strcmp(ps.name[i], "match") != 0) {
            continue;
        }
        given++;
        struct logql_expr *e;
        if (parse_selector(ps.value[i], &e, err, sizeof(err)) < 0) {
            goto bad;
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
    free(ps.buf);
    submit(j);
    return;
bad:
    free(ps.buf);
    job_free(j);
    bad_request(r, QS_EP_SERIES, t0, err);
}

/* index/stats, index/volume (FACTS.md A.5) and detected_labels. */
static void h_index(struct http1_req *r)
{
    uint64_t t0 = mono_ns();
    struct params ps;
    char err[512];
    if (params_parse(&ps, r) < 0) {
        answer_text(r, 503, "out of memory");
        return;
    }
    struct job *j = job_new(r, QS_EP_INDEX, t0);
    if (j == NULL) {
        free(ps.buf);
        return;
    }
    const char *path = http1_req_path(r);
    j->kind = strcmp(path, "/loki/api/v1/index/stats") == 0    ? JK_INDEX_STATS
              : strcmp(path, "/loki/api/v1/index/volume") == 0 ? JK_VOLUME
                                                               : JK_DETECTED;
    j->rq.max_rows = cfg.max_rows;
    j->rq.max_memory = cfg.memory;
    j->rq.deadline_ns = t0 + cfg.timeout_ms * 1000000ull;
    const char *v;
    if (range_params(&ps, &j->rq.start_ns, &j->rq.end_ns, err, sizeof(err)) < 0) {
        goto bad;
    }
    if (j->kind == JK_DETECTED) {
        if (parse_selector(param(&ps, "query"), &j->expr, err, sizeof(err)) < 0) {
            goto bad;
        }
    } else if (parse_query(param(&ps, "query"), &j->expr, err, sizeof(err)) < 0) {
        goto bad;
    } else if (logql_is_metric(j->expr)) {
        snprintf(err, sizeof(err), "parse error : only a stream selector is accepted here");
        goto bad;
    }
    j->vol_limit = 100;
    if ((v = param(&ps, "limit")) != NULL && *v != '\0') {
        char *end;
        long l = strtol(v, &end, 10);
        if (*end != '\0' || l <= 0) {
            snprintf(err, sizeof(err), "limit must be a positive value");
            goto bad;
        }
        j->vol_limit = (uint32_t)l;
    }
    if ((v = param(&ps, "aggregateBy")) != NULL && *v != '\0') {
        if (strcmp(v, "labels") == 0) {
            j->agg_labels = true;
        } else if (strcmp(v, "series") != 0) {
            snprintf(err, sizeof(err), "invalid aggregateBy '%s'", v);
            goto bad;
        }
    }
    if ((v = param(&ps, "targetLabels")) != NULL && *v != '\0') {
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
    free(ps.buf);
    submit(j);
    return;
bad:
    free(ps.buf);
    job_free(j);
    bad_request(r, QS_EP_INDEX, t0, err);
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
    cfg.timeout_ms = c->query_timeout_ms;
    cfg.max_rows = c->query_max_rows;
    cfg.memory = c->query_memory;
    int rc = qpool_start_reserve(c->query_workers, QPOOL_RESERVE, LOKI_QUEUE);
    if (rc < 0 && rc != -EALREADY) {
        return rc;
    }
    struct {
        const char *path;
        bool prefix;
        http1_handler fn;
    } routes[] = {
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
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        rc = http1_route_add(routes[i].path, routes[i].prefix, true, true, routes[i].fn);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}
