/*
 * otlp-load - an OTLP load generator for any OTLP endpoint (MiraDB or not).
 *
 *   otlp-load --protocol grpc|http/protobuf|http/json --signal logs|traces|metrics
 *             [--endpoint HOST:PORT] [--connections N] [--duration S] [--requests N]
 *             [--records-per-request N] [--rate R] [--gzip] [--seed N] [--server-pid PID]
 *             [--streams-per-connection N] [--pool N] [--timeout S] [--time-base NS]
 *
 * A pool of distinct requests is generated and encoded once (gen.c), then
 * sent over N connections from one libevent thread: closed loop (each
 * connection keeps its slots busy) or, with --rate, open loop (request k is
 * due at start + k / R; its latency counts from that moment, so a server
 * that falls behind is charged for the queueing it causes). Answers that
 * refuse (429/503/UNAVAILABLE, ...) count as failed by status and are not
 * retried, so overload stays visible. Prints one JSON object on stdout.
 *
 * Exit status: 0 when the run completed (look at "failed"), 1 when it was
 * aborted (no connection could be made), 2 on a usage error.
 */
#include "bench/otlp-load/load.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "bench/otlp-load/gen.h"
#include "bench/otlp-load/hist.h"
#include "lib/clock.h"

#define MAX_FAIL_KEYS 64
#define TICK_MS 50
#define RECONNECT_BACKOFF_MS 100

struct opts {
    char endpoint[300];
    enum load_proto proto;
    enum signal signal;
    uint32_t connections;
    uint32_t streams;
    double duration_s; /* 0: none */
    uint64_t requests; /* 0: none */
    uint32_t records;
    double rate; /* 0: closed loop */
    bool gzip;
    uint64_t seed;
    long server_pid; /* 0: none */
    uint32_t pool;
    double timeout_s;
    uint64_t time_base_ns; /* 0: the span the run's records cover, back from now */
    bool unique;           /* generate each request fresh instead of cycling the pool */
    bool any_2xx;          /* HTTP: every 2xx acknowledges (peers that answer 201) */
};

struct fail_count {
    char key[24];
    uint64_t n;
};

struct proc_sample {
    bool ok;
    double cpu_s;
    uint64_t hwm_kb;
    uint64_t rss_kb;
};

struct load {
    struct opts o;
    struct event_base *base;
    const struct load_transport *tp;
    struct load_target target;
    struct load_conn **conns;
    struct event **reconnect_ev;
    struct pool_entry *pool;
    uint32_t npool;
    struct vbuf raw, gz; /* --unique: encoding scratch */

    uint64_t deadline_ns; /* 0: none */
    uint64_t timeout_ns;
    uint64_t next_seq;
    uint64_t t0, t_end, t_connect_start, last_progress;
    bool started, stopped, finished, aborted;
    const char *abort_reason;
    uint32_t rr; /* round-robin start for pumping every connection */
    struct event *tick, *sched;

    uint64_t sent, acked, failed, inflight;
    uint64_t records_sent, records_acked, records_rejected;
    uint64_t bytes_sent, bytes_acked;
    uint64_t connects, connect_errors, reconnects;
    uint32_t nfail;
    struct fail_count fails[MAX_FAIL_KEYS];
    struct hist lat;     /* acknowledged: from t_due to the answer */
    struct hist refused; /* answered with a failure status: from t_due to the answer */
    uint64_t t_stop;     /* when issuing stopped */

    struct proc_sample srv_before, srv_after;
    uint64_t srv_rss_max_kb;
    uint64_t srv_rss_samples;
    struct rusage ru_before;
};

/* ------------------------------------------------------------ helpers */

uint64_t load_now_ns(void)
{
    return clock_mono_ns();
}

static bool read_uv(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            return true;
        }
    }
    return false;
}

/* Skips a field of wire type |wt|; false when malformed. */
static bool skip_field(const uint8_t **p, const uint8_t *end, uint32_t wt)
{
    uint64_t v;
    switch (wt) {
    case 0:
        return read_uv(p, end, &v);
    case 1:
        if (end - *p < 8) {
            return false;
        }
        *p += 8;
        return true;
    case 2:
        if (!read_uv(p, end, &v) || v > (uint64_t)(end - *p)) {
            return false;
        }
        *p += v;
        return true;
    case 5:
        if (end - *p < 4) {
            return false;
        }
        *p += 4;
        return true;
    default:
        return false;
    }
}

/* ExportXServiceResponse { 1: partial_success { 1: int64 rejected_x; } } */
uint64_t load_rejected_pb(const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    uint64_t tag;
    while (p < end && read_uv(&p, end, &tag)) {
        if (tag == ((1 << 3) | 2)) {
            uint64_t len;
            if (!read_uv(&p, end, &len) || len > (uint64_t)(end - p)) {
                return 0;
            }
            const uint8_t *q = p, *qend = p + len;
            while (q < qend && read_uv(&q, qend, &tag)) {
                if (tag == ((1 << 3) | 0)) {
                    uint64_t v;
                    return read_uv(&q, qend, &v) ? v : 0;
                }
                if (!skip_field(&q, qend, (uint32_t)(tag & 7))) {
                    return 0;
                }
            }
            return 0;
        }
        if (!skip_field(&p, end, (uint32_t)(tag & 7))) {
            return 0;
        }
    }
    return 0;
}

