/*
 * manifest.h - checks a decoded batch against a test-vector manifest.
 *
 * tests/vectors/manifests/<protocol>.json lists, record by record, what the
 * OpenTelemetry JS exporters sent (tests/vectors/README.md). Both decoders'
 * tests decode a vector and call manifest_check(), which criterion-asserts
 * that every field the manifest names came out of the decoder with the exact
 * value, and that the record counts match.
 *
 * CANONICAL FORM (what a manifest holds; hand-written expectations use it too)
 *   ids        lowercase or uppercase hex; "" = absent (has_* false / zeros)
 *   times      decimal strings of nanoseconds (JSON integers also accepted)
 *   AnyValue   {"string": s} {"int": "decimal"} {"double": number | "NaN" |
 *              "Infinity" | "-Infinity"} {"bool": b} {"bytes": "hex"}
 *              {"array": [AnyValue...]} {"kvlist": {key: AnyValue, ...}}
 *              {} or null = empty value
 *   attributes an object key -> AnyValue (order not compared; count is)
 * Only the keys present are compared, but the number of records, metrics and
 * points per metric always is, and a list that is present (attributes,
 * events, links, exemplars, buckets, quantiles) is compared whole, its length
 * included. null asserts absence where the row model records presence
 * (histogram "sum"/"min"/"max") and the empty value for a log "body".
 *
 * Document shape: {"resource": {"attributes": {...}, "schemaUrl": s,
 * "droppedAttributesCount": n}, "expected": {"logs": {"records": [...]},
 * "traces": {"spans": [...]}, "metrics": {"metrics": [...]}}}. Each record
 * may carry "scope": {"name", "version", "attributes", "droppedAttributesCount",
 * "schemaUrl"}. Record keys are the OTLP/JSON camelCase names (see manifest.c
 * for the full list, including exemplars and summaries, which the captured
 * vectors lack but hand-written expectations can use).
 *
 * Rows are matched to manifest records by content, not by position: each
 * manifest record must equal one distinct row. A failure names the manifest,
 * the record and every differing field of the closest row.
 *
 * Call only from a criterion test (the checks are cr_expect/cr_assert).
 */
#ifndef MIRADB_TEST_MANIFEST_H
#define MIRADB_TEST_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "storage/batch.h"
#include "storage/val.h"

/* $MIRADB_VECTORS, else "tests/vectors" (relative to the repo root). */
const char *manifest_vectors_dir(void);

/*
 * Reads <vectors dir>/<name> whole; a name ending in ".gz" is gunzipped.
 * Returned owned (free()); asserts on any failure. |len| gets the size.
 */
uint8_t *manifest_load_vector(const char *name, size_t *len);

/*
 * Checks |b| against the manifest for signal |s|. |manifest_json_path| is
 * the manifest file; NULL means <vectors dir>/manifests/<protocol>.json, and
 * a directory means <dir>/<protocol>.json. |protocol| ("grpc", "http-json",
 * "http-protobuf", optionally with "-gzip") must match the manifest's run
 * (when it records one); NULL skips that check.
 */
void manifest_check(const char *manifest_json_path, const char *protocol, enum signal s,
                    const struct batch *b);

/* The same against a parsed document (borrowed); |what| names it in messages. */
void manifest_check_doc(const json_t *doc, const char *what, enum signal s, const struct batch *b);

/*
 * Comparison primitives: true when equal; otherwise false with the first
 * difference, as a short text, in |why| (may be NULL).
 */
bool manifest_anyvalue_eq(const json_t *canon, const struct val *v, char *why, size_t whylen);
/* |count| kv entries in p[0..n) (val.h "attrs") against an attributes object. */
bool manifest_attrs_raw_eq(const json_t *canon, const uint8_t *p, size_t n, uint32_t count,
                           char *why, size_t whylen);
bool manifest_attrs_eq(const json_t *canon, const struct batch *b, struct attrs a, char *why,
                       size_t whylen);

/* Canonical JSON of decoded values, returned owned (json_decref); NULL if malformed. */
json_t *manifest_val_to_json(const struct val *v);
json_t *manifest_attrs_to_json(const uint8_t *p, size_t n, uint32_t count);

#endif
