/*
 * stats.c - names of the counters' label values (see stats.h).
 */
#include "server/stats.h"

const char *stats_transport_name(enum transport t)
{
    static const char *const names[TR_COUNT] = {"http_protobuf", "http_json", "grpc"};
    return (unsigned)t < TR_COUNT ? names[t] : "?";
}

const char *stats_reject_reason_name(enum reject_reason r)
{
    static const char *const names[RJ_COUNT] = {
        "malformed",  "too_large", "unsupported",   "not_found", "bad_method",
        "overloaded", "internal",  "shutting_down", "storage",   "timeout"};
    return (unsigned)r < RJ_COUNT ? names[r] : "?";
}
