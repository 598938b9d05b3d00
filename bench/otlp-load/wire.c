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
#include <stdlib.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

void load_entry_release(struct pool_entry *e)
{
    if (e->refs > 0 && --e->refs == 0) {
        free(e->body);
        free(e);
    }
}

static void piece_written(const void *data, size_t len, void *owner)
{
    (void)data, (void)len;
    load_entry_release(owner);
}

void load_entry_hold(const struct pool_entry *e)
{
    struct pool_entry *m = (struct pool_entry *)e;
    if (m->refs > 0) {
        m->refs++;
    }
}

int load_send(struct bufferevent *bev, const struct load_piece *pc, int n)
{
    struct evbuffer *out = bufferevent_get_output(bev);
    size_t done = 0;
    int rc = 0;
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
        struct pool_entry *o = (struct pool_entry *)pc[i].owner;
        if (done >= pc[i].len || rc < 0) {
            done -= done >= pc[i].len ? pc[i].len : done;
            if (o) {
                load_entry_release(o); /* written (or given up): the hold ends */
            }
            continue;
        }
        const uint8_t *p = pc[i].p + done;
        size_t len = pc[i].len - done;
        done = 0;
        if (!pc[i].stable) {
            rc = evbuffer_add(out, p, len);
        } else if (o) {
            /* the piece's hold passes to the queued reference */
            rc = evbuffer_add_reference(out, p, len, piece_written, o);
            if (rc < 0) {
                load_entry_release(o);
            }
        } else {
            rc = evbuffer_add_reference(out, p, len, NULL, NULL);
        }
    }
    return rc < 0 ? -ENOMEM : 0;
}