/* {"partialSuccess":{"rejectedLogRecords":"3", ...}} (or snake_case keys) */
uint64_t load_rejected_json(const char *p, size_t n)
{
    const char *end = p + n;
    const char *k = memmem(p, n, "\"rejected", 9);
    if (k == NULL) {
        return 0;
    }
    const char *q = memchr(k + 9, ':', (size_t)(end - (k + 9)));
    if (q == NULL) {
        return 0;
    }
    q++;
    while (q < end && (*q == ' ' || *q == '"' || *q == '\t' || *q == '\n' || *q == '\r')) {
        q++;
    }
    uint64_t v = 0;
    while (q < end && *q >= '0' && *q <= '9') {
        v = v * 10 + (uint64_t)(*q++ - '0');
    }
    return v;
}

static bool proc_read(long pid, struct proc_sample *s)
{
    char path[64], buf[4096];
    memset(s, 0, sizeof(*s));
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    if (rp == NULL) {
        return false;
    }
    unsigned long long ut = 0, st = 0;
    /* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
     * utime(14) stime(15) */
    if (sscanf(rp + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) {
        return false;
    }
    s->cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    while (fgets(buf, sizeof(buf), f)) {
        unsigned long long kb;
        if (sscanf(buf, "VmHWM: %llu kB", &kb) == 1) {
            s->hwm_kb = kb;
        } else if (sscanf(buf, "VmRSS: %llu kB", &kb) == 1) {
            s->rss_kb = kb;
        }
    }
    fclose(f);
    s->ok = true;
    return true;
}

static void sample_server(struct load *l)
{
    struct proc_sample s;
    if (l->o.server_pid > 0 && proc_read(l->o.server_pid, &s)) {
        l->srv_rss_samples++;
        if (s.rss_kb > l->srv_rss_max_kb) {
            l->srv_rss_max_kb = s.rss_kb;
        }
    }
}

/* ------------------------------------------------------------ driver */

static int encode_entry(struct load *l, uint64_t idx, struct pool_entry *e, struct vbuf *raw,
                        struct vbuf *gz, struct gen_stats *st);

static void finish(struct load *l)
{
    if (l->finished) {
        return;
    }
    l->finished = true;
    l->t_end = load_now_ns();
    event_base_loopbreak(l->base);
}

static void stop_issuing(struct load *l)
{
    if (!l->stopped) {
        l->t_stop = load_now_ns();
    }
    l->stopped = true;
    if (l->inflight == 0) {
        finish(l);
    }
}

static bool budget_left(struct load *l, uint64_t now)
{
    if (l->o.requests && l->next_seq >= l->o.requests) {
        return false;
    }
    if (l->deadline_ns && now >= l->deadline_ns) {
        return false;
    }
    return true;
}

bool load_take(struct load *l, struct load_conn *c, struct load_req *out)
{
    (void)c;
    if (!l->started || l->stopped) {
        return false;
    }
    uint64_t now = load_now_ns();
    if (!budget_left(l, now)) {
        stop_issuing(l);
        return false;
    }
    uint64_t due = now;
    if (l->o.rate > 0) {
        due = l->t0 + (uint64_t)((double)l->next_seq * 1e9 / l->o.rate);
        if (due > now) {
            if (!evtimer_pending(l->sched, NULL)) {
                uint64_t d = due - now;
                struct timeval tv = {.tv_sec = (time_t)(d / 1000000000ULL),
                                     .tv_usec = (suseconds_t)(d % 1000000000ULL / 1000)};
                evtimer_add(l->sched, &tv);
            }
            return false;
        }
    }
    if (l->o.unique) {
        /* request index = sequence number: no two requests repeat */
        struct gen_stats st;
        struct pool_entry *e = calloc(1, sizeof(*e));
        if (e == NULL || encode_entry(l, l->next_seq, e, &l->raw, &l->gz, &st) < 0) {
            free(e);
            l->aborted = true;
            l->abort_reason = "out of memory encoding a request";
            stop_issuing(l);
            return false;
        }
        e->refs = 1; /* the request's hold, dropped in load_done() */
        out->e = e;
    } else {
        out->e = &l->pool[l->next_seq % l->npool];
    }
    out->seq = l->next_seq++;
    out->t_due = due;
    out->t_sent = now;
    l->sent++;
    l->inflight++;
    l->records_sent += out->e->records;
    l->bytes_sent += out->e->len;
    return true;
}

static void count_failure(struct load *l, enum load_outcome o, int code)
{
    char key[24];
    switch (o) {
    case LO_HTTP:
        snprintf(key, sizeof(key), "http:%d", code);
        break;
    case LO_GRPC:
        if (code < 0) {
            snprintf(key, sizeof(key), "grpc:none");
        } else {
            snprintf(key, sizeof(key), "grpc:%d", code);
        }
        break;
    case LO_RST:
        snprintf(key, sizeof(key), "rst:%d", code);
        break;
    case LO_TIMEOUT:
        snprintf(key, sizeof(key), "timeout");
        break;
    default:
        snprintf(key, sizeof(key), "io");
        break;
    }
    for (uint32_t i = 0; i < l->nfail; i++) {
        if (strcmp(l->fails[i].key, key) == 0) {
            l->fails[i].n++;
            return;
        }
    }
    if (l->nfail < MAX_FAIL_KEYS) {
        snprintf(l->fails[l->nfail].key, sizeof(l->fails[0].key), "%s", key);
        l->fails[l->nfail++].n = 1;
    } else {
        l->fails[MAX_FAIL_KEYS - 1].n++; /* folded into the last key; never reached in practice */
    }
}

void load_done(struct load *l, struct load_conn *c, const struct load_req *q, enum load_outcome o,
               int code, uint64_t rejected)
{
    (void)c;
    uint64_t now = load_now_ns();
    l->inflight--;
    l->last_progress = now;
    if (o == LO_ACK) {
        uint64_t rec = q->e->records;
        if (rejected > rec) {
            rejected = rec;
        }
        l->acked++;
        l->records_acked += rec - rejected;
        l->records_rejected += rejected;
        l->bytes_acked += q->e->len;
        hist_add(&l->lat, now - q->t_due);
    } else {
        l->failed++;
        count_failure(l, o, code);
        if (o == LO_HTTP || o == LO_GRPC) {
            hist_add(&l->refused, now - q->t_due);
        }
    }
    load_entry_release((struct pool_entry *)q->e);
    if (!budget_left(l, now)) {
        stop_issuing(l);
    }
}

static void pump_all(struct load *l)
{
    uint32_t n = l->o.connections;
    for (uint32_t i = 0; i < n && !l->stopped; i++) {
        struct load_conn *c = l->conns[(l->rr + i) % n];
        if (c->ready) {
            l->tp->conn_pump(c);
        }
    }
    l->rr++;
}

static void start_load(struct load *l)
{
    l->started = true;
    l->t0 = load_now_ns();
    l->last_progress = l->t0;
    if (l->o.duration_s > 0) {
        l->deadline_ns = l->t0 + (uint64_t)(l->o.duration_s * 1e9);
    }
    getrusage(RUSAGE_SELF, &l->ru_before);
    if (l->o.server_pid > 0) {
        proc_read(l->o.server_pid, &l->srv_before);
        sample_server(l);
    }
    pump_all(l);
}

void load_conn_ready(struct load *l, struct load_conn *c)
{
    if (!l->started) {
        uint32_t ready = 0;
        for (uint32_t i = 0; i < l->o.connections; i++) {
            ready += l->conns[i]->ready;
        }
        if (ready == l->o.connections) {
            start_load(l);
        }
        return;
    }
    l->tp->conn_pump(c);
}

void load_conn_down(struct load *l, struct load_conn *c, bool failed_connect)
{
    if (failed_connect) {
        l->connect_errors++;
    }
    if (l->stopped) {
        return;
    }
    struct timeval tv = {0, failed_connect ? RECONNECT_BACKOFF_MS * 1000 : 0};
    evtimer_add(l->reconnect_ev[c->id], &tv);
}

static void reconnect_cb(evutil_socket_t fd, short what, void *arg)
{
    struct load_conn *c = arg;
    struct load *l = c->run;
    (void)fd, (void)what;
    if (l->stopped) {
        return;
    }
    l->connects++;
    if (l->started) {
        l->reconnects++;
    }
    if (l->tp->conn_start(c) < 0) {
        load_conn_down(l, c, true);
    }
}

static void sched_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    pump_all(arg);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct load *l = arg;
    (void)fd, (void)what;
    uint64_t now = load_now_ns();
    sample_server(l);
    if (!l->started) {
        uint32_t ready = 0;
        for (uint32_t i = 0; i < l->o.connections; i++) {
            ready += l->conns[i]->ready;
        }
        if (now - l->t_connect_start > l->timeout_ns) {
            if (ready > 0) {
                start_load(l); /* go with the connections that made it */
            } else {
                l->aborted = true;
                l->abort_reason = "no connection could be established";
                l->stopped = true;
                finish(l);
            }
        }
        return;
    }
    for (uint32_t i = 0; i < l->o.connections; i++) {
        struct load_conn *c = l->conns[i];
        uint64_t oldest = l->tp->conn_oldest(c);
        if (oldest && now - oldest > l->timeout_ns) {
            l->tp->conn_abort(c, LO_TIMEOUT);
            load_conn_down(l, c, false);
        }
    }
    if (!l->stopped && !budget_left(l, now)) {
        stop_issuing(l);
    }
    /* load_done() above may have moved last_progress past |now| */
    uint64_t idle = now > l->last_progress ? now - l->last_progress : 0;
    if (!l->finished && l->inflight == 0 && idle > l->timeout_ns) {
        bool any = false;
        for (uint32_t i = 0; i < l->o.connections; i++) {
            any |= l->conns[i]->ready;
        }
        if (!any) {
            l->aborted = true;
            l->abort_reason = "lost every connection";
            l->stopped = true;
            finish(l);
        }
    }
}

