/*
 * promgen - the PromQL speed case's dataset (bench/cases/promql.py): one
 * seeded PRNG draws 10,000 counter series and 100 classic histograms (1,000
 * _bucket series) at 15 s over 65 minutes (the hour queried plus the
 * 5-minute lookback before it), written twice with the same samples:
 *   DIR/otlp-NNN.pb  OTLP/HTTP protobuf ExportMetricsServiceRequest bodies
 *                    (MiraDB ingests them on /v1/metrics), in time order,
 *                    CHUNK_SLOTS slots of every series per request;
 *   DIR/data.om      OpenMetrics text for `promtool tsdb
 *                    create-blocks-from openmetrics` (Prometheus 2.42).
 *
 *   promgen --out DIR --base-s SEC [--seed N]
 *
 * SEC is the first second of the queried hour; the first slot is SEC - 300.
 * Shape: 100 services (service.name -> job) x 10 instances
 * (service.instance.id -> instance) = 1,000 resources, each with the
 * counter bench.requests ({request} -> bench_requests_total) under 10
 * values of the point attribute route; instance 0 of every service also
 * has the histogram bench.latency (s -> bench_latency_seconds, 9 explicit
 * bounds + Inf = 10 buckets). Each resource is scraped at its own offset of
 * 0-14 whole seconds into the 15 s slot, so every timestamp is a whole
 * second and the OpenMetrics text parses back to the exact millisecond.
 * Counters are integers (as_int), far below 2^53, so both sides hold the
 * same float64 values. No other resource attribute: MiraDB writes no
 * target_info. Prints "series N samples M points P" on stdout.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"
#include "storage/promname.h"

typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest Req;
typedef Opentelemetry__Proto__Metrics__V1__ResourceMetrics ResM;
typedef Opentelemetry__Proto__Metrics__V1__ScopeMetrics ScopeM;
typedef Opentelemetry__Proto__Metrics__V1__Metric Metric;
typedef Opentelemetry__Proto__Metrics__V1__Sum Sum;
typedef Opentelemetry__Proto__Metrics__V1__Histogram Hist;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint NumPt;
typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint HistPt;
typedef Opentelemetry__Proto__Common__V1__KeyValue KV;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyV;
typedef Opentelemetry__Proto__Resource__V1__Resource Res;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope Scope;

#define SERVICES 100
#define INSTANCES 10
#define ROUTES 10
#define N_RES (SERVICES * INSTANCES)
#define N_CTR (N_RES * ROUTES) /* 10,000 counter series */
#define N_HIST SERVICES        /* instance 0 of every service */
#define N_BOUNDS 9
#define SLOTS 261 /* 65 minutes at 15 s, both ends included */
#define STEP_S 15
#define LOOKBACK_S 300
#define CHUNK_SLOTS 20 /* 5 minutes of every series per OTLP request */

