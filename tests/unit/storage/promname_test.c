#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/promname.h"

/* ---- helpers ---- */

/* Attribute lists built in a vbuf, in val.h's encoding. */
struct attrs_b {
    struct vbuf b;
    uint32_t count;
};

static void ab_init(struct attrs_b *a)
{
    vbuf_init(&a->b);
    a->count = 0;
}

static void kv_s(struct attrs_b *a, const char *k, const char *v)
{
    cr_assert_eq(val_put_key(&a->b, k, strlen(k)), 0);
    cr_assert_eq(val_put_str(&a->b, v, strlen(v)), 0);
    a->count++;
}

static void kv_i(struct attrs_b *a, const char *k, int64_t v)
{
    cr_assert_eq(val_put_key(&a->b, k, strlen(k)), 0);
    cr_assert_eq(val_put_int(&a->b, v), 0);
    a->count++;
}

static void kv_d(struct attrs_b *a, const char *k, double v)
{
    cr_assert_eq(val_put_key(&a->b, k, strlen(k)), 0);
    cr_assert_eq(val_put_double(&a->b, v), 0);
    a->count++;
}

/* "{a="b",c="d"}" without __name__; "name{...}" when there is one. */
static void render(const struct promname_lset *ls, const char *suffix, const char *extra_name,
                   const char *extra, char *out, size_t cap)
{
    struct promname_label tmp[64];
    struct promname_lset cp;
    char none[1];
    promname_lset_init(&cp, tmp, 64, none, 0);
    cr_assert_eq(promname_lset_merge(&cp, ls), 0);
    if (extra_name != NULL) {
        cr_assert_eq(promname_lset_set(&cp, extra_name, strlen(extra_name), extra, strlen(extra)),
                     0);
    }
    size_t n = 0;
    const struct promname_label *nm = promname_lset_get(&cp, "__name__", 8);
    if (nm != NULL) {
        n += (size_t)snprintf(out + n, cap - n, "%.*s%s", (int)nm->value_len, nm->value,
                              suffix != NULL ? suffix : "");
    }
    n += (size_t)snprintf(out + n, cap - n, "{");
    bool first = true;
    for (uint32_t i = 0; i < cp.n; i++) {
        const struct promname_label *l = &cp.lab[i];
        if (l->name_len == 8 && memcmp(l->name, "__name__", 8) == 0) {
            continue;
        }
        n += (size_t)snprintf(out + n, cap - n, "%s%.*s=\"%.*s\"", first ? "" : ",",
                              (int)l->name_len, l->name, (int)l->value_len, l->value);
        first = false;
    }
    snprintf(out + n, cap - n, "}");
}

/* ---- floats ---- */

struct fcase {
    double v;
    const char *le;    /* FormatFloat 'f' -1 */
    const char *value; /* API sample value */
};

static void zeros_then(char *buf, int zeros, const char *tail)
{
    strcpy(buf, "0.");
    memset(buf + 2, '0', (size_t)zeros);
    strcpy(buf + 2 + zeros, tail);
}

Test(promname, fmt_le_and_value_match_go_shortest_round_trip)
{
    static const struct fcase cases[] = {
        {0.0, "0", "0"},
        {-0.0, "-0", "-0"},
        {1.0, "1", "1"},
        {-1.0, "-1", "-1"},
        {0.1, "0.1", "0.1"},
        {0.005, "0.005", "0.005"},
        {0.5, "0.5", "0.5"},
        {0.99, "0.99", "0.99"},
        {2.5, "2.5", "2.5"},
        {100.0, "100", "100"},
        {4.2, "4.2", "4.2"},
        {0.1 + 0.2, "0.30000000000000004", "0.30000000000000004"},
        {1.0 / 3.0, "0.3333333333333333", "0.3333333333333333"},
        {2.0 / 3.0, "0.6666666666666666", "0.6666666666666666"},
        {123456789.125, "123456789.125", "123456789.125"},
        {1e15, "1000000000000000", "1000000000000000"},
        {1e16, "10000000000000000", "10000000000000000"},
        {9007199254740992.0, "9007199254740992", "9007199254740992"},
        {9007199254740993.0, "9007199254740992", "9007199254740992"}, /* rounds to 2^53 */
        {9007199254740994.0, "9007199254740994", "9007199254740994"},
        {9007199254740991.0, "9007199254740991", "9007199254740991"},
        {1e20, "100000000000000000000", "100000000000000000000"},
        {9.999999999999999e20, "999999999999999900000", "999999999999999900000"},
        {1e21, "1000000000000000000000", "1e+21"},
        {-1e21, "-1000000000000000000000", "-1e+21"},
        {1e22, "10000000000000000000000", "1e+22"},
        {1e23, "100000000000000000000000", "1e+23"},
        {0x1p89, "618970019642690200000000000", "6.189700196426902e+26"},
        {1e-6, "0.000001", "0.000001"},
        {9.99e-7, "0.000000999", "9.99e-07"},
        {1e-7, "0.0000001", "1e-07"},
        {-1e-7, "-0.0000001", "-1e-07"},
        {1e-5, "0.00001", "0.00001"},
        {1.23e-18, "0.00000000000000000123", "1.23e-18"},
        {1.5e-300, NULL, "1.5e-300"},
        {5e-324, NULL, "5e-324"},
        {1.5e-323, NULL, "1.5e-323"},
        {2.2250738585072014e-308, NULL, "2.2250738585072014e-308"},
        {0x1p-1017, NULL, "7.120236347223045e-307"},
        {1.7976931348623157e308, NULL, "1.7976931348623157e+308"},
        {NAN, "NaN", "NaN"},
        {INFINITY, "+Inf", "+Inf"},
        {-INFINITY, "-Inf", "-Inf"},
    };
    char out[PROMNAME_FMT_MAX];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cases[i].le != NULL) {
            size_t n = promname_fmt_le(cases[i].v, out);
            cr_expect_str_eq(out, cases[i].le, "le of case %zu", i);
            cr_expect_eq(n, strlen(cases[i].le));
        }
        size_t n = promname_fmt_value(cases[i].v, out);
        cr_expect_str_eq(out, cases[i].value, "value of case %zu", i);
        cr_expect_eq(n, strlen(cases[i].value));
    }
}

Test(promname, fmt_le_writes_the_longest_fixed_forms_whole)
{
    char out[PROMNAME_FMT_MAX], want[PROMNAME_FMT_MAX];
    zeros_then(want, 323, "5");
    cr_expect_eq(promname_fmt_le(5e-324, out), 326);
    cr_expect_str_eq(out, want);
    zeros_then(want, 307, "22250738585072014");
    cr_expect_eq(promname_fmt_le(2.2250738585072014e-308, out), 326);
    cr_expect_str_eq(out, want);
    zeros_then(want, 306, "7120236347223045"); /* 2^-1017: the neighbour-digit path */
    cr_expect_str_eq((promname_fmt_le(0x1p-1017, out), out), want);
    cr_expect_eq(promname_fmt_le(-5e-324, out), 327);
    cr_expect_eq(out[0], '-');
    strcpy(want, "17976931348623157");
    memset(want + 17, '0', 292);
    want[309] = '\0';
    cr_expect_eq(promname_fmt_le(1.7976931348623157e308, out), 309);
    cr_expect_str_eq(out, want);
    cr_expect_eq(promname_fmt_le(-1.7976931348623157e308, out), 310);
}

