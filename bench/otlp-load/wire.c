/*
 * wire.c - otlp-load's socket writes: straight to the socket when nothing is
 * queued, through the bufferevent only for what the socket did not take.
 *
 * Queuing every request in the bufferevent costs two epoll_ctl calls per
 * request (the write event is added, then removed once drained), about a
 * fifth of the client's system time at small requests. Writing first and
 * queuing only the remainder keeps the write event idle in the usual case;
 * a large body that fills the socket buffer continues through the
 * bufferevent as before, and order is kept because nothing is written
 * directly while anything is queued.
 */
#include "bench/otlp-load/load.h"

#include <errno.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

int load_send(struct bufferevent *bev, const struct load_piece *pc, int n)
{
    struct evbuffer *out = bufferevent_get_output(bev);
    size_t done = 0;
    if (evbuffer_get_length(out) == 0) {
        struct iovec iov[LOAD_MAX_PIECES];
        for (int i = 0; i < n; i++) {
            iov[i].iov_base = (void *)pc[i].p;
            iov[i].iov_len = pc[i].len;
        }
        ssize_t w;
        do {
            w = writev(bufferevent_getfd(bev), iov, n);
        } while (w < 0 && errno == EINTR);
        /* On an error the bytes are queued anyway: the bufferevent's own
         * write then reports it through the event callback, in one place. */
        done = w > 0 ? (size_t)w : 0;
    }
    for (int i = 0; i < n; i++) {
        if (done >= pc[i].len) {
            done -= pc[i].len;
            continue;
        }
        const uint8_t *p = pc[i].p + done;
        size_t len = pc[i].len - done;
        done = 0;
        int rc = pc[i].stable ? evbuffer_add_reference(out, p, len, NULL, NULL)
                              : evbuffer_add(out, p, len);
        if (rc < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}
