/*
 * block_streams.c - the metric stream index of a sealed block (footer
 * section 9, STREAMS; block_int.h has the layout): built by the writer
 * while it fills the metric columns, checked and handed out by the reader.
 *
 * A stream is what OTLP calls one: the points of one metric (block metric
 * id; the metric names its scope and so its resource) with one attribute
 * set, byte for byte. A PromQL selector maps each stream to the Prometheus
 * series it makes once, and then reads only the rows of the streams whose
 * series it selects (query/pmsrc.c).
 *
 * Building costs one hash of the attribute bytes and one probe per row,
 * in scratch memory kept between seals (no allocation per row).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <zstd.h>

#include "storage/block_int.h"

void sidx_free(struct sidx *x)
{
    free(x->slot);
    free(x->row_sid);
    free(x->st);
    free(x->order);
    free(x->srows);
    vbuf_fini(&x->body);
    vbuf_fini(&x->zbody);
    memset(x, 0, sizeof(*x));
}

#define SLOTS_MIN 4096u

int sidx_prepare(struct sidx *x, uint64_t rows)
{
    x->n = 0;
    x->rows = 0;
    /* The table starts small and doubles with the streams (a block of a
     * few thousand series keeps it in cache), and is kept between seals. */
    if (x->slot == NULL) {
        x->slot = malloc(SLOTS_MIN * sizeof(*x->slot));
        x->cap_slot = x->slot != NULL ? SLOTS_MIN : 0;
        if (x->slot == NULL) {
            return -ENOMEM;
        }
    }
    x->mask = x->cap_slot - 1;
    memset(x->slot, 0, x->cap_slot * sizeof(*x->slot));
    if (rows > x->cap_rows) {
        free(x->row_sid);
        x->row_sid = malloc(rows * sizeof(*x->row_sid));
        x->cap_rows = x->row_sid != NULL ? rows : 0;
        if (x->row_sid == NULL) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* Doubles the slot table (it is kept at most half full). */
static int grow(struct sidx *x)
{
    size_t cap = 2 * x->cap_slot;
    struct sidx_slot *t = calloc(cap, sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < x->cap_slot; i++) {
        if (x->slot[i].sid1 != 0) {
            size_t j = x->slot[i].h1 & (cap - 1);
            while (t[j].sid1 != 0) {
                j = (j + 1) & (cap - 1);
            }
            t[j] = x->slot[i];
        }
    }
    free(x->slot);
    x->slot = t;
    x->cap_slot = cap;
    x->mask = cap - 1;
    return 0;
}

/*
 * Streams are told apart by a 96-bit hash of the attribute bytes seeded
 * with the metric id (XXH3-128, its length folded in), compared in the
 * slot itself: a probe touches one 16-byte slot and no row memory. Two
 * streams would merge only if their hashes agreed in all 96 bits: with
 * 10^6 streams in a block, odds of about 10^-17.
 */
int sidx_add(struct sidx *x, uint64_t row, uint32_t metric_id, const uint8_t *attrs, uint32_t len)
{
    XXH128_hash_t h = XXH3_128bits_withSeed(attrs, len, metric_id);
    uint32_t h2 = (uint32_t)h.high64;
    for (size_t i = h.low64 & x->mask;; i = (i + 1) & x->mask) {
        struct sidx_slot *sl = &x->slot[i];
        if (sl->sid1 == 0) {
            if (2 * ((size_t)x->n + 1) > x->cap_slot) {
                if (grow(x) < 0) {
                    return -ENOMEM;
                }
                return sidx_add(x, row, metric_id, attrs, len);
            }
            if (x->n == x->cap_st) {
                uint32_t cap = x->cap_st != 0 ? 2 * x->cap_st : 64;
                struct sidx_stream *st = realloc(x->st, cap * sizeof(*st));
                if (st == NULL) {
                    return -ENOMEM;
                }
                x->st = st;
                x->cap_st = cap;
            }
            x->st[x->n] = (struct sidx_stream){.metric = metric_id, .count = 0};
            *sl = (struct sidx_slot){.h1 = h.low64, .h2 = h2, .sid1 = ++x->n};
        } else if (sl->h1 != h.low64 || sl->h2 != h2) {
            continue;
        }
        x->row_sid[row] = sl->sid1 - 1;
        x->rows = row + 1;
        return 0;
    }
}

static int put_body(struct sidx *x, struct vbuf *f, int zlevel, uint32_t form);

/* Format 4's section: the streams in |order|, varint coded (block_int.h),
 * then zstd at |zlevel| unless 0 or it does not pay. */
static int put_v4(struct sidx *x, struct vbuf *f, const uint32_t *order, uint32_t *rank, int zlevel)
{
    if (x->rows > x->cap_srows) {
        free(x->srows);
        x->srows = malloc(x->rows * sizeof(*x->srows));
        x->cap_srows = x->srows != NULL ? x->rows : 0;
        if (x->srows == NULL) {
            return -ENOMEM;
        }
    }
    uint32_t off = 0;
    for (uint32_t k = 0; k < x->n; k++) {
        rank[order[k]] = off;
        off += x->st[order[k]].count;
    }
    for (uint64_t r = 0; r < x->rows; r++) {
        x->srows[rank[x->row_sid[r]]++] = (uint32_t)r;
    }
    vbuf_reset(&x->body);
    if (vbuf_reserve(&x->body, 10 * ((size_t)x->n * 2 + x->rows) + 1) < 0) {
        return -ENOMEM;
    }
    uint8_t *q = x->body.p;
    uint32_t prev_m = 0;
    for (uint32_t k = 0; k < x->n; k++) {
        const struct sidx_stream *s = &x->st[order[k]];
        q = uv_put(q, s->metric - prev_m);
        q = uv_put(q, s->count);
        prev_m = s->metric;
    }
    off = 0;
    for (uint32_t k = 0; k < x->n; k++) {
        uint32_t c = x->st[order[k]].count;
        const uint32_t *rw = x->srows + off;
        q = uv_put(q, rw[0]);
        for (uint32_t i = 1; i < c; i++) {
            q = uv_put(q, rw[i] - rw[i - 1] - 1);
        }
        off += c;
    }
    x->body.len = (size_t)(q - x->body.p);
    return put_body(x, f, zlevel, 0);
}

/* Format 6's by-row body (codec 2, 3): each stream's metric in order of
 * first row, then per row 0 (the next new stream) or how many streams
 * back its stream was opened. */
static int put_by_row(struct sidx *x, struct vbuf *f, int zlevel)
{
    vbuf_reset(&x->body);
    if (vbuf_reserve(&x->body, 10 * ((size_t)x->n + x->rows) + 1) < 0) {
        return -ENOMEM;
    }
    uint8_t *q = x->body.p;
    for (uint32_t k = 0; k < x->n; k++) {
        q = uv_put(q, x->st[k].metric);
    }
    uint32_t next = 0;
    for (uint64_t r = 0; r < x->rows; r++) {
        uint32_t sid = x->row_sid[r];
        q = uv_put(q, sid == next ? 0 : next - sid);
        next += sid == next;
    }
    x->body.len = (size_t)(q - x->body.p);
    return put_body(x, f, zlevel, 2);
}

/* The section: n, codec (|form|, + 1 when zstd pays), raw length, body. */
static int put_body(struct sidx *x, struct vbuf *f, int zlevel, uint32_t form)
{
    const struct vbuf *out = &x->body;
    uint32_t codec = form;
    if (zlevel != 0 && x->body.len > 0) {
        size_t cap = ZSTD_compressBound(x->body.len);
        vbuf_reset(&x->zbody);
        if (vbuf_reserve(&x->zbody, cap) < 0) {
            return -ENOMEM;
        }
        size_t zn = ZSTD_compress(x->zbody.p, cap, x->body.p, x->body.len, zlevel);
        if (ZSTD_isError(zn)) {
            return -EIO;
        }
        x->zbody.len = zn;
        if (zn < x->body.len) {
            out = &x->zbody;
            codec = form + 1;
        }
    }
    int rc = vbuf_put_u32(f, x->n) | vbuf_put_u32(f, codec) | vbuf_put_u64(f, x->body.len);
    rc |= vbuf_put(f, out->p, out->len);
    return rc != 0 ? -ENOMEM : 0;
}

int sidx_put(struct sidx *x, struct vbuf *f, unsigned version, int zlevel, bool by_row)
{
    if (version >= 6 && by_row) {
        return put_by_row(x, f, zlevel);
    }
    /* Streams by (metric id, first row); each one's rows ascending. */
    if (x->n > x->cap_order) {
        free(x->order);
        x->order = malloc(2 * (size_t)x->n * sizeof(*x->order));
        x->cap_order = x->order != NULL ? x->n : 0;
        if (x->order == NULL) {
            return -ENOMEM;
        }
    }
    uint32_t *order = x->order, *rank = x->order + x->n;
    uint32_t n_metrics = 0;
    for (uint32_t i = 0; i < x->n; i++) {
        n_metrics = x->st[i].metric >= n_metrics ? x->st[i].metric + 1 : n_metrics;
    }
    for (uint64_t r = 0; r < x->rows; r++) {
        x->st[x->row_sid[r]].count++;
    }
    /* Stable counting sort by metric id: streams were numbered in order of
     * their first row. */
    uint32_t *start = calloc((size_t)n_metrics + 1, sizeof(*start));
    if (start == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < x->n; i++) {
        start[x->st[i].metric + 1]++;
    }
    for (uint32_t m = 0; m < n_metrics; m++) {
        start[m + 1] += start[m];
    }
    for (uint32_t i = 0; i < x->n; i++) {
        order[start[x->st[i].metric]++] = i;
    }
    free(start);
    if (version >= 4) {
        return put_v4(x, f, order, rank, zlevel);
    }
    uint32_t off = 0;
    int rc = vbuf_put_u32(f, x->n) | vbuf_put_u32(f, 0);
    for (uint32_t k = 0; k < x->n; k++) {
        const struct sidx_stream *s = &x->st[order[k]];
        rank[order[k]] = off; /* reused below as the next slot of that stream */
        rc |= vbuf_put_u32(f, s->metric) | vbuf_put_u32(f, s->count);
        rc |= vbuf_put_u32(f, off) | vbuf_put_u32(f, 0);
        off += s->count;
    }
    if (rc != 0 || vbuf_reserve(f, (size_t)x->rows * 4) < 0) {
        return -ENOMEM;
    }
    uint8_t *rows = f->p + f->len;
    for (uint64_t r = 0; r < x->rows; r++) {
        wr32(rows + 4 * (size_t)rank[x->row_sid[r]]++, (uint32_t)r);
    }
    f->len += (size_t)x->rows * 4;
    return 0;
}

/* The format 2/3 layout at [p, end) (format 4's, once decoded). */
static bool parse_plain(blk *b, const uint8_t *p, const uint8_t *end)
{
    if (end - p < 8 || b->sig != SIG_METRICS) {
        return false;
    }
    uint32_t n = rd32(p);
    if ((uint64_t)(end - p - 8) / 16 < n) {
        return false;
    }
    const uint8_t *e = p + 8;
    const uint8_t *rows = e + 16 * (size_t)n;
    if ((uint64_t)(end - rows) / 4 < b->rows) {
        return false;
    }
    uint64_t off = 0;
    for (uint32_t i = 0; i < n; i++, e += 16) {
        uint32_t metric = rd32(e), count = rd32(e + 4);
        if (metric >= b->n_metrics || count == 0 || rd32(e + 8) != off ||
            (i > 0 && metric < rd32(e - 16))) {
            return false;
        }
        off += count;
    }
    if (off != b->rows) {
        return false;
    }
    /* Rows: inside the block and ascending within each stream (what the
     * readers' binary searches by time rely on). */
    e = p + 8;
    for (uint32_t i = 0; i < n; i++, e += 16) {
        const uint8_t *r = rows + 4 * (size_t)rd32(e + 8);
        uint32_t count = rd32(e + 4);
        for (uint32_t k = 0; k < count; k++) {
            uint32_t v = rd32(r + 4 * (size_t)k);
            if (v >= b->rows || (k > 0 && v <= rd32(r + 4 * (size_t)(k - 1)))) {
                return false;
            }
        }
    }
    b->streams = p + 8;
    b->n_streams = n;
    b->stream_rows = (const uint32_t *)(const void *)rows;
    return true;
}

/* |out| (format 3's layout of |n| streams, the header not yet written)
 * checked and kept as the block's index; freed when it fails. */
static bool adopt(blk *b, uint8_t *out, uint32_t n)
{
    wr32(out, n);
    wr32(out + 4, 0);
    if (!parse_plain(b, out, out + 8 + 16 * (size_t)n + 4 * (size_t)b->rows)) {
        free(out);
        return false;
    }
    blk_heap_free(b->sbuf);
    b->sbuf = out;
    blk_heap_add(out);
    return true;
}

/*
 * Format 3's layout of |n| streams (the header not yet written; NULL
 * when out of memory) from stream numbers in order of first row: stream
 * k's metric[k] and count[k] (used up: it becomes k's next row slot),
 * and sid[r] per block row. Streams by metric, then first row (a stable
 * counting sort), each one's rows ascending. |start| is scratch of
 * n_metrics + 1 entries.
 */
static uint8_t *lay_out(const blk *b, uint32_t n, const uint32_t *metric, uint32_t *count,
                        const uint32_t *sid, uint32_t *start)
{
    uint64_t rows = b->rows;
    uint8_t *out = malloc(8 + 16 * (size_t)n + 4 * (size_t)rows);
    if (out == NULL) {
        return NULL;
    }
    memset(start, 0, ((size_t)b->n_metrics + 1) * sizeof(*start));
    for (uint32_t k = 0; k < n; k++) {
        start[metric[k] + 1]++;
    }
    for (uint32_t m = 0; m < b->n_metrics; m++) {
        start[m + 1] += start[m];
    }
    /* stream k goes to entry start[metric[k]]++ (stable: k is the order
     * of first rows); then count[k] becomes stream k's next row slot */
    uint32_t off = 0, *slot = count;
    uint8_t *e0 = out + 8;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = start[metric[k]]++;
        uint8_t *e = e0 + 16 * (size_t)i;
        wr32(e, metric[k]);
        wr32(e + 4, count[k]);
        wr32(e + 12, k); /* the stream's number, until the offsets below */
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *e = e0 + 16 * (size_t)i;
        uint32_t k = rd32(e + 12), c = rd32(e + 4);
        wr32(e + 8, off);
        wr32(e + 12, 0);
        slot[k] = off;
        off += c;
    }
    uint8_t *rw = e0 + 16 * (size_t)n;
    for (uint64_t r = 0; r < rows; r++) {
        wr32(rw + 4 * (size_t)slot[sid[r]]++, (uint32_t)r);
    }
    return out;
}

