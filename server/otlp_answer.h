/*
 * otlp_answer.h - what an OTLP export is answered, the same for both
 * listeners (http1.c, grpc.c): one table from an ingest result's status to
 * the HTTP status, the gRPC code, the retry delay and the default message,
 * and the success body (Export*ServiceResponse with its partial_success).
 * The error body, a google.rpc.Status, is resp_status() with the code,
 * message and delay found here.
 *
 *   status             HTTP  gRPC                 retry delay
 *   IS_OK              200   OK                   -
 *   IS_MALFORMED       400   INVALID_ARGUMENT     -
 *   IS_TIMEOUT         408   DEADLINE_EXCEEDED    -
 *   IS_TOO_LARGE       413   RESOURCE_EXHAUSTED   -
 *   IS_UNSUPPORTED     415   UNIMPLEMENTED        -
 *   IS_OVERLOADED      503   UNAVAILABLE          result's, at least 1 s
 *   IS_SHUTTING_DOWN   503   UNAVAILABLE          result's, at least 1 s
 *   IS_STORAGE_FAILED  503   UNAVAILABLE          result's, at least 1 s
 *   IS_INTERNAL, else  500   INTERNAL             -
 *
 * A 503 / UNAVAILABLE always carries a delay (Retry-After, RetryInfo):
 * OTLP exporters retry those and drop data on a 500 (ingest.h).
 * Pure functions; any thread.
 */
#ifndef MIRADB_OTLP_ANSWER_H
#define MIRADB_OTLP_ANSWER_H

#include <stddef.h>
#include <stdint.h>

#include "proto/resp.h"
#include "server/ingest.h"
#include "storage/batch.h"

struct otlp_answer {
    int http_status;
    enum grpc_code grpc_code;
    int retry_after_s;   /* > 0: send a retry delay of that many seconds; 0: none */
    const char *message; /* the result's message, or the status's default;
                          * borrowed from the result or static */
};

/* The answer to |res|. */
void otlp_answer_of(const struct ingest_result *res, struct otlp_answer *out);

/* The Export*ServiceResponse of signal |s| in |f| for an IS_OK result:
 * empty, or partial_success when records were rejected. Writes into |out|
 * and returns the length; -E2BIG if |cap| is too small. */
long otlp_answer_export(enum otlp_fmt f, enum signal s, const struct ingest_result *res,
                        uint8_t *out, size_t cap);

#endif
