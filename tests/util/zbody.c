/*
 * zbody.c - gzip and zstd bodies for tests (zbody.h).
 */
#include "tests/util/zbody.h"

#include <criterion/criterion.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <zstd.h>

uint8_t *zbody_gzip(const void *p, size_t n, size_t *out)
{
    struct libdeflate_compressor *z = libdeflate_alloc_compressor(6);
    cr_assert_not_null(z);
    size_t cap = libdeflate_gzip_compress_bound(z, n);
    uint8_t *g = malloc(cap);
    cr_assert_not_null(g);
    *out = libdeflate_gzip_compress(z, p, n, g, cap);
    libdeflate_free_compressor(z);
    cr_assert_gt(*out, 0, "gzip of %zu bytes failed", n);
    return g;
}

uint8_t *zbody_zstd(const void *p, size_t n, bool sized, size_t *out)
{
    size_t cap = ZSTD_compressBound(n);
    uint8_t *z = malloc(cap);
    cr_assert_not_null(z);
    ZSTD_CCtx *c = ZSTD_createCCtx();
    cr_assert_not_null(c);
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
    ZSTD_outBuffer ob = {z, cap, 0};
    ZSTD_inBuffer ib = {p, n, 0};
    if (!sized) { /* a first call that only continues: the size is not known yet */
        cr_assert(!ZSTD_isError(ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_continue)));
    }
    size_t left;
    while ((left = ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_end)) != 0) {
        cr_assert(!ZSTD_isError(left));
    }
    ZSTD_freeCCtx(c);
    cr_assert_eq(ZSTD_getFrameContentSize(z, ob.pos),
                 sized ? (unsigned long long)n : ZSTD_CONTENTSIZE_UNKNOWN);
    *out = ob.pos;
    return z;
}
