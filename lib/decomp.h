/*
 * decomp.h - a request body's content coding undone: gzip members (libdeflate)
 * or zstd frames (libzstd), back to back, into one growing buffer that never
 * passes a limit (a bomb costs at most the limit). Used by ingest (the
 * Content-Encoding / grpc-encoding of an export) and by WAL replay (a frame
 * logged as it arrived).
 *
 * One struct decomp per thread (its decompressors are kept between calls).
 */
#ifndef MIRADB_LIB_DECOMP_H
#define MIRADB_LIB_DECOMP_H

#include <stddef.h>
#include <stdint.h>

enum decomp_coding {
    DECOMP_GZIP = 1, /* RFC 1952 members */
    DECOMP_ZSTD = 2, /* RFC 8878 frames (skippable frames skipped) */
};

/* The largest zstd window a frame of unknown content size may ask for:
 * the decompressor holds that much per thread (8 MiB: what Go's and the
 * Collector's encoders use by default). A frame whose size is in its header
 * needs none: it is decompressed straight into the output. */
#define DECOMP_ZSTD_WINDOW_LOG_MAX 23

struct decomp;

struct decomp *decomp_new(void);
void decomp_free(struct decomp *d); /* NULL is fine */

/*
 * Where the output goes: p[0, len) written, cap bytes usable. grow() must
 * make p hold at least |cap| bytes (keeping p[0, len)) and set o->cap, or
 * return negative (passed on); it is only asked for cap <= the limit.
 */
struct decomp_out {
    uint8_t *p;
    size_t len, cap;
    int (*grow)(struct decomp_out *o, size_t cap, void *arg);
    void *arg;
};

/*
 * Replaces o's contents (len reset to 0) with in[0, n) decoded. Returns 0;
 * -E2BIG when the output would pass |limit| bytes; -EBADMSG when the bytes
 * are not valid, are truncated, or trail the last member/frame; -ENOMEM;
 * whatever grow() returned. An empty |in| decodes to nothing (0).
 */
int decomp_all(struct decomp *d, enum decomp_coding k, const uint8_t *in, size_t n, size_t limit,
               struct decomp_out *o);

#endif
