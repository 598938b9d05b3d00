/*
 * block_pstart.c - format 6's point start times by reference (footer META
 * flag bit 9, metric blocks; block_int.h "v6 POINT STARTS"): the writer's
 * coding of the metric root's start column and the reader's decoding of
 * it at root load.
 *
 * A cumulative series keeps one start time (its process's or its reset's)
 * for every point, and the points of one collection share their start;
 * a delta series' start is its previous collection's time, so time -
 * start repeats as the interval. The writer counts each row's start and
 * each row's time - start, keeps those seen twice or more as one
 * dictionary in order of their count, and codes each row as its entry or
 * a literal. The reader rebuilds the column's usual values, zz(time -
 * start), into memory the block owns: every reader of the column is
 * unchanged.
 */
#include "storage/block_wint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

/* An open-addressing table slot: |n| 0 is empty (a key counted once has 1). */
struct ps_slot {
    uint64_t key;
    uint32_t n, code;
};

static uint64_t ps_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* Counts |k| in table |t| (mask + 1 slots, *used of them taken, at most
 * half); a key new to a full table is not counted (it codes as a literal). */
static void ps_count(struct ps_slot *t, uint64_t mask, uint32_t *used, uint64_t k)
{
    for (uint64_t h = ps_hash(k);; h++) {
        struct ps_slot *s = &t[h & mask];
        if (s->n != 0 && s->key == k) {
            s->n += s->n < UINT32_MAX;
            return;
        }
        if (s->n == 0) {
            if (*used < (mask + 1) / 2) {
                *s = (struct ps_slot){k, 1, 0};
                ++*used;
            }
            return;
        }
    }
}

static struct ps_slot *ps_find(struct ps_slot *t, uint64_t mask, uint64_t k)
{
    for (uint64_t h = ps_hash(k);; h++) {
        struct ps_slot *s = &t[h & mask];
        if (s->n == 0) {
            return NULL;
        }
        if (s->key == k) {
            return s;
        }
    }
}

/* Dictionary order: the most counted first, then deltas before starts, then by value. */
static int ps_cmp(const void *a, const void *b)
{
    const struct ps_ent *x = a, *y = b;
    if (x->n != y->n) {
        return x->n > y->n ? -1 : 1;
    }
    if (x->delta != y->delta) {
        return x->delta ? -1 : 1;
    }
    return x->key < y->key ? -1 : x->key > y->key;
}

/* The tables, |slots| of each cleared (allocated at their largest once). */
static int ps_alloc(struct pstw *s, uint64_t slots)
{
    if (s->t[0] == NULL) {
        for (int k = 0; k < 2; k++) {
            s->t[k] = malloc(PS_SLOTS * sizeof(*s->t[k]));
            if (s->t[k] == NULL) {
                return -ENOMEM;
            }
        }
        s->ent = malloc(2 * PS_DICT * sizeof(*s->ent));
        if (s->ent == NULL) {
            return -ENOMEM;
        }
    }
    for (int k = 0; k < 2; k++) {
        memset(s->t[k], 0, slots * sizeof(*s->t[k]));
    }
    return 0;
}

