/*
 * promql_test.c - the PromQL front end (query/promql.c): every construct of
 * PromQL 2.42 parsed to its canonical form (Prometheus's String()), every
 * parse-time and type error with Prometheus's message and position, the
 * AST fields an evaluator reads, the literal decoders, regex semantics,
 * and the operator / nesting limits (run on a 1 MiB stack, an eighth of a
 * query worker's).
 *
 * The query strings come mostly from Prometheus's own parser tests
 * (promql/parser/parse_test.go at v2.42.0); the expected texts were worked
 * out from its grammar, lexer, checkAST and printer (generated_parser.y,
 * lex.go, parse.go, printer.go at that tag).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/promql.h"

#define STACK (1u << 20)

static char *fmt(const struct promql_expr *e)
{
    size_t n = promql_format(e, NULL, 0);
    char *buf = malloc(n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(promql_format(e, buf, n + 1), n);
    return buf;
}

static struct promql_expr *ok(const char *q)
{
    char err[512] = "";
    struct promql_expr *e = NULL;
    int rc = promql_parse(q, strlen(q), &e, err, sizeof(err));
    cr_assert_eq(rc, 0, "query [%s] failed: %s", q, err);
    cr_assert_not_null(e);
    return e;
}

/* ---- canonical forms ----------------------------------------------------- */

struct okcase {
    const char *q;
    const char *canon;
};

