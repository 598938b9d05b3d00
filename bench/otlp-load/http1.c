/*
 * http1.c - otlp-load's OTLP/HTTP transport: HTTP/1.1 keep-alive on one
 * libevent bufferevent per connection, one request in flight at a time.
 *
 * A request is written straight to the socket with one writev (header +
 * body from the pool, wire.c); only what the socket does not take is queued
 * in the bufferevent, the body by reference, so a send copies at most the
 * ~150-byte header. Responses are parsed
 * with http-parser; the parser is paused at the end of each message so the
 * next request is submitted outside its callbacks.
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
#include <http_parser.h>

#define RESP_KEEP 512 /* bytes of a response body kept for partial success */

struct h1_conn {
    struct load_conn base;
    struct event_base *evb;
    const struct load_target *t;
    struct bufferevent *bev;
    http_parser parser;
    http_parser_settings settings;
    bool busy; /* a request is in flight */
    bool done; /* the parser saw the end of its response */
    bool keep_alive;
    struct load_req req;
    size_t resp_len;
    char resp[RESP_KEEP];
};

static const char *signal_path(int s)
{
    return s == 1 ? "/v1/logs" : s == 2 ? "/v1/traces" : "/v1/metrics";
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct h1_conn *c = p->data;
    size_t room = RESP_KEEP - c->resp_len;
    if (n > room) {
        n = room;
    }
    memcpy(c->resp + c->resp_len, at, n);
    c->resp_len += n;
    return 0;
}

static int on_message_complete(http_parser *p)
{
    struct h1_conn *c = p->data;
    c->done = true;
    c->keep_alive = http_should_keep_alive(p) != 0;
    http_parser_pause(p, 1);
    return 0;
}

static void h1_drop(struct h1_conn *c)
{
    if (c->bev) {
        bufferevent_free(c->bev);
        c->bev = NULL;
    }
    c->base.ready = false;
}

static void h1_abort(struct load_conn *lc, enum load_outcome o)
{
    struct h1_conn *c = (struct h1_conn *)lc;
    h1_drop(c);
    if (c->busy) {
        c->busy = false;
        c->base.inflight = 0;
        load_done(c->base.run, &c->base, &c->req, o, 0, 0);
    }
}

static void h1_finish(struct h1_conn *c)
{
    int status = c->parser.status_code;
    struct load_req q = c->req;
    c->busy = false;
    c->done = false;
    c->base.inflight = 0;
    if (status == 200) {
        uint64_t rej = c->t->proto == LP_HTTP_JSON
                           ? load_rejected_json(c->resp, c->resp_len)
                           : load_rejected_pb((uint8_t *)c->resp, c->resp_len);
        load_done(c->base.run, &c->base, &q, LO_ACK, 0, rej);
    } else if (c->t->any_2xx && status >= 200 && status < 300) {
        load_done(c->base.run, &c->base, &q, LO_ACK, 0, 0);
    } else {
        load_done(c->base.run, &c->base, &q, LO_HTTP, status, 0);
    }
}

static void h1_read_cb(struct bufferevent *bev, void *arg)
{
    struct h1_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    while (evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;
        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1) {
            break;
        }
        if (!c->busy) {
            /* bytes nobody asked for: the server is confused */
            h1_abort(&c->base, LO_IO);
            load_conn_down(c->base.run, &c->base, false);
            return;
        }
        size_t used = http_parser_execute(&c->parser, &c->settings, v.iov_base, v.iov_len);
        enum http_errno err = HTTP_PARSER_ERRNO(&c->parser);
        if (err != HPE_OK && err != HPE_PAUSED) {
            h1_abort(&c->base, LO_IO);
            load_conn_down(c->base.run, &c->base, false);
            return;
        }
        evbuffer_drain(in, used);
        if (c->done) {
            /* An answer that came before the whole body was written (413,
             * say) leaves the rest of the body queued: the connection cannot
             * carry another request. */
            bool keep = c->keep_alive && evbuffer_get_length(bufferevent_get_output(bev)) == 0;
            h1_finish(c);
            if (!keep) {
                h1_drop(c);
                load_conn_down(c->base.run, &c->base, false);
                return;
            }
            /* one request in flight: anything after the response is junk */
            evbuffer_drain(in, evbuffer_get_length(in));
            load_conn_ready(c->base.run, &c->base);
            return;
        }
    }
}

