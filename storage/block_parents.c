/*
 * block_parents.c - format 4's parent span id column, both ways: most
 * spans' parents are spans of the same block, so a parent id is stored as
 * a reference to that span's row (a short integer) instead of 8 bytes,
 * and the ids of parents outside the block raw (block_int.h, the 'P'
 * column). The writer finds the parents with a hash table over the
 * block's span ids (scratch kept between seals); the reader's table load
 * expands the references back into 8-byte ids the block owns.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/block_wint.h"

static inline size_t id_slot(uint64_t id, size_t mask)
{
    return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & mask;
}

/* The largest 1 + zz(distance) a 1-byte and a 2-byte reference column
 * holds (a reference is 1 more: at most 255 or 65535); a parent farther
 * away is stored raw, and the writer takes the width that makes the
 * column smaller. */
#define PREF_D1 254u
#define PREF_D2 65534u

int prefs_build(struct wcols *w)
{
    uint64_t rows = w->rows;
    size_t cap = 64;
    while (cap < 2 * rows) {
        cap *= 2;
    }
    if (cap > w->cap_pht) {
        free(w->pht);
        w->pht = malloc(cap * sizeof(*w->pht));
        w->cap_pht = w->pht != NULL ? cap : 0;
        if (w->pht == NULL) {
            return -ENOMEM;
        }
    }
    if (rows > w->cap_pref) {
        free(w->pref);
        w->pref = malloc(rows * sizeof(*w->pref));
        w->cap_pref = w->pref != NULL ? rows : 0;
        if (w->pref == NULL) {
            return -ENOMEM;
        }
    }
    uint32_t *ht = w->pht;
    size_t mask = cap - 1;
    memset(ht, 0, cap * sizeof(*ht));
    const uint8_t *span = w->R[T_SPAN].p, *par = w->R[T_PARENT].p;
    for (uint64_t j = 0; j < rows; j++) { /* the first row with an id keeps it */
        uint64_t id = rd64(span + 8 * j);
        size_t i = id_slot(id, mask);
        while (ht[i] != 0 && rd64(span + 8 * (size_t)(ht[i] - 1)) != id) {
            i = (i + 1) & mask;
        }
        if (ht[i] == 0) {
            ht[i] = (uint32_t)j + 1;
        }
    }
    /* distances first (0: no parent row), then the width that pays */
    uint64_t far1 = 0, far2 = 0;
    for (uint64_t j = 0; j < rows; j++) {
        uint64_t id = rd64(par + 8 * j), d = 0;
        if (id != 0) {
            size_t i = id_slot(id, mask);
            while (ht[i] != 0 && rd64(span + 8 * (size_t)(ht[i] - 1)) != id) {
                i = (i + 1) & mask;
            }
            d = ht[i] != 0 ? zz((int64_t)(j - (ht[i] - 1))) + 1 : UINT64_MAX;
            far1 += d > PREF_D1;
            far2 += d > PREF_D2;
        }
        w->pref[j] = id == 0 ? 0 : d;
    }
    uint64_t lim = 1 * rows + 8 * far1 <= 2 * rows + 8 * far2 ? PREF_D1 : PREF_D2;
    vbuf_reset(&w->praw);
    for (uint64_t j = 0; j < rows; j++) {
        uint64_t d = w->pref[j];
        if (d == 0) {
            continue; /* eight zero bytes */
        }
        if (d > lim) {
            if (vbuf_put(&w->praw, par + 8 * j, 8) < 0) {
                return -ENOMEM;
            }
            w->pref[j] = 1;
        } else {
            w->pref[j] = d + 1; /* 2 + zz(j - parent row) */
        }
    }
    return 0;
}

int64_t prefs_row(const struct wcols *w, uint64_t id)
{
    const uint32_t *ht = w->pht;
    const uint8_t *span = w->R[T_SPAN].p;
    size_t cap = 64; /* as prefs_build sized it */
    while (cap < 2 * w->rows) {
        cap *= 2;
    }
    size_t mask = cap - 1, i = id_slot(id, mask);
    while (ht[i] != 0 && rd64(span + 8 * (size_t)(ht[i] - 1)) != id) {
        i = (i + 1) & mask;
    }
    return ht[i] != 0 ? (int64_t)ht[i] - 1 : -1;
}

int prefs_expand(blk *b, unsigned idx, const struct icol *refs, const uint8_t *raw,
                 uint64_t raw_len)
{
    uint64_t rows = b->rows, k = 0;
    const uint8_t *span = b->R[T_SPAN];
    free(b->zfull[idx]);
    b->zfull[idx] = calloc(rows ? rows : 1, 8);
    if (b->zfull[idx] == NULL) {
        return -ENOMEM;
    }
    uint8_t *out = b->zfull[idx];
    for (uint64_t j = 0; j < rows; j++) {
        uint64_t r = ic_get(refs, j);
        if (r == 1) {
            if (8 * k + 8 > raw_len) {
                return -EBADMSG;
            }
            memcpy(out + 8 * j, raw + 8 * k++, 8);
        } else if (r >= 2) {
            uint64_t p = j - (uint64_t)unzz(r - 2);
            if (p >= rows) {
                return -EBADMSG; /* a reference outside the block */
            }
            memcpy(out + 8 * j, span + 8 * p, 8);
        }
    }
    if (8 * k != raw_len) {
        return -EBADMSG;
    }
    b->R[idx] = out;
    return 0;
}