/*
 * Format 6's by-row body (codec 2, 3) into format 3's layout (lay_out).
 * Every stream takes at least a byte and every row one. NULL when
 * malformed: a code past the streams opened so far, a stream never
 * opened, a metric past the block's.
 */
static uint8_t *decode_by_row(blk *b, uint32_t n, const uint8_t *body, uint64_t raw)
{
    uint64_t rows = b->rows;
    if ((uint64_t)n + rows > raw || n > rows) {
        return NULL;
    }
    uint32_t *tmp = malloc((2 * (size_t)n + rows + (size_t)b->n_metrics + 1) * sizeof(*tmp));
    if (tmp == NULL) {
        return NULL;
    }
    uint32_t *metric = tmp, *count = tmp + n, *sid = tmp + 2 * (size_t)n;
    uint32_t *start = sid + rows; /* n_metrics + 1 */
    const uint8_t *q = body, *qe = body + raw;
    bool bad = false;
    for (uint32_t k = 0; k < n && !bad; k++) {
        uint64_t m = uv_take(&q, qe, &bad);
        bad = bad || m >= b->n_metrics;
        metric[k] = (uint32_t)m;
        count[k] = 0;
    }
    uint32_t next = 0;
    for (uint64_t r = 0; r < rows && !bad; r++) {
        uint64_t c = uv_take(&q, qe, &bad);
        if (c == 0) {
            bad = bad || next == n;
            sid[r] = next++;
        } else {
            bad = bad || c > next;
            sid[r] = next - (uint32_t)c;
        }
        if (!bad) {
            count[sid[r]]++;
        }
    }
    uint8_t *out = bad || next != n || q != qe ? NULL : lay_out(b, n, metric, count, sid, start);
    free(tmp);
    return out;
}

