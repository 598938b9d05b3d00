/*
 * base64.h - base64 (RFC 4648): OTLP/JSON bytes and ids (gogo jsonpb
 * writes standard padded base64; the decoder takes either alphabet, padded
 * or not) and gRPC's -bin metadata (unpadded).
 *
 * No allocation; callable from any thread.
 */
#ifndef MIRADB_LIB_BASE64_H
#define MIRADB_LIB_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Characters base64_encode writes for |n| bytes, padded, without the NUL
 * (unpadded needs at most as many). */
#define BASE64_ENCODED_LEN(n) (((size_t)(n) + 2) / 3 * 4)

/* |n| bytes as standard base64 (+ /), '=' padded when |pad|, and a NUL
 * into |out| (BASE64_ENCODED_LEN(n) + 1 bytes); returns the length. */
size_t base64_encode(char *out, const uint8_t *p, size_t n, bool pad);

/* The digits of base64 text |p|[0..n) once up to two trailing '=' are cut. */
size_t base64_unpad(const char *p, size_t n);

/* Bytes that |n| digits (padding cut) decode to; -1 when no base64 text
 * has n digits (n % 4 == 1). */
long base64_decoded_len(size_t n);

/* Decodes |n| digits (padding cut; standard and URL-safe alphabets, which
 * may mix) into base64_decoded_len(n) bytes at |out|: 0, or -EINVAL at a
 * byte that is not a digit. The unused low bits of the last digit are
 * ignored. */
int base64_decode(uint8_t *out, const char *p, size_t n);

#endif
