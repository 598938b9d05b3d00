/*
 * tempo.c - Tempo HTTP endpoints (see tempo.h; shapes in FACTS.md D).
 *
 * One request = one struct treq, owned by exactly one side at a time: the
 * I/O thread (handler, answer, more-callback, abort) or the pool (a job
 * running the query or rendering the next piece). The I/O thread hands it
 * to the pool with qpool_submit and gets it back through iot_post; only
 * the I/O thread reads |in_pool|, so an abort can tell whether it may free
 * the request now or must leave that to the answer that is on its way
 * (it sets |cancel|, which the running query polls).
 *
 * --query-timeout is kept by the I/O thread too: a timer armed when the
 * query is handed to the pool answers 504 at the deadline if the pool has
 * not answered by then (the query queued behind others, or the worker in
 * a long stretch between two checks) and sets |cancel|; the answer that
 * comes back later is only freed. Every piece of a streamed answer after
 * the first is queued ahead of new queries (qpool_submit_urgent), so no
 * piece is ever rendered on the I/O thread.
 */
#include "server/tempo.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "query/jsonw.h"
#include "query/pool.h"
#include "query/qlex.h"
#include "query/qstats.h"
#include "query/traceql.h"
#include "query/traces.h"
#include "server/config.h"
#include "server/http1.h"
#include "server/iot.h"
#include "server/log.h"

/* Bytes of a trace rendered per pool job. */
#define TRACE_CHUNK (256u << 10)
/* Jobs the pool queues before refusing (503). */
#define POOL_QUEUE 256

static struct {
    uint64_t timeout_ms;
    uint64_t max_rows;
    uint64_t max_memory;
} lims;

enum treq_kind {
    TK_TRACE,
    TK_SEARCH,
    TK_TAGS,
    TK_TAG_VALUES,
};

