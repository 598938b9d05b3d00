/*
 * block_spans.c - format 6's coded span events and links (cold blocks,
 * blk_wopts.span_refs), both ways. batch.h stores an event's time as 8
 * absolute bytes and a link's trace and span id as 24 raw bytes; in a
 * block the event time is close to its span's start, and a link mostly
 * points at a span of the same block (the root of an earlier trace), whose
 * ids the root table holds already. The writer recodes each entry of the
 * two detail columns (block_int.h, "v6 SPAN DETAIL"); the reader's table
 * load rebuilds batch.h's bytes into memory the block owns, so views hand
 * out the same events and links as from a file without the flag.
 *
 * A coded events entry, per event (batch.h's fields, in order):
 *   uv zz(time_ns - the span's start_ns), uv name length, name, uv
 *   dropped_attrs, uv attr count, uv attr bytes, attrs
 * A coded links entry, per link:
 *   uv ref (0: 16 bytes trace id and 8 bytes span id follow; r >= 1: the
 *   trace id and span id of block row j - unzz(r - 1), j this span's
 *   row), uv trace_state length, trace_state, uv flags, uv dropped_attrs,
 *   uv attr count, uv attr bytes, attrs
 * (differences wrap at 64 bits; the u32 fields are at most UINT32_MAX).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/block_wint.h"

/* The most a rebuilt events or links column may take (a coded entry is
 * at most 28 bytes a link shorter than its rebuild): beyond it the load
 * fails. */
#define SDET_OUT_MAX (8 * ZSTD_RAW_MAX)

/* ---- writer ---- */

/* A reader of batch.h's bytes: |bad| once anything runs past |end|. */
struct brd {
    const uint8_t *p, *end;
    bool bad;
};

static const uint8_t *take(struct brd *r, uint64_t n)
{
    if (r->bad || n > (uint64_t)(r->end - r->p)) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *at = r->p;
    r->p += n;
    return at;
}

static uint32_t take32(struct brd *r)
{
    const uint8_t *at = take(r, 4);
    return at != NULL ? rd32(at) : 0;
}

/* A length varint that the rebuild writes back the same: minimal. */
static uint64_t take_len(struct brd *r)
{
    const uint8_t *at = r->p;
    uint64_t v = r->bad ? 0 : uv_take(&r->p, r->end, &r->bad);
    if (!r->bad && (size_t)(r->p - at) != (size_t)pbw_varint_size(v)) {
        r->bad = true;
    }
    return v;
}

/* The events of a row (batch.h's bytes p[0, n)) whose span starts at
 * |start|, coded onto |q|: the byte after them, or NULL when they do not
 * parse. An entry grows by at most 5 bytes an event or link (a time of
 * up to 10 bytes for 8, a literal link's 25 for 24; u32 fields of up to
 * 5 bytes for 4), and an event is at least 21 bytes, a link 41: |q| has
 * room for n + n / 4. */
static uint8_t *code_events(uint8_t *q, const uint8_t *p, size_t n, uint64_t start)
{
    struct brd r = {p, p + n, false};
    while (r.p < r.end && !r.bad) {
        const uint8_t *t = take(&r, 8);
        uint64_t nl = take_len(&r);
        const uint8_t *name = take(&r, nl);
        uint32_t drop = take32(&r), cnt = take32(&r), nb = take32(&r);
        const uint8_t *attrs = take(&r, nb);
        if (r.bad) {
            return NULL;
        }
        q = uv_put(q, zz((int64_t)(rd64(t) - start)));
        q = uv_put(q, nl);
        memcpy(q, name, nl);
        q = uv_put(q + nl, drop);
        q = uv_put(q, cnt);
        q = uv_put(q, nb);
        memcpy(q, attrs, nb);
        q += nb;
    }
    return r.bad ? NULL : q;
}

/* The row of span id |id| whose trace id is |tid|, or -1. */
static int64_t row_of(const struct wcols *w, const uint8_t *tid, uint64_t id)
{
    const struct dictb *tr = &w->D[X_TRACES];
    int64_t row = prefs_row(w, id);
    if (row < 0 || memcmp(tr->data.p + tr->offs[tr->codes[row]], tid, 16) != 0) {
        return -1;
    }
    return row;
}

/* As code_events for the links of row |j|. */
static uint8_t *code_links(const struct wcols *w, uint8_t *q, const uint8_t *p, size_t n,
                           uint64_t j)
{
    struct brd r = {p, p + n, false};
    while (r.p < r.end && !r.bad) {
        const uint8_t *ids = take(&r, 24);
        uint64_t tl = take_len(&r);
        const uint8_t *ts = take(&r, tl);
        uint32_t flags = take32(&r), drop = take32(&r), cnt = take32(&r), nb = take32(&r);
        const uint8_t *attrs = take(&r, nb);
        if (r.bad) {
            return NULL;
        }
        int64_t row = row_of(w, ids, rd64(ids + 16));
        if (row >= 0) {
            q = uv_put(q, zz((int64_t)(j - (uint64_t)row)) + 1);
        } else {
            *q++ = 0;
            memcpy(q, ids, 24);
            q += 24;
        }
        q = uv_put(q, tl);
        memcpy(q, ts, tl);
        q = uv_put(q + tl, flags);
        q = uv_put(q, drop);
        q = uv_put(q, cnt);
        q = uv_put(q, nb);
        memcpy(q, attrs, nb);
        q += nb;
    }
    return r.bad ? NULL : q;
}