static const double bounds[N_BOUNDS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

static const char *ctr_otlp = "bench.requests", *ctr_unit = "{request}";
static const char *hist_otlp = "bench.latency", *hist_unit = "s";
static char ctr_name[128], hist_name[128];

static char svc[SERVICES][16], inst[N_RES][24], route[ROUTES][8];
static int offset_s[N_RES];
static int64_t *ctr;   /* [N_CTR][SLOTS] cumulative counts */
static uint64_t *hcnt; /* [N_HIST][SLOTS][N_BOUNDS + 1] cumulative per-bucket counts */
static double *hsum;   /* [N_HIST][SLOTS] */
static int64_t base_s;

static uint64_t rng_state;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t slot_s(int res, int k)
{
    return base_s - LOOKBACK_S + (int64_t)k * STEP_S + offset_s[res];
}

static void draw(void)
{
    for (int s = 0; s < SERVICES; s++) {
        snprintf(svc[s], sizeof(svc[s]), "svc-%02d", s);
        for (int i = 0; i < INSTANCES; i++) {
            int r = s * INSTANCES + i;
            snprintf(inst[r], sizeof(inst[r]), "svc-%02d-%d", s, i);
            offset_s[r] = (int)(rng_next() % STEP_S);
        }
    }
    for (int r = 0; r < ROUTES; r++) {
        snprintf(route[r], sizeof(route[r]), "r%d", r);
    }
    for (int c = 0; c < N_CTR; c++) {
        int64_t v = (int64_t)(rng_next() % 100000);
        uint64_t rate = 1 + rng_next() % 400; /* mean increments per slot differ per series */
        for (int k = 0; k < SLOTS; k++) {
            v += (int64_t)(rng_next() % (2 * rate + 1));
            ctr[(size_t)c * SLOTS + (size_t)k] = v;
        }
    }
    for (int h = 0; h < N_HIST; h++) {
        uint64_t cum[N_BOUNDS + 1] = {0};
        double sum = 0;
        for (int k = 0; k < SLOTS; k++) {
            for (int b = 0; b <= N_BOUNDS; b++) {
                uint64_t add = rng_next() % (uint64_t)(4 + 6 * (b < 6 ? b : 10 - b));
                cum[b] += add;
                sum += (double)add * (b < N_BOUNDS ? bounds[b] * 0.7 : 4.0);
                hcnt[((size_t)h * SLOTS + (size_t)k) * (N_BOUNDS + 1) + (size_t)b] = cum[b];
            }
            hsum[(size_t)h * SLOTS + (size_t)k] = sum;
        }
    }
}

/* ---- OpenMetrics ---- */

static int write_om(const char *path, uint64_t *samples)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return -errno;
    }
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof(buf));
    uint64_t n = 0;
    char family[128];
    snprintf(family, sizeof(family), "%.*s", (int)(strlen(ctr_name) - strlen("_total")), ctr_name);
    fprintf(f, "# TYPE %s counter\n", family);
    for (int c = 0; c < N_CTR; c++) {
        int r = c / ROUTES;
        for (int k = 0; k < SLOTS; k++) {
            fprintf(f, "%s{job=\"%s\",instance=\"%s\",route=\"%s\"} %lld %lld\n", ctr_name,
                    svc[r / INSTANCES], inst[r], route[c % ROUTES],
                    (long long)ctr[(size_t)c * SLOTS + (size_t)k], (long long)slot_s(r, k));
            n++;
        }
    }
    fprintf(f, "# TYPE %s histogram\n", hist_name);
    for (int h = 0; h < N_HIST; h++) {
        int r = h * INSTANCES;
        for (int b = 0; b <= N_BOUNDS; b++) {
            char le[PROMNAME_FMT_MAX];
            promname_fmt_le(b < N_BOUNDS ? bounds[b] : INFINITY, le);
            for (int k = 0; k < SLOTS; k++) {
                const uint64_t *p = &hcnt[((size_t)h * SLOTS + (size_t)k) * (N_BOUNDS + 1)];
                uint64_t cum = 0;
                for (int j = 0; j <= b; j++) {
                    cum += p[j];
                }
                fprintf(f, "%s_bucket{job=\"%s\",instance=\"%s\",le=\"%s\"} %llu %lld\n", hist_name,
                        svc[h], inst[r], le, (unsigned long long)cum, (long long)slot_s(r, k));
                n++;
            }
        }
        for (int k = 0; k < SLOTS; k++) {
            fprintf(f, "%s_sum{job=\"%s\",instance=\"%s\"} %.17g %lld\n", hist_name, svc[h],
                    inst[r], hsum[(size_t)h * SLOTS + (size_t)k], (long long)slot_s(r, k));
            n++;
        }
        for (int k = 0; k < SLOTS; k++) {
            const uint64_t *p = &hcnt[((size_t)h * SLOTS + (size_t)k) * (N_BOUNDS + 1)];
            uint64_t cnt = 0;
            for (int j = 0; j <= N_BOUNDS; j++) {
                cnt += p[j];
            }
            fprintf(f, "%s_count{job=\"%s\",instance=\"%s\"} %llu %lld\n", hist_name, svc[h],
                    inst[r], (unsigned long long)cnt, (long long)slot_s(r, k));
            n++;
        }
    }
    fprintf(f, "# EOF\n");
    int rc = ferror(f) ? -EIO : 0;
    if (fclose(f) != 0 && rc == 0) {
        rc = -errno;
    }
    *samples = n;
    return rc;
}

/* ---- OTLP ---- */

static uint8_t *pool;
static size_t pool_used, pool_cap;

static void *bump(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (pool_used + n > pool_cap) {
        fprintf(stderr, "promgen: request pool exhausted\n");
        exit(2);
    }
    void *p = pool + pool_used;
    pool_used += n;
    memset(p, 0, n);
    return p;
}

#define NEW(T, INIT)                                                                               \
    ({                                                                                             \
        T *p_ = bump(sizeof(T));                                                                   \
        T v_ = INIT;                                                                               \
        *p_ = v_;                                                                                  \
        p_;                                                                                        \
    })

static KV *kv_str(const char *key, const char *val)
{
    KV *kv = NEW(KV, OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT);
    AnyV *v = NEW(AnyV, OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT);
    v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    v->string_value = (char *)val;
    kv->key = (char *)key;
    kv->value = v;
    return kv;
}

