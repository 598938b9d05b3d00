/*
 * httpc.h - a blocking HTTP/1.1 client on raw sockets, for exact control in
 * the integration tests (what is sent, how, and what comes back). Loopback
 * only (127.0.0.1); every call has a 30 s deadline.
 */
#ifndef MIRADB_TEST_HTTPC_H
#define MIRADB_TEST_HTTPC_H

#include <stddef.h>
#include <stdint.h>

struct http_resp {
    int status;
    char headers[16384]; /* the response's header lines, "Name: value\r\n" each */
    uint8_t *body;       /* returned owned (http_resp_free); de-chunked; NUL after body_len */
    size_t body_len;
};

/*
 * One request on a fresh connection to 127.0.0.1:|port|, closed after the
 * answer. |headers|: NULL-terminated "Name: value" strings (may be NULL).
 * Sends Content-Length unless a header says "Transfer-Encoding: chunked"
 * (then the body is sent chunked in pieces of |chunk| bytes, 0 = one chunk)
 * or the caller gave its own Content-Length; a GET/OPTIONS with no body
 * gets none. 1xx answers are skipped. A send that fails because the server
 * answered early (413 before the body) still reads that answer.
 * Returns 0 or -1 (connect/IO error or timeout of 30 s).
 */
int httpc_request(int port, const char *method, const char *path, const char *const *headers,
                  const void *body, size_t len, size_t chunk, struct http_resp *out);
void http_resp_free(struct http_resp *r);
/* Case-insensitive header lookup; copies the value into buf; NULL when absent. */
const char *http_resp_header(const struct http_resp *r, const char *name, char *buf, size_t cap);
/* Percent-encodes |s| for a query string (unreserved characters kept) into
 * |out| of |cap| bytes, NUL-terminated; a |s| too long is cut. */
void httpc_url_enc(char *out, size_t cap, const char *s);
/* Reads a whole file (test vectors); returns malloc'd bytes or NULL. */
uint8_t *httpc_read_file(const char *path, size_t *len);

/* ---- lower-level pieces, for tests that script a connection by hand ---- */

/* A blocking TCP connection to 127.0.0.1:|port|; the fd, or -1. */
int httpc_connect(int port);
/* Writes all of |p|; 0 or -1. */
int httpc_send_all(int fd, const void *p, size_t len);
/*
 * Reads one response from |fd| (skipping 1xx unless |keep_1xx|). Bytes read
 * past it are kept in |carry| (caller-owned, start empty, *carry_len = 0)
 * for the next call, so pipelined answers can be read one by one.
 * Returns 0; -1 on IO error, timeout or a malformed response; -2 when the
 * server closed the connection before any byte of a response.
 */
int httpc_read_response(int fd, int keep_1xx, char *carry, size_t carry_cap, size_t *carry_len,
                        struct http_resp *out);
/* True once the server has closed |fd| (reads EOF or reset within 30 s,
 * discarding anything else that arrives). */
int httpc_wait_closed(int fd);
/* The vectors folder: $MIRADB_VECTORS, or "tests/vectors". */
const char *httpc_vectors_dir(void);
/* The bytes of vector |name| in that folder (malloc'd; the caller frees
 * them) and their length; a vector that cannot be read aborts the test. */
uint8_t *httpc_vector(const char *name, size_t *len);
/* |n| copies of vector |name| back to back (malloc'd), *len bytes: for a
 * protobuf export still one valid request, since protobuf merges the
 * repeated fields of concatenated messages. Aborts the test as above. */
uint8_t *httpc_vector_repeat(const char *name, int n, size_t *len);

#endif
