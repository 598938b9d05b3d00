/*
 * qhttp.h - the query-endpoint runner: what every query API on the HTTP/1.1
 * listener shares (Loki and the native logs API in loki.c, Tempo in
 * tempo.c; a Prometheus API plugs in the same way).
 *
 * A handler runs on the I/O thread. It reads the parameters (qhttp_params),
 * checks them, and either refuses the request (qhttp_refuse: 400 and the
 * like) or hands its job to qhttp_submit. From then on the runner owns the
 * job: it queues it on the query pool (503 when full), keeps
 * --query-timeout with a timer on the I/O thread (at the deadline, if no
 * answer has started, it answers 504 and sets the job's cancel flag), runs
 * the handler's |run| on a worker, posts the result back to the I/O thread
 * the request came from, streams the answer in pieces (each further piece
 * rendered by |more| on a worker, queued ahead of new queries: no query
 * renders on an I/O thread), sets the cancel flag when the client leaves,
 * counts the query in qstats once (before its answer leaves, so a client
 * that reads /metrics afterwards sees it), and frees the job with |free|.
 *
 * ERRORS. One table maps an error code to the qstats outcome, the status
 * each API answers, Prometheus' errorType and a default message:
 *
 *   code        outcome      Loki Tempo Prom errorType    when
 *   -EINVAL     bad_request   400  400  400 bad_data     bad parameter, parse/pipeline error
 *   -E2BIG      limit         400  422  422 execution    over --query-max-rows, a count limit
 *   -ENOMEM     limit         422  422  422 execution    over --query-memory
 *   -EDOM       bad_request   422  422  422 execution    a query that fails to evaluate (PromQL's
 *                                                     many-to-many matching, duplicate label sets)
 *   -ENOENT     ok            404  404  404 not_found    nothing by that id (a trace)
 *   -ETIMEDOUT  timeout       504  504  503 timeout      past --query-timeout
 *   -ECANCELED  canceled      499  499  503 canceled     the client left (sees no answer)
 *   -EAGAIN     overloaded    503  503  503 unavailable  pool queue full; Retry-After: 1
 *   -ENOBUFS    error         503  503  503 unavailable  out of memory before the query ran
 *   -EBUSY      overloaded    503  503  503 unavailable  over the open queries' memory bound
 *                                                     (qctx_answer_rc: other queries' memory
 *                                                     is the cause); Retry-After: 1
 *   any other   error         500  500  500 internal
 *
 * Where Loki and Tempo disagreed, each keeps the status its tests assert:
 * -E2BIG is 400 for Loki (loki_test query_limits; Loki itself answers 400
 * for its limit errors, FACTS.md A) and 422 for Tempo (tempo_test
 * max_rows; so does -ENOMEM, as Loki's 422 for --query-memory). The
 * Prometheus column is Prometheus 2.x (PROMQL.md A.5); a queue-full 503
 * is ours. Out of memory on the request path is a 503 refusal (STYLE.md 3)
 * for both, where Tempo answered 500.
 *
 * An API chooses the body of its error answers (struct qhttp_dialect):
 * Loki and Tempo send the message as plain text; a Prometheus dialect
 * writes {"status":"error","errorType":<type>,"error":<msg>}.
 *
 * Threads: qhttp_start from main before the I/O threads start; handlers,
 * qhttp_submit, qhttp_refuse and qhttp_fail on an I/O thread; |run| and
 * |more| on a worker; |free| on any thread.
 */
#ifndef MIRADB_QHTTP_H
#define MIRADB_QHTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/pool.h"
#include "query/qstats.h"
#include "server/iot.h"

struct config;
struct event;
struct evbuffer;
struct http1_req;

/* ---- limits and the pool ---- */

struct qhttp_limits {
    uint64_t timeout_ms; /* --query-timeout (0: none) */
    uint64_t max_rows;   /* --query-max-rows */
    uint64_t max_memory; /* --query-memory */
};

