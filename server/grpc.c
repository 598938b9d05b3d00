/*
 * grpc.c - the OTLP/gRPC listener: HTTP/2 with prior knowledge (cleartext, or TLS),
 * one nghttp2 server session per connection, on the I/O threads' event
 * bases (grpc.h).
 *
 * READING. Each connection is a plain EV_READ event on its socket, not a
 * bufferevent: a bufferevent reads at most 4 KiB per readv (LIBS.md 1), and
 * its evbuffer would be one more copy before nghttp2. Instead read(2) goes
 * into one 256 KiB buffer per I/O thread, and nghttp2_session_mem_recv()
 * consumes all of it before the next read (no callback pauses the session),
 * so the buffer is free again at once and no connection owns read memory.
 * DATA payloads are copied exactly once, from that buffer into the
 * request's charged body (ingest_body_append).
 *
 * WRITING. nghttp2_session_mem_send() frames are appended to a per
 * connection evbuffer and written with sendmsg(MSG_NOSIGNAL); above
 * OUT_HIGH unsent bytes we stop asking nghttp2 for frames and wait for
 * EV_WRITE, so a client that does not read cannot make us buffer more.
 *
 * ADMISSION AND FLOW CONTROL (DESIGN.md "Memory"). SETTINGS_INITIAL_WINDOW_SIZE
 * is ADMIT_WINDOW = 5 bytes: a new stream may send its gRPC length prefix and
 * nothing more. The prefix gives the exact message size, which goes to
 * ingest_admit(), so admission refuses an over-cap message
 * (RESOURCE_EXHAUSTED) before a byte of it is read. Once admitted, the
 * stream's window is raised to STREAM_WINDOW
 * (1 MiB, nghttp2_session_set_local_window_size), and with automatic window
 * updates off, bytes are given back to the peer (nghttp2_session_consume)
 * only after ingest_body_append() has taken them. A stream that is waiting
 * for admission therefore holds no body bytes at all: its data stays with
 * the client, and under overload other streams on the same connection keep
 * flowing. The cost is one round trip per export (HEADERS+prefix, then
 * WINDOW_UPDATE, then the message). The connection window is raised to
 * CONN_WINDOW at once (it does not follow SETTINGS, FACTS.md 8.4).
 * Admission charges a declared size whole when it is small against the
 * budget, else only its first 64 KiB and the rest as DATA arrives
 * (ingest.c). An admitted stream whose message has not all arrived within
 * --body-timeout gets DEADLINE_EXCEEDED (then RST_STREAM) from ingest's
 * deadline, and its charge and queue slot are returned, whatever else
 * (PINGs, other streams) keeps the connection busy. Exception: a client
 * may send DATA before it has seen our SETTINGS (the RFC's default
 * 65,535-byte windows apply until then); such first-flight bytes that
 * arrive before admission are kept in a small per-stream stage buffer (at
 * most STAGE_MAX per connection; an honest client cannot exceed 65,535)
 * and appended when the admission callback comes.
 *
 * PREFACE. The server SETTINGS are queued at accept and written as soon as
 * the 24-byte client preface has arrived and matched (every h2c client
 * speaks first; grpc-go only needs our SETTINGS promptly). Waiting for the
 * preface lets an HTTP/1.1 client that was pointed at this port by mistake
 * get a plain "HTTP/1.1 400" rather than binary SETTINGS; other garbage is
 * closed without an answer. The preface must be complete within
 * --header-timeout of accept (of the TLS handshake's end with TLS), or the
 * connection is closed and logged with its address (kill_ev, a one-shot
 * timer: a client trickling the preface cannot hold a connection). A
 * stream's request headers have the same deadline from its first HEADERS
 * frame (hdr_ev): past it the stream is reset, or the connection gets
 * GOAWAY when it is the only stream. An
 * admitted stream whose message arrives slower than --min-receive-rate
 * gets DEADLINE_EXCEEDED like one past --body-timeout (ingest.c), also
 * logged with the address. Protocol errors after the preface are
 * nghttp2's: it sends GOAWAY and we close once that is written.
 *
 * ANSWERS. Success: HEADERS (:status 200, content-type, grpc-accept-encoding),
 * one DATA frame with the length-prefixed Export*ServiceResponse, trailers
 * with grpc-status 0. Every error is Trailers-Only (one HEADERS frame with
 * END_STREAM); if the client has not finished sending, RST_STREAM(NO_ERROR)
 * follows the answer (FACTS.md 8.2). A non-POST gets HTTP 405 and a
 * non-gRPC content-type HTTP 415 (not gRPC answers).
 *
 * SHUTDOWN. grpc_quiesce() frees the listener and sends each connection a
 * shutdown notice (GOAWAY with the maximum stream id); the final GOAWAY
 * follows when the connection has no stream left or after DRAIN_S without
 * input, and the connection closes once nghttp2 wants neither to read nor
 * to write. A connection with no input for --idle-timeout and no stream waiting on
 * ingest is closed the same way.
 *
 * TLS AND TOKENS. With TLS on (tls.h) a connection first completes its
 * handshake (ALPN h2; another offered protocol fails it) within
 * --tls-handshake-timeout, driven by the same read/write events; reads
 * then go through tls_read (one record each, so the per-event read bound
 * counts records) and writes through tls_send. The preface rules above
 * apply inside TLS. With --ingest-token-file an Export call without a
 * known token in its authorization metadata gets UNAUTHENTICATED (16),
 * decided at the end of its header block, before any message byte.
 *
 * Threads: everything here runs on the connection's I/O thread; per-thread
 * state is thr[iot->idx].
 */
#include "server/grpc.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <nghttp2/nghttp2.h>

#include "lib/base64.h"
#include "lib/clock.h"
#include "lib/hex.h"
#include "proto/resp.h"
#include "server/auth.h"
#include "server/config.h"
#include "server/connlim.h"
#include "server/ingest.h"
#include "server/iot.h"
#include "server/log.h"
#include "server/otlp_answer.h"
#include "server/stats.h"
#include "server/tls.h"

#define ADMIT_WINDOW 5          /* SETTINGS_INITIAL_WINDOW_SIZE: the length prefix only */
#define STREAM_WINDOW (1 << 20) /* a stream's window once admitted */
#define CONN_WINDOW (32 << 20)  /* the connection's window */
#define DRAIN_S 1
#define READ_BUF (256u << 10)
#define READS_PER_EVENT 8 /* bounds one connection's work per wake-up */
#define OUT_HIGH (256u << 10)
#define STAGE_MAX (128u << 10)
#define RESP_MAX 1024 /* an Export*ServiceResponse with a partial_success message */
#define PREFIX_LEN 5
#define LINGER_MAX (1u << 20) /* bytes a flooder's input is discarded for, at most */

/* Control frames a client may send at a bounded rate (--grpc-*-rate). */
enum flood_kind { FL_RESET = 0, FL_PING = 1, FL_SETTINGS = 2, FLOOD_KINDS };
static const char *const flood_names[FLOOD_KINDS] = {"rst_stream", "ping", "settings"};
static _Atomic uint64_t flood_goaways[FLOOD_KINDS];
#define SPARE_STREAMS 256 /* stream structs a thread keeps for reuse */

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN 24

