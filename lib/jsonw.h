/*
 * jsonw.h - a small streaming JSON writer appending to an evbuffer.
 *
 * The writer tracks commas itself: call jsonw_key before every member of
 * an object, and the value calls in order. Strings are escaped (", \, and
 * control characters; optionally <, > and & as \u003c... as Go does) and
 * any byte sequence that is not valid UTF-8 becomes U+FFFD, so the output
 * is valid JSON whatever the stored data hold. Doubles are written as the
 * shortest decimal that reads back to the same value; NaN and infinities,
 * which JSON cannot carry as numbers, are written as the strings "NaN",
 * "+Inf" and "-Inf" (Prometheus / Loki convention).
 *
 * Nesting is limited to JSONW_MAX_DEPTH, which is deep enough for any
 * AnyValue the decoders accept inside any answer. A begin call past it sets
 * w->err = -E2BIG and writes null in place of the container; everything up
 * to the matching end call is dropped, so the text stays valid JSON (the
 * caller must still refuse it: a part is missing). Memory errors of the evbuffer set
 * w->err = -ENOMEM; the writer keeps going (the caller checks w->err once
 * at the end).
 * Not thread-safe: one writer per thread at a time.
 */
#ifndef MIRADB_LIB_JSONW_H
#define MIRADB_LIB_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;

/*
 * An OTLP/JSON AnyValue costs up to 4 JSON levels per value level
 * ({"kvlistValue":{"values":[{"key":..,"value":{...), and the decoders
 * accept VAL_MAX_DEPTH (storage/val.h, 64) value levels; the rest is room
 * for the envelope around it (an answer's data, streams, records, spans,
 * events...). lib/ sits below storage/, so the number is written out here
 * and the AnyValue encoders (proto/otlpenc.c) assert that it still is
 * 4 * VAL_MAX_DEPTH + 64.
 */
#define JSONW_MAX_DEPTH 320

struct jsonw {
    struct evbuffer *out; /* borrowed */
    int depth;
    int over;       /* begin calls refused past JSONW_MAX_DEPTH, not yet ended */
    int err;        /* 0, -ENOMEM, or -E2BIG (too deep) */
    bool html;      /* escape < > & as \u003c \u003e \u0026 */
    bool after_key; /* the next value completes a member */
    /* bit d: the container at depth d + 1 has a member already */
    uint64_t nonempty[(JSONW_MAX_DEPTH + 63) / 64];
};

void jsonw_init(struct jsonw *w, struct evbuffer *out);

void jsonw_obj_begin(struct jsonw *w);
void jsonw_obj_end(struct jsonw *w);
void jsonw_arr_begin(struct jsonw *w);
void jsonw_arr_end(struct jsonw *w);

/* Member name (escaped like a string). */
void jsonw_key(struct jsonw *w, const char *k);
void jsonw_keyn(struct jsonw *w, const char *k, size_t n);

/* Values. */
void jsonw_str(struct jsonw *w, const char *s, size_t n);
void jsonw_cstr(struct jsonw *w, const char *s); /* NULL writes null */
void jsonw_strf(struct jsonw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jsonw_int(struct jsonw *w, int64_t v);
void jsonw_uint(struct jsonw *w, uint64_t v);
/* A number; NaN/Inf as the strings above. */
void jsonw_double(struct jsonw *w, double v);
/* A double as a JSON string ("2", "0.5", "NaN", "+Inf"): Loki sample values. */
void jsonw_double_str(struct jsonw *w, double v);
/* A uint64 as a JSON string ("1700000000000000000"): ns timestamps. */
void jsonw_uint_str(struct jsonw *w, uint64_t v);
void jsonw_bool(struct jsonw *w, bool v);
void jsonw_null(struct jsonw *w);
/* An already encoded JSON value, written as is. */
void jsonw_raw(struct jsonw *w, const char *json, size_t n);

/* Appends the escaped body of a string (no quotes) to |out|. */
void jsonw_escape(struct evbuffer *out, const char *s, size_t n, bool html);

/* The same escaping into any sink: |put| is called with each piece in
 * order (runs of |s| as they are, escapes, U+FFFD). */
typedef void (*jsonw_put_fn)(void *ctx, const void *p, size_t n);
void jsonw_escape_to(jsonw_put_fn put, void *ctx, const char *s, size_t n, bool html);

/* The shortest decimal for |v| that reads back exactly ("2", "0.1",
 * "1e+21", "NaN", "+Inf", "-Inf"); NUL-terminated, returns its length.
 * |buf| needs 32 bytes. */
size_t jsonw_fmt_double(char *buf, double v);

#endif
