/*
 * block_wtable.c - the block writer's table serializer: a table's columns
 * (frame of reference or delta INT columns, strings, dictionaries, raw
 * bytes; block_int.h's format) as pieces pointing into the column
 * buffers, written with writev (plain) or compressed into one zstd frame.
 */
#include "storage/block_wint.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libdeflate.h>
#include <zstd.h>

#include "lib/clock.h"
#include "lib/lathist.h"
#include "lib/u64range.h"

static const uint8_t zeros8[8];

static void tbw_piece(struct tbw *t, const void *p, size_t n)
{
    assert(t->niov < TBW_PIECES);
    t->iov[t->niov++] = (struct iovec){(void *)p, n};
    t->len += n;
}

static void tbw_begin(struct tbw *t, unsigned ncols)
{
    assert(ncols <= MAX_PHYS);
    t->ncols = ncols;
    t->at = 0;
    t->cut.n = 0;
    t->niov = 0;
    t->len = 0;
    for (unsigned i = 0; i < t->npl; i++) {
        free(t->pl[i]);
    }
    t->npl = 0;
    memset(t->dir, 0, 8 + 16 * (size_t)ncols);
    wr32(t->dir, ncols);
    tbw_piece(t, t->dir, 8 + 16 * (size_t)ncols);
}

static size_t tbw_col_start(struct tbw *t)
{
    if (t->len & 7) {
        tbw_piece(t, zeros8, 8 - (t->len & 7));
    }
    return t->len;
}

static void tbw_col_end(struct tbw *t, size_t start)
{
    uint8_t *d = t->dir + 8 + 16 * (size_t)t->at;
    wr64(d, start);
    wr64(d + 8, t->len - start);
    t->at++;
}

static unsigned width_of(uint64_t range)
{
    return range == 0 ? 0 : range <= 0xff ? 1 : range <= 0xffff ? 2 : range <= 0xffffffffu ? 4 : 8;
}

/*
 * Delta form of |v| (n >= 2 values): v[0], then v[i] - v[i - 1] less their
 * minimum, narrowed in place to |w| bytes from p[0]. Delta i is computed
 * from values read before bytes [(i-1)*w, i*w) are written, which lie
 * below value i + 1.
 */
static void delta_narrow(uint64_t *v, uint64_t n, uint64_t dmn, unsigned w)
{
    uint8_t *p = (uint8_t *)v;
    uint64_t prev = v[0];
    /* one loop per width: the width is the column's, not the value's */
    switch (w) {
    case 1:
        for (uint64_t i = 1; i < n; i++) {
            uint64_t cur = v[i];
            p[i - 1] = (uint8_t)(cur - prev - dmn);
            prev = cur;
        }
        break;
    case 2:
        for (uint64_t i = 1; i < n; i++) {
            uint64_t cur = v[i];
            uint16_t x = (uint16_t)(cur - prev - dmn);
            memcpy(p + 2 * (i - 1), &x, 2);
            prev = cur;
        }
        break;
    case 4:
        for (uint64_t i = 1; i < n; i++) {
            uint64_t cur = v[i];
            wr32(p + 4 * (i - 1), (uint32_t)(cur - prev - dmn));
            prev = cur;
        }
        break;
    case 8:
        for (uint64_t i = 1; i < n; i++) {
            uint64_t cur = v[i];
            wr64(p + 8 * (i - 1), cur - prev - dmn);
            prev = cur;
        }
        break;
    default:
        break;
    }
}

/*
 * Bytes of |v|'s varint deltas (format 4: uv zz(v[i] - v[i-1]), i >= 1),
 * or UINT64_MAX when that is not below |limit| or when writing them in
 * place over v could overwrite a value not yet read (delta i's bytes must
 * end at or below value i + 1's: the first i deltas fit 8 (i + 1) bytes).
 */
