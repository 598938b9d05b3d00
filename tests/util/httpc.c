/*
 * httpc.c - blocking HTTP/1.1 test client (see httpc.h). Responses are
 * parsed with http-parser, the same library the server uses for requests,
 * but in response mode: it de-chunks bodies and finds where one response
 * ends, which is what pipelining tests need.
 */
#include "tests/util/httpc.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <http_parser.h>

#include "tests/util/tclock.h"

#define HTTPC_TIMEOUT_MS 30000

int httpc_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {HTTPC_TIMEOUT_MS / 1000, 0};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int httpc_send_all(int fd, const void *p, size_t len)
{
    const char *c = p;
    while (len > 0) {
        ssize_t n = send(fd, c, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        c += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Waits until |fd| is readable or the deadline passes; 0 or -1. */
static int wait_readable(int fd, long long deadline)
{
    for (;;) {
        long long left = deadline - tclock_ms();
        if (left <= 0) {
            return -1;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int rc = poll(&pfd, 1, (int)left);
        if (rc > 0) {
            return 0;
        }
        if (rc < 0 && errno != EINTR) {
            return -1;
        }
    }
}

/* ---- response parsing ---- */

struct rparse {
    struct http_resp *out;
    size_t hlen;
    bool last_was_value;
    size_t body_cap;
    bool done;
    bool oom;
};

static void hdr_append(struct rparse *rp, const char *p, size_t n)
{
    size_t room = sizeof(rp->out->headers) - 1 - rp->hlen;
    if (n > room) {
        n = room;
    }
    memcpy(rp->out->headers + rp->hlen, p, n);
    rp->hlen += n;
    rp->out->headers[rp->hlen] = '\0';
}

static int on_hfield(http_parser *p, const char *at, size_t n)
{
    struct rparse *rp = p->data;
    if (rp->last_was_value) {
        hdr_append(rp, "\r\n", 2);
        rp->last_was_value = false;
    }
    hdr_append(rp, at, n);
    return 0;
}

static int on_hvalue(http_parser *p, const char *at, size_t n)
{
    struct rparse *rp = p->data;
    if (!rp->last_was_value) {
        hdr_append(rp, ": ", 2);
        rp->last_was_value = true;
    }
    hdr_append(rp, at, n);
    return 0;
}

static int on_hdone(http_parser *p)
{
    struct rparse *rp = p->data;
    if (rp->last_was_value) {
        hdr_append(rp, "\r\n", 2);
        rp->last_was_value = false;
    }
    rp->out->status = (int)p->status_code;
    return 0;
}

static int on_rbody(http_parser *p, const char *at, size_t n)
{
    struct rparse *rp = p->data;
    struct http_resp *o = rp->out;
    if (o->body_len + n + 1 > rp->body_cap) {
        size_t cap = rp->body_cap ? rp->body_cap : 4096;
        while (cap < o->body_len + n + 1) {
            cap *= 2;
        }
        uint8_t *nb = realloc(o->body, cap);
        if (nb == NULL) {
            rp->oom = true;
            return -1;
        }
        o->body = nb;
        rp->body_cap = cap;
    }
    memcpy(o->body + o->body_len, at, n);
    o->body_len += n;
    o->body[o->body_len] = '\0';
    return 0;
}

static int on_rdone(http_parser *p)
{
    struct rparse *rp = p->data;
    rp->done = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings rsettings = {
    .on_header_field = on_hfield,
    .on_header_value = on_hvalue,
    .on_headers_complete = on_hdone,
    .on_body = on_rbody,
    .on_message_complete = on_rdone,
};

static void resp_reset(struct http_resp *r, struct rparse *rp, http_parser *p)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
    memset(rp, 0, sizeof(*rp));
    rp->out = r;
    http_parser_init(p, HTTP_RESPONSE);
    p->data = rp;
}

/*
 * Feeds |n| bytes at |d|; returns how many were consumed (the rest belongs
 * to the next response), or -1 on a parse error.
 */
static long feed(http_parser *p, const char *d, size_t n)
{
    size_t used = http_parser_execute(p, &rsettings, d, n);
    enum http_errno e = HTTP_PARSER_ERRNO(p);
    if (e == HPE_PAUSED) {
        return (long)used;
    }
    if (e != HPE_OK) {
        return -1;
    }
    return (long)used;
}

int httpc_read_response(int fd, int keep_1xx, char *carry, size_t carry_cap, size_t *carry_len,
                        struct http_resp *out)
{
    http_parser p;
    struct rparse rp;
    char buf[65536];
    long long deadline = tclock_ms() + HTTPC_TIMEOUT_MS;
    bool got_any = false;

    memset(out, 0, sizeof(*out));
    resp_reset(out, &rp, &p);
    /* Bytes left over from the previous response come first. */
    size_t have = *carry_len;
    char *src = carry;
    for (;;) {
        while (have > 0) {
            got_any = true;
            long used = feed(&p, src, have);
            if (used < 0) {
                goto fail;
            }
            src += used;
            have -= (size_t)used;
            if (!rp.done) {
                break; /* all consumed, needs more */
            }
            if (out->status >= 100 && out->status < 200 && !keep_1xx) {
                resp_reset(out, &rp, &p);
                continue;
            }
            /* Keep what follows for the next call. */
            if (have > carry_cap) {
                goto fail;
            }
            memmove(carry, src, have);
            *carry_len = have;
            return 0;
        }
        if (wait_readable(fd, deadline) < 0) {
            goto fail;
        }
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            /* EOF (or reset): ends a close-delimited body, else the
             * response is cut short. */
            if (got_any && !rp.done) {
                feed(&p, NULL, 0);
            }
            if (rp.done) {
                *carry_len = 0;
                return 0;
            }
            *carry_len = 0;
            http_resp_free(out);
            return got_any ? -1 : -2;
        }
        src = buf;
        have = (size_t)n;
    }
fail:
    *carry_len = 0;
    http_resp_free(out);
    return -1;
}

int httpc_wait_closed(int fd)
{
    char buf[65536];
    long long deadline = tclock_ms() + HTTPC_TIMEOUT_MS;
    for (;;) {
        if (wait_readable(fd, deadline) < 0) {
            return 0;
        }
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
            return 1;
        }
    }
}

/* ---- the one-shot request ---- */

struct sbuf {
    char *p;
    size_t len, cap;
};

static int sb_add(struct sbuf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1) {
            cap *= 2;
        }
        char *np = realloc(b->p, cap);
        if (np == NULL) {
            return -1;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static int sb_str(struct sbuf *b, const char *s)
{
    return sb_add(b, s, strlen(s));
}

/* True when "Name: value" |h| names |name| and its value contains |val| (NULL = any). */
static bool hdr_is(const char *h, const char *name, const char *val)
{
    size_t nl = strlen(name);
    if (strncasecmp(h, name, nl) != 0 || h[nl] != ':') {
        return false;
    }
    return val == NULL || strcasestr(h + nl + 1, val) != NULL;
}

int httpc_request(int port, const char *method, const char *path, const char *const *headers,
                  const void *body, size_t len, size_t chunk, struct http_resp *out)
{
    struct sbuf req = {0};
    bool chunked = false, has_cl = false, has_host = false;
    char line[128];
    int rc = -1;

    memset(out, 0, sizeof(*out));
    int fd = httpc_connect(port);
    if (fd < 0) {
        return -1;
    }
    snprintf(line, sizeof(line), " HTTP/1.1\r\n");
    if (sb_str(&req, method) < 0 || sb_str(&req, " ") < 0 || sb_str(&req, path) < 0 ||
        sb_str(&req, line) < 0) {
        goto out;
    }
    for (const char *const *h = headers; h != NULL && *h != NULL; h++) {
        chunked |= hdr_is(*h, "Transfer-Encoding", "chunked");
        has_cl |= hdr_is(*h, "Content-Length", NULL);
        has_host |= hdr_is(*h, "Host", NULL);
        if (sb_str(&req, *h) < 0 || sb_str(&req, "\r\n") < 0) {
            goto out;
        }
    }
    if (!has_host) {
        snprintf(line, sizeof(line), "Host: 127.0.0.1:%d\r\n", port);
        if (sb_str(&req, line) < 0) {
            goto out;
        }
    }
    bool bodyless = body == NULL && len == 0 &&
                    (strcmp(method, "GET") == 0 || strcmp(method, "OPTIONS") == 0 ||
                     strcmp(method, "HEAD") == 0 || strcmp(method, "DELETE") == 0);
    if (!chunked && !has_cl && !bodyless) {
        snprintf(line, sizeof(line), "Content-Length: %zu\r\n", len);
        if (sb_str(&req, line) < 0) {
            goto out;
        }
    }
    if (sb_str(&req, "\r\n") < 0) {
        goto out;
    }
    /* A failed send is not the end: the server may have answered early
     * (413, 415, ...) and stopped reading; read that answer. */
    bool send_ok = httpc_send_all(fd, req.p, req.len) == 0;
    if (send_ok && chunked) {
        const char *b = body;
        size_t left = len;
        size_t piece = chunk ? chunk : len;
        while (send_ok && left > 0) {
            size_t n = left < piece ? left : piece;
            snprintf(line, sizeof(line), "%zx\r\n", n);
            send_ok = httpc_send_all(fd, line, strlen(line)) == 0 &&
                      httpc_send_all(fd, b, n) == 0 && httpc_send_all(fd, "\r\n", 2) == 0;
            b += n;
            left -= n;
        }
        if (send_ok) {
            send_ok = httpc_send_all(fd, "0\r\n\r\n", 5) == 0;
        }
    } else if (send_ok && len > 0) {
        send_ok = httpc_send_all(fd, body, len) == 0;
    }
    (void)send_ok;
    static char carry[65536]; /* anything after the answer is ignored */
    size_t carry_len = 0;
    rc = httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, out) == 0 ? 0 : -1;
out:
    free(req.p);
    close(fd);
    return rc;
}

void http_resp_free(struct http_resp *r)
{
    if (r == NULL) {
        return;
    }
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
}

const char *http_resp_header(const struct http_resp *r, const char *name, char *buf, size_t cap)
{
    size_t nl = strlen(name);
    const char *line = r->headers;
    while (*line != '\0') {
        const char *end = strstr(line, "\r\n");
        size_t ll = end ? (size_t)(end - line) : strlen(line);
        if (ll > nl && line[nl] == ':' && strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl + 1;
            const char *ve = line + ll;
            while (v < ve && (*v == ' ' || *v == '\t')) {
                v++;
            }
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) {
                ve--;
            }
            size_t n = (size_t)(ve - v);
            if (cap == 0) {
                return NULL;
            }
            if (n >= cap) {
                n = cap - 1;
            }
            memcpy(buf, v, n);
            buf[n] = '\0';
            return buf;
        }
        if (end == NULL) {
            break;
        }
        line = end + 2;
    }
    return NULL;
}

uint8_t *httpc_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (f == NULL) {
        return NULL;
    }
    if (fstat(fileno(f), &st) < 0 || st.st_size < 0) {
        fclose(f);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *p = malloc(n + 1);
    if (p == NULL) {
        fclose(f);
        return NULL;
    }
    if (fread(p, 1, n, f) != n) {
        free(p);
        fclose(f);
        return NULL;
    }
    p[n] = 0;
    fclose(f);
    *len = n;
    return p;
}

const char *httpc_vectors_dir(void)
{
    const char *d = getenv("MIRADB_VECTORS");
    return d != NULL && *d != '\0' ? d : "tests/vectors";
}

uint8_t *httpc_vector(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", httpc_vectors_dir(), name);
    uint8_t *p = httpc_read_file(path, len);
    if (p == NULL) {
        fprintf(stderr, "cannot read test vector %s\n", path);
        abort();
    }
    return p;
}

uint8_t *httpc_vector_repeat(const char *name, int n, size_t *len)
{
    size_t vl;
    uint8_t *v = httpc_vector(name, &vl);
    uint8_t *p = malloc(vl * (size_t)n);
    if (p == NULL) {
        fprintf(stderr, "out of memory for %d copies of %s\n", n, name);
        abort();
    }
    for (int i = 0; i < n; i++) {
        memcpy(p + vl * (size_t)i, v, vl);
    }
    free(v);
    *len = vl * (size_t)n;
    return p;
}

void httpc_url_enc(char *out, size_t cap, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s && o + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
}