static const struct okcase oks[] = {
    /* numbers */
    {"1", "1"},
    {"+Inf", "+Inf"},
    {"-Inf", "-Inf"},
    {"inf", "+Inf"},
    {"NaN", "NaN"},
    {"nAn", "NaN"},
    {".5", "0.5"},
    {"5.", "5"},
    {"123.4567", "123.4567"},
    {"5e-3", "0.005"},
    {"5e3", "5000"},
    {"5E+3", "5000"},
    {"0xc", "12"},
    {"0XfF", "255"},
    {"0x1e", "30"},
    {"0755", "493"},
    {"089", "89"},
    {"0755.5", "755.5"},
    {"+5.5e-3", "0.0055"},
    {"-0755", "-493"},
    {"1000000", "1e+06"},
    {"123456", "123456"},
    {"1234567", "1.234567e+06"},
    {"0.0001", "0.0001"},
    {"0.00001", "1e-05"},
    {"1e21", "1e+21"},
    {"1e-400", "0"},
    {"-0", "-0"},
    {"9223372036854775807", "9.223372036854776e+18"},
    {"99999999999999999999", "1e+20"},
    {"0.1", "0.1"},
    {"1.7976931348623157e308", "1.7976931348623157e+308"},
    /* scalar arithmetic, precedence, associativity, unary */
    {"1 + 1", "1 + 1"},
    {"1 - 1", "1 - 1"},
    {"1 * 1", "1 * 1"},
    {"1 % 1", "1 % 1"},
    {"1 / 1", "1 / 1"},
    {"1 ^ 2", "1 ^ 2"},
    {"1 atan2 2", "1 atan2 2"},
    {"1 == bool 1", "1 == bool 1"},
    {"1 != bool 1", "1 != bool 1"},
    {"1 > bool 1", "1 > bool 1"},
    {"1 >= bool 1", "1 >= bool 1"},
    {"1 < bool 1", "1 < bool 1"},
    {"1 <= bool 1", "1 <= bool 1"},
    {"1 <= BOOL 1", "1 <= bool 1"},
    {"-1^2", "-1 ^ 2"},
    {"-1*2", "-1 * 2"},
    {"-1+2", "-1 + 2"},
    {"-1^-2", "-1 ^ -2"},
    {"+1 + -2 * 1", "1 + -2 * 1"},
    {"1 + 2/(3*1)", "1 + 2 / (3 * 1)"},
    {"1 < bool 2 - 1 * 2", "1 < bool 2 - 1 * 2"},
    {"- -1", "1"},
    {"+-1", "-1"},
    {"-(1)", "-(1)"},
    {"1 - -1", "1 - -1"},
    {"2 ^ 3 ^ 2", "2 ^ 3 ^ 2"},
    {"(2 ^ 3) ^ 2", "(2 ^ 3) ^ 2"},
    {"-some_metric", "-some_metric"},
    {"+some_metric", "+some_metric"},
    {" +some_metric", "+some_metric"},
    {"- - some_metric", "--some_metric"},
    {"nan + INF", "NaN + +Inf"},
    /* vector binary operators and matching */
    {"foo * bar", "foo * bar"},
    {"foo * sum", "foo * sum"},
    {"foo == 1", "foo == 1"},
    {"foo == bool 1", "foo == bool 1"},
    {"2.5 / bar", "2.5 / bar"},
    {"foo and bar", "foo and bar"},
    {"foo or bar", "foo or bar"},
    {"foo unless bar", "foo unless bar"},
    {"foo AND bar", "foo and bar"},
    {"foo + bar or bla and blub", "foo + bar or bla and blub"},
    {"foo and bar unless baz or qux", "foo and bar unless baz or qux"},
    {"a or b and c unless d == e + f * g ^ h", "a or b and c unless d == e + f * g ^ h"},
    {"bar + on(foo) bla / on(baz, buz) group_right(test) blub",
     "bar + on (foo) bla / on (baz, buz) group_right (test) blub"},
    {"foo * on(test,blub) bar", "foo * on (test, blub) bar"},
    {"foo * on(test,blub) group_left bar", "foo * on (test, blub) group_left () bar"},
    {"foo and on(test,blub) bar", "foo and on (test, blub) bar"},
    {"foo and on() bar", "foo and on () bar"},
    {"foo and ignoring(test,blub) bar", "foo and ignoring (test, blub) bar"},
    {"foo and ignoring() bar", "foo and bar"},
    {"foo unless on(bar) baz", "foo unless on (bar) baz"},
    {"foo / on(test,blub) group_left(bar) bar", "foo / on (test, blub) group_left (bar) bar"},
    {"foo / ignoring(test,blub) group_left(blub) bar",
     "foo / ignoring (test, blub) group_left (blub) bar"},
    {"foo - on(test,blub) group_right(bar,foo) bar",
     "foo - on (test, blub) group_right (bar, foo) bar"},
    {"foo - ignoring(test,blub) group_right(bar,foo,) bar",
     "foo - ignoring (test, blub) group_right (bar, foo) bar"},
    {"a == bool on(x) b", "a == bool on (x) b"},
    {"a > bool ignoring(x) group_left(y) b", "a > bool ignoring (x) group_left (y) b"},
    {"1 + on() 2", "1 + 2"},
    {"foo + on() 1", "foo + 1"},
    {"foo unless on(start) bar", "foo unless on (start) bar"},
    {"foo unless on(end) bar", "foo unless on (end) bar"},
    {"sum(x) / on(a, b) group_left(c) sum(y)", "sum(x) / on (a, b) group_left (c) sum(y)"},
    {"vector(1) + on(a) vector(2)", "vector(1) + on (a) vector(2)"},
    {"x == y", "x == y"},
    {"time() > bool time()", "time() > bool time()"},
    /* selectors */
    {"foo", "foo"},
    {"min", "min"},
    {"sum", "sum"},
    {"by", "by"},
    {"offset", "offset"},
    {"and", "and"},
    {"start", "start"},
    {"end", "end"},
    {"start{end=\"foo\"}", "start{end=\"foo\"}"},
    {"end{start=\"foo\"}", "end{start=\"foo\"}"},
    {"foo:bar{a=\"bc\"}", "foo:bar{a=\"bc\"}"},
    {":foo", ":foo"},
    {"foo{NaN='bc'}", "foo{NaN=\"bc\"}"},
    {"foo{bar='}'}", "foo{bar=\"}\"}"},
    {"foo{a=\"b\", foo!=\"bar\", test=~\"test\", bar!~\"baz\"}",
     "foo{a=\"b\",bar!~\"baz\",foo!=\"bar\",test=~\"test\"}"},
    {"foo{a=\"b\", foo!=\"bar\", test=~\"test\", bar!~\"baz\",}",
     "foo{a=\"b\",bar!~\"baz\",foo!=\"bar\",test=~\"test\"}"},
    {"{a=~\".+\"}", "{a=~\".+\"}"},
    {"{__name__=~\"node_.*\"}", "{__name__=~\"node_.*\"}"},
    {"{__name__=\"foo\"}", "{__name__=\"foo\"}"},
    {"{__name__=\"\", a=\"b\"}", "{a=\"b\"}"},
    {"foo{}", "foo"},
    {"foo{a=\"\\u00e9\\t\\x01\"}", "foo{a=\"\xc3\xa9\\t\\x01\"}"},
    {"foo{a=`raw\\n`}", "foo{a=\"raw\\\\n\"}"},
    {"foo # comment", "foo"},
    {"foo{a=\"b\" # c\n}", "foo{a=\"b\"}"},
    {"foo\n  +\nbar", "foo + bar"},
    /* offset and @ */
    {"foo offset 5m", "foo offset 5m"},
    {"foo offset -7m", "foo offset -7m"},
    {"foo offset - 5m", "foo offset -5m"},
    {"foo OFFSET 1h30m", "foo offset 1h30m"},
    {"foo OFFSET 1m30ms", "foo offset 1m30ms"},
    {"foo offset 90s", "foo offset 1m30s"},
    {"foo offset 1d", "foo offset 1d"},
    {"foo offset 14d", "foo offset 2w"},
    {"foo offset 365d", "foo offset 1y"},
    {"foo offset 379d", "foo offset 379d"},
    {"foo @ 1603774568", "foo @ 1603774568.000"},
    {"foo @ -100", "foo @ -100.000"},
    {"foo @ - 5", "foo @ -5.000"},
    {"foo @ +5", "foo @ 5.000"},
    {"foo @ .3", "foo @ 0.300"},
    {"foo @ 3.", "foo @ 3.000"},
    {"foo @ 3.33", "foo @ 3.330"},
    {"foo @ 3.3333", "foo @ 3.333"},
    {"foo @ 3e2", "foo @ 300.000"},
    {"foo @ 3e-1", "foo @ 0.300"},
    {"foo @ 0xA", "foo @ 10.000"},
    {"foo @ -3.3e1", "foo @ -33.000"},
    {"foo @ start()", "foo @ start()"},
    {"foo @ end()", "foo @ end()"},
    {"foo @ START ( )", "foo @ start()"},
    {"foo offset 5m @ 100", "foo @ 100.000 offset 5m"},
    {"foo @ 100 offset 5m", "foo @ 100.000 offset 5m"},
    {"foo @ start() [5m]", "foo[5m] @ start()"},
    /* ranges */
    {"test[5s]", "test[5s]"},
    {"test[5m]", "test[5m]"},
    {"test[ 5m ]", "test[5m]"},
    {"foo[5m30s]", "foo[5m30s]"},
    {"foo[90m]", "foo[1h30m]"},
    {"foo[1000ms]", "foo[1s]"},
    {"foo[292y]", "foo[292y]"},
    {"test[5h] OFFSET 5m", "test[5h] offset 5m"},
    {"test[5d] OFFSET 10s", "test[5d] offset 10s"},
    {"test[5w] offset 2w", "test[5w] offset 2w"},
    {"test{a=\"b\"}[5y] OFFSET 3d", "test{a=\"b\"}[5y] offset 3d"},
    {"test{a=\"b\"}[5y] @ 1603774699", "test{a=\"b\"}[5y] @ 1603774699.000"},
    {"test[5y] @ start()", "test[5y] @ start()"},
    {"test[5y] @ end()", "test[5y] @ end()"},
    {"test[5m] offset 1m @ 2", "test[5m] @ 2.000 offset 1m"},
    /* subqueries */
    {"foo{bar=\"baz\"}[10m:6s]", "foo{bar=\"baz\"}[10m:6s]"},
    {"foo{bar=\"baz\"}[10m5s:1h6ms]", "foo{bar=\"baz\"}[10m5s:1h6ms]"},
    {"foo[10m:]", "foo[10m:]"},
    {"foo[5m x]", "foo[5m:]"},
    {"foo[5m : 1m]", "foo[5m:1m]"},
    {"min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:5s])",
     "min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:5s])"},
    {"min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:])[4m:3s]",
     "min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:])[4m:3s]"},
    {"min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:] offset 4m)[4m:3s]",
     "min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:] offset 4m)[4m:3s]"},
    {"min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:] @ 1603775091)[4m:3s]",
     "min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:] @ 1603775091.000)[4m:3s]"},
    {"min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:] @ -160377509)[4m:3s]",
     "min_over_time(rate(foo{bar=\"baz\"}[2s])[5m:] @ -160377509.000)[4m:3s]"},
    {"sum without(and, by, avg, count, alert, annotations)(some_metric) [30m:10s]",
     "sum without (and, by, avg, count, alert, annotations) (some_metric)[30m:10s]"},
    {"some_metric OFFSET 1m [10m:5s]", "some_metric offset 1m[10m:5s]"},
    {"some_metric @ 123 [10m:5s]", "some_metric @ 123.000[10m:5s]"},
    {"some_metric @ 123 offset 1m [10m:5s]", "some_metric @ 123.000 offset 1m[10m:5s]"},
    {"some_metric offset 1m @ 123 [10m:5s]", "some_metric @ 123.000 offset 1m[10m:5s]"},
    {"some_metric[10m:5s] offset 1m @ 123", "some_metric[10m:5s] @ 123.000 offset 1m"},
    {"(foo + bar{nm=\"val\"})[5m:]", "(foo + bar{nm=\"val\"})[5m:]"},
    {"(foo + bar{nm=\"val\"})[5m:] offset 10m", "(foo + bar{nm=\"val\"})[5m:] offset 10m"},
    {"(foo + bar{nm=\"val\"} @ 1234)[5m:] @ 1603775019",
     "(foo + bar{nm=\"val\"} @ 1234.000)[5m:] @ 1603775019.000"},
    {"foo[10m:6s] @ start()", "foo[10m:6s] @ start()"},
    {"foo[10m:6s] @ end()", "foo[10m:6s] @ end()"},
    {"foo[10m:6s] offset -1m", "foo[10m:6s] offset -1m"},
    {"avg_over_time(foo[5m:1m] offset 5m)", "avg_over_time(foo[5m:1m] offset 5m)"},
    /* aggregations */
    {"sum by (foo)(some_metric)", "sum by (foo) (some_metric)"},
    {"avg by (foo)(some_metric)", "avg by (foo) (some_metric)"},
    {"max by (foo)(some_metric)", "max by (foo) (some_metric)"},
    {"min by (foo)(some_metric)", "min by (foo) (some_metric)"},
    {"count by (foo)(some_metric)", "count by (foo) (some_metric)"},
    {"group by (foo)(some_metric)", "group by (foo) (some_metric)"},
    {"sum without (foo) (some_metric)", "sum without (foo) (some_metric)"},
    {"sum (some_metric) without (foo)", "sum without (foo) (some_metric)"},
    {"sum (some_metric) by (foo)", "sum by (foo) (some_metric)"},
    {"stddev(some_metric)", "stddev(some_metric)"},
    {"stdvar by (foo)(some_metric)", "stdvar by (foo) (some_metric)"},
    {"sum by ()(some_metric)", "sum(some_metric)"},
    {"sum without ()(some_metric)", "sum without () (some_metric)"},
    {"sum by (foo,bar,)(some_metric)", "sum by (foo, bar) (some_metric)"},
    {"sum by (foo,)(some_metric)", "sum by (foo) (some_metric)"},
    {"SUM BY (Foo) (x)", "sum by (Foo) (x)"},
    {"topk(5, some_metric)", "topk(5, some_metric)"},
    {"bottomk(5, some_metric)", "bottomk(5, some_metric)"},
    {"topk(3, x) by (a)", "topk by (a) (3, x)"},
    {"quantile(0.9, x)", "quantile(0.9, x)"},
    {"quantile without (a) (scalar(y), x)", "quantile without (a) (scalar(y), x)"},
    {"count_values(\"value\", some_metric)", "count_values(\"value\", some_metric)"},
    {"count_values without (a) ('v', x)", "count_values without (a) (\"v\", x)"},
    {"sum without(and, by, avg, count, alert, annotations)(some_metric)",
     "sum without (and, by, avg, count, alert, annotations) (some_metric)"},
    {"sum by (on, ignoring, group_left, bool, offset, start, end, atan2) (x)",
     "sum by (on, ignoring, group_left, bool, offset, start, end, atan2) (x)"},
    {"sum(sum)", "sum(sum)"},
    {"a + sum", "a + sum"},
    {"sum(x) + sum by (a) (y)", "sum(x) + sum by (a) (y)"},
    /* functions */
    {"time()", "time()"},
    {"pi()", "pi()"},
    {"floor(some_metric{foo!=\"bar\"})", "floor(some_metric{foo!=\"bar\"})"},
    {"rate(some_metric[5m])", "rate(some_metric[5m])"},
    {"rate (some_metric[5m])", "rate(some_metric[5m])"},
    {"round(some_metric)", "round(some_metric)"},
    {"round(some_metric, 5)", "round(some_metric, 5)"},
    {"day_of_week()", "day_of_week()"},
    {"hour(x)", "hour(x)"},
    {"absent(nonexistent{job=\"myjob\"})", "absent(nonexistent{job=\"myjob\"})"},
    {"absent_over_time(x[5m])", "absent_over_time(x[5m])"},
    {"label_join(up, \"foo\", \",\", \"a\", \"b\", \"c\")",
     "label_join(up, \"foo\", \",\", \"a\", \"b\", \"c\")"},
    {"label_join(up, \"foo\", \",\")", "label_join(up, \"foo\", \",\")"},
    {"label_replace(up, \"a\", \"$1\", \"b\", \"(.*)\")",
     "label_replace(up, \"a\", \"$1\", \"b\", \"(.*)\")"},
    {"holt_winters(x[5m], 0.5, 0.5)", "holt_winters(x[5m], 0.5, 0.5)"},
    {"histogram_quantile(0.9, rate(x_bucket[5m]))", "histogram_quantile(0.9, rate(x_bucket[5m]))"},
    {"histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))",
     "histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))"},
    {"histogram_fraction(0, 0.2, x)", "histogram_fraction(0, 0.2, x)"},
    {"quantile_over_time(0.5, x[1h])", "quantile_over_time(0.5, x[1h])"},
    {"predict_linear(x[1h], 3600)", "predict_linear(x[1h], 3600)"},
    {"clamp(x, 0, 1)", "clamp(x, 0, 1)"},
    {"vector(scalar(x))", "vector(scalar(x))"},
    {"sort_desc(x)", "sort_desc(x)"},
    {"timestamp(x)", "timestamp(x)"},
    {"present_over_time(x[5m])", "present_over_time(x[5m])"},
    {"last_over_time(x[5m] @ end())", "last_over_time(x[5m] @ end())"},
    /* strings */
    {"\"double-quoted string \\\" with escaped quote\"",
     "\"double-quoted string \\\" with escaped quote\""},
    {"'single-quoted string \\' with escaped quote'",
     "\"single-quoted string ' with escaped quote\""},
    {"`backtick-quoted string`", "\"backtick-quoted string\""},
    {"\"\\a\\b\\f\\n\\r\\t\\v\\\\\\\" - \\xFF\\377\\u1234\\U00010111\\U0001011111\xe2\x98\xba\"",
     "\"\\a\\b\\f\\n\\r\\t\\v\\\\\\\" - \\xff\\xff\xe1\x88\xb4\xf0\x90\x84\x91\xf0\x90\x84\x91"
     "11\xe2\x98\xba\""},
    {"'\\a\\b\\f\\n\\r\\t\\v\\\\\\' - \\xFF\\377\\u1234\\U00010111\\U0001011111\xe2\x98\xba'",
     "\"\\a\\b\\f\\n\\r\\t\\v\\\\' - \\xff\\xff\xe1\x88\xb4\xf0\x90\x84\x91\xf0\x90\x84\x91"
     "11\xe2\x98\xba\""},
    {"\"\\ufffd\"", "\"\\ufffd\""},
    {"\"a\\000b\"", "\"a\\x00b\""},
    {"\"\\u00a0\\u200b\"", "\"\\u00a0\\u200b\""},
    {"`multi\nline`", "\"multi\\nline\""},
};

