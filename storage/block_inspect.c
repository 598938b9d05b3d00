/*
 * block_inspect.c - introspection of an open block for `miradb inspect`
 * and `miradb fsck`: the table directory, the blooms and the layout as
 * parsed at open, and the names they print. blk_verify_table, which
 * hashes and counts, is with the table loading in block_read.c.
 */
#include "storage/block_int.h"

#include <errno.h>
#include <stdatomic.h>

/* ---- introspection ---- */

const char *blk_table_kind_name(enum blk_table_kind k)
{
    switch (k) {
    case BLK_T_ROOT:
        return "root";
    case BLK_T_ATTRS:
        return "attrs";
    case BLK_T_DETAIL:
        return "detail";
    }
    return "?";
}

const char *blk_codec_name(enum blk_codec c)
{
    switch (c) {
    case BLK_CODEC_PLAIN:
        return "plain";
    case BLK_CODEC_ZSTD:
        return "zstd";
    case BLK_CODEC_ZSTD_COLS:
        return "zstdc";
    }
    return "?";
}

const char *blk_bloom_kind_name(enum blk_bloom_kind k)
{
    switch (k) {
    case BLK_BLOOM_TOKENS:
        return "body_tokens";
    case BLK_BLOOM_TRACE_IDS:
        return "trace_ids";
    case BLK_BLOOM_ATTRS:
        return "attr_values";
    case BLK_BLOOM_RES_ATTRS:
        return "resource_values";
    case BLK_BLOOM_GRAMS:
        return "body_grams";
    }
    return "?";
}

uint32_t blk_n_tables(const blk *b)
{
    (void)b;
    return N_TABLES;
}

int blk_table_info(const blk *b, uint32_t i, struct blk_table_info *out)
{
    if (i >= N_TABLES) {
        return -EINVAL;
    }
    const struct tdir *d = &b->dir[i];
    int st = atomic_load_explicit(&((blk *)b)->tstate[i], memory_order_acquire);
    *out = (struct blk_table_info){
        .kind = (enum blk_table_kind)d->kind,
        .codec = (enum blk_codec)d->codec,
        .offset = d->off,
        .length = d->len,
        .raw_length = d->raw,
        .crc32 = d->crc,
        .n_columns = st == TS_OK ? b->tcols[i] : 0,
        .state = st == TS_OK    ? 1
                 : st == TS_BAD ? -1
                                : 0,
    };
    return 0;
}

uint32_t blk_n_blooms(const blk *b)
{
    return b->n_blooms;
}

int blk_bloom_info(const blk *b, uint32_t i, struct blk_bloom_info *out)
{
    if (i >= b->n_blooms) {
        return -EINVAL;
    }
    const struct bloom_r *bl = &b->blooms[i];
    uint64_t set = 0;
    for (uint64_t w = 0; w < bl->nbits / 64; w++) {
        set += (uint64_t)__builtin_popcountll(rd64(bl->bits + 8 * w));
    }
    *out =
        (struct blk_bloom_info){bl->kind, bl->nbits, bl->items, bl->k, bl->seed, set, bl->complete};
    return 0;
}

void blk_layout(const blk *b, struct blk_layout *out)
{
    *out = (struct blk_layout){
        .version = b->version,
        .header_bytes = HDR_SIZE,
        .footer_offset = b->foot_off,
        .footer_bytes = b->foot_len,
        .dict_bytes = {b->dict_bytes[0], b->dict_bytes[1], b->dict_bytes[2]},
        .bloom_bytes = b->bloom_bytes,
        .meta_flags = b->meta_flags,
    };
}
