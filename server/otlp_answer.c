/*
 * otlp_answer.c - the answer table (see otlp_answer.h).
 */
#include "server/otlp_answer.h"

#include <stdbool.h>

static const struct row {
    int http;
    enum grpc_code grpc;
    bool retry; /* 503 / UNAVAILABLE: a retry delay goes with it */
    const char *message;
} rows[] = {
    [IS_OK] = {200, GRPC_OK, false, ""},
    [IS_MALFORMED] = {400, GRPC_INVALID_ARGUMENT, false, "malformed request"},
    [IS_TOO_LARGE] = {413, GRPC_RESOURCE_EXHAUSTED, false, "request too large"},
    [IS_UNSUPPORTED] = {415, GRPC_UNIMPLEMENTED, false, "unsupported"},
    [IS_OVERLOADED] = {503, GRPC_UNAVAILABLE, true, "server overloaded, retry later"},
    [IS_INTERNAL] = {500, GRPC_INTERNAL, false, "internal error"},
    [IS_SHUTTING_DOWN] = {503, GRPC_UNAVAILABLE, true, "server shutting down"},
    [IS_STORAGE_FAILED] = {503, GRPC_UNAVAILABLE, true, "storage unavailable, retry later"},
    [IS_TIMEOUT] = {408, GRPC_DEADLINE_EXCEEDED, false, "request body timeout"},
};

void otlp_answer_of(const struct ingest_result *res, struct otlp_answer *out)
{
    const struct row *r = &rows[IS_INTERNAL];
    if ((unsigned)res->status < sizeof(rows) / sizeof(rows[0]) && rows[res->status].http != 0) {
        r = &rows[res->status];
    }
    out->http_status = r->http;
    out->grpc_code = r->grpc;
    out->retry_after_s = !r->retry ? 0 : res->retry_after_s > 0 ? res->retry_after_s : 1;
    out->message = res->message[0] != '\0' ? res->message : r->message;
}

long otlp_answer_export(enum otlp_fmt f, enum signal s, const struct ingest_result *res,
                        uint8_t *out, size_t cap)
{
    return resp_export(f, s, res->rejected, res->rejected > 0 ? res->message : NULL, out, cap);
}
