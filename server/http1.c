/*
 * http1.c - the OTLP/HTTP listener: HTTP/1.1 on each I/O thread, parsed
 * with http-parser, plus /health, /ready and /metrics (see http1.h).
 *
 * WHY NOT EVHTTP, WHY NOT BUFFEREVENTS
 * evhttp hands a request over only with its whole body, so admission
 * could not decide before the body is read (LIBS.md 1). Bufferevents
 * would work but read at most 4 KiB per readv: a 16 MiB export costs
 * ~4,000 reads and as many wake-ups. Each connection therefore has a plain
 * read event and reads with one read(2) per callback: a request's head
 * into the connection's input buffer (H1_HEAD_READ bytes, from a
 * per-thread cache, held only while there is unparsed input), the body
 * into the thread's scratch buffer (up to H1_READ_MAX, never past the end
 * of a body whose length is known). http-parser parses those bytes in
 * place and body pieces go to ingest_body_append(), which makes the one
 * copy into the request's charged buffer. Bytes the parser cannot take
 * yet (it is paused while a request waits for admission or for its
 * answer) stay in, or are moved to, the input buffer; reading stops until
 * they are used, so at most one read's worth per connection is held
 * outside the budget.
 * Output goes through an evbuffer written with sendmsg(MSG_NOSIGNAL)
 * (no SIGPIPE whatever main does with signals); large bodies are moved
 * into it by chain, never copied twice.
 *
 * ONE REQUEST AT A TIME
 * A connection is in one state (enum conn_state). After a request's
 * headers the parser is paused until the request is admitted; after the
 * whole request it is paused until the answer has been written, so
 * pipelined requests are answered in order and the next one is not even
 * parsed before. Everything that parses, writes or decides what comes
 * next happens in conn_run(), which is never re-entered (a call made
 * while it runs returns at once: the running loop looks at the state
 * again before it stops), and which handles at most H1_REQS_PER_RUN
 * pipelined requests before yielding to other connections.
 *
 * OTLP EXPORT
 *   headers complete: route, Content-Type (415), Content-Encoding (415),
 *     Transfer-Encoding (501), ingest_req_new + ingest_admit, pause;
 *   admission callback: refused -> answer + close (the body was not read
 *     and must not be parsed as a next request); admitted -> "100
 *     Continue" if the client asked, resume;
 *   body pieces -> ingest_body_append (-E2BIG 413, -ENOBUFS 503; close);
 *   message complete -> ingest_finish, pause; the result callback answers.
 * An error body is a google.rpc.Status in the request's format.
 *
 * TLS, TOKENS, BROWSERS
 * With TLS on (tls.h) each connection first completes its handshake,
 * driven from the same read/write events, within --tls-handshake-timeout;
 * reads and writes then go through tls_read/tls_send, and the lingering
 * close sends close_notify first. OpenSSL reads ahead (tls.c), so besides
 * the one read's worth above a TLS connection may hold up to 64 KiB of
 * socket bytes inside OpenSSL while it is not reading; want_read() wakes
 * the read callback for them, as the socket will not. At headers complete, before any body
 * byte is read: a query route (not /health or /ready) refuses a Host not
 * in --allowed-hosts with 403, and every route but those two and the open
 * ones (the web UI's files) checks its token class (auth.h: 401 with
 * WWW-Authenticate). Access-Control-Allow-
 * Origin goes on an answer only for an Origin in --cors-origins (origin.h).
 *
 * TIMERS (one per connection, libevent common timeouts)
 *   idle keep-alive --idle-timeout; request line + headers --header-timeout
 *   from the first byte (slowloris); body and response writing H1_IO_S without
 *   progress; lingering close H1_LINGER_S. No timer while a request waits
 *   for admission or for its result: ingest guarantees the callback. A
 *   head or body that times out is answered 408 before the close; an
 *   export's body also has ingest's --body-timeout from its admission and
 *   its --min-receive-rate per window, whose IS_TIMEOUT callback is
 *   answered the same way. Each cut-off is logged with the peer's address.
 *
 * Closing after an error answer is a lingering close: shutdown(SHUT_WR)
 * once the answer is written, then input is read and discarded until EOF
 * or H1_LINGER_S, so the client is not sent a reset that could destroy
 * the answer before it reads it.
 */
#include "server/http1.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <http_parser.h>

#include "proto/resp.h"
#include "server/auth.h"
#include "server/config.h"
#include "server/connlim.h"
#include "server/grpc.h"
#include "server/ingest.h"
#include "server/iot.h"
#include "server/log.h"
#include "server/ops.h"
#include "server/origin.h"
#include "server/otlp_answer.h"
#include "server/stats.h"
#include "server/tls.h"

#define H1_READ_MAX (128u << 10) /* bytes per read callback */
#define H1_HEAD_READ (16u << 10) /* per read while no body is expected */
#define H1_REQS_PER_RUN 16       /* pipelined requests per conn_run */
#define H1_OUT_LOWAT (64u << 10) /* streamed answers: ask for more below this */
#define H1_IO_S 30
#define H1_LINGER_S 2
#define H1_LINGER_MAX (8u << 20) /* bytes discarded at most while lingering */
#define H1_PCACHE 64             /* free |pend| buffers of H1_HEAD_READ bytes kept per thread */
#define H1_BACKLOG 1024

/* ---- routes ---- */

#define RM_GET (1u << HTTP_GET)
#define RM_POST (1u << HTTP_POST)

struct route {
    const char *path;
    bool prefix;        /* |path| matches as a prefix (e.g. "/api/traces/") */
    unsigned methods;   /* RM_* */
    enum signal signal; /* OTLP export route when non-zero */
    http1_handler fn;   /* otherwise */
    bool open;          /* no token asked (http1_route_add_open) */
};

static void h_health(struct http1_req *r);
static void h_ready(struct http1_req *r);
static void h_metrics(struct http1_req *r);

static const struct route routes[] = {
    {"/v1/logs", false, RM_POST, SIG_LOGS, NULL},
    {"/v1/traces", false, RM_POST, SIG_TRACES, NULL},
    {"/v1/metrics", false, RM_POST, SIG_METRICS, NULL},
    {"/health", false, RM_GET, 0, h_health},
    {"/ready", false, RM_GET, 0, h_ready},
    {"/metrics", false, RM_GET, 0, h_metrics},
};

/* ---- state ---- */

enum conn_state {
    CS_IDLE,   /* between requests; nothing of the next one read yet */
    CS_HEAD,   /* request line and headers */
    CS_ADMIT,  /* OTLP: waiting for admission; parser paused, not reading */
    CS_BODY,   /* reading the body */
    CS_WAIT,   /* whole request read: waiting for the export result or the handler */
    CS_RESP,   /* answer committed (or being streamed) and being written */
    CS_LINGER, /* answer written, closing: input discarded until EOF */
};

struct hdr {
    uint32_t name, val; /* offsets into hbuf, NUL-terminated there */
};

struct conn;