Test(promql, parses_to_prometheus_canonical_form_and_back)
{
    for (size_t i = 0; i < sizeof(oks) / sizeof(oks[0]); i++) {
        struct promql_expr *e = ok(oks[i].q);
        char *s = fmt(e);
        cr_expect_str_eq(s, oks[i].canon, "query [%s]: got [%s], want [%s]", oks[i].q, s,
                         oks[i].canon);
        promql_free(e);
        /* the canonical form parses again to itself */
        struct promql_expr *e2 = ok(s);
        char *s2 = fmt(e2);
        cr_expect_str_eq(s2, s, "canonical [%s] reprints as [%s]", s, s2);
        promql_free(e2);
        free(s2);
        free(s);
    }
}

/* ---- errors -------------------------------------------------------------- */

struct errcase {
    const char *q;
    const char *err; /* the whole message */
};

static const struct errcase errs[] = {
    /* lexer */
    {"", "1:1: parse error: no expression found in input"},
    {"   ", "1:1: parse error: no expression found in input"},
    {"# just a comment\n\n", "1:1: parse error: no expression found in input"},
    {"1+", "1:3: parse error: unexpected end of input"},
    {".", "1:1: parse error: unexpected character: '.'"},
    {"2.5.", "1:4: parse error: unexpected character: '.'"},
    {"100..4", "1:5: parse error: unexpected number \".4\""},
    {"0deadbeef", "1:1: parse error: bad number or duration syntax: \"0de\""},
    {"1foo", "1:1: parse error: bad number or duration syntax: \"1\""},
    {"1 /", "1:4: parse error: unexpected end of input"},
    {"*1", "1:1: parse error: unexpected <op:*>"},
    {"(1))", "1:5: parse error: unexpected right parenthesis ')'"},
    {"((1)", "1:5: parse error: unclosed left parenthesis"},
    {"(", "1:2: parse error: unclosed left parenthesis"},
    {"foo[5m", "1:7: parse error: unclosed left bracket"},
    {"foo[5m[", "1:7: parse error: unexpected left bracket '['"},
    {"foo]", "1:4: parse error: unexpected right bracket ']'"},
    {"foo)", "1:5: parse error: unexpected right parenthesis ')'"},
    {"1 !~ 1", "1:3: parse error: unexpected character after '!': '~'"},
    {"1 =~ 1", "1:3: parse error: unexpected character after '=': '~'"},
    {"a !", "1:3: parse error: unexpected character after '!': '\xef\xbf\xbd'"},
    {"foo \xe2\x98\xba", "1:5: parse error: unexpected character: '\xe2\x98\xba'"},
    {"foo $", "1:5: parse error: unexpected character: '$'"},
    {"{", "1:2: parse error: unexpected end of input inside braces"},
    {"}", "1:1: parse error: unexpected character: '}'"},
    {"some{", "1:6: parse error: unexpected end of input inside braces"},
    {"some}", "1:5: parse error: unexpected character: '}'"},
    {"foo{{", "1:5: parse error: unexpected left brace '{'"},
    {"some_metric{a:b=\"b\"}", "1:14: parse error: unexpected character inside braces: ':'"},
    {"foo{a*\"b\"}", "1:6: parse error: unexpected character inside braces: '*'"},
    {"foo{a>=\"b\"}", "1:6: parse error: unexpected character inside braces: '>'"},
    {"foo{a!\"b\"}", "1:6: parse error: unexpected character after '!' inside braces: '\"'"},
    {"foo{1}", "1:5: parse error: unexpected character inside braces: '1'"},
    {"some_metric{a=\"\xff\"}", "1:15: parse error: invalid UTF-8 rune"},
    {"\"\xef\xbf\xbd\"", "1:1: parse error: invalid UTF-8 rune"},
    {"label_replace(a, `b`, `c\xff`, `d`, `.*`)", "1:23: parse error: invalid UTF-8 rune"},
    {"`", "1:1: parse error: unterminated raw string"},
    {"`\\``", "1:4: parse error: unterminated raw string"},
    {"\"", "1:1: parse error: unterminated quoted string"},
    {"\"a\nb\"", "1:1: parse error: unterminated quoted string"},
    {"x + 'abc", "1:5: parse error: unterminated quoted string"},
    {"\"\\", "1:1: parse error: escape sequence not terminated"},
    {"\"\\x4", "1:1: parse error: escape sequence not terminated"},
    {"\"\\c\"", "1:1: parse error: unknown escape sequence U+0063 'c'"},
    {"'\\\"'", "1:1: parse error: unknown escape sequence U+0022 '\"'"},
    {"\"\\'\"", "1:1: parse error: unknown escape sequence U+0027 '''"},
    {"\"\\x.\"", "1:1: parse error: illegal character U+002E '.' in escape sequence"},
    {"\"\\x4g\"", "1:1: parse error: illegal character U+0067 'g' in escape sequence"},
    {"\"\\08\"", "1:1: parse error: illegal character U+0038 '8' in escape sequence"},
    {"\"\\400\"", "1:1: parse error: escape sequence is an invalid Unicode code point"},
    {"\"\\ud800\"", "1:1: parse error: escape sequence is an invalid Unicode code point"},
    {"\"\\U00110000\"", "1:1: parse error: escape sequence is an invalid Unicode code point"},
    /* numbers */
    {"1e", "1:1: parse error: error parsing number: strconv.ParseFloat: parsing \"1e\": invalid "
           "syntax"},
    {"0x", "1:1: parse error: error parsing number: strconv.ParseFloat: parsing \"0x\": invalid "
           "syntax"},
    {"0x1.8", "1:1: parse error: error parsing number: strconv.ParseFloat: parsing \"0x1.8\": "
              "invalid syntax"},
    {"0x10000000000000000", "1:1: parse error: error parsing number: strconv.ParseFloat: "
                            "parsing \"0x10000000000000000\": invalid syntax"},
    {"1e400", "1:1: parse error: error parsing number: strconv.ParseFloat: parsing \"1e400\": "
              "value out of range"},
    /* generic syntax errors */
    {"-=", "1:2: parse error: unexpected \"=\""},
    {"++-++-+-+-<", "1:11: parse error: unexpected <op:<>"},
    {"e-+=/(0)", "1:4: parse error: unexpected \"=\""},
    {"*test", "1:1: parse error: unexpected <op:*>"},
    {"foo bar", "1:5: parse error: unexpected identifier \"bar\""},
    {"foo a:b", "1:5: parse error: unexpected metric identifier \"a:b\""},
    {"1 2", "1:3: parse error: unexpected number \"2\""},
    {"1 12345678901", "1:3: parse error: unexpected number \"1234567890\"..."},
    {"1 'abc'", "1:3: parse error: unexpected string \"'abc'\""},
    {"1 5m", "1:3: parse error: unexpected duration \"5m\""},
    {"5m", "1:1: parse error: unexpected duration \"5m\""},
    {"foo sum", "1:5: parse error: unexpected <aggr:sum>"},
    {"bool", "1:1: parse error: unexpected <bool>"},
    {"foo{a=\"b\"}{c=\"d\"}", "1:11: parse error: unexpected \"{\""},
    {"foo\n  +\nbar baz", "3:5: parse error: unexpected identifier \"baz\""},
    {"1 +\n\n  *", "3:3: parse error: unexpected <op:*>"},
    {"start()", "1:6: parse error: unexpected \"(\""},
    {"end()", "1:4: parse error: unexpected \"(\""},
    {"foo:bar(x)", "1:8: parse error: unexpected \"(\""},
    {"rate(foo bar)", "1:10: parse error: unexpected identifier \"bar\""},
    {"(foo bar)", "1:6: parse error: unexpected identifier \"bar\""},
    {"f(a,,b)", "1:5: parse error: unexpected \",\""},
    {"a - on(b) ignoring(c) d", "1:11: parse error: unexpected <ignoring>"},
    {"foo + group_left(baz) bar", "1:7: parse error: unexpected <group_left>"},
    {"foo == on(x) bool bar", "1:14: parse error: unexpected <bool>"},
    {"foo + on bar", "1:10: parse error: unexpected identifier \"bar\" in grouping opts, "
                     "expected \"(\""},
    {"foo + on(a b) bar", "1:12: parse error: unexpected identifier \"b\" in grouping opts, "
                          "expected \",\" or \")\""},
    /* label matching */
    {"some_metric{a=b}",
     "1:15: parse error: unexpected identifier \"b\" in label matching, expected string"},
    {"foo{gibberish}", "1:14: parse error: unexpected \"}\" in label matching, expected label "
                       "matching operator"},
    {"foo{__name__= =}", "1:15: parse error: unexpected \"=\" in label matching, expected string"},
    {"foo{,}", "1:5: parse error: unexpected \",\" in label matching, expected identifier or "
               "\"}\""},
    {"foo{a=\"b\",,}", "1:11: parse error: unexpected \",\" in label matching, expected "
                       "identifier or \"}\""},
    {"foo{__name__ == \"bar\"}",
     "1:15: parse error: unexpected \"=\" in label matching, expected string"},
    {"foo{__name__=\"bar\" lol}", "1:20: parse error: unexpected identifier \"lol\" in label "
                                  "matching, expected \",\" or \"}\""},
    /* selector checks */
    {"{}", "1:1: parse error: vector selector must contain at least one non-empty matcher"},
    {"{x=\"\"}", "1:1: parse error: vector selector must contain at least one non-empty matcher"},
    {"{x=~\".*\"}",
     "1:1: parse error: vector selector must contain at least one non-empty matcher"},
    {"{x!~\".+\"}",
     "1:1: parse error: vector selector must contain at least one non-empty matcher"},
    {"{x!=\"a\"}", "1:1: parse error: vector selector must contain at least one non-empty matcher"},
    {"{__name__=\"\"}",
     "1:1: parse error: vector selector must contain at least one non-empty matcher"},
    {"{x=~\"a|\"}", "1:1: parse error: vector selector must contain at least one non-empty "
                    "matcher"},
    {"rate({a=\"\"}[5m])", "1:6: parse error: vector selector must contain at least one "
                           "non-empty matcher"},
    {"foo{__name__=\"bar\"}",
     "1:1: parse error: metric name must not be set twice: \"foo\" or \"bar\""},
    {"foo{__name__=~\"bar\"}",
     "1:1: parse error: metric name must not be set twice: \"foo\" or \"bar\""},
    /* regexes (qlex's RE2 checks; 2.x wraps the pattern as ^(?:re)$) */
    {"foo{a=~\"(foo\"}",
     "1:5: parse error: invalid regular expression \"^(?:(foo)$\": missing closing parenthesis"},
    {"foo{a=~\"a(?=b)\"}", "1:5: parse error: invalid regular expression \"^(?:a(?=b))$\": "
                           "lookahead assertions are not supported (RE2 syntax) (at offset 5)"},
    {"foo{a!~\"a\\\\1\"}", "1:5: parse error: invalid regular expression \"^(?:a\\1)$\": "
                           "backreferences are not supported (RE2 syntax) (at offset 5)"},
    /* durations, ranges, subqueries */
    {"foo[5mm]", "1:5: parse error: bad duration syntax: \"5mm\""},
    {"foo[5m1]", "1:5: parse error: bad duration syntax: \"5m1\""},
    {"foo[a]", "1:5: parse error: bad duration syntax: \"\""},
    {"foo[5m:1m1]", "1:8: parse error: bad number or duration syntax: \"1m1\""},
    {"foo[5y1hs]", "1:5: parse error: not a valid duration string: \"5y1hs\""},
    {"foo[5m1h]", "1:5: parse error: not a valid duration string: \"5m1h\""},
    {"foo[5m1m]", "1:5: parse error: not a valid duration string: \"5m1m\""},
    {"foo[1.5m]", "1:5: parse error: not a valid duration string: \"1.5m\""},
    {"foo[0m]", "1:5: parse error: duration must be greater than 0"},
    {"foo[5m:0s]", "1:8: parse error: duration must be greater than 0"},
    {"foo[300000y]", "1:5: parse error: duration out of range"},
    {"foo[\"5m\"]", "1:5: parse error: missing unit character in duration"},
    {"foo[]", "1:5: parse error: missing unit character in duration"},
    {"foo[1]", "1:5: parse error: missing unit character in duration"},
    {"foo[5m:abc]", "1:8: parse error: unexpected colon 'a'"},
    {"foo[5m offset 1m]", "1:9: parse error: unexpected colon 'f'"},
    {"foo[5m:1m 1m]", "1:11: parse error: unexpected duration \"1m\" in subquery selector, "
                      "expected \"]\""},
    {"foo[5m 1m]", "1:8: parse error: unexpected duration \"1m\" in subquery or range, "
                   "expected \":\" or \"]\""},
    {"some_metric[5m] OFFSET 1",
     "1:24: parse error: unexpected number \"1\" in offset, expected duration"},
    {"some_metric[5m] OFFSET 1mm", "1:24: parse error: bad number or duration syntax: \"1mm\""},
    {"some_metric[5m] OFFSET",
     "1:23: parse error: unexpected end of input in offset, expected duration"},
    {"foo offset +5m", "1:12: parse error: unexpected <op:+> in offset, expected duration"},
    {"foo offset 0s", "1:12: parse error: duration must be greater than 0"},
    {"some_metric OFFSET 1m[5m]", "1:22: parse error: no offset modifiers allowed before range"},
    {"some_metric[5m] @ 1m",
     "1:19: parse error: unexpected duration \"1m\" in @, expected timestamp"},
    {"some_metric[5m] @", "1:18: parse error: unexpected end of input in @, expected timestamp"},
    {"foo @ start", "1:12: parse error: unexpected end of input in @, expected timestamp"},
    {"foo @ start(", "1:13: parse error: unclosed left parenthesis"},
    {"foo @ start(1)", "1:13: parse error: unexpected number \"1\" in @, expected timestamp"},
    {"foo @ --1", "1:8: parse error: unexpected <op:-> in @, expected timestamp"},
    {"some_metric @ 1234 [5m]", "1:20: parse error: no @ modifiers allowed before range"},
    {"(foo + bar)[5m]", "1:12: parse error: ranges only allowed for vector selectors"},
    {"rate(food[1m])[1h] offset 1h", "1:15: parse error: ranges only allowed for vector selectors"},
    {"rate(food[1m])[1h] @ 100", "1:15: parse error: ranges only allowed for vector selectors"},
    {"foo[5m][5m]", "1:8: parse error: ranges only allowed for vector selectors"},
    {"1 offset 1d", "1:1: parse error: offset modifier must be preceded by an instant vector "
                    "selector or range vector selector or a subquery"},
    {"(foo) offset 1d", "1:1: parse error: offset modifier must be preceded by an instant "
                        "vector selector or range vector selector or a subquery"},
    {"foo offset 1s offset 2s", "1:1: parse error: offset may not be set multiple times"},
    {"foo[5m] offset 1s offset 2s", "1:1: parse error: offset may not be set multiple times"},
    {"rate(some_metric[5m]) @ 1234", "1:1: parse error: @ modifier must be preceded by an "
                                     "instant vector selector or range vector selector or a "
                                     "subquery"},
    {"foo @ start() @ end()", "1:1: parse error: @ <timestamp> may not be set multiple times"},
    {"foo @ 1 @ 2", "1:1: parse error: @ <timestamp> may not be set multiple times"},
    {"foo @ +Inf", "1:1: parse error: timestamp out of bounds for @ modifier: +Inf"},
    {"foo @ -Inf", "1:1: parse error: timestamp out of bounds for @ modifier: -Inf"},
    {"foo @ NaN", "1:1: parse error: timestamp out of bounds for @ modifier: NaN"},
    {"foo @ 1e19", "1:1: parse error: timestamp out of bounds for @ modifier: "
                   "10000000000000000000.000000"},
    {"test[5d] OFFSET 10s [10m:5s]",
     "1:1: parse error: subquery is only allowed on instant vector, got matrix instead"},
    {"(foo + bar{nm=\"val\"})[5m:][10m:5s]",
     "1:1: parse error: subquery is only allowed on instant vector, got matrix instead"},
    {"1[5m:]", "1:1: parse error: subquery is only allowed on instant vector, got scalar instead"},
    /* aggregations */
    {"sum without(==)(some_metric)",
     "1:13: parse error: unexpected <op:==> in grouping opts, expected label"},
    {"sum without(,)(some_metric)",
     "1:13: parse error: unexpected \",\" in grouping opts, expected label"},
    {"sum without(foo,,)(some_metric)",
     "1:17: parse error: unexpected \",\" in grouping opts, expected label"},
    {"sum by (a:b) (x)",
     "1:9: parse error: unexpected metric identifier \"a:b\" in grouping opts, expected label"},
    {"sum by (nan) (x)",
     "1:9: parse error: unexpected number \"nan\" in grouping opts, expected label"},
    {"sum by", "1:7: parse error: unexpected end of input in grouping opts, expected \"(\""},
    {"sum(x) by", "1:10: parse error: unexpected end of input in grouping opts, expected \"(\""},
    {"sum some_metric by (test)", "1:5: parse error: unexpected identifier \"some_metric\""},
    {"sum (some_metric) by test",
     "1:22: parse error: unexpected identifier \"test\" in grouping opts, expected \"(\""},
    {"sum () by (test)", "1:1: parse error: no arguments for aggregate expression provided"},
    {"MIN keep_common (some_metric)", "1:5: parse error: unexpected identifier \"keep_common\""},
    {"MIN (some_metric) keep_common", "1:19: parse error: unexpected identifier \"keep_common\""},
    {"sum (some_metric) without (test) by (test)", "1:34: parse error: unexpected <by>"},
    {"sum without (test) (some_metric) by (test)", "1:34: parse error: unexpected <by>"},
    {"sum(foo bar)", "1:9: parse error: unexpected identifier \"bar\" in aggregation"},
    {"sum(rate(x y))", "1:12: parse error: unexpected identifier \"y\" in aggregation"},
    {"sum(,)", "1:5: parse error: unexpected \",\" in aggregation"},
    {"sum by (a) foo", "1:12: parse error: unexpected identifier \"foo\" in aggregation"},
    {"sum(a, b)", "1:1: parse error: wrong number of arguments for aggregate expression "
                  "provided, expected 1, got 2"},
    {"topk(some_metric)", "1:1: parse error: wrong number of arguments for aggregate expression "
                          "provided, expected 2, got 1"},
    {"topk(some_metric,)", "1:17: parse error: trailing commas not allowed in function call args"},
    {"topk(some_metric, other_metric)", "1:6: parse error: expected type scalar in aggregation "
                                        "parameter, got instant vector"},
    {"topk(1, x[5m])", "1:9: parse error: expected type instant vector in aggregation "
                       "expression, got range vector"},
    {"topk(y, x[5m])", "1:9: parse error: expected type instant vector in aggregation "
                       "expression, got range vector"},
    {"count_values(5, other_metric)",
     "1:14: parse error: expected type string in aggregation parameter, got scalar"},
    {"count_values(x, y)",
     "1:14: parse error: expected type string in aggregation parameter, got instant vector"},
    {"quantile(\"a\", x)",
     "1:10: parse error: expected type scalar in aggregation parameter, got string"},
    {"sum(1)", "1:5: parse error: expected type instant vector in aggregation expression, got "
               "scalar"},
    /* functions */
    {"floor()", "1:1: parse error: expected 1 argument(s) in call to \"floor\", got 0"},
    {"floor(some_metric, other_metric)",
     "1:1: parse error: expected 1 argument(s) in call to \"floor\", got 2"},
    {"floor(some_metric, 1)", "1:1: parse error: expected 1 argument(s) in call to \"floor\", "
                              "got 2"},
    {"floor(1)", "1:7: parse error: expected type instant vector in call to function \"floor\", "
                 "got scalar"},
    {"hour(some_metric, some_metric, some_metric)",
     "1:1: parse error: expected at most 1 argument(s) in call to \"hour\", got 3"},
    {"round(x, 1, 2)", "1:1: parse error: expected at most 2 argument(s) in call to \"round\", "
                       "got 3"},
    {"round()", "1:1: parse error: expected at least 1 argument(s) in call to \"round\", got 0"},
    {"label_join(up, \"foo\")",
     "1:1: parse error: expected at least 3 argument(s) in call to \"label_join\", got 2"},
    {"label_join(up, \"dst\", \",\", 1)", "1:28: parse error: expected type string in call to "
                                          "function \"label_join\", got scalar"},
    {"label_replace(up, \"a\", \"b\", \"c\")",
     "1:1: parse error: expected 5 argument(s) in call to \"label_replace\", got 4"},
    {"time(some_metric)", "1:1: parse error: expected 0 argument(s) in call to \"time\", got 1"},
    {"non_existent_function_far_bar()",
     "1:1: parse error: unknown function with name \"non_existent_function_far_bar\""},
    {"Rate(x[5m])", "1:1: parse error: unknown function with name \"Rate\""},
    {"a>b()", "1:3: parse error: unknown function with name \"b\""},
    {"rate(some_metric)", "1:6: parse error: expected type range vector in call to function "
                          "\"rate\", got instant vector"},
    {"rate(avg)", "1:6: parse error: expected type range vector in call to function \"rate\", "
                  "got instant vector"},
    {"abs(\"a\")", "1:5: parse error: expected type instant vector in call to function \"abs\", "
                   "got string"},
    {"sort(x[5m])", "1:6: parse error: expected type instant vector in call to function "
                    "\"sort\", got range vector"},
    {"histogram_quantile(x, y)", "1:20: parse error: expected type scalar in call to function "
                                 "\"histogram_quantile\", got instant vector"},
    {"vector(x)", "1:8: parse error: expected type scalar in call to function \"vector\", got "
                  "instant vector"},
    {"rate(x[5m],)", "1:11: parse error: trailing commas not allowed in function call args"},
    /* binary / unary type checks */
    {"1 and 1", "1:1: parse error: set operator \"and\" not allowed in binary scalar expression"},
    {"1 == 1", "1:3: parse error: comparisons between scalars must use BOOL modifier"},
    {"1 or 1", "1:1: parse error: set operator \"or\" not allowed in binary scalar expression"},
    {"1 unless 1",
     "1:1: parse error: set operator \"unless\" not allowed in binary scalar expression"},
    {"foo and 1", "1:1: parse error: set operator \"and\" not allowed in binary scalar expression"},
    {"1 and foo", "1:1: parse error: set operator \"and\" not allowed in binary scalar expression"},
    {"foo or 1", "1:1: parse error: set operator \"or\" not allowed in binary scalar expression"},
    {"1 or foo", "1:1: parse error: set operator \"or\" not allowed in binary scalar expression"},
    {"foo unless 1",
     "1:1: parse error: set operator \"unless\" not allowed in binary scalar expression"},
    {"1 unless foo",
     "1:1: parse error: set operator \"unless\" not allowed in binary scalar expression"},
    {"scalar(x) and scalar(y)",
     "1:1: parse error: set operator \"and\" not allowed in binary scalar expression"},
    {"time() > time()", "1:8: parse error: comparisons between scalars must use BOOL modifier"},
    {"(1)   <   (2)", "1:7: parse error: comparisons between scalars must use BOOL modifier"},
    {"1 or on(bar) foo", "1:1: parse error: vector matching only allowed between instant vectors"},
    {"foo == on(bar) 10", "1:1: parse error: vector matching only allowed between instant vectors"},
    {"foo and on(bar) group_left(baz) bar",
     "1:1: parse error: no grouping allowed for \"and\" operation"},
    {"foo and on(bar) group_right(baz) bar",
     "1:1: parse error: no grouping allowed for \"and\" operation"},
    {"foo or on(bar) group_left(baz) bar",
     "1:1: parse error: no grouping allowed for \"or\" operation"},
    {"foo or on(bar) group_right(baz) bar",
     "1:1: parse error: no grouping allowed for \"or\" operation"},
    {"foo unless on(bar) group_left(baz) bar",
     "1:1: parse error: no grouping allowed for \"unless\" operation"},
    {"foo unless on(bar) group_right(baz) bar",
     "1:1: parse error: no grouping allowed for \"unless\" operation"},
    {"foo unless ignoring(bar) group_right bar",
     "1:1: parse error: no grouping allowed for \"unless\" operation"},
    {"http_requests{group=\"production\"} + on(instance) group_left(job,instance) "
     "cpu_count{type=\"smp\"}",
     "1:35: parse error: label \"instance\" must not occur in ON and GROUP clause at once"},
    {"foo + bool bar", "1:5: parse error: bool modifier can only be used on comparison operators"},
    {"foo + bool 10", "1:5: parse error: bool modifier can only be used on comparison operators"},
    {"foo and bool 10", "1:5: parse error: bool modifier can only be used on comparison operators"},
    {"\"a\" + 1",
     "1:1: parse error: binary expression must contain only scalar and instant vector types"},
    {"1 + \"a\"",
     "1:5: parse error: binary expression must contain only scalar and instant vector types"},
    {"x[5m] + 1",
     "1:1: parse error: binary expression must contain only scalar and instant vector types"},
    {"1 + x[5m]",
     "1:5: parse error: binary expression must contain only scalar and instant vector types"},
    {"-\"string\"", "1:1: parse error: unary expression only allowed on expressions of type "
                    "scalar or instant vector, got \"string\""},
    {"-test[5m]", "1:1: parse error: unary expression only allowed on expressions of type "
                  "scalar or instant vector, got \"range vector\""},
    {"1 + -x[1m:]", "1:5: parse error: unary expression only allowed on expressions of type "
                    "scalar or instant vector, got \"range vector\""},
};

