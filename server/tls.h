/*
 * tls.h - TLS for both listeners (OpenSSL 3.0): the server contexts built
 * from --tls-cert / --tls-key / --tls-client-ca, their reload on SIGHUP,
 * and the non-blocking per-connection calls the listeners use in place of
 * read(2) and sendmsg(2).
 *
 * The listeners keep their own plain read/write events (no bufferevents:
 * LIBS.md 1's 4 KiB read cap); each connection gets an SSL on its socket
 * (SSL_set_fd) and drives the handshake with tls_handshake() from those
 * events before any HTTP byte is read. TLS 1.2 is the minimum. ALPN: the
 * HTTP port chooses "http/1.1", the gRPC port "h2"; a client that offers
 * ALPN without that protocol fails the handshake (no_application_protocol).
 * A client certificate is required and verified when --tls-client-ca is
 * set (mutual TLS).
 *
 * Handshake outcomes are counted (process-wide atomics, one bump per
 * handshake) and written by tls_metrics_text().
 *
 * Threads: tls_init, tls_reload and tls_fini on the main thread (tls_init
 * before the I/O threads start, tls_fini after they ended); everything
 * else on any thread, for the connection it owns.
 */
#ifndef MIRADB_TLS_H
#define MIRADB_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct config;
struct evbuffer;
struct ssl_st;

enum tls_port {
    TLS_HTTP = 0,
    TLS_GRPC = 1,
};

/* Why a handshake failed; the label on /metrics. */
enum tls_fail {
    TLS_FAIL_TIMEOUT = 0, /* no complete handshake within --tls-handshake-timeout */
    TLS_FAIL_CLOSED,      /* the peer closed (or reset) during the handshake */
    TLS_FAIL_NOT_TLS,     /* plain HTTP or other bytes that are not a TLS record */
    TLS_FAIL_VERSION,     /* below TLS 1.2, or no protocol in common */
    TLS_FAIL_ALPN,        /* ALPN offered without the port's protocol */
    TLS_FAIL_NO_CERT,     /* mutual TLS: the client sent no certificate */
    TLS_FAIL_BAD_CERT,    /* mutual TLS: its certificate did not verify */
    TLS_FAIL_PEER_ALERT,  /* the client aborted with an alert (e.g. it rejected ours) */
    TLS_FAIL_OTHER,
    TLS_FAIL_COUNT,
};

/*
 * Reads |c|'s TLS settings. Without --tls-cert and --tls-key TLS is off and
 * this returns 0 (one of the two without the other is -EINVAL). Otherwise
 * it loads the files and builds both ports' contexts: 0, or -EINVAL with
 * the reason (naming the file) in |err|.
 */
int tls_init(const struct config *c, char *err, size_t errlen);
/* Whether the listeners speak TLS. */
bool tls_enabled(void);
/* --tls-handshake-timeout in ms. */
uint64_t tls_handshake_timeout_ms(void);
/*
 * Loads the certificate, key and client CA again into new contexts and, if
 * that worked, swaps them in for connections accepted from now on (open
 * connections keep the context they started with). On failure the old
 * contexts stay and -EINVAL comes back with the reason in |err|. 0 when
 * TLS is off (nothing to reload).
 */
int tls_reload(char *err, size_t errlen);
/* Frees the contexts (after every connection is gone). */
void tls_fini(void);

/* A server-side SSL for accepted socket |fd| on port |p|, from the current
 * context; returned owned (tls_free), NULL when out of memory. */
struct ssl_st *tls_new(enum tls_port p, int fd);
/* Frees it; NULL is fine. Sends nothing (the caller closes the socket). */
void tls_free(struct ssl_st *s);

/* Return values of tls_handshake. */
#define TLS_HS_DONE 1
#define TLS_HS_WANT_READ 0
#define TLS_HS_WANT_WRITE 2
#define TLS_HS_FAILED (-1)
/*
 * Advances the handshake. TLS_HS_DONE (counted as a success), WANT_READ /
 * WANT_WRITE (call again when the socket is readable / writable), or
 * TLS_HS_FAILED (counted by reason, logged at debug level): close.
 */
int tls_handshake(struct ssl_st *s, enum tls_port p);
/* Counts a handshake that ran out of time (the caller closes). */
void tls_count_failure(enum tls_fail why);

/*
 * As read(2) on the connection: bytes (> 0), 0 at the end of the stream
 * (close_notify, or the peer closed TCP), or -1 with errno EAGAIN (call
 * again when readable) or EIO (a TLS error: close).
 */
ssize_t tls_read(struct ssl_st *s, void *buf, size_t n);
/* Whether bytes wait inside |s|, decrypted or read ahead (the socket will
 * not signal them: read again without waiting). */
bool tls_pending(struct ssl_st *s);
/*
 * Writes the start of |b| (at most one TLS record's worth) and drains what
 * was written: bytes (> 0), or -1 with errno EAGAIN (call again with the
 * same buffer when writable) or EIO.
 */
ssize_t tls_send(struct ssl_st *s, struct evbuffer *b);
/* Sends close_notify if it fits (never waits). */
void tls_close_notify(struct ssl_st *s);

/* Appends the handshake counters in Prometheus text format. Any thread. */
void tls_metrics_text(struct evbuffer *b);

#endif
