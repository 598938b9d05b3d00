/*
 * h2c.c - blocking HTTP/2 cleartext gRPC client for tests (see h2c.h).
 *
 * One nghttp2 client session per connection; output from
 * nghttp2_session_mem_send() is written with blocking writes, input is read
 * after poll() and fed to nghttp2_session_mem_recv(). Request bodies come
 * from a data provider that sends at most call->send_limit bytes and
 * defers after that, so a test can stop in the middle of a message.
 */
#include "tests/util/h2c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#define MAX_CALLS 512
#define DEADLINE_S 30

struct h2c {
    int fd;
    int port;
    nghttp2_session *sess;
    struct h2c_call *calls[MAX_CALLS];
    int n_calls;
    bool dead; /* EOF or an error: nothing more will arrive */
    int n_closed;
    bool settings_seen;
    bool goaway;
    int32_t goaway_last;
    uint32_t goaway_code;
    /* a frame scanner over the raw input: nghttp2 stops reporting frames
     * once it has a GOAWAY and no stream left, but the test wants them all */
    uint8_t fh[9];
    size_t fh_got;
    size_t payload_left;
    uint8_t ga[8];
    size_t ga_got;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void copy_value(char *dst, size_t cap, const uint8_t *v, size_t n)
{
    if (n >= cap) {
        n = cap - 1;
    }
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static bool name_is(const uint8_t *name, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(name, lit, len) == 0;
}

/* ---- nghttp2 callbacks ---- */

static int on_header(nghttp2_session *sess, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    struct h2c_call *call = nghttp2_session_get_stream_user_data(sess, frame->hd.stream_id);
    char tmp[32];
    (void)flags, (void)user;

    if (call == NULL || frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    if (name_is(name, namelen, ":status")) {
        copy_value(tmp, sizeof(tmp), value, valuelen);
        call->status = atoi(tmp);
    } else if (name_is(name, namelen, "grpc-status")) {
        copy_value(tmp, sizeof(tmp), value, valuelen);
        call->grpc_status = atoi(tmp);
    } else if (name_is(name, namelen, "grpc-message")) {
        copy_value(call->grpc_message, sizeof(call->grpc_message), value, valuelen);
    } else if (name_is(name, namelen, "grpc-status-details-bin")) {
        copy_value(call->details_bin, sizeof(call->details_bin), value, valuelen);
    } else if (name_is(name, namelen, "grpc-accept-encoding")) {
        copy_value(call->accept_encoding, sizeof(call->accept_encoding), value, valuelen);
    } else if (name_is(name, namelen, "content-type")) {
        copy_value(call->content_type, sizeof(call->content_type), value, valuelen);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *frame, void *user)
{
    struct h2c *c = user;
    struct h2c_call *call;

    switch (frame->hd.type) {
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
            c->settings_seen = true;
        }
        return 0;
    default:
        break;
    }
    call = nghttp2_session_get_stream_user_data(sess, frame->hd.stream_id);
    if (call == NULL) {
        return 0;
    }
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        call->header_frames++;
        if (call->header_frames == 1 && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
            call->first_headers_end_stream = true;
        }
        break;
    case NGHTTP2_DATA:
        call->data_frames++;
        break;
    case NGHTTP2_RST_STREAM:
        call->rst_received = true;
        call->rst_code = frame->rst_stream.error_code;
        break;
    default:
        break;
    }
    return 0;
}

static int on_data_chunk_recv(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data,
                              size_t len, void *user)
{
    struct h2c_call *call = nghttp2_session_get_stream_user_data(sess, id);
    (void)flags, (void)user;

    if (call == NULL) {
        return 0;
    }
    if (call->data_len + len > call->data_cap) {
        size_t cap = call->data_cap ? call->data_cap * 2 : 4096;
        while (cap < call->data_len + len) {
            cap *= 2;
        }
        uint8_t *np = realloc(call->data, cap);
        if (np == NULL) {
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        call->data = np;
        call->data_cap = cap;
    }
    memcpy(call->data + call->data_len, data, len);
    call->data_len += len;
    return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t error_code, void *user)
{
    struct h2c_call *call = nghttp2_session_get_stream_user_data(sess, id);
    struct h2c *c = user;

    if (call != NULL) {
        call->close_seq = ++c->n_closed;
        call->closed = true;
        call->close_code = error_code;
    }
    return 0;
}

static size_t send_limit(const struct h2c_call *call)
{
    if (call->send_limit == 0 || call->send_limit > call->body_len) {
        return call->body_len;
    }
    return call->send_limit;
}

static ssize_t body_read(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct h2c_call *call = src->ptr;
    size_t n = send_limit(call) - call->sent;
    (void)sess, (void)id, (void)user;

    if (n > len) {
        n = len;
    }
    memcpy(buf, call->body + call->sent, n);
    call->sent += n;
    if (call->sent == call->body_len && !call->keep_open) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
    }
    if (n == 0) {
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

/* ---- I/O ---- */

/* Follows frame boundaries in the server's bytes and records every GOAWAY. */
static void scan_frames(struct h2c *c, const uint8_t *p, size_t n)
{
    while (n > 0) {
        if (c->fh_got < 9) {
            size_t k = 9 - c->fh_got < n ? 9 - c->fh_got : n;
            memcpy(c->fh + c->fh_got, p, k);
            c->fh_got += k;
            p += k;
            n -= k;
            if (c->fh_got == 9) {
                c->payload_left = (size_t)c->fh[0] << 16 | (size_t)c->fh[1] << 8 | c->fh[2];
                c->ga_got = 0;
                if (c->payload_left == 0) {
                    c->fh_got = 0;
                }
            }
            continue;
        }
        size_t k = c->payload_left < n ? c->payload_left : n;
        if (c->fh[3] == NGHTTP2_GOAWAY) {
            for (size_t i = 0; i < k && c->ga_got < 8; i++) {
                c->ga[c->ga_got++] = p[i];
            }
            if (c->ga_got == 8 && k > 0) {
                c->goaway = true;
                c->goaway_last = (int32_t)(((uint32_t)c->ga[0] << 24 | (uint32_t)c->ga[1] << 16 |
                                            (uint32_t)c->ga[2] << 8 | c->ga[3]) &
                                           0x7fffffffu);
                c->goaway_code = (uint32_t)c->ga[4] << 24 | (uint32_t)c->ga[5] << 16 |
                                 (uint32_t)c->ga[6] << 8 | c->ga[7];
                c->ga_got = 9; /* recorded */
            }
        }
        p += k;
        n -= k;
        c->payload_left -= k;
        if (c->payload_left == 0) {
            c->fh_got = 0;
        }
    }
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        /* send(MSG_NOSIGNAL): a peer that died (the crash battery kills the
         * daemon mid-export) must fail the write, not SIGPIPE the test. */
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int flush_out(struct h2c *c)
{
    for (;;) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(c->sess, &p);
        if (n < 0) {
            return -1;
        }
        if (n == 0) {
            return 0;
        }
        if (write_all(c->fd, p, (size_t)n) < 0) {
            c->dead = true;
            return -1;
        }
    }
}

/* Writes what is pending, then reads once if input arrives within
 * |timeout_ms|. -1 once the connection is gone. */
static int step(struct h2c *c, int timeout_ms)
{
    uint8_t buf[65536];
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};

    if (c->dead) {
        return -1;
    }
    if (flush_out(c) < 0) {
        c->dead = true;
        return -1;
    }
    int r = poll(&pfd, 1, timeout_ms);
    if (r < 0) {
        return errno == EINTR ? 0 : -1;
    }
    if (r == 0) {
        return 0;
    }
    ssize_t n = read(c->fd, buf, sizeof(buf));
    if (n <= 0) {
        if (n < 0 && errno == EINTR) {
            return 0;
        }
        c->dead = true;
        return -1;
    }
    scan_frames(c, buf, (size_t)n);
    if (nghttp2_session_mem_recv(c->sess, buf, (size_t)n) < 0) {
        c->dead = true;
        return -1;
    }
    return 0;
}

int h2c_connect(int port, bool wait_settings, struct h2c **out)
{
    nghttp2_session_callbacks *cbs;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {DEADLINE_S, 0};
    int one = 1;
    struct h2c *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return -1;
    }
    c->port = port;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        goto fail;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (nghttp2_session_callbacks_new(&cbs) != 0) {
        goto fail;
    }
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    int rv = nghttp2_session_client_new(&c->sess, cbs, c);
    nghttp2_session_callbacks_del(cbs);
    if (rv != 0 || nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, NULL, 0) != 0 ||
        flush_out(c) < 0) {
        goto fail;
    }
    if (wait_settings) {
        double dl = now_s() + DEADLINE_S;
        while (!c->settings_seen) {
            if (now_s() > dl || step(c, 100) < 0) {
                goto fail;
            }
        }
        if (flush_out(c) < 0) { /* our ACK goes out before any stream */
            goto fail;
        }
    }
    *out = c;
    return 0;

fail:
    h2c_free(c);
    return -1;
}

void h2c_free(struct h2c *c)
{
    if (c == NULL) {
        return;
    }
    if (c->sess != NULL) {
        nghttp2_session_del(c->sess);
    }
    if (c->fd >= 0) {
        close(c->fd);
    }
    free(c);
}

/* Adds "name: value" to |nv| (the strings stay owned by the caller). */
static void nv_put(nghttp2_nv *nv, size_t *n, const char *name, size_t namelen, const char *value)
{
    for (size_t i = 0; i < *n; i++) {
        if (nv[i].namelen == namelen && memcmp(nv[i].name, name, namelen) == 0) {
            nv[i].value = (uint8_t *)value;
            nv[i].valuelen = strlen(value);
            return;
        }
    }
    nv[*n] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, namelen, strlen(value),
                          NGHTTP2_NV_FLAG_NONE};
    (*n)++;
}

