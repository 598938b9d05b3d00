/*
 * budget_test.c - the memory budget against the real daemon: one big valid
 * export must not leave the budget spent once it is sealed, a declared but
 * unsent body must not pin it, and a body that stops arriving is answered
 * (408 / DEADLINE_EXCEEDED) within --body-timeout, its charge returned.
 * Every daemon here runs with a small --memory-budget (64 MiB).
 */
#include <criterion/criterion.h>

#include <libdeflate.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/util/daemon.h"
#include "tests/util/h2c.h"
#include "tests/util/httpc.h"

#define LOGS_PATH "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
#define VEC_RECORDS 10 /* records in each http-protobuf-*.pb vector */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* |n| copies of the logs vector (httpc_vector_repeat), n * 10 records. */
static uint8_t *logs_body(int n, size_t *len)
{
    return httpc_vector_repeat("http-protobuf-logs.pb", n, len);
}

static int post(int port, const char *path, const uint8_t *body, size_t len, bool gzip)
{
    const char *plain[] = {"Content-Type: application/x-protobuf", NULL};
    const char *gz[] = {"Content-Type: application/x-protobuf", "Content-Encoding: gzip", NULL};
    struct http_resp resp;
    cr_assert_eq(httpc_request(port, "POST", path, gzip ? gz : plain, body, len, 0, &resp), 0,
                 "POST %s got no answer", path);
    int status = resp.status;
    http_resp_free(&resp);
    return status;
}

static double in_use(const struct daemon *d)
{
    return daemon_metric(d, "miradb_memory_in_use_bytes");
}

static double cached(const struct daemon *d, const char *kind)
{
    char name[96];
    snprintf(name, sizeof(name), "miradb_ingest_cache_bytes{kind=\"%s\"}", kind);
    return daemon_metric(d, name);
}

/* What ingest's caches keep (charged while kept). */
static double cache_total(const struct daemon *d)
{
    return cached(d, "buffers") + cached(d, "batches");
}

Test(budget, a_big_export_gives_its_memory_back_once_sealed_and_later_exports_succeed)
{
    struct daemon d;
    const char *args[] = {"--memory-budget", "64MiB", "--shards", "1", "--io-threads", "1",
                          "--admit-wait",    "1000",  NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);

    /* About 40 MiB of valid records, gzipped to well under 1 MiB: the kind
     * of export that used to leave twice its block charged for good. */
    size_t plain_len;
    uint8_t *plain = logs_body(4400, &plain_len);
    struct libdeflate_compressor *cmp = libdeflate_alloc_compressor(1);
    cr_assert_not_null(cmp);
    size_t cap = libdeflate_gzip_compress_bound(cmp, plain_len);
    uint8_t *gz = malloc(cap);
    cr_assert_not_null(gz);
    size_t gz_len = libdeflate_gzip_compress(cmp, plain, plain_len, gz, cap);
    libdeflate_free_compressor(cmp);
    free(plain);
    cr_assert_gt(gz_len, 0);
    cr_assert_lt(gz_len, 4u << 20, "gzip body of %zu bytes", gz_len);

    cr_assert_eq(post(d.http_port, "/v1/logs", gz, gz_len, true), 200);
    free(gz);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\","
                                   "transport=\"http_protobuf\"}"),
                 44000);

    /* Its block is far past the block target, so it is sealed at once;
     * after that the budget must hold about what it did at idle (cached
     * open-block chunks, at most a 16th of the budget, and empty blocks). */
    double deadline = now_s() + 20, mem = -1;
    while (now_s() < deadline) {
        mem = in_use(&d);
        if (daemon_metric(&d, "miradb_seals_total") >= 1 && mem >= 0 && mem < (12 << 20)) {
            break;
        }
        usleep(100 * 1000);
    }
    cr_expect_geq(daemon_metric(&d, "miradb_seals_total"), 1);
    cr_expect_lt(mem, 12 << 20, "memory in use %.0f bytes after the big block was sealed", mem);

    /* And every signal takes exports again. */
    static const char *const names[][2] = {
        {"http-protobuf-logs.pb", "/v1/logs"},
        {"http-protobuf-traces.pb", "/v1/traces"},
        {"http-protobuf-metrics.pb", "/v1/metrics"},
    };
    for (int i = 0; i < 3; i++) {
        size_t len;
        uint8_t *body = httpc_vector(names[i][0], &len);
        cr_expect_eq(post(d.http_port, names[i][1], body, len, false), 200, "%s", names[i][1]);
        free(body);
    }
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"overloaded\"}"), 0);
    cr_expect_eq(daemon_stop(&d), 0);
}

