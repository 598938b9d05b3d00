/*
 * u64range.h - the range of an array of u64 and of its successive
 * differences, in one pass: what the block writer's INT columns need to
 * choose between frame of reference and delta coding (block_wtable.c's
 * emit_int); and the frame of reference narrowing itself. With AVX2
 * (checked at run time) several values a step; the answer is the same
 * either way. No allocation; callable from any thread.
 */
#ifndef MIRADB_LIB_U64RANGE_H
#define MIRADB_LIB_U64RANGE_H

#include <stdbool.h>
#include <stdint.h>

/* Of v[0, n): mn, mx its least and greatest values (both 0 when n is 0);
 * dmn, dmx the least and greatest of v[i] - v[i - 1] (mod 2^64) for
 * i >= 1 (UINT64_MAX and 0 when n < 2). */
struct u64_range {
    uint64_t mn, mx, dmn, dmx;
};

void u64_range(const uint64_t *v, uint64_t n, struct u64_range *r);

/* The same, one value a step: the reference u64_range is tested against. */
void u64_range_scalar(const uint64_t *v, uint64_t n, struct u64_range *r);

/*
 * Frame of reference in place: v[i] - base for each i < n written as |w|
 * (1, 2 or 4) little-endian bytes at byte i * w of v (each difference must
 * fit w bytes). Value i is read before bytes [i*w, (i+1)*w) are written,
 * which lie below value i + 1. With AVX2 16 bytes of output a step.
 */
void u64_narrow(uint64_t *v, uint64_t n, uint64_t base, unsigned w);

/* The same, one value a step. */
void u64_narrow_scalar(uint64_t *v, uint64_t n, uint64_t base, unsigned w);

/* Whether u64_range and u64_narrow take the AVX2 path on this CPU. */
bool u64_range_simd(void);

#endif