/*
 * Format 6, META flag bit 2 (block_int.h, "v6 STREAMS FROM ROWS"): a
 * stream is a (metric id, attribute list code) pair, numbered in order
 * of first row. The writer's list dictionary holds each distinct list
 * once, so that is the pair the writer's index hashes (the metric and
 * the list's bytes); a dictionary with two equal lists is refused rather
 * than split into two streams of one series.
 *
 * Per row: the code's first stream (head[]) when it has the row's metric
 * (a list is mostly one metric's), else a probe of a table of the other
 * (metric, code) pairs. Scratch is freed before the return.
 */
struct pair_slot {
    uint64_t key; /* metric << 32 | code */
    uint32_t sid1;
    uint32_t zero;
};

static bool lists_distinct(const struct scol *dict, uint64_t nd, uint32_t *ht, size_t cap)
{
    memset(ht, 0, cap * sizeof(*ht));
    for (uint64_t c = 0; c < nd; c++) {
        struct mstr e = sc_get(dict, c);
        size_t i = (size_t)XXH3_64bits(e.p, e.len) & (cap - 1);
        for (; ht[i] != 0; i = (i + 1) & (cap - 1)) {
            struct mstr o = sc_get(dict, ht[i] - 1);
            if (o.len == e.len && memcmp(o.p, e.p, e.len) == 0) {
                return false;
            }
        }
        ht[i] = (uint32_t)c + 1;
    }
    return true;
}