#define STALLED_HTTP 20
#define STALLED_CONNS 2
#define STALLED_STREAMS 5
#define DECLARED 18000000u /* 3x this fits under 7/8 of 64 MiB, twice does not */

/* A gRPC message prefix that declares |n| bytes. */
static void prefix(uint8_t p[5], uint32_t n)
{
    p[0] = 0;
    p[1] = (uint8_t)(n >> 24);
    p[2] = (uint8_t)(n >> 16);
    p[3] = (uint8_t)(n >> 8);
    p[4] = (uint8_t)n;
}

Test(budget, declared_but_unsent_bodies_pin_nothing_and_get_408_or_deadline_exceeded)
{
    struct daemon d;
    const char *args[] = {
        "--memory-budget", "64MiB", "--shards", "1", "--io-threads", "1", "--admit-wait", "1000",
        "--body-timeout",  "3s",    NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    double idle = in_use(&d);

    /* HTTP/1: headers declaring 18 MB, three body bytes, then silence. */
    int fds[STALLED_HTTP];
    double sent_at = now_s();
    char head[256];
    snprintf(head, sizeof(head),
             "POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
             "Content-Length: %u\r\n\r\nabc",
             DECLARED);
    for (int i = 0; i < STALLED_HTTP; i++) {
        fds[i] = httpc_connect(d.http_port);
        cr_assert_geq(fds[i], 0);
        cr_assert_eq(httpc_send_all(fds[i], head, strlen(head)), 0);
    }
    /* gRPC: streams whose length prefix declares 18 MB, then only PINGs. */
    struct h2c *h[STALLED_CONNS];
    struct h2c_call calls[STALLED_CONNS][STALLED_STREAMS];
    uint8_t pfx[5];
    prefix(pfx, DECLARED);
    for (int c = 0; c < STALLED_CONNS; c++) {
        cr_assert_eq(h2c_connect(d.grpc_port, true, &h[c]), 0);
        for (int s = 0; s < STALLED_STREAMS; s++) {
            calls[c][s] = (struct h2c_call){.body = pfx, .body_len = 5, .keep_open = true};
            cr_assert_eq(h2c_submit(h[c], LOGS_PATH, NULL, &calls[c][s]), 0);
        }
        for (int s = 0; s < STALLED_STREAMS; s++) {
            cr_assert_eq(h2c_pump(h[c], &calls[c][s]), 0);
        }
        cr_assert_eq(h2c_ping(h[c], 50), 0);
    }

    /* Honest exports of about 1 MB each (3 MB with their batch) still fit:
     * the stalled requests hold their first 64 KiB's worth, not 54 MB. */
    size_t len;
    uint8_t *body = logs_body(110, &len);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(post(d.http_port, "/v1/logs", body, len, false), 200, "honest export %d", i);
    }
    size_t fl;
    uint8_t *frame = h2c_frame(body, len, false, &fl);
    struct h2c_call honest = {.body = frame, .body_len = fl};
    cr_assert_eq(h2c_submit(h[0], LOGS_PATH, NULL, &honest), 0);
    double deadline = now_s() + 10;
    while (!honest.closed && now_s() < deadline) {
        cr_assert_eq(h2c_ping(h[0], 50), 0);
    }
    cr_expect(honest.closed, "the honest gRPC export got no answer");
    cr_expect_eq(honest.grpc_status, 0, "honest gRPC export: grpc-status %d (%s)",
                 honest.grpc_status, honest.grpc_message);
    free(frame);
    free(body);

    /* Every stalled HTTP request is answered 408 within the body deadline
     * (3 s; 10 s allowed), and closed. */
    for (int i = 0; i < STALLED_HTTP; i++) {
        char carry[256];
        size_t carry_len = 0;
        struct http_resp resp;
        int rc = httpc_read_response(fds[i], 0, carry, sizeof(carry), &carry_len, &resp);
        double took = now_s() - sent_at;
        cr_expect_eq(rc, 0, "stalled request %d: no answer (rc %d) after %.1f s", i, rc, took);
        if (rc == 0) {
            cr_expect_eq(resp.status, 408, "stalled request %d: %d", i, resp.status);
            http_resp_free(&resp);
        }
        cr_expect_lt(took, 10.0, "stalled request %d answered after %.1f s", i, took);
        cr_expect(httpc_wait_closed(fds[i]), "stalled request %d: connection left open", i);
        close(fds[i]);
    }
    /* Every stalled stream ends DEADLINE_EXCEEDED though PINGs keep its
     * connection busy. */
    for (int c = 0; c < STALLED_CONNS; c++) {
        deadline = sent_at + 10;
        for (;;) {
            bool all = true;
            for (int s = 0; s < STALLED_STREAMS; s++) {
                all = all && calls[c][s].closed;
            }
            if (all || now_s() > deadline || h2c_ping(h[c], 50) < 0) {
                break;
            }
        }
        for (int s = 0; s < STALLED_STREAMS; s++) {
            struct h2c_call *k = &calls[c][s];
            cr_expect(k->closed, "stalled stream %d/%d still open after %.1f s", c, s,
                      now_s() - sent_at);
            cr_expect_eq(k->grpc_status, 4, "stalled stream %d/%d: grpc-status %d (%s)", c, s,
                         k->grpc_status, k->grpc_message);
            h2c_call_free(k);
        }
        h2c_free(h[c]);
    }
    h2c_call_free(&honest);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"timeout\"}"),
                 STALLED_HTTP + STALLED_CONNS * STALLED_STREAMS);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"overloaded\"}"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\","
                                   "transport=\"http_protobuf\"}"),
                 3 * 1100);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\",transport=\"grpc\"}"),
                 1100);
    /* What the stalled requests held is back: only the open block grew,
     * and the buffers the I/O thread keeps for reuse. */
    double open = daemon_metric(&d, "miradb_open_block_bytes{signal=\"logs\"}");
    double mem = in_use(&d), kept = cache_total(&d);
    cr_expect_leq(mem, idle + open + kept + (1 << 20),
                  "in use %.0f, idle %.0f, open block %.0f, cached %.0f", mem, idle, open, kept);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(budget, a_body_that_stops_arriving_is_answered_408_not_closed_silently)
{
    struct daemon d;
    const char *args[] = {
        "--memory-budget", "64MiB", "--io-threads", "1", "--body-timeout", "1s", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    double idle = in_use(&d);
    size_t len;
    uint8_t *body = httpc_vector("http-protobuf-logs.pb", &len);
    char head[256];
    snprintf(head, sizeof(head),
             "POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
             "Content-Length: %zu\r\n\r\n",
             len);

    int fd = httpc_connect(d.http_port);
    cr_assert_geq(fd, 0);
    double t0 = now_s();
    cr_assert_eq(httpc_send_all(fd, head, strlen(head)), 0);
    cr_assert_eq(httpc_send_all(fd, body, len / 2), 0); /* half the body, then nothing */
    char carry[256];
    size_t carry_len = 0;
    struct http_resp resp;
    cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &resp), 0,
                 "no answer to a stalled body (closed silently?)");
    double took = now_s() - t0;
    cr_expect_eq(resp.status, 408);
    char buf[128];
    cr_expect_str_eq(http_resp_header(&resp, "Content-Type", buf, sizeof(buf)),
                     "application/x-protobuf");
    cr_expect_str_eq(http_resp_header(&resp, "Connection", buf, sizeof(buf)), "close");
    cr_expect_gt(resp.body_len, 2, "a google.rpc.Status body");
    cr_expect_eq(resp.body_len > 1 ? resp.body[0] : 0, 0x08, "Status.code first");
    cr_expect_eq(resp.body_len > 1 ? resp.body[1] : 0, 4, "DEADLINE_EXCEEDED");
    cr_expect_lt(took, 10.0, "answered after %.1f s", took);
    http_resp_free(&resp);
    cr_expect(httpc_wait_closed(fd), "the connection stays open after the 408");
    close(fd);

    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"timeout\"}"), 1);
    /* Its charge is back, but for the body buffer kept for the next request. */
    cr_expect_eq(cached(&d, "buffers"), (double)len);
    cr_expect_eq(in_use(&d), idle + cache_total(&d), "the stalled request's charge is back");
    /* The daemon serves on. */
    cr_expect_eq(post(d.http_port, "/v1/logs", body, len, false), 200);
    free(body);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- an export of usual size waits for room instead of failing halfway ---- */