/* One request and its answer; reset between requests. */
struct http1_req {
    struct conn *c;
    const struct route *route;
    /* request line and headers: "url\0name\0value\0name\0value\0..." */
    char *hbuf;
    uint32_t hlen, hcap;
    uint32_t path, query; /* offsets into hbuf */
    struct hdr *hdr;      /* grown up to --max-headers, kept between requests */
    uint16_t nhdr, hdr_cap;
    uint8_t hmode; /* 0 url, 1 header name, 2 header value */
    uint32_t head_bytes;
    /* what the headers said */
    int fmt;        /* enum otlp_fmt, or -1 */
    uint8_t coding; /* enum body_coding: Content-Encoding */
    bool expect_100;
    bool has_body;   /* the request announced a body (chunked or CL > 0) */
    bool keep_alive; /* as the client asked (http_should_keep_alive) */
    bool complete;   /* the whole request has been parsed */
    bool early;      /* answer prepared at headers complete, sent at message complete */
    /* OTLP */
    struct ingest_req *ireq;
    /* handler routes: the small body */
    char *body;
    size_t body_len, body_cap;
    /* answer */
    struct evbuffer *rhdrs; /* extra header lines */
    struct evbuffer *rbody; /* body under construction */
    int status;
    bool started;   /* http1_resp_start called */
    bool head_sent; /* status line and headers are in c->out */
    bool chunked;   /* streamed: chunked framing (or close-delimited for HTTP/1.0) */
    bool ended;     /* http1_resp_end called */
    bool close;     /* close the connection after the answer */
    http1_more_cb more;
    void *more_arg;
    void (*abort_fn)(void *arg);
    void *abort_arg;
};

struct h1_thread;

struct conn {
    struct h1_thread *th;
    struct conn *prev, *next;
    int fd;
    struct ssl_st *ssl; /* NULL: plain TCP */
    bool hs_done;       /* the TLS handshake has completed */
    struct connlim_key lim;
    enum conn_state st;
    struct event *rev, *wev, *timer;
    bool reading, writing;
    bool running, dead;
    http_parser p;
    /* input not yet parsed */
    char *pend;
    size_t pend_off, pend_len, pend_cap;
    /* the scratch bytes being parsed by this run (the thread's buffer) */
    const char *in;
    size_t in_len;
    size_t lingered;
    struct evbuffer *out; /* bytes for the socket */
    struct http1_req req;
};

struct h1_thread {
    struct iot *t;
    struct evconnlistener *lev;
    struct event *accept_retry;
    struct conn *conns;
    int nconns;
    bool quiescing;
    const struct timeval *tv_idle, *tv_head, *tv_io, *tv_linger, *tv_hs;
    char *pcache[H1_PCACHE]; /* free input buffers (memcached's rbuf cache) */
    int npcache;
    char rbuf[H1_READ_MAX];
};

static struct h1_thread threads[IOT_MAX];
/* --max-header-bytes and --max-headers, set by http1_attach */
static uint32_t max_head = 64u << 10;
static uint16_t max_headers = 100;

static void conn_run(struct conn *c);
static void conn_close(struct conn *c);
static void pend_put(struct conn *c);
static void on_ingest(struct ingest_req *ir, void *ctx);
static void log_slow(struct conn *c, const char *why);

/* ---- small helpers ---- */

static const char *reason_phrase(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Entity";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Unknown";
    }
}

static void want_read(struct conn *c, bool on)
{
    if (on != c->reading) {
        if (on) {
            event_add(c->rev, NULL);
        } else {
            event_del(c->rev);
        }
        c->reading = on;
    }
    /* Bytes waiting inside OpenSSL (decrypted or read ahead) do not make
     * the socket readable: have the read callback take them. */
    if (on && c->ssl != NULL && c->hs_done && tls_pending(c->ssl)) {
        event_active(c->rev, EV_READ, 0);
    }
}

static void want_write(struct conn *c, bool on)
{
    if (on != c->writing) {
        if (on) {
            event_add(c->wev, NULL);
        } else {
            event_del(c->wev);
        }
        c->writing = on;
    }
}

static void set_timer(struct conn *c, const struct timeval *tv)
{
    if (tv != NULL) {
        event_add(c->timer, tv);
    } else {
        event_del(c->timer);
    }
}

/* http-parser asserts when a parser in an error state is (un)paused; such a
 * parser parses nothing more anyway. */
static void parser_pause(struct conn *c, int on)
{
    enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
    if (e == HPE_OK || e == HPE_PAUSED) {
        http_parser_pause(&c->p, on);
    }
}

/* Case-insensitive compare of |s| (|n| bytes) with the NUL-terminated |lit|. */
static bool span_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

/* |v| trimmed of spaces and tabs at both ends: start in *s, length returned. */
static size_t trim(const char **s)
{
    const char *b = *s, *e = *s + strlen(*s);
    while (b < e && (*b == ' ' || *b == '\t')) {
        b++;
    }
    while (e > b && (e[-1] == ' ' || e[-1] == '\t')) {
        e--;
    }
    *s = b;
    return (size_t)(e - b);
}

/* ---- the request's header storage ---- */

static int hbuf_add(struct http1_req *r, const char *p, size_t n)
{
    if (r->hlen + n + 1 > r->hcap) {
        uint32_t cap = r->hcap ? r->hcap : 1024;
        while (cap < r->hlen + n + 1) {
            cap *= 2;
        }
        char *nb = realloc(r->hbuf, cap);
        if (nb == NULL) {
            return -ENOMEM;
        }
        r->hbuf = nb;
        r->hcap = cap;
    }
    memcpy(r->hbuf + r->hlen, p, n);
    r->hlen += (uint32_t)n;
    return 0;
}

static int hbuf_end_piece(struct http1_req *r)
{
    return hbuf_add(r, "", 1);
}

/* Room for more header entries: doubles, up to --max-headers. */
static int hdr_grow(struct http1_req *r)
{
    uint32_t cap = r->hdr_cap ? 2u * r->hdr_cap : 32u;
    if (cap > max_headers) {
        cap = max_headers;
    }
    struct hdr *nh = realloc(r->hdr, cap * sizeof(*nh));
    if (nh == NULL) {
        return -ENOMEM;
    }
    r->hdr = nh;
    r->hdr_cap = (uint16_t)cap;
    return 0;
}

const char *http1_req_header(const struct http1_req *r, const char *name)
{
    for (uint16_t i = 0; i < r->nhdr; i++) {
        if (strcasecmp(r->hbuf + r->hdr[i].name, name) == 0) {
            return r->hbuf + r->hdr[i].val;
        }
    }
    return NULL;
}

static int header_count(const struct http1_req *r, const char *name)
{
    int n = 0;
    for (uint16_t i = 0; i < r->nhdr; i++) {
        n += strcasecmp(r->hbuf + r->hdr[i].name, name) == 0;
    }
    return n;
}

const char *http1_req_method(const struct http1_req *r)
{
    return http_method_str((enum http_method)r->c->p.method);
}

const char *http1_req_path(const struct http1_req *r)
{
    return r->hbuf + r->path;
}

const char *http1_req_query(const struct http1_req *r)
{
    return r->hbuf + r->query;
}

const void *http1_req_body(const struct http1_req *r, size_t *len)
{
    *len = r->body_len;
    return r->body != NULL ? (const void *)r->body : (const void *)"";
}

/* ---- answers ---- */

void http1_resp_start(struct http1_req *r, int status, const char *content_type)
{
    r->started = true;
    r->status = status;
    if (content_type != NULL) {
        evbuffer_add_printf(r->rhdrs, "Content-Type: %s\r\n", content_type);
    }
}

void http1_resp_header(struct http1_req *r, const char *name, const char *value)
{
    evbuffer_add_printf(r->rhdrs, "%s: %s\r\n", name, value);
}

struct evbuffer *http1_resp_body(struct http1_req *r)
{
    return r->rbody;
}

void http1_req_on_abort(struct http1_req *r, void (*fn)(void *arg), void *arg)
{
    r->abort_fn = fn;
    r->abort_arg = arg;
}

/* Whether the connection must close after this answer. */
static bool must_close(const struct http1_req *r)
{
    return r->close || !r->complete || !r->keep_alive || r->c->th->quiescing;
}