Test(promname, fmt_e_matches_go_exponent_layout)
{
    static const struct {
        double v;
        const char *s;
    } cases[] = {
        {0.0, "0e+00"},
        {-0.0, "-0e+00"},
        {1.0, "1e+00"},
        {100.0, "1e+02"},
        {123456789.125, "1.23456789125e+08"},
        {1e21, "1e+21"},
        {1e-7, "1e-07"},
        {1e100, "1e+100"},
        {5e-324, "5e-324"},
        {0.30000000000000004, "3.0000000000000004e-01"},
        {0x1p89, "6.189700196426902e+26"},
        {0x1p-1017, "7.120236347223045e-307"},
    };
    char out[PROMNAME_FMT_MAX];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        promname_fmt_e(cases[i].v, out);
        cr_expect_str_eq(out, cases[i].s, "case %zu", i);
    }
}

/* Every output reads back exactly, and no output is longer than %.17g's
 * digits: a property over 200,000 pseudo-random bit patterns (fixed seed),
 * checked here against the C library; the digits themselves were also
 * compared with Python's repr (the same shortest-closest rule as Go) over
 * 358,000 values including every power of two while writing this. */
Test(promname, shortest_digits_round_trip_for_random_doubles)
{
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    char out[PROMNAME_FMT_MAX], ref[64];
    int checked = 0;
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double v;
        memcpy(&v, &s, sizeof(v));
        if (!isfinite(v)) {
            continue;
        }
        promname_fmt_e(v, out);
        cr_assert_eq(strtod(out, NULL), v, "%s does not read back", out);
        promname_fmt_le(v, out);
        cr_assert_eq(strtod(out, NULL), v, "%s does not read back", out);
        /* no more significant digits than needed: one fewer must fail */
        promname_fmt_e(v, out);
        const char *e = strchr(out, 'e');
        int nd = 0;
        for (const char *c = out; c < e; c++) {
            nd += (*c >= '0' && *c <= '9');
        }
        if (nd > 1) {
            snprintf(ref, sizeof(ref), "%.*e", nd - 2, v);
            cr_assert_neq(strtod(ref, NULL), v, "%s is shorter than %s", ref, out);
        }
        checked++;
    }
    cr_expect_gt(checked, 199000);
}

Test(promname, attribute_doubles_render_as_es6_numbers)
{
    static const struct {
        double v;
        const char *s;
    } cases[] = {
        {1.5, "1.5"},
        {100.0, "100"},
        {1e-7, "1e-7"},
        {2.5e-8, "2.5e-8"},
        {1e-10, "1e-10"},
        {1e21, "1e+21"},
        {1e20, "100000000000000000000"},
        {-0.0, "-0"},
        {5e-324, "5e-324"},
        {NAN, "json: unsupported value: NaN"},
        {INFINITY, "json: unsupported value: +Inf"},
        {-INFINITY, "json: unsupported value: -Inf"},
    };
    char out[PROMNAME_FMT_MAX];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = promname_fmt_attr_double(cases[i].v, out);
        out[n] = '\0';
        cr_expect_str_eq(out, cases[i].s, "case %zu", i);
    }
}

Test(promname, stale_nan_has_prometheus_bits)
{
    double v = promname_stale_nan();
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    cr_expect_eq(bits, 0x7ff0000000000002ULL);
    cr_expect(isnan(v));
    cr_expect(promname_is_stale_nan(v));
    cr_expect_not(promname_is_stale_nan(NAN));
}

/* ---- metric names ---- */

enum {
    G = PROMNAME_GAUGE,
    C = PROMNAME_COUNTER,
    U = PROMNAME_NONMONOTONIC_SUM,
    H = PROMNAME_HISTOGRAM,
    E = PROMNAME_EXP_HISTOGRAM,
    S = PROMNAME_SUMMARY
};

struct ncase {
    const char *name;
    const char *unit;
    int type;
    const char *want; /* NULL: -EINVAL */
};