/* ~544 KiB: 3x that is under a 32nd of 64 MiB, so admission charges it whole. */
#define USUAL_COPIES 60
#define HOLDERS_MAX 40

/* Opens a request declaring all of |body| and sends the first half. */
static int hold(int port, const uint8_t *body, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/x-protobuf\r\nContent-Length: %zu\r\n\r\n",
                     len);
    int fd = httpc_connect(port);
    cr_assert_geq(fd, 0);
    cr_assert_eq(httpc_send_all(fd, head, (size_t)n), 0);
    cr_assert_eq(httpc_send_all(fd, body, len / 2), 0);
    return fd;
}

/* Waits until the budget in use passes |above|; returns what it is then. */
static double in_use_past(const struct daemon *d, double above)
{
    double deadline = now_s() + 5, mem = in_use(d);
    while (mem <= above && now_s() < deadline) {
        usleep(20 * 1000);
        mem = in_use(d);
    }
    cr_assert_gt(mem, above, "the daemon did not admit a held request (in use %.0f)", mem);
    return mem;
}

struct probe {
    int port;
    const uint8_t *body;
    size_t len;
    int status;
};

static void *probe_run(void *arg)
{
    struct probe *p = arg;
    p->status = post(p->port, "/v1/logs", p->body, p->len, false);
    return NULL;
}

