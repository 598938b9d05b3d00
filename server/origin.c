/*
 * origin.c - CORS origins and allowed Host values (origin.h).
 */
#include "server/origin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "server/config.h"

#define ORIGIN_MAX 64
#define HOST_MAX 128
#define NAME_MAX_LEN 256

struct host {
    char name[NAME_MAX_LEN]; /* IPv6 in brackets */
    int port;                /* -1: none given */
};

static struct {
    char origins[ORIGIN_MAX][NAME_MAX_LEN];
    int n_origins;
    bool any_origin;
    struct host hosts[HOST_MAX];
    int n_hosts;
    bool any_host;
    bool explicit_hosts;
    bool have_listener;
    int port;
} g;

static _Atomic uint64_t host_refused;

/* Calls |fn| for each trimmed, non-empty comma-separated item of |list|;
 * -EINVAL for an empty item between commas. */
static int each_item(const char *list, int (*fn)(const char *s, size_t n))
{
    const char *p = list;
    if (*p == '\0') {
        return 0;
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *e = comma ? comma : p + strlen(p);
        const char *b = p;
        while (b < e && (*b == ' ' || *b == '\t')) {
            b++;
        }
        while (e > b && (e[-1] == ' ' || e[-1] == '\t')) {
            e--;
        }
        if (b == e || (size_t)(e - b) >= NAME_MAX_LEN) {
            return -EINVAL;
        }
        int rc = fn(b, (size_t)(e - b));
        if (rc < 0) {
            return rc;
        }
        if (comma == NULL) {
            return 0;
        }
        p = comma + 1;
    }
}

static int add_origin(const char *s, size_t n)
{
    if (n == 1 && *s == '*') {
        g.any_origin = true;
        return 0;
    }
    if (g.n_origins == ORIGIN_MAX) {
        return -E2BIG;
    }
    memcpy(g.origins[g.n_origins], s, n);
    g.origins[g.n_origins][n] = '\0';
    g.n_origins++;
    return 0;
}

/* Splits "name", "name:port", "[v6]" or "[v6]:port"; -1 port when none,
 * -2 when the port is not a number. Returns the name's length. */
static size_t split_host(const char *s, size_t n, int *port)
{
    size_t nl = n;
    *port = -1;
    const char *colon = NULL;
    if (n > 0 && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (rb == NULL) {
            *port = -2;
            return n;
        }
        nl = (size_t)(rb + 1 - s);
        if (nl < n) {
            colon = s[nl] == ':' ? s + nl : NULL;
            if (colon == NULL) {
                *port = -2;
                return nl;
            }
        }
    } else {
        colon = memchr(s, ':', n);
        if (colon != NULL) {
            nl = (size_t)(colon - s);
        }
    }
    if (colon != NULL) {
        const char *d = colon + 1, *e = s + n;
        long v = 0;
        if (d == e || e - d > 5) {
            *port = -2;
            return nl;
        }
        for (; d < e; d++) {
            if (*d < '0' || *d > '9') {
                *port = -2;
                return nl;
            }
            v = v * 10 + (*d - '0');
        }
        *port = v <= 65535 ? (int)v : -2;
    }
    return nl;
}

static int add_host(const char *s, size_t n)
{
    int port;
    if (n == 1 && *s == '*') {
        g.any_host = true;
        return 0;
    }
    size_t nl = split_host(s, n, &port);
    if (port == -2 || nl == 0 || nl >= NAME_MAX_LEN) {
        return -EINVAL;
    }
    if (g.n_hosts == HOST_MAX) {
        return 0; /* the rest would not fit; the ones kept still work */
    }
    memcpy(g.hosts[g.n_hosts].name, s, nl);
    g.hosts[g.n_hosts].name[nl] = '\0';
    g.hosts[g.n_hosts].port = port;
    g.n_hosts++;
    return 0;
}

static void add_host_str(const char *s)
{
    add_host(s, strlen(s));
}