/* Status line and headers into c->out; |len| < 0: streamed. */
static void resp_write_head(struct http1_req *r, long len)
{
    struct conn *c = r->c;
    bool head_method = c->p.method == HTTP_HEAD;
    r->close = must_close(r);
    evbuffer_add_printf(c->out, "HTTP/1.1 %d %s\r\n", r->status, reason_phrase(r->status));
    evbuffer_add_buffer(c->out, r->rhdrs);
    if (r->route != NULL) { /* headers complete: Origin is whole */
        const char *o = http1_req_header(r, "Origin");
        const char *acao = origin_cors(o);
        if (acao != NULL) {
            evbuffer_add_printf(c->out, "Access-Control-Allow-Origin: %s\r\n", acao);
        }
        if (o != NULL && origin_cors_varies()) {
            evbuffer_add(c->out, "Vary: Origin\r\n", 14);
        }
    }
    if (r->close) {
        evbuffer_add(c->out, "Connection: close\r\n", 19);
    } else if (c->p.http_major == 1 && c->p.http_minor == 0) {
        evbuffer_add(c->out, "Connection: keep-alive\r\n", 24);
    }
    if (len >= 0) {
        if (r->status != 204 && r->status != 304 && r->status >= 200) {
            evbuffer_add_printf(c->out, "Content-Length: %ld\r\n", head_method ? 0L : len);
        }
    } else if (c->p.http_major == 1 && c->p.http_minor >= 1) {
        r->chunked = true;
        evbuffer_add(c->out, "Transfer-Encoding: chunked\r\n", 28);
    } else {
        r->close = true; /* HTTP/1.0: the body ends with the connection */
    }
    evbuffer_add(c->out, "\r\n", 2);
    r->head_sent = true;
}

/* Moves what the body holds into c->out as one chunk (or raw for HTTP/1.0). */
static void resp_move_body(struct http1_req *r)
{
    struct conn *c = r->c;
    size_t n = evbuffer_get_length(r->rbody);
    if (n == 0) {
        return;
    }
    if (c->p.method == HTTP_HEAD) {
        evbuffer_drain(r->rbody, n);
        return;
    }
    if (r->chunked) {
        evbuffer_add_printf(c->out, "%zx\r\n", n);
        evbuffer_add_buffer(c->out, r->rbody);
        evbuffer_add(c->out, "\r\n", 2);
    } else {
        evbuffer_add_buffer(c->out, r->rbody);
    }
}

void http1_resp_flush(struct http1_req *r, http1_more_cb more, void *arg)
{
    struct conn *c = r->c;
    if (!r->head_sent) {
        resp_write_head(r, -1);
    }
    resp_move_body(r);
    r->more = more;
    r->more_arg = arg;
    c->st = CS_RESP;
    conn_run(c);
}

void http1_resp_end(struct http1_req *r)
{
    struct conn *c = r->c;
    if (!r->head_sent) {
        resp_write_head(r, (long)evbuffer_get_length(r->rbody));
        resp_move_body(r);
    } else {
        resp_move_body(r);
        if (r->chunked && c->p.method != HTTP_HEAD) {
            evbuffer_add(c->out, "0\r\n\r\n", 5);
        }
    }
    r->ended = true;
    r->more = NULL;
    r->abort_fn = NULL;
    c->st = CS_RESP;
    conn_run(c);
}

void http1_resp_abort(struct http1_req *r)
{
    struct conn *c = r->c;
    evbuffer_drain(r->rbody, evbuffer_get_length(r->rbody));
    if (!r->head_sent) {
        evbuffer_drain(r->rhdrs, evbuffer_get_length(r->rhdrs));
        r->status = 500;
        resp_write_head(r, 0);
    }
    r->close = true; /* after what is queued; no "0\r\n\r\n" */
    r->ended = true;
    r->more = NULL;
    r->abort_fn = NULL;
    c->st = CS_RESP;
    conn_run(c);
}

/*
 * Prepares an answer in |r| without sending it: an OTLP error (|code| not
 * GRPC_OK) becomes a google.rpc.Status in the request's format when the
 * request had one of ours; otherwise |text| (may be NULL) as plain text.
 */
static void prepare_answer(struct http1_req *r, int status, enum grpc_code code, const char *text,
                           int retry_after_s)
{
    uint8_t body[1024];
    long n = -1;

    if (r->fmt >= 0 && code != GRPC_OK) {
        n = resp_status((enum otlp_fmt)r->fmt, code, text, retry_after_s, body, sizeof(body));
    }
    if (n >= 0) {
        http1_resp_start(r, status,
                         r->fmt == OTLP_JSON ? "application/json" : "application/x-protobuf");
        evbuffer_add(r->rbody, body, (size_t)n);
    } else if (text != NULL) {
        http1_resp_start(r, status, "text/plain; charset=utf-8");
        evbuffer_add_printf(r->rbody, "%s\n", text);
    } else {
        http1_resp_start(r, status, NULL);
    }
    if (retry_after_s > 0) {
        evbuffer_add_printf(r->rhdrs, "Retry-After: %d\r\n", retry_after_s);
    }
}

/* Prepares and sends an answer; |close| forces Connection: close. */
static void answer(struct http1_req *r, int status, enum grpc_code code, const char *text,
                   int retry_after_s, bool close)
{
    prepare_answer(r, status, code, text, retry_after_s);
    r->close |= close;
    http1_resp_end(r);
}

/* Answers from an ingest result (otlp_answer.h has the table). */
static void answer_result(struct http1_req *r, const struct ingest_result *res, bool close)
{
    struct otlp_answer a;
    otlp_answer_of(res, &a);
    if (res->status != IS_OK) {
        /* IS_TIMEOUT: the rest of the body is unread, so close */
        answer(r, a.http_status, a.grpc_code, a.message, a.retry_after_s,
               close || res->status == IS_TIMEOUT);
        return;
    }
    uint8_t body[1024];
    enum otlp_fmt f = (enum otlp_fmt)r->fmt;
    long n = otlp_answer_export(f, r->route->signal, res, body, sizeof(body));
    if (n < 0) {
        answer(r, 500, GRPC_INTERNAL, "cannot encode the response", 0, close);
        return;
    }
    http1_resp_start(r, 200, f == OTLP_JSON ? "application/json" : "application/x-protobuf");
    evbuffer_add(r->rbody, body, (size_t)n);
    r->close |= close;
    http1_resp_end(r);
}

static void free_ireq(struct http1_req *r)
{
    if (r->ireq != NULL) {
        ingest_req_free(r->ireq);
        r->ireq = NULL;
    }
}

/* ---- the operator endpoints ---- */

static void h_health(struct http1_req *r)
{
    http1_resp_start(r, 200, "text/plain; charset=utf-8");
    evbuffer_add(http1_resp_body(r), "ok", 2);
    http1_resp_end(r);
}

static void h_ready(struct http1_req *r)
{
    char why[300];
    const char *reason = ops_not_ready_reason(why, sizeof(why));
    bool ready = reason == NULL;
    http1_resp_start(r, ready ? 200 : 503, "text/plain; charset=utf-8");
    if (!ready) {
        http1_resp_header(r, "Retry-After", "1");
    }
    evbuffer_add_printf(http1_resp_body(r), "%s", ready ? "ok" : reason);
    http1_resp_end(r);
}

static void h_metrics(struct http1_req *r)
{
    http1_resp_start(r, 200, "text/plain; version=0.0.4; charset=utf-8");
    ops_metrics_text(http1_resp_body(r));
    connlim_metrics_text(http1_resp_body(r));
    grpc_metrics_text(http1_resp_body(r));
    http1_resp_end(r);
}

/* ---- parser callbacks ---- */

static struct conn *conn_of(http_parser *p)
{
    return p->data;
}