static const int cumulative =
    OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE;

static Metric *ctr_metric(int r, int from, int to, KV ***route_kv)
{
    Metric *mt = NEW(Metric, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__INIT);
    mt->name = (char *)ctr_otlp;
    mt->unit = (char *)ctr_unit;
    size_t n = (size_t)(to - from) * ROUTES, k = 0;
    NumPt **pts = bump(sizeof(NumPt *) * n);
    for (int s = from; s < to; s++) { /* time-major */
        for (int rt = 0; rt < ROUTES; rt++) {
            NumPt *np = NEW(NumPt, OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__INIT);
            np->attributes = route_kv[rt];
            np->n_attributes = 1;
            np->start_time_unix_nano = (uint64_t)(base_s - 86400) * 1000000000ull;
            np->time_unix_nano = (uint64_t)slot_s(r, s) * 1000000000ull;
            np->value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT;
            np->as_int = ctr[((size_t)r * ROUTES + (size_t)rt) * SLOTS + (size_t)s];
            pts[k++] = np;
        }
    }
    Sum *sm = NEW(Sum, OPENTELEMETRY__PROTO__METRICS__V1__SUM__INIT);
    sm->n_data_points = n;
    sm->data_points = pts;
    sm->aggregation_temporality = cumulative;
    sm->is_monotonic = 1;
    mt->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM;
    mt->sum = sm;
    return mt;
}

static Metric *hist_metric(int r, int from, int to)
{
    int h = r / INSTANCES;
    Metric *mt = NEW(Metric, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__INIT);
    mt->name = (char *)hist_otlp;
    mt->unit = (char *)hist_unit;
    size_t n = (size_t)(to - from);
    HistPt **pts = bump(sizeof(HistPt *) * n);
    for (int s = from; s < to; s++) {
        HistPt *hp = NEW(HistPt, OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT__INIT);
        const uint64_t *p = &hcnt[((size_t)h * SLOTS + (size_t)s) * (N_BOUNDS + 1)];
        hp->start_time_unix_nano = (uint64_t)(base_s - 86400) * 1000000000ull;
        hp->time_unix_nano = (uint64_t)slot_s(r, s) * 1000000000ull;
        hp->bucket_counts = bump(sizeof(uint64_t) * (N_BOUNDS + 1));
        hp->n_bucket_counts = N_BOUNDS + 1;
        uint64_t cnt = 0;
        for (int b = 0; b <= N_BOUNDS; b++) {
            hp->bucket_counts[b] = p[b];
            cnt += p[b];
        }
        hp->count = cnt;
        hp->sum_opt_case = OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT__SUM_OPT_SUM;
        hp->sum = hsum[(size_t)h * SLOTS + (size_t)s];
        hp->explicit_bounds = (double *)bounds;
        hp->n_explicit_bounds = N_BOUNDS;
        pts[s - from] = hp;
    }
    Hist *hg = NEW(Hist, OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM__INIT);
    hg->n_data_points = n;
    hg->data_points = pts;
    hg->aggregation_temporality = cumulative;
    mt->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM;
    mt->histogram = hg;
    return mt;
}

static int write_otlp(const char *dir, int chunk, int from, int to, size_t *points)
{
    pool_used = 0;
    KV **route_kv[ROUTES];
    for (int rt = 0; rt < ROUTES; rt++) {
        route_kv[rt] = bump(sizeof(KV *));
        route_kv[rt][0] = kv_str("route", route[rt]);
    }
    Req *req = NEW(
        Req, OPENTELEMETRY__PROTO__COLLECTOR__METRICS__V1__EXPORT_METRICS_SERVICE_REQUEST__INIT);
    req->resource_metrics = bump(sizeof(ResM *) * N_RES);
    for (int r = 0; r < N_RES; r++) {
        ResM *rm = NEW(ResM, OPENTELEMETRY__PROTO__METRICS__V1__RESOURCE_METRICS__INIT);
        Res *res = NEW(Res, OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT);
        res->attributes = bump(sizeof(KV *) * 2);
        res->attributes[0] = kv_str("service.name", svc[r / INSTANCES]);
        res->attributes[1] = kv_str("service.instance.id", inst[r]);
        res->n_attributes = 2;
        rm->resource = res;
        ScopeM *sm = NEW(ScopeM, OPENTELEMETRY__PROTO__METRICS__V1__SCOPE_METRICS__INIT);
        Scope *sc = NEW(Scope, OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT);
        sc->name = "promgen";
        sc->version = "1";
        sm->scope = sc;
        sm->metrics = bump(sizeof(Metric *) * 2);
        sm->metrics[sm->n_metrics++] = ctr_metric(r, from, to, route_kv);
        *points += (size_t)(to - from) * ROUTES;
        if (r % INSTANCES == 0) {
            sm->metrics[sm->n_metrics++] = hist_metric(r, from, to);
            *points += (size_t)(to - from);
        }
        rm->scope_metrics = bump(sizeof(ScopeM *));
        rm->scope_metrics[0] = sm;
        rm->n_scope_metrics = 1;
        req->resource_metrics[req->n_resource_metrics++] = rm;
    }
    size_t len =
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__get_packed_size(
            req);
    uint8_t *buf = malloc(len);
    if (buf == NULL) {
        return -ENOMEM;
    }
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__pack(req, buf);
    char path[4096];
    snprintf(path, sizeof(path), "%s/otlp-%03d.pb", dir, chunk);
    FILE *f = fopen(path, "wb");
    int rc = 0;
    if (f == NULL || fwrite(buf, 1, len, f) != len) {
        rc = -EIO;
    }
    if (f != NULL && fclose(f) != 0) {
        rc = -EIO;
    }
    free(buf);
    return rc;
}