int h2c_submit(struct h2c *c, const char *path, const char *const *extra, struct h2c_call *call)
{
    char authority[32];
    nghttp2_nv nv[40];
    size_t n = 0;
    nghttp2_data_provider prd = {.source.ptr = call, .read_callback = body_read};
    /* no body at all: the HEADERS frame ends the stream */
    const nghttp2_data_provider *prdp = call->body == NULL && !call->keep_open ? NULL : &prd;

    if (c->n_calls == MAX_CALLS) {
        return -1;
    }
    call->grpc_status = -1;
    snprintf(authority, sizeof(authority), "127.0.0.1:%d", c->port);
    nv_put(nv, &n, ":method", 7, "POST");
    nv_put(nv, &n, ":scheme", 7, "http");
    nv_put(nv, &n, ":authority", 10, authority);
    nv_put(nv, &n, ":path", 5, path);
    nv_put(nv, &n, "content-type", 12, "application/grpc");
    nv_put(nv, &n, "te", 2, "trailers");
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 40; i++) {
        const char *colon = strchr(extra[i], ':');
        if (colon == extra[i]) { /* a pseudo-header ":method: GET" */
            colon = strchr(extra[i] + 1, ':');
        }
        if (colon == NULL) {
            return -1;
        }
        const char *v = colon + 1;
        while (*v == ' ') {
            v++;
        }
        nv_put(nv, &n, extra[i], (size_t)(colon - extra[i]), v);
    }
    int32_t id = nghttp2_submit_request(c->sess, NULL, nv, n, prdp, call);
    if (id < 0) {
        return -1;
    }
    call->id = id;
    c->calls[c->n_calls++] = call;
    return 0;
}

