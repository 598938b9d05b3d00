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
 *
 * With blk_wopts.events_by_key (META flag bit 5) the events column is
 * instead one encoding of every row's events (block_int.h, "v6 SPAN EVENTS
 * BY KEY"): batch.h spells each attribute key out in every event, where a
 * block holds a handful of keys and of (name, keys) shapes; each key's
 * values together compress as the attrs table's by-key lists do, and the
 * times, apart, are the rest (bench/STORAGE.md, h-evat: 4.39 -> 2.61 B a
 * span for the column under zstd on the generator's corpus).
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

int sdet_build(struct wcols *w, struct strb *xs, bool links_only, bool *coded)
{
    *coded = false;
    for (int c = links_only ? 1 : 0; c < 2; c++) {
        const struct strb *s = &w->S[c == 0 ? T_EVENTS : T_LINKS];
        struct strb *x = &xs[c];
        size_t n = s->data.len;
        if (cap_u64(&x->offs, &x->cap_offs, w->rows + 1) < 0) {
            return -ENOMEM;
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

/* ---- events by key (META flag bit 5), writer ---- */

void sevw_free(struct sevw *e)
{
    vbuf_fini(&e->times);
    vbuf_fini(&e->codes);
    vbuf_fini(&e->lit);
    for (int k = 0; k < SEV_KEYS; k++) {
        vbuf_fini(&e->val[k]);
    }
}

/* The id of key p[0, n), added when new; -1 when the dictionary is full. */
static int sev_key(struct sevw *e, const uint8_t *p, uint32_t n)
{
    for (uint32_t k = 0; k < e->nkeys; k++) {
        if (e->kn[k] == n && memcmp(e->kp[k], p, n) == 0) {
            return (int)k;
        }
    }
    if (e->nkeys == SEV_KEYS) {
        return -1;
    }
    e->kp[e->nkeys] = p;
    e->kn[e->nkeys] = n;
    return (int)e->nkeys++;
}

/* The shape code (>= 1) of an event with name |name| (|nl| bytes), |drop|
 * and the |cnt| attributes at a[0, nb), whose values it appends to their
 * keys' streams; 0 when the event is to be stored literal (attributes that
 * do not parse into |cnt| key-values filling |nb| bytes exactly, a key
 * length that is not minimal, a limit reached); -ENOMEM. */
static int sev_shape(struct sevw *e, const uint8_t *name, uint64_t nl, uint32_t drop, uint32_t cnt,
                     const uint8_t *a, uint32_t nb)
{
    struct sevshape s = {name, (uint32_t)nl, drop, cnt, {0}};
    const uint8_t *kp[SEV_SHAPE_KEYS], *vp[SEV_SHAPE_KEYS], *ve[SEV_SHAPE_KEYS];
    uint64_t kl[SEV_SHAPE_KEYS];
    struct brd r = {a, a + nb, false};
    if (cnt > SEV_SHAPE_KEYS) {
        return 0;
    }
    for (uint32_t i = 0; i < cnt; i++) {
        kl[i] = take_len(&r);
        kp[i] = take(&r, kl[i]);
        vp[i] = r.p;
        ve[i] = r.bad ? NULL : value_end(r.p, r.end);
        if (ve[i] == NULL) {
            return 0;
        }
        r.p = ve[i];
    }
    if (r.p != r.end) {
        return 0;
    }
    for (uint32_t i = 0; i < cnt; i++) { /* only the keys of an event that codes */
        int k = sev_key(e, kp[i], (uint32_t)kl[i]);
        if (k < 0) {
            return 0;
        }
        s.k[i] = (uint8_t)k;
    }
    uint32_t c = 0;
    while (c < e->nshapes &&
           !(e->sh[c].nl == s.nl && e->sh[c].drop == drop && e->sh[c].nk == cnt &&
             memcmp(e->sh[c].k, s.k, cnt) == 0 && memcmp(e->sh[c].name, name, nl) == 0)) {
        c++;
    }
    if (c == SEV_SHAPES) {
        return 0;
    }
    if (c == e->nshapes) {
        e->sh[e->nshapes++] = s;
    }
    for (uint32_t i = 0; i < cnt; i++) {
        if (vbuf_put(&e->val[s.k[i]], vp[i], (size_t)(ve[i] - vp[i])) < 0) {
            return -ENOMEM;
        }
    }
    return (int)c + 1;
}

int sev_build(struct wcols *w, struct strb *x, bool *coded)
{
    struct sevw *e = &w->ev;
    const struct strb *s = &w->S[T_EVENTS];
    *coded = false;
    e->nkeys = e->nshapes = 0;
    vbuf_reset(&e->times);
    vbuf_reset(&e->codes);
    vbuf_reset(&e->lit);
    for (int k = 0; k < SEV_KEYS; k++) {
        vbuf_reset(&e->val[k]);
    }
    for (uint64_t j = 0; j < w->rows; j++) {
        struct brd r = {s->data.p + s->offs[j], s->data.p + s->offs[j + 1], false};
        uint64_t n = 0;
        while (r.p < r.end) {
            const uint8_t *t = take(&r, 8), *at = r.p;
            uint64_t nl = take_len(&r);
            const uint8_t *name = take(&r, nl);
            uint32_t drop = take32(&r), cnt = take32(&r), nb = take32(&r);
            const uint8_t *attrs = take(&r, nb);
            if (r.bad) {
                return 0; /* not batch.h's bytes: sdet_build's coding, or none */
            }
            n++;
            int c = sev_shape(e, name, nl, drop, cnt, attrs, nb);
            if (c < 0 || vbuf_put_uv(&e->times, zz((int64_t)(rd64(t) - w->I[T_START][j]))) < 0 ||
                vbuf_put_uv(&e->codes, (uint64_t)c) < 0 ||
                (c == 0 && (vbuf_put_uv(&e->lit, (uint64_t)(r.p - at)) < 0 ||
                            vbuf_put(&e->lit, at, (size_t)(r.p - at)) < 0))) {
                return -ENOMEM;
            }
        }
        if (n != w->I[T_NEV][j]) {
            return 0; /* the rebuild takes each row's events by its count */
        }
    }
    if (cap_u64(&x->offs, &x->cap_offs, w->rows + 1) < 0) {
        return -ENOMEM;
    }
    memset(x->offs, 0, (w->rows + 1) * sizeof(*x->offs));
    struct vbuf *o = &x->data, kd, sd;
    vbuf_reset(o);
    vbuf_init(&kd);
    vbuf_init(&sd);
    int rc = 0;
    for (uint32_t k = 0; k < e->nkeys; k++) {
        rc |= vbuf_put_str(&kd, e->kp[k], e->kn[k]);
    }
    for (uint32_t c = 0; c < e->nshapes; c++) {
        const struct sevshape *h = &e->sh[c];
        rc |=
            vbuf_put_str(&sd, h->name, h->nl) | vbuf_put_uv(&sd, h->drop) | vbuf_put_uv(&sd, h->nk);
        for (uint32_t i = 0; i < h->nk; i++) {
            rc |= vbuf_put_uv(&sd, h->k[i]);
        }
    }
    const struct vbuf *part[5 + SEV_KEYS] = {&kd, &sd, &e->times, &e->codes, &e->lit};
    for (uint32_t k = 0; k < e->nkeys; k++) {
        part[5 + k] = &e->val[k];
    }
    rc |= vbuf_put_uv(o, w->rows) | vbuf_put_uv(o, e->nkeys) | vbuf_put_uv(o, e->nshapes) |
          vbuf_put_uv(o, s->offs[w->rows]);
    for (uint32_t k = 0; k < 5 + e->nkeys; k++) {
        rc |= vbuf_put_uv(o, part[k]->len);
    }
    for (uint32_t k = 0; k < 5 + e->nkeys && rc == 0; k++) {
        rc = part[k]->len > 0 ? vbuf_put(o, part[k]->p, part[k]->len) : 0;
    }
    vbuf_fini(&kd);
    vbuf_fini(&sd);
    if (rc != 0) {
        return -ENOMEM;
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

/* ---- events by key (META flag bit 5), reader ---- */

/* A stream of the encoding: [p, end). */
struct sst {
    const uint8_t *p, *end;
};

/* A shape of the dictionary: the name, dropped count and its key ids (uv,
 * checked below the key count) at [k, kend). */
struct sshape {
    const uint8_t *name, *k;
    uint64_t nl, drop, nk;
};

/* The |n| entries { uv length, bytes } filling [p, end) into at[] / len[]. */
static bool sev_dict(const uint8_t *p, const uint8_t *end, uint64_t n, const uint8_t **at,
                     uint64_t *len)
{
    bool bad = false;
    for (uint64_t i = 0; i < n; i++) {
        len[i] = uv_take(&p, end, &bad);
        if (bad || len[i] > (uint64_t)(end - p)) {
            return false;
        }
        at[i] = p;
        p += len[i];
    }
    return p == end;
}

/* The events of a row (n of them, its span starting at |start|) written
 * at *qp (advanced), not past |qend|, from the streams st[] (times, codes,
 * literal, then key k's values at 3 + k): 0 or -EBADMSG (also for an event
 * that does not fit before |qend|: more than the stated length). */
static int sev_row(struct sst *st, const struct sshape *sh, uint64_t nsh, const uint8_t *const *kp,
                   const uint64_t *kn, uint64_t start, uint64_t n, uint8_t **qp, uint8_t *qend)
{
    bool bad = false;
    uint8_t *q = *qp;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t t = start + (uint64_t)unzz(uv_take(&st[0].p, st[0].end, &bad));
        uint64_t c = uv_take(&st[1].p, st[1].end, &bad);
        if (bad || c > nsh) {
            return -EBADMSG;
        }
        if (c == 0) {
            uint64_t ln = uv_take(&st[2].p, st[2].end, &bad);
            if (bad || ln > (uint64_t)(st[2].end - st[2].p) || (uint64_t)(qend - q) < 8 + ln) {
                return -EBADMSG;
            }
            wr64(q, t);
            memcpy(q + 8, st[2].p, ln);
            q += 8 + ln;
            st[2].p += ln;
            continue;
        }
        const struct sshape *h = &sh[c - 1];
        if ((uint64_t)(qend - q) < 8 + pbw_varint_size(h->nl) + h->nl + 12) {
            return -EBADMSG;
        }
        wr64(q, t);
        q = uv_put(q + 8, h->nl);
        memcpy(q, h->name, h->nl);
        q += h->nl;
        wr32(q, (uint32_t)h->drop);
        wr32(q + 4, (uint32_t)h->nk);
        uint8_t *nbat = q + 8;
        q += 12;
        const uint8_t *kc = h->k;
        for (uint64_t a = 0; a < h->nk; a++) {
            uint64_t k = uv_take(&kc, kc + 10, &bad); /* checked below nk at the parse */
            struct sst *v = &st[3 + k];
            const uint8_t *ve = value_end(v->p, v->end);
            if (ve == NULL) {
                return -EBADMSG; /* a value past its stream */
            }
            size_t vl = (size_t)(ve - v->p);
            if ((uint64_t)(qend - q) < pbw_varint_size(kn[k]) + kn[k] + vl) {
                return -EBADMSG;
            }
            q = uv_put(q, kn[k]);
            memcpy(q, kp[k], kn[k]);
            memcpy(q + kn[k], v->p, vl);
            q += kn[k] + vl;
            v->p = ve;
        }
        if ((uint64_t)(q - nbat - 4) > UINT32_MAX) {
            return -EBADMSG;
        }
        wr32(nbat, (uint32_t)(q - nbat - 4));
    }
    *qp = q;
    return 0;
}

int sev_rebuild(blk *b, struct scol *enc, uint64_t enc_len, uint8_t **buf, uint64_t **offs)
{
    const uint8_t *p = enc->data, *end = p + enc_len;
    bool bad = false;
    *buf = NULL;
    *offs = NULL;
    uint64_t rows = uv_take(&p, end, &bad), nk = uv_take(&p, end, &bad);
    uint64_t nsh = uv_take(&p, end, &bad), out = uv_take(&p, end, &bad);
    if (bad || rows != b->rows || nk > enc_len || nsh > enc_len || out > SDET_OUT_MAX) {
        return -EBADMSG;
    }
    uint64_t npart = 5 + nk, total = 0;
    int rc = -ENOMEM;
    struct sst *st = calloc(npart, sizeof(*st));
    struct sshape *sh = malloc((nsh + 1) * sizeof(*sh));
    const uint8_t **kp = malloc((nk + 1) * sizeof(*kp));
    uint64_t *kn = malloc((nk + 1) * sizeof(*kn)), *off = malloc((rows + 1) * sizeof(*off));
    uint8_t *o = malloc(out + 1), *q = o;
    if (st == NULL || sh == NULL || kp == NULL || kn == NULL || off == NULL || o == NULL) {
        goto fail;
    }
    rc = -EBADMSG;
    const uint8_t *lens = p; /* the part lengths: summed, then each part placed */
    for (uint64_t k = 0; k < npart; k++) {
        uint64_t ln = uv_take(&p, end, &bad);
        total += ln > enc_len ? enc_len + 1 : ln;
    }
    if (bad || total != (uint64_t)(end - p)) {
        goto fail;
    }
    for (uint64_t k = 0; k < npart; k++) {
        uint64_t ln = uv_take(&lens, end, &bad);
        st[k].p = p;
        st[k].end = p += ln;
    }
    if (!sev_dict(st[0].p, st[0].end, nk, kp, kn)) {
        goto fail;
    }
    const uint8_t *d = st[1].p;
    for (uint64_t c = 0; c < nsh; c++) {
        struct sshape *h = &sh[c];
        h->nl = uv_take(&d, st[1].end, &bad);
        if (bad || h->nl > (uint64_t)(st[1].end - d)) {
            goto fail;
        }
        h->name = d;
        d += h->nl;
        h->drop = uv_take(&d, st[1].end, &bad);
        h->nk = uv_take(&d, st[1].end, &bad);
        h->k = d;
        if (bad || h->drop > UINT32_MAX || h->nk > (uint64_t)(st[1].end - d)) {
            goto fail;
        }
        for (uint64_t a = 0; a < h->nk; a++) {
            if (uv_take(&d, st[1].end, &bad) >= nk || bad) {
                goto fail; /* a key past the dictionary */
            }
        }
    }
    if (d != st[1].end) {
        goto fail;
    }
    off[0] = 0;
    for (uint64_t j = 0; j < rows; j++) {
        rc = sev_row(st + 2, sh, nsh, kp, kn, ic_get(&b->I[T_START], j), ic_get(&b->I[T_NEV], j),
                     &q, o + out);
        if (rc < 0) {
            goto fail;
        }
        off[j + 1] = (uint64_t)(q - o);
    }
    rc = -EBADMSG;
    for (uint64_t k = 2; k < npart; k++) {
        if (st[k].p != st[k].end) {
            goto fail; /* a stream not used up */
        }
    }
    if (q != o + out) {
        goto fail; /* less than the stated length */
    }
    free(st);
    free(sh);
    free(kp);
    free(kn);
    *buf = o;
    *offs = off;
    enc->off = (struct icol){(const uint8_t *)off, 0, 8};
    enc->data = o;
    return 0;

fail:
    free(st);
    free(sh);
    free(kp);
    free(kn);
    free(off);
    free(o);
    return rc;
}