struct treq {
    struct qpool_job job;
    struct iot_msg msg;
    struct iot *iot;
    struct http1_req *r; /* NULL once the client left */
    enum treq_kind kind;
    enum qs_endpoint ep;
    uint64_t t0;
    bool in_pool;  /* I/O thread only */
    bool aborted;   /* I/O thread only */
    bool timed_out; /* I/O thread: the deadline timer answered 504 */
    int cancel;     /* atomic: polled by the query */
    struct event *deadline; /* I/O thread: armed until the first answer */
    bool answered; /* the status line went out */
    bool done;     /* the body is complete */
    bool failed;   /* done, but the rendering failed after the status line went out */
    /* the answer the pool produced */
    int status;
    const char *ctype;
    struct evbuffer *body;
    enum qs_outcome outcome;
    char warn[256];
    /* trace by id */
    uint8_t id[16];
    enum traces_fmt fmt;
    struct traces_trace *trace;
    /* search and tags */
    struct traceql_expr *expr;
    struct traces_search_req sreq;
    struct traces_tags_req treq;
    char *tag;
    size_t tag_len;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- plain answers ---- */

static void answer_text(struct http1_req *r, int status, const char *text)
{
    http1_resp_start(r, status, "text/plain; charset=utf-8");
    evbuffer_add(http1_resp_body(r), text, strlen(text));
    http1_resp_end(r);
}

/* ---- URL parameters ---- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Percent-decodes |n| bytes in place ('+' as space when |form|); new length. */
static size_t url_decode(char *s, size_t n, bool form)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            s[o++] = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
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

/*
 * The decoded value of query parameter |name| (first occurrence), returned
 * owned (free), or NULL when absent. *len gets its length.
 */
static char *qparam(const char *query, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    const char *p = query;
    while (p != NULL && *p != '\0') {
        const char *amp = strchr(p, '&');
        size_t seg = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', seg);
        size_t kl = eq ? (size_t)(eq - p) : seg;
        char key[64];
        if (kl < sizeof(key)) {
            memcpy(key, p, kl);
            size_t k2 = url_decode(key, kl, true);
            if (k2 == nl && memcmp(key, name, nl) == 0) {
                size_t vl = eq ? seg - kl - 1 : 0;
                char *v = malloc(vl + 1);
                if (v == NULL) {
                    return NULL;
                }
                memcpy(v, eq ? eq + 1 : "", vl);
                *len = url_decode(v, vl, true);
                return v;
            }
        }
        p = amp ? amp + 1 : NULL;
    }
    return NULL;
}

/* Unsigned integer parameter: 0 absent (*v untouched), 1 set, -1 malformed. */
static int qparam_u64(const char *query, const char *name, uint64_t *v)
{
    size_t n;
    char *s = qparam(query, name, &n);
    if (s == NULL) {
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    int rc = (n == 0 || *end != '\0' || errno != 0 || s[0] == '-') ? -1 : 1;
    free(s);
    if (rc == 1) {
        *v = x;
    }
    return rc;
}

/* ---- the request's life ---- */

/* Any thread: |deadline| is gone by then (disarm on the I/O thread). */
static void treq_free(struct treq *t)
{
    traces_trace_free(t->trace);
    traceql_free(t->expr);
    if (t->body != NULL) {
        evbuffer_free(t->body);
    }
    free(t->tag);
    free(t);
}

static void treq_finish(struct treq *t)
{
    qstats_query_done(t->ep, t->aborted ? QS_CANCELED : t->outcome, mono_ns() - t->t0);
    treq_free(t);
}

static void on_more(struct http1_req *r, void *arg);
static void on_answer(struct iot_msg *m);

/* I/O thread. */
static void disarm(struct treq *t)
{
    if (t->deadline != NULL) {
        event_free(t->deadline);
        t->deadline = NULL;
    }
}

/* I/O thread: the deadline passed and the pool has not answered. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct treq *t = arg;
    (void)fd, (void)what;
    disarm(t);
    if (!t->in_pool || t->answered || t->aborted || t->r == NULL) {
        return;
    }
    __atomic_store_n(&t->cancel, 1, __ATOMIC_RELAXED);
    t->timed_out = true;
    qstats_query_done(t->ep, QS_TIMEOUT, mono_ns() - t->t0); /* counted before it leaves */
    answer_text(t->r, 504, "query timed out (--query-timeout)"); /* drops the abort callback */
    t->r = NULL;
}

static void on_abort(void *arg)
{
    struct treq *t = arg;
    t->r = NULL;
    t->aborted = true;
    __atomic_store_n(&t->cancel, 1, __ATOMIC_RELAXED);
    disarm(t);
    if (!t->in_pool) {
        treq_finish(t);
    }
}

static void job_run(struct qpool_job *j);

/* Hands |t| to the pool; false (and t stays with the caller) when full. */
static bool to_pool(struct treq *t)
{
    t->job.fn = job_run;
    t->in_pool = true;
    if (qpool_submit(&t->job) < 0) {
        t->in_pool = false;
        return false;
    }
    return true;
}

static enum qs_outcome outcome_of(int rc)
{
    switch (rc) {
    case 0:
        return QS_OK;
    case -EINVAL:
        return QS_BAD_REQUEST;
    case -E2BIG:
    case -ENOMEM:
        return QS_LIMIT;
    case -ETIMEDOUT:
        return QS_TIMEOUT;
    case -ECANCELED:
        return QS_CANCELED;
    default:
        return QS_ERROR;
    }
}

static int status_of(int rc)
{
    switch (rc) {
    case -EINVAL:
        return 400;
    case -E2BIG:
    case -ENOMEM:
        return 422;
    case -ETIMEDOUT:
        return 504;
    default:
        return 500;
    }
}

static void set_error(struct treq *t, int rc, const char *msg)
{
    evbuffer_drain(t->body, evbuffer_get_length(t->body));
    evbuffer_add(t->body, msg, strlen(msg));
    t->status = status_of(rc);
    t->ctype = "text/plain; charset=utf-8";
    t->outcome = outcome_of(rc);
    t->done = true;
}

static struct traces_limits make_limits(struct treq *t)
{
    struct traces_limits l = {
        .max_rows = lims.max_rows,
        .max_memory = lims.max_memory,
        .deadline_ns = lims.timeout_ms ? t->t0 + lims.timeout_ms * 1000000u : 0,
        .cancel = &t->cancel,
    };
    return l;
}

static void run_trace(struct treq *t)
{
    char err[256];
    int rc;
    if (t->trace == NULL) {
        struct traces_limits l = make_limits(t);
        rc = traces_find(t->id, &l, &t->trace, err, sizeof(err));
        if (rc < 0) {
            set_error(t, rc, err);
            return;
        }
        if (traces_trace_spans(t->trace) == 0) {
            t->status = 404;
            t->ctype = "text/plain; charset=utf-8";
            evbuffer_add_printf(t->body, "trace not found");
            t->outcome = QS_OK;
            t->done = true;
            return;
        }
        snprintf(t->warn, sizeof(t->warn), "%s", traces_trace_warning(t->trace));
        t->status = 200;
        t->ctype = (t->fmt == TRACES_PB_V1 || t->fmt == TRACES_PB_V2) ? "application/protobuf"
                                                                      : "application/json";
        t->outcome = QS_OK;
    }
    rc = traces_render(t->trace, t->fmt, t->body, TRACE_CHUNK);
    if (rc < 0) {
        if (!t->answered) {
            /* Nothing sent yet: an error, not the part rendered so far. */
            snprintf(err, sizeof(err), "could not render the trace: %s", strerror(-rc));
            set_error(t, rc, err);
            return;
        }
        /* Mid-answer: nothing sensible can follow; the I/O side cuts the
         * connection so the answer does not look complete. */
        t->outcome = QS_ERROR;
        t->failed = true;
        t->done = true;
        return;
    }
    t->done = rc == 0;
}

static void run_search(struct treq *t)
{
    char err[256];
    struct jsonw w;
    jsonw_init(&w, t->body);
    t->sreq.lim = make_limits(t);
    t->sreq.expr = t->expr;
    int rc = traces_search(&t->sreq, &w, NULL, err, sizeof(err));
    if (rc == 0 && w.err != 0) {
        rc = w.err;
        snprintf(err, sizeof(err), "out of memory writing the answer");
    }
    if (rc < 0) {
        set_error(t, rc, err);
        return;
    }
    t->status = 200;
    t->ctype = "application/json";
    t->outcome = QS_OK;
    t->done = true;
}

static void run_tags(struct treq *t)
{
    char err[256];
    struct jsonw w;
    jsonw_init(&w, t->body);
    t->treq.lim = make_limits(t);
    t->treq.expr = t->expr;
    int rc = t->kind == TK_TAGS
                 ? traces_tags(&t->treq, &w, err, sizeof(err))
                 : traces_tag_values(&t->treq, t->tag, t->tag_len, &w, err, sizeof(err));
    if (rc == 0 && w.err != 0) {
        rc = w.err;
        snprintf(err, sizeof(err), "out of memory writing the answer");
    }
    if (rc < 0) {
        set_error(t, rc, err);
        return;
    }
    t->status = 200;
    t->ctype = "application/json";
    t->outcome = QS_OK;
    t->done = true;
}

/* Pool side: run the query (or render the next piece), post the answer. */
static void job_run(struct qpool_job *j)
{
    struct treq *t = (struct treq *)((char *)j - offsetof(struct treq, job));
    if (!__atomic_load_n(&t->cancel, __ATOMIC_RELAXED)) {
        switch (t->kind) {
        case TK_TRACE:
            run_trace(t);
            break;
        case TK_SEARCH:
            run_search(t);
            break;
        case TK_TAGS:
        case TK_TAG_VALUES:
            run_tags(t);
            break;
        }
    }
    t->msg.fn = on_answer;
    iot_post(t->iot, &t->msg);
}

/* I/O side: send what the pool produced. */
static void on_answer(struct iot_msg *m)
{
    struct treq *t = (struct treq *)((char *)m - offsetof(struct treq, msg));
    t->in_pool = false;
    disarm(t);
    if (t->timed_out) {
        treq_free(t); /* answered and counted at the deadline */
        return;
    }
    if (t->aborted || t->r == NULL) {
        treq_finish(t);
        return;
    }
    struct http1_req *r = t->r;
    if (!t->answered) {
        http1_resp_start(r, t->status, t->ctype);
        if (t->warn[0] != '\0') {
            http1_resp_header(r, "X-MiraDB-Warning", t->warn);
        }
        t->answered = true;
    }
    evbuffer_add_buffer(http1_resp_body(r), t->body);
    if (t->done) {
        /* Counted before the answer leaves, so a client that reads /metrics
         * after the answer sees it counted. */
        qstats_query_done(t->ep, t->outcome, mono_ns() - t->t0);
        if (t->failed) {
            http1_resp_abort(r);
        } else {
            http1_resp_end(r);
        }
        treq_free(t);
        return;
    }
    http1_resp_flush(r, on_more, t);
}

static void on_more(struct http1_req *r, void *arg)
{
    struct treq *t = arg;
    /* The continuation of an admitted query: ahead of new ones, never
     * refused for room, and never rendered here on the I/O thread. */
    t->job.fn = job_run;
    t->in_pool = true;
    if (qpool_submit_urgent(&t->job) < 0) {
        /* the pool is gone (shutdown): end the answer where it is */
        t->in_pool = false;
        qstats_query_done(t->ep, QS_ERROR, mono_ns() - t->t0);
        http1_resp_end(r);
        treq_free(t);
    }
}

/* Starts a query for |r|; takes |t|. */
static void start(struct http1_req *r, struct treq *t)
{
    t->r = r;
    t->iot = iot_self();
    t->body = evbuffer_new();
    if (t->body == NULL || t->iot == NULL) {
        qstats_query_done(t->ep, QS_ERROR, 0);
        treq_free(t);
        answer_text(r, 500, "out of memory");
        return;
    }
    if (lims.timeout_ms > 0) {
        /* armed before the query is queued: the worker never touches it */
        uint64_t due = t->t0 + lims.timeout_ms * 1000000u, now = mono_ns();
        uint64_t left = due > now ? due - now : 0;
        struct timeval tv = {(time_t)(left / 1000000000u), (long)(left % 1000000000u / 1000u)};
        t->deadline = evtimer_new(t->iot->base, on_deadline, t);
        if (t->deadline == NULL || evtimer_add(t->deadline, &tv) < 0) {
            disarm(t); /* then only the query's own check keeps the timeout */
        }
    }
    if (!to_pool(t)) {
        disarm(t);
        qstats_query_done(t->ep, QS_OVERLOADED, mono_ns() - t->t0);
        treq_free(t);
        http1_resp_start(r, 503, "text/plain; charset=utf-8");
        http1_resp_header(r, "Retry-After", "1");
        evbuffer_add_printf(http1_resp_body(r), "too many queries running; retry later");
        http1_resp_end(r);
        return;
    }
    http1_req_on_abort(r, on_abort, t);
}

static struct treq *treq_new(enum treq_kind k, enum qs_endpoint ep)
{
    struct treq *t = calloc(1, sizeof(*t));
    if (t != NULL) {
        t->kind = k;
        t->ep = ep;
        t->t0 = mono_ns();
    }
    return t;
}

static void bad_request(struct http1_req *r, enum qs_endpoint ep, const char *msg)
{
    qstats_query_done(ep, QS_BAD_REQUEST, 0);
    answer_text(r, 400, msg);
}

/* ---- handlers ---- */

static void h_echo(struct http1_req *r)
{
    answer_text(r, 200, "echo");
}

static void h_buildinfo(struct http1_req *r)
{
    http1_resp_start(r, 200, "application/json");
    evbuffer_add_printf(http1_resp_body(r),
                        "{\"version\":\"" TEMPO_COMPAT_VERSION "\",\"revision\":\"miradb\","
                        "\"branch\":\"main\",\"buildUser\":\"miradb\",\"buildDate\":\"\","
                        "\"goVersion\":\"none\"}");
    http1_resp_end(r);
}

static void trace_by_id(struct http1_req *r, const char *prefix, bool v2)
{
    const char *path = http1_req_path(r);
    char idtext[128];
    size_t n = strlen(path) - strlen(prefix);
    if (n >= sizeof(idtext)) {
        bad_request(r, QS_EP_TRACE_BY_ID, "invalid trace id: more than 32 hex digits");
        return;
    }
    memcpy(idtext, path + strlen(prefix), n);
    n = url_decode(idtext, n, false);
    struct treq *t = treq_new(TK_TRACE, QS_EP_TRACE_BY_ID);
    if (t == NULL) {
        answer_text(r, 500, "out of memory");
        return;
    }
    if (traces_parse_id(idtext, n, t->id) < 0) {
        treq_free(t);
        bad_request(r, QS_EP_TRACE_BY_ID, "invalid trace id: expected 1 to 32 hexadecimal digits");
        return;
    }
    const char *accept = http1_req_header(r, "Accept");
    bool pb = accept != NULL && strstr(accept, "application/protobuf") != NULL;
    t->fmt = pb ? (v2 ? TRACES_PB_V2 : TRACES_PB_V1) : (v2 ? TRACES_JSON_V2 : TRACES_JSON_V1);
    start(r, t);
}

static void h_trace_v1(struct http1_req *r)
{
    trace_by_id(r, "/api/traces/", false);
}

static void h_trace_v2(struct http1_req *r)
{
    trace_by_id(r, "/api/v2/traces/", true);
}

/* start/end in Unix seconds: both or neither, end > start. 0 or -1 (msg set). */
static int time_range(const char *query, uint64_t *start_ns, uint64_t *end_ns, char *msg,
                      size_t cap)
{
    uint64_t s = 0, e = 0;
    int hs = qparam_u64(query, "start", &s);
    int he = qparam_u64(query, "end", &e);
    if (hs < 0 || he < 0) {
        snprintf(msg, cap, "invalid start or end: expected Unix seconds");
        return -1;
    }
    if (hs != he) {
        snprintf(msg, cap, "invalid start and end: give both or neither");
        return -1;
    }
    if (hs == 0) {
        *start_ns = 0;
        *end_ns = 0;
        return 0;
    }
    if (e <= s) {
        snprintf(msg, cap, "invalid start and end: end must be after start");
        return -1;
    }
    if (s > UINT32_MAX || e > UINT32_MAX) {
        snprintf(msg, cap, "invalid start or end: expected Unix seconds");
        return -1;
    }
    *start_ns = s * 1000000000u;
    *end_ns = e * 1000000000u;
    return 0;
}

/* Parses TraceQL |q| into t->expr; on error fills msg (the 400 text). */
static int parse_q(struct treq *t, const char *q, size_t n, char *msg, size_t cap)
{
    char err[256];
    if (traceql_parse(q, n, &t->expr, err, sizeof(err)) < 0) {
        snprintf(msg, cap, "invalid TraceQL query: %s", err);
        return -1;
    }
    return 0;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') {
            return false;
        }
    }
    return true;
}