/* Keeps |c|'s query limits and starts the query pool (--query-workers, the
 * reserve) if nothing started it yet. Call before the I/O threads start;
 * calling it again is harmless. 0 or -errno from the pool. */
int qhttp_start(const struct config *c);
/* The limits qhttp_start kept. Any thread. */
const struct qhttp_limits *qhttp_limits(void);

struct qhttp_route {
    const char *path; /* a literal */
    bool prefix;      /* matches every path that starts with it */
    void (*fn)(struct http1_req *r);
};

/* qhttp_start, then adds the |n| routes for GET (and POST, a form body,
 * when |post|). 0, or -errno (-ENOSPC: the route table is full). */
int qhttp_register(const struct config *c, const struct qhttp_route *routes, size_t n, bool post);

/* ---- the error table ---- */

enum qhttp_api {
    QHTTP_LOKI = 0, /* Loki and the native logs API */
    QHTTP_TEMPO,
    QHTTP_PROM,
};
#define QHTTP_API_COUNT 3

struct qhttp_error {
    int rc; /* -errno; 0 in the last row, which answers every other code */
    enum qs_outcome outcome;
    int status[QHTTP_API_COUNT]; /* by enum qhttp_api */
    bool retry_after;            /* the answer carries Retry-After: 1 */
    const char *type;            /* Prometheus errorType */
    const char *msg;             /* the text when the failure came with none */
};

/* The row for |rc| (the last row for a code not in the table). Never NULL;
 * a static entry. */
const struct qhttp_error *qhttp_error_of(int rc);

/* How one API answers errors. Static, shared by its endpoints. */
struct qhttp_dialect {
    enum qhttp_api api;      /* its status column */
    const char *timeout_msg; /* text of the 504 the deadline timer sends (NULL: the table's) */
    const char *error_ctype; /* of error answers (NULL: text/plain; charset=utf-8) */
    /* Appends an error body for |e| with text |msg| (never NULL or empty)
     * to |b|. NULL: |msg| as it is. Any thread. */
    void (*error_body)(struct evbuffer *b, const struct qhttp_error *e, const char *msg);
};

/* Appends |d|'s error body for |e| to |b| (|msg| NULL or "": e->msg);
 * returns its Content-Type. Any thread. */
const char *qhttp_error_write(const struct qhttp_dialect *d, struct evbuffer *b,
                              const struct qhttp_error *e, const char *msg);

/* ---- parameters ---- */

#define QHTTP_MAX_PARAMS 64

/* Form parameters, decoded ('+' and %XX). Names and values are
 * NUL-terminated and borrowed from |buf|: valid until qhttp_params_fini. A
 * value may hold a NUL from %00: |value_len| has its decoded length. Past
 * QHTTP_MAX_PARAMS, further parameters are dropped. */
struct qhttp_params {
    char *buf;
    size_t n;
    const char *name[QHTTP_MAX_PARAMS];
    const char *value[QHTTP_MAX_PARAMS];
    size_t name_len[QHTTP_MAX_PARAMS];
    size_t value_len[QHTTP_MAX_PARAMS];
};

/* Parses |query| ("a=1&b=2", as sent) and then |form| (|form_len| bytes of
 * a form body; may be NULL). 0, or -ENOMEM (then nothing to fini). */
int qhttp_params_parse(struct qhttp_params *ps, const char *query, const void *form,
                       size_t form_len);
/* The query string and, for a POST with a form body
 * (application/x-www-form-urlencoded or no Content-Type), the body. */
int qhttp_params_of_req(struct qhttp_params *ps, struct http1_req *r);
void qhttp_params_fini(struct qhttp_params *ps);
/* The first value named |name|, or NULL; *len (if |len|) its length. */
const char *qhttp_param(const struct qhttp_params *ps, const char *name, size_t *len);
/* An unsigned decimal parameter: 0 absent (*v untouched), 1 set, -1
 * malformed (empty, a sign, junk, overflow). */
