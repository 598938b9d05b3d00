/*
 * h2c.h - a small HTTP/2 cleartext (prior knowledge) gRPC client for tests,
 * on nghttp2's client session over a blocking socket, so a test controls
 * exactly what is sent (how much of a body, END_STREAM or not, RST_STREAM,
 * an abrupt close) and sees exactly what came back, frame by frame.
 *
 * Not thread-safe; one connection per struct h2c. Every wait is bounded
 * (30 s in all), never a fixed sleep.
 */
#ifndef MIRADB_TEST_H2C_H
#define MIRADB_TEST_H2C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct h2c;

/* One gRPC call (one stream). The caller owns it; h2c_call_free() releases
 * what the response allocated. */
struct h2c_call {
    /* request, set before h2c_submit */
    const uint8_t *body; /* borrowed until the call is closed; NULL: HEADERS with END_STREAM */
    size_t body_len;
    size_t send_limit; /* send at most this many body bytes (SIZE_MAX or 0 = all) */
    bool keep_open;    /* no END_STREAM after the body (or after send_limit) */
    /* progress */
    int32_t id;
    size_t sent;
    bool closed;   /* the stream is closed (answer complete, reset, or connection gone) */
    int close_seq; /* 1 for the first call closed on its connection, 2 for the next... */
    uint32_t close_code;
    bool rst_received;
    uint32_t rst_code;
    /* response */
    int status;      /* :status; 0 = none */
    int grpc_status; /* -1 = absent */
    char grpc_message[1024];
    char details_bin[2048]; /* grpc-status-details-bin; "" = absent */
    char accept_encoding[128];
    char content_type[128];
    int header_frames;             /* response HEADERS frames (headers + trailers) */
    bool first_headers_end_stream; /* Trailers-Only: the first HEADERS ended the stream */
    int data_frames;
    uint8_t *data; /* DATA payload, gRPC framed */
    size_t data_len, data_cap;
};

/*
 * Connects to 127.0.0.1:|port| and sends the preface and SETTINGS. With
 * |wait_settings| it also waits for the server's SETTINGS and acknowledges
 * them, so later streams start with the server's windows; without, the
 * first calls go out at once under the RFC's default windows (the "first
 * flight" a real client sends before it has heard from the server). 0 or -1.
 */
int h2c_connect(int port, bool wait_settings, struct h2c **out);
/* Abrupt close (no GOAWAY) and free. NULL is fine. */
void h2c_free(struct h2c *c);

/*
 * Starts |call| as POST |path| with content-type application/grpc and
 * te: trailers, plus |extra| ("name: value" strings, NULL-terminated, may be
 * NULL). Nothing is written until h2c_wait / h2c_pump. 0 or -1.
 */
int h2c_submit(struct h2c *c, const char *path, const char *const *extra, struct h2c_call *call);
/* Runs the connection until every submitted call is closed. 0; -1 if the
 * connection ended or 30 s passed first. */
int h2c_wait(struct h2c *c);
/* Runs until |call| has sent all it may send (send_limit) or is closed. 0 or -1. */
int h2c_pump(struct h2c *c, struct h2c_call *call);
/* Lets |call| send up to |limit| body bytes, then END_STREAM unless keep_open. */
int h2c_resume(struct h2c *c, struct h2c_call *call, size_t limit, bool keep_open);
/* Resets |call|'s stream with |code| and flushes. 0 or -1. */
int h2c_rst(struct h2c *c, struct h2c_call *call, uint32_t code);
/* True once the server sent GOAWAY; |last_id| gets the last stream id of
 * the latest one (read off the wire, so even a GOAWAY that nghttp2 no
 * longer reports counts). */
bool h2c_goaway(const struct h2c *c, int32_t *last_id);
/* Sends an empty SETTINGS frame and takes what has arrived. 0 or -1. */
int h2c_settings(struct h2c *c);
/* The error code of the latest GOAWAY (0 = NO_ERROR, 11 =
 * ENHANCE_YOUR_CALM); UINT32_MAX when none came. */
uint32_t h2c_goaway_code(const struct h2c *c);
/* Sends a PING (the connection is alive, though no stream sends) and runs
 * the connection for up to |ms| milliseconds, taking what arrives. 0 or
 * -1 (the connection is gone). */
int h2c_ping(struct h2c *c, int ms);
/* Runs until the server closes the connection. 0; -1 after 30 s. */
int h2c_wait_closed(struct h2c *c);

/* Connect, one call, wait, free the connection. 0 or -1. */
int h2c_unary(int port, const char *path, const char *const *extra, const void *body, size_t len,
              struct h2c_call *call);
void h2c_call_free(struct h2c_call *call);

/* Frames a message: 1 flag byte, 4-byte big-endian length, the bytes.
 * Returns malloc'd bytes (*out_len = len + 5). */
uint8_t *h2c_frame(const void *msg, size_t len, bool compressed, size_t *out_len);

#endif