/* Refuses the request where it stands: |why| counted, plain-text answer,
 * nothing more parsed, close. Returns 0 for the parser callback. */
static int refuse(struct conn *c, int status, enum reject_reason why, const char *text)
{
    struct http1_req *r = &c->req;
    ingest_count_rejection(c->th->t, why);
    evbuffer_drain(r->rhdrs, evbuffer_get_length(r->rhdrs));
    evbuffer_drain(r->rbody, evbuffer_get_length(r->rbody));
    r->early = false;
    r->fmt = -1;
    parser_pause(c, 1);
    answer(r, status, GRPC_OK, text, 0, true);
    return 0;
}

/* Counts header bytes; false (and answered 431) past --max-header-bytes. */
static bool head_grow(struct conn *c, size_t n)
{
    struct http1_req *r = &c->req;
    r->head_bytes += (uint32_t)n;
    if (r->head_bytes > max_head) {
        refuse(c, 431, RJ_TOO_LARGE, "request headers too large");
        return false;
    }
    return true;
}

static int on_message_begin(http_parser *p)
{
    struct conn *c = conn_of(p);
    c->st = CS_HEAD;
    set_timer(c, c->th->tv_head);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    struct conn *c = conn_of(p);
    if (!head_grow(c, n)) {
        return 0;
    }
    if (hbuf_add(&c->req, at, n) < 0) {
        return refuse(c, 503, RJ_INTERNAL, "out of memory");
    }
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    struct conn *c = conn_of(p);
    struct http1_req *r = &c->req;
    if (!head_grow(c, n + (r->hmode != 1 ? 4 : 0))) {
        return 0;
    }
    if (r->hmode != 1) {
        /* A new header: end the URL or the previous value. */
        if (r->nhdr == max_headers) {
            return refuse(c, 431, RJ_TOO_LARGE, "too many request headers");
        }
        if (r->nhdr == r->hdr_cap && hdr_grow(r) < 0) {
            return refuse(c, 503, RJ_INTERNAL, "out of memory");
        }
        if (hbuf_end_piece(r) < 0) {
            return refuse(c, 503, RJ_INTERNAL, "out of memory");
        }
        r->hdr[r->nhdr].name = r->hlen;
        r->hdr[r->nhdr].val = 0;
        r->nhdr++;
        r->hmode = 1;
    }
    if (hbuf_add(r, at, n) < 0) {
        return refuse(c, 503, RJ_INTERNAL, "out of memory");
    }
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    struct conn *c = conn_of(p);
    struct http1_req *r = &c->req;
    if (!head_grow(c, n)) {
        return 0;
    }
    if (r->hmode != 2) {
        if (hbuf_end_piece(r) < 0) {
            return refuse(c, 503, RJ_INTERNAL, "out of memory");
        }
        r->hdr[r->nhdr - 1].val = r->hlen;
        r->hmode = 2;
    }
    if (hbuf_add(r, at, n) < 0) {
        return refuse(c, 503, RJ_INTERNAL, "out of memory");
    }
    return 0;
}

/* Splits the URL into NUL-terminated path and query inside hbuf. */
static void split_url(struct http1_req *r)
{
    char *u = r->hbuf; /* the URL is the first piece */
    size_t ulen = strlen(u);
    r->path = 0;
    r->query = (uint32_t)ulen; /* the URL's NUL: "" */
    if (u[0] != '/' && u[0] != '*') {
        /* absolute-form (http://host/path?q): keep from the path on */
        struct http_parser_url pu;
        http_parser_url_init(&pu);
        if (http_parser_parse_url(u, ulen, 0, &pu) == 0 && (pu.field_set & (1u << UF_PATH))) {
            size_t off = pu.field_data[UF_PATH].off;
            memmove(u, u + off, ulen - off + 1);
            ulen -= off;
        } else {
            u[0] = '\0';
            return;
        }
    }
    char *hash = memchr(u, '#', ulen);
    if (hash != NULL) {
        *hash = '\0';
        ulen = (size_t)(hash - u);
    }
    char *q = memchr(u, '?', ulen);
    if (q != NULL) {
        *q = '\0';
        r->query = (uint32_t)(q + 1 - u);
    }
}

/* Routes other modules register before the loops start (query endpoints). */
#define H1_EXTRA_ROUTES 64
static struct route extra_routes[H1_EXTRA_ROUTES];
static size_t n_extra_routes;

static int route_add(const char *path, bool prefix, unsigned methods, http1_handler fn, bool open)
{
    if (n_extra_routes == H1_EXTRA_ROUTES) {
        return -ENOSPC;
    }
    extra_routes[n_extra_routes++] =
        (struct route){.path = path, .prefix = prefix, .methods = methods, .fn = fn, .open = open};
    return 0;
}

int http1_route_add(const char *path, bool prefix, bool get, bool post, http1_handler fn)
{
    return route_add(path, prefix, (get ? RM_GET : 0) | (post ? RM_POST : 0), fn, false);
}

int http1_route_add_open(const char *path, bool prefix, http1_handler fn)
{
    return route_add(path, prefix, RM_GET, fn, true);
}

static const struct route *match_route(const struct route *rt, size_t n, const char *path)
{
    for (size_t i = 0; i < n; i++) {
        if (rt[i].prefix ? strncmp(path, rt[i].path, strlen(rt[i].path)) == 0
                         : strcmp(path, rt[i].path) == 0) {
            return &rt[i];
        }
    }
    return NULL;
}

static const struct route *find_route(const char *path)
{
    const struct route *rt = match_route(routes, sizeof(routes) / sizeof(routes[0]), path);
    return rt != NULL ? rt : match_route(extra_routes, n_extra_routes, path);
}

static void allow_list(unsigned methods, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (methods & RM_GET) {
        strncat(buf, "GET, ", cap - strlen(buf) - 1);
    }
    if (methods & RM_POST) {
        strncat(buf, "POST, ", cap - strlen(buf) - 1);
    }
    strncat(buf, "OPTIONS", cap - strlen(buf) - 1);
}

/* -1 when the Content-Type is not one of ours. */
static int parse_format(const char *ct)
{
    if (ct == NULL) {
        return -1;
    }
    const char *semi = strchr(ct, ';');
    size_t n = semi ? (size_t)(semi - ct) : strlen(ct);
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t')) {
        n--;
    }
    while (n > 0 && (*ct == ' ' || *ct == '\t')) {
        ct++, n--;
    }
    if (span_is(ct, n, "application/x-protobuf")) {
        return OTLP_PROTOBUF;
    }
    if (span_is(ct, n, "application/json")) {
        return OTLP_JSON;
    }
    return -1;
}

/*
 * An answer decided from the headers alone (|why| < 0: not a rejection).
 * Without a body it is sent once the (empty) request is complete, keeping
 * the connection; with a body it is sent now and the connection closes
 * with the body unread. Headers already added to the answer are kept.
 */
