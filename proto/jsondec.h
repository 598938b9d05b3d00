/*
 * jsondec.h - OTLP/JSON decoder into the row model (proto3 JSON mapping
 * with OTLP's deviations: hex ids, 64-bit integers as strings or numbers,
 * enums as integers or names, "NaN"/"Infinity" doubles, base64 bytes,
 * lowerCamelCase or snake_case keys, unknown keys ignored).
 */
#ifndef MIRADB_JSONDEC_H
#define MIRADB_JSONDEC_H

#include <stddef.h>

#include "storage/arena.h"
#include "storage/batch.h"

/*
 * Appends the request's rows to |out|. Strings in |out| point into memory
 * allocated from |a|, which must outlive |out|; |body| need not.
 * Returns 0; -EPROTO for a body that is not a valid OTLP/JSON request of
 * that signal (with a one-line reason, including the byte offset for
 * syntax errors, in |err|); -ENOMEM (also when |a|'s limit is reached).
 * On failure |out| is restored to what it held before the call.
 * |out|->signal must equal |s| (asserted: a programmer error).
 */
int jsondec_decode(enum signal s, const char *body, size_t len, arena *a, struct batch *out,
                   char *err, size_t errlen);

#endif
