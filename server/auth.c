/*
 * auth.c - token files and the constant-time check (auth.h).
 *
 * Each class has a set of SHA-256 digests, replaced whole on reload under
 * a rwlock (checks take it shared). Hashing first gives every comparison
 * the same 32-byte length whatever the presented token's length is, and
 * the loop over the set never exits early.
 */
#include "server/auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "lib/base64.h"
#include "server/config.h"

#define DIGEST_LEN 32
#define TOKEN_MAX 4096 /* longest header value looked at */

struct tokset {
    size_t n;
    uint8_t (*d)[DIGEST_LEN];
};

static struct {
    pthread_rwlock_t lock;
    char file[2][512]; /* by enum auth_class; "" = not required */
    struct tokset set[2];
} g = {.lock = PTHREAD_RWLOCK_INITIALIZER};

static _Atomic uint64_t refused[2][3]; /* [class][enum auth_result] */

static const char *const class_names[2] = {"ingest", "query"};

static int digest(const void *p, size_t n, uint8_t out[DIGEST_LEN])
{
    unsigned int len = 0;
    if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1 || len != DIGEST_LEN) {
        return -EIO;
    }
    return 0;
}

/* Reads |path| into a new set; -EINVAL and |err| when unreadable or empty. */
static int load_file(const char *path, struct tokset *out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    char line[TOKEN_MAX + 2];
    struct tokset s = {0};
    size_t cap = 0;
    int rc = 0;

    if (f == NULL) {
        snprintf(err, errlen, "cannot read token file %s: %s", path, strerror(errno));
        return -EINVAL;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *b = line, *e = line + strlen(line);
        while (b < e && (*b == ' ' || *b == '\t')) {
            b++;
        }
        while (e > b && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) {
            e--;
        }
        if (b == e || *b == '#') {
            continue;
        }
        if (s.n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            void *nd = realloc(s.d, nc * DIGEST_LEN);
            if (nd == NULL) {
                rc = -ENOMEM;
                snprintf(err, errlen, "token file %s: out of memory", path);
                break;
            }
            s.d = nd;
            cap = nc;
        }
        if (digest(b, (size_t)(e - b), s.d[s.n]) < 0) {
            rc = -EIO;
            snprintf(err, errlen, "token file %s: cannot hash", path);
            break;
        }
        s.n++;
    }
    OPENSSL_cleanse(line, sizeof(line));
    fclose(f);
    if (rc == 0 && s.n == 0) {
        snprintf(err, errlen, "token file %s holds no token", path);
        rc = -EINVAL;
    }
    if (rc < 0) {
        free(s.d);
        return -EINVAL;
    }
    *out = s;
    return 0;
}

static int load_class(int k, char *err, size_t errlen)
{
    struct tokset s, old;
    if (g.file[k][0] == '\0') {
        return 0;
    }
    int rc = load_file(g.file[k], &s, err, errlen);
    if (rc < 0) {
        return rc;
    }
    pthread_rwlock_wrlock(&g.lock);
    old = g.set[k];
    g.set[k] = s;
    pthread_rwlock_unlock(&g.lock);
    free(old.d);
    return 0;
}

