/*
 * h2.c - otlp-load's OTLP/gRPC transport: h2c with prior knowledge, one
 * nghttp2 client session per connection on a libevent bufferevent, up to
 * --streams-per-connection unary Export calls in flight on each.
 *
 * What one nghttp2_session_send() produces is gathered, then written with
 * one writev (wire.c): frames nghttp2 hands over are copied into the
 * connection's stage, and DATA frames are written with
 * NGHTTP2_DATA_FLAG_NO_COPY, so their payload is a piece pointing straight
 * into the pool (which already holds the 5-byte gRPC message prefix): the
 * client never copies a request body. What the socket does not take is
 * queued in the bufferevent; queued output above OUT_HIGH makes the send
 * callbacks answer NGHTTP2_ERR_WOULDBLOCK, and the write callback resumes.
 *
 * A request is acknowledged when its stream closes with grpc-status 0 (in
 * the trailers or a Trailers-Only response).
 */
#include "bench/otlp-load/load.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#define OUT_HIGH (4u << 20) /* output bytes queued before send says WOULDBLOCK */
#define OUT_LOW (1u << 20)  /* resume sending below this */
#define RESP_KEEP 256       /* response bytes kept for partial success */
#define LOCAL_WINDOW (16 << 20)
#define STAGE_BYTES (64u << 10)

struct h2_conn;

struct h2_stream {
    struct h2_conn *c;
    bool used;
    int32_t id;
    struct load_req req;
    size_t off_read; /* body bytes handed to nghttp2 as DATA payload */
    size_t off_sent; /* body bytes written to the output */
    int http_status;
    int grpc_status; /* -1 until seen */
    size_t resp_len;
    uint8_t resp[RESP_KEEP];
};

struct h2_conn {
    struct load_conn base;
    struct event_base *evb;
    const struct load_target *t;
    struct bufferevent *bev;
    nghttp2_session *s;
    bool aborting; /* ignore nghttp2 callbacks while tearing down */
    uint32_t nslots;
    struct h2_stream *st;
    /* output gathered during one nghttp2_session_send() */
    int npc;
    struct load_piece pc[LOAD_MAX_PIECES];
    size_t stage_len;
    uint8_t stage[STAGE_BYTES];
};

/* Writes what was gathered. 0 or -ENOMEM. */
static int stage_flush(struct h2_conn *c)
{
    int rc = c->npc ? load_send(c->bev, c->pc, c->npc) : 0;
    c->npc = 0;
    c->stage_len = 0;
    return rc;
}

/* Adds bytes to the output: |stable| ones by reference, others copied into
 * the stage (or, when larger than the stage, sent on their own). */
static int stage_add(struct h2_conn *c, const uint8_t *p, size_t len, bool stable,
                     const struct pool_entry *owner)
{
    if (c->npc == LOAD_MAX_PIECES || (!stable && c->stage_len + len > STAGE_BYTES)) {
        if (stage_flush(c) < 0) {
            return -ENOMEM;
        }
    }
    if (!stable && len > STAGE_BYTES) {
        struct load_piece one = {p, len, false, NULL};
        return load_send(c->bev, &one, 1);
    }
    if (!stable) {
        uint8_t *dst = c->stage + c->stage_len;
        memcpy(dst, p, len);
        c->stage_len += len;
        struct load_piece *last = c->npc ? &c->pc[c->npc - 1] : NULL;
        if (last && !last->stable && last->p + last->len == dst) {
            last->len += len; /* contiguous in the stage: one piece */
            return 0;
        }
        p = dst;
    }
    if (stable && owner) {
        load_entry_hold(owner); /* a stream may close before the stage is written */
    }
    c->pc[c->npc++] = (struct load_piece){p, len, stable, stable ? owner : NULL};
    return 0;
}

static const char *grpc_path(int s)
{
    return s == 1   ? "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
           : s == 2 ? "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
                    : "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";
}

