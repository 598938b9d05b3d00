/*
 * block_detail.c - format 4's metric detail entries, both ways: the writer
 * codes each point's detail (batch.h's encoding: fixed-width counts and
 * bounds) into varints, with histogram bounds and summary quantiles as
 * codes into a per-block f64 list dictionary (a stream repeats its list
 * in every point); the reader's table load rebuilds the batch.h bytes, so
 * views hand out the same detail as from a format 2 or 3 file.
 *
 * An entry is empty (an empty detail), or a form byte then:
 *   0 VERBATIM  the detail's bytes as given (a detail that does not
 *               parse as its metric's kind, or a kind without a form)
 *   1 HISTOGRAM uv n, n x uv bucket count, uv list code (the bounds)
 *   2 EXP       uv zz(scale), uv zero_count, 8 bytes zero_threshold,
 *               uv zz(positive.offset), uv n, n x uv, uv zz(negative.
 *               offset), uv m, m x uv
 *   3 SUMMARY   uv n, uv list code (the n quantiles), n x 8 bytes value
 * (zz: zigzag of the int32 as int64; a list is m x f64, bytes as given).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "storage/block_int.h"

enum { F_VERBATIM = 0, F_HIST = 1, F_EXP = 2, F_SUMMARY = 3 };

/* The most a rebuilt detail table may take (a crafted entry could name a
 * long list in every row): beyond it the load fails. */
#define MDET_OUT_MAX (8 * ZSTD_RAW_MAX)

void fldict_reset(struct fldict *d)
{
    d->n = 0;
    vbuf_reset(&d->data);
    if (d->ht != NULL) {
        memset(d->ht, 0, d->ht_cap * sizeof(*d->ht));
    }
}

void fldict_free(struct fldict *d)
{
    free(d->offs);
    free(d->ht);
    vbuf_fini(&d->data);
    memset(d, 0, sizeof(*d));
}

static int fl_grow(struct fldict *d)
{
    size_t ncap = d->ht_cap ? 2 * d->ht_cap : 64;
    uint32_t *nh = calloc(ncap, sizeof(*nh));
    if (nh == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < d->ht_cap; i++) {
        uint32_t e = d->ht[i];
        if (e != 0) {
            const uint8_t *p = d->data.p + d->offs[e - 1];
            size_t n = d->offs[e] - d->offs[e - 1];
            size_t j = (size_t)XXH3_64bits(n ? (const void *)p : empty, n) & (ncap - 1);
            while (nh[j] != 0) {
                j = (j + 1) & (ncap - 1);
            }
            nh[j] = e;
        }
    }
    free(d->ht);
    d->ht = nh;
    d->ht_cap = ncap;
    return 0;
}

/* The code of list p[0, n) (added when new), or -ENOMEM. */
static int64_t fl_code(struct fldict *d, const uint8_t *p, size_t n)
{
    if ((d->n + 1) * 2 > d->ht_cap && fl_grow(d) < 0) {
        return -ENOMEM;
    }
    size_t i = (size_t)XXH3_64bits(n ? (const void *)p : empty, n) & (d->ht_cap - 1);
    for (; d->ht[i] != 0; i = (i + 1) & (d->ht_cap - 1)) {
        uint32_t c = d->ht[i] - 1;
        if (d->offs[c + 1] - d->offs[c] == n &&
            (n == 0 || memcmp(d->data.p + d->offs[c], p, n) == 0)) {
            return c;
        }
    }
    if (d->n + 2 > d->cap_offs) {
        size_t ncap = d->cap_offs ? 2 * d->cap_offs : 64;
        uint64_t *no = realloc(d->offs, ncap * sizeof(*no));
        if (no == NULL) {
            return -ENOMEM;
        }
        d->offs = no;
        d->cap_offs = ncap;
    }
    if (n > 0 && vbuf_put(&d->data, p, n) < 0) {
        return -ENOMEM;
    }
    d->offs[0] = 0;
    d->offs[d->n + 1] = d->data.len;
    d->ht[i] = (uint32_t)(d->n + 1);
    return (int64_t)d->n++;
}

static inline uint64_t zz32(uint32_t u)
{
    return zz((int64_t)(int32_t)u);
}

/*
 * Whether p[0, len) is |head| bytes, then u32 n and n x 8 bytes, then
 * |gap| bytes, then u32 m and m x 8 bytes, exactly (batch.h's histogram:
 * head 0, gap 0; exponential histogram: head 24, gap 4).
 */
