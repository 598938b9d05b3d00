/*
 * resp.h - encoders for what OTLP servers send back: the Export*ServiceResponse
 * (with partial_success) and google.rpc.Status error bodies (with RetryInfo),
 * in protobuf or OTLP/JSON.
 */
#ifndef MIRADB_RESP_H
#define MIRADB_RESP_H

#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"

/* gRPC status codes used by the server (google.rpc.Code). */
enum grpc_code {
    GRPC_OK = 0,
    GRPC_CANCELLED = 1,
    GRPC_UNKNOWN = 2,
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_RESOURCE_EXHAUSTED = 8,
    GRPC_UNIMPLEMENTED = 12,
    GRPC_INTERNAL = 13,
    GRPC_UNAVAILABLE = 14,
    GRPC_UNAUTHENTICATED = 16,
};

/*
 * Export*ServiceResponse for |s|. With rejected == 0 and msg == NULL (or "")
 * it is the empty success message (0 bytes of protobuf, "{}" in JSON);
 * otherwise partial_success carries both.
 * Writes into |out| and returns the length; -E2BIG if |cap| is too small.
 */
long resp_export(enum otlp_fmt f, enum signal s, int64_t rejected, const char *msg, uint8_t *out,
                 size_t cap);

/*
 * google.rpc.Status{code, message, details}. retry_after_s > 0 adds a
 * google.rpc.RetryInfo detail with that delay. Returns length or -E2BIG.
 */
long resp_status(enum otlp_fmt f, enum grpc_code code, const char *msg, int retry_after_s,
                 uint8_t *out, size_t cap);

#endif