static ssize_t send_cb(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *arg)
{
    struct h2_conn *c = arg;
    (void)s, (void)flags;
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) >= OUT_HIGH) {
        return NGHTTP2_ERR_WOULDBLOCK;
    }
    if (stage_add(c, data, len, false, NULL) < 0) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return (ssize_t)len;
}

static ssize_t data_read_cb(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                            uint32_t *flags, nghttp2_data_source *src, void *arg)
{
    struct h2_stream *st = src->ptr;
    (void)s, (void)id, (void)buf, (void)arg;
    size_t left = st->req.e->len - st->off_read;
    size_t n = left < length ? left : length;
    st->off_read += n;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (st->off_read == st->req.e->len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)n;
}

static int send_data_cb(nghttp2_session *s, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *arg)
{
    struct h2_conn *c = arg;
    struct h2_stream *st = src->ptr;
    (void)s;
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) >= OUT_HIGH) {
        return NGHTTP2_ERR_WOULDBLOCK;
    }
    if (frame->data.padlen > 0) {
        return NGHTTP2_ERR_CALLBACK_FAILURE; /* we never ask for padding */
    }
    if (stage_add(c, framehd, 9, false, NULL) < 0 ||
        (length > 0 && stage_add(c, st->req.e->body + st->off_sent, length, true, st->req.e) < 0)) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    st->off_sent += length;
    return 0;
}

/* Larger DATA frames when the server allows them (grpc-go's default is 16 KiB). */
static ssize_t read_length_cb(nghttp2_session *s, uint8_t type, int32_t id, int32_t conn_window,
                              int32_t stream_window, uint32_t max_frame, void *arg)
{
    (void)s, (void)type, (void)id, (void)arg;
    int32_t n = conn_window < stream_window ? conn_window : stream_window;
    if ((uint32_t)n > max_frame) {
        n = (int32_t)max_frame;
    }
    return n > 0 ? n : 1;
}

static int on_header_cb(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *arg)
{
    struct h2_conn *c = arg;
    (void)flags;
    if (c->aborting || frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    struct h2_stream *st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
    if (st == NULL) {
        return 0;
    }
    char v[16];
    if (valuelen >= sizeof(v)) {
        return 0;
    }
    memcpy(v, value, valuelen);
    v[valuelen] = 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        st->http_status = atoi(v);
    } else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        st->grpc_status = atoi(v);
    }
    return 0;
}

static int on_data_cb(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                      size_t len, void *arg)
{
    struct h2_conn *c = arg;
    (void)flags;
    if (c->aborting) {
        return 0;
    }
    struct h2_stream *st = nghttp2_session_get_stream_user_data(s, id);
    if (st == NULL) {
        return 0;
    }
    size_t room = RESP_KEEP - st->resp_len;
    if (len > room) {
        len = room;
    }
    memcpy(st->resp + st->resp_len, data, len);
    st->resp_len += len;
    return 0;
}

static int on_close_cb(nghttp2_session *s, int32_t id, uint32_t error_code, void *arg)
{
    struct h2_conn *c = arg;
    if (c->aborting) {
        return 0;
    }
    struct h2_stream *st = nghttp2_session_get_stream_user_data(s, id);
    if (st == NULL || !st->used) {
        return 0;
    }
    struct load_req q = st->req;
    st->used = false;
    c->base.inflight--;
    if (st->grpc_status == 0) {
        uint64_t rej = 0;
        if (st->resp_len > 5) {
            rej = load_rejected_pb(st->resp + 5, st->resp_len - 5);
        }
        load_done(c->base.run, &c->base, &q, LO_ACK, 0, rej);
    } else if (st->grpc_status > 0) {
        load_done(c->base.run, &c->base, &q, LO_GRPC, st->grpc_status, 0);
    } else if (st->http_status != 0 && st->http_status != 200) {
        load_done(c->base.run, &c->base, &q, LO_HTTP, st->http_status, 0);
    } else if (error_code != NGHTTP2_NO_ERROR) {
        load_done(c->base.run, &c->base, &q, LO_RST, (int)error_code, 0);
    } else {
        load_done(c->base.run, &c->base, &q, LO_GRPC, -1, 0); /* no grpc-status at all */
    }
    return 0;
}