static const struct {
    const char *path;
    enum signal sig;
} routes[] = {
    {"/opentelemetry.proto.collector.logs.v1.LogsService/Export", SIG_LOGS},
    {"/opentelemetry.proto.collector.trace.v1.TraceService/Export", SIG_TRACES},
    {"/opentelemetry.proto.collector.metrics.v1.MetricsService/Export", SIG_METRICS},
};

enum gs_state {
    GS_HEADERS, /* reading the request header block */
    GS_PREFIX,  /* a valid Export call; collecting the 5-byte length prefix */
    GS_ADMIT,   /* ingest_admit() called, its callback not yet come */
    GS_BODY,    /* admitted: message bytes go to ingest_body_append() */
    GS_INGEST,  /* ingest_finish() or ingest_fail() called: waiting for the callback */
    GS_DONE,    /* answered; whatever else arrives is dropped */
};

enum gs_enc {
    ENC_NONE = 0,
    ENC_IDENTITY,
    ENC_GZIP,
    ENC_ZSTD,
    ENC_OTHER,
};

struct gconn;

/* One request stream. Owned by its connection (linked in c->streams);
 * attached to the nghttp2 stream as its user data; freed when nghttp2
 * closes the stream or the connection goes. */
struct gstream {
    struct gconn *c;
    struct gstream *prev, *next;
    int32_t id;
    uint8_t state; /* enum gs_state */
    uint8_t enc;   /* enum gs_enc */
    uint8_t sig;   /* enum signal; 0 = not an Export path */
    bool post;
    bool ct_grpc;
    bool hdr_overflow;
    bool remote_closed; /* END_STREAM received */
    bool rst_after;     /* RST_STREAM(NO_ERROR) once our final HEADERS are out */
    bool compressed;    /* the message's compressed flag */
    bool auth_seen;     /* an authorization header was checked */
    uint8_t auth;       /* enum auth_result of that check */
    uint8_t prefix_len;
    uint8_t prefix[PREFIX_LEN];
    uint32_t hdr_bytes;
    uint64_t hdr_deadline_ns; /* the request headers are due by then; 0 = they are complete */
    uint32_t msg_len, msg_got;
    uint32_t unconsumed; /* DATA bytes received and not yet given back to flow control */
    struct ingest_req *req;
    uint8_t *stage; /* first-flight message bytes received before admission */
    uint32_t stage_len, stage_cap;
    uint32_t resp_len, resp_off;
    uint8_t resp[PREFIX_LEN + RESP_MAX];
};

struct gthr;

struct gconn {
    struct gthr *th;
    struct gconn *prev, *next;
    int fd;
    struct ssl_st *ssl; /* NULL: cleartext h2c */
    bool hs_done;       /* the TLS handshake has completed */
    struct connlim_key lim;
    uint64_t flood_tat[FLOOD_KINDS]; /* per frame kind: its rate limit's next-due time (GCRA) */
    bool calm_sent;                  /* GOAWAY(ENHANCE_YOUR_CALM) queued */
    bool lingering;                  /* that GOAWAY is written: input discarded until EOF */
    uint32_t lingered;               /* bytes discarded so far */
    nghttp2_session *sess;
    struct event *rev; /* EV_READ | EV_PERSIST, with the idle / drain timeout */
    struct event *wev; /* EV_WRITE | EV_PERSIST, added while output is pending */
    struct event *kill_ev;
    struct event *hdr_ev; /* a stream's request headers are due (--header-timeout) */
    struct evbuffer *out;
    struct gstream *streams;
    int n_streams;
    uint32_t staged; /* bytes held in the streams' stage buffers */
    uint8_t preface_got;
    uint8_t first_byte;
    bool quiescing;
    bool goaway_sent;
    bool closing; /* close once the output is written (HTTP/1.x refusal, idle) */
    bool dying;   /* conn_free is scheduled */
};

struct gthr {
    struct iot *t;
    struct evconnlistener *lev;
    struct event *accept_retry;
    struct gconn *conns;
    int n_conns;
    bool quiescing;
    uint8_t *rbuf;
    struct gstream *spare; /* free list, linked by ->next */
    int n_spare;
    struct timeval preface_tv; /* --header-timeout */
    uint64_t head_ns;          /* the same, for a stream's request headers */
    struct timeval idle_tv;    /* --idle-timeout */
};

static struct gthr thr[IOT_MAX];
static nghttp2_session_callbacks *callbacks;
static nghttp2_option *session_opt;
/* --grpc-max-streams and --grpc-max-header-list (the latter advertised and
 * enforced: nghttp2 only advertises it); set by grpc_attach */
static uint32_t max_streams = 128;
static uint32_t max_header_list = 16384;

static void conn_free(struct gconn *c);
static bool conn_flush(struct gconn *c);

/* ---- small helpers ---- */

#define NV_STATIC(n, v)                                                                            \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1,                              \
            NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE                           \
    }

static nghttp2_nv nv_copy_value(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                        NGHTTP2_NV_FLAG_NO_COPY_NAME};
}

static bool name_is(const uint8_t *name, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len == n && memcmp(name, lit, n) == 0;
}

/* grpc-message: bytes outside 0x20..0x7e and '%' become %XX (FACTS.md 8.2). */
static void pct_encode(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p != '\0'; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            if (o + 1 >= cap) {
                break;
            }
            out[o++] = (char)*p;
        } else {
            if (o + 3 >= cap) {
                break;
            }
            out[o++] = '%';
            out[o++] = hex_upper[*p >> 4];
            out[o++] = hex_upper[*p & 15];
        }
    }
    out[o] = '\0';
}

/* ---- streams ---- */

/* Gives |s|'s received-but-unconsumed bytes back to flow control: the
 * stream's window and the connection's, so the client may send more. */
static void stream_consume(struct gstream *s)
{
    if (s->unconsumed > 0) {
        nghttp2_session_consume(s->c->sess, s->id, s->unconsumed);
        s->unconsumed = 0;
    }
}

/* For bytes that are dropped (the stream is refused or failing): only the
 * connection's window is given back, so the client cannot send more on
 * this stream while the answer and RST_STREAM are on their way. */
static void stream_discard(struct gstream *s)
{
    if (s->unconsumed > 0) {
        nghttp2_session_consume_connection(s->c->sess, s->unconsumed);
        s->unconsumed = 0;
    }
}

static void stream_drop_stage(struct gstream *s)
{
    s->c->staged -= s->stage_len;
    free(s->stage);
    s->stage = NULL;
    s->stage_len = s->stage_cap = 0;
}

/* Frees |s| without touching the nghttp2 session (the caller detached it
 * or is deleting the session). */