int auth_init(const struct config *c, char *err, size_t errlen)
{
    snprintf(g.file[AUTH_INGEST], sizeof(g.file[0]), "%s", c->ingest_token_file);
    snprintf(g.file[AUTH_QUERY], sizeof(g.file[0]), "%s", c->query_token_file);
    for (int k = 0; k < 2; k++) {
        int rc = load_class(k, err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

int auth_reload(char *err, size_t errlen)
{
    int first = 0;
    for (int k = 0; k < 2; k++) {
        char e[512];
        int rc = load_class(k, e, sizeof(e));
        if (rc < 0 && first == 0) {
            first = rc;
            snprintf(err, errlen, "%s", e);
        }
    }
    return first;
}

void auth_fini(void)
{
    for (int k = 0; k < 2; k++) {
        free(g.set[k].d);
        g.set[k] = (struct tokset){0};
        g.file[k][0] = '\0';
    }
}

bool auth_required(enum auth_class k)
{
    return g.file[k][0] != '\0';
}

/* Whether |tok| is in class |k|'s set, comparing against every entry. */
static bool known(enum auth_class k, const char *tok, size_t n)
{
    uint8_t d[DIGEST_LEN];
    unsigned hit = 0;
    if (digest(tok, n, d) < 0) {
        return false;
    }
    pthread_rwlock_rdlock(&g.lock);
    const struct tokset *s = &g.set[k];
    for (size_t i = 0; i < s->n; i++) {
        hit |= (unsigned)(CRYPTO_memcmp(d, s->d[i], DIGEST_LEN) == 0);
    }
    pthread_rwlock_unlock(&g.lock);
    OPENSSL_cleanse(d, sizeof(d));
    return hit != 0;
}

/* |len| bytes at |h| start with scheme |lit| (case-insensitive) and a space. */
static bool scheme_is(const char *h, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len > n && strncasecmp(h, lit, n) == 0 && (h[n] == ' ' || h[n] == '\t');
}

static enum auth_result refuse(enum auth_class k, enum auth_result r)
{
    atomic_fetch_add_explicit(&refused[k][r], 1, memory_order_relaxed);
    return r;
}

enum auth_result auth_check(enum auth_class k, const char *h, size_t len, bool *basic)
{
    if (basic != NULL) {
        *basic = false;
    }
    if (!auth_required(k)) {
        return AUTH_OK;
    }
    if (h == NULL) {
        return refuse(k, AUTH_MISSING);
    }
    while (len > 0 && (*h == ' ' || *h == '\t')) {
        h++, len--;
    }
    while (len > 0 && (h[len - 1] == ' ' || h[len - 1] == '\t')) {
        len--;
    }
    if (len > TOKEN_MAX) {
        return refuse(k, AUTH_INVALID);
    }
    bool is_basic = scheme_is(h, len, "Basic");
    if (!is_basic && !scheme_is(h, len, "Bearer")) {
        return refuse(k, AUTH_MISSING);
    }
    if (basic != NULL) {
        *basic = is_basic;
    }
    size_t skip = is_basic ? 5 : 6;
    const char *t = h + skip;
    size_t tn = len - skip;
    while (tn > 0 && (*t == ' ' || *t == '\t')) {
        t++, tn--;
    }
    if (tn == 0) {
        return refuse(k, AUTH_MISSING);
    }
    if (!is_basic) {
        return known(k, t, tn) ? AUTH_OK : refuse(k, AUTH_INVALID);
    }
    /* Basic: base64(user ":" password); the password is the token. */
    uint8_t raw[TOKEN_MAX];
    size_t digits = base64_unpad(t, tn);
    long rn = base64_decoded_len(digits);
    if (rn < 0 || (size_t)rn > sizeof(raw) || base64_decode(raw, t, digits) < 0) {
        return refuse(k, AUTH_INVALID);
    }
    uint8_t *colon = memchr(raw, ':', (size_t)rn);
    if (colon == NULL) {
        OPENSSL_cleanse(raw, (size_t)rn);
        return refuse(k, AUTH_INVALID);
    }
    size_t pn = (size_t)rn - (size_t)(colon + 1 - raw);
    bool ok = pn > 0 && known(k, (const char *)colon + 1, pn);
    OPENSSL_cleanse(raw, (size_t)rn);
    return ok ? AUTH_OK : refuse(k, AUTH_INVALID);
}

const char *auth_message(enum auth_result r)
{
    return r == AUTH_MISSING ? AUTH_MSG_MISSING : AUTH_MSG_INVALID;
}

void auth_metrics_text(struct evbuffer *b)
{
    evbuffer_add_printf(b, "# HELP miradb_auth_refusals_total Requests refused for want of a "
                           "valid token, by token class and reason.\n"
                           "# TYPE miradb_auth_refusals_total counter\n");
    for (int k = 0; k < 2; k++) {
        evbuffer_add_printf(b, "miradb_auth_refusals_total{class=\"%s\",reason=\"missing\"} %llu\n",
                            class_names[k],
                            (unsigned long long)atomic_load(&refused[k][AUTH_MISSING]));
        evbuffer_add_printf(b, "miradb_auth_refusals_total{class=\"%s\",reason=\"invalid\"} %llu\n",
                            class_names[k],
                            (unsigned long long)atomic_load(&refused[k][AUTH_INVALID]));
    }
    evbuffer_add_printf(b, "# HELP miradb_auth_tokens Tokens loaded, by class (absent: no token "
                           "required).\n"
                           "# TYPE miradb_auth_tokens gauge\n");
    pthread_rwlock_rdlock(&g.lock);
    for (int k = 0; k < 2; k++) {
        if (g.file[k][0] != '\0') {
            evbuffer_add_printf(b, "miradb_auth_tokens{class=\"%s\"} %zu\n", class_names[k],
                                g.set[k].n);
        }
    }
    pthread_rwlock_unlock(&g.lock);
}
