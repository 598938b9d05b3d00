/*
 * decomp.c - gzip members and zstd frames into one bounded buffer (decomp.h).
 */
#include "lib/decomp.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <zstd.h>

struct decomp {
    struct libdeflate_decompressor *gz; /* made at the first gzip body */
    ZSTD_DCtx *zs;                      /* made at the first zstd body */
};

struct decomp *decomp_new(void)
{
    return calloc(1, sizeof(struct decomp));
}

void decomp_free(struct decomp *d)
{
    if (d != NULL) {
        libdeflate_free_decompressor(d->gz);
        ZSTD_freeDCtx(d->zs);
        free(d);
    }
}

/* The output's next size: twice what it is, at least |hint|, at most
 * |limit|; -E2BIG when it is at the limit already. */
static int grow_step(struct decomp_out *o, size_t hint, size_t limit)
{
    if (o->cap >= limit) {
        return -E2BIG;
    }
    size_t cap = o->cap ? o->cap * 2 : hint;
    if (cap < hint) {
        cap = hint;
    }
    if (cap > limit) {
        cap = limit;
    }
    return o->grow(o, cap, o->arg);
}

/* A first size for the output: four times the input (or more when the
 * coding says how much it holds), at least 4 KiB, at most the limit. */
static size_t first_hint(size_t n, uint64_t declared, size_t limit)
{
    uint64_t hint = (uint64_t)n * 4;
    if (declared > hint) {
        hint = declared;
    }
    if (hint < 4096) {
        hint = 4096;
    }
    return hint > limit ? limit : (size_t)hint;
}

/* Members one after another; a member that does not fit is decoded again
 * from its start with twice the room (libdeflate has no resumable state). */
static int gunzip(struct decomp *d, const uint8_t *in, size_t n, size_t limit, struct decomp_out *o)
{
    /* The last member's ISIZE (its size mod 2^32): a hint, never trusted. */
    uint32_t isize = n >= 4 ? (uint32_t)in[n - 4] | (uint32_t)in[n - 3] << 8 |
                                  (uint32_t)in[n - 2] << 16 | (uint32_t)in[n - 1] << 24
                            : 0;
    size_t hint = first_hint(n, isize, limit);
    if (d->gz == NULL && (d->gz = libdeflate_alloc_decompressor()) == NULL) {
        return -ENOMEM;
    }
    while (n > 0) {
        if (n < 18 || in[0] != 0x1f || in[1] != 0x8b) {
            return -EBADMSG; /* not a member, or bytes after the last one */
        }
        for (;;) {
            if (o->cap < hint) {
                int rc = grow_step(o, hint, limit);
                if (rc < 0) {
                    return rc;
                }
            }
            size_t used = 0, out = 0;
            enum libdeflate_result lr = libdeflate_gzip_decompress_ex(d->gz, in, n, o->p + o->len,
                                                                      o->cap - o->len, &used, &out);
            if (lr == LIBDEFLATE_SUCCESS) {
                o->len += out;
                in += used;
                n -= used;
                break;
            }
            if (lr != LIBDEFLATE_INSUFFICIENT_SPACE) {
                return -EBADMSG;
            }
            if (o->cap >= limit) {
                return -E2BIG;
            }
            hint = o->cap ? o->cap * 2 : 4096;
        }
    }
    return 0;
}

/* The decoded size of the frames in[0, n) when every header gives its own
 * (skippable frames count 0), ZSTD_CONTENTSIZE_UNKNOWN when one does not,
 * ZSTD_CONTENTSIZE_ERROR when the bytes are not frames. */
static unsigned long long frames_size(const uint8_t *in, size_t n)
{
    unsigned long long total = 0;
    while (n > 0) {
        unsigned long long fs = ZSTD_getFrameContentSize(in, n);
        if (fs == ZSTD_CONTENTSIZE_ERROR || fs == ZSTD_CONTENTSIZE_UNKNOWN) {
            return fs;
        }
        size_t c = ZSTD_findFrameCompressedSize(in, n);
        if (ZSTD_isError(c) || total + fs < total) {
            return ZSTD_CONTENTSIZE_ERROR;
        }
        total += fs;
        in += c;
        n -= c;
    }
    return total;
}

/* Frames whose headers give every size are decoded in one call straight
 * into an output of that size (no window buffer); others stream, with the
 * window bounded by DECOMP_ZSTD_WINDOW_LOG_MAX. */
static int unzstd(struct decomp *d, const uint8_t *in, size_t n, size_t limit, struct decomp_out *o)
{
    if (d->zs == NULL) {
        if ((d->zs = ZSTD_createDCtx()) == NULL) {
            return -ENOMEM;
        }
        ZSTD_DCtx_setParameter(d->zs, ZSTD_d_windowLogMax, DECOMP_ZSTD_WINDOW_LOG_MAX);
    }
    unsigned long long total = frames_size(in, n);
    if (total == ZSTD_CONTENTSIZE_ERROR) {
        return -EBADMSG;
    }
    if (total != ZSTD_CONTENTSIZE_UNKNOWN) {
        if (total > limit) {
            return -E2BIG;
        }
        if (o->cap < total) {
            int rc = o->grow(o, (size_t)total, o->arg);
            if (rc < 0) {
                return rc;
            }
        }
        size_t k = ZSTD_decompressDCtx(d->zs, o->p, o->cap, in, n);
        if (ZSTD_isError(k) || k != total) {
            return -EBADMSG;
        }
        o->len = k;
        return 0;
    }
    ZSTD_DCtx_reset(d->zs, ZSTD_reset_session_only);
    ZSTD_inBuffer ib = {in, n, 0};
    size_t hint = first_hint(n, 0, limit);
    for (;;) {
        ZSTD_outBuffer ob = {o->p, o->cap, o->len};
        size_t in_was = ib.pos, out_was = o->len;
        size_t r = ZSTD_decompressStream(d->zs, &ob, &ib);
        if (ZSTD_isError(r)) {
            return -EBADMSG; /* bad bytes, trailing garbage, a window over the cap */
        }
        o->len = ob.pos;
        if (r == 0 && ib.pos == ib.size) {
            return 0; /* the last frame ended with the input */
        }
        if (r == 0) {
            continue; /* a frame ended, with nothing held back: the next one */
        }
        if (ob.pos < ob.size) {
            if (ib.pos == ib.size || (ib.pos == in_was && ob.pos == out_was)) {
                return -EBADMSG; /* a frame cut short (or, never seen, no progress) */
            }
            continue;
        }
        int rc = grow_step(o, hint, limit); /* full: room for what it holds back */
        if (rc < 0) {
            return rc;
        }
    }
}

int decomp_all(struct decomp *d, enum decomp_coding k, const uint8_t *in, size_t n, size_t limit,
               struct decomp_out *o)
{
    o->len = 0;
    if (n == 0) {
        return 0;
    }
    return k == DECOMP_ZSTD ? unzstd(d, in, n, limit, o) : gunzip(d, in, n, limit, o);
}
