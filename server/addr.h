/*
 * addr.h - the ADDR:PORT syntax of --grpc-listen and --http-listen.
 */
#ifndef MIRADB_ADDR_H
#define MIRADB_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* "ADDR:PORT" (IPv4, or empty ADDR for 0.0.0.0) or "[V6]:PORT" into |ss|
 * and |len|; port 0..65535. 0 or -EINVAL. */
int addr_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len);

/* Writes |ss| as "ADDR:PORT" or "[V6]:PORT" into |buf| (cap bytes). */
void addr_format(const struct sockaddr_storage *ss, char *buf, size_t cap);

/* True when |ss| is the wildcard address (0.0.0.0 or ::). */
bool addr_is_any(const struct sockaddr_storage *ss);

#endif