static const struct ncase name_cases[] = {
    /* PROMQL.md C.1 table */
    {"http.server.request.duration", "s", H, "http_server_request_duration_seconds"},
    {"http.server.requests", "{request}", C, "http_server_requests_total"},
    {"system.cpu.utilization", "1", G, "system_cpu_utilization_ratio"},
    {"db.client.connections.usage", "{connection}", U, "db_client_connections_usage"},
    {"process.runtime.go.mem.heap_alloc", "By", G, "process_runtime_go_mem_heap_alloc_bytes"},
    {"network.io", "By/s", G, "network_io_bytes_per_second"},
    {"latency_milliseconds", "ms", G, "latency_milliseconds"},
    {"2xx.count", "", G, "_2xx_count"},
    /* suffixes already present */
    {"requests_total", "", C, "requests_total"},
    {"cpu_usage_ratio", "1", G, "cpu_usage_ratio"},
    {"response_time_seconds", "s", G, "response_time_seconds"},
    {"otelcol_process_cpu_seconds", "s", C, "otelcol_process_cpu_seconds_total"},
    {"foo.seconds", "s", H, "foo_seconds"},
    {"foo.seconds", "s", C, "foo_seconds_total"},
    {"seconds.foo", "s", C, "seconds_foo_total"}, /* a token anywhere counts */
    {"bytes.foo", "By", G, "bytes_foo"},
    {"foo.bytes", "By", G, "foo_bytes"},
    {"bytes_total", "By", C, "bytes_total"},
    {"foo", "seconds", G, "foo_seconds"},
    /* total and ratio move to the end, and only for their type */
    {"total.requests", "", C, "requests_total"},
    {"total_total_x", "", C, "x_total"},
    {"a.total.b", "", G, "a_total_b"},
    {"foo.total", "", S, "foo_total"},
    {"foo.total", "", H, "foo_total"},
    {"foo.total", "", U, "foo_total"},
    {"foo.total", "", G, "foo_total"},
    {"total", "", C, "total"},
    {"...", "", C, "total"},
    {"foo", "total", C, "foo_total"},
    {"ratio.of.things", "1", G, "of_things_ratio"},
    {"ratio.of.things", "1", U, "ratio_of_things"},
    {"ratio.of.things", "1", C, "ratio_of_things_total"},
    {"ratio", "1", G, "ratio"},
    {"foo.ratio", "1", G, "foo_ratio"},
    {"foo", "1", G, "foo_ratio"},
    {"foo", "ratio", G, "foo_ratio"},
    {"requests.count", "1", C, "requests_count_total"},
    {"cpu", "1", H, "cpu"},
    {"cpu", "1", S, "cpu"},
    {"foo", " 1 ", G, "foo"}, /* trimmed "1" is dropped, but only exactly "1" is a ratio */
    {"kafka.consumer.lag", "1", U, "kafka_consumer_lag"},
    /* the unit map */
    {"foo", "s", C, "foo_seconds_total"},
    {"foo", "ms", G, "foo_milliseconds"},
    {"foo", "us", G, "foo_microseconds"},
    {"foo", "ns", G, "foo_nanoseconds"},
    {"foo", "min", G, "foo_minutes"},
    {"foo", "h", G, "foo_hours"},
    {"foo", "d", G, "foo_days"},
    {"foo", "By", G, "foo_bytes"},
    {"foo", "KiBy", G, "foo_kibibytes"},
    {"foo", "MiBy", G, "foo_mebibytes"},
    {"foo", "GiBy", G, "foo_gibibytes"},
    {"foo", "TiBy", G, "foo_tibibytes"},
    {"foo", "KBy", G, "foo_kilobytes"},
    {"foo", "MBy", G, "foo_megabytes"},
    {"foo", "GBy", G, "foo_gigabytes"},
    {"foo", "TBy", G, "foo_terabytes"},
    {"foo", "m", G, "foo_meters"},
    {"foo", "V", G, "foo_volts"},
    {"foo", "A", G, "foo_amperes"},
    {"foo", "J", G, "foo_joules"},
    {"foo", "W", G, "foo_watts"},
    {"foo", "g", G, "foo_grams"},
    {"foo", "Cel", G, "foo_celsius"},
    {"foo", "Hz", G, "foo_hertz"},
    {"foo", "%", G, "foo_percent"},
    {"foo", "mo", G, "foo_mo"}, /* "mo" is only a per unit */
    {"foo", "kb", G, "foo_kb"}, /* unknown units are kept */
    {"foo", "S", G, "foo_S"},   /* case matters */
    /* per units */
    {"foo", "1/s", G, "foo_per_second"},
    {"foo", "/s", G, "foo_per_second"},
    {"foo", "1/m", G, "foo_per_minute"},
    {"foo", "1/h", G, "foo_per_hour"},
    {"foo", "1/d", G, "foo_per_day"},
    {"foo", "1/w", G, "foo_per_week"},
    {"foo", "1/mo", G, "foo_per_month"},
    {"foo", "1/y", G, "foo_per_year"},
    {"foo", "1/1", G, "foo_per_1"},
    {"foo", "s/", G, "foo_seconds"},
    {"foo", "s/ ", G, "foo_seconds"},
    {"foo", "/", G, "foo"},
    {"foo", "By/min", G, "foo_bytes_per_min"},
    {"foo", "m/s", G, "foo_meters_per_second"},
    {"foo", "km/h", G, "foo_km_per_hour"},
    {"foo", "ms/ms", G, "foo_milliseconds_per_ms"},
    {"foo", "By/s/x", G, "foo_bytes_per_s_x"}, /* split at the first '/' only */
    {"foo", "{req}/s", C, "foo_per_second_total"},
    {"foo", "By/{x}", G, "foo_bytes"},
    {"foo", "By/{s}", G, "foo_bytes"},
    {"foo_per_second", "1/s", G, "foo_per_second_per_second"}, /* per suffixes never dedupe */
    /* annotations and odd units */
    {"foo", "{packets}", G, "foo"},
    {"foo", "{}", G, "foo"},
    {"foo", "s{x}", G, "foo"},
    {"foo", "", G, "foo"},
    {"foo", " ", G, "foo"},
    {"foo", " s ", G, "foo_seconds"},
    {"foo", "\ts\n", G, "foo_seconds"},
    {"foo", "s\xc2\xa0", G, "foo_seconds"},     /* U+00A0 is space to TrimSpace */
    {"foo", "\xe3\x80\x80s", G, "foo_seconds"}, /* U+3000 too */
    {"foo", "\x01s", G, "foo_s"},
    {"foo", "a b", G, "foo_a_b"},
    {"foo", "_s", G, "foo_s"},
    {"foo", "s_", G, "foo_s_"},
    {"foo", "s_", C, "foo_s__total"},
    {"foo", "s_/s", G, "foo_s_per_second"},
    {"foo", "By/_", G, "foo_bytes"},
    {"foo", "By/s_", G, "foo_bytes_per_s"},
    {"foo", "\xc3\xa9", G, "foo"},
    {"foo",
     "\xc2\xb0"
     "C",
     G, "foo_C"},
    {"foo", "s:x", G, "foo_s:x"},
    {"custom_metric", "unit@with#special/chars", G, "custom_metric_unit_with_special_per_chars"},
    {"metric__with__multiple__underscores", "unit__multiple__underscores", G,
     "metric_with_multiple_underscores_unit_multiple_underscores"},
    /* name sanitisation */
    {"foo:bar", "", G, "foo:bar"},
    {"foo::bar", "", G, "foo::bar"},
    {":foo", "", G, ":foo"},
    {"1foo", "", G, "_1foo"},
    {"123", "", C, "_123_total"},
    {"9", "s", G, "_9_seconds"},
    {"", "s", G, "seconds"},
    {"_foo", "", G, "foo"},
    {"foo_", "", G, "foo"},
    {"foo.", "s", C, "foo_seconds_total"},
    {"a..b", "", G, "a_b"},
    {"foo-bar/baz", "", G, "foo_bar_baz"},
    {"foo bar", "", G, "foo_bar"},
    {"metric@@##$$name", "", G, "metric_name"},
    {"h\xc3\xa9llo.w\xc3\xb6rld", "", G, "h_llo_w_rld"},
    {"foo\xff"
     "bar",
     "", G, "foo_bar"},
    {"foo", "", E, "foo"},
    {"foo.duration", "ms", E, "foo_duration_milliseconds"},
    {"rpc.server.duration", "ms", S, "rpc_server_duration_milliseconds"},
    {"k8s.pod.cpu.time", "s", C, "k8s_pod_cpu_time_seconds_total"},
    {"jvm.memory.used", "By", U, "jvm_memory_used_bytes"},
    {"process.cpu.utilization", "1", G, "process_cpu_utilization_ratio"},
    {"system.network.packets", "{packets}", C, "system_network_packets_total"},
    {"http.client.request.body.size", "By", H, "http_client_request_body_size_bytes"},
    {"queue.depth", "{item}", G, "queue_depth"},
    /* rejected */
    {"", "", G, NULL},
    {"___", "", G, NULL},
    {"@#$%", "", G, NULL},
    {"...", "{x}", G, NULL},
    {"..", "_", H, NULL},
};

Test(promname, metric_names_follow_the_receiver_table)
{
    char out[512];
    size_t n = sizeof(name_cases) / sizeof(name_cases[0]);
    cr_assert_geq(n, 100);
    for (size_t i = 0; i < n; i++) {
        const struct ncase *c = &name_cases[i];
        memset(out, 'X', sizeof(out));
        int rc = promname_metric(c->name, strlen(c->name), c->unit, strlen(c->unit),
                                 (enum promname_type)c->type, out, sizeof(out));
        if (c->want == NULL) {
            cr_expect_eq(rc, -EINVAL, "case %zu (%s, %s): %d", i, c->name, c->unit, rc);
            continue;
        }
        cr_expect_eq(rc, (int)strlen(c->want), "case %zu (%s, %s): rc %d", i, c->name, c->unit, rc);
        if (rc >= 0) {
            cr_expect_str_eq(out, c->want, "case %zu (%s, %s)", i, c->name, c->unit);
        }
    }
}

Test(promname, metric_name_needs_room_for_the_worst_case)
{
    char out[64];
    const char *name = "foo", *unit = "ms/s";
    /* len + ulen + 32 = 39 */
    cr_expect_eq(promname_metric(name, 3, unit, 4, PROMNAME_COUNTER, out, 38), -ENOBUFS);
    cr_expect_eq(promname_metric(name, 3, unit, 4, PROMNAME_COUNTER, out, 39), 33);
    cr_expect_str_eq(out, "foo_milliseconds_per_second_total");
}