static void h1_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct h1_conn *c = arg;
    if (what & BEV_EVENT_CONNECTED) {
        int one = 1;
        setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->base.ready = true;
        load_conn_ready(c->base.run, &c->base);
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        bool never_ready = !c->base.ready;
        if (c->busy && (what & BEV_EVENT_EOF)) {
            /* a response delimited by the close */
            http_parser_execute(&c->parser, &c->settings, NULL, 0);
            if (c->done) {
                h1_finish(c);
            }
        }
        h1_abort(&c->base, LO_IO);
        load_conn_down(c->base.run, &c->base, never_ready);
    }
}

static struct load_conn *h1_new(struct load *l, struct event_base *base,
                                const struct load_target *t, uint32_t id)
{
    struct h1_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->base.run = l;
    c->base.id = id;
    c->evb = base;
    c->t = t;
    http_parser_settings_init(&c->settings);
    c->settings.on_body = on_body;
    c->settings.on_message_complete = on_message_complete;
    return &c->base;
}

static int h1_start(struct load_conn *lc)
{
    struct h1_conn *c = (struct h1_conn *)lc;
    c->bev = bufferevent_socket_new(c->evb, -1, BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == NULL) {
        return -ENOMEM;
    }
    bufferevent_setcb(c->bev, h1_read_cb, NULL, h1_event_cb, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&c->t->addr, (int)c->t->addrlen) <
        0) {
        h1_drop(c);
        return -ECONNREFUSED;
    }
    return 0;
}

static void h1_pump(struct load_conn *lc)
{
    struct h1_conn *c = (struct h1_conn *)lc;
    if (!c->base.ready || c->busy || !load_take(c->base.run, &c->base, &c->req)) {
        return;
    }
    const struct pool_entry *e = c->req.e;
    char hdr[512];
    int hn = snprintf(hdr, sizeof(hdr),
                      "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: otlp-load/1\r\n"
                      "Content-Type: %s\r\n%sContent-Length: %zu\r\n\r\n",
                      signal_path(c->t->signal), c->t->host,
                      c->t->proto == LP_HTTP_JSON ? "application/json" : "application/x-protobuf",
                      c->t->gzip ? "Content-Encoding: gzip\r\n" : "", e->len);
    if (hn < 0 || (size_t)hn >= sizeof(hdr)) {
        load_done(c->base.run, &c->base, &c->req, LO_IO, 0, 0);
        return;
    }
    struct load_piece pc[2] = {
        {(const uint8_t *)hdr, (size_t)hn, false, NULL},
        {e->body, e->len, true, e},
    };
    c->req.t_sent = load_now_ns();
    load_entry_hold(e);
    if (load_send(c->bev, pc, 2) < 0) {
        load_done(c->base.run, &c->base, &c->req, LO_IO, 0, 0);
        return;
    }
    http_parser_init(&c->parser, HTTP_RESPONSE);
    c->parser.data = c;
    c->resp_len = 0;
    c->done = false;
    c->busy = true;
    c->base.inflight = 1;
}

static uint64_t h1_oldest(struct load_conn *lc)
{
    struct h1_conn *c = (struct h1_conn *)lc;
    return c->busy ? c->req.t_sent : 0;
}

static void h1_free(struct load_conn *lc)
{
    struct h1_conn *c = (struct h1_conn *)lc;
    if (c == NULL) {
        return;
    }
    h1_drop(c);
    free(c);
}

const struct load_transport load_http1 = {
    .conn_new = h1_new,
    .conn_start = h1_start,
    .conn_pump = h1_pump,
    .conn_abort = h1_abort,
    .conn_oldest = h1_oldest,
    .conn_free = h1_free,
};
