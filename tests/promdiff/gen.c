/*
 * gen.c - the differential suite's dataset (tests/promdiff/README.md): one
 * seeded PRNG draws two hours of metrics at ~15 s, written twice with the
 * same samples:
 *   DIR/otlp-NNN.pb  OTLP/HTTP protobuf ExportMetricsServiceRequest bodies
 *                    (MiraDB ingests them on /v1/metrics), in time order;
 *   DIR/data.om      OpenMetrics text for `promtool tsdb
 *                    create-blocks-from openmetrics` (Prometheus 2.42).
 *
 *   promdiff-gen --out DIR --base-ms MS [--seed N]
 *
 * Resources carry only service.name (-> job) and service.instance.id (->
 * instance), so MiraDB writes no target_info that Prometheus would lack.
 * The Prometheus names come from storage/promname (checked against the names
 * the query list uses, so a change there fails here, not as 100 diffs).
 * Every timestamp is chosen so that the OpenMetrics seconds text parses back
 * (Go: int64(ParseFloat(s) * 1000)) to the same millisecond the OTLP point
 * truncates to; the OTLP times carry sub-millisecond nanoseconds on purpose.
 * Prints "series N samples M points P" (Prometheus series and samples, OTLP
 * data points) on stdout.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
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
typedef Opentelemetry__Proto__Metrics__V1__Gauge Gauge;
typedef Opentelemetry__Proto__Metrics__V1__Sum Sum;
typedef Opentelemetry__Proto__Metrics__V1__Histogram Hist;
typedef Opentelemetry__Proto__Metrics__V1__Summary Summ;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint NumPt;
typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint HistPt;
typedef Opentelemetry__Proto__Metrics__V1__SummaryDataPoint SummPt;
typedef Opentelemetry__Proto__Metrics__V1__SummaryDataPoint__ValueAtQuantile QVal;
typedef Opentelemetry__Proto__Common__V1__KeyValue KV;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyV;
typedef Opentelemetry__Proto__Resource__V1__Resource Res;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope Scope;

#define STEPS 480      /* two hours at 15 s */
#define STEP_MS 15000  /* nominal interval */
#define JITTER_MS 1500 /* each point lands within +-1.5 s of its slot */
#define CHUNK_STEPS 40 /* slots per OTLP request file (10 minutes) */
#define N_BOUNDS 11    /* explicit histogram bounds */
#define N_QUANT 3      /* summary quantiles */
#define MAX_ATTRS 2
#define POOL_BYTES (96u << 20)

enum kind { K_COUNTER_INT, K_COUNTER_DBL, K_GAUGE, K_GAUGE_INT, K_UPDOWN, K_HIST, K_SUMMARY };

/* An OTLP metric and the Prometheus name it must become. */
struct mdef {
    const char *otlp, *unit;
    enum kind kind;
    enum promname_type ptype;
    const char *prom; /* expected promname_metric() result */
    const char *om_type;
    char name[128]; /* promname_metric() result */
};

static struct mdef mdefs[] = {
    {"http.server.requests", "{request}", K_COUNTER_INT, PROMNAME_COUNTER,
     "http_server_requests_total", "counter", ""},
    {"process.cpu.time", "s", K_COUNTER_DBL, PROMNAME_COUNTER, "process_cpu_time_seconds_total",
     "counter", ""},
    {"system.memory.usage", "By", K_GAUGE, PROMNAME_GAUGE, "system_memory_usage_bytes", "gauge",
     ""},
    {"room.temperature", "Cel", K_GAUGE, PROMNAME_GAUGE, "room_temperature_celsius", "gauge", ""},
    {"queue.depth", "{item}", K_UPDOWN, PROMNAME_NONMONOTONIC_SUM, "queue_depth", "gauge", ""},
    {"cpu.utilization", "1", K_GAUGE, PROMNAME_GAUGE, "cpu_utilization_ratio", "gauge", ""},
    {"probe.value", "", K_GAUGE_INT, PROMNAME_GAUGE, "probe_value", "gauge", ""},
    {"http.server.duration", "s", K_HIST, PROMNAME_HISTOGRAM, "http_server_duration_seconds",
     "histogram", ""},
    {"rpc.latency", "ms", K_SUMMARY, PROMNAME_SUMMARY, "rpc_latency_milliseconds", "summary", ""},
    /* PROMQL.md D's worked-example series (d_fill) */
    {"http.requests", "", K_COUNTER_INT, PROMNAME_COUNTER, "http_requests_total", "counter", ""},
    {"temperature", "Cel", K_GAUGE, PROMNAME_GAUGE, "temperature_celsius", "gauge", ""},
    {"node.load", "", K_GAUGE, PROMNAME_GAUGE, "node_load", "gauge", ""},
    {"node.info", "", K_GAUGE, PROMNAME_GAUGE, "node_info", "gauge", ""},
    {"http.request.duration", "s", K_HIST, PROMNAME_HISTOGRAM, "http_request_duration_seconds",
     "histogram", ""},
    {"weird", "", K_GAUGE, PROMNAME_GAUGE, "weird", "gauge", ""},
    {"up", "", K_GAUGE, PROMNAME_GAUGE, "up", "gauge", ""},
};
#define N_MDEFS (sizeof(mdefs) / sizeof(mdefs[0]))
enum {
    M_REQ,
    M_CPU,
    M_MEM,
    M_TEMP,
    M_QUEUE,
    M_UTIL,
    M_PROBE,
    M_HIST,
    M_SUMM,
    M_DREQ,
    M_DTEMP,
    M_DLOAD,
    M_DINFO,
    M_DHIST,
    M_DWEIRD,
    M_DUP,
};

