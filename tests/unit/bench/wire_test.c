/*
 * wire_test.c - otlp-load's socket writes (bench/otlp-load/wire.c):
 * bytes arrive whole and in order whether the socket takes them at once or
 * only in part, and a request body is held exactly as long as queued output
 * points into it.
 *
 * wire.c lives under bench/ (not in the project library), so it is compiled
 * into this test by inclusion.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "bench/otlp-load/wire.c"

/* Reads everything available on |fd| (non-blocking) into |out| at |*got|. */
static void drain(int fd, uint8_t *out, size_t cap, size_t *got)
{
    for (;;) {
        ssize_t r = recv(fd, out + *got, cap - *got, MSG_DONTWAIT);
        if (r <= 0) {
            return;
        }
        *got += (size_t)r;
    }
}

Test(loadgen_wire, small_sends_go_straight_to_the_socket)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event_base *base = event_base_new();
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    static const uint8_t body[] = "0123456789";
    char hdr[] = "HEAD:";
    struct load_piece pc[2] = {
        {(const uint8_t *)hdr, 5, false, NULL},
        {body, 10, true, NULL},
    };
    cr_assert_eq(load_send(bev, pc, 2), 0);
    memset(hdr, 'x', 5); /* a copied piece may be reused at once */
    cr_assert_eq(evbuffer_get_length(bufferevent_get_output(bev)), 0, "nothing queued");
    uint8_t got[64];
    size_t n = 0;
    drain(sv[1], got, sizeof(got), &n);
    cr_assert_eq(n, 15);
    cr_assert_eq(memcmp(got, "HEAD:0123456789", 15), 0);
    bufferevent_free(bev);
    event_base_free(base);
    close(sv[1]);
}

Test(loadgen_wire, a_partly_written_body_stays_held_until_its_bytes_leave)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    evutil_make_socket_nonblocking(sv[0]);
    struct event_base *base = event_base_new();
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    bufferevent_enable(bev, EV_WRITE);

    /* a --unique request: holds for the request, for this test (to look at
     * the bytes at the end) and for the piece */
    const size_t len = 1 << 20;
    struct pool_entry *e = calloc(1, sizeof(*e));
    e->body = malloc(len);
    e->len = len;
    for (size_t i = 0; i < len; i++) {
        e->body[i] = (uint8_t)(i * 7 + i / 251);
    }
    e->refs = 1;
    char hdr[16] = "HDR";
    load_entry_hold(e);
    load_entry_hold(e);
    cr_assert_eq(e->refs, 3);
    struct load_piece pc[2] = {{(const uint8_t *)hdr, 3, false, NULL}, {e->body, len, true, e}};
    cr_assert_eq(load_send(bev, pc, 2), 0);
    size_t queued = evbuffer_get_length(bufferevent_get_output(bev));
    cr_assert(queued > 0 && queued < len, "the socket took part: %zu queued", queued);
    cr_assert_eq(e->refs, 3, "queued bytes still point into the body");

    /* the request completes first (an early answer): the body must live on */
    load_entry_release(e);
    cr_assert_eq(e->refs, 2);

    /* a second send while output is queued goes behind it, in order */
    struct load_piece tail = {(const uint8_t *)"END", 3, false, NULL};
    cr_assert_eq(load_send(bev, &tail, 1), 0);

    uint8_t *got = malloc(len + 16);
    size_t n = 0;
    while (n < len + 6) {
        drain(sv[1], got, len + 16, &n);
        event_base_loop(base, EVLOOP_NONBLOCK);
    }
    cr_assert_eq(n, len + 6);
    cr_assert_eq(memcmp(got, "HDR", 3), 0);
    cr_assert_eq(memcmp(got + 3, e->body, len), 0, "body bytes out of order or corrupted");
    cr_assert_eq(memcmp(got + 3 + len, "END", 3), 0);
    cr_assert_eq(evbuffer_get_length(bufferevent_get_output(bev)), 0);
    /* the queued reference let go once written: only the test's hold is left */
    cr_assert_eq(e->refs, 1);
    bufferevent_free(bev);
    event_base_free(base);
    close(sv[1]);
    load_entry_release(e); /* frees it; LeakSanitizer checks */
    free(got);
}

Test(loadgen_wire, pool_entries_are_never_counted_or_freed)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct event_base *base = event_base_new();
    struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    static uint8_t body[32] = "pool";
    struct pool_entry e = {.body = body, .len = sizeof(body), .records = 1, .refs = 0};
    load_entry_hold(&e);
    cr_assert_eq(e.refs, 0);
    struct load_piece pc = {body, sizeof(body), true, &e};
    cr_assert_eq(load_send(bev, &pc, 1), 0);
    load_entry_release(&e); /* no-op on a pool entry (static memory here) */
    cr_assert_eq(e.refs, 0);
    bufferevent_free(bev);
    event_base_free(base);
    close(sv[1]);
}
