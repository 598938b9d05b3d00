/*
 * pbw.c - protobuf wire-format writer (see pbw.h).
 */
#include "lib/pbw.h"

#include <event2/buffer.h>

void pbw_init(struct pbw *w, struct evbuffer *evb)
{
    w->evb = evb;
    w->out = evb != NULL ? w->stage : NULL;
    w->cap = evb != NULL ? sizeof(w->stage) : 0;
    w->blen = 0;
    w->n = 0;
}

void pbw_init_buf(struct pbw *w, uint8_t *out, size_t cap)
{
    w->evb = NULL;
    w->out = out;
    w->cap = cap;
    w->blen = 0;
    w->n = 0;
}

void pbw_flush(struct pbw *w)
{
    if (w->evb != NULL && w->blen > 0) {
        evbuffer_add(w->evb, w->stage, w->blen);
    }
    if (w->evb != NULL) {
        w->blen = 0;
    }
}

void pbw_raw_slow(struct pbw *w, const void *p, size_t n)
{
    w->n += n;
    if (w->evb == NULL) {
        /* the caller's buffer: what fits, then nothing more (w->n > cap
         * tells the caller; later pieces must not land after a gap) */
        if (w->cap - w->blen >= n) {
            memcpy(w->out + w->blen, p, n);
            w->blen += n;
        } else {
            w->cap = w->blen;
        }
        return;
    }
    if (n > sizeof(w->stage) / 2) {
        pbw_flush(w);
        evbuffer_add(w->evb, p, n);
        return;
    }
    pbw_flush(w); /* the stage is full */
    memcpy(w->stage, p, n);
    w->blen = n;
}

void pbw_fixed64(struct pbw *w, uint32_t field, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++) {
        b[i] = (uint8_t)(v >> (8 * i));
    }
    pbw_tag(w, field, PBW_I64);
    pbw_raw(w, b, 8);
}

void pbw_fixed32(struct pbw *w, uint32_t field, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++) {
        b[i] = (uint8_t)(v >> (8 * i));
    }
    pbw_tag(w, field, PBW_I32);
    pbw_raw(w, b, 4);
}

void pbw_sub(struct pbw *w, uint32_t field, pbw_msg_fn fn, const void *arg)
{
    struct pbw c;
    pbw_init(&c, NULL);
    fn(&c, arg);
    pbw_len(w, field, c.n);
    if (pbw_counting(w)) {
        w->n += c.n;
        return;
    }
    fn(w, arg);
}
