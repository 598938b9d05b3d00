/*
 * ascii.h - how far a text runs in ASCII: the bulk of an OTLP/JSON body,
 * which its UTF-8 check skips this way before looking at a byte at or
 * above 0x80 one sequence at a time. With AVX2 (checked at run time) 128
 * bytes a step, else 64 by SSE2 (or 8 by words off x86-64); the answer is
 * the same either way. No allocation; callable from any thread.
 */
#ifndef MIRADB_LIB_ASCII_H
#define MIRADB_LIB_ASCII_H

#include <stddef.h>
#include <stdint.h>

/* The length of the longest prefix of s[0, n) whose bytes are all below
 * 0x80: the offset of the first byte at or above it, or |n|. */
size_t ascii_span(const uint8_t *s, size_t n);

/* The same, without the AVX2 path: the reference ascii_span is tested
 * against. */
size_t ascii_span_base(const uint8_t *s, size_t n);

#endif
