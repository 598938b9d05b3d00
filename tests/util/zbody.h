/*
 * zbody.h - bodies compressed as exporters send them, for tests: gzip
 * (level 6, one member) and zstd (level 3, one frame, with or without its
 * content size in the header). malloc'd; they assert rather than fail.
 */
#ifndef MIRADB_TESTS_ZBODY_H
#define MIRADB_TESTS_ZBODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint8_t *zbody_gzip(const void *p, size_t n, size_t *out);
/* |sized|: the frame header holds n (one-shot, as Go's EncodeAll writes
 * it); else a stream that never pledged a size (ZSTD_CONTENTSIZE_UNKNOWN). */
uint8_t *zbody_zstd(const void *p, size_t n, bool sized, size_t *out);

#endif
