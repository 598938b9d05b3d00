/*
 * tls.c - the listeners' TLS contexts and connection I/O (tls.h).
 *
 * CONTEXTS. One SSL_CTX per port (they differ only in the ALPN choice),
 * both built from the same files. A reload builds two new contexts
 * outside the lock and swaps the pointers under it; SSL_new() takes its
 * own reference to the context, so the old contexts live on in the
 * connections that use them and are freed with the last of those.
 *
 * I/O. SSL_set_fd on the non-blocking socket, with read_ahead: one read(2)
 * takes up to TLS_READ_AHEAD bytes, several records, where without it
 * every record cost two reads (header, then body): 9 KB gRPC exports from
 * h2load on one I/O thread ran at 0.54 of the cleartext rate without it,
 * 0.65 with it (median of 3 alternating passes each). Bytes OpenSSL
 * has taken from the socket, decrypted or not, are invisible to the read
 * event: tls_pending() (SSL_has_pending) tells the caller to read again
 * without waiting, which the listeners do whenever they would otherwise
 * wait for the socket (and right after the handshake, whose last flight
 * may carry the first request).
 * Writes take at most one record (16 KiB) from the front of the output
 * evbuffer (made contiguous with evbuffer_pullup, so a retry after
 * SSL_ERROR_WANT_WRITE passes the same bytes again, as OpenSSL requires;
 * ACCEPT_MOVING_WRITE_BUFFER allows the address to differ).
 * SSL_MODE_RELEASE_BUFFERS gives an idle connection's record buffers back.
 */
#include "server/tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "server/config.h"
#include "server/log.h"

#define TLS_WRITE_MAX 16384  /* one record's plaintext */
#define TLS_READ_AHEAD 65536 /* socket bytes one read may take in */

static const char *const fail_names[TLS_FAIL_COUNT] = {
    "timeout",        "closed",          "not_tls",    "version", "alpn",
    "no_client_cert", "bad_client_cert", "peer_alert", "other",
};