/* ------------------------------------------------------------ pool */

/* Encodes request |idx| into |e| (body malloc'd; for gRPC with its 5-byte
 * message prefix). |raw| and |gz| are scratch. 0 or -ENOMEM. */
static int encode_entry(struct load *l, uint64_t idx, struct pool_entry *e, struct vbuf *raw,
                        struct vbuf *gz, struct gen_stats *st)
{
    struct gen_config gc = {
        .signal = l->o.signal,
        .seed = l->o.seed,
        .time_base_ns = l->o.time_base_ns,
        .records = l->o.records,
    };
    enum gen_format fmt = l->o.proto == LP_HTTP_JSON ? GEN_JSON : GEN_PROTOBUF;
    vbuf_reset(raw);
    int rc = gen_request(&gc, idx, fmt, raw, st);
    if (rc < 0) {
        return rc;
    }
    const uint8_t *msg = raw->p;
    size_t len = raw->len;
    if (l->o.gzip) {
        rc = gen_gzip(raw->p, raw->len, 6, gz);
        if (rc < 0) {
            return rc;
        }
        msg = gz->p;
        len = gz->len;
    }
    size_t pre = l->o.proto == LP_GRPC ? 5 : 0;
    e->body = malloc(len + pre);
    if (e->body == NULL) {
        return -ENOMEM;
    }
    if (pre) {
        e->body[0] = l->o.gzip ? 1 : 0;
        e->body[1] = (uint8_t)(len >> 24);
        e->body[2] = (uint8_t)(len >> 16);
        e->body[3] = (uint8_t)(len >> 8);
        e->body[4] = (uint8_t)len;
    }
    memcpy(e->body + pre, msg, len);
    e->len = len + pre;
    e->records = st->records;
    return 0;
}

