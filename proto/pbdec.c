/*
 * pbdec.c - hand-written OTLP protobuf decoder (see pbdec.h). Skeleton.
 */
#include "proto/pbdec.h"

#include <errno.h>
#include <stdio.h>

int pbdec_decode(enum signal s, const uint8_t *body, size_t len, struct batch *out, char *err,
                 size_t errlen)
{
    (void)s, (void)body, (void)len, (void)out;
    snprintf(err, errlen, "not implemented");
    return -EPROTO;
}