Test(budget, an_export_of_usual_size_waits_for_room_instead_of_failing_halfway)
{
    struct daemon d;
    const char *args[] = {
        "--memory-budget", "64MiB", "--shards", "1", "--io-threads", "1", "--admit-wait", "8000",
        "--body-timeout",  "20s",   NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    /* the budget less its reserve (an eighth, and 4 MiB for queries) */
    const double limit = 52.0 * (1 << 20);
    size_t len;
    uint8_t *body = logs_body(USUAL_COPIES, &len);
    const double whole = 3.0 * (double)len; /* the body and its decoded batch */

    /* Requests that sent half their body fill the budget until one more
     * does not fit whole (its first 64 KiB still would). */
    int fds[HOLDERS_MAX], nh = 0;
    double mem = in_use(&d);
    while (mem + whole <= limit) {
        cr_assert_lt(nh, HOLDERS_MAX);
        fds[nh++] = hold(d.http_port, body, len);
        mem = in_use_past(&d, mem + whole / 2);
    }
    cr_assert_leq(mem + 3.0 * (64 << 10), limit, "in use %.0f", mem);
    cr_expect_eq(daemon_metric(&d, "miradb_admission_waits_total"), 0);

    /* One more export: it must wait for room, not be admitted and refused
     * halfway through its body. */
    struct probe p = {d.http_port, body, len, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, probe_run, &p), 0);
    double deadline = now_s() + 5;
    while (daemon_metric(&d, "miradb_admission_waits_total") < 1 && p.status == 0 &&
           now_s() < deadline) {
        usleep(20 * 1000);
    }
    usleep(200 * 1000);
    cr_expect_eq(daemon_metric(&d, "miradb_admission_waits_total"), 1,
                 "the export did not wait for room");
    cr_expect_eq(p.status, 0, "the export was answered %d before any room was made", p.status);

    /* Room comes as the held requests finish: they and the waiter all succeed. */
    for (int i = 0; i < nh; i++) {
        cr_assert_eq(httpc_send_all(fds[i], body + len / 2, len - len / 2), 0);
    }
    for (int i = 0; i < nh; i++) {
        char carry[256];
        size_t carry_len = 0;
        struct http_resp resp;
        cr_assert_eq(httpc_read_response(fds[i], 0, carry, sizeof(carry), &carry_len, &resp), 0,
                     "held request %d got no answer", i);
        cr_expect_eq(resp.status, 200, "held request %d: %d", i, resp.status);
        http_resp_free(&resp);
        close(fds[i]);
    }
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_expect_eq(p.status, 200, "the export that waited: %d", p.status);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"overloaded\"}"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\","
                                   "transport=\"http_protobuf\"}"),
                 (double)(nh + 1) * USUAL_COPIES * VEC_RECORDS);
    free(body);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* The buffers an I/O thread keeps for the next request are resident (the
 * last request wrote them), so they are charged while kept: a body charged
 * whole at admission leaves exactly its length cached, taken and given
 * back by the next request rather than kept twice; a gzip body leaves its
 * compressed and its inflated buffer. */