Test(promql, rejects_with_prometheus_message_and_position)
{
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        char err[512] = "";
        struct promql_expr *e = (struct promql_expr *)1;
        int rc = promql_parse(errs[i].q, strlen(errs[i].q), &e, err, sizeof(err));
        cr_expect_eq(rc, -EINVAL, "query [%s]: rc %d, want -EINVAL (%s)", errs[i].q, rc, err);
        cr_expect_null(e, "query [%s]: *out must be NULL on error", errs[i].q);
        cr_expect_str_eq(err, errs[i].err, "query [%s]:\n got [%s]\nwant [%s]", errs[i].q, err,
                         errs[i].err);
    }
}

Test(promql, error_message_is_truncated_not_overrun)
{
    char err[16];
    memset(err, 'x', sizeof(err));
    struct promql_expr *e;
    cr_assert_eq(promql_parse("foo bar", 7, &e, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "1:5: parse erro");
    cr_assert_eq(promql_parse("foo bar", 7, &e, NULL, 0), -EINVAL);
    cr_assert_null(e);
}

Test(promql, source_need_not_be_nul_terminated)
{
    const char q[] = {'u', 'p', '{', 'a', '=', '"', 'b', '"', '}', ' ', '+'};
    struct promql_expr *e;
    char err[128];
    cr_assert_eq(promql_parse(q, 9, &e, err, sizeof(err)), 0, "%s", err);
    char *s = fmt(e);
    cr_assert_str_eq(s, "up{a=\"b\"}");
    free(s);
    promql_free(e);
    cr_assert_eq(promql_parse(q, 11, &e, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "1:12: parse error: unexpected end of input");
}

/* ---- AST fields ---------------------------------------------------------- */

static void str_is(struct promql_str s, const char *want)
{
    cr_assert_eq(s.n, strlen(want), "[%.*s] vs [%s]", (int)s.n, s.s, want);
    cr_assert_eq(memcmp(s.s, want, s.n), 0, "[%.*s] vs [%s]", (int)s.n, s.s, want);
    cr_assert_eq(s.s[s.n], '\0');
}

Test(promql, selector_fields_name_matchers_offset_at)
{
    struct promql_expr *e =
        ok("foo:bar{a=\"b\", c!=\"d\", e=~\"f.*\", g!~'h'} offset -5m @ 12.3456");
    cr_assert_eq(e->kind, PROMQL_VECTOR);
    cr_assert_eq(e->type, PROMQL_TYPE_VECTOR);
    cr_assert_eq(e->pos, 0);
    cr_assert_eq(e->end,
                 strlen("foo:bar{a=\"b\", c!=\"d\", e=~\"f.*\", g!~'h'} offset -5m @ 12.3456"));
    str_is(e->sel.name, "foo:bar");
    cr_assert_eq(e->sel.n_matchers, 5);
    const struct promql_matcher *m = e->sel.matchers;
    str_is(m[0].name, "a");
    cr_assert_eq(m[0].op, PROMQL_MATCH_EQ);
    str_is(m[0].value, "b");
    cr_assert_null(m[0].re);
    cr_assert_eq(m[1].op, PROMQL_MATCH_NEQ);
    cr_assert_eq(m[2].op, PROMQL_MATCH_RE);
    str_is(m[2].value, "f.*");
    cr_assert_not_null(m[2].re);
    cr_assert_eq(m[3].op, PROMQL_MATCH_NRE);
    str_is(m[3].value, "h");
    str_is(m[4].name, "__name__");
    cr_assert_eq(m[4].op, PROMQL_MATCH_EQ);
    str_is(m[4].value, "foo:bar");
    cr_assert_eq(e->sel.mod.offset_ms, -300000);
    cr_assert_eq(e->sel.mod.at, PROMQL_AT_TIME);
    cr_assert_eq(e->sel.mod.at_ms, 12346);
    promql_free(e);

    e = ok("{__name__=~\"x|y\"}");
    cr_assert_eq(e->sel.name.n, 0);
    cr_assert_eq(e->sel.n_matchers, 1);
    promql_free(e);
}

Test(promql, matrix_and_subquery_fields)
{
    struct promql_expr *e = ok("rate(x[5m] offset 1h @ end())");
    cr_assert_eq(e->kind, PROMQL_CALL);
    cr_assert_eq(e->func->id, PROMQL_FN_RATE);
    cr_assert_eq(e->type, PROMQL_TYPE_VECTOR);
    cr_assert_eq(e->n_args, 1);
    struct promql_expr *m = e->args[0];
    cr_assert_eq(m->kind, PROMQL_MATRIX);
    cr_assert_eq(m->type, PROMQL_TYPE_MATRIX);
    cr_assert_eq(m->range_ms, 300000);
    cr_assert_eq(m->inner->kind, PROMQL_VECTOR);
    cr_assert_eq(m->inner->sel.mod.offset_ms, 3600000);
    cr_assert_eq(m->inner->sel.mod.at, PROMQL_AT_END);
    cr_assert_eq(m->pos, 5);
    cr_assert_eq(m->end, 28);
    promql_free(e);

    e = ok("max_over_time(sum(x)[30m:1m] offset 2m @ start())");
    struct promql_expr *s = e->args[0];
    cr_assert_eq(s->kind, PROMQL_SUBQUERY);
    cr_assert_eq(s->range_ms, 1800000);
    cr_assert_eq(s->step_ms, 60000);
    cr_assert_eq(s->mod.offset_ms, 120000);
    cr_assert_eq(s->mod.at, PROMQL_AT_START);
    cr_assert_eq(s->inner->kind, PROMQL_AGG);
    promql_free(e);

    e = ok("x[30m:]");
    cr_assert_eq(e->kind, PROMQL_SUBQUERY);
    cr_assert_eq(e->step_ms, 0);
    cr_assert_eq(e->type, PROMQL_TYPE_MATRIX);
    promql_free(e);
}

Test(promql, aggregation_fields)
{
    struct promql_expr *e = ok("topk without (a, b) (3, x)");
    cr_assert_eq(e->kind, PROMQL_AGG);
    cr_assert_eq(e->agg, PROMQL_AGG_TOPK);
    cr_assert(e->without);
    cr_assert_eq(e->n_grouping, 2);
    str_is(e->grouping[0], "a");
    str_is(e->grouping[1], "b");
    cr_assert_eq(e->param->kind, PROMQL_NUMBER);
    cr_assert_eq(e->param->num, 3.0);
    cr_assert_eq(e->inner->kind, PROMQL_VECTOR);
    promql_free(e);

    e = ok("count_values(\"v\\n\", x) by (job)");
    cr_assert_eq(e->agg, PROMQL_AGG_COUNT_VALUES);
    cr_assert_not(e->without);
    cr_assert_eq(e->param->kind, PROMQL_STRING);
    str_is(e->param->str, "v\n");
    cr_assert_eq(e->end, strlen("count_values(\"v\\n\", x) by (job)"));
    promql_free(e);

    e = ok("sum(x)");
    cr_assert_null(e->param);
    cr_assert_eq(e->n_grouping, 0);
    promql_free(e);
}

Test(promql, binary_fields_precedence_and_matching)
{
    /* a + b * c ^ d ^ e: + at the root, ^ right-associative */
    struct promql_expr *e = ok("a + b * c ^ d ^ e");
    cr_assert_eq(e->op, PROMQL_OP_ADD);
    struct promql_expr *mul = e->rhs;
    cr_assert_eq(mul->op, PROMQL_OP_MUL);
    struct promql_expr *pow = mul->rhs;
    cr_assert_eq(pow->op, PROMQL_OP_POW);
    cr_assert_eq(pow->lhs->kind, PROMQL_VECTOR);
    str_is(pow->lhs->sel.name, "c");
    cr_assert_eq(pow->rhs->op, PROMQL_OP_POW);
    promql_free(e);

    /* left-associative: a - b - c = (a - b) - c */
    e = ok("a - b - c");
    cr_assert_eq(e->lhs->kind, PROMQL_BINARY);
    str_is(e->rhs->sel.name, "c");
    promql_free(e);

    /* unary binds looser than ^, tighter than *: -a ^ b * c = (-(a ^ b)) * c */
    e = ok("-a ^ b * c");
    cr_assert_eq(e->op, PROMQL_OP_MUL);
    cr_assert_eq(e->lhs->kind, PROMQL_UNARY);
    cr_assert(e->lhs->neg);
    cr_assert_eq(e->lhs->inner->op, PROMQL_OP_POW);
    promql_free(e);

    /* -1 is a number, -(1) is not */
    e = ok("-1");
    cr_assert_eq(e->kind, PROMQL_NUMBER);
    cr_assert_eq(e->num, -1.0);
    promql_free(e);

    e = ok("a > bool on(x, y) group_left(z) b");
    cr_assert_eq(e->op, PROMQL_OP_GTR);
    cr_assert(e->return_bool);
    cr_assert_not_null(e->vm);
    cr_assert_eq(e->vm->card, PROMQL_CARD_MANY_TO_ONE);
    cr_assert(e->vm->on);
    cr_assert_eq(e->vm->n_labels, 2);
    str_is(e->vm->labels[1], "y");
    cr_assert_eq(e->vm->n_include, 1);
    str_is(e->vm->include[0], "z");
    promql_free(e);

    e = ok("a or ignoring(x) b");
    cr_assert_eq(e->vm->card, PROMQL_CARD_MANY_TO_MANY);
    cr_assert_not(e->vm->on);
    promql_free(e);

    e = ok("a * b");
    cr_assert_eq(e->vm->card, PROMQL_CARD_ONE_TO_ONE);
    promql_free(e);

    /* vector matching is dropped unless both sides are instant vectors */
    e = ok("a / on() 2");
    cr_assert_null(e->vm);
    promql_free(e);

    e = ok("1 + 2 * 3");
    cr_assert_eq(e->type, PROMQL_TYPE_SCALAR);
    cr_assert_null(e->vm);
    promql_free(e);
}

Test(promql, string_literal_decoded_with_nul_inside)
{
    struct promql_expr *e = ok("\"a\\x00b\\u00e9\"");
    cr_assert_eq(e->kind, PROMQL_STRING);
    cr_assert_eq(e->type, PROMQL_TYPE_STRING);
    cr_assert_eq(e->str.n, 5);
    cr_assert_eq(memcmp(e->str.s, "a\0b\xc3\xa9", 5), 0);
    promql_free(e);
}

Test(promql, function_table_is_sorted_complete_and_typed)
{
    const struct promql_func *f = promql_funcs();
    for (int i = 0; i < PROMQL_FN_COUNT_; i++) {
        cr_assert_eq(f[i].id, (enum promql_func_id)i, "%s", f[i].name);
        if (i > 0) {
            cr_assert_lt(strcmp(f[i - 1].name, f[i].name), 0, "%s", f[i].name);
        }
        cr_assert_eq(promql_func_lookup(f[i].name, strlen(f[i].name)), &f[i]);
    }
    cr_assert_eq(PROMQL_FN_COUNT_, 70);
    cr_assert_null(promql_func_lookup("rat", 3));
    cr_assert_null(promql_func_lookup("rates", 5));
    cr_assert_null(promql_func_lookup("sum", 3)); /* an aggregation, not a function */
    const struct promql_func *lj = promql_func_lookup("label_join", 10);
    cr_assert_eq(lj->variadic, -1);
    cr_assert_eq(lj->n_args, 4);
    const struct promql_func *sc = promql_func_lookup("scalar", 6);
    cr_assert_eq(sc->ret, PROMQL_TYPE_SCALAR);
    cr_assert_eq(promql_func_lookup("quantile_over_time", 18)->args[1], PROMQL_TYPE_MATRIX);
}

Test(promql, every_function_accepts_its_signature)
{
    /* one well-typed call per function, built from the table */
    const struct promql_func *f = promql_funcs();
    for (int i = 0; i < PROMQL_FN_COUNT_; i++) {
        char q[256];
        size_t n = (size_t)snprintf(q, sizeof(q), "%s(", f[i].name);
        for (unsigned a = 0; a < f[i].n_args; a++) {
            const char *arg = f[i].args[a] == PROMQL_TYPE_SCALAR   ? "1"
                              : f[i].args[a] == PROMQL_TYPE_STRING ? "\"s\""
                              : f[i].args[a] == PROMQL_TYPE_MATRIX ? "x[5m]"
                                                                   : "x";
            n += (size_t)snprintf(q + n, sizeof(q) - n, "%s%s", a ? ", " : "", arg);
        }
        snprintf(q + n, sizeof(q) - n, ")");
        struct promql_expr *e = ok(q);
        cr_assert_eq(e->func, &f[i]);
        cr_assert_eq(e->type, f[i].ret);
        char *s = fmt(e);
        cr_assert_str_eq(s, q);
        free(s);
        promql_free(e);
    }
}

/* ---- regex semantics (2.x: ^(?:re)$, '.' not matching a newline) ------------ */

static bool mt(const struct promql_expr *e, size_t i, const char *v)
{
    return promql_matcher_matches(&e->sel.matchers[i], v, strlen(v));
}

Test(promql, regex_matchers_are_fully_anchored_like_2x)
{
    struct promql_expr *e =
        ok("{a=~\"10\\\\.0\", b=~\"a.c\", c!~\"x|y\", d=\"v\", e!=\"v\", f=~\"a)|(b\"}");
    cr_assert(mt(e, 0, "10.0"));
    cr_assert_not(mt(e, 0, "10.0.0.1"));
    cr_assert_not(mt(e, 0, "110.0"));
    cr_assert_not(mt(e, 0, "10x0"));
    cr_assert(mt(e, 1, "abc"));
    cr_assert_not(mt(e, 1, "a\nc")); /* 2.x: no dotall (3.x would match) */
    cr_assert_not(mt(e, 1, "abc\n"));
    cr_assert_not(mt(e, 2, "x"));
    cr_assert(mt(e, 2, "xy"));
    cr_assert(mt(e, 2, ""));
    cr_assert(mt(e, 3, "v"));
    cr_assert_not(mt(e, 3, ""));
    cr_assert_not(mt(e, 4, "v"));
    cr_assert(promql_matcher_matches(&e->sel.matchers[4], NULL, 0)); /* missing label = "" */
    /* the 2.x wrapping makes `a)|(b` the alternation ^(?:a) | (b)$ */
    cr_assert(mt(e, 5, "a"));
    cr_assert(mt(e, 5, "axyz"));
    cr_assert(mt(e, 5, "zzb"));
    cr_assert_not(mt(e, 5, "zz"));
    promql_free(e);
}

/* ---- literal decoders ----------------------------------------------------- */

Test(promql, durations_follow_model_parse_duration)
{
    static const struct {
        const char *s;
        int rc;
        int64_t ms;
    } c[] = {
        {"0", 0, 0},
        {"5m", 0, 300000},
        {"1h30m", 0, 5400000},
        {"1m0s", 0, 60000},
        {"1h0m0s", 0, 3600000},
        {"1d", 0, 86400000},
        {"1w", 0, 604800000},
        {"1y", 0, 31536000000},
        {"250ms", 0, 250},
        {"1y2w3d4h5m6s7ms", 0,
         31536000000 + 2 * 604800000LL + 3 * 86400000LL + 4 * 3600000LL + 5 * 60000 + 6000 + 7},
        {"0005s", 0, 5000},
        {"292y", 0, 292LL * 31536000000},
        {"293y", -ERANGE, 0},
        {"99999999999999999999s", -ERANGE, 0},
        {"", -EINVAL, 0},
        {"5", -EINVAL, 0},
        {"m", -EINVAL, 0},
        {"1.5h", -EINVAL, 0},
        {"5m1h", -EINVAL, 0},
        {"5s5s", -EINVAL, 0},
        {"1ms1s", -EINVAL, 0},
        {"1hs", -EINVAL, 0},
        {"-5m", -EINVAL, 0},
        {"1us", -EINVAL, 0},
        {"5m ", -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        int64_t ms = -1;
        int rc = promql_parse_duration(c[i].s, strlen(c[i].s), &ms);
        cr_expect_eq(rc, c[i].rc, "[%s]: rc %d want %d", c[i].s, rc, c[i].rc);
        if (c[i].rc == 0) {
            cr_expect_eq(ms, c[i].ms, "[%s]: %lld want %lld", c[i].s, (long long)ms,
                         (long long)c[i].ms);
        }
    }
    static const struct {
        int64_t ms;
        const char *s;
    } f[] = {
        {0, "0s"},
        {1, "1ms"},
        {1500, "1s500ms"},
        {90000, "1m30s"},
        {3600000, "1h"},
        {86400000, "1d"},
        {1209600000, "2w"},
        {31536000000, "1y"},
        {777600000, "9d"},
        {32140800000, "372d"},
        {31536000000 + 86400000, "366d"},
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        char b[64];
        cr_expect_eq(promql_format_duration(f[i].ms, b, sizeof(b)), strlen(f[i].s));
        cr_expect_str_eq(b, f[i].s, "%lld", (long long)f[i].ms);
    }
}

Test(promql, numbers_follow_go_parse_int_then_parse_float)
{
    static const struct {
        const char *s;
        int rc;
        double v;
    } c[] = {
        {"0", 0, 0},
        {"12", 0, 12},
        {"0x1F", 0, 31},
        {"017", 0, 15},
        {"019", 0, 19},
        {"1.5e3", 0, 1500},
        {".5", 0, 0.5},
        {"5.", 0, 5},
        {"Inf", 0, INFINITY},
        {"1e308", 0, 1e308},
        {"1e309", -ERANGE, 0},
        {"1e", -EINVAL, 0},
        {"0x", -EINVAL, 0},
        {"", -EINVAL, 0},
        {"1.2.3", -EINVAL, 0},
        {"0x8000000000000000", -EINVAL, 0},
        {"0x7fffffffffffffff", 0, 9223372036854775807.0},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        double v = -1;
        int rc = promql_parse_number(c[i].s, strlen(c[i].s), &v);
        cr_expect_eq(rc, c[i].rc, "[%s]: rc %d want %d", c[i].s, rc, c[i].rc);
        if (c[i].rc == 0) {
            cr_expect_eq(v, c[i].v, "[%s]: %g want %g", c[i].s, v, c[i].v);
        }
    }
    double nan;
    cr_assert_eq(promql_parse_number("NaN", 3, &nan), 0);
    cr_assert(isnan(nan));
}

Test(promql, floats_print_as_go_percent_v)
{
    static const struct {
        double v;
        const char *s;
    } c[] = {
        {1, "1"},
        {-2.5, "-2.5"},
        {0.1 + 0.2, "0.30000000000000004"},
        {1e6, "1e+06"},
        {999999, "999999"},
        {1e-4, "0.0001"},
        {1.5e-5, "1.5e-05"},
        {1e100, "1e+100"},
        {5e-324, "5e-324"},
        {123456.789, "123456.789"},
        {1234567.5, "1.2345675e+06"},
        {INFINITY, "+Inf"},
        {-INFINITY, "-Inf"},
        {NAN, "NaN"},
        {-0.0, "-0"},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        char b[64];
        promql_format_float(c[i].v, b, sizeof(b));
        cr_expect_str_eq(b, c[i].s, "%.17g", c[i].v);
    }
}

Test(promql, unquote_is_strutil_unquote)
{
    char out[64];
    cr_assert_eq(promql_unquote("\"a\\tb\"", 6, out), 3);
    cr_assert_eq(memcmp(out, "a\tb", 3), 0);
    cr_assert_eq(promql_unquote("'\\''", 4, out), 1);
    cr_assert_eq(out[0], '\'');
    cr_assert_eq(promql_unquote("`a\\n`", 5, out), 3);
    cr_assert_eq(memcmp(out, "a\\n", 3), 0);
    cr_assert_eq(promql_unquote("\"\\U0001F600\"", 12, out), 4);
    cr_assert_eq(memcmp(out, "\xf0\x9f\x98\x80", 4), 0);
    cr_assert_eq(promql_unquote("\"\\'\"", 4, out), -EINVAL);
    cr_assert_eq(promql_unquote("\"a", 2, out), -EINVAL);
    cr_assert_eq(promql_unquote("\"a\nb\"", 5, out), -EINVAL);
    cr_assert_eq(promql_unquote("\"\\400\"", 6, out), -EINVAL);
    cr_assert_eq(promql_unquote("x", 1, out), -EINVAL);
}

Test(promql, selector_entry_point_for_match_params)
{
    struct promql_expr *e;
    char err[256];
    cr_assert_eq(promql_parse_selector("{}", 2, &e, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(e->kind, PROMQL_VECTOR);
    cr_assert_eq(e->sel.n_matchers, 0);
    promql_free(e);
    const char *q = "up{job=~\"a|b\"}";
    cr_assert_eq(promql_parse_selector(q, strlen(q), &e, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(e->sel.n_matchers, 2);
    promql_free(e);
    cr_assert_eq(promql_parse_selector("up[5m]", 6, &e, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "1:3: parse error: unexpected \"[\"");
    cr_assert_eq(promql_parse_selector("sum(up)", 7, &e, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "1:4: parse error: unexpected \"(\"");
    cr_assert_eq(promql_parse_selector("1", 1, &e, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "1:1: parse error: unexpected number \"1\"");
}

/* ---- limits (hostile input) ------------------------------------------------ */

struct limit_job {
    char *q;
    int rc;
    char err[256];
    char *printed;
};

static void *limit_run(void *arg)
{
    struct limit_job *j = arg;
    struct promql_expr *e = NULL;
    j->rc = promql_parse(j->q, strlen(j->q), &e, j->err, sizeof(j->err));
    if (j->rc == 0) {
        size_t n = promql_format(e, NULL, 0);
        j->printed = malloc(n + 1);
        if (j->printed != NULL) {
            promql_format(e, j->printed, n + 1);
        }
        promql_free(e);
    }
    return NULL;
}

/* Parses and prints |q| on a thread with a 1 MiB stack. */
static struct limit_job run_small_stack(char *q)
{
    struct limit_job j = {.q = q};
    pthread_attr_t a;
    pthread_t t;
    cr_assert_eq(pthread_attr_init(&a), 0);
    cr_assert_eq(pthread_attr_setstacksize(&a, STACK), 0);
    cr_assert_eq(pthread_create(&t, &a, limit_run, &j), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    pthread_attr_destroy(&a);
    return j;
}

/* "<head><unit * n><tail>" */
static char *repeat(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * n + tl + 1);
    cr_assert_not_null(s);
    memcpy(s, head, hl);
    for (size_t i = 0; i < n; i++) {
        memcpy(s + hl + i * ul, unit, ul);
    }
    memcpy(s + hl + ul * n, tail, tl + 1);
    return s;
}

/* n opening units, |mid|, n closing units */
static char *nest(const char *open, size_t n, const char *mid, const char *close)
{
    char *head = repeat("", open, n, mid);
    char *s = repeat(head, close, n, "");
    free(head);
    return s;
}

static void expect_accepted(char *q)
{
    struct limit_job j = run_small_stack(q);
    cr_assert_eq(j.rc, 0, "%.40s...: %s", q, j.err);
    cr_assert_not_null(j.printed);
    free(j.printed);
    free(q);
}

static void expect_refused(char *q, const char *err)
{
    struct limit_job j = run_small_stack(q);
    cr_assert_eq(j.rc, -E2BIG, "%.40s...: rc %d %s", q, j.rc, j.err);
    cr_assert_str_eq(j.err, err);
    free(q);
}

Test(promql, chain_of_1024_binary_operators_accepted_1025_refused)
{
    char *q = repeat("1", "+1", PROMQL_MAX_OPS, "");
    struct limit_job j = run_small_stack(q);
    cr_assert_eq(j.rc, 0, "%s", j.err);
    char *want = repeat("1", " + 1", PROMQL_MAX_OPS, "");
    cr_assert_str_eq(j.printed, want);
    free(want);
    free(j.printed);
    free(q);
    /* the 1025th operator is at byte 2 * 1024 + 1 */
    expect_refused(repeat("1", "+1", PROMQL_MAX_OPS + 1, ""),
                   "1:2050: parse error: query too complex: more than 1024 operators");
    /* right-associative chains are just as flat for the parser */
    expect_accepted(repeat("2", "^2", PROMQL_MAX_OPS, ""));
    expect_refused(repeat("2", "^2", PROMQL_MAX_OPS + 1, ""),
                   "1:2050: parse error: query too complex: more than 1024 operators");
    expect_accepted(repeat("x", " or x", PROMQL_MAX_OPS, ""));
}

Test(promql, chains_of_unary_operators_and_subqueries_share_the_budget)
{
    expect_accepted(repeat("", "-", PROMQL_MAX_OPS, "x"));
    expect_refused(repeat("", "-", PROMQL_MAX_OPS + 1, "x"),
                   "1:1025: parse error: query too complex: more than 1024 operators");
    /* 1024 subqueries parse (a subquery of a subquery is then a type error) */
    char *q = repeat("x", "[1m:]", PROMQL_MAX_OPS, "");
    struct limit_job j = run_small_stack(q);
    cr_assert_eq(j.rc, -EINVAL);
    cr_assert_str_eq(
        j.err, "1:1: parse error: subquery is only allowed on instant vector, got matrix instead");
    free(q);
    char *sq = repeat("(x)", "[1m:]", PROMQL_MAX_OPS + 1, "");
    expect_refused(sq, "1:5124: parse error: query too complex: more than 1024 operators");
    /* 512 binary operators with a unary minus on each operand: 1024 + 1 */
    expect_refused(repeat("-1", "+-1", 512, ""),
                   "1:1537: parse error: query too complex: more than 1024 operators");
}

Test(promql, nesting_of_64_levels_accepted_65_refused)
{
    expect_accepted(nest("(", 64, "1", ")"));
    expect_refused(nest("(", 65, "1", ")"),
                   "1:65: parse error: query nested too deeply (more than 64 levels)");
    expect_accepted(nest("abs(", 64, "x", ")"));
    expect_refused(nest("abs(", 65, "x", ")"),
                   "1:257: parse error: query nested too deeply (more than 64 levels)");
    expect_accepted(nest("sum(", 64, "x", ")"));
    expect_refused(nest("sum(", 65, "x", ")"),
                   "1:257: parse error: query nested too deeply (more than 64 levels)");
    /* a million opening parentheses: refused at the 65th, no recursion past it */
    expect_refused(repeat("", "(", 1000000, ""),
                   "1:65: parse error: query nested too deeply (more than 64 levels)");
}

Test(promql, deepest_tree_the_limits_allow_checks_and_prints_on_a_small_stack)
{
    /* 64 levels, each a right-associative chain of 15 operators with the next
     * level at the bottom of its spine: an AST about 1,000 nodes deep */
    char *q = repeat("", "2^", 15, "2");
    for (int i = 0; i < 64; i++) {
        char *n = malloc(strlen(q) + 64);
        cr_assert_not_null(n);
        sprintf(n, "2^2^2^2^2^2^2^2^2^2^2^2^2^2^2^(%s)", q);
        free(q);
        q = n;
    }
    struct limit_job j = run_small_stack(q);
    cr_assert_eq(j.rc, 0, "%s", j.err);
    cr_assert_eq(strlen(j.printed), 15 * 4 + 1 + 64 * (15 * 4 + 2));
    free(j.printed);
    free(q);
}

Test(promql, huge_flat_queries_hit_the_arena_limit_not_the_heap)
{
    /* 300 kB of matchers: fine; 40 MB: refused by the arena limit */
    char *q = repeat("x{", "a=\"b\",", 50000, "}");
    struct promql_expr *e = NULL;
    char err[128];
    cr_assert_eq(promql_parse(q, strlen(q), &e, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(e->sel.n_matchers, 50001);
    promql_free(e);
    free(q);
    q = repeat("x{", "a=\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\",",
               600000, "}");
    cr_assert_eq(promql_parse(q, strlen(q), &e, err, sizeof(err)), -ENOMEM);
    cr_assert_str_eq(err, "query too large: out of parser memory");
    cr_assert_null(e);
    free(q);
}

Test(promql, inf_literal_prints_with_plus_sign_like_go)
{
    /* found by fuzz_promql: Go's %v writes +Inf, and "+Inf ^ 2" reads back
     * as unary plus over the power; Prometheus's String() does the same */
    struct promql_expr *e = ok("Inf ^ 2");
    cr_assert_eq(e->lhs->kind, PROMQL_NUMBER);
    char *s = fmt(e);
    cr_assert_str_eq(s, "+Inf ^ 2");
    promql_free(e);
    e = ok(s);
    cr_assert_eq(e->kind, PROMQL_UNARY);
    cr_assert_not(e->neg);
    cr_assert_eq(e->inner->op, PROMQL_OP_POW);
    promql_free(e);
    free(s);
}