/* Appends |s| to |b| as the body of a TraceQL string literal holding a
 * regex that matches |s| literally. */
static void add_re_literal(struct evbuffer *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\0' && strchr("\\.+*?()|[]{}^$", c) != NULL) {
            evbuffer_add(b, "\\\\", 2); /* regex escape, itself escaped in the string */
        }
        if (c == '"' || c == '\\') {
            evbuffer_add(b, "\\", 1);
        }
        evbuffer_add(b, &c, 1);
    }
}

/*
 * The legacy search parameters (FACTS.md D.3) as one TraceQL spanset:
 * tags "k=v k2=\"v 2\"" (logfmt) become case-insensitive substring matches
 * on the attribute (span first, then resource), minDuration/maxDuration
 * (Go durations) bounds on the span duration. Returns the query text
 * (owned, free), or NULL with msg set.
 */
static char *legacy_query(const char *tags, size_t tn, const char *minq, const char *maxq,
                          char *msg, size_t cap)
{
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) {
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    int64_t mn = -1, mx = -1;
    if ((minq != NULL && qlex_parse_duration(minq, strlen(minq), false, &mn) < 0) ||
        (maxq != NULL && qlex_parse_duration(maxq, strlen(maxq), false, &mx) < 0)) {
        snprintf(msg, cap, "invalid minDuration or maxDuration: expected a duration such as 100ms");
        evbuffer_free(b);
        return NULL;
    }
    if (mn >= 0 && mx >= 0 && mn > mx) {
        snprintf(msg, cap, "invalid maxDuration: must not be less than minDuration");
        evbuffer_free(b);
        return NULL;
    }
    evbuffer_add_printf(b, "{ true");
    size_t i = 0;
    while (tags != NULL && i < tn) {
        while (i < tn && tags[i] == ' ') {
            i++;
        }
        if (i == tn) {
            break;
        }
        size_t k0 = i;
        while (i < tn && tags[i] != '=' && tags[i] != ' ') {
            i++;
        }
        size_t k1 = i;
        const char *v = "";
        size_t vn = 0;
        if (i < tn && tags[i] == '=') {
            i++;
            if (i < tn && tags[i] == '"') {
                v = tags + ++i;
                while (i < tn && tags[i] != '"') {
                    i++;
                }
                vn = (size_t)(tags + i - v);
                i += i < tn;
            } else {
                v = tags + i;
                while (i < tn && tags[i] != ' ') {
                    i++;
                }
                vn = (size_t)(tags + i - v);
            }
        }
        if (k1 == k0) {
            continue;
        }
        evbuffer_add_printf(b, " && .\"");
        for (size_t k = k0; k < k1; k++) {
            if (tags[k] == '"' || tags[k] == '\\') {
                evbuffer_add(b, "\\", 1);
            }
            evbuffer_add(b, tags + k, 1);
        }
        evbuffer_add_printf(b, "\" =~ \"(?i).*");
        add_re_literal(b, v, vn);
        evbuffer_add_printf(b, ".*\"");
    }
    if (mn >= 0) {
        evbuffer_add_printf(b, " && duration >= %lldns", (long long)mn);
    }
    if (mx >= 0) {
        evbuffer_add_printf(b, " && duration <= %lldns", (long long)mx);
    }
    evbuffer_add_printf(b, " }");
    size_t len = evbuffer_get_length(b);
    char *out = malloc(len + 1);
    if (out != NULL) {
        evbuffer_remove(b, out, len);
        out[len] = '\0';
    }
    evbuffer_free(b);
    return out;
}