static bool all_closed(const struct h2c *c)
{
    for (int i = 0; i < c->n_calls; i++) {
        if (!c->calls[i]->closed) {
            return false;
        }
    }
    return true;
}

int h2c_wait(struct h2c *c)
{
    double dl = now_s() + DEADLINE_S;
    while (!all_closed(c)) {
        if (now_s() > dl || step(c, 100) < 0) {
            return all_closed(c) ? 0 : -1;
        }
    }
    flush_out(c); /* e.g. acknowledgements; the calls are complete either way */
    return 0;
}

int h2c_pump(struct h2c *c, struct h2c_call *call)
{
    double dl = now_s() + DEADLINE_S;
    while (call->sent < send_limit(call) && !call->closed) {
        if (now_s() > dl || step(c, 100) < 0) {
            return -1;
        }
    }
    return flush_out(c);
}

int h2c_resume(struct h2c *c, struct h2c_call *call, size_t limit, bool keep_open)
{
    call->send_limit = limit;
    call->keep_open = keep_open;
    if (nghttp2_session_resume_data(c->sess, call->id) != 0) {
        return -1;
    }
    return flush_out(c);
}

int h2c_rst(struct h2c *c, struct h2c_call *call, uint32_t code)
{
    if (nghttp2_submit_rst_stream(c->sess, NGHTTP2_FLAG_NONE, call->id, code) != 0) {
        return -1;
    }
    return flush_out(c);
}

bool h2c_goaway(const struct h2c *c, int32_t *last_id)
{
    if (c->goaway && last_id != NULL) {
        *last_id = c->goaway_last;
    }
    return c->goaway;
}

int h2c_settings(struct h2c *c)
{
    if (nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, NULL, 0) != 0) {
        return -1;
    }
    return step(c, 0) < 0 ? -1 : flush_out(c);
}

uint32_t h2c_goaway_code(const struct h2c *c)
{
    return c->goaway ? c->goaway_code : UINT32_MAX;
}

int h2c_ping(struct h2c *c, int ms)
{
    if (nghttp2_submit_ping(c->sess, NGHTTP2_FLAG_NONE, NULL) != 0) {
        return -1;
    }
    double dl = now_s() + ms / 1000.0;
    do {
        if (step(c, 10) < 0) {
            return -1;
        }
    } while (now_s() < dl);
    return flush_out(c);
}

int h2c_wait_closed(struct h2c *c)
{
    double dl = now_s() + DEADLINE_S;
    while (!c->dead) {
        if (now_s() > dl) {
            return -1;
        }
        step(c, 100);
    }
    return 0;
}

int h2c_unary(int port, const char *path, const char *const *extra, const void *body, size_t len,
              struct h2c_call *call)
{
    struct h2c *c;
    int rc;

    call->body = body;
    call->body_len = len;
    if (h2c_connect(port, true, &c) < 0) {
        return -1;
    }
    rc = h2c_submit(c, path, extra, call);
    if (rc == 0) {
        rc = h2c_wait(c);
    }
    h2c_free(c);
    return rc;
}

void h2c_call_free(struct h2c_call *call)
{
    free(call->data);
    call->data = NULL;
    call->data_len = call->data_cap = 0;
}

uint8_t *h2c_frame(const void *msg, size_t len, bool compressed, size_t *out_len)
{
    uint8_t *p = malloc(len + 5);
    if (p == NULL) {
        return NULL;
    }
    p[0] = compressed ? 1 : 0;
    p[1] = (uint8_t)(len >> 24);
    p[2] = (uint8_t)(len >> 16);
    p[3] = (uint8_t)(len >> 8);
    p[4] = (uint8_t)len;
    if (len > 0) {
        memcpy(p + 5, msg, len);
    }
    *out_len = len + 5;
    return p;
}