static int answer_early(struct conn *c, int status, int why, enum grpc_code code, const char *text)
{
    struct http1_req *r = &c->req;
    if (why >= 0) {
        ingest_count_rejection(c->th->t, (enum reject_reason)why);
    }
    prepare_answer(r, status, code, text, 0);
    if (!r->has_body) {
        r->early = true; /* committed in on_message_complete */
        return 0;
    }
    parser_pause(c, 1);
    r->close = true;
    http1_resp_end(r);
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct conn *c = conn_of(p);
    struct http1_req *r = &c->req;
    char allow[64];

    /* End the last piece: the URL, or the last header value. */
    if (hbuf_end_piece(r) < 0) {
        return refuse(c, 503, RJ_INTERNAL, "out of memory");
    }
    if (r->hmode == 1) { /* a name without a value (http-parser reports "" values) */
        r->hdr[r->nhdr - 1].val = r->hlen - 1;
    }
    r->keep_alive = http_should_keep_alive(p) != 0;
    r->has_body =
        (p->flags & F_CHUNKED) || (p->content_length > 0 && p->content_length != ULLONG_MAX);
    r->fmt = parse_format(http1_req_header(r, "Content-Type"));
    const char *ex = http1_req_header(r, "Expect");
    if (ex != NULL) {
        size_t n = trim(&ex);
        r->expect_100 = span_is(ex, n, "100-continue") && p->http_major == 1 && p->http_minor >= 1;
    }
    split_url(r);
    r->route = find_route(http1_req_path(r));

    /* Transfer-Encoding other than exactly "chunked" cannot be framed. */
    if (p->uses_transfer_encoding) {
        const char *te = http1_req_header(r, "Transfer-Encoding");
        size_t n = te ? trim(&te) : 0;
        if (header_count(r, "Transfer-Encoding") != 1 || !span_is(te, n, "chunked")) {
            r->has_body = true; /* its end cannot be found: close */
            return answer_early(c, 501, RJ_UNSUPPORTED, GRPC_OK, "unsupported transfer-encoding");
        }
    }
    if (r->route == NULL) {
        return answer_early(c, 404, RJ_NOT_FOUND, GRPC_UNIMPLEMENTED, "not found");
    }
    if (p->method == HTTP_OPTIONS) {
        /* CORS preflight (browser exporters): the Access-Control-* headers
         * only for an allowed Origin (resp_write_head adds Allow-Origin);
         * a preflight carries no credentials, so no token is asked for. */
        const char *req_h = http1_req_header(r, "Access-Control-Request-Headers");
        allow_list(r->route->methods, allow, sizeof(allow));
        http1_resp_header(r, "Allow", allow);
        if (origin_cors(http1_req_header(r, "Origin")) != NULL) {
            http1_resp_header(r, "Access-Control-Allow-Methods", allow);
            http1_resp_header(r, "Access-Control-Allow-Headers",
                              req_h != NULL && *req_h != '\0'
                                  ? req_h
                                  : "Content-Type, Content-Encoding, Authorization");
            http1_resp_header(r, "Access-Control-Max-Age", "86400");
        }
        return answer_early(c, 204, -1, GRPC_OK, NULL);
    }
    if (r->route->fn != h_health && r->route->fn != h_ready) {
        /* Query routes answer only known Host names (DNS rebinding). OTLP
         * routes do not check: exporters address a server by whatever name
         * routes to it, and the Collector's receivers do not check either;
         * ingest tokens are what protects them. */
        bool ingest = r->route->signal != 0;
        if (!ingest && !origin_host_allowed(http1_req_header(r, "Host"))) {
            return answer_early(c, 403, -1, GRPC_OK,
                                "forbidden: this Host is not in --allowed-hosts");
        }
        enum auth_class k = ingest ? AUTH_INGEST : AUTH_QUERY;
        const char *az = http1_req_header(r, "Authorization");
        bool basic = false;
        enum auth_result ar =
            r->route->open ? AUTH_OK : auth_check(k, az, az ? strlen(az) : 0, &basic);
        if (ar != AUTH_OK) {
            http1_resp_header(r, "WWW-Authenticate", AUTH_CHALLENGE_BEARER);
            if (basic) {
                http1_resp_header(r, "WWW-Authenticate", AUTH_CHALLENGE_BASIC);
            }
            return answer_early(c, 401, -1, GRPC_UNAUTHENTICATED, auth_message(ar));
        }
    }
    if (p->method >= 32 || !(r->route->methods & (1u << p->method))) {
        allow_list(r->route->methods, allow, sizeof(allow));
        evbuffer_add_printf(r->rhdrs, "Allow: %s\r\n", allow);
        return answer_early(c, 405, RJ_BAD_METHOD, GRPC_UNIMPLEMENTED, "method not allowed");
    }
    if (r->route->signal == 0) {
        if (r->expect_100 && r->has_body) {
            evbuffer_add(c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        }
        c->st = CS_BODY;
        set_timer(c, c->th->tv_io);
        return 0;
    }

    /* OTLP export. */
    if (r->fmt < 0) {
        return answer_early(c, 415, RJ_UNSUPPORTED, GRPC_OK,
                            "unsupported content type: use application/x-protobuf or "
                            "application/json");
    }
    const char *ce = http1_req_header(r, "Content-Encoding");
    if (ce != NULL) {
        size_t n = trim(&ce);
        if (header_count(r, "Content-Encoding") > 1) {
            return answer_early(c, 415, RJ_UNSUPPORTED, GRPC_UNIMPLEMENTED,
                                "more than one Content-Encoding");
        }
        if (span_is(ce, n, "gzip") || span_is(ce, n, "x-gzip")) {
            r->coding = BODY_GZIP;
        } else if (span_is(ce, n, "zstd")) {
            r->coding = BODY_ZSTD;
        } else if (n != 0 && !span_is(ce, n, "identity")) {
            return answer_early(c, 415, RJ_UNSUPPORTED, GRPC_UNIMPLEMENTED,
                                "unsupported content encoding: use gzip, zstd or identity");
        }
    }
    enum transport tr = r->fmt == OTLP_JSON ? TR_HTTP_JSON : TR_HTTP;
    r->ireq = ingest_req_new(c->th->t, r->route->signal, tr, on_ingest, c);
    if (r->ireq == NULL) {
        ingest_count_rejection(c->th->t, RJ_OVERLOADED);
        answer(r, 503, GRPC_UNAVAILABLE, "out of memory, retry later", 1, true);
        parser_pause(conn_of(p), 1);
        return 0;
    }
    long expected =
        (p->flags & F_CHUNKED) || p->content_length == ULLONG_MAX
            ? -1
            : (p->content_length > (uint64_t)LONG_MAX ? LONG_MAX : (long)p->content_length);
    c->st = CS_ADMIT;
    set_timer(c, NULL);
    parser_pause(conn_of(p), 1);
    ingest_admit(r->ireq, expected);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct conn *c = conn_of(p);
    struct http1_req *r = &c->req;

    if (r->ireq != NULL) {
        int rc = ingest_body_append(r->ireq, at, n);
        if (rc < 0) {
            const struct ingest_result *res = ingest_result(r->ireq);
            struct ingest_result copy = *res;
            if (copy.status == IS_PENDING || copy.status == IS_ADMITTED || copy.status == IS_OK) {
                copy.status = rc == -E2BIG ? IS_TOO_LARGE : IS_OVERLOADED;
                copy.message[0] = '\0';
            }
            free_ireq(r);
            parser_pause(conn_of(p), 1);
            answer_result(r, &copy, true);
        }
        return 0;
    }
    if (r->early) {
        return 0; /* cannot happen: early answers are for bodiless requests */
    }
    if (r->body_len + n > HTTP1_SMALL_BODY_MAX) {
        parser_pause(conn_of(p), 1);
        return refuse(c, 413, RJ_TOO_LARGE, "request body too large");
    }
    if (r->body_len + n > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap < r->body_len + n) {
            cap *= 2;
        }
        char *nb = realloc(r->body, cap);
        if (nb == NULL) {
            parser_pause(conn_of(p), 1);
            return refuse(c, 503, RJ_INTERNAL, "out of memory");
        }
        r->body = nb;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, at, n);
    r->body_len += n;
    return 0;
}