static void h_search(struct http1_req *r)
{
    const char *query = http1_req_query(r);
    char msg[400];
    struct treq *t = treq_new(TK_SEARCH, QS_EP_TRACE_SEARCH);
    if (t == NULL) {
        answer_text(r, 500, "out of memory");
        return;
    }
    size_t qn = 0, tn = 0;
    char *q = qparam(query, "q", &qn);
    char *tags = qparam(query, "tags", &tn);
    uint64_t limit = TRACES_DEFAULT_LIMIT, spss = TRACES_DEFAULT_SPSS;
    int lr = qparam_u64(query, "limit", &limit);
    int sr = qparam_u64(query, "spss", &spss);
    msg[0] = '\0';
    if (q != NULL && tags != NULL && !blank(q, qn) && !blank(tags, tn)) {
        snprintf(msg, sizeof(msg), "invalid request: q and tags are mutually exclusive");
    } else if (lr < 0 || (lr > 0 && limit == 0)) {
        snprintf(msg, sizeof(msg), "invalid limit: expected a positive integer");
    } else if (sr < 0 || spss > TRACES_MAX_SPSS) {
        snprintf(msg, sizeof(msg), "invalid spss: expected an integer up to %d", TRACES_MAX_SPSS);
    } else if (time_range(query, &t->sreq.start_ns, &t->sreq.end_ns, msg, sizeof(msg)) == 0) {
        size_t n1, n2;
        char *minq = qparam(query, "minDuration", &n1);
        char *maxq = qparam(query, "maxDuration", &n2);
        if (q != NULL && !blank(q, qn)) {
            parse_q(t, q, qn, msg, sizeof(msg));
        } else if ((tags != NULL && !blank(tags, tn)) || minq != NULL || maxq != NULL) {
            char *lq = legacy_query(tags, tn, minq, maxq, msg, sizeof(msg));
            if (lq != NULL) {
                parse_q(t, lq, strlen(lq), msg, sizeof(msg));
                free(lq);
            }
        }
        free(minq);
        free(maxq);
    }
    free(q);
    free(tags);
    if (msg[0] != '\0') {
        treq_free(t);
        bad_request(r, QS_EP_TRACE_SEARCH, msg);
        return;
    }
    t->sreq.limit = limit > UINT32_MAX ? UINT32_MAX : (uint32_t)limit;
    t->sreq.spss = spss == 0 ? TRACES_DEFAULT_SPSS : (uint32_t)spss;
    start(r, t);
}

