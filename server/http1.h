/*
 * http1.h - the OTLP/HTTP listener (HTTP/1.1, plus /health, /ready and
 * /metrics) and its routing API.
 *
 * Each I/O thread gets its own SO_REUSEPORT listening socket (main binds
 * them); the listener accepts on it with an evconnlistener on that
 * thread's base and keeps its per-thread state in an array indexed by
 * iot->idx. http1_attach and http1_route_add run before the loops start;
 * http1_quiesce and http1_active on |t|'s thread.
 *
 * Routes live in one table in http1.c. OTLP export routes are handled
 * inside http1.c (admission before the body, see ingest.h); every other
 * route is a handler:
 *
 *   static void h_health(struct http1_req *r)
 *   {
 *       http1_resp_start(r, 200, "text/plain; charset=utf-8");
 *       evbuffer_add(http1_resp_body(r), "ok", 2);
 *       http1_resp_end(r);
 *   }
 *
 * A handler runs on the connection's I/O thread once the whole request
 * (with a body of at most HTTP1_SMALL_BODY_MAX bytes, e.g. a form POST)
 * has been read. It answers at once, or later from the same thread (e.g.
 * after a query worker posted its result back with iot_post). A long
 * answer is streamed: append a piece to http1_resp_body(), call
 * http1_resp_flush() with a |more| callback, append the next piece from
 * that callback, and so on until http1_resp_end(). The connection reads
 * no further request until the answer has ended (pipelined requests are
 * answered in order).
 */
#ifndef MIRADB_HTTP1_H
#define MIRADB_HTTP1_H

#include <stdbool.h>
#include <stddef.h>

struct evbuffer;
struct http1_req;
struct iot;

/* Listens on |fd| (taken) on |t|'s loop. 0 or -errno. */
int http1_attach(struct iot *t, int fd);
/* Stops accepting; idle keep-alive connections are closed, busy ones after
 * their current response. */
void http1_quiesce(struct iot *t);
/* Connections still open on |t|. */
int http1_active(struct iot *t);

/* Largest body a handler route accepts (larger: 413 and close). */
#define HTTP1_SMALL_BODY_MAX (1u << 20)

typedef void (*http1_handler)(struct http1_req *r);
typedef void (*http1_more_cb)(struct http1_req *r, void *arg);

/*
 * Request accessors. Strings are NUL-terminated and borrowed: valid until
 * http1_resp_end() or the abort callback. Path and query are as sent
 * (percent-escapes not decoded); the query is "" when there is none.
 */
const char *http1_req_method(const struct http1_req *r);
const char *http1_req_path(const struct http1_req *r);
const char *http1_req_query(const struct http1_req *r);
/* The first header of that name (case-insensitive), or NULL. */
const char *http1_req_header(const struct http1_req *r, const char *name);
/* The request body; *len = 0 (and a non-NULL pointer) when there is none. */
const void *http1_req_body(const struct http1_req *r, size_t *len);

/*
 * Starts the answer: status and Content-Type (NULL: none). Call once,
 * before anything else below. Content-Length or chunked framing and
 * Connection are added by the listener.
 */
void http1_resp_start(struct http1_req *r, int status, const char *content_type);
/* Adds a header (name and value copied; no CR/LF in them). */
void http1_resp_header(struct http1_req *r, const char *name, const char *value);
/* The body under construction: append with evbuffer_add*() (also
 * evbuffer_add_reference() for large buffers: nothing is copied again). */
struct evbuffer *http1_resp_body(struct http1_req *r);
/*
 * Sends what the body holds so far (the first call sends the headers with
 * Transfer-Encoding: chunked) and calls |more| (on the I/O thread, never
 * from inside this call) once the connection has taken most of it, so the
 * handler can produce the next piece. |more| may be NULL when the handler
 * produces the rest on its own schedule.
 */
void http1_resp_flush(struct http1_req *r, http1_more_cb more, void *arg);
/* Ends the answer; |r| is invalid afterwards. Without a prior flush the
 * answer goes out whole, with a Content-Length. */
void http1_resp_end(struct http1_req *r);
/*
 * Ends a streamed answer that failed after a flush: what the body holds is
 * dropped and the connection closes without the last chunk, so the client
 * sees an incomplete answer rather than a short one that looks whole (over
 * HTTP/1.0, where the close ends the body, that cannot be told apart).
 * Before any flush it sends a 500 without a body instead. |r| is invalid
 * afterwards.
 */
void http1_resp_abort(struct http1_req *r);
/* For a handler that answers later: |fn| runs if the connection closes
 * first (then |r| is invalid and no http1_resp_* call may follow). */
void http1_req_on_abort(struct http1_req *r, void (*fn)(void *arg), void *arg);

/*
 * After every I/O loop has ended (iot_stop_and_join) and before iot_fini:
 * closes the connections still open (grace period ran out) and frees the
 * listeners, so nothing leaks at exit.
 */
void http1_fini(void);

/*
 * Adds a route answered by |fn| for GET and/or POST (a form body arrives as
 * the small body). |path| must stay valid (a literal); with |prefix| it
 * matches every path that starts with it ("/api/traces/"). Call before the
 * I/O threads start. 0, or -ENOSPC when the table is full.
 */
int http1_route_add(const char *path, bool prefix, bool get, bool post, http1_handler fn);
/*
 * The same for a GET route whose answers hold no data (the web UI's static
 * files): no token is asked for, so a browser can load the page that then
 * asks for the token; the --allowed-hosts check still applies.
 */
int http1_route_add_open(const char *path, bool prefix, http1_handler fn);

#endif
