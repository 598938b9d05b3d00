/*
 * resp.c - OTLP response encoders (see resp.h). Skeleton.
 */
#include "proto/resp.h"

#include <errno.h>

long resp_export(enum resp_fmt f, enum signal s, int64_t rejected, const char *msg, uint8_t *out,
                 size_t cap)
{
    (void)f, (void)s, (void)rejected, (void)msg, (void)out, (void)cap;
    return -E2BIG;
}

long resp_status(enum resp_fmt f, enum grpc_code code, const char *msg, int retry_after_s,
                 uint8_t *out, size_t cap)
{
    (void)f, (void)code, (void)msg, (void)retry_after_s, (void)out, (void)cap;
    return -E2BIG;
}