static unsigned scope_bits(const char *s)
{
    static const struct {
        const char *name;
        unsigned bit;
    } tab[] = {
        {"resource", TRACES_SCOPE_RESOURCE},   {"span", TRACES_SCOPE_SPAN},
        {"intrinsic", TRACES_SCOPE_INTRINSIC}, {"event", TRACES_SCOPE_EVENT},
        {"link", TRACES_SCOPE_LINK},           {"instrumentation", TRACES_SCOPE_INSTRUMENTATION},
    };
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
        if (strcmp(s, tab[i].name) == 0) {
            return tab[i].bit;
        }
    }
    return 0;
}

/* Common parameters of the tag endpoints. 0, or -1 with msg set. */
static int tags_params(struct treq *t, const char *query, bool v2, char *msg, size_t cap)
{
    uint64_t limit = 0;
    if (qparam_u64(query, "limit", &limit) < 0) {
        snprintf(msg, cap, "invalid limit: expected a positive integer");
        return -1;
    }
    t->treq.limit = limit > TRACES_TAGS_MAX ? TRACES_TAGS_MAX : (uint32_t)limit;
    t->treq.v2 = v2;
    if (time_range(query, &t->treq.start_ns, &t->treq.end_ns, msg, cap) < 0) {
        return -1;
    }
    size_t n;
    char *scope = qparam(query, "scope", &n);
    if (scope != NULL && n > 0 && strcmp(scope, "all") != 0) {
        t->treq.scopes = scope_bits(scope);
        if (t->treq.scopes == 0) {
            snprintf(msg, cap, "invalid scope: %.64s", scope);
            free(scope);
            return -1;
        }
    }
    free(scope);
    char *q = qparam(query, "q", &n);
    if (q != NULL && !blank(q, n)) {
        char ignored[8];
        /* Grafana sends partial queries while typing: an unparsable q is
         * ignored, never an error (FACTS.md D.4). */
        if (parse_q(t, q, n, ignored, sizeof(ignored)) < 0) {
            t->expr = NULL;
        }
    }
    free(q);
    return 0;
}