static void h2_drop(struct h2_conn *c)
{
    c->aborting = true;
    if (c->s) {
        nghttp2_session_del(c->s);
        c->s = NULL;
    }
    if (c->bev) {
        bufferevent_free(c->bev);
        c->bev = NULL;
    }
    c->aborting = false;
    c->base.ready = false;
    for (int i = 0; i < c->npc; i++) {
        if (c->pc[i].owner) {
            load_entry_release((struct pool_entry *)c->pc[i].owner);
        }
    }
    c->npc = 0;
    c->stage_len = 0;
}

static void h2_abort(struct load_conn *lc, enum load_outcome o)
{
    struct h2_conn *c = (struct h2_conn *)lc;
    h2_drop(c);
    for (uint32_t i = 0; i < c->nslots; i++) {
        if (c->st[i].used) {
            c->st[i].used = false;
            c->base.inflight--;
            load_done(c->base.run, &c->base, &c->st[i].req, o, 0, 0);
        }
    }
}

/* Flushes nghttp2's output; on failure tears the connection down. Returns
 * false when the connection is gone. */
static bool h2_flush(struct h2_conn *c)
{
    int rc = nghttp2_session_send(c->s);
    if (stage_flush(c) < 0 || rc != 0) {
        h2_abort(&c->base, LO_IO);
        load_conn_down(c->base.run, &c->base, false);
        return false;
    }
    if (!nghttp2_session_want_read(c->s) && !nghttp2_session_want_write(c->s) &&
        c->base.inflight == 0) {
        /* GOAWAY done: start over on a fresh connection */
        h2_abort(&c->base, LO_IO);
        load_conn_down(c->base.run, &c->base, false);
        return false;
    }
    return true;
}

static void h2_pump(struct load_conn *lc)
{
    struct h2_conn *c = (struct h2_conn *)lc;
    if (!c->base.ready || c->s == NULL) {
        return;
    }
    bool submitted = false;
    while (c->base.inflight < c->nslots && nghttp2_session_check_request_allowed(c->s)) {
        struct h2_stream *st = NULL;
        for (uint32_t i = 0; i < c->nslots; i++) {
            if (!c->st[i].used) {
                st = &c->st[i];
                break;
            }
        }
        if (st == NULL || !load_take(c->base.run, &c->base, &st->req)) {
            break;
        }
        const struct load_target *t = c->t;
#define NV(n, v)                                                                                   \
    {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v),                                     \
     NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE}
        nghttp2_nv nva[] = {
            NV(":method", "POST"),
            NV(":scheme", "http"),
            NV(":path", grpc_path(t->signal)),
            NV(":authority", t->host),
            NV("content-type", "application/grpc"),
            NV("te", "trailers"),
            NV("user-agent", "otlp-load/1"),
            NV("grpc-encoding", "gzip"),
        };
#undef NV
        size_t nnv = sizeof(nva) / sizeof(nva[0]) - (t->gzip ? 0 : 1);
        st->used = true;
        st->off_read = st->off_sent = 0;
        st->http_status = 0;
        st->grpc_status = -1;
        st->resp_len = 0;
        nghttp2_data_provider prd = {.source.ptr = st, .read_callback = data_read_cb};
        int32_t id = nghttp2_submit_request(c->s, NULL, nva, nnv, &prd, st);
        c->base.inflight++;
        st->req.t_sent = load_now_ns();
        if (id < 0) {
            st->used = false;
            c->base.inflight--;
            load_done(c->base.run, &c->base, &st->req, LO_IO, 0, 0);
            break;
        }
        st->id = id;
        submitted = true;
    }
    if (submitted) {
        h2_flush(c);
    }
}