static int build_pool(struct load *l, json_t *payload)
{
    struct vbuf raw, gz;
    uint64_t raw_total = 0, wire_total = 0, attrs = 0, body_bytes = 0, events = 0, links = 0;
    uint64_t by_kind[6] = {0}, by_sev[6] = {0};
    int rc = 0;
    uint64_t t = load_now_ns();

    vbuf_init(&raw);
    vbuf_init(&gz);
    l->pool = calloc(l->o.pool, sizeof(*l->pool));
    if (l->pool == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < l->o.pool; i++) {
        struct gen_stats st;
        rc = encode_entry(l, i, &l->pool[i], &raw, &gz, &st);
        if (rc < 0) {
            break;
        }
        l->npool++;
        raw_total += raw.len;
        wire_total += l->pool[i].len;
        attrs += st.attrs;
        body_bytes += st.body_bytes;
        events += st.events;
        links += st.links;
        for (int k = 0; k < 6; k++) {
            by_kind[k] += st.by_kind[k];
            by_sev[k] += st.by_sev[k];
        }
    }
    vbuf_fini(&raw);
    vbuf_fini(&gz);
    if (rc < 0) {
        return rc;
    }
    double nrec = (double)l->o.pool * l->o.records;
    json_object_set_new(payload, "pool_requests", json_integer(l->o.pool));
    json_object_set_new(payload, "records_per_request", json_integer(l->o.records));
    json_object_set_new(payload, "request_bytes_avg", json_real((double)wire_total / l->o.pool));
    json_object_set_new(payload, "request_bytes_uncompressed_avg",
                        json_real((double)raw_total / l->o.pool));
    json_object_set_new(payload, "attrs_per_record_avg", json_real((double)attrs / nrec));
    if (l->o.signal == SIG_LOGS) {
        static const char *const sev[] = {"trace", "debug", "info", "warn", "error", "fatal"};
        json_t *s = json_object();
        for (int k = 0; k < 6; k++) {
            json_object_set_new(s, sev[k], json_real((double)by_sev[k] / nrec));
        }
        json_object_set_new(payload, "log_body_bytes_avg", json_real((double)body_bytes / nrec));
        json_object_set_new(payload, "severity_share", s);
    } else if (l->o.signal == SIG_TRACES) {
        json_object_set_new(payload, "events_per_span", json_real((double)events / nrec));
        json_object_set_new(payload, "links_per_span", json_real((double)links / nrec));
    } else {
        static const char *const kinds[] = {"none",      "gauge",         "sum",
                                            "histogram", "exp_histogram", "summary"};
        json_t *k = json_object();
        for (int i = 1; i < 6; i++) {
            json_object_set_new(k, kinds[i], json_real((double)by_kind[i] / nrec));
        }
        json_object_set_new(payload, "point_kind_share", k);
    }
    json_object_set_new(payload, "build_seconds", json_real((double)(load_now_ns() - t) / 1e9));
    return 0;
}

/* ------------------------------------------------------------ options */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: otlp-load [options]\n"
            "  --endpoint HOST:PORT          default 127.0.0.1:4317 (grpc), :4318 (http)\n"
            "  --protocol P                  grpc | http/protobuf | http/json (default grpc)\n"
            "  --signal S                    logs | traces | metrics (default logs)\n"
            "  --connections N               default 1\n"
            "  --streams-per-connection N    concurrent gRPC calls per connection (default 1)\n"
            "  --duration S                  stop issuing after S seconds\n"
            "  --requests N                  stop after N requests (the first limit reached\n"
            "                                stops; neither given means --duration 10)\n"
            "  --records-per-request N       log records, spans or data points (default 100)\n"
            "  --rate R                      open loop at R requests/s (closed loop if absent)\n"
            "  --gzip                        gzip request bodies (gRPC: message compression)\n"
            "  --seed N                      payload seed (default 1)\n"
            "  --pool N                      distinct requests encoded up front (default 64)\n"
            "  --timeout S                   per-request answer deadline (default 30)\n"
            "  --time-base NS                first record time, ns since epoch (default: early\n"
            "                                enough that the pool's records end now)\n"
            "  --unique                      encode every request fresh (request index =\n"
            "                                sequence number) instead of cycling the pool: no\n"
            "                                record repeats, but the client spends CPU encoding\n"
            "                                (for building query corpora, not for throughput)\n"
            "  --server-pid PID              report that process's CPU and memory\n"
            "  --any-2xx                     HTTP: count every 2xx answer as an acknowledgement\n"
            "                                (OTLP says 200; Fluent Bit answers 201)\n"
            "  --help\n"
            "Prints one JSON object on stdout. Retryable refusals (429, 503, UNAVAILABLE) are\n"
            "counted as failures, never retried.\n");
}