static size_t pow2_above(uint64_t n)
{
    size_t cap = 16;
    while (cap < 2 * n) {
        cap *= 2;
    }
    return cap;
}

int streams_derive(blk *b, uint64_t nd)
{
    uint64_t rows = b->rows;
    const struct icol *mc = &b->I[M_METRIC], *codes = &b->D[X_ADICT].codes;
    if (nd > rows + 1 || nd >= UINT32_MAX) {
        return -EBADMSG; /* the table load checked this: ndict <= rows + 1 */
    }
    size_t hcap = pow2_above(nd);
    /* metric[], count[] per stream (at most rows), sid[] per row, head[]
     * per code, start[] per metric; the list hash table */
    size_t nscr = 3 * (size_t)rows + (size_t)nd + (size_t)b->n_metrics + 1;
    uint32_t *tmp = malloc(nscr * sizeof(*tmp));
    uint32_t *ht = malloc(hcap * sizeof(*ht));
    struct pair_slot *pt = NULL;
    size_t pcap = 0, pn = 0;
    int rc = -ENOMEM;
    if (tmp == NULL || ht == NULL) {
        goto out;
    }
    uint32_t *metric = tmp, *count = tmp + rows, *sid = tmp + 2 * (size_t)rows;
    uint32_t *head = sid + rows, *start = head + nd;
    rc = -EBADMSG;
    if (!lists_distinct(&b->D[X_ADICT].dict, nd, ht, hcap)) {
        goto out;
    }
    memset(head, 0xff, (size_t)nd * sizeof(*head));
    uint32_t n = 0;
    for (uint64_t r = 0; r < rows; r++) {
        uint32_t m = (uint32_t)ic_get(mc, r), c = (uint32_t)ic_get(codes, r);
        uint32_t s = head[c];
        if (s == UINT32_MAX) {
            s = head[c] = n++;
            metric[s] = m;
            count[s] = 0;
        } else if (metric[s] != m) {
            if (2 * (pn + 1) > pcap) { /* the other pairs' table, at most half full */
                size_t ncap = pcap != 0 ? 2 * pcap : 256;
                struct pair_slot *np = calloc(ncap, sizeof(*np));
                if (np == NULL) {
                    rc = -ENOMEM;
                    goto out;
                }
                for (size_t i = 0; i < pcap; i++) {
                    if (pt[i].sid1 != 0) {
                        size_t j = (size_t)((pt[i].key * 0x9e3779b97f4a7c15ull) >> 32) & (ncap - 1);
                        while (np[j].sid1 != 0) {
                            j = (j + 1) & (ncap - 1);
                        }
                        np[j] = pt[i];
                    }
                }
                free(pt);
                pt = np;
                pcap = ncap;
            }
            uint64_t key = (uint64_t)m << 32 | c;
            size_t j = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (pcap - 1);
            while (pt[j].sid1 != 0 && pt[j].key != key) {
                j = (j + 1) & (pcap - 1);
            }
            if (pt[j].sid1 == 0) {
                pt[j] = (struct pair_slot){.key = key, .sid1 = n + 1};
                pn++;
                s = n++;
                metric[s] = m;
                count[s] = 0;
            } else {
                s = pt[j].sid1 - 1;
            }
        }
        sid[r] = s;
        count[s]++;
    }
    uint8_t *o = lay_out(b, n, metric, count, sid, start);
    rc = o == NULL ? -ENOMEM : adopt(b, o, n) ? 0 : -EBADMSG;
    if (rc == 0) {
        atomic_store_explicit(&b->streams_ready, true, memory_order_release);
    }
out:
    free(pt);
    free(ht);
    free(tmp);
    return rc;
}