Test(promname, metadata_units_are_the_suffix_words)
{
    static const struct {
        const char *u, *want;
    } cases[] = {
        {"s", "seconds"},
        {"By/s", "bytes_per_second"},
        {"1", ""},
        {"{req}", ""},
        {"{req}/s", "per_second"},
        {"1/s", "per_second"},
        {"ms", "milliseconds"},
        {"foo_", "foo"},
        {"_x", "x"},
        {"By/_", "bytes_per"},
        {"", ""},
        {"km/h", "km_per_hour"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = promname_unit(cases[i].u, strlen(cases[i].u), out, sizeof(out));
        cr_expect_eq(rc, (int)strlen(cases[i].want), "case %zu", i);
        cr_expect_str_eq(out, cases[i].want, "case %zu", i);
    }
}

Test(promname, kinds_temporality_and_metadata_types)
{
    cr_expect_eq(promname_type_of(MK_GAUGE, false), PROMNAME_GAUGE);
    cr_expect_eq(promname_type_of(MK_SUM, true), PROMNAME_COUNTER);
    cr_expect_eq(promname_type_of(MK_SUM, false), PROMNAME_NONMONOTONIC_SUM);
    cr_expect_eq(promname_type_of(MK_HISTOGRAM, false), PROMNAME_HISTOGRAM);
    cr_expect_eq(promname_type_of(MK_EXP_HISTOGRAM, false), PROMNAME_EXP_HISTOGRAM);
    cr_expect_eq(promname_type_of(MK_SUMMARY, false), PROMNAME_SUMMARY);
    cr_expect_eq(promname_type_of(MK_NONE, false), -EINVAL);
    cr_expect_eq(promname_temporality(MK_GAUGE, 2), PROMNAME_T_NONE);
    cr_expect_eq(promname_temporality(MK_SUMMARY, 1), PROMNAME_T_NONE);
    cr_expect_eq(promname_temporality(MK_SUM, 2), PROMNAME_T_CUMULATIVE);
    cr_expect_eq(promname_temporality(MK_SUM, 1), PROMNAME_T_DELTA);
    cr_expect_eq(promname_temporality(MK_HISTOGRAM, 0), PROMNAME_T_INVALID);
    cr_expect_eq(promname_temporality(MK_EXP_HISTOGRAM, 7), PROMNAME_T_INVALID);
    cr_expect_str_eq(promname_meta_type(PROMNAME_COUNTER, PROMNAME_T_CUMULATIVE), "counter");
    cr_expect_str_eq(promname_meta_type(PROMNAME_COUNTER, PROMNAME_T_DELTA), "unknown");
    cr_expect_str_eq(promname_meta_type(PROMNAME_NONMONOTONIC_SUM, PROMNAME_T_CUMULATIVE), "gauge");
    cr_expect_str_eq(promname_meta_type(PROMNAME_GAUGE, PROMNAME_T_NONE), "gauge");
    cr_expect_str_eq(promname_meta_type(PROMNAME_EXP_HISTOGRAM, PROMNAME_T_CUMULATIVE),
                     "histogram");
    cr_expect_str_eq(promname_meta_type(PROMNAME_HISTOGRAM, PROMNAME_T_DELTA), "unknown");
    cr_expect_str_eq(promname_meta_type(PROMNAME_SUMMARY, PROMNAME_T_NONE), "summary");
}

/* ---- label names and values ---- */

Test(promname, label_names_follow_the_receiver_defaults)
{
    static const struct {
        const char *k, *want; /* NULL: -EINVAL */
    } cases[] = {
        {"http.request.method", "http_request_method"},
        {"service.name", "service_name"},
        {"a..b", "a__b"},
        {"a-b_c", "a_b_c"},
        {"a:b", "a_b"},
        {"ABC123", "ABC123"},
        {"2xx", "key_2xx"},
        {"9", "key_9"},
        {"0_", "key_0_"},
        {"_x", "key_x"},
        {"_9", "key_9"},
        {"_", "key_"},
        {".", "key_"},
        {".x", "key_x"},
        {"__x__", "__x__"},
        {"__x", "__x"},
        {"..x..", "__x__"},
        {"__name__", "__name__"},
        {"h\xc3\xa9llo", "h_llo"}, /* one '_' per rune */
        {"h\xffllo", "h_llo"},     /* and per invalid byte */
        {"h\xe2\x82x", "h__x"},    /* truncated sequence: two bad bytes */
        {"\xe2\x82\xac", "key_"},  /* U+20AC */
        {"\xe2\x82\xacx", "key_x"},
        {"\xf0\x9f\x98\x80"
         "a",
         "key_a"},              /* U+1F600 */
        {"\xed\xa0\x80", NULL}, /* a surrogate: three bad bytes, "___" */
        {"", NULL},
        {"__", NULL},
        {"..", NULL},
        {"\xc3\xa9\xc3\xa9", NULL},
    };
    char out[64];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = promname_label_name(cases[i].k, strlen(cases[i].k), out, sizeof(out));
        if (cases[i].want == NULL) {
            cr_expect_eq(rc, -EINVAL, "case %zu", i);
            continue;
        }
        cr_expect_eq(rc, (int)strlen(cases[i].want), "case %zu: %d", i, rc);
        if (rc >= 0) {
            cr_expect_str_eq(out, cases[i].want, "case %zu", i);
        }
    }
    cr_expect_eq(promname_label_name("abc", 3, out, 7), -ENOBUFS);
    cr_expect_eq(promname_label_name("abc", 3, out, 8), 3);
}

/* Renders the one value encoded in |b| as a label value. */
static int value_of(struct vbuf *b, char *out, size_t cap)
{
    struct val_rd r = {b->p, b->p + b->len};
    struct val v;
    cr_assert_eq(val_rd_value(&r, &v), 0);
    return promname_label_value(&v, out, cap);
}

static void expect_value(struct vbuf *b, const char *want)
{
    char out[512];
    int rc = value_of(b, out, sizeof(out));
    cr_assert_eq(rc, (int)strlen(want), "rc %d for %s", rc, want);
    cr_expect(memcmp(out, want, (size_t)rc) == 0, "got %.*s want %s", rc, out, want);
    vbuf_reset(b);
}

Test(promname, scalar_values_render_like_pdata_as_string)
{
    struct vbuf b;
    vbuf_init(&b);
    val_put_str(&b, "GET", 3);
    expect_value(&b, "GET");
    val_put_int(&b, 200);
    expect_value(&b, "200");
    val_put_int(&b, -5);
    expect_value(&b, "-5");
    val_put_int(&b, INT64_MIN);
    expect_value(&b, "-9223372036854775808");
    val_put_double(&b, 1.5);
    expect_value(&b, "1.5");
    val_put_double(&b, 200.0);
    expect_value(&b, "200");
    val_put_double(&b, 1e-7);
    expect_value(&b, "1e-7");
    val_put_double(&b, NAN);
    expect_value(&b, "json: unsupported value: NaN");
    val_put_bool(&b, true);
    expect_value(&b, "true");
    val_put_bool(&b, false);
    expect_value(&b, "false");
    val_put_bytes(&b, "\x00\xff", 2);
    expect_value(&b, "AP8=");
    val_put_bytes(&b, "abc", 3);
    expect_value(&b, "YWJj");
    val_put_bytes(&b, "ab", 2);
    expect_value(&b, "YWI=");
    val_put_bytes(&b, "", 0);
    expect_value(&b, "");
    val_put_empty(&b);
    expect_value(&b, "");
    val_put_str(&b, "", 0);
    expect_value(&b, "");
    vbuf_fini(&b);
}

Test(promname, arrays_and_maps_render_as_compact_json)
{
    struct vbuf b;
    vbuf_init(&b);
    long a = val_open(&b, VAL_ARRAY);
    val_put_int(&b, 1);
    val_put_str(&b, "a", 1);
    val_put_bool(&b, true);
    val_put_empty(&b);
    val_put_double(&b, 2.5);
    val_put_double(&b, 1e-7);
    val_put_bytes(&b, "ab", 2);
    val_close(&b, a, 7);
    expect_value(&b, "[1,\"a\",true,null,2.5,1e-7,\"YWI=\"]");

    /* keys sorted bytewise, no HTML escaping, last duplicate wins */
    long m = val_open(&b, VAL_KVLIST);
    val_put_key(&b, "b", 1);
    val_put_int(&b, 1);
    val_put_key(&b, "a", 1);
    val_put_str(&b, "x<y&z>", 6);
    val_put_key(&b, "B", 1);
    val_put_int(&b, 3);
    val_put_key(&b, "b", 1);
    val_put_int(&b, 2);
    val_close(&b, m, 4);
    expect_value(&b, "{\"B\":3,\"a\":\"x<y&z>\",\"b\":2}");

    m = val_open(&b, VAL_KVLIST);
    val_put_key(&b, "z", 1);
    long inner = val_open(&b, VAL_KVLIST);
    val_put_key(&b, "y", 1);
    long ia = val_open(&b, VAL_ARRAY);
    val_put_int(&b, 1);
    val_close(&b, ia, 1);
    val_close(&b, inner, 1);
    val_put_key(&b, "a", 1);
    ia = val_open(&b, VAL_ARRAY);
    val_close(&b, ia, 0);
    val_put_key(&b, "m", 1);
    ia = val_open(&b, VAL_KVLIST);
    val_close(&b, ia, 0);
    val_close(&b, m, 3);
    expect_value(&b, "{\"a\":[],\"m\":{},\"z\":{\"y\":[1]}}");

    a = val_open(&b, VAL_ARRAY);
    val_put_str(&b, "a\"b\\c\n\t\x01\x7f", 9);
    val_put_str(&b, "\xff", 1);
    val_put_str(&b, "\xe2\x80\xa8\xc3\xa9", 5);
    val_put_str(&b, "\b\f\r", 3);
    val_close(&b, a, 4);
    expect_value(
        &b, "[\"a\\\"b\\\\c\\n\\t\\u0001\x7f\",\"\\ufffd\",\"\\u2028\xc3\xa9\",\"\\b\\f\\r\"]");

    /* a NaN inside makes json.Marshal fail: the value is "" */
    a = val_open(&b, VAL_ARRAY);
    val_put_int(&b, 1);
    val_put_double(&b, INFINITY);
    val_close(&b, a, 2);
    expect_value(&b, "");
    vbuf_fini(&b);
}

