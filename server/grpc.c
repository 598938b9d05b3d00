/*
 * grpc.c - the OTLP/gRPC listener (HTTP/2 cleartext with nghttp2).
 *
 * Compiling skeleton: accepts nothing yet; the implementation follows.
 */
#include "server/listen.h"

#include <unistd.h>

#include "server/iot.h"

int grpc_attach(struct iot *t, int fd)
{
    (void)t;
    close(fd);
    return 0;
}

void grpc_quiesce(struct iot *t)
{
    (void)t;
}

int grpc_active(struct iot *t)
{
    (void)t;
    return 0;
}