static int names(void)
{
    int n = promname_metric(ctr_otlp, strlen(ctr_otlp), ctr_unit, strlen(ctr_unit),
                            PROMNAME_COUNTER, ctr_name, sizeof(ctr_name));
    if (n < 0 || strcmp(ctr_name, "bench_requests_total") != 0) {
        fprintf(stderr, "promgen: %s maps to \"%s\", the case queries bench_requests_total\n",
                ctr_otlp, n < 0 ? "" : ctr_name);
        return -1;
    }
    n = promname_metric(hist_otlp, strlen(hist_otlp), hist_unit, strlen(hist_unit),
                        PROMNAME_HISTOGRAM, hist_name, sizeof(hist_name));
    if (n < 0 || strcmp(hist_name, "bench_latency_seconds") != 0) {
        fprintf(stderr, "promgen: %s maps to \"%s\", the case queries bench_latency_seconds\n",
                hist_otlp, n < 0 ? "" : hist_name);
        return -1;
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: promgen --out DIR --base-s SEC [--seed N]\n");
    exit(64);
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    long long base = -1;
    unsigned long long seed = 11;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            usage();
        }
        if (strcmp(argv[i], "--out") == 0) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--base-s") == 0) {
            base = strtoll(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--seed") == 0) {
            seed = strtoull(argv[++i], NULL, 10);
        } else {
            usage();
        }
    }
    if (out == NULL || base <= LOOKBACK_S) {
        usage();
    }
    if (names() != 0) {
        return 1;
    }
    base_s = base;
    rng_state = seed;
    ctr = malloc(sizeof(int64_t) * N_CTR * SLOTS);
    hcnt = malloc(sizeof(uint64_t) * N_HIST * SLOTS * (N_BOUNDS + 1));
    hsum = malloc(sizeof(double) * N_HIST * SLOTS);
    pool_cap = 96u << 20;
    pool = malloc(pool_cap);
    int rc = 1;
    if (ctr == NULL || hcnt == NULL || hsum == NULL || pool == NULL) {
        fprintf(stderr, "promgen: out of memory\n");
        goto out;
    }
    draw();
    char path[4096];
    snprintf(path, sizeof(path), "%s/data.om", out);
    uint64_t samples = 0;
    int e = write_om(path, &samples);
    if (e < 0) {
        fprintf(stderr, "promgen: %s: %s\n", path, strerror(-e));
        goto out;
    }
    size_t points = 0;
    for (int c = 0; c * CHUNK_SLOTS < SLOTS; c++) {
        int to = (c + 1) * CHUNK_SLOTS < SLOTS ? (c + 1) * CHUNK_SLOTS : SLOTS;
        e = write_otlp(out, c, c * CHUNK_SLOTS, to, &points);
        if (e < 0) {
            fprintf(stderr, "promgen: writing request %d: %s\n", c, strerror(-e));
            goto out;
        }
    }
    /* Prometheus series: the counters, and per histogram 10 buckets + _sum + _count. */
    printf("series %d samples %llu points %zu\n", N_CTR + N_HIST * (N_BOUNDS + 3),
           (unsigned long long)samples, points);
    rc = 0;
out:
    free(pool);
    free(hsum);
    free(hcnt);
    free(ctr);
    return rc;
}
