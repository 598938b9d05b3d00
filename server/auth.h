/*
 * auth.h - bearer tokens for ingest and for query (--ingest-token-file,
 * --query-token-file), checked by both listeners.
 *
 * A token file holds one token a line; blank lines and lines starting with
 * '#' are ignored, spaces, tabs and CR around a token are trimmed. Only the
 * SHA-256 of each token is kept. A presented token is hashed and compared
 * with every known hash by CRYPTO_memcmp, all of them, so neither the
 * token's length nor which entry matched shows in the time taken.
 *
 * A request presents its token as "Authorization: Bearer T", or as the
 * password of "Authorization: Basic base64(user:T)" (any user: Grafana's
 * basic-auth data source setting). Tokens are never logged.
 *
 * Threads: auth_init and auth_reload on the main thread (auth_init before
 * the I/O threads start); auth_check and the counters on any thread.
 */
#ifndef MIRADB_AUTH_H
#define MIRADB_AUTH_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct evbuffer;

enum auth_class {
    AUTH_INGEST = 0, /* OTLP export, HTTP and gRPC */
    AUTH_QUERY = 1,  /* Loki, Tempo, Prometheus APIs and /metrics */
};

enum auth_result {
    AUTH_OK = 0,      /* a known token, or no token file for that class */
    AUTH_MISSING = 1, /* no Authorization, or a scheme other than Bearer / Basic */
    AUTH_INVALID = 2, /* a token that is not in the file (or a malformed header) */
};

/* What clients are told (401 body, grpc-message). */
#define AUTH_MSG_MISSING "missing credentials: send Authorization: Bearer <token>"
#define AUTH_MSG_INVALID "invalid token"
#define AUTH_CHALLENGE_BEARER "Bearer realm=\"miradb\""
#define AUTH_CHALLENGE_BASIC "Basic realm=\"miradb\""

/* Loads the token files of |c|. 0, or -EINVAL with the reason (naming the
 * file) in |err|: unreadable, or no token in it. */
int auth_init(const struct config *c, char *err, size_t errlen);
/* Reads both files again; a class whose file fails keeps its old tokens
 * (and the first failure is returned, -EINVAL with |err|); a class whose
 * file loaded uses the new set for every check from now on. */
int auth_reload(char *err, size_t errlen);
void auth_fini(void);
/* Whether class |k| requires a token. */
bool auth_required(enum auth_class k);
/*
 * Checks the Authorization header value |h| (|len| bytes, not necessarily
 * NUL-terminated; NULL when absent) for class |k|. A refusal is counted.
 * *basic (if |basic|) is set when the request used the Basic scheme.
 */
enum auth_result auth_check(enum auth_class k, const char *h, size_t len, bool *basic);
/* The message for a refusal. */
const char *auth_message(enum auth_result r);

/* Appends the refusal counters and token counts in Prometheus text format. */
void auth_metrics_text(struct evbuffer *b);

#endif