Test(promname, map_values_report_a_short_buffer)
{
    struct vbuf b;
    vbuf_init(&b);
    long m = val_open(&b, VAL_KVLIST);
    for (int i = 0; i < 8; i++) {
        char k[2] = {(char)('h' - i), 0};
        val_put_key(&b, k, 1);
        val_put_int(&b, i);
    }
    val_close(&b, m, 8);
    char out[512];
    /* {"a":7,...,"h":0} is 49 bytes; sorting needs 8 entries of scratch too */
    cr_expect_eq(value_of(&b, out, 49), -ENOBUFS);
    int rc = value_of(&b, out, sizeof(out));
    cr_assert_eq(rc, 49);
    cr_expect(
        memcmp(out, "{\"a\":7,\"b\":6,\"c\":5,\"d\":4,\"e\":3,\"f\":2,\"g\":1,\"h\":0}", 49) == 0);
    vbuf_fini(&b);
}

/* ---- label sets ---- */

struct lsfix {
    struct promname_label lab[32];
    char buf[1024];
    struct promname_lset ls;
    struct attrs_b a;
};

static void fix_init(struct lsfix *f)
{
    promname_lset_init(&f->ls, f->lab, 32, f->buf, sizeof(f->buf));
    ab_init(&f->a);
}

static void fix_fini(struct lsfix *f)
{
    vbuf_fini(&f->a.b);
}

static void expect_set(struct lsfix *f, const char *want)
{
    char out[1024];
    render(&f->ls, NULL, NULL, NULL, out, sizeof(out));
    cr_expect_str_eq(out, want);
}

Test(promname, colliding_names_join_values_in_key_order)
{
    struct lsfix f;
    fix_init(&f);
    kv_s(&f.a, "a_b", "2");
    kv_s(&f.a, "zz", "last");
    kv_s(&f.a, "a.b", "1");
    kv_s(&f.a, "a-b", "3");
    cr_assert_eq(promname_lset_add_attrs(&f.ls, f.a.b.p, f.a.b.len, f.a.count, PROMNAME_SKIP_NAME),
                 0);
    /* "a-b" (0x2d) < "a.b" (0x2e) < "a_b" (0x5f) */
    expect_set(&f, "{a_b=\"3;1;2\",zz=\"last\"}");
    fix_fini(&f);
}

Test(promname, empty_values_are_absent_but_kept_inside_a_join)
{
    struct lsfix f;
    fix_init(&f);
    kv_s(&f.a, "e", "");
    kv_s(&f.a, "a.b", "");
    kv_s(&f.a, "a_b", "x");
    kv_s(&f.a, "c.d", "x");
    kv_s(&f.a, "c_d", "");
    kv_s(&f.a, "f-g", "x");
    kv_s(&f.a, "f.g", "");
    kv_s(&f.a, "f_g", "y");
    cr_assert_eq(promname_lset_add_attrs(&f.ls, f.a.b.p, f.a.b.len, f.a.count, PROMNAME_SKIP_NAME),
                 0);
    expect_set(&f, "{a_b=\"x\",c_d=\"x;\",f_g=\"x;;y\"}");
    fix_fini(&f);
}

Test(promname, point_labels_sorted_typed_and_name_attribute_skipped)
{
    struct lsfix f;
    fix_init(&f);
    kv_i(&f.a, "http.response.status_code", 200);
    kv_s(&f.a, "__name__", "evil");
    kv_d(&f.a, "ratio", 0.25);
    kv_s(&f.a, "2xx", "yes");
    kv_s(&f.a, "_private", "p");
    kv_s(&f.a, "Upper", "u");
    cr_assert_eq(promname_lset_add_attrs(&f.ls, f.a.b.p, f.a.b.len, f.a.count, PROMNAME_SKIP_NAME),
                 0);
    cr_expect_eq(promname_lset_get(&f.ls, "__name__", 8), NULL);
    expect_set(&f, "{Upper=\"u\",http_response_status_code=\"200\",key_2xx=\"yes\","
                   "key_private=\"p\",ratio=\"0.25\"}");
    const struct promname_label *l = promname_lset_get(&f.ls, "key_2xx", 7);
    cr_assert_not_null(l);
    cr_expect_eq(l->key_len, 3);
    cr_expect(memcmp(l->key, "2xx", 3) == 0);
    fix_fini(&f);
}

Test(promname, a_key_prometheus_refuses_fails_the_point)
{
    struct lsfix f;
    fix_init(&f);
    kv_s(&f.a, "ok", "1");
    kv_s(&f.a, "..", "2");
    cr_expect_eq(promname_lset_add_attrs(&f.ls, f.a.b.p, f.a.b.len, f.a.count, PROMNAME_SKIP_NAME),
                 -EINVAL);
    fix_fini(&f);
    fix_init(&f);
    kv_s(&f.a, "x", "1");
    cr_assert_eq(promname_lset_add_attrs(&f.ls, f.a.b.p, f.a.b.len, 1, 0), 0);
    cr_expect_eq(promname_lset_add_attrs(&f.ls, f.a.b.p, f.a.b.len, 1, 0), -EINVAL,
                 "a second add on a non-empty set");
    cr_expect_eq(promname_lset_add_attrs(&f.ls, f.a.b.p, f.a.b.len - 1, 1, 0), -EINVAL);
    promname_lset_reset(&f.ls);
    cr_expect_eq(promname_lset_add_attrs(&f.ls, f.a.b.p, f.a.b.len - 1, 1, 0), -EBADMSG);
    fix_fini(&f);
}

Test(promname, full_arrays_and_buffers_are_enobufs)
{
    struct promname_label lab[2];
    char buf[8];
    struct promname_lset ls;
    struct attrs_b a;
    ab_init(&a);
    kv_s(&a, "a", "1");
    kv_s(&a, "b", "2");
    kv_s(&a, "c", "3");
    promname_lset_init(&ls, lab, 2, buf, sizeof(buf));
    cr_expect_eq(promname_lset_add_attrs(&ls, a.b.p, a.b.len, a.count, 0), -ENOBUFS);
    vbuf_reset(&a.b);
    a.count = 0;
    kv_s(&a, "a.b", "12345");
    kv_s(&a, "a_b", "67890"); /* the join needs 11 bytes */
    promname_lset_init(&ls, lab, 2, buf, sizeof(buf));
    cr_expect_eq(promname_lset_add_attrs(&ls, a.b.p, a.b.len, a.count, 0), -ENOBUFS);
    vbuf_fini(&a.b);
}