static void stream_free(struct gstream *s)
{
    struct gconn *c = s->c;
    ingest_req_free(s->req);
    stream_drop_stage(s);
    if (s->prev != NULL) {
        s->prev->next = s->next;
    } else {
        c->streams = s->next;
    }
    if (s->next != NULL) {
        s->next->prev = s->prev;
    }
    c->n_streams--;
    if (c->th->n_spare < SPARE_STREAMS) {
        s->next = c->th->spare;
        c->th->spare = s;
        c->th->n_spare++;
    } else {
        free(s);
    }
}

/* A zeroed stream struct, from the thread's spares when it has one. */
static struct gstream *stream_alloc(struct gthr *th)
{
    struct gstream *s = th->spare;
    if (s == NULL) {
        return calloc(1, sizeof(*s));
    }
    th->spare = s->next;
    th->n_spare--;
    memset(s, 0, offsetof(struct gstream, resp)); /* resp is written before it is read */
    return s;
}

/*
 * Submits |s|'s final HEADERS (Trailers-Only or an HTTP error when |prd| is
 * NULL). Frees the request and the stage; further DATA is dropped. A
 * client still sending gets RST_STREAM(NO_ERROR) once the answer is out.
 */
static void stream_submit_final(struct gstream *s, const nghttp2_nv *nv, size_t n,
                                const nghttp2_data_provider *prd)
{
    s->state = GS_DONE;
    ingest_req_free(s->req);
    s->req = NULL;
    stream_drop_stage(s);
    stream_discard(s);
    s->rst_after = true; /* decided when the HEADERS are sent: the client may end first */
    if (nghttp2_submit_response(s->c->sess, s->id, nv, n, prd) != 0) {
        nghttp2_submit_rst_stream(s->c->sess, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    }
}

/* Trailers-Only: one HEADERS frame with END_STREAM carrying the status. */
static void stream_fail_grpc(struct gstream *s, enum grpc_code code, const char *msg,
                             int retry_after_s, bool accept_enc)
{
    char codebuf[8], pct[3 * 256 + 1], details[800];
    nghttp2_nv nv[7] = {
        NV_STATIC(":status", "200"),
        NV_STATIC("content-type", "application/grpc"),
    };
    size_t n = 2;

    snprintf(codebuf, sizeof(codebuf), "%d", (int)code);
    nv[n++] = nv_copy_value("grpc-status", codebuf);
    pct_encode(msg, pct, sizeof(pct));
    nv[n++] = nv_copy_value("grpc-message", pct);
    if (code == GRPC_UNAVAILABLE) {
        /* google.rpc.Status with RetryInfo: how Go and Java clients learn the delay */
        uint8_t st[512];
        long k = resp_status(OTLP_PROTOBUF, code, msg, retry_after_s > 0 ? retry_after_s : 1, st,
                             sizeof(st));
        if (k > 0) {
            _Static_assert(sizeof(details) > BASE64_ENCODED_LEN(sizeof(st)), "details too small");
            base64_encode(details, st, (size_t)k, false);
            nv[n++] = nv_copy_value("grpc-status-details-bin", details);
        }
    }
    if (accept_enc) {
        nv[n++] = (nghttp2_nv)NV_STATIC("grpc-accept-encoding", "identity,gzip,zstd");
    }
    stream_submit_final(s, nv, n, NULL);
}

/* A plain HTTP answer for requests that are not gRPC calls at all. */
static void stream_fail_http(struct gstream *s, int status)
{
    nghttp2_nv nv_415[] = {NV_STATIC(":status", "415")};
    nghttp2_nv nv_405[] = {NV_STATIC(":status", "405"), NV_STATIC("allow", "POST")};
    if (status == 405) {
        stream_submit_final(s, nv_405, 2, NULL);
    } else {
        stream_submit_final(s, nv_415, 1, NULL);
    }
}

static ssize_t resp_read(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct gstream *s = src->ptr;
    size_t n = s->resp_len - s->resp_off;
    (void)user;

    if (n > len) {
        n = len;
    }
    memcpy(buf, s->resp + s->resp_off, n);
    s->resp_off += (uint32_t)n;
    if (s->resp_off == s->resp_len) {
        nghttp2_nv tr[] = {NV_STATIC("grpc-status", "0")};
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        if (nghttp2_submit_trailer(sess, id, tr, 1) != 0) {
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
    }
    return (ssize_t)n;
}

static void stream_answer_ok(struct gstream *s, const struct ingest_result *res)
{
    nghttp2_nv nv[] = {
        NV_STATIC(":status", "200"),
        NV_STATIC("content-type", "application/grpc"),
        NV_STATIC("grpc-accept-encoding", "identity,gzip,zstd"),
    };
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = resp_read};
    long k =
        otlp_answer_export(OTLP_PROTOBUF, (enum signal)s->sig, res, s->resp + PREFIX_LEN, RESP_MAX);
    if (k < 0) {
        /* cannot happen within RESP_MAX; the empty message is still a valid success */
        log_warn("grpc", "event=response_encode_failed rc=%ld", k);
        k = 0;
    }
    s->resp[0] = 0;
    s->resp[1] = (uint8_t)(k >> 24);
    s->resp[2] = (uint8_t)(k >> 16);
    s->resp[3] = (uint8_t)(k >> 8);
    s->resp[4] = (uint8_t)k;
    s->resp_len = PREFIX_LEN + (uint32_t)k;
    s->resp_off = 0;
    stream_submit_final(s, nv, sizeof(nv) / sizeof(nv[0]), &prd);
}

/* Answers from the request's result (a refusal or the export's outcome;
 * otlp_answer.h has the table). */
static void stream_answer(struct gstream *s, const struct ingest_result *res)
{
    struct otlp_answer a;
    if (res->status == IS_OK) {
        stream_answer_ok(s, res);
        return;
    }
    otlp_answer_of(res, &a);
    stream_fail_grpc(s, a.grpc_code, a.message, a.retry_after_s, false);
}

/* Fails the request through ingest (counted there; the callback answers).
 * Not while an admission callback is pending (GS_ADMIT). */
static void stream_fail_ingest(struct gstream *s, enum ingest_status st, const char *msg)
{
    s->state = GS_INGEST;
    stream_drop_stage(s);
    stream_discard(s);
    ingest_fail(s->req, st, msg);
}

/* Message bytes of an admitted stream. */
static void stream_body(struct gstream *s, const uint8_t *p, size_t n)
{
    size_t want = s->msg_len - s->msg_got;
    size_t take = n < want ? n : want;

    if (take > 0) {
        if (ingest_body_append(s->req, p, take) < 0) {
            /* -E2BIG / -ENOBUFS: ingest set (and counted) the result */
            stream_answer(s, ingest_result(s->req));
            return;
        }
        s->msg_got += (uint32_t)take;
    }
    if (n > take) {
        stream_fail_ingest(s, IS_UNSUPPORTED, "a unary Export call carries exactly one message");
        return;
    }
    stream_consume(s);
}

/* Keeps first-flight bytes that arrived before admission (see the file header). */
static void stream_stage(struct gstream *s, const uint8_t *p, size_t n)
{
    struct gconn *c = s->c;
    if (c->staged + n > STAGE_MAX) {
        /* only a client that ignores our SETTINGS gets here; safe to retry */
        ingest_count_rejection(c->th->t, RJ_OVERLOADED);
        ingest_req_free(s->req);
        s->req = NULL;
        s->state = GS_DONE;
        stream_drop_stage(s);
        stream_discard(s);
        nghttp2_submit_rst_stream(c->sess, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
        return;
    }
    if (s->stage_len + n > s->stage_cap) {
        uint32_t cap = s->stage_cap ? s->stage_cap * 2 : 16384;
        while (cap < s->stage_len + n) {
            cap *= 2;
        }
        uint8_t *np = realloc(s->stage, cap);
        if (np == NULL) {
            stream_fail_grpc(s, GRPC_UNAVAILABLE, "out of memory; retry later", 1, false);
            ingest_count_rejection(c->th->t, RJ_OVERLOADED);
            return;
        }
        s->stage = np;
        s->stage_cap = cap;
    }
    memcpy(s->stage + s->stage_len, p, n);
    s->stage_len += (uint32_t)n;
    c->staged += (uint32_t)n;
}

static void stream_data(struct gstream *s, const uint8_t *p, size_t n)
{
    s->unconsumed += (uint32_t)n;
    switch (s->state) {
    case GS_PREFIX: {
        size_t k = PREFIX_LEN - s->prefix_len;
        if (k > n) {
            k = n;
        }
        memcpy(s->prefix + s->prefix_len, p, k);
        s->prefix_len += (uint8_t)k;
        p += k;
        n -= k;
        if (s->prefix_len < PREFIX_LEN) {
            return;
        }
        uint8_t flag = s->prefix[0];
        if (flag > 1) {
            stream_fail_ingest(s, IS_INTERNAL, "invalid gRPC compressed flag");
            return;
        }
        if (flag == 1 && s->enc != ENC_GZIP && s->enc != ENC_ZSTD) {
            stream_fail_ingest(s, IS_INTERNAL,
                               "compressed flag set without grpc-encoding: gzip or zstd");
            return;
        }
        s->compressed = flag == 1;
        s->msg_len = (uint32_t)s->prefix[1] << 24 | (uint32_t)s->prefix[2] << 16 |
                     (uint32_t)s->prefix[3] << 8 | s->prefix[4];
        s->state = GS_ADMIT;
        /* the declared size: over --max-request-bytes is refused before any read */
        ingest_admit(s->req, (long)s->msg_len);
        if (n > 0) {
            stream_stage(s, p, n);
        }
        return;
    }
    case GS_ADMIT:
        stream_stage(s, p, n);
        return;
    case GS_BODY:
        stream_body(s, p, n);
        return;
    default: /* answered, failing, or (never) DATA inside the header block */
        stream_discard(s);
        return;
    }
}

/* The request is complete (END_STREAM) while admitted: hand it over. */
static void stream_finish(struct gstream *s)
{
    if (s->msg_got < s->msg_len) {
        stream_fail_ingest(s, IS_INTERNAL, "request ended inside its gRPC message");
        return;
    }
    s->state = GS_INGEST;
    ingest_finish(s->req, OTLP_PROTOBUF,
                  !s->compressed       ? BODY_IDENTITY
                  : s->enc == ENC_ZSTD ? BODY_ZSTD
                                       : BODY_GZIP);
}

static void stream_end(struct gstream *s)
{
    s->remote_closed = true;
    switch (s->state) {
    case GS_PREFIX:
        if (s->prefix_len == 0) {
            stream_fail_ingest(s, IS_UNSUPPORTED,
                               "a unary Export call carries exactly one message");
        } else {
            stream_fail_ingest(s, IS_INTERNAL, "request ended inside its gRPC message prefix");
        }
        return;
    case GS_BODY:
        stream_finish(s);
        return;
    default: /* GS_ADMIT finishes after its callback; others are past this */
        return;
    }
}

static void stream_on_ingest(struct ingest_req *r, void *ctx);

/* The request header block is complete: route and validate it. */
static void stream_headers_done(struct gstream *s)
{
    struct iot *t = s->c->th->t;

    s->hdr_deadline_ns = 0;
    if (s->hdr_overflow) {
        ingest_count_rejection(t, RJ_TOO_LARGE);
        char msg[64];
        snprintf(msg, sizeof(msg), "request headers exceed %u bytes", max_header_list);
        stream_fail_grpc(s, GRPC_RESOURCE_EXHAUSTED, msg, 0, false);
        return;
    }
    if (!s->post) {
        ingest_count_rejection(t, RJ_BAD_METHOD);
        stream_fail_http(s, 405);
        return;
    }
    if (!s->ct_grpc) {
        ingest_count_rejection(t, RJ_UNSUPPORTED);
        stream_fail_http(s, 415);
        return;
    }
    enum auth_result ar =
        s->auth_seen ? (enum auth_result)s->auth : auth_check(AUTH_INGEST, NULL, 0, NULL);
    if (ar != AUTH_OK) {
        stream_fail_grpc(s, GRPC_UNAUTHENTICATED, auth_message(ar), 0, false);
        return;
    }
    if (s->sig == 0) {
        ingest_count_rejection(t, RJ_NOT_FOUND);
        stream_fail_grpc(s, GRPC_UNIMPLEMENTED,
                         "unknown method: this server implements the OTLP Export methods only", 0,
                         false);
        return;
    }
    if (s->enc == ENC_OTHER) {
        ingest_count_rejection(t, RJ_UNSUPPORTED);
        stream_fail_grpc(s, GRPC_UNIMPLEMENTED,
                         "unsupported grpc-encoding (identity, gzip and zstd are)", 0, true);
        return;
    }
    s->req = ingest_req_new(t, (enum signal)s->sig, TR_GRPC, stream_on_ingest, s);
    if (s->req == NULL) {
        ingest_count_rejection(t, RJ_OVERLOADED);
        stream_fail_grpc(s, GRPC_UNAVAILABLE, "out of memory; retry later", 1, false);
        return;
    }
    s->state = GS_PREFIX;
}

/* ---- nghttp2 callbacks (never free the connection) ---- */

static int on_begin_headers(nghttp2_session *sess, const nghttp2_frame *frame, void *user)
{
    struct gconn *c = user;
    struct gstream *s;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;
    }
    s = stream_alloc(c->th);
    if (s == NULL) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
    }
    s->c = c;
    s->id = frame->hd.stream_id;
    s->next = c->streams;
    if (c->streams != NULL) {
        c->streams->prev = s;
    }
    c->streams = s;
    c->n_streams++;
    nghttp2_session_set_stream_user_data(sess, s->id, s);
    s->hdr_deadline_ns = clock_mono_ns() + c->th->head_ns;
    if (!evtimer_pending(c->hdr_ev, NULL)) {
        evtimer_add(c->hdr_ev, &c->th->preface_tv);
    }
    return 0;
}

