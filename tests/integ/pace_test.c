/*
 * pace_test.c - admission paced against a sealer that lags (storage/adm.h),
 * against the real daemon: the sealer sleeps before every seal
 * (--test-seal-delay), so open blocks waiting to be sealed pile up in a
 * small budget while exporters post as fast as they are answered. Every
 * export must still be acknowledged (paced, never refused), the records
 * counted exactly, and all of them must be there after a hard kill and a
 * restart (the WAL's directory fsyncs now run on a background thread).
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"

#define VEC_RECORDS 10 /* records in the http-protobuf-logs.pb vector */
#define COPIES 20      /* vector copies per export: 200 records, ~185 KB */
#define CLIENTS 2
#define EXPORTS 40 /* per client, one after another */

/* |n| copies of the logs vector (httpc_vector_repeat). */
static uint8_t *logs_body(int n, size_t *len)
{
    return httpc_vector_repeat("http-protobuf-logs.pb", n, len);
}

struct client {
    int port;
    const uint8_t *body;
    size_t len;
    int ok;         /* answered 200 */
    int other;      /* answered anything else */
    int last_other; /* the last such status (0: none) */
    int no_answer;
};

static void *client_run(void *arg)
{
    struct client *c = arg;
    const char *hdrs[] = {"Content-Type: application/x-protobuf", NULL};
    for (int i = 0; i < EXPORTS; i++) {
        struct http_resp r;
        if (httpc_request(c->port, "POST", "/v1/logs", hdrs, c->body, c->len, 0, &r) < 0) {
            c->no_answer++;
            continue;
        }
        if (r.status == 200) {
            c->ok++;
        } else {
            c->other++;
            c->last_other = r.status;
        }
        http_resp_free(&r);
    }
    return NULL;
}

static double rows_held(const struct daemon *d)
{
    return daemon_metric(d, "miradb_unsealed_rows{signal=\"logs\"}") +
           daemon_metric(d, "miradb_block_rows{signal=\"logs\"}");
}

Test(pace, a_lagging_sealer_paces_admission_never_refuses_and_loses_nothing)
{
    struct daemon d;
    size_t len;
    uint8_t *body = logs_body(COPIES, &len);
    const char *args[] = {"--shards",
                          "1",
                          "--io-threads",
                          "1",
                          "--memory-budget",
                          "32MiB",
                          "--block-target",
                          "2MiB",
                          "--test-seal-delay",
                          "400",
                          NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);

    struct client c[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = (struct client){.port = d.http_port, .body = body, .len = len};
        cr_assert_eq(pthread_create(&th[i], NULL, client_run, &c[i]), 0);
    }
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
    }
    for (int i = 0; i < CLIENTS; i++) {
        cr_expect_eq(c[i].ok, EXPORTS,
                     "client %d: %d acknowledged, %d refused (last %d), %d "
                     "unanswered",
                     i, c[i].ok, c[i].other, c[i].last_other, c[i].no_answer);
    }
    const double want = (double)CLIENTS * EXPORTS * COPIES * VEC_RECORDS;
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\","
                                   "transport=\"http_protobuf\"}"),
                 want);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"overloaded\"}"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_admission_shed_total"), 0);
    /* The sealer lagged: admissions were paced, and the delays they got
     * are accounted (each at most ADM_PACE_MAX_NS, 40 ms). */
    double paced = daemon_metric(&d, "miradb_admission_paced_total");
    double paced_s = daemon_metric(&d, "miradb_admission_paced_seconds_total");
    cr_expect_geq(paced, 1, "no admission was paced (%g)", paced);
    cr_expect_gt(paced_s, 0);
    cr_expect_leq(paced_s, paced * 0.040 + 1e-6, "%g s over %g paced", paced_s, paced);
    /* Every acknowledged row is held, sealed or not. */
    cr_expect_eq(rows_held(&d), want);

    /* A hard kill with seals still queued: the WAL brings back every row. */
    char dir[sizeof(d.data_dir)];
    snprintf(dir, sizeof(dir), "%s", d.data_dir);
    daemon_kill(&d);
    const char *again[] = {"--shards", "1", NULL};
    cr_assert_eq(daemon_start(&d, dir, again), 0);
    double held = rows_held(&d);
    for (int i = 0; i < 600 && held != want; i++) {
        usleep(50 * 1000); /* a block being published is briefly in neither count */
        held = rows_held(&d);
    }
    cr_expect_eq(held, want, "rows after the restart: %g", held);
    cr_expect_eq(daemon_stop(&d), 0);
    free(body);
}
