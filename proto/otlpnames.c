/*
 * otlpnames.c - the OTLP enum names of otlpnames.h.
 */
#include "proto/otlpnames.h"

const char *const otlp_span_kind_names[OTLP_SPAN_KINDS] = {
    "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",      "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER",
};

const char *const otlp_status_names[OTLP_STATUS_CODES] = {
    "STATUS_CODE_UNSET",
    "STATUS_CODE_OK",
    "STATUS_CODE_ERROR",
};