static int on_header(nghttp2_session *sess, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    struct gstream *s;
    (void)flags, (void)user;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0; /* trailers: nothing in them matters */
    }
    s = nghttp2_session_get_stream_user_data(sess, frame->hd.stream_id);
    if (s == NULL || s->hdr_overflow) {
        return 0;
    }
    s->hdr_bytes += (uint32_t)(namelen + valuelen + 32);
    if (s->hdr_bytes > max_header_list) {
        s->hdr_overflow = true;
        return 0;
    }
    if (name_is(name, namelen, ":method")) {
        s->post = valuelen == 4 && memcmp(value, "POST", 4) == 0;
    } else if (name_is(name, namelen, ":path")) {
        s->sig = 0;
        for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
            if (name_is(value, valuelen, routes[i].path)) {
                s->sig = (uint8_t)routes[i].sig;
            }
        }
    } else if (name_is(name, namelen, "content-type")) {
        /* application/grpc, application/grpc+proto, application/grpc;... */
        s->ct_grpc = valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
                     (valuelen == 16 || value[16] == '+' || value[16] == ';');
    } else if (name_is(name, namelen, "authorization")) {
        if (!s->auth_seen) {
            s->auth_seen = true;
            s->auth = (uint8_t)auth_check(AUTH_INGEST, (const char *)value, valuelen, NULL);
        }
    } else if (name_is(name, namelen, "grpc-encoding")) {
        if (name_is(value, valuelen, "identity")) {
            s->enc = ENC_IDENTITY;
        } else if (name_is(value, valuelen, "gzip")) {
            s->enc = ENC_GZIP;
        } else if (name_is(value, valuelen, "zstd")) {
            s->enc = ENC_ZSTD;
        } else {
            s->enc = ENC_OTHER;
        }
    }
    return 0;
}