static int on_message_complete(http_parser *p)
{
    struct conn *c = conn_of(p);
    struct http1_req *r = &c->req;

    r->complete = true;
    r->keep_alive = http_should_keep_alive(p) != 0;
    parser_pause(conn_of(p), 1);
    set_timer(c, NULL);
    if (r->early) {
        r->early = false;
        http1_resp_end(r);
        return 0;
    }
    c->st = CS_WAIT;
    if (r->ireq != NULL) {
        ingest_finish(r->ireq, (enum otlp_fmt)r->fmt, (enum body_coding)r->coding);
        return 0;
    }
    r->route->fn(r);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- ingest callback ---- */

static void on_ingest(struct ingest_req *ir, void *ctx)
{
    struct conn *c = ctx;
    struct http1_req *r = &c->req;
    const struct ingest_result *res = ingest_result(ir);

    if (c->st == CS_ADMIT) {
        if (res->status == IS_ADMITTED) {
            if (r->expect_100) {
                evbuffer_add(c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
            }
            c->st = CS_BODY;
            set_timer(c, c->th->tv_io);
            parser_pause(c, 0);
            conn_run(c);
            return;
        }
        /* Refused before the body: it stays unread, so close after. */
        struct ingest_result copy = *res;
        free_ireq(r);
        answer_result(r, &copy, true);
        return;
    }
    if (c->st == CS_WAIT) {
        struct ingest_result copy = *res;
        free_ireq(r);
        answer_result(r, &copy, false);
        return;
    }
    if (c->st == CS_BODY) {
        /* The body deadline passed or the body came too slowly
         * (IS_TIMEOUT): answer 408 and close. */
        struct ingest_result copy = *res;
        log_slow(c, copy.message);
        free_ireq(r);
        parser_pause(c, 1);
        answer_result(r, &copy, true);
        return;
    }
    log_warn("http1", "event=unexpected_ingest_callback state=%d", (int)c->st);
}

/* ---- connection life ---- */

/* A client cut off by a time or rate limit: its address goes to the log. */
static void log_slow(struct conn *c, const char *why)
{
    char peer[64];
    iot_peer_name(c->fd, peer, sizeof(peer));
    log_warn("http1", "event=slow_client_cut_off peer=%s reason=\"%s\"", peer, why);
}

static void req_reset(struct conn *c)
{
    struct http1_req *r = &c->req;
    free_ireq(r);
    /* Keep the buffers (unless one grew large), drop their contents. */
    struct http1_req keep = *r;
    evbuffer_drain(keep.rhdrs, evbuffer_get_length(keep.rhdrs));
    evbuffer_drain(keep.rbody, evbuffer_get_length(keep.rbody));
    if (keep.body_cap > (64u << 10)) {
        free(keep.body);
        keep.body = NULL;
        keep.body_cap = 0;
    }
    if (keep.hdr_cap > 128) {
        free(keep.hdr);
        keep.hdr = NULL;
        keep.hdr_cap = 0;
    }
    if (keep.hcap > (8u << 10)) {
        free(keep.hbuf);
        keep.hbuf = NULL;
        keep.hcap = 0;
    }
    memset(r, 0, sizeof(*r));
    r->c = c;
    r->hbuf = keep.hbuf;
    r->hcap = keep.hcap;
    r->hdr = keep.hdr;
    r->hdr_cap = keep.hdr_cap;
    r->body = keep.body;
    r->body_cap = keep.body_cap;
    r->rhdrs = keep.rhdrs;
    r->rbody = keep.rbody;
    r->fmt = -1;
}

static void conn_free(struct conn *c)
{
    struct h1_thread *th = c->th;
    struct http1_req *r = &c->req;

    if (r->abort_fn != NULL) {
        void (*fn)(void *) = r->abort_fn;
        r->abort_fn = NULL;
        fn(r->abort_arg);
    }
    free_ireq(r);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        th->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    th->nconns--;
    connlim_release(CL_HTTP, &c->lim);
    event_free(c->rev);
    event_free(c->wev);
    event_free(c->timer);
    tls_free(c->ssl);
    close(c->fd);
    evbuffer_free(c->out);
    evbuffer_free(r->rhdrs);
    evbuffer_free(r->rbody);
    free(r->hbuf);
    free(r->hdr);
    free(r->body);
    c->pend_len = 0;
    pend_put(c);
    free(c);
}

static void conn_close(struct conn *c)
{
    if (c->running) {
        c->dead = true;
        return;
    }
    conn_free(c);
}

/* Writes c->out; 0 (all written, or the socket is full) or -1 (gone). */
static int flush_out(struct conn *c)
{
    while (c->ssl != NULL && evbuffer_get_length(c->out) > 0) {
        if (tls_send(c->ssl, c->out) < 0) {
            return errno == EAGAIN ? 0 : -1;
        }
    }
    while (evbuffer_get_length(c->out) > 0) {
        struct evbuffer_iovec v[64];
        struct iovec iov[64];
        int n = evbuffer_peek(c->out, -1, NULL, v, 64);
        n = n < 64 ? n : 64;
        for (int i = 0; i < n; i++) {
            iov[i].iov_base = v[i].iov_base;
            iov[i].iov_len = v[i].iov_len;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        evbuffer_drain(c->out, (size_t)w);
    }
    return 0;
}

/*
 * Input buffers: a connection holds one only while it has unparsed input
 * or is reading a request's head; idle connections hold none. Buffers of
 * the standard size go back to a per-thread cache.
 */
static int pend_get(struct conn *c)
{
    struct h1_thread *th = c->th;
    if (c->pend != NULL) {
        return 0;
    }
    c->pend = th->npcache > 0 ? th->pcache[--th->npcache] : malloc(H1_HEAD_READ);
    if (c->pend == NULL) {
        return -ENOMEM;
    }
    c->pend_cap = H1_HEAD_READ;
    c->pend_off = c->pend_len = 0;
    return 0;
}

static void pend_put(struct conn *c)
{
    struct h1_thread *th = c->th;
    if (c->pend == NULL || c->pend_len > 0) {
        return;
    }
    if (c->pend_cap == H1_HEAD_READ && th->npcache < H1_PCACHE) {
        th->pcache[th->npcache++] = c->pend;
    } else {
        free(c->pend);
    }
    c->pend = NULL;
    c->pend_cap = c->pend_off = 0;
}

/* Keeps the unparsed tail of the scratch input for later. */
static int stash_input(struct conn *c, const char *p, size_t n)
{
    if (pend_get(c) < 0) {
        return -ENOMEM;
    }
    if (c->pend_len == 0) {
        c->pend_off = 0;
    }
    if (c->pend_off + c->pend_len + n > c->pend_cap) {
        if (c->pend_len > 0) {
            memmove(c->pend, c->pend + c->pend_off, c->pend_len);
        }
        c->pend_off = 0;
        if (c->pend_len + n > c->pend_cap) {
            size_t cap = c->pend_len + n < 4096 ? 4096 : c->pend_len + n;
            char *np = realloc(c->pend, cap);
            if (np == NULL) {
                return -ENOMEM;
            }
            c->pend = np;
            c->pend_cap = cap;
        }
    }
    memcpy(c->pend + c->pend_off + c->pend_len, p, n);
    c->pend_len += n;
    return 0;
}

/* Parses |n| bytes at |d|; returns how many the parser took. */
static size_t parse(struct conn *c, const char *d, size_t n)
{
    size_t used = http_parser_execute(&c->p, &settings, d, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
    if (e == HPE_PAUSED) {
        return used;
    }
    if (e == HPE_OK && used == n) {
        return used;
    }
    /* A broken request (or an Upgrade we do not speak). */
    struct http1_req *r = &c->req;
    log_debug("http1", "event=bad_request error=%s", http_errno_name(e));
    parser_pause(c, 1); /* nothing more is parsed on this connection */
    if (r->ended || (r->started && r->head_sent)) {
        r->close = true;
        return n;
    }
    if (r->ireq != NULL) {
        /* Mid-body (bad chunk framing): fail through ingest, which counts it. */
        c->st = CS_WAIT;
        r->close = true;
        set_timer(c, NULL);
        ingest_fail(r->ireq, IS_MALFORMED, "malformed HTTP request");
        return n;
    }
    if (e == HPE_HEADER_OVERFLOW) {
        refuse(c, 431, RJ_TOO_LARGE, "request headers too large");
    } else {
        refuse(c, 400, RJ_MALFORMED, "malformed HTTP request");
    }
    return n;
}

static void begin_linger(struct conn *c)
{
    c->st = CS_LINGER;
    c->pend_len = 0;
    if (c->ssl != NULL) {
        tls_close_notify(c->ssl);
    }
    shutdown(c->fd, SHUT_WR);
    want_write(c, false);
    want_read(c, true);
    set_timer(c, c->th->tv_linger);
}

static void conn_run(struct conn *c)
{
    struct http1_req *r = &c->req;
    int reqs = H1_REQS_PER_RUN, mores = H1_REQS_PER_RUN;

    if (c->running) {
        return; /* the running loop re-examines everything before it stops */
    }
    c->running = true;
    for (;;) {
        if (c->dead) {
            break;
        }
        /* 1. Output. */
        if (evbuffer_get_length(c->out) > 0 && flush_out(c) < 0) {
            c->dead = true;
            break;
        }
        size_t queued = evbuffer_get_length(c->out);
        /* 2. A streamed answer gets its next piece while little is queued. */
        if (c->st == CS_RESP && !r->ended && r->more != NULL && queued < H1_OUT_LOWAT) {
            if (mores-- == 0) {
                want_write(c, true); /* writable at once: on_write resumes */
                break;
            }
            http1_more_cb fn = r->more;
            r->more = NULL;
            fn(r, r->more_arg);
            continue;
        }
        if (queued > 0) {
            want_write(c, true);
            want_read(c, false);
            set_timer(c, c->th->tv_io); /* progress deadline, renewed by each write */
            break;
        }
        want_write(c, false);
        /* 3. The answer is out. */
        if (c->st == CS_RESP) {
            if (!r->ended) {
                set_timer(c, NULL); /* the handler answers later */
                want_read(c, false);
                break;
            }
            if (r->close) {
                begin_linger(c);
                break;
            }
            req_reset(c);
            c->st = CS_IDLE;
            set_timer(c, c->th->tv_idle);
            parser_pause(c, 0);
            if (--reqs == 0) {
                /* Pipelined requests: let other connections have a turn; the
                 * read callback picks up where this stopped. */
                if (c->in_len > 0 && stash_input(c, c->in, c->in_len) < 0) {
                    c->dead = true;
                    break;
                }
                c->in_len = 0;
                want_read(c, false);
                event_active(c->rev, EV_READ, 0);
                break;
            }
        }
        /* 4. Waiting for admission, an export result or a handler. */
        if (c->st == CS_ADMIT || c->st == CS_WAIT) {
            want_read(c, false);
            break;
        }
        if (c->st == CS_LINGER) {
            break;
        }
        /* 5. Parse what is buffered, else read more. */
        if (c->pend_len > 0) {
            size_t used = parse(c, c->pend + c->pend_off, c->pend_len);
            c->pend_off += used;
            c->pend_len -= used;
            continue;
        }
        if (c->in_len > 0) {
            size_t used = parse(c, c->in, c->in_len);
            c->in += used;
            c->in_len -= used;
            continue;
        }
        want_read(c, true);
        break;
    }
    if (!c->dead && c->in_len > 0 && c->st != CS_LINGER) {
        if (stash_input(c, c->in, c->in_len) < 0) {
            c->dead = true;
        }
    }
    c->in = NULL;
    c->in_len = 0;
    c->running = false;
    if (c->dead) {
        conn_free(c);
        return;
    }
    pend_put(c); /* when empty */
}

/* One TLS handshake step; on completion the connection waits for its first
 * request as a plain one would. */
static void handshake_step(struct conn *c)
{
    switch (tls_handshake(c->ssl, TLS_HTTP)) {
    case TLS_HS_DONE:
        c->hs_done = true;
        want_write(c, false);
        set_timer(c, c->th->tv_idle);
        want_read(c, true);
        return;
    case TLS_HS_WANT_READ:
        want_write(c, false);
        want_read(c, true);
        return;
    case TLS_HS_WANT_WRITE:
        want_read(c, false);
        want_write(c, true);
        return;
    default:
        conn_close(c);
        return;
    }
}

/* read(2), or its TLS equivalent. */
static ssize_t conn_read(struct conn *c, void *buf, size_t n)
{
    return c->ssl != NULL ? tls_read(c->ssl, buf, n) : read(c->fd, buf, n);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    struct h1_thread *th = c->th;
    ssize_t n;
    (void)what, (void)fd;

    if (c->ssl != NULL && !c->hs_done) {
        handshake_step(c);
        return;
    }
    if (!c->reading || c->pend_len > 0 ||
        (c->st != CS_IDLE && c->st != CS_HEAD && c->st != CS_BODY && c->st != CS_LINGER)) {
        conn_run(c); /* resumed after a yield (event_active), or not reading now */
        return;
    }
    if (c->st == CS_IDLE || c->st == CS_HEAD) {
        /* A request head goes into the connection's own buffer, where the
         * body bytes that follow it can wait for admission uncopied. */
        if (pend_get(c) < 0) {
            conn_close(c);
            return;
        }
        n = conn_read(c, c->pend, c->pend_cap);
        if (n > 0) {
            c->pend_off = 0;
            c->pend_len = (size_t)n;
        }
    } else {
        size_t want = H1_READ_MAX;
        if (c->st == CS_BODY && !(c->p.flags & F_CHUNKED) && c->p.content_length > 0 &&
            c->p.content_length < want) {
            want = (size_t)c->p.content_length; /* never read into the next request */
        }
        n = conn_read(c, th->rbuf, want);
        if (n > 0 && c->st == CS_BODY) {
            c->in = th->rbuf;
            c->in_len = (size_t)n;
            set_timer(c, th->tv_io);
        }
    }
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            pend_put(c);
            return;
        }
        conn_close(c);
        return;
    }
    if (n == 0) {
        /* EOF: between requests that is the normal end; mid-request or
         * mid-body the client gave up, and its request is dropped. */
        conn_close(c);
        return;
    }
    if (c->st == CS_LINGER) {
        c->lingered += (size_t)n;
        if (c->lingered > H1_LINGER_MAX) {
            conn_close(c);
        }
        return;
    }
    conn_run(c);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd, (void)what;
    if (c->ssl != NULL && !c->hs_done) {
        handshake_step(c);
        return;
    }
    conn_run(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd, (void)what;
    if (c->ssl != NULL && !c->hs_done) {
        tls_count_failure(TLS_FAIL_TIMEOUT);
        conn_close(c);
        return;
    }
    switch (c->st) {
    case CS_HEAD:
        /* Slowloris: headers did not arrive in time. */
        if (!c->req.started) {
            log_slow(c, "the request line and headers did not arrive within --header-timeout");
            c->req.fmt = -1;
            parser_pause(c, 1);
            answer(&c->req, 408, GRPC_OK, "request timeout", 0, true);
            return;
        }
        conn_close(c);
        return;
    case CS_BODY:
        /* The body stopped arriving: answer (the client learns why), then
         * close; an export's memory and queue slot go back at once. */
        if (!c->req.started) {
            if (c->req.ireq != NULL) {
                /* (counted already if ingest's own deadline just failed it) */
                if (ingest_result(c->req.ireq)->status != IS_TIMEOUT) {
                    ingest_count_rejection(c->th->t, RJ_TIMEOUT);
                }
                free_ireq(&c->req);
            }
            log_slow(c, "the request body stalled");
            parser_pause(c, 1);
            answer(&c->req, 408, GRPC_DEADLINE_EXCEEDED, "request body timeout", 0, true);
            return;
        }
        conn_close(c);
        return;
    case CS_IDLE:
    case CS_RESP:
    case CS_LINGER:
    default:
        conn_close(c);
        return;
    }
}

/* A connection past a cap: a plain one gets a 503 if the socket takes it at
 * once (it is new, so it does), a TLS one just the close. */
static void refuse_at_accept(int fd)
{
    static const char msg[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                              "Content-Type: text/plain\r\nRetry-After: 1\r\n"
                              "Content-Length: 21\r\n\r\ntoo many connections\n";
    if (!tls_enabled()) {
        ssize_t n = send(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n;
        shutdown(fd, SHUT_WR);
    }
    close(fd);
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct h1_thread *th = arg;
    int one = 1;
    struct connlim_key lim;
    (void)lev, (void)salen;

    if (th->quiescing || iot_stopping()) {
        close(fd);
        return;
    }
    if (!connlim_acquire(CL_HTTP, sa, &lim)) {
        refuse_at_accept(fd);
        return;
    }
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        connlim_release(CL_HTTP, &lim);
        close(fd);
        return;
    }
    c->lim = lim;
    c->th = th;
    c->fd = fd;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (tls_enabled()) {
        c->ssl = tls_new(TLS_HTTP, fd);
        if (c->ssl == NULL) {
            connlim_release(CL_HTTP, &lim);
            free(c);
            close(fd);
            return;
        }
    }
    c->rev = event_new(th->t->base, fd, EV_READ | EV_PERSIST, on_read, c);
    c->wev = event_new(th->t->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
    c->timer = evtimer_new(th->t->base, on_timer, c);
    c->out = evbuffer_new();
    c->req.rhdrs = evbuffer_new();
    c->req.rbody = evbuffer_new();
    if (c->rev == NULL || c->wev == NULL || c->timer == NULL || c->out == NULL ||
        c->req.rhdrs == NULL || c->req.rbody == NULL) {
        if (c->rev) {
            event_free(c->rev);
        }
        if (c->wev) {
            event_free(c->wev);
        }
        if (c->timer) {
            event_free(c->timer);
        }
        if (c->out) {
            evbuffer_free(c->out);
        }
        if (c->req.rhdrs) {
            evbuffer_free(c->req.rhdrs);
        }
        if (c->req.rbody) {
            evbuffer_free(c->req.rbody);
        }
        tls_free(c->ssl);
        connlim_release(CL_HTTP, &lim);
        free(c);
        close(fd);
        return;
    }
    http_parser_init(&c->p, HTTP_REQUEST);
    c->p.data = c;
    c->req.c = c;
    c->req.fmt = -1;
    c->st = CS_IDLE;
    c->next = th->conns;
    if (th->conns != NULL) {
        th->conns->prev = c;
    }
    th->conns = c;
    th->nconns++;
    th->t->stats.connections_accepted++;
    set_timer(c, c->ssl != NULL ? th->tv_hs : th->tv_idle);
    want_read(c, true);
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
    struct h1_thread *th = arg;
    (void)fd, (void)what;
    if (th->lev != NULL && !th->quiescing) {
        evconnlistener_enable(th->lev);
    }
}

static void on_accept_error(struct evconnlistener *lev, void *arg)
{
    struct h1_thread *th = arg;
    int err = EVUTIL_SOCKET_ERROR();
    struct timeval tv = {0, 100000};
    /* Out of descriptors: stop accepting for a moment instead of spinning. */
    log_warn("http1", "event=accept_failed errno=%d", err);
    evconnlistener_disable(lev);
    evtimer_add(th->accept_retry, &tv);
}

/* ---- the listener (http1.h) ---- */

int http1_attach(struct iot *t, int fd)
{
    const struct config *cfg = ingest_config();
    uint64_t head_ms = cfg->header_timeout_ms, idle_ms = cfg->idle_timeout_ms;
    struct timeval io = {H1_IO_S, 0}, linger = {H1_LINGER_S, 0};
    struct timeval idle = {(time_t)(idle_ms / 1000), (suseconds_t)(idle_ms % 1000 * 1000)};
    struct timeval head = {(time_t)(head_ms / 1000), (suseconds_t)(head_ms % 1000 * 1000)};
    uint64_t hs_ms = tls_handshake_timeout_ms();
    struct timeval hs = {(time_t)(hs_ms / 1000), (suseconds_t)(hs_ms % 1000 * 1000)};
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);

    if (t->idx < 0 || t->idx >= IOT_MAX) {
        close(fd);
        return -EINVAL;
    }
    struct h1_thread *th = &threads[t->idx];
    int rc = connlim_init(cfg);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    th->t = t;
    max_head = (uint32_t)cfg->max_header_bytes;
    max_headers = (uint16_t)cfg->max_headers;
    th->tv_idle = event_base_init_common_timeout(t->base, &idle);
    th->tv_head = event_base_init_common_timeout(t->base, &head);
    th->tv_io = event_base_init_common_timeout(t->base, &io);
    th->tv_linger = event_base_init_common_timeout(t->base, &linger);
    th->tv_hs = event_base_init_common_timeout(t->base, &hs);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        origin_set_listener((struct sockaddr *)&ss); /* the default --allowed-hosts */
    }
    th->accept_retry = evtimer_new(t->base, on_accept_retry, th);
    if (th->accept_retry == NULL) {
        close(fd);
        return -ENOMEM;
    }
    evutil_make_socket_nonblocking(fd);
    th->lev = evconnlistener_new(t->base, on_accept, th,
                                 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, H1_BACKLOG, fd);
    if (th->lev == NULL) {
        rc = errno ? -errno : -ENOMEM;
        event_free(th->accept_retry);
        th->accept_retry = NULL;
        close(fd);
        return rc;
    }
    evconnlistener_set_error_cb(th->lev, on_accept_error);
    return 0;
}

void http1_quiesce(struct iot *t)
{
    struct h1_thread *th = &threads[t->idx];
    th->quiescing = true;
    if (th->lev != NULL) {
        evconnlistener_free(th->lev);
        th->lev = NULL;
    }
    if (th->accept_retry != NULL) {
        event_free(th->accept_retry);
        th->accept_retry = NULL;
    }
    struct conn *c = th->conns;
    while (c != NULL) {
        struct conn *next = c->next;
        /* Nothing admitted is lost: idle connections, requests still in
         * their headers (the client retries) and finished ones go now. */
        if ((c->st == CS_IDLE && c->pend_len == 0) || c->st == CS_HEAD || c->st == CS_LINGER) {
            conn_close(c);
        }
        c = next;
    }
}

int http1_active(struct iot *t)
{
    return threads[t->idx].nconns;
}

void http1_fini(void)
{
    for (int i = 0; i < IOT_MAX; i++) {
        struct h1_thread *th = &threads[i];
        if (th->t == NULL) {
            continue;
        }
        th->quiescing = true;
        while (th->conns != NULL) {
            conn_free(th->conns);
        }
        if (th->lev != NULL) {
            evconnlistener_free(th->lev);
            th->lev = NULL;
        }
        if (th->accept_retry != NULL) {
            event_free(th->accept_retry);
            th->accept_retry = NULL;
        }
        while (th->npcache > 0) {
            free(th->pcache[--th->npcache]);
        }
        th->t = NULL;
    }
    connlim_fini();
}