static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

static bool parse_double(const char *s, double min, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= min) || isinf(v)) {
        return false;
    }
    *out = v;
    return true;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    enum {
        O_ENDPOINT = 256,
        O_PROTOCOL,
        O_SIGNAL,
        O_CONNS,
        O_STREAMS,
        O_DURATION,
        O_REQUESTS,
        O_RECORDS,
        O_RATE,
        O_GZIP,
        O_SEED,
        O_PID,
        O_POOL,
        O_TIMEOUT,
        O_TIMEBASE,
        O_UNIQUE,
        O_ANY2XX,
        O_HELP,
    };
    static const struct option lo[] = {
        {"endpoint", required_argument, NULL, O_ENDPOINT},
        {"protocol", required_argument, NULL, O_PROTOCOL},
        {"signal", required_argument, NULL, O_SIGNAL},
        {"connections", required_argument, NULL, O_CONNS},
        {"streams-per-connection", required_argument, NULL, O_STREAMS},
        {"duration", required_argument, NULL, O_DURATION},
        {"requests", required_argument, NULL, O_REQUESTS},
        {"records-per-request", required_argument, NULL, O_RECORDS},
        {"rate", required_argument, NULL, O_RATE},
        {"gzip", no_argument, NULL, O_GZIP},
        {"seed", required_argument, NULL, O_SEED},
        {"server-pid", required_argument, NULL, O_PID},
        {"pool", required_argument, NULL, O_POOL},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"time-base", required_argument, NULL, O_TIMEBASE},
        {"unique", no_argument, NULL, O_UNIQUE},
        {"any-2xx", no_argument, NULL, O_ANY2XX},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    *o = (struct opts){
        .proto = LP_GRPC,
        .signal = SIG_LOGS,
        .connections = 1,
        .streams = 1,
        .records = 100,
        .seed = 1,
        .pool = 64,
        .timeout_s = 30,
    };
    int ch, li = -1;
    uint64_t v;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", lo, &li)) != -1) {
        bool ok = true;
        switch (ch) {
        case O_ENDPOINT:
            ok = strlen(optarg) < sizeof(o->endpoint);
            if (ok) {
                snprintf(o->endpoint, sizeof(o->endpoint), "%s", optarg);
            }
            break;
        case O_PROTOCOL:
            if (strcmp(optarg, "grpc") == 0) {
                o->proto = LP_GRPC;
            } else if (strcmp(optarg, "http/protobuf") == 0) {
                o->proto = LP_HTTP_PROTOBUF;
            } else if (strcmp(optarg, "http/json") == 0) {
                o->proto = LP_HTTP_JSON;
            } else {
                ok = false;
            }
            break;
        case O_SIGNAL:
            if (strcmp(optarg, "logs") == 0) {
                o->signal = SIG_LOGS;
            } else if (strcmp(optarg, "traces") == 0) {
                o->signal = SIG_TRACES;
            } else if (strcmp(optarg, "metrics") == 0) {
                o->signal = SIG_METRICS;
            } else {
                ok = false;
            }
            break;
        case O_CONNS:
            ok = parse_u64(optarg, 1, 100000, &v);
            o->connections = (uint32_t)v;
            break;
        case O_STREAMS:
            ok = parse_u64(optarg, 1, 10000, &v);
            o->streams = (uint32_t)v;
            break;
        case O_DURATION:
            ok = parse_double(optarg, 0, &o->duration_s) && o->duration_s > 0;
            break;
        case O_REQUESTS:
            ok = parse_u64(optarg, 1, UINT64_MAX, &o->requests);
            break;
        case O_RECORDS:
            ok = parse_u64(optarg, 1, 10000000, &v);
            o->records = (uint32_t)v;
            break;
        case O_RATE:
            ok = parse_double(optarg, 0, &o->rate) && o->rate > 0;
            break;
        case O_GZIP:
            o->gzip = true;
            break;
        case O_SEED:
            ok = parse_u64(optarg, 0, UINT64_MAX, &o->seed);
            break;
        case O_PID:
            ok = parse_u64(optarg, 1, INT32_MAX, &v);
            o->server_pid = (long)v;
            break;
        case O_POOL:
            ok = parse_u64(optarg, 1, 1000000, &v);
            o->pool = (uint32_t)v;
            break;
        case O_TIMEOUT:
            ok = parse_double(optarg, 0, &o->timeout_s) && o->timeout_s > 0;
            break;
        case O_TIMEBASE:
            ok = parse_u64(optarg, 1, UINT64_MAX, &o->time_base_ns);
            break;
        case O_UNIQUE:
            o->unique = true;
            break;
        case O_ANY2XX:
            o->any_2xx = true;
            break;
        case O_HELP:
            usage(stdout);
            exit(0);
        default:
            fprintf(stderr, "otlp-load: unknown option or missing value: %s\n", argv[optind - 1]);
            return -1;
        }
        if (!ok) {
            fprintf(stderr, "otlp-load: bad value for --%s: %s\n", li >= 0 ? lo[li].name : "?",
                    optarg ? optarg : "");
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "otlp-load: unexpected argument %s\n", argv[optind]);
        return -1;
    }
    if (o->requests == 0 && o->duration_s == 0) {
        o->duration_s = 10;
    }
    if (o->proto != LP_GRPC && o->streams != 1) {
        fprintf(stderr, "otlp-load: --streams-per-connection is for grpc (HTTP/1.1 sends one "
                        "request at a time per connection)\n");
        return -1;
    }
    if (o->endpoint[0] == 0) {
        snprintf(o->endpoint, sizeof(o->endpoint), "127.0.0.1:%d",
                 o->proto == LP_GRPC ? 4317 : 4318);
    }
    if (o->time_base_ns == 0) {
        /* records end about now: the span of the requests the run can send
         * (the pool, or every request with --unique --requests) */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct gen_config gc = {.signal = o->signal, .records = o->records};
        uint64_t n = o->unique && o->requests ? o->requests : o->pool;
        uint64_t now = (uint64_t)ts.tv_sec * 1000000000ULL, span = gen_time_span_ns(&gc, n);
        o->time_base_ns = span < now ? now - span : 1;
    }
    return 0;
}