static void h2_read_cb(struct bufferevent *bev, void *arg)
{
    struct h2_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer_iovec v[16];
    while (c->s && evbuffer_get_length(in) > 0) {
        int n = evbuffer_peek(in, -1, NULL, v, 16);
        size_t used = 0;
        for (int i = 0; i < n && i < 16; i++) {
            ssize_t r = nghttp2_session_mem_recv(c->s, v[i].iov_base, v[i].iov_len);
            if (r < 0) {
                h2_abort(&c->base, LO_IO);
                load_conn_down(c->base.run, &c->base, false);
                return;
            }
            used += (size_t)r;
        }
        evbuffer_drain(in, used);
    }
    if (c->s == NULL || !h2_flush(c)) {
        return;
    }
    h2_pump(&c->base);
}

static void h2_write_cb(struct bufferevent *bev, void *arg)
{
    struct h2_conn *c = arg;
    (void)bev;
    if (c->s && nghttp2_session_want_write(c->s)) {
        h2_flush(c);
    }
}

static int h2_session_new(struct h2_conn *c)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        return -ENOMEM;
    }
    nghttp2_session_callbacks_set_send_callback(cb, send_cb);
    nghttp2_session_callbacks_set_send_data_callback(cb, send_data_cb);
    nghttp2_session_callbacks_set_data_source_read_length_callback(cb, read_length_cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close_cb);
    int rc = nghttp2_session_client_new(&c->s, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) {
        return -ENOMEM;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
    };
    if (nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
        nghttp2_session_set_local_window_size(c->s, NGHTTP2_FLAG_NONE, 0, LOCAL_WINDOW) != 0) {
        return -ENOMEM;
    }
    return 0;
}

static void h2_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct h2_conn *c = arg;
    if (what & BEV_EVENT_CONNECTED) {
        int one = 1;
        setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (h2_session_new(c) < 0) {
            h2_abort(&c->base, LO_IO);
            load_conn_down(c->base.run, &c->base, true);
            return;
        }
        c->base.ready = true;
        if (!h2_flush(c)) {
            return;
        }
        load_conn_ready(c->base.run, &c->base);
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        bool never_ready = !c->base.ready;
        h2_abort(&c->base, LO_IO);
        load_conn_down(c->base.run, &c->base, never_ready);
    }
}

static struct load_conn *h2_new(struct load *l, struct event_base *base,
                                const struct load_target *t, uint32_t id)
{
    struct h2_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->st = calloc(t->slots, sizeof(*c->st));
    if (c->st == NULL) {
        free(c);
        return NULL;
    }
    c->nslots = t->slots;
    for (uint32_t i = 0; i < t->slots; i++) {
        c->st[i].c = c;
    }
    c->base.run = l;
    c->base.id = id;
    c->evb = base;
    c->t = t;
    return &c->base;
}

static int h2_start(struct load_conn *lc)
{
    struct h2_conn *c = (struct h2_conn *)lc;
    c->bev = bufferevent_socket_new(c->evb, -1, BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == NULL) {
        return -ENOMEM;
    }
    bufferevent_setcb(c->bev, h2_read_cb, h2_write_cb, h2_event_cb, c);
    bufferevent_setwatermark(c->bev, EV_WRITE, OUT_LOW, 0);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&c->t->addr, (int)c->t->addrlen) <
        0) {
        h2_drop(c);
        return -ECONNREFUSED;
    }
    return 0;
}

static uint64_t h2_oldest(struct load_conn *lc)
{
    struct h2_conn *c = (struct h2_conn *)lc;
    uint64_t oldest = 0;
    for (uint32_t i = 0; i < c->nslots; i++) {
        if (c->st[i].used && (oldest == 0 || c->st[i].req.t_sent < oldest)) {
            oldest = c->st[i].req.t_sent;
        }
    }
    return oldest;
}

static void h2_free(struct load_conn *lc)
{
    struct h2_conn *c = (struct h2_conn *)lc;
    if (c == NULL) {
        return;
    }
    h2_drop(c);
    free(c->st);
    free(c);
}

const struct load_transport load_h2 = {
    .conn_new = h2_new,
    .conn_start = h2_start,
    .conn_pump = h2_pump,
    .conn_abort = h2_abort,
    .conn_oldest = h2_oldest,
    .conn_free = h2_free,
};
