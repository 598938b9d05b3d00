/*
 * tlsc.h - a blocking TLS client for the integration tests (OpenSSL), so a
 * test controls the protocol versions, ALPN and client certificate it
 * offers, keeps a connection open across a server reload, and reads the
 * certificate the server presented. Loopback only; every wait is bounded
 * (30 s socket timeouts).
 */
#ifndef MIRADB_TEST_TLSC_H
#define MIRADB_TEST_TLSC_H

#include <stddef.h>

#include "tests/util/httpc.h"

struct tlsc_opts {
    const char *ca;   /* verify the server against this PEM file (NULL: no check) */
    const char *cert; /* client certificate and key (NULL: none) */
    const char *key;
    const char *alpn; /* ALPN protocols, comma-separated ("h2,http/1.1"); NULL: none */
    int max_version;  /* e.g. TLS1_1_VERSION (then the client also allows it); 0: default */
};

struct tlsc;

/* Connects to 127.0.0.1:|port| and completes the handshake. 0, or -1 with
 * OpenSSL's reason in |err|. */
int tlsc_connect(int port, const struct tlsc_opts *o, struct tlsc **out, char *err, size_t errlen);
void tlsc_free(struct tlsc *c);
/* The serial number of the server's certificate; -1 if none. */
long tlsc_peer_serial(const struct tlsc *c);
/* The protocol ALPN chose ("" when none). */
const char *tlsc_alpn(const struct tlsc *c);
/*
 * One HTTP/1.1 request on the connection (kept open: no Connection: close),
 * the answer read by its Content-Length. |headers| as httpc_request (Host
 * added unless given). 0, or -1 (a TLS or I/O error, or the server closed).
 */
int tlsc_request(struct tlsc *c, const char *method, const char *path, const char *const *headers,
                 const void *body, size_t len, struct http_resp *out);
/* Writes |n| raw bytes (a test's own framing: one TLS record per call, up
 * to 16 KiB). 0 or -1. */
int tlsc_send(struct tlsc *c, const void *p, size_t n);
/* Reads the next response (by Content-Length, at most 64 KiB with its head;
 * bytes after it are kept for the next call). 0 or -1. */
int tlsc_read_response(struct tlsc *c, struct http_resp *out);

#endif
