/*
 * jsondec_counts.h - the OTLP/JSON decoder's reader of the usual bucket
 * counts, quoted integers back to back with no blanks ("3","20","0"), read
 * straight from the text into little-endian u64s (used by num_list in
 * proto/jsondec_metrics.c, which reads whatever this leaves with its
 * general loops). Pure functions; any thread.
 */
#ifndef MIRADB_JSONDEC_COUNTS_H
#define MIRADB_JSONDEC_COUNTS_H

#include <stddef.h>
#include <stdint.h>

/*
 * Up to |max| quoted integers of 1-7 digits (no leading zero), each
 * followed by a ',' or, the last, a ']', from the element at s[i] (its
 * '"'; |len| bytes in |s|) into |dst| (8 * |max| bytes writable: any of
 * them may be written, the first 8 * returned ones are the values).
 * Returns how many it read, |*stop| the offset of the ',' or ']' after the
 * last one (unchanged when none); it stops before anything else (a blank,
 * a bare or 8-digit number, an element less than 10 bytes from |len|...)
 * and after |max| or a ']'. One at a time.
 */
uint32_t jdcounts_run(const char *s, size_t len, size_t i, uint8_t *dst, uint32_t max,
                      size_t *stop);

/* The same answer, three counts of 1 or 2 digits at a time by AVX2: only
 * where cpu_avx2() (lib/cpu.h) says so (elsewhere jdcounts_run). */
uint32_t jdcounts_run_avx2(const char *s, size_t len, size_t i, uint8_t *dst, uint32_t max,
                           size_t *stop);

#endif