static bool two_arrays(const uint8_t *p, uint32_t len, uint32_t head, uint32_t gap, uint32_t *n,
                       uint32_t *m)
{
    uint64_t fixed = (uint64_t)head + 4 + gap + 4;
    if (len < fixed) {
        return false;
    }
    uint64_t a = rd32(p + head);
    if (a > (len - fixed) / 8) {
        return false;
    }
    uint64_t b = rd32(p + head + 4 + 8 * a + gap);
    if (len != fixed + 8 * a + 8 * b) {
        return false;
    }
    *n = (uint32_t)a;
    *m = (uint32_t)b;
    return true;
}

static bool is_summary(const uint8_t *p, uint32_t len, uint32_t *n)
{
    if (len < 4 || (len - 4) % 16 != 0 || rd32(p) != (len - 4) / 16) {
        return false;
    }
    *n = rd32(p);
    return true;
}

int mdet_encode(struct vbuf *out, struct fldict *d, enum metric_kind kind, const uint8_t *p,
                uint32_t len)
{
    if (len == 0) {
        return 0;
    }
    /* A coded entry is never longer than form + 3 uv per 8 input bytes. */
    if (vbuf_reserve(out, (size_t)len + 32 + len / 8 * 3) < 0) {
        return -ENOMEM;
    }
    uint8_t *q0 = out->p + out->len, *q = q0;
    uint32_t n, m;
    if (kind == MK_HISTOGRAM && two_arrays(p, len, 0, 0, &n, &m)) {
        int64_t c = fl_code(d, p + 8 + 8 * (size_t)n, 8 * (size_t)m);
        if (c < 0) {
            return (int)c;
        }
        *q++ = F_HIST;
        q = uv_put(q, n);
        for (uint32_t i = 0; i < n; i++) {
            q = uv_put(q, rd64(p + 4 + 8 * (size_t)i));
        }
        q = uv_put(q, (uint64_t)c);
    } else if (kind == MK_EXP_HISTOGRAM && two_arrays(p, len, 24, 4, &n, &m)) {
        *q++ = F_EXP;
        q = uv_put(q, zz32(rd32(p)));
        q = uv_put(q, rd64(p + 4));
        memcpy(q, p + 12, 8);
        q += 8;
        q = uv_put(q, zz32(rd32(p + 20)));
        q = uv_put(q, n);
        const uint8_t *s = p + 28;
        for (uint32_t i = 0; i < n; i++, s += 8) {
            q = uv_put(q, rd64(s));
        }
        q = uv_put(q, zz32(rd32(s)));
        q = uv_put(q, m);
        s += 8;
        for (uint32_t i = 0; i < m; i++, s += 8) {
            q = uv_put(q, rd64(s));
        }
    } else if (kind == MK_SUMMARY && is_summary(p, len, &n)) {
        /* the quantiles as a list: gathered from the pairs */
        uint8_t qs[8 * 64];
        uint8_t *big = n > 64 ? malloc(8 * (size_t)n) : NULL;
        uint8_t *ql = n > 64 ? big : qs;
        if (n > 64 && big == NULL) {
            return -ENOMEM;
        }
        for (uint32_t i = 0; i < n; i++) {
            memcpy(ql + 8 * (size_t)i, p + 4 + 16 * (size_t)i, 8);
        }
        int64_t c = fl_code(d, ql, 8 * (size_t)n);
        free(big);
        if (c < 0) {
            return (int)c;
        }
        *q++ = F_SUMMARY;
        q = uv_put(q, n);
        q = uv_put(q, (uint64_t)c);
        for (uint32_t i = 0; i < n; i++) {
            memcpy(q, p + 12 + 16 * (size_t)i, 8);
            q += 8;
        }
    } else {
        *q++ = F_VERBATIM;
        memcpy(q, p, len);
        q += len;
    }
    out->len += (size_t)(q - q0);
    return 0;
}

/* ---- the reader ---- */

struct drd {
    const uint8_t *p, *end;
    bool bad;
};

static uint64_t rd_uv(struct drd *r)
{
    return uv_take(&r->p, r->end, &r->bad);
}

/* A uv that must fit 32 bits (a count) or be a zigzag int32. */
static uint32_t rd_u32v(struct drd *r)
{
    uint64_t v = rd_uv(r);
    if (v > UINT32_MAX) {
        r->bad = true;
    }
    return (uint32_t)v;
}

