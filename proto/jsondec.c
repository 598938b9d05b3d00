/*
 * jsondec.c - OTLP/JSON request bodies into the row model (skeleton; the
 * decoder is being written).
 */
#include "proto/jsondec.h"

#include <errno.h>
#include <stdio.h>

int jsondec_decode(enum signal s, const char *body, size_t len, arena *a, struct batch *out,
                   char *err, size_t errlen)
{
    (void)s, (void)body, (void)len, (void)a, (void)out;
    if (err != NULL && errlen != 0) {
        snprintf(err, errlen, "json: decoder not built yet");
    }
    return -EPROTO;
}