Test(budget, the_buffers_ingest_keeps_for_reuse_are_charged_while_kept)
{
    struct daemon d;
    const char *args[] = {"--memory-budget", "64MiB", "--shards", "1", "--io-threads", "1", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    cr_assert_eq(cached(&d, "buffers"), 0);
    cr_assert_eq(cached(&d, "batches"), 0);
    /* RSS beside the budget's count (its value under ASan means nothing). */
    cr_expect_gt(daemon_metric(&d, "miradb_process_resident_bytes"), 0);

    size_t len;
    uint8_t *body = logs_body(USUAL_COPIES, &len); /* 3x its size is under 2 MiB: charged whole */
    cr_assert_eq(post(d.http_port, "/v1/logs", body, len, false), 200);
    cr_expect_eq(cached(&d, "buffers"), (double)len);
    double batches = cached(&d, "batches");
    cr_expect_gt(batches, 0);
    cr_expect_geq(in_use(&d), (double)len + batches);

    cr_assert_eq(post(d.http_port, "/v1/logs", body, len, false), 200);
    cr_expect_eq(cached(&d, "buffers"), (double)len);
    cr_expect_eq(cached(&d, "batches"), batches);

    struct libdeflate_compressor *cmp = libdeflate_alloc_compressor(6);
    cr_assert_not_null(cmp);
    size_t cap = libdeflate_gzip_compress_bound(cmp, len);
    uint8_t *gz = malloc(cap);
    cr_assert_not_null(gz);
    size_t gz_len = libdeflate_gzip_compress(cmp, body, len, gz, cap);
    libdeflate_free_compressor(cmp);
    cr_assert_gt(gz_len, 0);
    cr_assert_lt(gz_len * 4, len, "gzip body of %zu bytes", gz_len);
    /* The cached buffer (len bytes) takes the compressed body; the inflated
     * copy gets a fresh one of the gzip trailer's size, len. */
    cr_assert_eq(post(d.http_port, "/v1/logs", gz, gz_len, true), 200);
    cr_expect_eq(cached(&d, "buffers"), 2.0 * (double)len);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\","
                                   "transport=\"http_protobuf\"}"),
                 3.0 * USUAL_COPIES * VEC_RECORDS);
    free(gz);
    free(body);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* sum(count_over_time(...)) over every log row the daemon holds. */
static double loki_count(int port, const char *filter)
{
    char q[256], enc[768], path[1200];
    snprintf(q, sizeof(q), "sum(count_over_time({service_name=~\".+\"} %s [1000d]))", filter);
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path), "/loki/api/v1/query?query=%s&time=1800000000000000000&limit=5",
             enc);
    struct http_resp resp;
    int rc = httpc_request(port, "GET", path, NULL, NULL, 0, 0, &resp);
    cr_assert_eq(rc, 0, "GET %s got no answer", q);
    cr_assert_eq(resp.status, 200, "%s: %s", q, (const char *)resp.body);
    const char *v = strstr((const char *)resp.body, "\"value\":[");
    cr_assert_not_null(v, "%s", (const char *)resp.body);
    v = strchr(v + 9, ',');
    cr_assert_not_null(v);
    double n = strtod(v + 2, NULL); /* ,"<count>"] */
    http_resp_free(&resp);
    return n;
}

/* Queries over many sealed blocks keep their loaded tables under the cap
 * (a quarter of the budget) once they are done, and a second pass over
 * blocks whose tables were dropped answers the same. */
Test(budget, queries_over_all_sealed_blocks_leave_their_tables_under_the_cap)
{
    struct daemon d;
    const char *args[] = {"--memory-budget", "16MiB", "--shards", "1", "--io-threads", "1",
                          "--block-target",  "2MiB",  NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    enum { POSTS = 60, COPIES = 300 };
    size_t len;
    uint8_t *body = logs_body(COPIES, &len); /* 3,000 records, past the block target */
    for (int i = 0; i < POSTS; i++) {
        int st = 0;
        /* A 16 MiB budget admits one such export while the last is sealed. */
        for (int tries = 0;
             tries < 200 && (st = post(d.http_port, "/v1/logs", body, len, false)) == 503;
             tries++) {
            usleep(50 * 1000);
        }
        cr_assert_eq(st, 200, "post %d", i);
    }
    free(body);
    double deadline = now_s() + 60;
    while (now_s() < deadline && daemon_metric(&d, "miradb_seals_total") < POSTS) {
        usleep(100 * 1000);
    }
    cr_assert_geq(daemon_metric(&d, "miradb_seals_total"), POSTS);
    cr_assert_eq(daemon_metric(&d, "miradb_block_table_heap_cap_bytes"), 4 << 20);
    cr_expect_eq(daemon_metric(&d, "miradb_block_table_heap_bytes"), 0, "none read yet");

    const double rows = POSTS * COPIES * VEC_RECORDS;
    for (int pass = 0; pass < 2; pass++) {
        cr_expect_eq(loki_count(d.http_port, "|= \"\""), rows, "pass %d", pass);
        cr_expect_eq(loki_count(d.http_port, "| nokey=\"\""), rows, "pass %d", pass);
        double heap = daemon_metric(&d, "miradb_block_table_heap_bytes");
        cr_expect_gt(heap, 0);
        cr_expect_leq(heap, 4 << 20, "pass %d: %.0f bytes of tables", pass, heap);
    }
    cr_expect_gt(daemon_metric(&d, "miradb_block_tables_dropped_total"), 0);
    cr_expect_eq(daemon_stop(&d), 0);
}
