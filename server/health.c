/*
 * health.c - `miradb health` (see health.h): one HTTP/1.1 GET /ready on a
 * non-blocking socket with a deadline, over TLS when the daemon's HTTP
 * listener speaks it; only the status line is read.
 *
 * Over TLS the server's certificate is not verified: the probe asks a
 * daemon it was pointed at whether it is ready and sends nothing secret
 * (/ready needs no token), and the certificate names the host clients use,
 * not the loopback address the probe dials. A listener that requires client
 * certificates (--tls-client-ca) refuses the probe's handshake: such a
 * deployment probes with its own client.
 */
#include "server/health.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "server/addr.h"
#include "server/config.h"

#define HEALTH_USAGE                                                                               \
    "usage: miradb health [--http ADDR:PORT | --config FILE] [--tls] [--timeout SECONDS]\n"        \
    "Asks a running daemon's GET /ready on its HTTP listener: --http, else the\n"                  \
    "http-listen of the --config file, else 127.0.0.1:4318 (a wildcard address is\n"               \
    "asked on loopback). Over TLS with --tls, or when the --config file sets\n"                    \
    "tls-cert (the certificate is not verified: nothing secret is sent).\n"                        \
    "--timeout bounds the whole check [5].\n"                                                      \
    "exit status: 0 ready (200), 1 not ready or unreachable, 2 usage or config error.\n"

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for |events| on |fd| until |deadline|; 0 or -ETIMEDOUT / -errno. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0) {
            return -ETIMEDOUT;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n > 0) {
            return 0;
        }
        if (n < 0 && errno != EINTR) {
            return -errno;
        }
    }
}

/* One connection: plain, or TLS when |ssl| is set. */
struct conn {
    int fd;
    SSL *ssl;
};

/* After an SSL call returned |r| <= 0: waits for what OpenSSL asked for
 * (0: call again) or fails (-errno; -EPROTO for a TLS failure). */
static int ssl_wait(struct conn *c, int r, long long deadline)
{
    switch (SSL_get_error(c->ssl, r)) {
    case SSL_ERROR_WANT_READ:
        return wait_fd(c->fd, POLLIN, deadline);
    case SSL_ERROR_WANT_WRITE:
        return wait_fd(c->fd, POLLOUT, deadline);
    case SSL_ERROR_ZERO_RETURN:
        return -ECONNRESET;
    case SSL_ERROR_SYSCALL:
        return errno != 0 ? -errno : -ECONNRESET;
    default:
        return -EPROTO;
    }
}

static int tls_start(struct conn *c, SSL_CTX **ctx, long long deadline)
{
    static const unsigned char alpn[] = "\x08http/1.1";
    *ctx = SSL_CTX_new(TLS_client_method());
    if (*ctx == NULL || SSL_CTX_set_min_proto_version(*ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_alpn_protos(*ctx, alpn, sizeof(alpn) - 1) != 0) {
        return -ENOMEM;
    }
    SSL_CTX_set_verify(*ctx, SSL_VERIFY_NONE, NULL);
    c->ssl = SSL_new(*ctx);
    if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1) {
        return -ENOMEM;
    }
    /* The probe dials an address, not a name: no SNI (RFC 6066 3). */
    for (;;) {
        int r = SSL_connect(c->ssl);
        if (r == 1) {
            return 0;
        }
        int rc = ssl_wait(c, r, deadline);
        if (rc < 0) {
            return rc;
        }
    }
}

/* Writes all |n| bytes; 0 or -errno. */
static int conn_send(struct conn *c, const char *p, size_t n, long long deadline)
{
    for (size_t off = 0; off < n;) {
        ssize_t w;
        if (c->ssl != NULL) {
            int r = SSL_write(c->ssl, p + off, (int)(n - off));
            if (r <= 0) {
                int rc = ssl_wait(c, r, deadline);
                if (rc < 0) {
                    return rc;
                }
                continue;
            }
            w = r;
        } else {
            w = send(c->fd, p + off, n - off, MSG_NOSIGNAL);
            if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                int rc = wait_fd(c->fd, POLLOUT, deadline);
                if (rc < 0) {
                    return rc;
                }
                continue;
            }
            if (w < 0) {
                return -errno;
            }
        }
        off += (size_t)w;
    }
    return 0;
}

/* Reads some bytes; their count (> 0) or -errno (-ECONNRESET at the end). */
static ssize_t conn_recv(struct conn *c, char *p, size_t n, long long deadline)
{
    for (;;) {
        if (c->ssl != NULL) {
            int r = SSL_read(c->ssl, p, (int)n);
            if (r > 0) {
                return r;
            }
            int rc = ssl_wait(c, r, deadline);
            if (rc < 0) {
                return rc;
            }
            continue;
        }
        int rc = wait_fd(c->fd, POLLIN, deadline);
        if (rc < 0) {
            return rc;
        }
        ssize_t r = recv(c->fd, p, n, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            continue;
        }
        if (r <= 0) {
            return r == 0 ? -ECONNRESET : -errno;
        }
        return r;
    }
}