static void tags(struct http1_req *r, bool v2)
{
    char msg[300];
    struct treq *t = treq_new(TK_TAGS, QS_EP_TRACE_TAGS);
    if (t == NULL) {
        answer_text(r, 500, "out of memory");
        return;
    }
    if (tags_params(t, http1_req_query(r), v2, msg, sizeof(msg)) < 0) {
        treq_free(t);
        bad_request(r, QS_EP_TRACE_TAGS, msg);
        return;
    }
    start(r, t);
}

static void h_tags_v1(struct http1_req *r)
{
    tags(r, false);
}

static void h_tags_v2(struct http1_req *r)
{
    tags(r, true);
}

static void tag_values(struct http1_req *r, const char *prefix, bool v2)
{
    const char *path = http1_req_path(r) + strlen(prefix);
    const char *slash = strstr(path, "/values");
    char msg[300];
    if (slash == NULL || strcmp(slash, "/values") != 0 || slash == path) {
        bad_request(r, QS_EP_TRACE_TAGS, "invalid path: expected /tag/<name>/values");
        return;
    }
    struct treq *t = treq_new(TK_TAG_VALUES, QS_EP_TRACE_TAGS);
    if (t == NULL || (t->tag = strndup(path, (size_t)(slash - path))) == NULL) {
        free(t);
        answer_text(r, 500, "out of memory");
        return;
    }
    /* Grafana double-encodes the name: decode until stable. */
    size_t n = (size_t)(slash - path);
    for (int i = 0; i < 4; i++) {
        size_t m = url_decode(t->tag, n, false);
        if (m == n) {
            break;
        }
        n = m;
    }
    t->tag_len = n;
    if (tags_params(t, http1_req_query(r), v2, msg, sizeof(msg)) < 0) {
        treq_free(t);
        bad_request(r, QS_EP_TRACE_TAGS, msg);
        return;
    }
    start(r, t);
}

