/*
 * block_zcols.c - format 6's zstd tables stored one frame a column (any
 * signal, footer META flag bit 6; the compactor's, blk_wopts.zstd_cols),
 * both ways. One zstd frame over a whole table mixes columns of unlike
 * bytes in its 128 KiB blocks (start times beside kind codes beside random
 * span ids), so one set of literal and sequence tables serves them all; a
 * frame per column gives each its own (bench/STORAGE.md, h-spans4: 0.56 B
 * a span less on the generator's corpus, the same zstd level). The raw
 * table is the one block_int.h lays out; the stored bytes say how long
 * each column is and hold its frame (block_int.h, "v6 TABLES BY COLUMN"),
 * and a table load inflates each column into its place in that layout, so
 * the rest of the load reads what a whole-table frame gives.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "storage/block_wint.h"

/* The most bytes the stored header takes: uv ncols, then per column uv
 * nparts and two uv a part. */
#define ZC_HDR_MAX (10 + (10 + 20 * (size_t)ZC_PARTS_MAX) * (size_t)MAX_PHYS)

static uint64_t up8(uint64_t v)
{
    return (v + 7) & ~(uint64_t)7;
}

/* ---- writer ---- */

/* The part of column |c| (n bytes) from |from| on ends at: the next cut of
 * |cut| past from and before n (*i: the cuts taken), or n. */
static uint64_t part_end(const struct zc_cuts *cut, uint32_t c, uint64_t from, uint64_t n,
                         unsigned *i)
{
    while (cut != NULL && *i < cut->n && cut->col == c) {
        uint64_t at = cut->at[(*i)++];
        if (at > from && at < n) {
            return at;
        }
    }
    return n;
}

int blkw_zcols(ZSTD_CCtx *zc, int level, const uint8_t *raw, size_t len, const struct zc_cuts *cut,
               uint8_t **out, size_t *outn)
{
    if (len < 8) {
        return -EINVAL;
    }
    uint32_t ncols = rd32(raw);
    if (ncols == 0 || ncols > MAX_PHYS || len < 8 + 16 * (size_t)ncols) {
        return -EINVAL;
    }
    /* the layout must be the one the load rebuilds: columns in order, each
     * at the next multiple of 8, the last ending the table */
    uint64_t at = 8 + 16 * (uint64_t)ncols, cap = ZC_HDR_MAX;
    for (uint32_t c = 0; c < ncols; c++) {
        uint64_t o = rd64(raw + 8 + 16 * c), n = rd64(raw + 16 + 16 * c);
        if (o != up8(at) || n > len - o) {
            return -EINVAL;
        }
        at = o + n;
        cap += ZSTD_compressBound(n) + (cut != NULL && cut->col == c ? ZC_PARTS_MAX * 64 : 0);
    }
    if (at != len) {
        return -EINVAL;
    }
    uint8_t *z = malloc(cap);
    if (z == NULL) {
        return -ENOMEM;
    }
    uint8_t hdr[ZC_HDR_MAX], *q = uv_put(hdr, ncols);
    size_t put = ZC_HDR_MAX;
    for (uint32_t c = 0; c < ncols; c++) {
        const uint8_t *col = raw + rd64(raw + 8 + 16 * c);
        uint64_t n = rd64(raw + 16 + 16 * c), from = 0, ends[ZC_PARTS_MAX];
        unsigned np = 0, ci = 0;
        do { /* an empty column is one empty part */
            ends[np++] = from = part_end(cut, c, from, n, &ci);
        } while (from < n && np < ZC_PARTS_MAX - 1);
        ends[np - 1] = n;
        q = uv_put(q, np);
        from = 0;
        for (unsigned i = 0; i < np; i++) {
            size_t pn = ends[i] - from, zn = pn;
            if (pn > 0) {
                zn = ZSTD_compressCCtx(zc, z + put, cap - put, col + from, pn, level);
                if (ZSTD_isError(zn)) {
                    free(z);
                    return -EIO;
                }
            }
            if (zn >= pn) { /* does not pay (random ids, a few bytes): as it is */
                memcpy(z + put, col + from, pn);
                zn = pn;
            }
            q = uv_put(q, pn);
            q = uv_put(q, zn);
            put += zn;
            from = ends[i];
        }
    }
    size_t hn = (size_t)(q - hdr);
    memmove(z + hn, z + ZC_HDR_MAX, put - ZC_HDR_MAX);
    memcpy(z, hdr, hn);
    *out = z;
    *outn = put - ZC_HDR_MAX + hn;
    return 0;
}