static uint32_t rd_i32z(struct drd *r)
{
    int64_t v = unzz(rd_uv(r));
    if (v < INT32_MIN || v > INT32_MAX) {
        r->bad = true;
    }
    return (uint32_t)(int32_t)v;
}

static const uint8_t *rd_fixed(struct drd *r, size_t n)
{
    if ((size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *s = r->p;
    r->p += n;
    return s;
}

static int put32(struct vbuf *o, uint32_t v)
{
    return vbuf_put_u32(o, v);
}

/* uv k, then k x uv counts, rebuilt as u32 k and k x u64: 0, -EBADMSG,
 * -ENOMEM. Each count takes a byte at least: k is bounded by the entry. */
static int put_counts(struct vbuf *o, struct drd *r)
{
    uint32_t k = rd_u32v(r);
    if (r->bad || k > (uint64_t)(r->end - r->p)) {
        return -EBADMSG;
    }
    int rc = put32(o, k);
    for (uint32_t i = 0; i < k && rc == 0; i++) {
        rc = vbuf_put_u64(o, rd_uv(r));
    }
    return rc < 0 ? -ENOMEM : r->bad ? -EBADMSG : 0;
}

/* Entry e[0, n) rebuilt onto |o|: 0, -EBADMSG, -ENOMEM. */
static int decode_one(struct vbuf *o, const uint8_t *e, uint64_t n, const struct scol *fl,
                      uint64_t nfl)
{
    if (n == 0) {
        return 0;
    }
    struct drd r = {e + 1, e + n, false};
    int rc = 0;
    switch (e[0]) {
    case F_VERBATIM:
        return vbuf_put(o, e + 1, n - 1) < 0 ? -ENOMEM : 0;
    case F_HIST: {
        if ((rc = put_counts(o, &r)) < 0) {
            return rc;
        }
        uint64_t c = rd_uv(&r);
        if (r.bad || c >= nfl) {
            return -EBADMSG;
        }
        struct mstr l = sc_get(fl, c);
        if (l.len % 8 != 0) {
            return -EBADMSG;
        }
        rc |= put32(o, l.len / 8);
        rc |= vbuf_put(o, l.p, l.len);
        break;
    }
    case F_EXP: {
        rc |= put32(o, rd_i32z(&r));
        rc |= vbuf_put_u64(o, rd_uv(&r));
        const uint8_t *thr = rd_fixed(&r, 8);
        if (r.bad) {
            return -EBADMSG;
        }
        rc |= vbuf_put(o, thr, 8);
        for (int side = 0; side < 2 && rc == 0; side++) {
            rc = put32(o, rd_i32z(&r)) < 0 ? -ENOMEM : put_counts(o, &r);
        }
        if (rc < 0) {
            return rc;
        }
        break;
    }
    case F_SUMMARY: {
        uint32_t k = rd_u32v(&r);
        uint64_t c = rd_uv(&r);
        if (r.bad || c >= nfl || k > (uint64_t)(r.end - r.p) / 8) {
            return -EBADMSG;
        }
        struct mstr l = sc_get(fl, c);
        if (l.len != 8 * (uint64_t)k) {
            return -EBADMSG;
        }
        rc |= put32(o, k);
        for (uint32_t i = 0; i < k && rc == 0; i++) {
            rc |= vbuf_put(o, l.p + 8 * (size_t)i, 8);
            rc |= vbuf_put(o, rd_fixed(&r, 8), 8);
        }
        break;
    }
    default:
        return -EBADMSG;
    }
    if (rc != 0) {
        return -ENOMEM;
    }
    return r.bad || r.p != r.end ? -EBADMSG : 0;
}

struct mdet_ctx {
    const struct scol *fl;
    uint64_t nfl;
};

static int mdet_row(const void *ctx, uint64_t i, const uint8_t *p, const uint8_t *end,
                    struct vbuf *o)
{
    const struct mdet_ctx *x = ctx;
    (void)i;
    return decode_one(o, p, (uint64_t)(end - p), x->fl, x->nfl);
}

int mdet_rebuild(struct scol *enc, uint64_t rows, const struct scol *fl, uint64_t nfl,
                 uint8_t **buf, uint64_t **offs)
{
    struct mdet_ctx x = {fl, nfl};
    return det_rebuild(enc, rows, mdet_row, &x, MDET_OUT_MAX, buf, offs);
}
