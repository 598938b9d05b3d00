/*
 * shutdown_test.c - SIGTERM under load: HTTP and gRPC exporters keep
 * sending logs (each a fixed number of requests) while the daemon is told
 * to stop. It must exit 0 within --shutdown-timeout (plus slack), and after
 * a restart the data directory (read offline, tests/util/dump.h) holds
 * every record of every export that was answered 200 / OK exactly once;
 * the records of refused or unanswered exports may be there or not, but
 * never twice.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/batch.h"
#include "tests/util/daemon.h"
#include "tests/util/dump.h"
#include "tests/util/h2c.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"

#define LOGS_PATH "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
#define HTTP_CLIENTS 3
#define GRPC_CLIENTS 3
#define CLIENTS (HTTP_CLIENTS + GRPC_CLIENTS)
#define REQS 60 /* requests per client */
#define RECS 4  /* records per request */
#define IDS (CLIENTS * REQS * RECS)

enum outcome { O_NONE = 0, O_ACKED, O_REFUSED, O_UNANSWERED };

struct client {
    int id;
    int port;
    bool grpc;
    uint8_t outcome[REQS];
    atomic_int *acked; /* all clients' acknowledged exports */
};

static uint64_t first_id(int client, int req)
{
    return ((uint64_t)client * REQS + (uint64_t)req) * RECS;
}

static void *http_run(void *arg)
{
    struct client *c = arg;
    const char *hdrs[] = {"Content-Type: application/x-protobuf", NULL};
    for (int i = 0; i < REQS; i++) {
        size_t len;
        uint8_t *body = dump_request(SIG_LOGS, false, first_id(c->id, i), RECS, &len);
        struct http_resp r;
        if (body == NULL) {
            break;
        }
        if (httpc_request(c->port, "POST", "/v1/logs", hdrs, body, len, 0, &r) != 0) {
            c->outcome[i] = O_UNANSWERED;
        } else {
            c->outcome[i] = r.status == 200 ? O_ACKED : O_REFUSED;
            http_resp_free(&r);
        }
        free(body);
        if (c->outcome[i] == O_ACKED) {
            atomic_fetch_add(c->acked, 1);
        }
    }
    return NULL;
}

/* One connection, calls one after another; a new connection when it ends
 * (refused once the listener is gone, and then the client stops). */
static void *grpc_run(void *arg)
{
    struct client *c = arg;
    struct h2c *h = NULL;
    for (int i = 0; i < REQS; i++) {
        if (h == NULL && h2c_connect(c->port, true, &h) != 0) {
            h = NULL;
            break;
        }
        size_t len, fl;
        uint8_t *body = dump_request(SIG_LOGS, false, first_id(c->id, i), RECS, &len);
        uint8_t *frame = body != NULL ? h2c_frame(body, len, false, &fl) : NULL;
        if (frame == NULL) {
            free(body);
            break;
        }
        struct h2c_call call = {.body = frame, .body_len = fl};
        if (h2c_submit(h, LOGS_PATH, NULL, &call) != 0 || h2c_wait(h) != 0 || !call.closed ||
            call.grpc_status < 0) {
            c->outcome[i] = O_UNANSWERED;
        } else {
            c->outcome[i] = call.grpc_status == 0 ? O_ACKED : O_REFUSED;
        }
        if (c->outcome[i] == O_ACKED) {
            atomic_fetch_add(c->acked, 1);
        }
        bool gone = c->outcome[i] == O_UNANSWERED || h2c_goaway(h, NULL);
        h2c_call_free(&call);
        free(frame);
        free(body);
        if (gone) {
            h2c_free(h);
            h = NULL;
        }
    }
    h2c_free(h);
    return NULL;
}

struct seen {
    uint16_t n[IDS];
    uint64_t other;
};

static int count_row(void *ctx, const struct dump_row *r)
{
    struct seen *s = ctx;
    char why[200];
    int64_t id = dump_row_id(r, why, sizeof(why));
    if (id >= 0 && id < IDS) {
        s->n[id]++;
    } else {
        s->other++;
    }
    return 0;
}

Test(shutdown, sigterm_under_load_exits_within_the_timeout_and_keeps_every_acked_export_once)
{
    struct daemon d;
    const char *args[] = {"--shutdown-timeout", "3s", "--shards", "2", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    char data[256];
    snprintf(data, sizeof(data), "%s", d.data_dir);

    atomic_int acked = 0;
    static struct client cl[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        cl[i] = (struct client){.id = i, .grpc = i >= HTTP_CLIENTS, .acked = &acked};
        cl[i].port = cl[i].grpc ? d.grpc_port : d.http_port;
        cr_assert_eq(pthread_create(&th[i], NULL, cl[i].grpc ? grpc_run : http_run, &cl[i]), 0);
    }
    /* SIGTERM in the middle: once a sixth of the exports are acknowledged. */
    long long deadline = tclock_ms() + 60000;
    while (atomic_load(&acked) < CLIENTS * REQS / 6 && tclock_ms() < deadline) {
        tclock_nap_ms(5);
    }
    int at_term = atomic_load(&acked);
    long long t0 = tclock_ms();
    int status = daemon_stop(&d);
    long long took = tclock_ms() - t0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
    }
    cr_expect_eq(status, 0, "exit status %d after SIGTERM under load", status);
    cr_expect_lt(took, 3000 + 5000, "SIGTERM to exit took %lld ms with --shutdown-timeout 3s",
                 took);
    int total = atomic_load(&acked);
    cr_log_info("%d exports acknowledged at SIGTERM, %d in all of %d; exit after %lld ms", at_term,
                total, CLIENTS * REQS, took);
    cr_expect_geq(at_term, CLIENTS * REQS / 6, "only %d exports acknowledged before SIGTERM",
                  at_term);
    cr_expect_lt(total, CLIENTS * REQS, "every export was acknowledged: SIGTERM came too late");

    /* Restart on the same directory (replaying the WAL), stop, read it. */
    const char *restart[] = {"--shards", "2", NULL};
    cr_assert_eq(daemon_start(&d, data, restart), 0);
    cr_expect_eq(daemon_stop(&d), 0);
    static struct seen s;
    memset(&s, 0, sizeof(s));
    struct dump_stats st;
    char err[256];
    cr_assert_eq(dump_data_dir(data, count_row, &s, &st, err, sizeof(err)), 0, "dump: %s", err);
    int lost = 0, dup = 0, acked_reqs = 0;
    for (int c = 0; c < CLIENTS; c++) {
        for (int i = 0; i < REQS; i++) {
            bool ok = cl[c].outcome[i] == O_ACKED;
            acked_reqs += ok;
            for (uint64_t id = first_id(c, i); id < first_id(c, i) + RECS; id++) {
                lost += ok && s.n[id] == 0;
                dup += s.n[id] > 1;
            }
        }
    }
    cr_expect_eq(acked_reqs, total);
    cr_expect_eq(lost, 0, "%d acknowledged records lost", lost);
    cr_expect_eq(dup, 0, "%d records stored twice", dup);
    cr_expect_eq(s.other, 0);
    cr_expect_eq(st.sig[SIG_LOGS - 1].blocks_bad, 0);
}