/* ---- reader ---- */

/* Column |c|'s parts in the header at *p (advanced): their raw and stored
 * lengths added to *rsum and *zsum; false for a part count not 1 ..
 * ZC_PARTS_MAX, an empty part beside others, a stored length over its
 * raw one or 0 for a raw one over 0, a length past |lim|. */
static bool parts_take(const uint8_t **p, const uint8_t *end, uint64_t lim, uint64_t *rsum,
                       uint64_t *zsum)
{
    bool bad = false;
    uint64_t np = uv_take(p, end, &bad);
    if (bad || np == 0 || np > ZC_PARTS_MAX) {
        return false;
    }
    for (uint64_t i = 0; i < np; i++) {
        uint64_t r = uv_take(p, end, &bad), z = uv_take(p, end, &bad);
        if (bad || r > lim || z > r || (z == 0) != (r == 0) || (r == 0 && np > 1)) {
            return false;
        }
        *rsum += r;
        *zsum += z;
        if (*rsum > lim || *zsum > lim) {
            return false;
        }
    }
    return true;
}

int blk_zcols_inflate(ZSTD_DCtx *dc, const uint8_t *p, uint64_t n, uint8_t *raw, uint64_t rawlen)
{
    const uint8_t *end = p + n, *h = p;
    bool bad = false;
    uint64_t ncols = uv_take(&p, end, &bad);
    if (bad || ncols == 0 || ncols > MAX_PHYS || rawlen < 8 + 16 * ncols) {
        return -EBADMSG;
    }
    /* every length first: the parts must fill the stored bytes and the
     * rebuilt layout the raw length, exactly, before anything is inflated */
    uint64_t at = 8 + 16 * ncols, zsum = 0;
    for (uint64_t c = 0; c < ncols; c++) {
        uint64_t r = 0;
        if (!parts_take(&p, end, rawlen, &r, &zsum)) {
            return -EBADMSG;
        }
        at = up8(at) + r;
        if (at > rawlen || zsum > n) {
            return -EBADMSG;
        }
    }
    if (at != rawlen || zsum != (uint64_t)(end - p)) {
        return -EBADMSG;
    }
    const uint8_t *zp = p; /* the parts' bytes; the header read again */
    p = h;
    uv_take(&p, end, &bad);
    memset(raw, 0, 8 + 16 * ncols);
    wr32(raw, (uint32_t)ncols);
    at = 8 + 16 * ncols;
    for (uint64_t c = 0; c < ncols; c++) {
        uint64_t o = up8(at), np = uv_take(&p, end, &bad);
        memset(raw + at, 0, o - at); /* the padding */
        at = o;
        for (uint64_t i = 0; i < np; i++) {
            uint64_t r = uv_take(&p, end, &bad), z = uv_take(&p, end, &bad);
            if (z == r) {
                memcpy(raw + at, zp, r);
            } else {
                size_t zn = dc != NULL ? ZSTD_decompressDCtx(dc, raw + at, r, zp, z)
                                       : ZSTD_decompress(raw + at, r, zp, z);
                if (ZSTD_isError(zn) || zn != r) {
                    return -EBADMSG;
                }
            }
            zp += z;
            at += r;
        }
        wr64(raw + 8 + 16 * c, o);
        wr64(raw + 16 + 16 * c, at - o);
    }
    return 0;
}