int sdet_build(struct wcols *w, struct strb *xs, bool *coded)
{
    *coded = false;
    for (int c = 0; c < 2; c++) {
        const struct strb *s = &w->S[c == 0 ? T_EVENTS : T_LINKS];
        struct strb *x = &xs[c];
        size_t n = s->data.len;
        if (w->rows + 1 > x->cap_offs) {
            free(x->offs);
            x->offs = malloc((w->rows + 1) * sizeof(*x->offs));
            x->cap_offs = x->offs != NULL ? w->rows + 1 : 0;
            if (x->offs == NULL) {
                return -ENOMEM;
            }
        }
        vbuf_reset(&x->data);
        if (vbuf_reserve(&x->data, n + n / 4 + 16) < 0) {
            return -ENOMEM;
        }
        uint8_t *q0 = x->data.p, *q = q0;
        x->offs[0] = 0;
        for (uint64_t j = 0; j < w->rows; j++) {
            const uint8_t *p = s->data.p + s->offs[j];
            size_t len = (size_t)(s->offs[j + 1] - s->offs[j]);
            if (len > 0) {
                q = c == 0 ? code_events(q, p, len, w->I[T_START][j]) : code_links(w, q, p, len, j);
                if (q == NULL) {
                    return 0; /* not batch.h's bytes: the block stores them as given */
                }
            }
            x->offs[j + 1] = (uint64_t)(q - q0);
        }
        x->data.len = (size_t)(q - q0);
    }
    *coded = true;
    return 0;
}

/* ---- reader ---- */

static bool put_u32(struct vbuf *o, uint64_t v)
{
    uint8_t b[4];
    wr32(b, (uint32_t)v);
    return v <= UINT32_MAX && vbuf_put(o, b, 4) == 0;
}

/* One coded entry of row |j| (c 0 events, 1 links) appended to |o| in
 * batch.h's bytes: 0, -EBADMSG or -ENOMEM. */
static int rebuild_one(const blk *b, int c, uint64_t j, const uint8_t *p, const uint8_t *end,
                       struct vbuf *o)
{
    bool bad = false;
    while (p < end) {
        uint8_t tmp[10];
        if (c == 0) {
            uint64_t t = ic_get(&b->I[T_START], j) + (uint64_t)unzz(uv_take(&p, end, &bad));
            wr64(tmp, t);
            if (vbuf_put(o, tmp, 8) < 0) {
                return -ENOMEM;
            }
        } else {
            uint64_t ref = uv_take(&p, end, &bad);
            if (ref == 0) {
                if (bad || end - p < 24) {
                    return -EBADMSG;
                }
                if (vbuf_put(o, p, 24) < 0) {
                    return -ENOMEM;
                }
                p += 24;
            } else {
                uint64_t row = j - (uint64_t)unzz(ref - 1);
                if (row >= b->rows) {
                    return -EBADMSG; /* a reference outside the block */
                }
                const struct dcol *tr = &b->D[X_TRACES];
                const uint8_t *tid = tr->dict.data + ic_get(&tr->dict.off, ic_get(&tr->codes, row));
                if (vbuf_put(o, tid, 16) < 0 || vbuf_put(o, b->R[T_SPAN] + 8 * row, 8) < 0) {
                    return -ENOMEM;
                }
            }
        }
        uint64_t nl = uv_take(&p, end, &bad);
        if (bad || nl > (uint64_t)(end - p)) {
            return -EBADMSG;
        }
        uint8_t *q = uv_put(tmp, nl);
        if (vbuf_put(o, tmp, (size_t)(q - tmp)) < 0 || vbuf_put(o, p, nl) < 0) {
            return -ENOMEM;
        }
        p += nl;
        uint64_t nb = 0;
        for (int f = c == 0 ? 1 : 0; f < 4; f++) { /* links: flags first */
            nb = uv_take(&p, end, &bad);
            if (bad || nb > UINT32_MAX) {
                return -EBADMSG;
            }
            if (!put_u32(o, nb)) {
                return -ENOMEM;
            }
        }
        if (nb > (uint64_t)(end - p)) {
            return -EBADMSG;
        }
        if (vbuf_put(o, p, nb) < 0) {
            return -ENOMEM;
        }
        p += nb;
        if (o->len > SDET_OUT_MAX) {
            return -EBADMSG;
        }
    }
    return 0;
}

struct sdet_ctx {
    const blk *b;
    int c;
};

static int sdet_row(const void *ctx, uint64_t i, const uint8_t *p, const uint8_t *end,
                    struct vbuf *o)
{
    const struct sdet_ctx *x = ctx;
    return rebuild_one(x->b, x->c, i, p, end, o);
}

int sdet_rebuild(blk *b, struct scol *enc, int c, uint8_t **buf, uint64_t **offs)
{
    struct sdet_ctx x = {b, c};
    return det_rebuild(enc, b->rows, sdet_row, &x, SDET_OUT_MAX, buf, offs);
}