static const double bounds[N_BOUNDS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
static const double d_bounds[] = {0.1, 0.25, 0.5, 1};

/* The explicit bounds of histogram metric |m|; returns how many. */
static int hist_bounds(int m, const double **b)
{
    if (m == M_DHIST) {
        *b = d_bounds;
        return (int)(sizeof(d_bounds) / sizeof(d_bounds[0]));
    }
    *b = bounds;
    return N_BOUNDS;
}
static const double quants[N_QUANT] = {0.5, 0.9, 0.99};

/* service.name and service.instance.id; NULL: the resource lacks it. */
struct resource {
    const char *service, *instance;
};
static const struct resource resources[] = {
    {"api", "api-0"},
    {"api", "api-1"},
    {"api", "api-2"},
    {"db", "db-0"},
    {"db", "db-1"},
    {"web", "web-0"},
    {"web", "web-1"},
    /* PROMQL.md D's: R_DA.. */
    {"api", "a"},
    {"api", "b"},
    {"api", "c"},
    {NULL, NULL},
    {"api", NULL},
    {"node", "10.0.0.1:9100"},
};
#define N_RES (sizeof(resources) / sizeof(resources[0]))
#define N_MAIN_RES 7 /* the generated set's; the others carry section D's series */
enum { R_DA = 7, R_DB, R_DC, R_DNONE, R_DJOB, R_DUP };

/* One data-point attribute: a string, or an int when str is NULL. */
struct attr {
    const char *key;
    const char *str;
    int64_t num;
};

struct point {
    bool present;
    int64_t t_ms;
    uint64_t t_ns;
    uint64_t start_ns;
    double v; /* number points */
    int64_t iv;
    uint64_t counts[N_BOUNDS + 1]; /* histogram: per bucket, not cumulative */
    uint64_t count;                /* histogram, summary */
    double sum;
    double q[N_QUANT];
};

/* One OTLP stream: a resource, a metric, an attribute set; STEPS slots. */
struct stream {
    int res, metric;
    int n_attrs;
    struct attr attrs[MAX_ATTRS];
    struct point pts[STEPS];
};

static struct stream *streams;
static int n_streams;

/* ---- PRNG: splitmix64, one sequence for everything ---- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rng_unit(void) /* [0, 1) */
{
    return (double)(rng_next() >> 11) * 0x1.0p-53;
}

static int64_t rng_range(int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

/* ---- the data ---- */

/* The seconds text of |ms| as the OpenMetrics file writes it. */
static void fmt_ts(int64_t ms, char out[32])
{
    snprintf(out, 32, "%lld.%03lld", (long long)(ms / 1000), (long long)(ms % 1000));
}

/* True when Prometheus reads fmt_ts(ms) back as |ms| (int64(float * 1000)). */
static bool ts_roundtrips(int64_t ms)
{
    char buf[32];
    fmt_ts(ms, buf);
    double s = strtod(buf, NULL);
    return (int64_t)(s * 1000.0) == ms;
}

/* Which slots a stream has: gaps, late starts, early ends by its index. */
static bool slot_present(int si, int step)
{
    switch (si % 7) {
    case 3:
        return step < 100 || step >= 110; /* 2.5 min gap: within the lookback */
    case 4:
        return step < 200 || step >= 240; /* 10 min gap: goes stale */
    case 5:
        return step >= 120; /* starts 30 min in */
    case 6:
        return step < 400; /* ends 20 min early */
    default:
        return true;
    }
}

static void add_stream(int res, int metric, int n_attrs, const struct attr *attrs)
{
    struct stream *s = &streams[n_streams++];
    s->res = res;
    s->metric = metric;
    s->n_attrs = n_attrs;
    for (int i = 0; i < n_attrs; i++) {
        s->attrs[i] = attrs[i];
    }
}

static void make_streams(void)
{
    static const char *methods[] = {"GET", "POST"};
    static const char *rooms[] = {"north", "south"};
    streams = calloc(N_RES * 16, sizeof(*streams));
    if (streams == NULL) {
        exit(2);
    }
    for (int r = 0; r < N_MAIN_RES; r++) {
        for (int m = 0; m < 2; m++) {
            for (int c = 0; c < 2; c++) {
                struct attr a[2] = {{"method", methods[m], 0}, {"code", NULL, c ? 500 : 200}};
                add_stream(r, M_REQ, 2, a);
            }
        }
        add_stream(r, M_CPU, 0, NULL);
        add_stream(r, M_MEM, 0, NULL);
        for (int i = 0; i < 2; i++) {
            struct attr a[1] = {{"room", rooms[i], 0}};
            add_stream(r, M_TEMP, 1, a);
        }
        add_stream(r, M_QUEUE, 0, NULL);
        for (int i = 0; i < 2; i++) {
            struct attr a[1] = {{"cpu", NULL, i}};
            add_stream(r, M_UTIL, 1, a);
        }
        if (strcmp(resources[r].service, "web") == 0) {
            add_stream(r, M_PROBE, 0, NULL);
        }
        for (int m = 0; m < 2; m++) {
            struct attr a[1] = {{"method", methods[m], 0}};
            add_stream(r, M_HIST, 1, a);
        }
        add_stream(r, M_SUMM, 0, NULL);
    }
}

static void fill(struct stream *s, int si, int64_t base_ms)
{
    enum kind k = mdefs[s->metric].kind;
    double level = 0; /* gauges: random walk state */
    int64_t ilevel = 0;
    double dcum = 0;
    int64_t icum = 0;
    uint64_t hcounts[N_BOUNDS + 1] = {0}, hcount = 0;
    double hsum = 0;
    uint64_t start_ns = 0;
    bool started = false;
    bool is500 = s->n_attrs == 2 && s->attrs[1].num == 500;
    const double *hb;
    int nb = hist_bounds(s->metric, &hb);

    if (k == K_GAUGE && s->metric == M_MEM) {
        level = (double)rng_range(200000000, 300000000);
    } else if (k == K_GAUGE && s->metric == M_TEMP) {
        level = -10 + rng_unit() * 35;
    } else if (k == K_UPDOWN) {
        ilevel = rng_range(-5, 40);
    }
    for (int i = 0; i < STEPS; i++) {
        struct point *p = &s->pts[i];
        int64_t lo = i == 0 ? 0 : -JITTER_MS;
        int64_t t = base_ms + (int64_t)i * STEP_MS + rng_range(lo, JITTER_MS);
        uint64_t sub_ms_ns = (uint64_t)rng_range(0, 999999);
        bool reset = i > 10 && rng_range(0, 159) == 0;
        if (!slot_present(si, i)) {
            continue;
        }
        while (!ts_roundtrips(t)) {
            t++;
        }
        p->present = true;
        p->t_ms = t;
        p->t_ns = (uint64_t)t * 1000000u + sub_ms_ns;
        if (!started || reset) {
            start_ns = p->t_ns - 1000000u * (uint64_t)rng_range(1, 5000);
            started = true;
            dcum = 0;
            icum = 0;
            memset(hcounts, 0, sizeof(hcounts));
            hcount = 0;
            hsum = 0;
        }
        p->start_ns = start_ns;
        switch (k) {
        case K_COUNTER_INT:
            icum += is500 ? rng_range(0, 3) : rng_range(0, 20);
            p->iv = icum;
            p->v = (double)icum;
            break;
        case K_COUNTER_DBL:
            dcum += rng_unit() * 0.4;
            p->v = dcum;
            break;
        case K_GAUGE:
            if (s->metric == M_MEM) {
                level += (double)rng_range(-1000000, 1000000);
                p->v = level;
            } else if (s->metric == M_TEMP) {
                level += (rng_unit() - 0.5) * 0.8;
                p->v = level;
            } else {
                p->v = rng_unit();
            }
            break;
        case K_GAUGE_INT: /* probe: small values, some NaN and infinities */
            p->v = (double)rng_range(0, 9);
            if (i % 50 == 7) {
                p->v = NAN;
            } else if (i == 300) {
                p->v = INFINITY;
            } else if (i == 301) {
                p->v = -INFINITY;
            }
            break;
        case K_UPDOWN:
            ilevel += rng_range(-3, 3);
            if (ilevel < -5) {
                ilevel = -5;
            }
            p->iv = ilevel;
            p->v = (double)ilevel;
            break;
        case K_HIST: {
            int64_t n = rng_range(0, 25);
            for (int64_t j = 0; j < n; j++) {
                double v = exp(rng_unit() * log(20000.0)) / 1000.0; /* 1 ms .. 20 s */
                int b = 0;
                while (b < nb && v > hb[b]) {
                    b++;
                }
                hcounts[b]++;
                hcount++;
                hsum += v;
            }
            memcpy(p->counts, hcounts, sizeof(hcounts));
            p->count = hcount;
            p->sum = hsum;
            break;
        }
        case K_SUMMARY: {
            int64_t n = rng_range(1, 30);
            hcount += (uint64_t)n;
            hsum += (double)n * rng_unit() * 100;
            p->count = hcount;
            p->sum = hsum;
            p->q[0] = 10 + rng_unit() * 20;
            p->q[1] = p->q[0] + rng_unit() * 30;
            p->q[2] = p->q[1] + rng_unit() * 50;
            break;
        }
        }
    }
}

/* ---- PROMQL.md section D's series ---- */

/* One exact sample of a section D series at base + t s (no jitter). */
static void d_put(struct stream *s, int64_t base_ms, int t, double v)
{
    struct point *p = &s->pts[t / 15];
    p->present = true;
    p->t_ms = base_ms + (int64_t)t * 1000;
    p->t_ns = (uint64_t)p->t_ms * 1000000u;
    p->v = v;
    p->iv = (int64_t)v;
}

static struct stream *d_stream(int res, int metric, int n_attrs, const struct attr *attrs)
{
    add_stream(res, metric, n_attrs, attrs);
    return &streams[n_streams - 1];
}

/*
 * The series of PROMQL.md section D, at the first slot (t = 0 there is the
 * base here), so the suite can also check its worked examples: the bad_bucket
 * and noinf_bucket series are left out (an OTLP histogram cannot make them),
 * and http_request_duration_seconds also has _sum (20) and _count, which D's
 * table does not list.
 */
static void d_streams(int64_t base_ms)
{
    static const double b_vals[] = {100, 110, 120, 130, 140, 2, 12, 22, 32};
    static const double t_vals[] = {20, 22, 21, 25, 24};
    static const struct {
        const char *host, *env;
        double v;
    } loads[] = {
        {"a", "prod", 1}, {"b", "prod", 4}, {"c", "dev", 2}, {"d", "dev", 8}, {"e", "dev", 2}};
    static const char *infos[][2] = {{"a", "linux"}, {"b", "linux"}, {"c", "bsd"}};
    struct stream *s = d_stream(R_DA, M_DREQ, 0, NULL);
    for (int t = 0; t <= 300; t += 15) {
        d_put(s, base_ms, t, t);
    }
    s = d_stream(R_DB, M_DREQ, 0, NULL);
    for (int i = 0; i < 9; i++) {
        d_put(s, base_ms, 15 * i, b_vals[i]);
    }
    s = d_stream(R_DC, M_DREQ, 0, NULL);
    for (int i = 0; i < 3; i++) {
        d_put(s, base_ms, 90 + 15 * i, 3 * (i + 1));
    }
    struct attr room[1] = {{"room", "x", 0}};
    s = d_stream(R_DNONE, M_DTEMP, 1, room);
    for (int i = 0; i < 5; i++) {
        d_put(s, base_ms, 60 * i, t_vals[i]);
    }
    for (size_t i = 0; i < sizeof(loads) / sizeof(loads[0]); i++) {
        struct attr a[2] = {{"host", loads[i].host, 0}, {"env", loads[i].env, 0}};
        s = d_stream(R_DNONE, M_DLOAD, 2, a);
        for (int t = 0; t <= 300; t += 15) {
            d_put(s, base_ms, t, loads[i].v);
        }
    }
    for (size_t i = 0; i < sizeof(infos) / sizeof(infos[0]); i++) {
        struct attr a[2] = {{"host", infos[i][0], 0}, {"os", infos[i][1], 0}};
        s = d_stream(R_DNONE, M_DINFO, 2, a);
        for (int t = 0; t <= 300; t += 15) {
            d_put(s, base_ms, t, 1);
        }
    }
    s = d_stream(R_DJOB, M_DHIST, 0, NULL);
    for (int t = 0; t <= 300; t += 15) {
        static const uint64_t counts[] = {10, 20, 15, 5, 2}; /* le 0.1 .. +Inf: 10 30 45 50 52 */
        d_put(s, base_ms, t, 0);
        memcpy(s->pts[t / 15].counts, counts, sizeof(counts));
        s->pts[t / 15].count = 52;
        s->pts[t / 15].sum = 20;
    }
    static const struct {
        const char *k;
        double v;
    } weird[] = {{"nan", NAN}, {"inf", INFINITY}, {"one", 1}};
    for (size_t i = 0; i < sizeof(weird) / sizeof(weird[0]); i++) {
        struct attr a[1] = {{"k", weird[i].k, 0}};
        s = d_stream(R_DNONE, M_DWEIRD, 1, a);
        d_put(s, base_ms, 0, weird[i].v);
    }
    s = d_stream(R_DUP, M_DUP, 0, NULL);
    for (int t = 0; t <= 300; t += 15) {
        d_put(s, base_ms, t, 1);
    }
}

/* ---- OpenMetrics ---- */

static void fmt_val(double v, char out[40])
{
    if (isnan(v)) {
        strcpy(out, "NaN");
    } else if (isinf(v)) {
        strcpy(out, v > 0 ? "+Inf" : "-Inf");
    } else {
        snprintf(out, 40, "%.17g", v); /* round-trips exactly through Go's ParseFloat */
    }
}

/* The label set of a stream, OpenMetrics style, with |extra| (may be ""). */
static void om_labels(const struct stream *s, const char *extra, char *out, size_t cap)
{
    const struct resource *r = &resources[s->res];
    int n = snprintf(out, cap, "{");
    const char *sep = "";
    if (r->service != NULL) {
        n += snprintf(out + n, cap - (size_t)n, "job=\"%s\"", r->service);
        sep = ",";
    }
    if (r->instance != NULL) {
        n += snprintf(out + n, cap - (size_t)n, "%sinstance=\"%s\"", sep, r->instance);
        sep = ",";
    }
    for (int i = 0; i < s->n_attrs; i++) {
        const struct attr *a = &s->attrs[i];
        if (a->str != NULL) {
            n += snprintf(out + n, cap - (size_t)n, "%s%s=\"%s\"", sep, a->key, a->str);
        } else {
            n +=
                snprintf(out + n, cap - (size_t)n, "%s%s=\"%lld\"", sep, a->key, (long long)a->num);
        }
        sep = ",";
    }
    if (*extra != '\0') {
        n += snprintf(out + n, cap - (size_t)n, "%s%s", sep, extra);
    }
    snprintf(out + n, cap - (size_t)n, "}");
}

static uint64_t om_samples;

static void om_line(FILE *f, const char *name, const char *sfx, const struct stream *s,
                    const char *extra, double v, int64_t t_ms)
{
    char lab[512], val[40], ts[32];
    om_labels(s, extra, lab, sizeof(lab));
    fmt_val(v, val);
    fmt_ts(t_ms, ts);
    fprintf(f, "%s%s%s %s %s\n", name, sfx, lab, val, ts);
    om_samples++;
}

/* Series-major within each family, so every series is in time order. */
static int write_om(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return -errno;
    }
    for (int m = 0; m < (int)N_MDEFS; m++) {
        const struct mdef *d = &mdefs[m];
        char family[128];
        snprintf(family, sizeof(family), "%s", d->name);
        if (d->kind == K_COUNTER_INT || d->kind == K_COUNTER_DBL) {
            family[strlen(family) - strlen("_total")] = '\0'; /* TYPE names the family */
        }
        fprintf(f, "# TYPE %s %s\n", family, d->om_type);
        for (int si = 0; si < n_streams; si++) {
            const struct stream *s = &streams[si];
            if (s->metric != m) {
                continue;
            }
            if (d->kind == K_HIST) {
                const double *hb;
                int nb = hist_bounds(m, &hb);
                for (int b = 0; b <= nb; b++) {
                    char le[PROMNAME_FMT_MAX + 8], lev[PROMNAME_FMT_MAX];
                    promname_fmt_le(b < nb ? hb[b] : INFINITY, lev);
                    snprintf(le, sizeof(le), "le=\"%s\"", lev);
                    for (int i = 0; i < STEPS; i++) {
                        const struct point *p = &s->pts[i];
                        if (!p->present) {
                            continue;
                        }
                        uint64_t cum = 0;
                        for (int j = 0; j <= b; j++) {
                            cum += p->counts[j];
                        }
                        om_line(f, family, "_bucket", s, le, (double)(b < nb ? cum : p->count),
                                p->t_ms);
                    }
                }
            } else if (d->kind == K_SUMMARY) {
                for (int q = 0; q < N_QUANT; q++) {
                    char ql[PROMNAME_FMT_MAX + 16], qv[PROMNAME_FMT_MAX];
                    promname_fmt_le(quants[q], qv);
                    snprintf(ql, sizeof(ql), "quantile=\"%s\"", qv);
                    for (int i = 0; i < STEPS; i++) {
                        if (s->pts[i].present) {
                            om_line(f, family, "", s, ql, s->pts[i].q[q], s->pts[i].t_ms);
                        }
                    }
                }
            }
            if (d->kind == K_HIST || d->kind == K_SUMMARY) {
                for (int i = 0; i < STEPS; i++) {
                    if (s->pts[i].present) {
                        om_line(f, family, "_sum", s, "", s->pts[i].sum, s->pts[i].t_ms);
                    }
                }
                for (int i = 0; i < STEPS; i++) {
                    if (s->pts[i].present) {
                        om_line(f, family, "_count", s, "", (double)s->pts[i].count,
                                s->pts[i].t_ms);
                    }
                }
                continue;
            }
            for (int i = 0; i < STEPS; i++) {
                if (s->pts[i].present) {
                    om_line(f, d->name, "", s, "", s->pts[i].v, s->pts[i].t_ms);
                }
            }
        }
    }
    fprintf(f, "# EOF\n");
    int rc = ferror(f) ? -EIO : 0;
    if (fclose(f) != 0 && rc == 0) {
        rc = -errno;
    }
    return rc;
}

/* ---- OTLP ---- */

static uint8_t *pool;
static size_t pool_used;

static void *bump(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (pool_used + n > POOL_BYTES) {
        fprintf(stderr, "promdiff-gen: request pool exhausted\n");
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

static KV *kv_int(const char *key, int64_t val)
{
    KV *kv = NEW(KV, OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT);
    AnyV *v = NEW(AnyV, OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT);
    v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
    v->int_value = val;
    kv->key = (char *)key;
    kv->value = v;
    return kv;
}

static KV **point_attrs(const struct stream *s)
{
    KV **a = bump(sizeof(KV *) * MAX_ATTRS);
    for (int i = 0; i < s->n_attrs; i++) {
        a[i] = s->attrs[i].str != NULL ? kv_str(s->attrs[i].key, s->attrs[i].str)
                                       : kv_int(s->attrs[i].key, s->attrs[i].num);
    }
    return a;
}

/* The points of metric |m| of resource |r| in slots [from, to); NULL if none. */
static Metric *otlp_metric(int r, int m, int from, int to)
{
    const struct mdef *d = &mdefs[m];
    size_t n = 0;
    for (int si = 0; si < n_streams; si++) {
        if (streams[si].res == r && streams[si].metric == m) {
            for (int i = from; i < to; i++) {
                n += streams[si].pts[i].present;
            }
        }
    }
    if (n == 0) {
        return NULL;
    }
    Metric *mt = NEW(Metric, OPENTELEMETRY__PROTO__METRICS__V1__METRIC__INIT);
    mt->name = (char *)d->otlp;
    mt->unit = (char *)d->unit;
    void **pts = bump(sizeof(void *) * n);
    size_t k = 0;
    /* time-major: every stream's slot i before any slot i+1 */
    for (int i = from; i < to; i++) {
        for (int si = 0; si < n_streams; si++) {
            const struct stream *s = &streams[si];
            const struct point *p = &s->pts[i];
            if (s->res != r || s->metric != m || !p->present) {
                continue;
            }
            if (d->kind == K_HIST) {
                HistPt *h =
                    NEW(HistPt, OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT__INIT);
                h->attributes = point_attrs(s);
                h->n_attributes = (size_t)s->n_attrs;
                h->start_time_unix_nano = p->start_ns;
                h->time_unix_nano = p->t_ns;
                h->count = p->count;
                h->sum_opt_case =
                    OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT__SUM_OPT_SUM;
                h->sum = p->sum;
                const double *hb;
                int nb = hist_bounds(m, &hb);
                h->n_bucket_counts = (size_t)nb + 1;
                h->bucket_counts = (uint64_t *)p->counts;
                h->n_explicit_bounds = (size_t)nb;
                h->explicit_bounds = (double *)hb;
                pts[k++] = h;
            } else if (d->kind == K_SUMMARY) {
                SummPt *sp =
                    NEW(SummPt, OPENTELEMETRY__PROTO__METRICS__V1__SUMMARY_DATA_POINT__INIT);
                sp->attributes = point_attrs(s);
                sp->n_attributes = (size_t)s->n_attrs;
                sp->start_time_unix_nano = p->start_ns;
                sp->time_unix_nano = p->t_ns;
                sp->count = p->count;
                sp->sum = p->sum;
                sp->quantile_values = bump(sizeof(QVal *) * N_QUANT);
                sp->n_quantile_values = N_QUANT;
                for (int q = 0; q < N_QUANT; q++) {
                    QVal *qv = NEW(
                        QVal,
                        OPENTELEMETRY__PROTO__METRICS__V1__SUMMARY_DATA_POINT__VALUE_AT_QUANTILE__INIT);
                    qv->quantile = quants[q];
                    qv->value = p->q[q];
                    sp->quantile_values[q] = qv;
                }
                pts[k++] = sp;
            } else {
                NumPt *np = NEW(NumPt, OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__INIT);
                np->attributes = point_attrs(s);
                np->n_attributes = (size_t)s->n_attrs;
                np->time_unix_nano = p->t_ns;
                if (d->kind == K_COUNTER_INT || d->kind == K_COUNTER_DBL || d->kind == K_UPDOWN) {
                    np->start_time_unix_nano = p->start_ns;
                }
                if (d->kind == K_COUNTER_INT || d->kind == K_UPDOWN) {
                    np->value_case =
                        OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT;
                    np->as_int = p->iv;
                } else {
                    np->value_case =
                        OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE;
                    np->as_double = p->v;
                }
                pts[k++] = np;
            }
        }
    }
    const int cumulative =
        OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE;
    switch (d->kind) {
    case K_HIST: {
        Hist *h = NEW(Hist, OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM__INIT);
        h->n_data_points = n;
        h->data_points = (HistPt **)pts;
        h->aggregation_temporality = cumulative;
        mt->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM;
        mt->histogram = h;
        break;
    }
    case K_SUMMARY: {
        Summ *sm = NEW(Summ, OPENTELEMETRY__PROTO__METRICS__V1__SUMMARY__INIT);
        sm->n_data_points = n;
        sm->data_points = (SummPt **)pts;
        mt->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY;
        mt->summary = sm;
        break;
    }
    case K_COUNTER_INT:
    case K_COUNTER_DBL:
    case K_UPDOWN: {
        Sum *sm = NEW(Sum, OPENTELEMETRY__PROTO__METRICS__V1__SUM__INIT);
        sm->n_data_points = n;
        sm->data_points = (NumPt **)pts;
        sm->aggregation_temporality = cumulative;
        sm->is_monotonic = d->kind != K_UPDOWN;
        mt->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM;
        mt->sum = sm;
        break;
    }
    default: {
        Gauge *g = NEW(Gauge, OPENTELEMETRY__PROTO__METRICS__V1__GAUGE__INIT);
        g->n_data_points = n;
        g->data_points = (NumPt **)pts;
        mt->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE;
        mt->gauge = g;
        break;
    }
    }
    return mt;
}

static int write_otlp(const char *dir, int chunk, int from, int to)
{
    pool_used = 0;
    Req *req = NEW(
        Req, OPENTELEMETRY__PROTO__COLLECTOR__METRICS__V1__EXPORT_METRICS_SERVICE_REQUEST__INIT);
    req->resource_metrics = bump(sizeof(ResM *) * N_RES);
    for (int r = 0; r < (int)N_RES; r++) {
        ResM *rm = NEW(ResM, OPENTELEMETRY__PROTO__METRICS__V1__RESOURCE_METRICS__INIT);
        Res *res = NEW(Res, OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT);
        res->attributes = bump(sizeof(KV *) * 2);
        if (resources[r].service != NULL) {
            res->attributes[res->n_attributes++] = kv_str("service.name", resources[r].service);
        }
        if (resources[r].instance != NULL) {
            res->attributes[res->n_attributes++] =
                kv_str("service.instance.id", resources[r].instance);
        }
        rm->resource = res;
        ScopeM *sm = NEW(ScopeM, OPENTELEMETRY__PROTO__METRICS__V1__SCOPE_METRICS__INIT);
        Scope *sc = NEW(Scope, OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT);
        sc->name = "promdiff";
        sc->version = "1";
        sm->scope = sc;
        sm->metrics = bump(sizeof(Metric *) * N_MDEFS);
        for (int m = 0; m < (int)N_MDEFS; m++) {
            Metric *mt = otlp_metric(r, m, from, to);
            if (mt != NULL) {
                sm->metrics[sm->n_metrics++] = mt;
            }
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

/* ---- names ---- */

static int check_names(void)
{
    for (size_t m = 0; m < N_MDEFS; m++) {
        struct mdef *d = &mdefs[m];
        int n = promname_metric(d->otlp, strlen(d->otlp), d->unit, strlen(d->unit), d->ptype,
                                d->name, sizeof(d->name));
        if (n < 0 || strcmp(d->name, d->prom) != 0) {
            fprintf(stderr,
                    "promdiff-gen: promname_metric(%s, %s) = %d \"%s\", the queries use %s\n",
                    d->otlp, d->unit, n, n < 0 ? "" : d->name, d->prom);
            return -1;
        }
    }
    static const char *keys[] = {"method", "code", "room", "cpu", "host", "env", "os", "k"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char out[64];
        int n = promname_label_name(keys[i], strlen(keys[i]), out, sizeof(out));
        if (n < 0 || strcmp(out, keys[i]) != 0) {
            fprintf(stderr, "promdiff-gen: label name of %s is not itself\n", keys[i]);
            return -1;
        }
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: promdiff-gen --out DIR --base-ms MS [--seed N]\n");
    exit(64);
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    long long base_ms = -1;
    unsigned long long seed = 11;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            usage();
        }
        if (strcmp(argv[i], "--out") == 0) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--base-ms") == 0) {
            base_ms = strtoll(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--seed") == 0) {
            seed = strtoull(argv[++i], NULL, 10);
        } else {
            usage();
        }
    }
    if (out == NULL || base_ms <= 0) {
        usage();
    }
    if (check_names() != 0) {
        return 1;
    }
    rng_state = seed;
    make_streams();
    for (int si = 0; si < n_streams; si++) {
        fill(&streams[si], si, base_ms);
    }
    d_streams(base_ms); /* after the draws: the generated set does not depend on them */
    char path[4096];
    snprintf(path, sizeof(path), "%s/data.om", out);
    int rc = write_om(path);
    if (rc < 0) {
        fprintf(stderr, "promdiff-gen: %s: %s\n", path, strerror(-rc));
        return 1;
    }
    pool = malloc(POOL_BYTES);
    if (pool == NULL) {
        return 2;
    }
    for (int c = 0; c * CHUNK_STEPS < STEPS; c++) {
        rc = write_otlp(out, c, c * CHUNK_STEPS, (c + 1) * CHUNK_STEPS);
        if (rc < 0) {
            fprintf(stderr, "promdiff-gen: writing request %d: %s\n", c, strerror(-rc));
            return 1;
        }
    }
    free(pool);
    /* Prometheus series: one per stream, histograms 14, summaries 5; OTLP data points. */
    int series = 0, points = 0;
    for (int si = 0; si < n_streams; si++) {
        enum kind k = mdefs[streams[si].metric].kind;
        const double *hb;
        series += k == K_HIST      ? hist_bounds(streams[si].metric, &hb) + 3
                  : k == K_SUMMARY ? N_QUANT + 2
                                   : 1;
        for (int i = 0; i < STEPS; i++) {
            points += streams[si].pts[i].present;
        }
    }
    printf("series %d samples %llu points %d\n", series, (unsigned long long)om_samples, points);
    free(streams);
    return 0;
}
