/*
 * block_zcols.c - format 6's zstd tables stored one frame a column (span
 * blocks, footer META flag bit 6; the compactor's, blk_wopts.zstd_cols),
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

/* The most bytes the stored header takes: uv ncols, then two uv a column. */
#define ZC_HDR_MAX (10 + 20 * (size_t)MAX_PHYS)

static uint64_t up8(uint64_t v)
{
    return (v + 7) & ~(uint64_t)7;
}

/* ---- writer ---- */

int blkw_zcols(ZSTD_CCtx *zc, int level, const uint8_t *raw, size_t len, uint8_t **out,
               size_t *outn)
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
        cap += ZSTD_compressBound(n);
    }
    if (at != len) {
        return -EINVAL;
    }
    uint8_t *z = malloc(cap);
    if (z == NULL) {
        return -ENOMEM;
    }
    uint64_t zlen[MAX_PHYS];
    size_t put = ZC_HDR_MAX;
    for (uint32_t c = 0; c < ncols; c++) {
        const uint8_t *col = raw + rd64(raw + 8 + 16 * c);
        size_t n = rd64(raw + 16 + 16 * c), zn = n;
        if (n > 0) {
            zn = ZSTD_compressCCtx(zc, z + put, cap - put, col, n, level);
            if (ZSTD_isError(zn)) {
                free(z);
                return -EIO;
            }
        }
        if (zn >= n) { /* does not pay (random ids, a few bytes): as it is */
            memcpy(z + put, col, n);
            zn = n;
        }
        zlen[c] = zn;
        put += zn;
    }
    uint8_t hdr[ZC_HDR_MAX], *q = uv_put(hdr, ncols);
    for (uint32_t c = 0; c < ncols; c++) {
        q = uv_put(q, rd64(raw + 16 + 16 * c));
        q = uv_put(q, zlen[c]);
    }
    size_t hn = (size_t)(q - hdr);
    memmove(z + hn, z + ZC_HDR_MAX, put - ZC_HDR_MAX);
    memcpy(z, hdr, hn);
    *out = z;
    *outn = put - ZC_HDR_MAX + hn;
    return 0;
}

/* ---- reader ---- */

int blk_zcols_inflate(ZSTD_DCtx *dc, const uint8_t *p, uint64_t n, uint8_t *raw, uint64_t rawlen)
{
    const uint8_t *end = p + n;
    bool bad = false;
    uint64_t ncols = uv_take(&p, end, &bad);
    if (bad || ncols == 0 || ncols > MAX_PHYS || rawlen < 8 + 16 * ncols) {
        return -EBADMSG;
    }
    /* every length first: the columns must fill the stored bytes and the
     * rebuilt layout the raw length, exactly, before anything is inflated */
    uint64_t rlen[MAX_PHYS], zlen[MAX_PHYS];
    uint64_t at = 8 + 16 * ncols, zsum = 0;
    for (uint64_t c = 0; c < ncols; c++) {
        rlen[c] = uv_take(&p, end, &bad);
        zlen[c] = uv_take(&p, end, &bad);
        if (bad || rlen[c] > rawlen || zlen[c] > rlen[c] || (zlen[c] == 0) != (rlen[c] == 0)) {
            return -EBADMSG;
        }
        at = up8(at) + rlen[c];
        zsum += zlen[c];
        if (at > rawlen || zsum > n) {
            return -EBADMSG;
        }
    }
    if (at != rawlen || zsum != (uint64_t)(end - p)) {
        return -EBADMSG;
    }
    memset(raw, 0, 8 + 16 * ncols);
    wr32(raw, (uint32_t)ncols);
    at = 8 + 16 * ncols;
    for (uint64_t c = 0; c < ncols; c++) {
        uint64_t o = up8(at);
        memset(raw + at, 0, o - at); /* the padding */
        wr64(raw + 8 + 16 * c, o);
        wr64(raw + 16 + 16 * c, rlen[c]);
        if (zlen[c] == rlen[c]) {
            memcpy(raw + o, p, rlen[c]);
        } else {
            size_t zn = dc != NULL ? ZSTD_decompressDCtx(dc, raw + o, rlen[c], p, zlen[c])
                                   : ZSTD_decompress(raw + o, rlen[c], p, zlen[c]);
            if (ZSTD_isError(zn) || zn != rlen[c]) {
                return -EBADMSG;
            }
        }
        p += zlen[c];
        at = o + rlen[c];
    }
    return 0;
}