Test(promname, set_replaces_inserts_sorted_and_empty_removes)
{
    struct promname_label lab[4];
    struct promname_lset ls;
    promname_lset_init(&ls, lab, 4, NULL, 0);
    cr_assert_eq(promname_lset_set(&ls, "m", 1, "1", 1), 0);
    cr_assert_eq(promname_lset_set(&ls, "b", 1, "2", 1), 0);
    cr_assert_eq(promname_lset_set(&ls, "z", 1, "3", 1), 0);
    cr_assert_eq(promname_lset_set(&ls, "b", 1, "4", 1), 0);
    cr_assert_eq(ls.n, 3);
    cr_expect(ls.lab[0].name[0] == 'b' && ls.lab[0].value[0] == '4');
    cr_expect(ls.lab[1].name[0] == 'm' && ls.lab[2].name[0] == 'z');
    cr_assert_eq(promname_lset_set(&ls, "m", 1, "", 0), 0);
    cr_assert_eq(ls.n, 2);
    cr_expect_null(promname_lset_get(&ls, "m", 1));
    cr_assert_eq(promname_lset_set(&ls, "q", 1, "", 0), 0);
    cr_assert_eq(ls.n, 2);
    cr_assert_eq(promname_lset_set(&ls, "c", 1, "5", 1), 0);
    cr_assert_eq(promname_lset_set(&ls, "d", 1, "6", 1), 0);
    cr_expect_eq(promname_lset_set(&ls, "e", 1, "7", 1), -ENOBUFS);
}

/* ---- resources ---- */

static void resource_of(struct attrs_b *a, struct promname_resource *r, char *buf, size_t cap)
{
    cr_assert_eq(promname_resource_init(r, a->b.p, a->b.len, a->count, buf, cap), 0);
}

static void expect_str(const char *p, uint32_t n, const char *want)
{
    if (want == NULL) {
        cr_expect_null(p);
        return;
    }
    cr_assert_not_null(p, "want %s", want);
    cr_expect_eq(n, strlen(want));
    cr_expect(memcmp(p, want, n) == 0, "got %.*s want %s", (int)n, p, want);
}

Test(promname, job_and_instance_come_from_service_attributes)
{
    struct attrs_b a;
    struct promname_resource r;
    char buf[128];
    ab_init(&a);
    kv_s(&a, "service.namespace", "shop");
    kv_s(&a, "service.name", "cart");
    kv_s(&a, "service.instance.id", "pod-1");
    kv_s(&a, "host.name", "h");
    resource_of(&a, &r, buf, sizeof(buf));
    expect_str(r.job, r.job_len, "shop/cart");
    expect_str(r.instance, r.instance_len, "pod-1");
    cr_expect_eq(r.n_other, 1);

    vbuf_reset(&a.b), a.count = 0;
    kv_s(&a, "service.name", "cart");
    resource_of(&a, &r, buf, sizeof(buf));
    expect_str(r.job, r.job_len, "cart");
    expect_str(r.instance, r.instance_len, NULL);
    cr_expect_eq(r.n_other, 0);

    vbuf_reset(&a.b), a.count = 0;
    kv_s(&a, "service.namespace", "shop");
    kv_s(&a, "service.instance.id", "");
    resource_of(&a, &r, buf, sizeof(buf));
    expect_str(r.job, r.job_len, NULL); /* no name: no job even with a namespace */
    expect_str(r.instance, r.instance_len, NULL);

    vbuf_reset(&a.b), a.count = 0;
    kv_s(&a, "service.namespace", "shop");
    kv_s(&a, "service.name", "");
    resource_of(&a, &r, buf, sizeof(buf));
    expect_str(r.job, r.job_len, "shop/");

    vbuf_reset(&a.b), a.count = 0;
    kv_i(&a, "service.namespace", 7);
    kv_i(&a, "service.name", 42);
    kv_s(&a, "service.name", "second");
    kv_d(&a, "service.instance.id", 1.5);
    resource_of(&a, &r, buf, sizeof(buf));
    expect_str(r.job, r.job_len, "7/42"); /* the first service.name */
    expect_str(r.instance, r.instance_len, "1.5");
    cr_expect_eq(r.n_other, 1, "the duplicate counts as another attribute");
    cr_expect_eq(promname_resource_init(&r, a.b.p, a.b.len, a.count, buf, 3), -ENOBUFS);
    vbuf_fini(&a.b);
}

Test(promname, resource_job_replaces_an_attribute_job_only_when_set)
{
    struct lsfix f;
    struct promname_resource r = {0};
    fix_init(&f);
    kv_s(&f.a, "job", "attr");
    kv_s(&f.a, "instance", "attr-i");
    cr_assert_eq(promname_lset_add_attrs(&f.ls, f.a.b.p, f.a.b.len, f.a.count, PROMNAME_SKIP_NAME),
                 0);
    cr_assert_eq(promname_lset_add_resource(&f.ls, &r), 0);
    expect_set(&f, "{instance=\"attr-i\",job=\"attr\"}");
    r.job = "svc";
    r.job_len = 3;
    cr_assert_eq(promname_lset_add_resource(&f.ls, &r), 0);
    expect_set(&f, "{instance=\"attr-i\",job=\"svc\"}");
    fix_fini(&f);
}

Test(promname, target_info_only_with_other_attributes_and_an_identifier)
{
    struct lsfix f;
    struct promname_resource r;
    char rbuf[64];

    fix_init(&f);
    kv_s(&f.a, "service.name", "cart");
    kv_s(&f.a, "service.instance.id", "pod-1");
    resource_of(&f.a, &r, rbuf, sizeof(rbuf));
    cr_expect_eq(promname_target_info(&f.ls, f.a.b.p, f.a.b.len, f.a.count, &r), 0);
    fix_fini(&f);

    fix_init(&f);
    kv_s(&f.a, "k8s.cluster.name", "eu1");
    resource_of(&f.a, &r, rbuf, sizeof(rbuf));
    cr_expect_eq(promname_target_info(&f.ls, f.a.b.p, f.a.b.len, f.a.count, &r), 0,
                 "neither job nor instance");
    fix_fini(&f);

    fix_init(&f);
    kv_s(&f.a, "job", "x");
    kv_s(&f.a, "foo", "y");
    resource_of(&f.a, &r, rbuf, sizeof(rbuf));
    cr_expect_eq(promname_target_info(&f.ls, f.a.b.p, f.a.b.len, f.a.count, &r), 1,
                 "an attribute named job is an identifier to the receiver");
    expect_set(&f, "target_info{foo=\"y\",job=\"x\"}");
    fix_fini(&f);

    fix_init(&f);
    kv_s(&f.a, "service.name", "a");
    kv_s(&f.a, "foo", "");
    resource_of(&f.a, &r, rbuf, sizeof(rbuf));
    cr_expect_eq(promname_target_info(&f.ls, f.a.b.p, f.a.b.len, f.a.count, &r), 1,
                 "an empty attribute still counts as another one");
    expect_set(&f, "target_info{job=\"a\"}");
    fix_fini(&f);
}