/*
 * Format 4: the varint body (zstd decoded first when its codec says so)
 * decoded into format 3's layout in memory the block owns (b->sbuf),
 * which parse_plain then checks as it checks a format 3 section. Every
 * stream takes at least 2 body bytes and every row 1, which bounds what
 * is allocated by the body's real length.
 */
static bool parse_v4(blk *b, const uint8_t *p, const uint8_t *end)
{
    if (end - p < 16 || b->sig != SIG_METRICS) {
        return false;
    }
    uint32_t n = rd32(p), codec = rd32(p + 4);
    uint64_t raw = rd64(p + 8), have = (uint64_t)(end - p - 16);
    const uint8_t *body = p + 16;
    uint8_t *z = NULL;
    bool by_row = codec >= 2 && b->version >= 6;
    if (by_row) {
        codec -= 2;
    }
    if (codec == 1) {
        if (raw == 0 || raw > ZSTD_RAW_MAX || raw / ZSTD_RATIO_CAP > have ||
            ZSTD_getFrameContentSize(body, have) != raw || (z = malloc(raw)) == NULL) {
            return false;
        }
        size_t zn = ZSTD_decompress(z, raw, body, have);
        if (ZSTD_isError(zn) || zn != raw) {
            free(z);
            return false;
        }
        body = z;
    } else if (codec != 0 || raw != have) {
        return false;
    }
    if (by_row) {
        uint8_t *out = decode_by_row(b, n, body, raw);
        free(z);
        return out != NULL && adopt(b, out, n);
    }
    const uint8_t *q = body, *qe = body + raw;
    bool ok = n <= raw / 2 && b->rows <= raw;
    uint8_t *out = ok ? malloc(8 + 16 * (size_t)n + 4 * (size_t)b->rows) : NULL;
    ok = out != NULL;
    bool bad = false;
    uint64_t metric = 0, off = 0;
    for (uint32_t i = 0; ok && i < n; i++) {
        metric += uv_take(&q, qe, &bad);
        uint64_t count = uv_take(&q, qe, &bad);
        ok = !bad && metric <= UINT32_MAX && count <= b->rows - off;
        if (ok) {
            uint8_t *e = out + 8 + 16 * (size_t)i;
            wr32(e, (uint32_t)metric);
            wr32(e + 4, (uint32_t)count);
            wr32(e + 8, (uint32_t)off);
            wr32(e + 12, 0);
            off += count;
        }
    }
    ok = ok && off == b->rows;
    uint8_t *rows = out != NULL ? out + 8 + 16 * (size_t)n : NULL;
    for (uint32_t i = 0, at = 0; ok && i < n; i++) {
        uint32_t count = rd32(out + 8 + 16 * (size_t)i + 4);
        uint64_t r = 0;
        for (uint32_t k = 0; ok && k < count; k++, at++) {
            uint64_t d = uv_take(&q, qe, &bad);
            r = k == 0 ? d : r + d + 1;
            ok = !bad && r < b->rows;
            if (ok) {
                wr32(rows + 4 * (size_t)at, (uint32_t)r);
            }
        }
    }
    free(z);
    if (!ok || q != qe) {
        free(out);
        return false;
    }
    return adopt(b, out, n);
}

