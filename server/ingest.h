/*
 * ingest.h - one export's path from a listener to a shard and back,
 * shared by the OTLP/HTTP and OTLP/gRPC listeners.
 *
 * A listener, on its I/O thread:
 *   1. ingest_req_new() when a request's headers name an Export method;
 *   2. ingest_admit() with what the headers say of the body size; reading
 *      of the body should wait for the callback (admission decides before
 *      the body is read, so a refused request costs no read and no decode);
 *   3. once admitted, ingest_body_append() for each piece of the (still
 *      compressed, if gzip or zstd) body, as it arrives; the whole body must have
 *      come (ingest_finish) within --body-timeout of the admission
 *      callback, or the request fails with IS_TIMEOUT through the
 *      callback and its memory is returned;
 *   4. ingest_finish() at the end of the body: inflate, decode, hand to the
 *      shard; the callback fires once the export is acknowledged or failed;
 *   5. ingest_req_free() when done with it (also to abandon it at any point,
 *      e.g. when the connection drops: a request already in a shard is
 *      freed once the shard hands it back).
 *
 * Callbacks run on the request's I/O thread, from the event loop, never
 * from inside the ingest_* call that caused them. Exactly one callback
 * follows ingest_admit (admitted or refused) and exactly one follows
 * ingest_finish; none after ingest_req_free.
 */
#ifndef MIRADB_INGEST_H
#define MIRADB_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/stats.h"
#include "storage/arena.h"
#include "storage/batch.h"

struct config;
struct iot;
struct ingest_req;

/* What a listener answers. */
enum ingest_status {
    IS_PENDING = 0,   /* no answer yet */
    IS_ADMITTED,      /* after ingest_admit: go on reading the body */
    IS_OK,            /* acknowledged; |rejected| > 0 means partial success */
    IS_MALFORMED,     /* HTTP 400, gRPC INVALID_ARGUMENT */
    IS_TOO_LARGE,     /* HTTP 413, gRPC RESOURCE_EXHAUSTED without RetryInfo */
    IS_UNSUPPORTED,   /* HTTP 415 / 400 for an unknown Content-Encoding, gRPC UNIMPLEMENTED */
    IS_OVERLOADED,    /* HTTP 503 + Retry-After, gRPC UNAVAILABLE + RetryInfo */
    IS_INTERNAL,      /* HTTP 500, gRPC INTERNAL; never for a storage error */
    IS_SHUTTING_DOWN, /* HTTP 503 + Retry-After, gRPC UNAVAILABLE + RetryInfo */
    /* The WAL write or sync (or, under --ack seal, the seal) failed: disk
     * full, I/O error, no file descriptors... Retrying later can succeed:
     * HTTP 503 + Retry-After, gRPC UNAVAILABLE + RetryInfo, never a 500
     * (OTLP exporters drop data on a 500). */
    IS_STORAGE_FAILED,
    IS_TIMEOUT /* HTTP 408, gRPC DEADLINE_EXCEEDED: the body did not arrive in time */
};

struct ingest_result {
    enum ingest_status status;
    uint32_t records;  /* accepted */
    uint32_t rejected; /* partial success count */
    int retry_after_s; /* for IS_OVERLOADED / IS_SHUTTING_DOWN (and storage) */
    char message[256]; /* English, for error bodies and partial_success */
};

typedef void (*ingest_cb)(struct ingest_req *r, void *ctx);

/*
 * Before the I/O threads start, after store_open(): |c| is borrowed until
 * ingest_fini() (ingest reads its limits on every request), so it must
 * outlive the I/O threads.
 */
void ingest_init(const struct config *c);
/* The configuration ingest_init() was given: the listeners read their
 * connection limits (--header-timeout...) from it. */
const struct config *ingest_config(void);
/* After store_close(), once the I/O loops have ended: frees every I/O
 * thread's cached buffers, batches and arenas. */
void ingest_fini(void);
/* The replay hook (store_cfg.replay): decodes one WAL payload with the
 * decoder a live export of that format uses. Any thread. */
int ingest_replay_decode(enum signal sig, enum otlp_fmt fmt, const uint8_t *payload, size_t n,
                         struct batch *scratch, arena *a);

/* Returns NULL when out of memory (answer 503). */
struct ingest_req *ingest_req_new(struct iot *t, enum signal s, enum transport tr, ingest_cb cb,
                                  void *ctx);
/*
 * Asks for admission. |expected_bytes| is the body size when known
 * (Content-Length, gRPC length prefix), or -1. The callback reports
 * IS_ADMITTED, or IS_TOO_LARGE (declared size over --max-request-bytes),
 * IS_OVERLOADED (queue or budget stayed full for --admit-wait) or
 * IS_SHUTTING_DOWN. A declared size up to a 32nd of the budget (3x,
 * with its batch) is charged whole here; a larger one is not charged
 * before its bytes arrive: admission charges for its first 64 KiB and
 * ingest_body_append grows the charge as the body comes.
 */
void ingest_admit(struct ingest_req *r, long expected_bytes);
/*
 * Copies body bytes into the request's charged buffer. Returns 0; -E2BIG
 * once the body passes --max-request-bytes (answer IS_TOO_LARGE; the
 * result is set); -ENOBUFS when the memory budget cannot hold it
 * (IS_OVERLOADED; result set); -EINVAL when the request is no longer
 * reading its body (e.g. IS_TIMEOUT; result set, callback pending).
 */
int ingest_body_append(struct ingest_req *r, const void *p, size_t n);
/* How the body is coded (Content-Encoding, grpc-encoding). */
enum body_coding {
    BODY_IDENTITY = 0,
    BODY_GZIP = 1, /* one or more gzip members */
    BODY_ZSTD = 2, /* one or more zstd frames */
};
/* Ends the body, coded |c|. */
void ingest_finish(struct ingest_req *r, enum otlp_fmt f, enum body_coding c);
/* Fails the request without a shard (e.g. bad gRPC framing): the callback
 * fires with |st| and |msg|. */
void ingest_fail(struct ingest_req *r, enum ingest_status st, const char *msg);

const struct ingest_result *ingest_result(const struct ingest_req *r);
void ingest_req_free(struct ingest_req *r);

/* Counts a request refused before an ingest_req existed (404, 405, 415). */
void ingest_count_rejection(struct iot *t, enum reject_reason why);

#endif