/* GET /ready; the HTTP status (>= 100) or -errno with |what| naming the step. */
static int get_ready(struct sockaddr_storage *ss, socklen_t len, const char *host, bool tls,
                     long long deadline, const char **what)
{
    char buf[512];
    size_t got = 0;
    int rc;
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    *what = "socket";
    if (fd < 0) {
        return -errno;
    }
    struct conn c = {.fd = fd};
    SSL_CTX *ctx = NULL;
    *what = "connect";
    if (connect(fd, (struct sockaddr *)ss, len) < 0) {
        if (errno != EINPROGRESS) {
            rc = -errno;
            goto out;
        }
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        rc = wait_fd(fd, POLLOUT, deadline);
        if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr != 0) {
            rc = -soerr;
        }
        if (rc < 0) {
            goto out;
        }
    }
    if (tls) {
        *what = "complete a TLS handshake";
        rc = tls_start(&c, &ctx, deadline);
        if (rc < 0) {
            goto out;
        }
    }
    *what = "send";
    int n = snprintf(buf, sizeof(buf),
                     "GET /ready HTTP/1.1\r\nHost: %s\r\nUser-Agent: miradb-health\r\n"
                     "Connection: close\r\n\r\n",
                     host);
    rc = conn_send(&c, buf, (size_t)n, deadline);
    if (rc < 0) {
        goto out;
    }
    *what = "read the answer";
    while (memchr(buf, '\n', got) == NULL && got < sizeof(buf) - 1) {
        ssize_t r = conn_recv(&c, buf + got, sizeof(buf) - 1 - got, deadline);
        if (r < 0) {
            rc = (int)r;
            goto out;
        }
        got += (size_t)r;
    }
    buf[got] = '\0';
    int status = 0;
    *what = "parse the status line";
    if (sscanf(buf, "HTTP/1.%*1[01] %3d", &status) != 1 || status < 100 || status > 599) {
        rc = -EPROTO;
        goto out;
    }
    rc = status;
out:
    if (c.ssl != NULL) {
        SSL_free(c.ssl);
    }
    SSL_CTX_free(ctx);
    close(fd);
    return rc;
}

int cli_health(int argc, char **argv)
{
    const char *http = NULL, *file = NULL;
    long timeout_s = 5;
    bool tls = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(HEALTH_USAGE, stdout);
            return 0;
        }
        if (strcmp(a, "--tls") == 0) {
            tls = true;
            continue;
        }
        if (i + 1 >= argc || (strcmp(a, "--http") != 0 && strcmp(a, "--config") != 0 &&
                              strcmp(a, "--timeout") != 0)) {
            fprintf(stderr, "miradb health: %s '%s'\n%s",
                    i + 1 >= argc && a[0] == '-' ? "missing value for" : "unexpected argument", a,
                    HEALTH_USAGE);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--http") == 0) {
            http = v;
        } else if (strcmp(a, "--config") == 0) {
            file = v;
        } else {
            char *end;
            timeout_s = strtol(v, &end, 10);
            if (*end != '\0' || end == v || timeout_s < 1 || timeout_s > 3600) {
                fprintf(stderr, "miradb health: --timeout: '%s' is not 1..3600 seconds\n", v);
                return 2;
            }
        }
    }
    if (http != NULL && file != NULL) {
        fprintf(stderr, "miradb health: --http and --config exclude each other\n");
        return 2;
    }
    static struct config c; /* static: a struct config is a few kilobytes */
    if (http == NULL) {
        char err[1024];
        char *cargv[] = {"serve", "--config", (char *)file, NULL};
        if (config_parse(&c, file != NULL ? 3 : 1, cargv, err, sizeof(err)) != 0) {
            fprintf(stderr, "miradb health: %s\n", err);
            return 2;
        }
        http = c.http_listen;
        tls = tls || c.tls_cert[0] != '\0';
    }
    struct sockaddr_storage ss;
    socklen_t len;
    if (addr_parse(http, &ss, &len) < 0) {
        fprintf(stderr, "miradb health: '%s' is not ADDR:PORT\n", http);
        return 2;
    }
    if (addr_is_any(&ss)) {
        if (ss.ss_family == AF_INET6) {
            ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
        } else {
            ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        }
    }
    char host[INET6_ADDRSTRLEN + 8];
    addr_format(&ss, host, sizeof(host));
    const char *what;
    int rc = get_ready(&ss, len, host, tls, now_ms() + timeout_s * 1000, &what);
    if (rc == 200) {
        printf("ready (%s)\n", host);
        return 0;
    }
    if (rc > 0) {
        fprintf(stderr, "miradb health: %s/ready answered %d: not ready\n", host, rc);
    } else {
        fprintf(stderr, "miradb health: %s: cannot %s: %s\n", host, what, strerror(-rc));
    }
    return 1;
}