bool streams_parse(blk *b, const uint8_t *p, const uint8_t *end)
{
    return b->version >= 4 ? parse_v4(b, p, end) : parse_plain(b, p, end);
}

/* A block whose index is derived from its rows (format 6, META flag
 * bit 2) derives it at the first load of its attribute table: false
 * while that fails (then it answers as a block without an index). */
static bool streams_there(const blk *b)
{
    if (!b->streams_derived ||
        atomic_load_explicit(&((blk *)b)->streams_ready, memory_order_acquire)) {
        return true;
    }
    return ready((blk *)b, BLK_ATTRS) == 0;
}

uint32_t blk_n_streams(const blk *b)
{
    return streams_there(b) ? b->n_streams : 0;
}

int blk_stream(const blk *b, uint32_t i, struct blk_stream *out)
{
    if (!streams_there(b) || i >= b->n_streams) {
        return -EINVAL;
    }
    const uint8_t *e = b->streams + 16 * (size_t)i;
    out->metric_id = rd32(e);
    out->n_rows = rd32(e + 4);
    out->rows = b->stream_rows + rd32(e + 8);
    return 0;
}

void blk_streams_of_metric(const blk *b, uint32_t metric_id, uint32_t *first, uint32_t *count)
{
    uint32_t lo = 0, hi = streams_there(b) ? b->n_streams : 0;
    while (lo < hi) { /* first stream with metric >= metric_id */
        uint32_t mid = lo + (hi - lo) / 2;
        if (rd32(b->streams + 16 * (size_t)mid) < metric_id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    uint32_t end = lo;
    while (end < b->n_streams && rd32(b->streams + 16 * (size_t)end) == metric_id) {
        end++;
    }
    *first = lo;
    *count = end - lo;
}

void *blk_aux(const blk *b)
{
    return atomic_load_explicit(&((blk *)b)->aux, memory_order_acquire);
}

bool blk_aux_set(blk *b, void *p, void (*free_fn)(void *))
{
    pthread_mutex_lock(&b->lock);
    bool ok = atomic_load_explicit(&b->aux, memory_order_relaxed) == NULL;
    if (ok) {
        b->aux_free = free_fn;
        atomic_store_explicit(&b->aux, p, memory_order_release);
    }
    pthread_mutex_unlock(&b->lock);
    return ok;
}
