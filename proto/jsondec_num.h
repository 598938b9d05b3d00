/*
 * jsondec_num.h - the OTLP/JSON decoder's fast paths for numbers (used by
 * proto/jsondec.c): a 64-bit integer written as plain digits, quoted or
 * bare, and a double written as a JSON number of at most 19 significant
 * digits, each read straight from the text with no copy and no strtod.
 *
 * Each returns false, consuming nothing, when the text is anything else
 * (an exponent on an integer, leading zeros, 20 or more digits, a quoted
 * double, an exponent beyond the exact range...): the caller then takes the
 * general path, which accepts and refuses exactly as before. A true return
 * is always the value the general path would give (for doubles: the
 * correctly rounded one, as strtod gives). Pure functions; any thread.
 */
#ifndef MIRADB_JSONDEC_NUM_H
#define MIRADB_JSONDEC_NUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * An integer at p[0..n): "-"? digits, 1..19 of them, no leading zero, bare
 * (followed by anything but a digit, '.', 'e' or 'E') or in quotes with
 * nothing else inside. Sets |*neg|, |*mag| and |*used| (bytes read, quotes
 * included).
 */
bool jdnum_int(const char *p, size_t n, bool *neg, uint64_t *mag, size_t *used);

/*
 * A bare JSON number at p[0..n) with at most 19 significant digits whose
 * value is m * 10^e with -19 <= e <= 19 (after folding in the exponent):
 * its nearest double (ties to even) in |*out|, |*used| its length.
 */
bool jdnum_f64(const char *p, size_t n, double *out, size_t *used);

/* The double nearest to m * 10^e (ties to even); -19 <= e <= 19. */
double jdnum_dec_to_f64(uint64_t m, int e);

/* |nb| bytes from the 2 * |nb| hex digits (any case) at |p|; false, with
 * |dst| unspecified, when one is not a hex digit. */
bool jdnum_hex(uint8_t *dst, const char *p, size_t nb);

#endif
