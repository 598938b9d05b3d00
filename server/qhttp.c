/*
 * qhttp.c - the query-endpoint runner (see qhttp.h).
 *
 * One request = one job, owned by exactly one side at a time: the I/O
 * thread (handler, answer, more-callback, deadline, abort) or the pool (a
 * worker running the query or rendering the next piece). Only the I/O
 * thread reads |inflight|, so an abort can tell whether it may free the job
 * now or must leave that to the answer on its way (it sets |cancel|, which
 * the running query polls). Abort, deadline and completion all run on the
 * request's I/O thread, so they need no lock between them.
 *
 * The deadline timer is armed before the job is queued (the worker never
 * touches it) and disarmed by the first answer; it answers 504 whatever
 * the worker is doing (queued behind other queries, or in a long stretch
 * between two of the executor's checks). The executor's own check usually
 * answers first, with the same status; the dialect's timeout text is the
 * executor's words, so both ways to time out read the same.
 *
 * A job whose answer was discarded (the client left, or the deadline
 * answered) is freed on a worker: it may hold blocks and the rendered
 * result, and freeing those is not the I/O thread's work.
 */
#include "server/qhttp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/clock.h"
#include "lib/hex.h"
#include "query/qctx.h"
#include "server/config.h"
#include "server/http1.h"
#include "server/log.h"

/* Jobs the pool queues before refusing (503). */
#define QHTTP_QUEUE 64

static const char TEXT_PLAIN[] = "text/plain; charset=utf-8";

static struct qhttp_limits lims = {30000, 1000000, 256u << 20};

int qhttp_start(const struct config *c)
{
    lims.timeout_ms = c->query_timeout_ms;
    lims.max_rows = c->query_max_rows;
    lims.max_memory = c->query_memory;
    /* The open queries together: the budget's query quarter (config.c's
     * --query-memory default), or one query's bound when that was set
     * larger, so that a query allowed alone is allowed. */
    uint64_t share = c->memory_budget / 4;
    qctx_set_total_memory(c->query_memory > share ? c->query_memory : share);
    qctx_set_test_held(c->test_query_held);
    int workers = c->query_workers;
    if (workers <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        workers = n > 0 ? (int)n : 1;
    }
    int rc = qpool_start_reserve(workers, QPOOL_RESERVE, QHTTP_QUEUE);
    return rc == -EALREADY ? 0 : rc;
}

const struct qhttp_limits *qhttp_limits(void)
{
    return &lims;
}

int qhttp_register(const struct config *c, const struct qhttp_route *routes, size_t n, bool post)
{
    int rc = qhttp_start(c);
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = http1_route_add(routes[i].path, routes[i].prefix, true, post, routes[i].fn);
    }
    return rc;
}

/* ---- the error table (qhttp.h has it as a table, and why) ---- */

static const char TIMEOUT_MSG[] = "query timed out (--query-timeout)";
static const char OVERLOADED_MSG[] = "too many queries in flight; retry later";
static const char SHARED_MSG[] = "the queries running now hold the server's query memory; retry "
                                 "later";

static const struct qhttp_error errors[] = {
    {-EINVAL, QS_BAD_REQUEST, {400, 400, 400}, false, "bad_data", "bad request"},
    {-E2BIG, QS_LIMIT, {400, 422, 422}, false, "execution", "the query is over a limit"},
    {-ENOMEM, QS_LIMIT, {422, 422, 422}, false, "execution", "the query is over its memory limit"},
    {-EDOM, QS_BAD_REQUEST, {422, 422, 422}, false, "execution", "the query failed to evaluate"},
    {-ENOENT, QS_OK, {404, 404, 404}, false, "not_found", "not found"},
    {-ETIMEDOUT, QS_TIMEOUT, {504, 504, 503}, false, "timeout", TIMEOUT_MSG},
    {-ECANCELED, QS_CANCELED, {499, 499, 503}, false, "canceled", "canceled"},
    {-EAGAIN, QS_OVERLOADED, {503, 503, 503}, true, "unavailable", OVERLOADED_MSG},
    {-ENOBUFS, QS_ERROR, {503, 503, 503}, false, "unavailable", "out of memory"},
    {-EBUSY, QS_OVERLOADED, {503, 503, 503}, true, "unavailable", SHARED_MSG},
    {0, QS_ERROR, {500, 500, 500}, false, "internal", "internal error"},
};

