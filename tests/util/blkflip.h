/*
 * blkflip.h - damaging a sealed block file on purpose, for the tests of
 * quarantine: one byte of one table flipped, the rest of the file intact.
 */
#ifndef MIRADB_TEST_BLKFLIP_H
#define MIRADB_TEST_BLKFLIP_H

#include "storage/block.h"

/* Flips one byte (xor 0x5a) in the middle of the first table of |kind| in
 * the block file at |path|. Reopen the block with BLK_OPEN_NO_CACHE to read
 * the damage. 0; -ENOENT when the block has no such table; blk_open's or
 * the file's -errno otherwise. */
int blkflip_table(const char *path, enum blk_table_kind kind);

#endif
