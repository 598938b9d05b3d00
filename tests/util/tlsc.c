/*
 * tlsc.c - the tests' TLS client (tlsc.h).
 */
#include "tests/util/tlsc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

struct tlsc {
    int fd;
    int port;
    SSL_CTX *ctx;
    SSL *ssl;
    char alpn[32];
    char in[65536]; /* read and not yet taken by a response */
    size_t in_len;
};

static void ssl_err(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_get_error();
    char es[256] = "no OpenSSL error";
    if (e != 0) {
        ERR_error_string_n(e, es, sizeof(es));
    }
    ERR_clear_error();
    snprintf(err, errlen, "%s: %s", what, es);
}

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {30, 0};
    if (fd < 0) {
        return -1;
    }
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int tlsc_connect(int port, const struct tlsc_opts *o, struct tlsc **out, char *err, size_t errlen)
{
    struct tlsc *c = calloc(1, sizeof(*c));
    unsigned char wire[128];
    size_t wl = 0;

    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    c->port = port;
    c->fd = -1;
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (c->ctx == NULL) {
        ssl_err(err, errlen, "SSL_CTX_new");
        goto fail;
    }
    if (o->max_version != 0) {
        /* old versions need the lowest security level to be offered at all */
        SSL_CTX_set_security_level(c->ctx, 0);
        SSL_CTX_set_cipher_list(c->ctx, "DEFAULT@SECLEVEL=0");
        SSL_CTX_set_min_proto_version(c->ctx, o->max_version);
        SSL_CTX_set_max_proto_version(c->ctx, o->max_version);
    }
    if (o->ca != NULL) {
        if (SSL_CTX_load_verify_locations(c->ctx, o->ca, NULL) != 1) {
            ssl_err(err, errlen, "load CA");
            goto fail;
        }
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
    }
    if (o->cert != NULL && (SSL_CTX_use_certificate_chain_file(c->ctx, o->cert) != 1 ||
                            SSL_CTX_use_PrivateKey_file(c->ctx, o->key, SSL_FILETYPE_PEM) != 1)) {
        ssl_err(err, errlen, "client certificate");
        goto fail;
    }
    if (o->alpn != NULL) {
        const char *p = o->alpn;
        while (*p != '\0' && wl < sizeof(wire) - 1) {
            const char *comma = strchr(p, ',');
            size_t n = comma ? (size_t)(comma - p) : strlen(p);
            if (wl + 1 + n > sizeof(wire)) {
                break;
            }
            wire[wl++] = (unsigned char)n;
            memcpy(wire + wl, p, n);
            wl += n;
            p += n + (comma ? 1 : 0);
        }
        SSL_CTX_set_alpn_protos(c->ctx, wire, (unsigned)wl);
    }
    c->fd = tcp_connect(port);
    if (c->fd < 0) {
        snprintf(err, errlen, "connect failed");
        goto fail;
    }
    c->ssl = SSL_new(c->ctx);
    if (c->ssl == NULL) {
        ssl_err(err, errlen, "SSL_new");
        goto fail;
    }
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_tlsext_host_name(c->ssl, "localhost");
    SSL_set1_host(c->ssl, "localhost");
    if (SSL_connect(c->ssl) != 1) {
        ssl_err(err, errlen, "handshake");
        goto fail;
    }
    const unsigned char *a;
    unsigned al = 0;
    SSL_get0_alpn_selected(c->ssl, &a, &al);
    if (al > 0 && al < sizeof(c->alpn)) {
        memcpy(c->alpn, a, al);
        c->alpn[al] = '\0';
    }
    *out = c;
    return 0;

fail:
    tlsc_free(c);
    return -1;
}

void tlsc_free(struct tlsc *c)
{
    if (c == NULL) {
        return;
    }
    SSL_free(c->ssl);
    SSL_CTX_free(c->ctx);
    if (c->fd >= 0) {
        close(c->fd);
    }
    free(c);
}