const struct qhttp_error *qhttp_error_of(int rc)
{
    size_t i = 0;
    while (errors[i].rc != 0 && errors[i].rc != rc) {
        i++;
    }
    return &errors[i];
}

const char *qhttp_error_write(const struct qhttp_dialect *d, struct evbuffer *b,
                              const struct qhttp_error *e, const char *msg)
{
    if (msg == NULL || *msg == '\0') {
        msg = e->msg;
    }
    if (d->error_body != NULL) {
        d->error_body(b, e, msg);
    } else {
        evbuffer_add(b, msg, strlen(msg));
    }
    return d->error_ctype != NULL ? d->error_ctype : TEXT_PLAIN;
}

/* I/O thread: answers |r| with the error for |rc|, counted first. */
static void answer_error(struct http1_req *r, const struct qhttp_dialect *d, enum qs_endpoint ep,
                         uint64_t latency_ns, int rc, const char *msg)
{
    const struct qhttp_error *e = qhttp_error_of(rc);
    qstats_query_done(ep, e->outcome, latency_ns);
    const char *ctype = d->error_ctype != NULL ? d->error_ctype : TEXT_PLAIN;
    http1_resp_start(r, e->status[d->api], ctype);
    if (e->retry_after) {
        http1_resp_header(r, "Retry-After", "1");
    }
    qhttp_error_write(d, http1_resp_body(r), e, msg);
    http1_resp_end(r);
}

/* ---- parameters ---- */

size_t qhttp_url_decode(char *s, size_t n, bool form)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
            s[o++] = (char)(hex_digit(s[i + 1]) << 4 | hex_digit(s[i + 2]));
            i += 2;
        } else if (s[i] == '+' && form) {
            s[o++] = ' ';
        } else {
            s[o++] = s[i];
        }
    }
    s[o] = '\0';
    return o;
}

/* Splits |s| (NUL-terminated, writable) at '&' and decodes each part. */
static void params_parse_into(struct qhttp_params *ps, char *s)
{
    char *save = NULL;
    for (char *tok = strtok_r(s, "&", &save); tok != NULL; tok = strtok_r(NULL, "&", &save)) {
        if (ps->n == QHTTP_MAX_PARAMS) {
            return;
        }
        char *eq = strchr(tok, '=');
        char *v = tok + strlen(tok);
        if (eq != NULL) {
            *eq = '\0';
            v = eq + 1;
        }
        ps->name_len[ps->n] = qhttp_url_decode(tok, strlen(tok), true);
        ps->value_len[ps->n] = qhttp_url_decode(v, strlen(v), true);
        ps->name[ps->n] = tok;
        ps->value[ps->n] = v;
        ps->n++;
    }
}

int qhttp_params_parse(struct qhttp_params *ps, const char *query, const void *form,
                       size_t form_len)
{
    size_t ql = strlen(query);
    memset(ps, 0, sizeof(*ps));
    ps->buf = malloc(ql + 1 + (form != NULL ? form_len : 0) + 1);
    if (ps->buf == NULL) {
        return -ENOMEM;
    }
    memcpy(ps->buf, query, ql + 1);
    params_parse_into(ps, ps->buf);
    if (form != NULL) {
        char *b = ps->buf + ql + 1;
        memcpy(b, form, form_len);
        b[form_len] = '\0';
        params_parse_into(ps, b);
    }
    return 0;
}

int qhttp_params_of_req(struct qhttp_params *ps, struct http1_req *r)
{
    size_t blen = 0;
    const void *body = http1_req_body(r, &blen);
    const char *ct = http1_req_header(r, "Content-Type");
    bool form = strcmp(http1_req_method(r), "POST") == 0 && blen > 0 &&
                (ct == NULL || strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0);
    return qhttp_params_parse(ps, http1_req_query(r), form ? body : NULL, blen);
}

void qhttp_params_fini(struct qhttp_params *ps)
{
    free(ps->buf);
    ps->buf = NULL;
    ps->n = 0;
}

const char *qhttp_param(const struct qhttp_params *ps, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < ps->n; i++) {
        if (ps->name_len[i] == nl && memcmp(ps->name[i], name, nl) == 0) {
            if (len != NULL) {
                *len = ps->value_len[i];
            }
            return ps->value[i];
        }
    }
    return NULL;
}