/* The textual address of |sa| as a Host name ("1.2.3.4", "[::1]"). */
static bool addr_name(const struct sockaddr *sa, char *out, size_t cap)
{
    char buf[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)sa;
        return inet_ntop(AF_INET, &in->sin_addr, out, (socklen_t)cap) != NULL;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)sa;
        if (inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf)) == NULL) {
            return false;
        }
        return (size_t)snprintf(out, cap, "[%s]", buf) < cap;
    }
    return false;
}

static bool is_wildcard(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        return ((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr == INADDR_ANY;
    }
    if (sa->sa_family == AF_INET6) {
        return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
    }
    return false;
}

int origin_init(const struct config *c, char *err, size_t errlen)
{
    memset(&g, 0, sizeof(g));
    if (each_item(c->cors_origins, add_origin) < 0) {
        snprintf(err, errlen, "--cors-origins: an empty or overlong entry, or more than %d",
                 ORIGIN_MAX);
        return -EINVAL;
    }
    if (c->allowed_hosts[0] != '\0') {
        g.explicit_hosts = true;
        if (each_item(c->allowed_hosts, add_host) < 0) {
            snprintf(err, errlen, "--allowed-hosts: an empty entry, or a bad port in '%s'",
                     c->allowed_hosts);
            return -EINVAL;
        }
    }
    return 0;
}

void origin_set_listener(const struct sockaddr *sa)
{
    char name[NAME_MAX_LEN];
    if (g.have_listener) {
        return;
    }
    g.have_listener = true;
    if (sa->sa_family == AF_INET) {
        g.port = ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        g.port = ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
    }
    if (g.explicit_hosts) {
        return;
    }
    add_host_str("localhost");
    add_host_str("127.0.0.1");
    add_host_str("[::1]");
    if (gethostname(name, sizeof(name) - 1) == 0) {
        name[sizeof(name) - 1] = '\0';
        add_host_str(name);
    }
    if (!is_wildcard(sa)) {
        if (addr_name(sa, name, sizeof(name))) {
            add_host_str(name);
        }
        return;
    }
    struct ifaddrs *ifs, *i;
    if (getifaddrs(&ifs) != 0) {
        return;
    }
    for (i = ifs; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr != NULL &&
            (i->ifa_addr->sa_family == sa->sa_family ||
             (sa->sa_family == AF_INET6 && i->ifa_addr->sa_family == AF_INET))) {
            if (addr_name(i->ifa_addr, name, sizeof(name))) {
                add_host_str(name);
            }
        }
    }
    freeifaddrs(ifs);
}

void origin_fini(void)
{
    memset(&g, 0, sizeof(g));
}

const char *origin_cors(const char *o)
{
    if (o == NULL || *o == '\0') {
        return NULL;
    }
    if (g.any_origin) {
        return "*";
    }
    for (int i = 0; i < g.n_origins; i++) {
        if (strcmp(o, g.origins[i]) == 0) {
            return o;
        }
    }
    return NULL;
}

bool origin_cors_varies(void)
{
    return g.n_origins > 0 && !g.any_origin;
}

bool origin_host_allowed(const char *h)
{
    int port;
    if (h == NULL || g.any_host) {
        return true;
    }
    size_t n = strlen(h);
    size_t nl = split_host(h, n, &port);
    if (port != -2 && nl > 0) {
        if (nl > 1 && h[nl - 1] == '.') {
            nl--; /* "localhost." is the same name */
        }
        for (int i = 0; i < g.n_hosts; i++) {
            const struct host *e = &g.hosts[i];
            if (strlen(e->name) != nl || strncasecmp(e->name, h, nl) != 0) {
                continue;
            }
            if (e->port >= 0 ? port == e->port : (port == -1 || port == g.port)) {
                return true;
            }
        }
    }
    atomic_fetch_add_explicit(&host_refused, 1, memory_order_relaxed);
    return false;
}

void origin_metrics_text(struct evbuffer *b)
{
    evbuffer_add_printf(b,
                        "# HELP miradb_http_host_refusals_total Query requests refused (403) for "
                        "a Host not in --allowed-hosts.\n"
                        "# TYPE miradb_http_host_refusals_total counter\n"
                        "miradb_http_host_refusals_total %llu\n",
                        (unsigned long long)atomic_load(&host_refused));
}