static struct {
    bool on;
    uint64_t hs_timeout_ms;
    char cert[512], key[512], ca[512];
    pthread_mutex_t lock; /* guards ctx[] against a reload's swap */
    SSL_CTX *ctx[2];      /* by enum tls_port */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic uint64_t hs_ok[2];
static _Atomic uint64_t hs_fail[TLS_FAIL_COUNT];

/* ALPN wire lists: length-prefixed protocol names. */
static const unsigned char alpn_http[] = "\x08http/1.1";
static const unsigned char alpn_h2[] = "\x02h2";

static int alpn_select(SSL *s, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    const unsigned char *want = arg;
    unsigned char *chosen;
    (void)s;
    /* SSL_select_next_proto falls back to the client's first protocol when
     * none match; only an exact match counts here. */
    if (SSL_select_next_proto(&chosen, outlen, want, (unsigned)(1 + want[0]), in, inlen) !=
        OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_ALERT_FATAL; /* no_application_protocol */
    }
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

static void err_text(char *err, size_t errlen, const char *what, const char *file)
{
    unsigned long e = ERR_get_error();
    char es[256] = "unknown error";
    if (e != 0) {
        ERR_error_string_n(e, es, sizeof(es));
    }
    ERR_clear_error();
    snprintf(err, errlen, "%s %s: %s", what, file, es);
}

/* A context for port |p| from the configured files; NULL and |err| set. */
static SSL_CTX *ctx_build(enum tls_port p, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        snprintf(err, errlen, "cannot create a TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, TLS_READ_AHEAD);
    if (SSL_CTX_use_certificate_chain_file(ctx, g.cert) != 1) {
        err_text(err, errlen, "--tls-cert", g.cert);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, g.key, SSL_FILETYPE_PEM) != 1) {
        err_text(err, errlen, "--tls-key", g.key);
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        snprintf(err, errlen, "--tls-key %s does not match --tls-cert %s", g.key, g.cert);
        goto fail;
    }
    if (g.ca[0] != '\0') {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(g.ca);
        if (names == NULL || SSL_CTX_load_verify_locations(ctx, g.ca, NULL) != 1) {
            if (names != NULL) {
                sk_X509_NAME_pop_free(names, X509_NAME_free);
            }
            err_text(err, errlen, "--tls-client-ca", g.ca);
            goto fail;
        }
        SSL_CTX_set_client_CA_list(ctx, names); /* takes |names| */
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, (void *)(p == TLS_GRPC ? alpn_h2 : alpn_http));
    return ctx;

fail:
    SSL_CTX_free(ctx);
    return NULL;
}

/* Both ports' contexts into |out|; 0 or -EINVAL. */
static int ctx_build_both(SSL_CTX *out[2], char *err, size_t errlen)
{
    out[0] = ctx_build(TLS_HTTP, err, errlen);
    if (out[0] == NULL) {
        return -EINVAL;
    }
    out[1] = ctx_build(TLS_GRPC, err, errlen);
    if (out[1] == NULL) {
        SSL_CTX_free(out[0]);
        return -EINVAL;
    }
    return 0;
}

int tls_init(const struct config *c, char *err, size_t errlen)
{
    g.hs_timeout_ms = c->tls_handshake_timeout_ms;
    bool cert = c->tls_cert[0] != '\0', key = c->tls_key[0] != '\0';
    if (!cert && !key) {
        if (c->tls_client_ca[0] != '\0') {
            snprintf(err, errlen, "--tls-client-ca needs --tls-cert and --tls-key");
            return -EINVAL;
        }
        return 0;
    }
    if (!cert || !key) {
        snprintf(err, errlen, "--tls-cert and --tls-key go together");
        return -EINVAL;
    }
    snprintf(g.cert, sizeof(g.cert), "%s", c->tls_cert);
    snprintf(g.key, sizeof(g.key), "%s", c->tls_key);
    snprintf(g.ca, sizeof(g.ca), "%s", c->tls_client_ca);
    int rc = ctx_build_both(g.ctx, err, errlen);
    if (rc < 0) {
        return rc;
    }
    g.on = true;
    return 0;
}

bool tls_enabled(void)
{
    return g.on;
}

uint64_t tls_handshake_timeout_ms(void)
{
    return g.hs_timeout_ms;
}

int tls_reload(char *err, size_t errlen)
{
    SSL_CTX *fresh[2], *old[2];
    if (!g.on) {
        return 0;
    }
    int rc = ctx_build_both(fresh, err, errlen);
    if (rc < 0) {
        return rc;
    }
    pthread_mutex_lock(&g.lock);
    old[0] = g.ctx[0];
    old[1] = g.ctx[1];
    g.ctx[0] = fresh[0];
    g.ctx[1] = fresh[1];
    pthread_mutex_unlock(&g.lock);
    SSL_CTX_free(old[0]); /* connections still using it hold their own reference */
    SSL_CTX_free(old[1]);
    return 0;
}

void tls_fini(void)
{
    for (int i = 0; i < 2; i++) {
        SSL_CTX_free(g.ctx[i]);
        g.ctx[i] = NULL;
    }
    g.on = false;
}

SSL *tls_new(enum tls_port p, int fd)
{
    pthread_mutex_lock(&g.lock);
    SSL *s = SSL_new(g.ctx[p]);
    pthread_mutex_unlock(&g.lock);
    if (s == NULL) {
        ERR_clear_error();
        return NULL;
    }
    if (SSL_set_fd(s, fd) != 1) {
        ERR_clear_error();
        SSL_free(s);
        return NULL;
    }
    SSL_set_accept_state(s);
    return s;
}

void tls_free(SSL *s)
{
    SSL_free(s);
}

void tls_count_failure(enum tls_fail why)
{
    atomic_fetch_add_explicit(&hs_fail[why], 1, memory_order_relaxed);
}

/* The failure reason of a handshake that ended with SSL_get_error() |se|. */
static enum tls_fail classify(int se)
{
    unsigned long e = ERR_peek_last_error();
    if (e == 0 || se == SSL_ERROR_SYSCALL || se == SSL_ERROR_ZERO_RETURN) {
        return e == 0 ? TLS_FAIL_CLOSED : TLS_FAIL_OTHER;
    }
    if (ERR_GET_LIB(e) != ERR_LIB_SSL) {
        return TLS_FAIL_OTHER;
    }
    int r = ERR_GET_REASON(e);
    switch (r) {
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
    case SSL_R_NO_SHARED_CIPHER:
        return TLS_FAIL_VERSION;
    case SSL_R_NO_APPLICATION_PROTOCOL:
        return TLS_FAIL_ALPN;
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
        return TLS_FAIL_NO_CERT;
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
        return TLS_FAIL_BAD_CERT;
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
        return r == SSL_R_UNEXPECTED_EOF_WHILE_READING ? TLS_FAIL_CLOSED : TLS_FAIL_NOT_TLS;
    default:
        /* alerts the peer sent come back as SSL_AD_REASON_OFFSET + alert */
        return r >= SSL_AD_REASON_OFFSET ? TLS_FAIL_PEER_ALERT : TLS_FAIL_OTHER;
    }
}

int tls_handshake(SSL *s, enum tls_port p)
{
    ERR_clear_error();
    int rc = SSL_do_handshake(s);
    if (rc == 1) {
        atomic_fetch_add_explicit(&hs_ok[p], 1, memory_order_relaxed);
        return TLS_HS_DONE;
    }
    int se = SSL_get_error(s, rc);
    if (se == SSL_ERROR_WANT_READ) {
        return TLS_HS_WANT_READ;
    }
    if (se == SSL_ERROR_WANT_WRITE) {
        return TLS_HS_WANT_WRITE;
    }
    enum tls_fail why = classify(se);
    tls_count_failure(why);
    if (log_min_level <= LOG_DEBUG) {
        char es[256] = "";
        unsigned long e = ERR_peek_last_error();
        if (e != 0) {
            ERR_error_string_n(e, es, sizeof(es));
        }
        log_debug("tls", "event=handshake_failed port=%s reason=%s error=\"%s\"",
                  p == TLS_GRPC ? "grpc" : "http", fail_names[why], es);
    }
    ERR_clear_error();
    return TLS_HS_FAILED;
}

ssize_t tls_read(SSL *s, void *buf, size_t n)
{
    size_t got = 0;
    ERR_clear_error();
    if (SSL_read_ex(s, buf, n, &got) == 1) {
        return (ssize_t)got;
    }
    int se = SSL_get_error(s, 0);
    ERR_clear_error();
    switch (se) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE: /* no renegotiation: only a full socket, retried on the next read */
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN: /* close_notify, or TCP EOF (IGNORE_UNEXPECTED_EOF) */
        return 0;
    default:
        errno = EIO;
        return -1;
    }
}

bool tls_pending(SSL *s)
{
    return SSL_has_pending(s) == 1; /* decrypted, or read ahead and not yet decrypted */
}

ssize_t tls_send(SSL *s, struct evbuffer *b)
{
    size_t n = evbuffer_get_length(b);
    if (n > TLS_WRITE_MAX) {
        n = TLS_WRITE_MAX;
    }
    if (n == 0) {
        return 0;
    }
    unsigned char *p = evbuffer_pullup(b, (ev_ssize_t)n);
    if (p == NULL) {
        errno = EIO;
        return -1;
    }
    size_t w = 0;
    ERR_clear_error();
    if (SSL_write_ex(s, p, n, &w) == 1) {
        evbuffer_drain(b, w);
        return (ssize_t)w;
    }
    int se = SSL_get_error(s, 0);
    ERR_clear_error();
    errno = se == SSL_ERROR_WANT_WRITE || se == SSL_ERROR_WANT_READ ? EAGAIN : EIO;
    return -1;
}

void tls_close_notify(SSL *s)
{
    ERR_clear_error();
    (void)SSL_shutdown(s);
    ERR_clear_error();
}

void tls_metrics_text(struct evbuffer *b)
{
    if (!g.on) {
        return;
    }
    evbuffer_add_printf(b, "# HELP miradb_tls_handshakes_total TLS handshakes completed.\n"
                           "# TYPE miradb_tls_handshakes_total counter\n");
    for (int p = 0; p < 2; p++) {
        evbuffer_add_printf(b, "miradb_tls_handshakes_total{listener=\"%s\"} %llu\n",
                            p == TLS_GRPC ? "grpc" : "http",
                            (unsigned long long)atomic_load(&hs_ok[p]));
    }
    evbuffer_add_printf(b, "# HELP miradb_tls_handshake_failures_total TLS handshakes that failed, "
                           "by reason.\n"
                           "# TYPE miradb_tls_handshake_failures_total counter\n");
    for (int i = 0; i < TLS_FAIL_COUNT; i++) {
        evbuffer_add_printf(b, "miradb_tls_handshake_failures_total{reason=\"%s\"} %llu\n",
                            fail_names[i], (unsigned long long)atomic_load(&hs_fail[i]));
    }
}