int qhttp_param_u64(const struct qhttp_params *ps, const char *name, uint64_t *v);
/* Percent-decodes |n| bytes of |s| in place ('+' as a space when |form|)
 * and NUL-terminates it; the decoded length. */
size_t qhttp_url_decode(char *s, size_t n, bool form);

/* ---- jobs ---- */

/* What |run| produces: the start of the answer. */
struct qhttp_answer {
    int status;            /* 200 unless |run| sets it */
    const char *ctype;     /* "application/json" unless set; a literal */
    struct evbuffer *body; /* the first piece: append to it */
    char warning[256];     /* sent as X-MiraDB-Warning when not empty */
    char err[512];         /* on failure, the message ("": the table's) */
};

struct qhttp_job;

struct qhttp_ops {
    const struct qhttp_dialect *dialect;
    /* Worker: runs the query and renders the first piece into a->body. 1
     * when more pieces follow (|more| renders them), 0 when the answer is
     * complete, or -errno (a->err says why): the body is dropped and the
     * error answered by the table. Not called if the job was canceled
     * while queued. */
    int (*run)(struct qhttp_job *j, struct qhttp_answer *a);
    /* Worker: appends the next piece to |body|. 1 more follow, 0 done, or
     * -errno: the answer is cut (http1_resp_abort) and counted an error.
     * Release what holds blocks before returning <= 0. May be NULL when
     * |run| never returns 1. */
    int (*more)(struct qhttp_job *j, struct evbuffer *body);
    /* Frees the handler's job (the struct embedding |j|). Any thread. */
    void (*free)(struct qhttp_job *j);
};

/*
 * One request's runner state, embedded in the handler's job struct.
 * Handlers read |ep|, |t0| and |cancel| (give &cancel to the executor,
 * which polls it); the rest is qhttp.c's: owned by the I/O thread, or by
 * the pool while a job is queued or running (the I/O thread hands it over
 * with qpool_submit and gets it back through iot_post).
 */
struct qhttp_job {
    enum qs_endpoint ep;
    uint64_t t0; /* CLOCK_MONOTONIC ns: the handler started */
    int cancel;  /* atomic: nonzero stops the query */
    /* private */
    const struct qhttp_ops *ops;
    struct qpool_job pj;
    struct iot_msg msg;
    struct iot *iot;
    struct http1_req *r;    /* NULL once answered at the deadline or the client left */
    struct event *deadline; /* I/O thread: armed until the first piece */
    struct qhttp_answer a;
    enum qs_outcome outcome;
    bool inflight;  /* I/O thread: queued, running, or posted back */
    bool started;   /* I/O thread: the status line went out */
    bool more;      /* another piece follows */
    bool failed;    /* a later piece failed: the answer is cut */
    bool retry;     /* the error answer carries Retry-After */
    bool aborted;   /* I/O thread: the client left */
    bool timed_out; /* I/O thread: the deadline timer answered 504 */
};

/* Starts |j|'s clock; call first in the handler. */
void qhttp_job_init(struct qhttp_job *j, const struct qhttp_ops *ops, enum qs_endpoint ep);
/* t0 + --query-timeout (CLOCK_MONOTONIC), or 0 with no timeout. */
uint64_t qhttp_deadline_ns(const struct qhttp_job *j);

/* Runs |j| for |r| (see the top); takes |j| whatever happens. */
void qhttp_submit(struct http1_req *r, struct qhttp_job *j);
/* Answers |r| now with the error for |rc| (|msg| NULL or "": the table's
 * text), counts it, and frees |j|; takes |j|. */
void qhttp_refuse(struct http1_req *r, struct qhttp_job *j, int rc, const char *msg);
/* As qhttp_refuse for a request that has no job (its allocation failed,
 * or it was refused before one was made); counted with latency 0. */
void qhttp_fail(struct http1_req *r, const struct qhttp_dialect *d, enum qs_endpoint ep, int rc,
                const char *msg);

#endif