/* One more frame of |k| from |c|: false when it exceeds the kind's rate
 * (generic cell rate: each frame moves the due time on by 1/rate seconds;
 * the due time may run ahead of now by at most one second's worth, so a
 * burst of rate frames passes). */
static bool flood_ok(struct gconn *c, enum flood_kind k)
{
    const struct config *cfg = ingest_config();
    int rate = k == FL_RESET  ? cfg->h2_reset_rate
               : k == FL_PING ? cfg->h2_ping_rate
                              : cfg->h2_settings_rate;
    uint64_t now = clock_mono_ns(), step = 1000000000ull / (uint64_t)rate;
    uint64_t tat = c->flood_tat[k] > now ? c->flood_tat[k] : now;
    if (tat + step > now + 1000000000ull + step) {
        return false;
    }
    c->flood_tat[k] = tat + step;
    return true;
}

/* Counts the control frames a client floods with; past a rate the
 * connection gets GOAWAY(ENHANCE_YOUR_CALM) and closes once it is written
 * (streams in flight are dropped: the client asked for it). */
static void flood_check(struct gconn *c, const nghttp2_frame *frame)
{
    enum flood_kind k;
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        k = FL_RESET;
    } else if (frame->hd.type == NGHTTP2_PING && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
        k = FL_PING;
    } else if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
        k = FL_SETTINGS;
    } else {
        return;
    }
    if (c->calm_sent || flood_ok(c, k)) {
        return;
    }
    c->calm_sent = true;
    atomic_fetch_add(&flood_goaways[k], 1);
    char peer[64];
    iot_peer_name(c->fd, peer, sizeof(peer));
    log_warn("grpc", "event=h2_flood_goaway peer=%s frame=%s limit=--grpc-%s-rate", peer,
             flood_names[k],
             k == FL_RESET  ? "reset"
             : k == FL_PING ? "ping"
                            : "settings");
    nghttp2_session_terminate_session(c->sess, NGHTTP2_ENHANCE_YOUR_CALM);
}

void grpc_metrics_text(struct evbuffer *o)
{
    evbuffer_add_printf(o, "# HELP miradb_grpc_flood_goaways_total gRPC connections sent "
                           "GOAWAY(ENHANCE_YOUR_CALM) for control frames past a rate, by "
                           "frame.\n# TYPE miradb_grpc_flood_goaways_total counter\n");
    for (int k = 0; k < FLOOD_KINDS; k++) {
        evbuffer_add_printf(o, "miradb_grpc_flood_goaways_total{frame=\"%s\"} %llu\n",
                            flood_names[k], (unsigned long long)atomic_load(&flood_goaways[k]));
    }
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *frame, void *user)
{
    struct gstream *s;

    flood_check(user, frame);
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) {
        return 0;
    }
    s = nghttp2_session_get_stream_user_data(sess, frame->hd.stream_id);
    if (s == NULL) {
        return 0;
    }
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        stream_headers_done(s);
    }
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        stream_end(s);
    }
    return 0;
}

static int on_data_chunk_recv(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data,
                              size_t len, void *user)
{
    struct gstream *s = nghttp2_session_get_stream_user_data(sess, id);
    (void)flags, (void)user;

    if (s == NULL) {
        nghttp2_session_consume(sess, id, len);
        return 0;
    }
    stream_data(s, data, len);
    return 0;
}

static int on_frame_send(nghttp2_session *sess, const nghttp2_frame *frame, void *user)
{
    struct gstream *s;
    (void)user;

    if (frame->hd.type != NGHTTP2_HEADERS || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        return 0;
    }
    s = nghttp2_session_get_stream_user_data(sess, frame->hd.stream_id);
    if (s != NULL && s->rst_after && !s->remote_closed) {
        /* we answered before the request ended (FACTS.md 8.2) */
        nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    }
    if (s != NULL) {
        s->rst_after = false;
    }
    return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t error_code, void *user)
{
    struct gstream *s = nghttp2_session_get_stream_user_data(sess, id);
    (void)error_code, (void)user;

    if (s == NULL) {
        return 0;
    }
    nghttp2_session_set_stream_user_data(sess, id, NULL);
    stream_discard(s); /* the stream is gone; its bytes still count on the connection */
    stream_free(s);
    return 0;
}

static int on_error(nghttp2_session *sess, int code, const char *msg, size_t len, void *user)
{
    struct gconn *c = user;
    (void)sess;
    log_debug("grpc", "event=h2_error fd=%d code=%d msg=\"%.*s\"", c->fd, code, (int)len, msg);
    return 0;
}

/* ---- ingest callback (from the event loop, never inside nghttp2) ---- */

static void conn_kill_later(struct gconn *c);

/* A client cut off by a time or rate limit: its address goes to the log. */
static void log_slow(struct gconn *c, const char *why)
{
    char peer[64];
    iot_peer_name(c->fd, peer, sizeof(peer));
    log_warn("grpc", "event=slow_client_cut_off peer=%s reason=\"%s\"", peer, why);
}

