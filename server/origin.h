/*
 * origin.h - what the HTTP listener tells browsers: CORS (--cors-origins)
 * and the Host check against DNS rebinding (--allowed-hosts).
 *
 * CORS is off by default: Access-Control-Allow-Origin is sent only to a
 * request whose Origin is listed exactly (or when "*" is listed, as "*").
 *
 * Hosts: an entry without a port matches a Host of that name with no port
 * or with the listener's port; an entry with a port matches exactly; names
 * compare case-insensitively, "*" matches any Host. Without
 * --allowed-hosts the list is the listener's address (every local
 * interface address when it listens on a wildcard), localhost, 127.0.0.1,
 * [::1] and the machine's host name. A request without Host (HTTP/1.0) is
 * not a browser's and passes.
 *
 * Threads: origin_init and origin_set_listener on the main thread before
 * the I/O threads start; the checks on any thread.
 */
#ifndef MIRADB_ORIGIN_H
#define MIRADB_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct evbuffer;
struct sockaddr;

/* Keeps |c|'s lists. 0, or -EINVAL with |err| (an empty entry). */
int origin_init(const struct config *c, char *err, size_t errlen);
/* The HTTP listener's bound address: its port, and (for the default host
 * list) its address. Called once per listening socket; the first counts. */
void origin_set_listener(const struct sockaddr *sa);
void origin_fini(void);

/* The Access-Control-Allow-Origin value for request Origin |o| (NULL:
 * absent), or NULL when it gets none. Borrowed: |o| itself or "*". */
const char *origin_cors(const char *o);
/* Whether answers depend on the request's Origin (a list without "*"):
 * then they carry Vary: Origin, allowed or not, so no cache hands one
 * origin's answer to another. */
bool origin_cors_varies(void);
/* Whether Host |h| (NULL: absent) may be answered by the query routes. A
 * refusal is counted. */
bool origin_host_allowed(const char *h);

/* Appends the Host refusal counter in Prometheus text format. */
void origin_metrics_text(struct evbuffer *b);

#endif