long tlsc_peer_serial(const struct tlsc *c)
{
    X509 *x = SSL_get1_peer_certificate(c->ssl);
    long v = -1;
    if (x != NULL) {
        v = ASN1_INTEGER_get(X509_get0_serialNumber(x));
        X509_free(x);
    }
    return v;
}

const char *tlsc_alpn(const struct tlsc *c)
{
    return c->alpn;
}

static int write_all(struct tlsc *c, const void *p, size_t n)
{
    while (n > 0) {
        size_t w = 0;
        if (SSL_write_ex(c->ssl, p, n, &w) != 1) {
            return -1;
        }
        p = (const char *)p + w;
        n -= w;
    }
    return 0;
}

int tlsc_request(struct tlsc *c, const char *method, const char *path, const char *const *headers,
                 const void *body, size_t len, struct http_resp *out)
{
    char head[8192];
    size_t hl = 0;
    int has_host = 0;

    memset(out, 0, sizeof(*out));
    hl += (size_t)snprintf(head + hl, sizeof(head) - hl, "%s %s HTTP/1.1\r\n", method, path);
    for (const char *const *h = headers; h != NULL && *h != NULL; h++) {
        has_host |= strncasecmp(*h, "Host:", 5) == 0;
        hl += (size_t)snprintf(head + hl, sizeof(head) - hl, "%s\r\n", *h);
    }
    if (!has_host) {
        hl += (size_t)snprintf(head + hl, sizeof(head) - hl, "Host: localhost:%d\r\n", c->port);
    }
    if (body != NULL || strcmp(method, "POST") == 0) {
        hl += (size_t)snprintf(head + hl, sizeof(head) - hl, "Content-Length: %zu\r\n", len);
    }
    hl += (size_t)snprintf(head + hl, sizeof(head) - hl, "\r\n");
    if (hl >= sizeof(head) || write_all(c, head, hl) < 0 ||
        (len > 0 && write_all(c, body, len) < 0)) {
        return -1;
    }
    return tlsc_read_response(c, out);
}

int tlsc_send(struct tlsc *c, const void *p, size_t n)
{
    return write_all(c, p, n);
}

/* Reads more into c->in; 0, or -1 (closed, error, timeout, full). */
static int fill(struct tlsc *c)
{
    size_t n = 0;
    if (c->in_len == sizeof(c->in) - 1 ||
        SSL_read_ex(c->ssl, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len, &n) != 1) {
        ERR_clear_error();
        return -1;
    }
    c->in_len += n;
    c->in[c->in_len] = '\0';
    return 0;
}

int tlsc_read_response(struct tlsc *c, struct http_resp *out)
{
    memset(out, 0, sizeof(*out));
    char *end;
    c->in[c->in_len] = '\0';
    while ((end = strstr(c->in, "\r\n\r\n")) == NULL) {
        if (fill(c) < 0) {
            return -1;
        }
    }
    size_t head_len = (size_t)(end + 4 - c->in);
    if (sscanf(c->in, "HTTP/1.%*d %d", &out->status) != 1) {
        return -1;
    }
    char *eol = strstr(c->in, "\r\n");
    size_t hn = (size_t)(end + 2 - (eol + 2));
    if (hn >= sizeof(out->headers)) {
        hn = sizeof(out->headers) - 1;
    }
    memcpy(out->headers, eol + 2, hn);
    out->headers[hn] = '\0';
    char cl[32];
    size_t want =
        http_resp_header(out, "Content-Length", cl, sizeof(cl)) ? strtoul(cl, NULL, 10) : 0;
    while (c->in_len < head_len + want) {
        if (head_len + want >= sizeof(c->in) || fill(c) < 0) {
            return -1;
        }
    }
    out->body = malloc(want + 1);
    if (out->body == NULL) {
        return -1;
    }
    memcpy(out->body, c->in + head_len, want);
    out->body[want] = '\0';
    out->body_len = want;
    c->in_len -= head_len + want;
    memmove(c->in, c->in + head_len + want, c->in_len);
    return 0;
}
