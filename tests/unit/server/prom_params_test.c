/*
 * prom_params_test.c - the Prometheus API's parameter readers
 * (server/prom_params.c) against what Prometheus 2.42's parseTime /
 * parseDuration / model.LabelNameRE / strconv.Atoi / %q give (PROMQL.md
 * A.2; values worked out by hand from Go's rules: Modf, fraction rounded
 * to ms with math.Round, time.Unix normalisation, timestamp.FromTime).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "server/prom_params.h"

static int64_t ms_of(const char *s)
{
    struct prom_time t;
    cr_assert_eq(prom_parse_time(s, strlen(s), &t), 0, "%s did not parse", s);
    cr_assert(t.nsec >= 0 && t.nsec < 1000000000);
    return prom_time_ms(&t);
}

static bool parses(const char *s)
{
    struct prom_time t;
    return prom_parse_time(s, strlen(s), &t) == 0;
}

TestSuite(prom_params);

Test(prom_params, float_times_round_the_fraction_to_milliseconds)
{
    cr_expect_eq(ms_of("1435781451.781"), 1435781451781LL);
    cr_expect_eq(ms_of("1435781451"), 1435781451000LL);
    cr_expect_eq(ms_of("4"), 4000);
    cr_expect_eq(ms_of("1.5"), 1500);
    cr_expect_eq(ms_of("1e9"), 1000000000000LL);
    cr_expect_eq(ms_of("0.0004"), 0);
    cr_expect_eq(ms_of("1.9996"), 2000);                        /* rounds up into the next second */
    cr_expect_eq(ms_of("1700000000.1234567"), 1700000000123LL); /* Grafana's 7 digits */
    cr_expect_eq(ms_of("-1.5"), -1500); /* time.Unix(-1, -5e8) = -2 s + 0.5 s */
    cr_expect_eq(ms_of("0x1p3"), 8000); /* Go's ParseFloat takes hex floats */
    cr_expect_eq(ms_of("1700000000000"), 1700000000000000LL); /* ms read as seconds: year 55,000 */
}

Test(prom_params, rfc3339_times_with_fraction_and_offset)
{
    cr_expect_eq(ms_of("2015-07-01T20:10:51.781Z"), 1435781451781LL);
    cr_expect_eq(ms_of("2015-07-01T20:10:51Z"), 1435781451000LL);
    cr_expect_eq(ms_of("2015-07-01T22:10:51.781+02:00"), 1435781451781LL);
    cr_expect_eq(ms_of("2015-07-01T18:10:51.781-02:00"), 1435781451781LL);
    cr_expect_eq(ms_of("2015-07-01T20:10:51.781999999999Z"), 1435781451781LL); /* truncated */
    cr_expect_eq(ms_of("2016-02-29T00:00:00Z"), 1456704000000LL);
    cr_expect_eq(ms_of("1970-01-01T00:00:00.5Z"), 500);
}

Test(prom_params, sentinel_min_and_max_times)
{
    cr_expect_eq(ms_of("-292273086-05-16T16:47:06Z"), PROM_MIN_TIME_MS);
    cr_expect_eq(ms_of("292277025-08-18T07:12:54.999999999Z"), PROM_MAX_TIME_MS);
}

Test(prom_params, what_go_refuses_is_refused)
{
    const char *bad[] = {"",
                         "abc",
                         " 1",
                         "1 ",
                         "0x10",
                         "nan(1)",
                         "+NaN",
                         "1e400",
                         "2015-07-01 20:10:51Z",
                         "2015-02-29T00:00:00Z",
                         "2015-07-01T20:10:60Z",
                         "2015-07-01T20:10:51",
                         "2015-07-01T20:10:51.781z",
                         "15-07-01T20:10:51Z"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect(!parses(bad[i]), "%s parsed", bad[i]);
    }
}

Test(prom_params, time_arithmetic_keeps_nanoseconds)
{
    struct prom_time a, b;
    cr_assert_eq(prom_parse_time("2015-07-01T20:10:51.000000001Z", 30, &a), 0);
    cr_assert_eq(prom_parse_time("2015-07-01T20:10:51Z", 20, &b), 0);
    cr_expect_eq(prom_time_sub_ns(&a, &b), 1);
    cr_expect(prom_time_before(&b, &a));
    cr_expect(!prom_time_before(&a, &a));
    struct prom_time t = prom_time_of_ms(-1500);
    cr_expect_eq(t.sec, -2);
    cr_expect_eq(t.nsec, 500000000);
    struct prom_time lo = {-9223309901258974LL, 0}, hi = {9223309901257974LL, 0};
    cr_expect_eq(prom_time_sub_ns(&hi, &lo), INT64_MAX); /* saturates like Go's Sub */
    cr_expect_eq(prom_time_sub_ns(&lo, &hi), INT64_MIN);
}