/* "HOST:PORT", "[V6]:PORT", "HOST" (default port), with an optional
 * "http://" prefix and path (ignored). */
static int resolve(const struct opts *o, struct load_target *t)
{
    char buf[300], host[300], port[16];
    const char *s = o->endpoint;
    if (strncmp(s, "http://", 7) == 0) {
        s += 7;
    }
    snprintf(buf, sizeof(buf), "%s", s);
    char *slash = strchr(buf, '/');
    if (slash) {
        *slash = 0;
    }
    snprintf(port, sizeof(port), "%d", o->proto == LP_GRPC ? 4317 : 4318);
    char *colon;
    if (buf[0] == '[') {
        char *rb = strchr(buf, ']');
        if (rb == NULL) {
            return -EINVAL;
        }
        *rb = 0;
        snprintf(host, sizeof(host), "%s", buf + 1);
        if (rb[1] == ':') {
            snprintf(port, sizeof(port), "%s", rb + 2);
        }
    } else if ((colon = strrchr(buf, ':')) != NULL) {
        *colon = 0;
        snprintf(host, sizeof(host), "%s", buf);
        snprintf(port, sizeof(port), "%s", colon + 1);
    } else {
        snprintf(host, sizeof(host), "%s", buf);
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "otlp-load: cannot resolve %s port %s: %s\n", host, port, gai_strerror(rc));
        return -EINVAL;
    }
    memcpy(&t->addr, ai->ai_addr, ai->ai_addrlen);
    t->addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);
    if (strchr(host, ':')) {
        snprintf(t->host, sizeof(t->host), "[%.200s]:%s", host, port);
    } else {
        snprintf(t->host, sizeof(t->host), "%.200s:%s", host, port);
    }
    return 0;
}

/* ------------------------------------------------------------ report */

static const char *proto_name(enum load_proto p)
{
    return p == LP_GRPC ? "grpc" : p == LP_HTTP_PROTOBUF ? "http/protobuf" : "http/json";
}

static json_t *ms_or_clamped(const struct hist *h, double q)
{
    bool clamped;
    uint64_t v = hist_quantile(h, q, &clamped);
    if (clamped) {
        char s[48];
        snprintf(s, sizeof(s), ">= %.3f", (double)v / 1e6);
        return json_string(s);
    }
    return json_real((double)v / 1e6);
}

/* {"samples": n, "p50", "p90", "p99", "max"} in milliseconds; no
 * percentiles without samples. */
static json_t *latency_json(const struct hist *h)
{
    json_t *lat = json_object();
    json_object_set_new(lat, "samples", json_integer((json_int_t)h->n));
    if (h->n > 0) {
        json_object_set_new(lat, "p50", ms_or_clamped(h, 0.50));
        json_object_set_new(lat, "p90", ms_or_clamped(h, 0.90));
        json_object_set_new(lat, "p99", ms_or_clamped(h, 0.99));
        json_object_set_new(lat, "max", json_real((double)h->max / 1e6));
    }
    return lat;
}