static uint64_t var_size(const uint64_t *v, uint64_t n, uint64_t limit)
{
    uint64_t sz = 0;
    for (uint64_t i = 1; i < n; i++) {
        sz += (unsigned)pbw_varint_size(zz((int64_t)(v[i] - v[i - 1])));
        if (sz > 8 * i + 8 || sz >= limit) {
            return UINT64_MAX;
        }
    }
    return sz;
}

/* The varint deltas of |v| written in place from byte 0 (var_size said
 * they fit). */
static void var_narrow(uint64_t *v, uint64_t n)
{
    uint8_t *q = (uint8_t *)v;
    uint64_t prev = v[0];
    for (uint64_t i = 1; i < n; i++) {
        uint64_t cur = v[i];
        q = uv_put(q, zz((int64_t)(cur - prev)));
        prev = cur;
    }
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/*
 * INT encodings 3 and 4 (META flag bit 7): the stored values s (v - mn,
 * or each delta less dmn with |delta|) over their largest common divisor
 * g, as pw byte planes (all low bytes, then the next ...) in a buffer of
 * the table's, after the header, base, g (and the first value). false
 * (nothing emitted) when every s is 0 or the buffer cannot be had: the
 * caller's encodings then.
 */
static bool emit_planes(struct tbw *t, uint8_t *h, const uint64_t *v, uint64_t n, bool delta,
                        uint64_t base, size_t start)
{
    uint64_t m = delta ? n - 1 : n, g = 0, mx = 0;
    for (uint64_t i = 0; i < m; i++) {
        uint64_t s = delta ? v[i + 1] - v[i] - base : v[i] - base;
        g = gcd64(s, g);
        mx = s > mx ? s : mx;
    }
    if (g == 0 || t->npl >= MAX_PHYS) {
        return false;
    }
    mx /= g;
    unsigned pw = 1;
    while (pw < 8 && (mx >> (8 * pw)) != 0) {
        pw++;
    }
    uint8_t *q = malloc(m * pw);
    if (q == NULL) {
        return false;
    }
    t->pl[t->npl++] = q;
    for (uint64_t i = 0; i < m; i++) {
        uint64_t s = ((delta ? v[i + 1] - v[i] : v[i]) - base) / g;
        for (unsigned j = 0; j < pw; j++) {
            q[j * m + i] = (uint8_t)(s >> (8 * j));
        }
    }
    wr64(h + 8, base);
    h[16] = (uint8_t)pw;
    h[17] = delta ? INT_DPLANES : INT_PLANES;
    if (delta) {
        wr64(h + INT_HDR, v[0]);
    }
    wr64(h + INT_HDR + (delta ? 8 : 0), g);
    tbw_piece(t, h, INT_HDR + (delta ? 16 : 8));
    tbw_piece(t, q, m * pw);
    tbw_col_end(t, start);
    return true;
}

/*
 * |v| (n values) is narrowed in place: frame of reference (base + w-byte
 * values), or in format 3 delta coded when that is narrower (sorted times,
 * string offsets: the reader decodes it at table load).
 */
static void emit_int(struct tbw *t, uint64_t *v, uint64_t n)
{
    size_t start = tbw_col_start(t);
    struct u64_range rg;
    u64_range(v, n, &rg);
    uint64_t mn = rg.mn, mx = rg.mx, dmn = rg.dmn, dmx = rg.dmx;
    unsigned w = width_of(mx - mn);
    uint8_t *h = t->ihdr[t->at];
    memset(h, 0, INT_HDR + 16);
    wr64(h, n);
    uint64_t fixed = n * w, dfixed = n >= 2 ? 8 + (n - 1) * width_of(dmx - dmn) : UINT64_MAX;
    /* byte planes (zstd tables of META flag bit 7): the named columns'
     * deltas, and columns of 4 or 8 bytes a value that deltas do not narrow */
    if (t->planes && n >= 2 && ((t->dplane_cols >> t->at) & 1) != 0 &&
        emit_planes(t, h, v, n, true, dmn, start)) {
        return;
    }
    if (t->planes && n >= 2 && w >= 4 && dfixed >= fixed &&
        emit_planes(t, h, v, n, false, mn, start)) {
        return;
    }
    fixed = dfixed < fixed ? dfixed : fixed;
    /* varint deltas when they are narrower by a quarter (the reader decodes
     * them into 8 bytes a value); never against 1-byte values (a varint
     * takes a byte at least), so most columns skip the sizing pass. A
     * column of var_cols takes them when they are narrower at all: zstd
     * packs them better than the fixed widths there. */
    bool seq = t->no_var && ((t->var_cols >> t->at) & 1) != 0;
    uint64_t vn = seq && n >= 2 ? var_size(v, n, fixed)
                  : !t->no_var && n >= 2 && fixed >= 64 && fixed >= 2 * n
                      ? var_size(v, n, fixed - fixed / 4)
                      : UINT64_MAX;
    if (vn != UINT64_MAX) {
        h[17] = INT_VAR;
        wr64(h + INT_HDR, v[0]);
        tbw_piece(t, h, INT_HDR + 8);
        var_narrow(v, n);
        tbw_piece(t, v, vn);
        tbw_col_end(t, start);
        return;
    }
    if (n >= 2 && dfixed < n * w) {
        unsigned dw = width_of(dmx - dmn);
        wr64(h + 8, dmn);
        h[16] = (uint8_t)dw;
        h[17] = INT_DELTA;
        wr64(h + INT_HDR, v[0]);
        tbw_piece(t, h, INT_HDR + 8);
        delta_narrow(v, n, dmn, dw);
        if (dw > 0) {
            tbw_piece(t, v, (n - 1) * dw);
        }
        tbw_col_end(t, start);
        return;
    }
    wr64(h + 8, mn);
    h[16] = (uint8_t)w;
    tbw_piece(t, h, INT_HDR);
    /* Value i is read before bytes [i*w, (i+1)*w) are written, and those
     * bytes lie below value i + 1: narrowing in place is safe. */
    uint8_t *p = (uint8_t *)v;
    if (w == 8) {
        for (uint64_t i = 0; i < n; i++) {
            wr64(p + 8 * i, v[i] - mn);
        }
    } else if (w > 0) {
        u64_narrow(v, n, mn, w);
    }
    if (n * w > 0) {
        tbw_piece(t, p, n * w);
    }
    tbw_col_end(t, start);
}

static void emit_raw(struct tbw *t, const void *p, size_t n)
{
    size_t start = tbw_col_start(t);
    if (n > 0) {
        tbw_piece(t, p, n);
    }
    tbw_col_end(t, start);
}

/* The metric root's start column by reference (block_pstart.c): INT
 * encoding 5's header, then the coded bytes |x|. */
static void emit_pstart(struct tbw *t, const struct vbuf *x, uint64_t rows)
{
    size_t start = tbw_col_start(t);
    uint8_t *h = t->ihdr[t->at];
    memset(h, 0, INT_HDR);
    wr64(h, rows);
    h[17] = INT_PSTART;
    tbw_piece(t, h, INT_HDR);
    tbw_piece(t, x->p, x->len);
    tbw_col_end(t, start);
}

/*
 * A sparse column (format 4) from |rows| 8-byte values in |r|: a bitmap
 * (bit i % 8 of byte i / 8: value i's bits are not all zero) into |bits|,
 * then the values whose bit is set, moved down in place in |r|.
 */
static void emit_sparse(struct tbw *t, struct vbuf *r, struct vbuf *bits, uint64_t rows)
{
    uint8_t *p = r->p, *bm = bits->p;
    uint64_t k = 0;
    memset(bm, 0, (rows + 7) / 8);
    for (uint64_t i = 0; i < rows; i++) {
        uint64_t v = rd64(p + 8 * i);
        if (v != 0) {
            bm[i >> 3] |= (uint8_t)(1u << (i & 7));
            wr64(p + 8 * k++, v);
        }
    }
    emit_raw(t, bm, (rows + 7) / 8);
    emit_raw(t, p, 8 * k);
}

/* The table of |sp|, then |n_extra| more INT columns of |rows| values. */
void blkw_emit_table(struct tbw *t, const struct spec *sp, struct wcols *w, uint64_t **extra,
                     unsigned n_extra)
{
    tbw_begin(t, phys_cols(sp) + n_extra);
    for (unsigned i = 0; i < sp->n; i++) {
        const struct ent *e = &sp->e[i];
        switch (e->type) {
        case 'I':
            if (e == w->pst_at) {
                emit_pstart(t, &w->pst, w->rows); /* format 6, META flag bit 9 */
            } else {
                emit_int(t, w->I[e->idx], w->rows);
            }
            break;
        case 'S':
            emit_int(t, w->S[e->idx].offs, w->rows + 1);
            emit_raw(t, w->S[e->idx].data.p, w->S[e->idx].data.len);
            break;
        case 'D': {
            struct dictb *d = &w->D[e->idx];
            emit_int(t, d->codes, w->rows);
            if (d->nd) {
                emit_int(t, d->offs, d->nd + 1);
            } else {
                uint64_t zero = 0; /* width 0: no piece points at it */
                emit_int(t, &zero, 1);
            }
            emit_raw(t, d->data.p, d->data.len);
            break;
        }
        case 'R':
            emit_raw(t, w->R[e->idx].p, w->R[e->idx].len);
            break;
        case 'K':
            emit_int(t, w->S[e->idx].offs, w->nkeys + 1);
            emit_raw(t, w->S[e->idx].data.p, w->S[e->idx].data.len);
            break;
        case 'V':
            if (w->nvals > 0) {
                emit_int(t, w->S[e->idx].offs, w->nvals + 1);
            } else {
                uint64_t zero = 0; /* width 0: no piece points at it */
                emit_int(t, &zero, 1);
            }
            emit_raw(t, w->S[e->idx].data.p, w->S[e->idx].data.len);
            break;
        case 'Z':
            emit_sparse(t, &w->R[e->idx], &w->Zb[e->idx], w->rows);
            break;
        case 'P':
            emit_int(t, w->pref, w->rows);
            emit_raw(t, w->praw.p, w->praw.len);
            break;
        case 'T':
            emit_raw(t, w->tdir.p, w->tdir.len);
            break;
        case 'F':
            if (w->fl.n > 0) {
                emit_int(t, w->fl.offs, w->fl.n + 1);
            } else {
                uint64_t zero = 0; /* width 0: no piece points at it */
                emit_int(t, &zero, 1);
            }
            emit_raw(t, w->fl.data.p, w->fl.data.len);
            break;
        }
    }
    for (unsigned i = 0; i < n_extra; i++) {
        emit_int(t, extra[i], w->rows);
    }
}

/* ---- write-behind and the fsync (block_wint.h) ---- */

#define WB_STEP (4u << 20)
static __thread int wb_fd = -1;
static __thread uint64_t wb_off, wb_started;
static struct lathist fsync_hist;

void blkw_writebehind_begin(int fd)
{
    wb_fd = fd;
    wb_off = 0;
    wb_started = 0;
}

static void wb_wrote(int fd, size_t n)
{
    if (fd != wb_fd) {
        return;
    }
    wb_off += n;
    if (wb_off - wb_started >= WB_STEP) {
        /* Best effort: a failure here shows again at the fsync. */
        (void)sync_file_range(fd, (off_t)wb_started, (off_t)(wb_off - wb_started),
                              SYNC_FILE_RANGE_WRITE);
        wb_started = wb_off;
    }
}

int blkw_fsync(int fd)
{
    uint64_t t0 = clock_mono_ns();
    int rc = fsync(fd);
    lathist_add_shared(&fsync_hist, clock_mono_ns() - t0);
    if (fd == wb_fd) {
        wb_fd = -1;
    }
    return rc;
}

void blk_fsync_hist(struct lathist *out)
{
    lathist_sum(out, &fsync_hist);
}

int blkw_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        c += w;
        n -= (size_t)w;
        wb_wrote(fd, (size_t)w);
    }
    return 0;
}