static int64_t dur(const char *s)
{
    int64_t ns;
    char err[256];
    cr_assert_eq(prom_parse_duration(s, strlen(s), &ns, err, sizeof(err)), 0, "%s: %s", s, err);
    return ns;
}

Test(prom_params, durations_are_float_seconds_or_prometheus_durations)
{
    cr_expect_eq(dur("15"), 15000000000LL);
    cr_expect_eq(dur("0.5"), 500000000LL);
    cr_expect_eq(dur("-1"), -1000000000LL);
    cr_expect_eq(dur("0"), 0);
    cr_expect_eq(dur("1m30s"), 90000000000LL);
    cr_expect_eq(dur("1m0s"), 60000000000LL);
    cr_expect_eq(dur("1h0m0s"), 3600000000000LL);
    cr_expect_eq(dur("1d"), 86400000000000LL);
    cr_expect_eq(dur("250ms"), 250000000LL);

    int64_t ns;
    char err[256];
    cr_expect_eq(prom_parse_duration("1.5s", 4, &ns, err, sizeof(err)), -EINVAL);
    cr_expect_str_eq(err, "cannot parse \"1.5s\" to a valid duration");
    cr_expect_eq(prom_parse_duration("", 0, &ns, err, sizeof(err)), -EINVAL);
    cr_expect_str_eq(err, "cannot parse \"\" to a valid duration");
    cr_expect_eq(prom_parse_duration("1e10", 4, &ns, err, sizeof(err)), -EINVAL);
    cr_expect_str_eq(err, "cannot parse \"1e10\" to a valid duration. It overflows int64");
    cr_expect_eq(prom_parse_duration("1s1m", 4, &ns, err, sizeof(err)), -EINVAL); /* order */
}

Test(prom_params, label_names)
{
    cr_expect(prom_label_name_valid("job", 3));
    cr_expect(prom_label_name_valid("__name__", 8));
    cr_expect(prom_label_name_valid("_a1", 3));
    cr_expect(!prom_label_name_valid("1a", 2));
    cr_expect(!prom_label_name_valid("bad-name", 8));
    cr_expect(!prom_label_name_valid("a:b", 3)); /* colons are for metric names only */
    cr_expect(!prom_label_name_valid("", 0));
}

Test(prom_params, integers_as_atoi)
{
    int64_t v;
    cr_expect_eq(prom_parse_int("+5", 2, &v), 0);
    cr_expect_eq(v, 5);
    cr_expect_eq(prom_parse_int("-3", 2, &v), 0);
    cr_expect_eq(v, -3);
    cr_expect_eq(prom_parse_int("-9223372036854775808", 20, &v), 0);
    cr_expect_eq(v, INT64_MIN);
    cr_expect_eq(prom_parse_int("9223372036854775808", 19, &v), -EINVAL);
    cr_expect_eq(prom_parse_int("x", 1, &v), -EINVAL);
    cr_expect_eq(prom_parse_int("", 0, &v), -EINVAL);
    cr_expect_eq(prom_parse_int("-", 1, &v), -EINVAL);
    cr_expect_eq(prom_parse_int("1.0", 3, &v), -EINVAL);
}

Test(prom_params, go_quote)
{
    char out[64];
    cr_expect_eq(prom_go_quote("bad-name", 8, out, sizeof(out)), 10);
    cr_expect_str_eq(out, "\"bad-name\"");
    prom_go_quote("a\"b\\\n\t", 6, out, sizeof(out));
    cr_expect_str_eq(out, "\"a\\\"b\\\\\\n\\t\"");
    prom_go_quote("\x01\x7f\xff", 3, out, sizeof(out));
    cr_expect_str_eq(out, "\"\\x01\\x7f\\xff\"");
    prom_go_quote("\xc3\xa9", 2, out, sizeof(out)); /* é stays */
    cr_expect_str_eq(out, "\"\xc3\xa9\"");
    char small[4];
    cr_expect_eq(prom_go_quote("abcdef", 6, small, sizeof(small)), 8);
    cr_expect_str_eq(small, "\"ab");
}

Test(prom_params, json_floats_as_encoding_json)
{
    char b[400];
    prom_fmt_json_float(4, b);
    cr_expect_str_eq(b, "4");
    prom_fmt_json_float(1.1, b);
    cr_expect_str_eq(b, "1.1");
    prom_fmt_json_float(1700000000.123, b);
    cr_expect_str_eq(b, "1700000000.123");
    prom_fmt_json_float(1e-7, b);
    cr_expect_str_eq(b, "1e-7");
    prom_fmt_json_float(1.5e-10, b);
    cr_expect_str_eq(b, "1.5e-10");
    prom_fmt_json_float(1e21, b);
    cr_expect_str_eq(b, "1e+21");
    prom_fmt_json_float(-0.25, b);
    cr_expect_str_eq(b, "-0.25");
}
