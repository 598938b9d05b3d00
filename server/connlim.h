/*
 * connlim.h - connection caps shared by both listeners: --max-connections
 * (all open connections) and --max-connections-per-client (open
 * connections from one source address). A listener asks at accept and
 * gives the place back when the connection closes; a connection past a
 * cap is refused at once (counted by reason, logged at most once a
 * second). Also the open-connections gauge per listener. Any thread.
 */
#ifndef MIRADB_CONNLIM_H
#define MIRADB_CONNLIM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <event2/buffer.h>

struct config;

enum connlim_listener { CL_HTTP = 0, CL_GRPC = 1, CL_LISTENERS };

/* The address a connection is counted under (its IP, without the port). */
struct connlim_key {
    uint8_t addr[16];
    uint8_t family; /* 4 or 6; 0 = not counted */
};

/*
 * Once, before the listeners accept (repeated calls do nothing): sizes the
 * table from |c| and logs RLIMIT_NOFILE beside --max-connections, raising
 * the soft limit towards the hard one when the cap needs it; warns when
 * the cap still does not fit. 0 or -ENOMEM.
 */
int connlim_init(const struct config *c);
void connlim_fini(void);

/* A connection from |sa| on listener |l|: true and |key| filled when it
 * may stay; false when a cap refuses it (counted and logged; |key| is left
 * uncounted, so releasing it is harmless). */
bool connlim_acquire(enum connlim_listener l, const struct sockaddr *sa, struct connlim_key *key);
/* The connection counted under |key| closed. */
void connlim_release(enum connlim_listener l, struct connlim_key *key);

/* Appends the connection metrics in the Prometheus text format. */
void connlim_metrics_text(struct evbuffer *o);

#endif