static void stream_on_ingest(struct ingest_req *r, void *ctx)
{
    struct gstream *s = ctx;
    struct gconn *c = s->c;
    const struct ingest_result *res = ingest_result(r);

    if (s->state == GS_ADMIT && res->status == IS_ADMITTED) {
        s->state = GS_BODY;
        if (!s->remote_closed) {
            nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, s->id, STREAM_WINDOW);
        }
        if (s->stage_len > 0) {
            uint8_t *stage = s->stage;
            uint32_t n = s->stage_len;
            s->stage = NULL;
            s->stage_len = s->stage_cap = 0;
            c->staged -= n;
            stream_body(s, stage, n);
            free(stage);
        } else {
            stream_consume(s); /* the prefix */
        }
        if (s->state == GS_BODY && s->remote_closed) {
            stream_finish(s);
        }
    } else if (s->state == GS_ADMIT || s->state == GS_INGEST || s->state == GS_BODY) {
        /* a refusal, the export's outcome, or (GS_BODY) the body deadline
         * or a body slower than --min-receive-rate */
        if (s->state == GS_BODY && res->status == IS_TIMEOUT) {
            log_slow(c, res->message);
        }
        stream_answer(s, res);
    }
    if (!conn_flush(c)) {
        conn_kill_later(c); /* not here: ingest is still inside its delivery of |r| */
    }
}

/* ---- connections ---- */

static const struct timeval drain_tv = {DRAIN_S, 0};

static void conn_on_read(evutil_socket_t fd, short what, void *arg);
static void conn_on_write(evutil_socket_t fd, short what, void *arg);
static void conn_on_kill(evutil_socket_t fd, short what, void *arg);
static void conn_on_hdr_deadline(evutil_socket_t fd, short what, void *arg);
static void conn_closing(struct gconn *c);

static bool conn_waiting_on_ingest(const struct gconn *c)
{
    for (const struct gstream *s = c->streams; s != NULL; s = s->next) {
        if (s->state == GS_ADMIT || s->state == GS_INGEST) {
            return true;
        }
    }
    return false;
}

/* Writes what |c->out| holds with one sendmsg (MSG_NOSIGNAL: a peer that
 * went away is an error here, never a SIGPIPE, whatever main does). */
static ssize_t out_write(struct gconn *c)
{
    if (c->ssl != NULL) {
        return tls_send(c->ssl, c->out); /* drains what it wrote */
    }
    struct evbuffer_iovec v[16];
    struct iovec iov[16];
    int n = evbuffer_peek(c->out, -1, NULL, v, 16);
    if (n > 16) {
        n = 16;
    }
    for (int i = 0; i < n; i++) {
        iov[i].iov_base = v[i].iov_base;
        iov[i].iov_len = v[i].iov_len;
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    if (w > 0) {
        evbuffer_drain(c->out, (size_t)w);
    }
    return w;
}

/* While draining: the final GOAWAY as soon as no stream is left. True if
 * it was submitted now. */
static bool conn_final_goaway(struct gconn *c)
{
    if (!c->quiescing || c->goaway_sent || c->n_streams > 0 || c->preface_got < PREFACE_LEN) {
        return false;
    }
    nghttp2_submit_goaway(c->sess, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(c->sess), NGHTTP2_NO_ERROR, NULL,
                          0);
    c->goaway_sent = true;
    return true;
}

/*
 * A flooder is still sending when its GOAWAY is out: closing now, with its
 * input unread, would reset the connection and the peer could lose the
 * GOAWAY. So the write side is shut and input discarded until EOF, for at
 * most DRAIN_S and LINGER_MAX bytes. False (free it now) for any other
 * connection.
 */
static bool conn_linger(struct gconn *c)
{
    if (!c->calm_sent || c->ssl != NULL) {
        return false;
    }
    if (!c->lingering) {
        c->lingering = true;
        shutdown(c->fd, SHUT_WR);
        event_del(c->kill_ev);
        event_add(c->kill_ev, &drain_tv);
    }
    return true;
}

/*
 * Produces frames and writes them. Returns false when the connection is
 * finished (error, or nothing left to say and nothing to hear); the caller
 * frees it.
 */
static bool conn_flush(struct gconn *c)
{
    if (c->dying) {
        return true;
    }
    conn_final_goaway(c);
    for (;;) {
        while (c->preface_got == PREFACE_LEN && evbuffer_get_length(c->out) < OUT_HIGH) {
            const uint8_t *p;
            ssize_t n = nghttp2_session_mem_send(c->sess, &p);
            if (n < 0) {
                log_debug("grpc", "event=h2_send_failed fd=%d error=\"%s\"", c->fd,
                          nghttp2_strerror((int)n));
                return false;
            }
            if (n == 0) {
                break;
            }
            if (evbuffer_add(c->out, p, (size_t)n) < 0) {
                return false;
            }
        }
        if (conn_final_goaway(c)) {
            continue; /* the last stream closed as its answer went out */
        }
        if (evbuffer_get_length(c->out) == 0) {
            break;
        }
        ssize_t w = out_write(c);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                break;
            }
            return false;
        }
        /* partial or whole: produce more and write again until EAGAIN */
    }
    if (evbuffer_get_length(c->out) > 0) {
        if (!event_pending(c->wev, EV_WRITE, NULL)) {
            event_add(c->wev, NULL);
        }
        return true;
    }
    if (event_pending(c->wev, EV_WRITE, NULL)) {
        event_del(c->wev);
    }
    if (c->closing) {
        return false;
    }
    if (c->preface_got == PREFACE_LEN && !nghttp2_session_want_read(c->sess) &&
        !nghttp2_session_want_write(c->sess)) {
        return conn_linger(c);
    }
    return true;
}

static void conn_kill_later(struct gconn *c)
{
    if (!c->dying) {
        c->dying = true;
        event_del(c->rev);
        event_del(c->wev);
        event_active(c->kill_ev, 0, 0);
    }
}

static void conn_on_kill(evutil_socket_t fd, short what, void *arg)
{
    struct gconn *c = arg;
    (void)fd, (void)what;
    if (c->ssl != NULL && !c->hs_done && !c->dying) {
        tls_count_failure(TLS_FAIL_TIMEOUT); /* the handshake deadline */
    } else if (!c->dying && !c->quiescing && c->preface_got < PREFACE_LEN) {
        log_slow(c, "the HTTP/2 preface did not arrive within --header-timeout");
    }
    conn_free(c);
}

/*
 * A stream whose request headers (HEADERS and CONTINUATION) have not all
 * arrived within --header-timeout of its first frame: reset, or, when it
 * is the connection's only stream, GOAWAY and close (while a header block
 * is open the peer may send nothing else anyway). Re-armed for the next
 * stream still due.
 */
static void conn_on_hdr_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct gconn *c = arg;
    uint64_t now = clock_mono_ns(), next = 0;
    (void)fd, (void)what;

    if (c->dying || c->closing) {
        return;
    }
    for (struct gstream *s = c->streams; s != NULL; s = s->next) {
        if (s->hdr_deadline_ns == 0) {
            continue;
        }
        if (s->hdr_deadline_ns > now) {
            next = next == 0 || s->hdr_deadline_ns < next ? s->hdr_deadline_ns : next;
            continue;
        }
        log_slow(c, "a stream's request headers did not arrive within --header-timeout");
        ingest_count_rejection(c->th->t, RJ_TIMEOUT);
        s->hdr_deadline_ns = 0;
        if (c->n_streams == 1) {
            if (!c->goaway_sent) {
                nghttp2_submit_goaway(c->sess, NGHTTP2_FLAG_NONE,
                                      nghttp2_session_get_last_proc_stream_id(c->sess),
                                      NGHTTP2_NO_ERROR, NULL, 0);
                c->goaway_sent = true;
            }
            conn_closing(c);
            next = 0;
            break;
        }
        nghttp2_submit_rst_stream(c->sess, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
    }
    if (next != 0) {
        uint64_t ns = next - now;
        struct timeval tv = {(time_t)(ns / 1000000000u), (suseconds_t)(ns % 1000000000u / 1000)};
        evtimer_add(c->hdr_ev, &tv);
    }
    if (!conn_flush(c)) {
        conn_free(c);
    }
}