static void h_tag_values_v1(struct http1_req *r)
{
    tag_values(r, "/api/search/tag/", false);
}

static void h_tag_values_v2(struct http1_req *r)
{
    tag_values(r, "/api/v2/search/tag/", true);
}

int tempo_register(const struct config *c)
{
    lims.timeout_ms = c->query_timeout_ms;
    lims.max_rows = c->query_max_rows;
    lims.max_memory = c->query_memory;
    int workers = c->query_workers;
    if (workers <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        workers = n > 0 ? (int)n : 1;
    }
    int rc = qpool_start_reserve(workers, QPOOL_RESERVE, POOL_QUEUE);
    if (rc < 0 && rc != -EALREADY) {
        return rc;
    }
    static const struct {
        const char *path;
        bool prefix;
        http1_handler fn;
    } routes[] = {
        {"/api/echo", false, h_echo},
        {"/api/status/buildinfo", false, h_buildinfo},
        {"/api/traces/", true, h_trace_v1},
        {"/api/v2/traces/", true, h_trace_v2},
        {"/api/search", false, h_search},
        {"/api/search/tags", false, h_tags_v1},
        {"/api/search/tag/", true, h_tag_values_v1},
        {"/api/v2/search/tags", false, h_tags_v2},
        {"/api/v2/search/tag/", true, h_tag_values_v2},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        rc = http1_route_add(routes[i].path, routes[i].prefix, true, false, routes[i].fn);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}