static json_t *report(struct load *l, json_t *payload)
{
    json_t *j = json_object();
    json_t *cfg = json_object();
    json_object_set_new(cfg, "endpoint", json_string(l->o.endpoint));
    json_object_set_new(cfg, "protocol", json_string(proto_name(l->o.proto)));
    json_object_set_new(cfg, "signal", json_string(signal_name(l->o.signal)));
    json_object_set_new(cfg, "connections", json_integer(l->o.connections));
    json_object_set_new(cfg, "streams_per_connection", json_integer(l->o.streams));
    json_object_set_new(cfg, "duration_s",
                        l->o.duration_s > 0 ? json_real(l->o.duration_s) : json_null());
    json_object_set_new(cfg, "requests",
                        l->o.requests ? json_integer((json_int_t)l->o.requests) : json_null());
    json_object_set_new(cfg, "records_per_request", json_integer(l->o.records));
    json_object_set_new(cfg, "rate", l->o.rate > 0 ? json_real(l->o.rate) : json_null());
    json_object_set_new(cfg, "loop", json_string(l->o.rate > 0 ? "open" : "closed"));
    json_object_set_new(cfg, "gzip", json_boolean(l->o.gzip));
    json_object_set_new(cfg, "seed", json_integer((json_int_t)l->o.seed));
    json_object_set_new(cfg, "pool", json_integer(l->o.pool));
    json_object_set_new(cfg, "timeout_s", json_real(l->o.timeout_s));
    json_object_set_new(cfg, "time_base_ns", json_integer((json_int_t)l->o.time_base_ns));
    json_object_set_new(cfg, "unique", json_boolean(l->o.unique));
    json_object_set_new(cfg, "any_2xx", json_boolean(l->o.any_2xx));
    json_object_set_new(cfg, "server_pid",
                        l->o.server_pid ? json_integer(l->o.server_pid) : json_null());
    json_object_set_new(j, "tool", json_string("otlp-load"));
    json_object_set_new(j, "config", cfg);
    json_object_set_new(j, "payload", payload);

    json_t *req = json_object();
    json_object_set_new(req, "sent", json_integer((json_int_t)l->sent));
    json_object_set_new(req, "acknowledged", json_integer((json_int_t)l->acked));
    json_object_set_new(req, "failed", json_integer((json_int_t)l->failed));
    json_t *fb = json_object();
    for (uint32_t i = 0; i < l->nfail; i++) {
        json_object_set_new(fb, l->fails[i].key, json_integer((json_int_t)l->fails[i].n));
    }
    json_object_set_new(req, "failed_by_status", fb);
    json_object_set_new(req, "unanswered", json_integer((json_int_t)l->inflight));
    if (l->o.rate > 0 && l->started) {
        /* open loop: requests that fell due before issuing stopped; more than
         * "sent" means the connections could not keep up with the rate */
        uint64_t stop = l->t_stop ? l->t_stop : l->t_end;
        if (l->deadline_ns && stop > l->deadline_ns) {
            stop = l->deadline_ns;
        }
        uint64_t due = (uint64_t)ceil((double)(stop - l->t0) / 1e9 * l->o.rate);
        if (l->o.requests && due > l->o.requests) {
            due = l->o.requests;
        }
        json_object_set_new(req, "scheduled", json_integer((json_int_t)due));
    }
    json_object_set_new(j, "requests", req);

    json_t *rec = json_object();
    json_object_set_new(rec, "sent", json_integer((json_int_t)l->records_sent));
    json_object_set_new(rec, "acknowledged", json_integer((json_int_t)l->records_acked));
    json_object_set_new(rec, "rejected", json_integer((json_int_t)l->records_rejected));
    json_object_set_new(j, "records", rec);

    json_t *by = json_object();
    json_object_set_new(by, "sent", json_integer((json_int_t)l->bytes_sent));
    json_object_set_new(by, "acknowledged", json_integer((json_int_t)l->bytes_acked));
    json_object_set_new(j, "bytes", by);

    double el = l->started ? (double)(l->t_end - l->t0) / 1e9 : 0;
    json_object_set_new(j, "elapsed_s", json_real(el));
    json_object_set_new(j, "records_per_s", json_real(el > 0 ? l->records_acked / el : 0));
    json_object_set_new(j, "bytes_per_s", json_real(el > 0 ? l->bytes_acked / el : 0));
    json_object_set_new(j, "requests_per_s", json_real(el > 0 ? l->acked / el : 0));

    json_t *lat = latency_json(&l->lat);
    json_object_set_new(lat, "from",
                        json_string(l->o.rate > 0 ? "scheduled send time" : "send time"));
    json_object_set_new(j, "ack_latency_ms", lat);
    json_object_set_new(j, "refusal_latency_ms", latency_json(&l->refused));
    json_object_set_new(
        j, "issuing_s",
        json_real(l->started && l->t_stop ? (double)(l->t_stop - l->t0) / 1e9 : el));

    json_t *conn = json_object();
    json_object_set_new(conn, "connects", json_integer((json_int_t)l->connects));
    json_object_set_new(conn, "connect_errors", json_integer((json_int_t)l->connect_errors));
    json_object_set_new(conn, "reconnects", json_integer((json_int_t)l->reconnects));
    json_object_set_new(j, "connections", conn);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)(ru.ru_utime.tv_sec - l->ru_before.ru_utime.tv_sec) +
                 (double)(ru.ru_stime.tv_sec - l->ru_before.ru_stime.tv_sec) +
                 (double)(ru.ru_utime.tv_usec - l->ru_before.ru_utime.tv_usec) / 1e6 +
                 (double)(ru.ru_stime.tv_usec - l->ru_before.ru_stime.tv_usec) / 1e6;
    json_t *cl = json_object();
    json_object_set_new(cl, "cpu_s", json_real(l->started ? cpu : 0));
    json_object_set_new(cl, "cores_busy", json_real(el > 0 ? cpu / el : 0));
    json_object_set_new(j, "client", cl);

    if (l->o.server_pid > 0) {
        json_t *srv = json_object();
        json_object_set_new(srv, "pid", json_integer(l->o.server_pid));
        if (l->srv_before.ok && l->srv_after.ok) {
            double scpu = l->srv_after.cpu_s - l->srv_before.cpu_s;
            json_object_set_new(srv, "cpu_s", json_real(scpu));
            json_object_set_new(srv, "cores_busy", json_real(el > 0 ? scpu / el : 0));
            json_object_set_new(srv, "records_per_cpu_s",
                                json_real(scpu > 0 ? l->records_acked / scpu : 0));
            json_object_set_new(srv, "peak_rss_bytes",
                                json_integer((json_int_t)l->srv_after.hwm_kb * 1024));
            json_object_set_new(srv, "rss_max_sampled_bytes",
                                json_integer((json_int_t)l->srv_rss_max_kb * 1024));
            json_object_set_new(srv, "rss_samples", json_integer((json_int_t)l->srv_rss_samples));
        } else {
            json_object_set_new(srv, "error", json_string("cannot read /proc for that pid"));
        }
        json_object_set_new(j, "server", srv);
    }
    json_object_set_new(j, "aborted", l->aborted ? json_string(l->abort_reason) : json_false());
    return j;
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    struct load *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return 1;
    }
    if (parse_opts(argc, argv, &l->o) < 0) {
        usage(stderr);
        free(l);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    hist_init(&l->lat);
    vbuf_init(&l->raw);
    vbuf_init(&l->gz);
    hist_init(&l->refused);
    l->timeout_ns = (uint64_t)(l->o.timeout_s * 1e9);
    l->tp = l->o.proto == LP_GRPC ? &load_h2 : &load_http1;
    l->target.proto = l->o.proto;
    l->target.signal = l->o.signal;
    l->target.gzip = l->o.gzip;
    l->target.any_2xx = l->o.any_2xx;
    l->target.slots = l->o.streams;
    if (resolve(&l->o, &l->target) < 0) {
        free(l);
        return 2;
    }
    json_t *payload = json_object();
    int rc = build_pool(l, payload);
    if (rc < 0) {
        fprintf(stderr, "otlp-load: building the request pool failed: %s\n", strerror(-rc));
        return 1;
    }

    /* Precise timers: libevent's default clock (CLOCK_MONOTONIC_COARSE) moves
     * once a kernel tick (4 ms at HZ=250), so under --rate the schedule's
     * timer fired up to a tick late and that lag counted in every latency
     * (measured from the scheduled send time). */
    struct event_config *ecfg = event_config_new();
    if (ecfg != NULL && event_config_set_flag(ecfg, EVENT_BASE_FLAG_PRECISE_TIMER) == 0) {
        l->base = event_base_new_with_config(ecfg);
    }
    if (ecfg != NULL) {
        event_config_free(ecfg);
    }
    l->conns = calloc(l->o.connections, sizeof(*l->conns));
    l->reconnect_ev = calloc(l->o.connections, sizeof(*l->reconnect_ev));
    if (l->base == NULL || l->conns == NULL || l->reconnect_ev == NULL) {
        fprintf(stderr, "otlp-load: out of memory\n");
        return 1;
    }
    for (uint32_t i = 0; i < l->o.connections; i++) {
        l->conns[i] = l->tp->conn_new(l, l->base, &l->target, i);
        if (l->conns[i] == NULL) {
            fprintf(stderr, "otlp-load: out of memory\n");
            return 1;
        }
        l->reconnect_ev[i] = evtimer_new(l->base, reconnect_cb, l->conns[i]);
    }
    l->sched = evtimer_new(l->base, sched_cb, l);
    l->tick = event_new(l->base, -1, EV_PERSIST, tick_cb, l);
    struct timeval tick = {0, TICK_MS * 1000};
    event_add(l->tick, &tick);

    l->t_connect_start = load_now_ns();
    for (uint32_t i = 0; i < l->o.connections; i++) {
        l->connects++;
        if (l->tp->conn_start(l->conns[i]) < 0) {
            load_conn_down(l, l->conns[i], true);
        }
    }
    event_base_dispatch(l->base);
    if (!l->finished) {
        l->t_end = load_now_ns();
    }
    if (l->o.server_pid > 0) {
        sample_server(l);
        proc_read(l->o.server_pid, &l->srv_after);
    }

    json_t *j = report(l, payload);
    json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10)); /* one line per run */
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(j);
    int status = l->aborted ? 1 : 0;

    for (uint32_t i = 0; i < l->o.connections; i++) {
        l->tp->conn_free(l->conns[i]);
        event_free(l->reconnect_ev[i]);
    }
    event_free(l->sched);
    event_free(l->tick);
    event_base_free(l->base);
    for (uint32_t i = 0; i < l->npool; i++) {
        free(l->pool[i].body);
    }
    free(l->pool);
    vbuf_fini(&l->raw);
    vbuf_fini(&l->gz);
    free(l->conns);
    free(l->reconnect_ev);
    free(l);
    return status;
}