int pstart_build(struct pstw *s, const uint64_t *time, const uint64_t *dz, uint64_t rows,
                 struct vbuf *out)
{
    vbuf_reset(out);
    if (rows < 2) {
        return 0;
    }
    /* twice the keys a table may take: the rows, at most PS_DICT */
    uint64_t slots = 4;
    while (slots < PS_SLOTS && slots < 2 * rows) {
        slots *= 2;
    }
    uint64_t mask = slots - 1;
    if (ps_alloc(s, slots) < 0) {
        return -ENOMEM;
    }
    /* t[0]: starts, t[1]: zz(time - start) as the column stores it */
    uint32_t used[2] = {0, 0};
    for (uint64_t i = 0; i < rows; i++) {
        ps_count(s->t[0], mask, &used[0], time[i] - (uint64_t)unzz(dz[i]));
        ps_count(s->t[1], mask, &used[1], dz[i]);
    }
    uint32_t n = 0;
    for (int k = 0; k < 2; k++) {
        for (uint64_t j = 0; j < slots; j++) {
            const struct ps_slot *e = &s->t[k][j];
            if (e->n >= 2) {
                s->ent[n++] = (struct ps_ent){e->key, e->n, k == 1};
            }
        }
    }
    qsort(s->ent, n, sizeof(*s->ent), ps_cmp);
    for (uint32_t c = 0; c < n; c++) {
        ps_find(s->t[s->ent[c].delta], mask, s->ent[c].key)->code = c;
    }
    int rc = vbuf_put_u64(out, n);
    for (uint32_t c = 0; c < n && rc == 0; c++) {
        rc = vbuf_put_u64(out, s->ent[c].key);
    }
    for (uint32_t c = 0; c < n && rc == 0; c += 8) {
        uint8_t bits = 0;
        for (uint32_t j = c; j < n && j < c + 8; j++) {
            bits |= (uint8_t)(s->ent[j].delta << (j - c));
        }
        rc = vbuf_put_u8(out, bits);
    }
    if (rc != 0 || vbuf_reserve(out, rows * 20) < 0) {
        return -ENOMEM;
    }
    uint8_t *q = out->p + out->len;
    uint64_t hits = 0;
    for (uint64_t i = 0; i < rows; i++) {
        const struct ps_slot *a = ps_find(s->t[0], mask, time[i] - (uint64_t)unzz(dz[i]));
        const struct ps_slot *d = ps_find(s->t[1], mask, dz[i]);
        uint64_t c = n;
        if (a != NULL && a->n >= 2) {
            c = a->code;
        }
        if (d != NULL && d->n >= 2 && d->code < c) {
            c = d->code;
        }
        hits += c < n;
        q = uv_put(q, c);
        if (c == n) {
            q = uv_put(q, dz[i]);
        }
    }
    out->len = (size_t)(q - out->p);
    if (hits < rows - rows / 2) {
        vbuf_reset(out); /* fewer than half the rows found an entry: the column as before */
        return 0;
    }
    /* Series that share their time and start through a collection give
     * the column runs zstd takes whole (the OpenTelemetry JS exporters'
     * points: 218 starts, 105 intervals, 20 times in 5,140 points), where
     * a dictionary of them costs more than it saves: both layouts are
     * tried alone, as a cold table stores each column (its own frame). */
    size_t zb = ZSTD_compressBound(rows * 8);
    if (vbuf_reserve(&s->z, zb) < 0) {
        return -ENOMEM;
    }
    size_t zc = ZSTD_compress(s->z.p, zb, out->p, out->len, 3);
    size_t zp = ZSTD_compress(s->z.p, zb, dz, rows * 8, 3);
    if (ZSTD_isError(zc) || ZSTD_isError(zp)) {
        return -ENOMEM;
    }
    if (zc >= zp) {
        vbuf_reset(out);
    }
    return 0;
}

void pstw_free(struct pstw *s)
{
    free(s->t[0]);
    free(s->t[1]);
    free(s->ent);
    vbuf_fini(&s->z);
    *s = (struct pstw){0};
}

int pstart_decode(const uint8_t *p, const uint8_t *end, const struct icol *time, uint64_t rows,
                  uint64_t **out)
{
    bool bad = false;
    if (end - p < 8) {
        return -EBADMSG;
    }
    uint64_t n = rd64(p);
    p += 8;
    /* every row takes a byte at least, every entry 8 and a bit */
    if (n > rows || n > (uint64_t)(end - p) / 8 || rows > (uint64_t)(end - p)) {
        return -EBADMSG;
    }
    const uint8_t *ent = p, *kind = p + 8 * n;
    p = kind + (n + 7) / 8;
    if (p > end || (n % 8 != 0 && (kind[n / 8] >> (n % 8)) != 0)) {
        return -EBADMSG;
    }
    uint64_t *v = malloc((rows ? rows : 1) * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < rows && !bad; i++) {
        uint64_t c = uv_take(&p, end, &bad);
        if (c < n) {
            uint64_t e = rd64(ent + 8 * c);
            v[i] = (kind[c / 8] >> (c % 8)) & 1 ? e : zz((int64_t)(ic_get(time, i) - e));
        } else if (c == n) {
            v[i] = uv_take(&p, end, &bad);
        } else {
            bad = true;
        }
    }
    if (bad || p != end) {
        free(v);
        return -EBADMSG;
    }
    *out = v;
    return 0;
}