Test(promname, scope_labels_only_when_promoted_and_named)
{
    struct lsfix f, sf;
    struct scope_row s = {0};
    fix_init(&f);
    fix_init(&sf);
    kv_s(&sf.a, "lib.x", "1");
    kv_s(&sf.a, "a.b", "first");
    kv_s(&sf.a, "a-b", "second"); /* the last in attribute order wins */
    kv_s(&sf.a, "gone", "v");
    kv_s(&sf.a, "gone", "");
    s.attrs.count = sf.a.count;

    /* unnamed scope: nothing */
    cr_assert_eq(promname_scope_labels(&sf.ls, &s, sf.a.b.p, sf.a.b.len), 0);
    cr_expect_eq(sf.ls.n, 0);

    s.name = (struct mstr){"io.opentelemetry.http", 21};
    s.version = (struct mstr){"1.2.0", 5};
    cr_assert_eq(promname_scope_labels(&sf.ls, &s, sf.a.b.p, sf.a.b.len), 0);

    kv_s(&f.a, "otel.scope.schema_url", "from-point");
    kv_s(&f.a, "m", "GET");
    cr_assert_eq(promname_lset_add_attrs(&f.ls, f.a.b.p, f.a.b.len, f.a.count, PROMNAME_SKIP_NAME),
                 0);
    cr_assert_eq(promname_lset_merge(&f.ls, &sf.ls), 0);
    /* the empty schema url removes the point's label of that name */
    expect_set(&f, "{m=\"GET\",otel_scope_a_b=\"second\",otel_scope_lib_x=\"1\","
                   "otel_scope_name=\"io.opentelemetry.http\",otel_scope_version=\"1.2.0\"}");
    fix_fini(&f);
    fix_fini(&sf);
}

/* ---- points ---- */

Test(promname, timestamps_truncate_to_milliseconds_like_go)
{
    cr_expect_eq(promname_ts_ms(1700000000123456789ULL), 1700000000123LL);
    cr_expect_eq(promname_ts_ms(999999), 0);
    cr_expect_eq(promname_ts_ms(1000000), 1);
    cr_expect_eq(promname_ts_ms(UINT64_MAX), 0); /* int64 -1 / 1e6 */
    cr_expect_eq(promname_ts_ms(1ULL << 63), -9223372036854LL);
}

struct hist {
    struct vbuf b;
    struct point_row pt;
};

static void hist_build(struct hist *h, const uint64_t *counts, uint32_t nc, const double *bounds,
                       uint32_t nb)
{
    vbuf_init(&h->b);
    memset(&h->pt, 0, sizeof(h->pt));
    vbuf_put_u32(&h->b, nc);
    for (uint32_t i = 0; i < nc; i++) {
        vbuf_put_u64(&h->b, counts[i]);
    }
    vbuf_put_u32(&h->b, nb);
    for (uint32_t i = 0; i < nb; i++) {
        vbuf_put_f64(&h->b, bounds[i]);
    }
}

/* "suffix{extra} value" per sample, one a line. */
static void expand_all(enum metric_kind kind, const struct point_row *pt, const struct vbuf *b,
                       char *out, size_t cap)
{
    struct promname_expand x;
    struct promname_sample s;
    cr_assert_eq(promname_expand_init(&x, kind, pt, b->p, b->len), 0);
    size_t n = 0;
    out[0] = '\0';
    int rc;
    while ((rc = promname_expand_next(&x, &s)) == 1) {
        char v[PROMNAME_FMT_MAX];
        if (promname_is_stale_nan(s.value)) {
            strcpy(v, "STALE");
        } else {
            promname_fmt_value(s.value, v);
        }
        cr_assert_eq(strlen(s.suffix_str), s.suffix_len);
        if (s.extra_name != NULL) {
            cr_assert_eq(strlen(s.extra), s.extra_len);
            n += (size_t)snprintf(out + n, cap - n, "%s{%s=\"%s\"} %s\n", s.suffix_str,
                                  s.extra_name, s.extra, v);
        } else {
            n += (size_t)snprintf(out + n, cap - n, "%s %s\n", s.suffix_str, v);
        }
    }
    cr_assert_eq(rc, 0);
    cr_assert_eq(promname_expand_next(&x, &s), 0, "stays done");
}

Test(promname, histogram_buckets_are_cumulative_and_inf_is_the_count)
{
    static const uint64_t counts[] = {3, 5, 1, 1};
    static const double bounds[] = {0.1, 0.5, 1};
    struct hist h;
    char out[1024];
    hist_build(&h, counts, 4, bounds, 3);
    h.pt.count = 10;
    h.pt.sum = 4.2;
    h.pt.has_sum = true;
    expand_all(MK_HISTOGRAM, &h.pt, &h.b, out, sizeof(out));
    cr_expect_str_eq(out, "_sum 4.2\n"
                          "_count 10\n"
                          "_bucket{le=\"0.1\"} 3\n"
                          "_bucket{le=\"0.5\"} 8\n"
                          "_bucket{le=\"1\"} 9\n"
                          "_bucket{le=\"+Inf\"} 10\n");
    /* +Inf is the count even when the buckets disagree; no _sum unless set */
    h.pt.count = 12;
    h.pt.has_sum = false;
    expand_all(MK_HISTOGRAM, &h.pt, &h.b, out, sizeof(out));
    cr_expect_str_eq(out, "_count 12\n"
                          "_bucket{le=\"0.1\"} 3\n"
                          "_bucket{le=\"0.5\"} 8\n"
                          "_bucket{le=\"1\"} 9\n"
                          "_bucket{le=\"+Inf\"} 12\n");
    h.pt.flags = PROMNAME_FLAG_NO_RECORDED_VALUE;
    h.pt.has_sum = true;
    expand_all(MK_HISTOGRAM, &h.pt, &h.b, out, sizeof(out));
    cr_expect_str_eq(out, "_sum STALE\n"
                          "_count STALE\n"
                          "_bucket{le=\"0.1\"} STALE\n"
                          "_bucket{le=\"0.5\"} STALE\n"
                          "_bucket{le=\"1\"} STALE\n"
                          "_bucket{le=\"+Inf\"} STALE\n");
    vbuf_fini(&h.b);
}

Test(promname, histogram_stops_at_the_shorter_list_and_formats_bounds_like_go)
{
    struct hist h;
    char out[1024];
    static const uint64_t c2[] = {1, 1};
    static const double b3[] = {1, 2, 3};
    hist_build(&h, c2, 2, b3, 3);
    h.pt.count = 4;
    expand_all(MK_HISTOGRAM, &h.pt, &h.b, out, sizeof(out));
    cr_expect_str_eq(out, "_count 4\n_bucket{le=\"1\"} 1\n_bucket{le=\"2\"} 2\n"
                          "_bucket{le=\"+Inf\"} 4\n");
    vbuf_fini(&h.b);

    static const uint64_t c1[] = {5};
    hist_build(&h, c1, 1, NULL, 0);
    h.pt.count = 5;
    expand_all(MK_HISTOGRAM, &h.pt, &h.b, out, sizeof(out));
    cr_expect_str_eq(out, "_count 5\n_bucket{le=\"+Inf\"} 5\n");
    vbuf_fini(&h.b);

    static const uint64_t c6[] = {1, 0, 0, 0, 0, 1, 1};
    static const double bo[] = {-1, 0.005, 1e-7, 2.5, 1e21, 1e300};
    hist_build(&h, c6, 7, bo, 6);
    h.pt.count = 3;
    expand_all(MK_HISTOGRAM, &h.pt, &h.b, out, sizeof(out));
    char want[1024];
    snprintf(want, sizeof(want),
             "_count 3\n_bucket{le=\"-1\"} 1\n_bucket{le=\"0.005\"} 1\n"
             "_bucket{le=\"0.0000001\"} 1\n_bucket{le=\"2.5\"} 1\n"
             "_bucket{le=\"1000000000000000000000\"} 1\n_bucket{le=\"1%0300d\"} 2\n"
             "_bucket{le=\"+Inf\"} 3\n",
             0);
    cr_expect_str_eq(out, want);
    vbuf_fini(&h.b);
}