int qhttp_param_u64(const struct qhttp_params *ps, const char *name, uint64_t *v)
{
    size_t n;
    const char *s = qhttp_param(ps, name, &n);
    if (s == NULL) {
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (n == 0 || *end != '\0' || errno != 0 || s[0] == '-') {
        return -1;
    }
    *v = x;
    return 1;
}

/* ---- jobs ---- */

void qhttp_job_init(struct qhttp_job *j, const struct qhttp_ops *ops, enum qs_endpoint ep)
{
    j->ops = ops;
    j->ep = ep;
    j->t0 = clock_mono_ns();
}

uint64_t qhttp_deadline_ns(const struct qhttp_job *j)
{
    return lims.timeout_ms ? j->t0 + lims.timeout_ms * 1000000ull : 0;
}

static struct qhttp_job *of_pool(struct qpool_job *pj)
{
    return (struct qhttp_job *)((char *)pj - offsetof(struct qhttp_job, pj));
}

/* Any thread: |deadline| is gone by then (disarm on the I/O thread). */
static void job_free(struct qhttp_job *j)
{
    if (j->a.body != NULL) {
        evbuffer_free(j->a.body);
    }
    j->ops->free(j);
}

static void free_on_worker(struct qpool_job *pj)
{
    job_free(of_pool(pj));
}

/* I/O thread: frees a job whose answer was discarded, on a worker. */
static void drop(struct qhttp_job *j)
{
    j->pj.fn = free_on_worker;
    if (qpool_submit_urgent(&j->pj) < 0) {
        job_free(j); /* the pool is gone (shutdown) */
    }
}

/* I/O thread. */
static void disarm(struct qhttp_job *j)
{
    if (j->deadline != NULL) {
        event_free(j->deadline);
        j->deadline = NULL;
    }
}

static void on_done(struct iot_msg *m);

/* Worker: back to the I/O thread. */
static void post(struct qhttp_job *j)
{
    j->msg.fn = on_done;
    iot_post(j->iot, &j->msg);
}

/* Worker: the query and the first piece (or the error answer). */
static void work_first(struct qpool_job *pj)
{
    struct qhttp_job *j = of_pool(pj);
    struct qhttp_answer *a = &j->a;
    int rc = -ECANCELED; /* answered at the deadline (or the client left) while queued */
    if (!__atomic_load_n(&j->cancel, __ATOMIC_RELAXED)) {
        rc = j->ops->run(j, a);
    }
    j->more = rc > 0;
    j->outcome = QS_OK;
    if (rc < 0) {
        const struct qhttp_dialect *d = j->ops->dialect;
        const struct qhttp_error *e = qhttp_error_of(rc);
        evbuffer_drain(a->body, evbuffer_get_length(a->body));
        a->ctype = qhttp_error_write(d, a->body, e, a->err);
        a->status = e->status[d->api];
        j->outcome = e->outcome;
        j->retry = e->retry_after;
    }
    post(j);
}

/* Worker: the next piece of a streamed answer. */
static void work_more(struct qpool_job *pj)
{
    struct qhttp_job *j = of_pool(pj);
    int rc = -ECANCELED; /* the answer is discarded */
    if (!__atomic_load_n(&j->cancel, __ATOMIC_RELAXED)) {
        rc = j->ops->more(j, j->a.body);
    }
    j->more = rc > 0;
    if (rc < 0) {
        /* the I/O side cuts the answer so it does not look complete */
        j->failed = true;
        j->outcome = QS_ERROR;
    }
    post(j);
}

/* I/O thread: the connection took most of the last piece. */
static void on_more(struct http1_req *r, void *arg)
{
    struct qhttp_job *j = arg;
    /* The continuation of an admitted query: ahead of new ones, never
     * refused for room, and never rendered here on the I/O thread. */
    j->pj.fn = work_more;
    j->inflight = true;
    if (qpool_submit_urgent(&j->pj) < 0) {
        /* the pool is gone (shutdown): cut the answer, so that it does
         * not look complete */
        j->inflight = false;
        qstats_query_done(j->ep, QS_ERROR, clock_mono_ns() - j->t0);
        http1_resp_abort(r);
        job_free(j);
    }
}

/* I/O thread: a piece (or the whole answer, or an error) is ready. */
/* Paths never go to clients (qctx_src_fail keeps them out of warnings):
 * the log gets them. */
static void log_quarantined(void)
{
    char path[300];
    for (int i = 0; i < 16 && qctx_quarantined_next(path, sizeof(path)); i++) {
        log_warn("query", "event=block_quarantined path=%s", path);
    }
}

static void on_done(struct iot_msg *m)
{
    struct qhttp_job *j = (struct qhttp_job *)((char *)m - offsetof(struct qhttp_job, msg));
    log_quarantined();
    j->inflight = false;
    disarm(j);
    if (j->timed_out) {
        drop(j); /* answered and counted at the deadline */
        return;
    }
    if (j->aborted) {
        qstats_query_done(j->ep, QS_CANCELED, clock_mono_ns() - j->t0);
        drop(j);
        return;
    }
    if (!j->started) {
        http1_resp_start(j->r, j->a.status, j->a.ctype);
        if (j->retry) {
            http1_resp_header(j->r, "Retry-After", "1");
        }
        if (j->a.warning[0] != '\0') {
            http1_resp_header(j->r, "X-MiraDB-Warning", j->a.warning);
        }
        j->started = true;
    }
    evbuffer_add_buffer(http1_resp_body(j->r), j->a.body);
    if (j->more) {
        http1_resp_flush(j->r, on_more, j);
        return;
    }
    /* Counted before the answer leaves, so a client that reads /metrics
     * after the answer sees it counted. */
    qstats_query_done(j->ep, j->outcome, clock_mono_ns() - j->t0);
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
    struct qhttp_job *j = arg;
    (void)fd, (void)what;
    disarm(j);
    if (!j->inflight || j->started || j->aborted) {
        return; /* an answer is under way (only armed before the first piece) */
    }
    __atomic_store_n(&j->cancel, 1, __ATOMIC_RELAXED);
    j->timed_out = true;
    const struct qhttp_dialect *d = j->ops->dialect;
    /* ends the answer, which drops the abort callback: j->r is not ours now */
    answer_error(j->r, d, j->ep, clock_mono_ns() - j->t0, -ETIMEDOUT, d->timeout_msg);
    j->r = NULL;
}

/* I/O thread: the client left before the answer ended. */
static void on_abort(void *arg)
{
    struct qhttp_job *j = arg;
    j->r = NULL;
    j->aborted = true;
    __atomic_store_n(&j->cancel, 1, __ATOMIC_RELAXED);
    disarm(j);
    if (j->inflight) {
        return; /* on_done frees it */
    }
    /* waiting for the connection between two pieces */
    qstats_query_done(j->ep, QS_CANCELED, clock_mono_ns() - j->t0);
    drop(j);
}

void qhttp_submit(struct http1_req *r, struct qhttp_job *j)
{
    j->r = r;
    j->iot = iot_self();
    j->a.status = 200;
    j->a.ctype = "application/json";
    j->a.warning[0] = j->a.err[0] = '\0';
    j->a.body = evbuffer_new();
    if (j->iot == NULL || j->a.body == NULL) {
        qhttp_refuse(r, j, -ENOBUFS, NULL);
        return;
    }
    j->pj.fn = work_first;
    j->inflight = true;
    if (lims.timeout_ms > 0) {
        /* armed before the job is queued: the worker never touches it */
        uint64_t due = qhttp_deadline_ns(j), now = clock_mono_ns();
        uint64_t left = due > now ? due - now : 0;
        struct timeval tv = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull / 1000u)};
        j->deadline = evtimer_new(j->iot->base, on_deadline, j);
        if (j->deadline == NULL || evtimer_add(j->deadline, &tv) < 0) {
            disarm(j); /* then only the executor's own check keeps the timeout */
        }
    }
    if (qpool_submit(&j->pj) < 0) {
        j->inflight = false;
        disarm(j);
        qhttp_refuse(r, j, -EAGAIN, NULL);
        return;
    }
    http1_req_on_abort(r, on_abort, j);
}

void qhttp_refuse(struct http1_req *r, struct qhttp_job *j, int rc, const char *msg)
{
    answer_error(r, j->ops->dialect, j->ep, clock_mono_ns() - j->t0, rc, msg);
    job_free(j);
}

void qhttp_fail(struct http1_req *r, const struct qhttp_dialect *d, enum qs_endpoint ep, int rc,
                const char *msg)
{
    answer_error(r, d, ep, 0, rc, msg);
}