static void conn_free(struct gconn *c)
{
    struct gthr *th = c->th;
    while (c->streams != NULL) {
        stream_free(c->streams);
    }
    nghttp2_session_del(c->sess);
    event_free(c->rev);
    event_free(c->wev);
    event_free(c->kill_ev);
    event_free(c->hdr_ev);
    evbuffer_free(c->out);
    tls_free(c->ssl);
    close(c->fd);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        th->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    th->n_conns--;
    connlim_release(CL_GRPC, &c->lim);
    free(c);
}

/* Stops reading; the connection closes once its output is written, or
 * after DRAIN_S if the peer does not take it. */
static void conn_closing(struct gconn *c)
{
    c->closing = true;
    event_del(c->rev);
    event_add(c->kill_ev, &drain_tv); /* fd -1, no events: a plain timer */
}

/* Not HTTP/2: an HTTP/1.x request gets a plain 400, anything else is closed. */
static void conn_refuse_non_h2(struct gconn *c)
{
    static const char body[] = "This port speaks OTLP/gRPC (HTTP/2 with prior knowledge); send "
                               "OTLP/HTTP requests to the HTTP port.\n";
    conn_closing(c);
    if (c->first_byte >= 'A' && c->first_byte <= 'Z') {
        evbuffer_add_printf(c->out,
                            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
                            "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                            sizeof(body) - 1, body);
    }
}

/* Feeds |n| received bytes. Returns false when the connection must close now. */
static bool conn_feed(struct gconn *c, const uint8_t *p, size_t n)
{
    if (c->preface_got < PREFACE_LEN) {
        size_t k = PREFACE_LEN - c->preface_got;
        if (k > n) {
            k = n;
        }
        if (c->preface_got == 0) {
            c->first_byte = p[0];
        }
        if (memcmp(p, PREFACE + c->preface_got, k) != 0) {
            conn_refuse_non_h2(c);
            return true;
        }
        c->preface_got += (uint8_t)k;
        if (c->preface_got == PREFACE_LEN && !c->dying && !c->quiescing) {
            event_del(c->kill_ev); /* the preface deadline is met */
        }
    }
    ssize_t rv = nghttp2_session_mem_recv(c->sess, p, n);
    if (rv < 0) {
        log_debug("grpc", "event=h2_recv_failed fd=%d error=\"%s\"", c->fd,
                  nghttp2_strerror((int)rv));
        return false;
    }
    return true;
}

static void conn_on_timeout(struct gconn *c)
{
    if (c->quiescing && !c->goaway_sent) {
        /* drain time is up: refuse streams after the last one we took */
        nghttp2_submit_goaway(c->sess, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->sess), NGHTTP2_NO_ERROR,
                              NULL, 0);
        c->goaway_sent = true;
        return;
    }
    if (conn_waiting_on_ingest(c)) {
        return; /* the client is waiting on us, not idle */
    }
    if (c->preface_got == PREFACE_LEN && !c->goaway_sent) {
        nghttp2_submit_goaway(c->sess, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->sess), NGHTTP2_NO_ERROR,
                              NULL, 0);
        c->goaway_sent = true;
    }
    conn_closing(c);
}

/* One TLS handshake step. False when the connection must be freed. */
static bool conn_handshake(struct gconn *c)
{
    switch (tls_handshake(c->ssl, TLS_GRPC)) {
    case TLS_HS_DONE:
        c->hs_done = true;
        if (event_pending(c->wev, EV_WRITE, NULL)) {
            event_del(c->wev);
        }
        event_del(c->kill_ev); /* the handshake deadline */
        if (!c->dying && !c->quiescing) {
            event_add(c->kill_ev, &c->th->preface_tv); /* and now the preface's */
        }
        event_add(c->rev, &c->th->idle_tv); /* from now on the idle timeout */
        if (tls_pending(c->ssl)) {
            /* the preface came with the handshake's last flight and was read ahead */
            event_active(c->rev, EV_READ, 0);
        }
        return true;
    case TLS_HS_WANT_READ:
        if (event_pending(c->wev, EV_WRITE, NULL)) {
            event_del(c->wev);
        }
        return true;
    case TLS_HS_WANT_WRITE:
        event_add(c->wev, NULL);
        return true;
    default:
        return false;
    }
}

static void conn_on_read(evutil_socket_t fd, short what, void *arg)
{
    struct gconn *c = arg;
    uint8_t *buf = c->th->rbuf;

    if (c->lingering) {
        ssize_t n = (what & EV_READ) ? read(fd, buf, READ_BUF) : 0;
        if (n > 0 && c->lingered + (uint32_t)n < LINGER_MAX) {
            c->lingered += (uint32_t)n;
            return;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            return;
        }
        conn_free(c); /* EOF, an error, the idle timeout or the byte cap */
        return;
    }

    if (c->ssl != NULL && !c->hs_done) {
        if (!conn_handshake(c)) {
            conn_free(c);
        }
        return;
    }
    if (what & EV_TIMEOUT) {
        conn_on_timeout(c);
    } else {
        /* A TLS read returns one record (16 KiB at most): allow as many
         * reads as READS_PER_EVENT plain ones would take in bytes. */
        int max_reads = c->ssl != NULL ? READS_PER_EVENT * 16 : READS_PER_EVENT;
        for (int i = 0; i < max_reads && !c->closing; i++) {
            ssize_t n = c->ssl != NULL ? tls_read(c->ssl, buf, READ_BUF) : read(fd, buf, READ_BUF);
            if (n > 0) {
                if (!conn_feed(c, buf, (size_t)n)) {
                    conn_free(c);
                    return;
                }
                if (c->ssl == NULL && (size_t)n < READ_BUF) {
                    break;
                }
                continue;
            }
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                break;
            }
            /* EOF or a socket error: whatever was in flight is abandoned */
            conn_free(c);
            return;
        }
        if (c->ssl != NULL && !c->closing && tls_pending(c->ssl)) {
            event_active(c->rev, EV_READ, 0); /* decrypted bytes the socket will not signal */
        }
    }
    if (!conn_flush(c)) {
        conn_free(c);
    }
}

static void conn_on_write(evutil_socket_t fd, short what, void *arg)
{
    struct gconn *c = arg;
    (void)fd, (void)what;
    if (c->ssl != NULL && !c->hs_done) {
        if (!conn_handshake(c)) {
            conn_free(c);
        }
        return;
    }
    if (!conn_flush(c)) {
        conn_free(c);
    }
}