/* Writes all of iov[0, n) (consumed: the entries are advanced). */
static int writev_all(int fd, struct iovec *iov, unsigned n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n > IOV_MAX ? IOV_MAX : (int)n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        wb_wrote(fd, (size_t)w);
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            if (w == 0 && iov->iov_len > 0) {
                return -EIO;
            }
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

void blkw_tbw_fini(struct tbw *t)
{
    vbuf_fini(&t->out);
    for (unsigned i = 0; i < t->npl; i++) {
        free(t->pl[i]);
    }
    t->npl = 0;
    ZSTD_freeCCtx(t->zc); /* accepts NULL */
    t->zc = NULL;
}

/* Writes table |t| (compressing it if asked) at |*off|; pads to 8. A plain
 * table is written from its pieces, its CRC chained over them. */
int blkw_write_table(int fd, uint64_t *off, struct tbw *t, enum blk_codec codec, int level,
                     struct tdir *d)
{
    d->codec = BLK_CODEC_PLAIN;
    d->raw = t->len;
    d->off = *off;
    if (codec == BLK_CODEC_ZSTD && t->len > 0 && t->len <= ZSTD_RAW_MAX) {
        vbuf_reset(&t->out);
        if (vbuf_reserve(&t->out, t->len) < 0) {
            return -ENOMEM;
        }
        for (unsigned i = 0; i < t->niov; i++) {
            memcpy(t->out.p + t->out.len, t->iov[i].iov_base, t->iov[i].iov_len);
            t->out.len += t->iov[i].iov_len;
        }
        /* One context per scratch set, kept: a fresh one per table costs
         * its allocation and the clearing of its match tables. */
        if (t->zc == NULL && (t->zc = ZSTD_createCCtx()) == NULL) {
            return -ENOMEM;
        }
        uint8_t *z = NULL;
        size_t zn = 0;
        int rc = t->by_col
                     ? blkw_zcols(t->zc, level ? level : 3, t->out.p, t->out.len, &t->cut, &z, &zn)
                     : -EINVAL;
        d->codec = rc == -EINVAL ? BLK_CODEC_ZSTD : BLK_CODEC_ZSTD_COLS;
        if (rc == -EINVAL) { /* one frame */
            size_t cap = ZSTD_compressBound(t->len);
            if ((z = malloc(cap)) == NULL) {
                return -ENOMEM;
            }
            zn = ZSTD_compressCCtx(t->zc, z, cap, t->out.p, t->out.len, level ? level : 3);
            rc = ZSTD_isError(zn) ? -EIO : 0;
        }
        if (rc < 0) {
            free(z);
            return rc;
        }
        if (zn >= t->len) {
            /* Does not pay (a block of a few rows): plain, and no inflate
             * at every load. */
            free(z);
            goto plain;
        }
        d->len = zn;
        d->crc = crc32_of(z, zn);
        size_t padn = (8 - (zn & 7)) & 7;
        struct iovec v[2] = {{z, zn}, {(void *)zeros8, padn}};
        rc = writev_all(fd, v, 2);
        free(z);
        *off += zn + padn;
        return rc;
    }
plain:
    d->codec = BLK_CODEC_PLAIN;
    uint32_t crc = 0;
    for (unsigned i = 0; i < t->niov; i++) {
        crc = libdeflate_crc32(crc, t->iov[i].iov_base, t->iov[i].iov_len);
    }
    d->len = t->len;
    d->crc = crc;
    if (t->len & 7) {
        assert(t->niov < TBW_PIECES);
        t->iov[t->niov++] = (struct iovec){(void *)zeros8, 8 - (t->len & 7)};
    }
    *off += (t->len + 7) & ~(uint64_t)7;
    return writev_all(fd, t->iov, t->niov);
}