Test(promname, summary_and_number_points_expand)
{
    struct vbuf b;
    struct point_row pt = {0};
    char out[512];
    vbuf_init(&b);
    vbuf_put_u32(&b, 2);
    vbuf_put_f64(&b, 0.5);
    vbuf_put_f64(&b, 1.5);
    vbuf_put_f64(&b, 0.99);
    vbuf_put_f64(&b, 3);
    pt.count = 7;
    pt.sum = 9;
    expand_all(MK_SUMMARY, &pt, &b, out, sizeof(out));
    cr_expect_str_eq(out, "_sum 9\n_count 7\n{quantile=\"0.5\"} 1.5\n{quantile=\"0.99\"} 3\n");

    struct vbuf empty;
    vbuf_init(&empty);
    pt.value_type = PV_INT;
    pt.value.i = 200;
    expand_all(MK_GAUGE, &pt, &empty, out, sizeof(out));
    cr_expect_str_eq(out, " 200\n");
    pt.value_type = PV_DOUBLE;
    pt.value.d = 1e-7;
    expand_all(MK_SUM, &pt, &empty, out, sizeof(out));
    cr_expect_str_eq(out, " 1e-07\n");
    pt.value_type = PV_NONE;
    expand_all(MK_GAUGE, &pt, &empty, out, sizeof(out));
    cr_expect_str_eq(out, " 0\n");
    pt.flags = PROMNAME_FLAG_NO_RECORDED_VALUE;
    expand_all(MK_GAUGE, &pt, &empty, out, sizeof(out));
    cr_expect_str_eq(out, " STALE\n");

    struct promname_expand x;
    cr_expect_eq(promname_expand_init(&x, MK_EXP_HISTOGRAM, &pt, b.p, b.len), -EINVAL);
    cr_expect_eq(promname_expand_init(&x, MK_NONE, &pt, b.p, b.len), -EINVAL);
    cr_expect_eq(promname_expand_init(&x, MK_SUMMARY, &pt, b.p, b.len - 1), -EBADMSG);
    cr_expect_eq(promname_expand_init(&x, MK_HISTOGRAM, &pt, b.p, 3), -EBADMSG);
    vbuf_fini(&b);
}

/* ---- PROMQL.md C.10, end to end ---- */

Test(promname, worked_example_c10_end_to_end)
{
    struct attrs_b res, pa;
    ab_init(&res);
    ab_init(&pa);
    kv_s(&res, "service.namespace", "shop");
    kv_s(&res, "service.name", "cart");
    kv_s(&res, "service.instance.id", "pod-1");
    kv_s(&res, "k8s.cluster.name", "eu1");
    kv_s(&res, "telemetry.sdk.language", "go");
    kv_s(&pa, "http.request.method", "GET");
    kv_i(&pa, "http.response.status_code", 200);

    struct scope_row scope = {0};
    scope.name = (struct mstr){"io.opentelemetry.http", 21};
    scope.version = (struct mstr){"1.2.0", 5};
    struct metric_row m = {0};
    m.name = (struct mstr){"http.server.request.duration", 28};
    m.unit = (struct mstr){"s", 1};
    m.kind = MK_HISTOGRAM;
    m.temporality = 2;
    static const uint64_t counts[] = {3, 5, 1, 1};
    static const double bounds[] = {0.1, 0.5, 1};
    struct hist h;
    hist_build(&h, counts, 4, bounds, 3);
    h.pt.count = 10;
    h.pt.sum = 4.2;
    h.pt.has_sum = true;
    h.pt.time_ns = 1700000000123456789ULL;

    cr_assert_eq(promname_temporality(m.kind, m.temporality), PROMNAME_T_CUMULATIVE);
    int t = promname_type_of(m.kind, m.monotonic);
    char name[128];
    int nl = promname_metric(m.name.p, m.name.len, m.unit.p, m.unit.len, (enum promname_type)t,
                             name, sizeof(name));
    cr_assert_eq(nl, 36);

    char rbuf[64];
    struct promname_resource r;
    cr_assert_eq(promname_resource_init(&r, res.b.p, res.b.len, res.count, rbuf, sizeof(rbuf)), 0);

    struct promname_label lab[16];
    char buf[256];
    struct promname_lset ls;
    promname_lset_init(&ls, lab, 16, buf, sizeof(buf));
    cr_assert_eq(promname_lset_add_attrs(&ls, pa.b.p, pa.b.len, pa.count, PROMNAME_SKIP_NAME), 0);
    cr_assert_eq(promname_lset_add_resource(&ls, &r), 0);
    /* promote_scope_metadata is off by default: the scope's labels exist
     * but are not merged, so no otel_scope_* labels */
    struct promname_label slab[8];
    struct promname_lset sls;
    promname_lset_init(&sls, slab, 8, NULL, 0);
    cr_assert_eq(promname_scope_labels(&sls, &scope, NULL, 0), 0);
    cr_assert_eq(sls.n, 3);
    cr_assert_eq(promname_lset_set(&ls, "__name__", 8, name, (size_t)nl), 0);

    char out[4096], line[512];
    size_t n = 0;
    struct promname_expand x;
    struct promname_sample s;
    int64_t ms = promname_ts_ms(h.pt.time_ns);
    cr_assert_eq(promname_expand_init(&x, m.kind, &h.pt, h.b.p, h.b.len), 0);
    while (promname_expand_next(&x, &s) == 1) {
        char v[PROMNAME_FMT_MAX];
        promname_fmt_value(s.value, v);
        render(&ls, s.suffix_str, s.extra_name, s.extra, line, sizeof(line));
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%s %s %lld\n", line, v, (long long)ms);
    }
    struct promname_label tlab[16];
    char tbuf[256];
    struct promname_lset tls;
    promname_lset_init(&tls, tlab, 16, tbuf, sizeof(tbuf));
    cr_assert_eq(promname_target_info(&tls, res.b.p, res.b.len, res.count, &r), 1);
    render(&tls, NULL, NULL, NULL, line, sizeof(line));
    n += (size_t)snprintf(out + n, sizeof(out) - n, "%s 1 %lld\n", line, (long long)ms);

#define J                                                                                          \
    "http_request_method=\"GET\",http_response_status_code=\"200\",instance=\"pod-1\","            \
    "job=\"shop/cart\""
    cr_expect_str_eq(
        out, "http_server_request_duration_seconds_sum{" J "} 4.2 1700000000123\n"
             "http_server_request_duration_seconds_count{" J "} 10 1700000000123\n"
             "http_server_request_duration_seconds_bucket{" J ",le=\"0.1\"} 3 1700000000123\n"
             "http_server_request_duration_seconds_bucket{" J ",le=\"0.5\"} 8 1700000000123\n"
             "http_server_request_duration_seconds_bucket{" J ",le=\"1\"} 9 1700000000123\n"
             "http_server_request_duration_seconds_bucket{" J ",le=\"+Inf\"} 10 1700000000123\n"
             "target_info{instance=\"pod-1\",job=\"shop/cart\",k8s_cluster_name=\"eu1\","
             "telemetry_sdk_language=\"go\"} 1 1700000000123\n");
#undef J
    cr_expect_str_eq(promname_meta_type((enum promname_type)t, PROMNAME_T_CUMULATIVE), "histogram");
    vbuf_fini(&h.b);
    vbuf_fini(&res.b);
    vbuf_fini(&pa.b);
}

/* A decoded batch's empty strings may be NULL pointers (a metric without a
 * unit over OTLP/JSON): the mapping treats them as "" (UBSan caught a
 * memchr on NULL at ingest). */
Test(promname, null_empty_unit_and_name_are_empty_strings)
{
    char out[64];
    cr_assert_eq(promname_metric("ok.gauge", 8, NULL, 0, PROMNAME_GAUGE, out, sizeof out), 8);
    cr_assert_str_eq(out, "ok_gauge");
    cr_assert_eq(promname_metric(NULL, 0, NULL, 0, PROMNAME_GAUGE, out, sizeof out), -EINVAL);
    cr_assert_eq(promname_unit(NULL, 0, out, sizeof out), 0);
}