static struct gconn *conn_new(struct gthr *th, int fd)
{
    struct event_base *base = th->t->base;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, ADMIT_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, max_header_list},
    };
    struct gconn *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->th = th;
    c->fd = fd;
    if (tls_enabled()) {
        c->ssl = tls_new(TLS_GRPC, fd);
        if (c->ssl == NULL) {
            goto fail_free;
        }
    }
    if (nghttp2_session_server_new2(&c->sess, callbacks, c, session_opt) != 0) {
        goto fail_tls;
    }
    if (nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0) {
        goto fail_session;
    }
    c->out = evbuffer_new();
    if (c->out == NULL) {
        goto fail_session;
    }
    c->rev = event_new(base, fd, EV_READ | EV_PERSIST, conn_on_read, c);
    c->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, conn_on_write, c);
    c->kill_ev = event_new(base, -1, 0, conn_on_kill, c);
    c->hdr_ev = evtimer_new(base, conn_on_hdr_deadline, c);
    /* The handshake deadline is kill_ev, a one-shot timer from accept: the
     * read event's timeout would restart with every byte a client trickles. */
    struct timeval hs_tv = {(time_t)(tls_handshake_timeout_ms() / 1000),
                            (suseconds_t)(tls_handshake_timeout_ms() % 1000 * 1000)};
    if (c->rev == NULL || c->wev == NULL || c->kill_ev == NULL || c->hdr_ev == NULL ||
        event_add(c->rev, c->ssl != NULL ? NULL : &th->idle_tv) < 0 ||
        event_add(c->kill_ev, c->ssl != NULL ? &hs_tv : &th->preface_tv) < 0) {
        goto fail_events;
    }
    c->next = th->conns;
    if (th->conns != NULL) {
        th->conns->prev = c;
    }
    th->conns = c;
    th->n_conns++;
    return c;

fail_events:
    if (c->rev != NULL) {
        event_free(c->rev);
    }
    if (c->wev != NULL) {
        event_free(c->wev);
    }
    if (c->kill_ev != NULL) {
        event_free(c->kill_ev);
    }
    if (c->hdr_ev != NULL) {
        event_free(c->hdr_ev);
    }
    evbuffer_free(c->out);
fail_session:
    nghttp2_session_del(c->sess);
fail_tls:
    tls_free(c->ssl);
fail_free:
    free(c);
    return NULL;
}

/* ---- listener ---- */

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct gthr *th = arg;
    int one = 1;
    struct connlim_key lim;
    (void)lev, (void)salen;

    if (th->quiescing || iot_stopping()) {
        close(fd);
        return;
    }
    if (!connlim_acquire(CL_GRPC, sa, &lim)) {
        close(fd); /* past a connection cap (counted and logged) */
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct gconn *c = conn_new(th, fd);
    if (c == NULL) {
        log_warn("grpc", "event=accept_dropped reason=out_of_memory");
        connlim_release(CL_GRPC, &lim);
        close(fd);
        return;
    }
    c->lim = lim;
    th->t->stats.connections_accepted++;
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
    struct gthr *th = arg;
    (void)fd, (void)what;
    if (th->lev != NULL) {
        evconnlistener_enable(th->lev);
    }
}

/* EMFILE and the like: the pending connection stays queued, so pause
 * accepting for a moment instead of spinning on it. */
static void on_accept_error(struct evconnlistener *lev, void *arg)
{
    struct gthr *th = arg;
    struct timeval tv = {0, 100000};
    int err = EVUTIL_SOCKET_ERROR();
    log_warn("grpc", "event=accept_failed error=\"%s\"", evutil_socket_error_to_string(err));
    evconnlistener_disable(lev);
    evtimer_add(th->accept_retry, &tv);
}

static int init_callbacks(void)
{
    if (callbacks != NULL) {
        return 0;
    }
    if (nghttp2_session_callbacks_new(&callbacks) != 0) {
        return -ENOMEM;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
    nghttp2_session_callbacks_set_error_callback2(callbacks, on_error);
    if (nghttp2_option_new(&session_opt) != 0) {
        nghttp2_session_callbacks_del(callbacks);
        callbacks = NULL;
        return -ENOMEM;
    }
    /* window updates only for bytes ingest has taken (see the file header) */
    nghttp2_option_set_no_auto_window_update(session_opt, 1);
    return 0;
}

int grpc_attach(struct iot *t, int fd)
{
    struct gthr *th;
    int rc;

    if (t->idx < 0 || t->idx >= IOT_MAX) {
        close(fd);
        return -EINVAL;
    }
    th = &thr[t->idx];
    rc = init_callbacks();
    if (rc < 0) {
        close(fd);
        return rc;
    }
    th->t = t;
    const struct config *cfg = ingest_config();
    uint64_t head_ms = cfg->header_timeout_ms, idle_ms = cfg->idle_timeout_ms;
    max_streams = (uint32_t)cfg->grpc_max_streams;
    max_header_list = (uint32_t)cfg->grpc_max_header_list;
    rc = connlim_init(cfg);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    th->idle_tv = (struct timeval){(time_t)(idle_ms / 1000), (suseconds_t)(idle_ms % 1000 * 1000)};
    th->preface_tv =
        (struct timeval){(time_t)(head_ms / 1000), (suseconds_t)(head_ms % 1000 * 1000)};
    th->head_ns = head_ms * 1000000u;
    if (th->rbuf == NULL) {
        th->rbuf = malloc(READ_BUF);
    }
    if (th->accept_retry == NULL) {
        th->accept_retry = evtimer_new(t->base, on_accept_retry, th);
    }
    if (th->rbuf == NULL || th->accept_retry == NULL) {
        close(fd);
        return -ENOMEM;
    }
    evutil_make_socket_nonblocking(fd);
    th->lev = evconnlistener_new(t->base, on_accept, th,
                                 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 1024, fd);
    if (th->lev == NULL) {
        rc = errno ? -errno : -ENOMEM;
        close(fd);
        return rc;
    }
    evconnlistener_set_error_cb(th->lev, on_accept_error);
    return 0;
}

void grpc_quiesce(struct iot *t)
{
    struct gthr *th = &thr[t->idx];
    struct gconn *c, *next;

    th->quiescing = true;
    if (th->lev != NULL) {
        evconnlistener_free(th->lev);
        th->lev = NULL;
    }
    if (th->accept_retry != NULL) {
        event_free(th->accept_retry);
        th->accept_retry = NULL;
    }
    for (c = th->conns; c != NULL; c = next) {
        next = c->next;
        if (c->dying || c->closing) {
            continue;
        }
        if (c->preface_got < PREFACE_LEN) {
            conn_free(c); /* has not spoken HTTP/2 yet: nothing to drain */
            continue;
        }
        c->quiescing = true;
        nghttp2_submit_shutdown_notice(c->sess);
        event_add(c->rev, &drain_tv);
        if (!conn_flush(c)) {
            conn_free(c);
        }
    }
}

int grpc_active(struct iot *t)
{
    return thr[t->idx].n_conns;
}
