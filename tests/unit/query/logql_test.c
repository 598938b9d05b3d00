#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "query/logql.h"
#include "query/qlex.h"

/* ---- helpers ------------------------------------------------------------- */

static struct logql_expr *ok(const char *q)
{
    char err[512] = "";
    struct logql_expr *e = NULL;
    int rc = logql_parse(q, strlen(q), &e, err, sizeof(err));
    cr_assert_eq(rc, 0, "query %s failed: %s", q, err);
    cr_assert_not_null(e);
    return e;
}

/* Rejected at line 1, column |col|, with |frag| in the message. */
static void bad_at(const char *q, unsigned line, unsigned col, const char *frag)
{
    char err[512] = "";
    struct logql_expr *e = (struct logql_expr *)1;
    int rc = logql_parse(q, strlen(q), &e, err, sizeof(err));
    cr_assert_eq(rc, -EINVAL, "query %s: rc %d, want -EINVAL", q, rc);
    cr_assert_null(e, "query %s: *out must be NULL on error", q);
    char want[64];
    snprintf(want, sizeof(want), "parse error at line %u, col %u: ", line, col);
    cr_assert_eq(strncmp(err, want, strlen(want)), 0, "query %s: got \"%s\", want prefix \"%s\"", q,
                 err, want);
    cr_assert_not_null(strstr(err, frag), "query %s: \"%s\" lacks \"%s\"", q, err, frag);
}

static void bad(const char *q, unsigned col, const char *frag)
{
    bad_at(q, 1, col, frag);
}

static void str_eq(struct logql_str s, const char *want)
{
    cr_assert_eq(s.n, strlen(want), "\"%.*s\" vs \"%s\"", (int)s.n, s.s, want);
    cr_assert_eq(memcmp(s.s, want, s.n), 0, "\"%.*s\" vs \"%s\"", (int)s.n, s.s, want);
    cr_assert_eq(s.s[s.n], '\0');
}

static bool lmatch(const struct logql_matcher *m, const char *v)
{
    return logql_match_label(m, v, strlen(v));
}

static bool lf(const struct logql_stage *st, const char *line)
{
    return logql_line_filter_match(st, line, strlen(line));
}

static int lft(const struct logql_lf *f, const char *v)
{
    return logql_lf_test(f, v, v != NULL ? strlen(v) : 0);
}

/* ---- stream selectors ------------------------------------------------------ */

Test(logql, selector_matchers_have_ops_values_and_anchored_regexes)
{
    struct logql_expr *e = ok("{app=\"api\", env!=\"dev\", pod=~\"api-.+\", ns!~`kube.*`}");
    cr_assert_eq(e->kind, LOGQL_EXPR_LOG);
    cr_assert_not(logql_is_metric(e));
    cr_assert_eq(e->pos, 0);
    cr_assert_eq(e->log.n_matchers, 4);
    cr_assert_eq(e->log.n_stages, 0);
    const struct logql_matcher *m = e->log.matchers;
    str_eq(m[0].name, "app");
    cr_assert_eq(m[0].op, LOGQL_MATCH_EQ);
    str_eq(m[0].value, "api");
    cr_assert_null(m[0].re);
    str_eq(m[1].name, "env");
    cr_assert_eq(m[1].op, LOGQL_MATCH_NEQ);
    str_eq(m[1].value, "dev");
    str_eq(m[2].name, "pod");
    cr_assert_eq(m[2].op, LOGQL_MATCH_RE);
    str_eq(m[2].value, "api-.+");
    cr_assert_not_null(m[2].re);
    str_eq(m[3].name, "ns");
    cr_assert_eq(m[3].op, LOGQL_MATCH_NRE);
    str_eq(m[3].value, "kube.*");

    cr_assert(lmatch(&m[0], "api"));
    cr_assert_not(lmatch(&m[0], "api2"));
    cr_assert_not(lmatch(&m[0], ""));
    cr_assert(lmatch(&m[1], "prod"));
    cr_assert(lmatch(&m[1], ""), "a missing label is \"\", which != \"dev\"");
    cr_assert_not(lmatch(&m[1], "dev"));
    cr_assert(lmatch(&m[2], "api-7"));
    cr_assert_not(lmatch(&m[2], "api-"));
    cr_assert_not(lmatch(&m[2], "xapi-7"), "label regexes are anchored at the start");
    cr_assert(lmatch(&m[3], "default"));
    cr_assert_not(lmatch(&m[3], "kube-system"));
    cr_assert(lmatch(&m[3], "xkube"), "!~ is anchored too");
    cr_assert(logql_match_label(&m[1], NULL, 0));
    logql_free(e);
}

Test(logql, label_regex_is_fully_anchored_with_dotall)
{
    struct logql_expr *e = ok("{a=~\"foo\", b=~\"x.y\", c=~\"foo|foobar\", d=~\"(?i)Err\"}");
    const struct logql_matcher *m = e->log.matchers;
    cr_assert(lmatch(&m[0], "foo"));
    cr_assert_not(lmatch(&m[0], "xfoox"));
    cr_assert_not(lmatch(&m[0], "foox"));
    cr_assert_not(lmatch(&m[0], "xfoo"));
    cr_assert_not(lmatch(&m[0], "foo\n"), "$ is the very end, not before a final newline");
    cr_assert(lmatch(&m[1], "x\ny"), "(?s): dot matches newline in label matchers");
    cr_assert(lmatch(&m[2], "foobar"), "anchoring backtracks into the longer branch");
    cr_assert(lmatch(&m[2], "foo"));
    cr_assert(lmatch(&m[3], "ERR"));
    cr_assert_not(lmatch(&m[3], "ERROR"));
    logql_free(e);
}

Test(logql, selector_needs_a_matcher_that_rejects_the_empty_string)
{
    static const char msg[] = "queries require at least one regexp or equality matcher that does "
                              "not have an empty-compatible value";
    bad("{}", 1, msg);
    bad("{a=~\".*\"}", 1, msg);
    bad("{a=\"\"}", 1, msg);
    bad("{a!=\"x\"}", 1, msg);
    bad("{a!=\"\"}", 1, msg);
    bad("{a!~\"x\"}", 1, msg);
    bad("  {a=~\"x?\", b=\"\"}", 3, msg);
    struct logql_expr *e = ok("{a=~\".+\"}");
    logql_free(e);
    e = ok("{a=~\".*\", b!=\"x\", c=\"1\"}");
    logql_free(e);
}

Test(logql, strings_use_go_escapes_and_backticks_are_raw)
{
    struct logql_expr *e = ok("{a=\"q\\\"b\\\\c\\n\\t\\u00e9\\x41\\101\\U0001F600\", "
                              "b=`x\\dy\"z`}");
    str_eq(e->log.matchers[0].value, "q\"b\\c\n\t\xc3\xa9"
                                     "AA\xf0\x9f\x98\x80");
    str_eq(e->log.matchers[1].value, "x\\dy\"z");
    logql_free(e);
    /* a NUL from an escape is kept, with the length */
    e = ok("{a=\"x\\x00y\"}");
    cr_assert_eq(e->log.matchers[0].value.n, 3);
    cr_assert_eq(memcmp(e->log.matchers[0].value.s, "x\0y", 3), 0);
    cr_assert(logql_match_label(&e->log.matchers[0], "x\0y", 3));
    cr_assert_not(logql_match_label(&e->log.matchers[0], "x", 1));
    logql_free(e);
    /* backtick regex needs no double escaping */
    e = ok("{a=~`\\d+`}");
    cr_assert(lmatch(&e->log.matchers[0], "123"));
    cr_assert_not(lmatch(&e->log.matchers[0], "12a"));
    logql_free(e);
}

/* ---- what Grafana sends (FACTS.md 0.1, 0.6, A.5) ---------------------------------- */

Test(logql, grafana_health_check_vector_plus_vector)
{
    struct logql_expr *e = ok("vector(1)+vector(1)");
    cr_assert(logql_is_metric(e));
    cr_assert_eq(e->kind, LOGQL_EXPR_BINARY);
    cr_assert_eq(e->bin_op, LOGQL_BIN_ADD);
    cr_assert_eq(e->lhs->kind, LOGQL_EXPR_VECTOR);
    cr_assert_float_eq(e->lhs->value, 1.0, 1e-12);
    cr_assert_eq(e->rhs->kind, LOGQL_EXPR_VECTOR);
    cr_assert_float_eq(e->rhs->value, 1.0, 1e-12);
    cr_assert_eq(e->rhs->pos, 10);
    cr_assert_not(e->return_bool);
    cr_assert_not(e->has_matching);
    logql_free(e);
}

Test(logql, grafana_log_volume_query)
{
    const char *q = "sum by (level, detected_level) (count_over_time({service_name=\"api\", "
                    "env=~\"prod|stage\"} |= \"timeout\" | drop __error__[1m]))";
    struct logql_expr *e = ok(q);
    cr_assert_eq(e->kind, LOGQL_EXPR_VECTOR_AGG);
    cr_assert_eq(e->agg_op, LOGQL_AGG_SUM);
    cr_assert(e->grouping.has);
    cr_assert_not(e->grouping.without);
    cr_assert_eq(e->grouping.n_labels, 2);
    str_eq(e->grouping.labels[0], "level");
    str_eq(e->grouping.labels[1], "detected_level");
    const struct logql_expr *r = e->inner;
    cr_assert_eq(r->kind, LOGQL_EXPR_RANGE);
    cr_assert_eq(r->range_op, LOGQL_RANGE_COUNT_OVER_TIME);
    cr_assert_eq(r->range_ns, 60LL * 1000000000LL);
    cr_assert_eq(r->offset_ns, 0);
    cr_assert_eq(r->log.n_matchers, 2);
    str_eq(r->log.matchers[0].name, "service_name");
    str_eq(r->log.matchers[0].value, "api");
    cr_assert_eq(r->log.n_stages, 2);
    cr_assert_eq(r->log.stages[0].kind, LOGQL_STAGE_LINE_FILTER);
    cr_assert_eq(r->log.stages[0].filter_op, LOGQL_FILTER_CONTAINS);
    cr_assert_eq(r->log.stages[1].kind, LOGQL_STAGE_DROP);
    cr_assert_eq(r->log.stages[1].n_labels, 1);
    str_eq(r->log.stages[1].labels[0].name, "__error__");
    cr_assert_null(r->log.stages[1].labels[0].value.s);
    cr_assert_eq(r->log.stages[1].pos, (size_t)(strstr(q, "| drop") - q));
    logql_free(e);

    /* the same with the grouping after the argument and Grafana's step */
    e = ok("sum(count_over_time({service_name=\"api\"} | drop __error__ [15s])) by (level)");
    cr_assert_eq(e->kind, LOGQL_EXPR_VECTOR_AGG);
    cr_assert_eq(e->grouping.n_labels, 1);
    str_eq(e->grouping.labels[0], "level");
    cr_assert_eq(e->inner->range_ns, 15LL * 1000000000LL);
    logql_free(e);
}

Test(logql, logs_drilldown_queries)
{
    struct logql_expr *e =
        ok("{service_name=\"api\"} | json | logfmt | drop __error__, __error_details__");
    cr_assert_eq(e->log.n_stages, 3);
    cr_assert_eq(e->log.stages[0].kind, LOGQL_STAGE_JSON);
    cr_assert_eq(e->log.stages[0].n_params, 0);
    cr_assert_eq(e->log.stages[1].kind, LOGQL_STAGE_LOGFMT);
    cr_assert_eq(e->log.stages[1].n_params, 0);
    cr_assert_eq(e->log.stages[2].kind, LOGQL_STAGE_DROP);
    cr_assert_eq(e->log.stages[2].n_labels, 2);
    str_eq(e->log.stages[2].labels[1].name, "__error_details__");
    logql_free(e);

    e = ok("sum by (detected_level) (count_over_time({service_name=\"api\"} | "
           "detected_level=~\"error|warn\" | drop __error__ [1m]))");
    const struct logql_stage *st = &e->inner->log.stages[0];
    cr_assert_eq(st->kind, LOGQL_STAGE_LABEL_FILTER);
    cr_assert_eq(st->lf->kind, LOGQL_LF_STRING);
    str_eq(st->lf->m.name, "detected_level");
    cr_assert_eq(st->lf->m.op, LOGQL_MATCH_RE);
    cr_assert_eq(lft(st->lf, "warn"), 1);
    cr_assert_eq(lft(st->lf, "warning"), 0, "label filter regexes are anchored");
    cr_assert_eq(lft(st->lf, NULL), 0);
    logql_free(e);

    e = ok("{service_name=\"api\"} |> \"<_> level=error <_>\" or \"<_> status=500 <_>\" "
           "!> \"<_>debug<_>\" | json f=\"[\\\"a\\\"][\\\"b\\\"]\" | keep service_name, f "
           "| line_format \"\"");
    cr_assert_eq(e->log.n_stages, 5);
    st = &e->log.stages[0];
    cr_assert_eq(st->filter_op, LOGQL_FILTER_PATTERN);
    cr_assert_eq(st->n_alts, 2);
    str_eq(st->alts[1].value, "<_> status=500 <_>");
    cr_assert(lf(st, "ts=1 level=error msg=x"));
    cr_assert(lf(st, "GET /x status=500 took 1ms"));
    cr_assert_not(lf(st, "level=info status=200 x"));
    st = &e->log.stages[1];
    cr_assert_eq(st->filter_op, LOGQL_FILTER_NOT_PATTERN);
    cr_assert(lf(st, "an info line"));
    cr_assert_not(lf(st, "a debug line"));
    st = &e->log.stages[2];
    cr_assert_eq(st->kind, LOGQL_STAGE_JSON);
    cr_assert_eq(st->n_params, 1);
    str_eq(st->params[0].name, "f");
    str_eq(st->params[0].value, "[\"a\"][\"b\"]");
    cr_assert_eq(st->params[0].n_path, 2);
    str_eq(st->params[0].path[0].key, "a");
    str_eq(st->params[0].path[1].key, "b");
    cr_assert_eq(e->log.stages[3].kind, LOGQL_STAGE_KEEP);
    cr_assert_eq(e->log.stages[3].n_labels, 2);
    cr_assert_eq(e->log.stages[4].kind, LOGQL_STAGE_LINE_FORMAT);
    cr_assert_eq(e->log.stages[4].text.n, 0);
    logql_free(e);
}

/* ---- line filters ------------------------------------------------------------------ */

Test(logql, line_filters_chain_in_order_with_or_alternatives)
{
    struct logql_expr *e =
        ok("{a=\"b\"} |= \"err\" != \"debug\" |~ \"time(out|d)\" !~ \"(?i)retry\" "
           "|= \"x\" or \"y\" != \"p\" or \"q\"");
    cr_assert_eq(e->log.n_stages, 6);
    const struct logql_stage *s = e->log.stages;
    cr_assert_eq(s[0].filter_op, LOGQL_FILTER_CONTAINS);
    str_eq(s[0].alts[0].value, "err");
    cr_assert_eq(s[0].pos, 8);
    cr_assert_eq(s[1].filter_op, LOGQL_FILTER_NOT_CONTAINS);
    cr_assert_eq(s[2].filter_op, LOGQL_FILTER_RE);
    cr_assert_not_null(s[2].alts[0].re);
    cr_assert_eq(s[3].filter_op, LOGQL_FILTER_NOT_RE);
    cr_assert_eq(s[4].n_alts, 2);
    cr_assert_eq(s[5].filter_op, LOGQL_FILTER_NOT_CONTAINS);
    cr_assert_eq(s[5].n_alts, 2);

    cr_assert(lf(&s[0], "an error"));
    cr_assert_not(lf(&s[0], "an ERROR"), "|= is case-sensitive");
    cr_assert(lf(&s[1], "info"));
    cr_assert_not(lf(&s[1], "x debug y"));
    cr_assert(lf(&s[2], "request timed out"), "line regexes search anywhere");
    cr_assert(lf(&s[2], "timeout!"));
    cr_assert_not(lf(&s[2], "time"));
    cr_assert(lf(&s[3], "ok"));
    cr_assert_not(lf(&s[3], "will RETRY"));
    cr_assert(lf(&s[4], "..y.."));
    cr_assert(lf(&s[4], "x"));
    cr_assert_not(lf(&s[4], "z"));
    cr_assert(lf(&s[5], "z"));
    cr_assert_not(lf(&s[5], "q"), "!= a or b drops lines holding either");
    cr_assert_not(lf(&s[5], "p"));
    logql_free(e);

    /* the unanchored line regex: dot stops at newline unless (?s) */
    e = ok("{a=\"b\"} |~ \"a.b\" |~ \"(?s)a.b\" |~ \"^b\" |~ \"a$\" |= \"\" != \"\"");
    s = e->log.stages;
    cr_assert_not(lf(&s[0], "a\nb"));
    cr_assert(lf(&s[1], "a\nb"));
    cr_assert_not(lf(&s[2], "a\nb"), "^ is the line start without (?m)");
    cr_assert_not(lf(&s[3], "a\n"), "$ does not match before a final newline (Go)");
    cr_assert(lf(&s[3], "ba"));
    cr_assert(lf(&s[4], "anything"));
    cr_assert(lf(&s[4], ""));
    cr_assert_not(lf(&s[5], "anything"), "!= \"\" drops every line, as in Loki");
    logql_free(e);
}

Test(logql, pattern_filters_follow_loki)
{
    struct logql_expr *e = ok("{a=\"b\"} |> \"<_> bar\" |> \"foo <_>\" |> \"<_> bar <_>\" "
                              "|> \"<_>bar<_>\" |> \"\" |> \"a<_>b<_>c\"");
    const struct logql_stage *s = e->log.stages;
    cr_assert_not(lf(&s[0], "foo bar baz"), "a trailing literal must end the line");
    cr_assert(lf(&s[0], "foo bar"));
    cr_assert(lf(&s[1], "foo bar baz"));
    cr_assert_not(lf(&s[1], "foo "), "<_> is never empty");
    cr_assert_not(lf(&s[2], " bar "));
    cr_assert(lf(&s[2], "x bar y"));
    cr_assert(lf(&s[3], " bar "));
    cr_assert_not(lf(&s[3], "bar"));
    cr_assert(lf(&s[4], ""));
    cr_assert_not(lf(&s[4], "x"));
    cr_assert_not(lf(&s[3], ""), "an empty line matches only an empty pattern");
    cr_assert(lf(&s[5], "a1b2c"));
    cr_assert_not(lf(&s[5], "ab2c"));
    cr_assert_eq(s[5].alts[0].pattern.n_parts, 3);
    str_eq(s[5].alts[0].pattern.parts[0].lit, "a");
    str_eq(s[5].alts[0].pattern.parts[0].capture, "_");
    cr_assert_not(s[5].alts[0].pattern.parts[0].named);
    str_eq(s[5].alts[0].pattern.parts[2].lit, "c");
    cr_assert_null(s[5].alts[0].pattern.parts[2].capture.s);
    logql_free(e);

    bad("{a=\"b\"} |> \"<x> y\"", 12, "named captures are not allowed");
    bad("{a=\"b\"} |> \"<_><_>\"", 12, "consecutive captures");
    bad("{a=\"b\"} | pattern \"<_> y\"", 19, "at least one named capture");
    bad("{a=\"b\"} | pattern \"<x> <x>\"", 19, "duplicate capture name");

    e = ok("{a=\"b\"} | pattern \"<ip> - <user> [<_>] \\\"<method> <path>\"");
    const struct logql_pattern *pt = &e->log.stages[0].pattern;
    cr_assert_eq(e->log.stages[0].kind, LOGQL_STAGE_PATTERN);
    cr_assert_eq(pt->n_parts, 5);
    str_eq(pt->parts[0].lit, "");
    str_eq(pt->parts[0].capture, "ip");
    cr_assert(pt->parts[0].named);
    str_eq(pt->parts[1].lit, " - ");
    str_eq(pt->parts[1].capture, "user");
    str_eq(pt->parts[2].lit, " [");
    cr_assert_not(pt->parts[2].named);
    str_eq(pt->parts[3].lit, "] \"");
    str_eq(pt->parts[4].lit, " ");
    str_eq(pt->parts[4].capture, "path");
    logql_free(e);
}

/* ---- parsers and other stages -------------------------------------------------------- */

Test(logql, parser_stages_with_parameters_and_flags)
{
    struct logql_expr *e =
        ok("{a=\"b\"} | json status, lat=\"resp.latency_ms\", first=\"items[0].id\" "
           "| logfmt --strict --keep-empty lvl=\"level\", msg "
           "| regexp \"(?P<method>\\\\w+) (?P<path>\\\\S+)\" | unpack | decolorize "
           "| label_format new=old, combo=\"{{.a}}-{{.b}}\" | line_format \"{{.msg}}\"");
    const struct logql_stage *s = e->log.stages;
    cr_assert_eq(e->log.n_stages, 7);
    cr_assert_eq(s[0].kind, LOGQL_STAGE_JSON);
    cr_assert_eq(s[0].n_params, 3);
    str_eq(s[0].params[0].name, "status");
    str_eq(s[0].params[0].value, "status");
    cr_assert_eq(s[0].params[0].n_path, 1);
    str_eq(s[0].params[1].name, "lat");
    cr_assert_eq(s[0].params[1].n_path, 2);
    str_eq(s[0].params[1].path[0].key, "resp");
    str_eq(s[0].params[1].path[1].key, "latency_ms");
    cr_assert_eq(s[0].params[2].n_path, 3);
    str_eq(s[0].params[2].path[0].key, "items");
    cr_assert_null(s[0].params[2].path[1].key.s);
    cr_assert_eq(s[0].params[2].path[1].index, 0);
    str_eq(s[0].params[2].path[2].key, "id");

    cr_assert_eq(s[1].kind, LOGQL_STAGE_LOGFMT);
    cr_assert(s[1].logfmt_strict);
    cr_assert(s[1].logfmt_keep_empty);
    cr_assert_eq(s[1].n_params, 2);
    str_eq(s[1].params[0].name, "lvl");
    str_eq(s[1].params[0].value, "level");
    cr_assert_eq(s[1].params[0].n_path, 0, "logfmt keys are not json paths");
    str_eq(s[1].params[1].value, "msg");

    cr_assert_eq(s[2].kind, LOGQL_STAGE_REGEXP);
    str_eq(s[2].text, "(?P<method>\\w+) (?P<path>\\S+)");
    cr_assert_not_null(s[2].re);
    cr_assert_eq(qlex_re_named_groups(s[2].re), 2);
    cr_assert_eq(s[3].kind, LOGQL_STAGE_UNPACK);
    cr_assert_eq(s[4].kind, LOGQL_STAGE_DECOLORIZE);
    cr_assert_eq(s[5].kind, LOGQL_STAGE_LABEL_FORMAT);
    cr_assert_eq(s[5].n_params, 2);
    str_eq(s[5].params[0].name, "new");
    str_eq(s[5].params[0].value, "old");
    cr_assert_not(s[5].params[0].is_template);
    str_eq(s[5].params[1].value, "{{.a}}-{{.b}}");
    cr_assert(s[5].params[1].is_template);
    cr_assert_eq(s[6].kind, LOGQL_STAGE_LINE_FORMAT);
    str_eq(s[6].text, "{{.msg}}");
    logql_free(e);

    e = ok("{a=\"b\"} | drop a, b=\"x\", c!=\"y\", d=~\"z.*\", e!~\"w\" | keep f");
    s = e->log.stages;
    cr_assert_eq(s[0].n_labels, 5);
    cr_assert_null(s[0].labels[0].value.s);
    cr_assert_eq(s[0].labels[1].op, LOGQL_MATCH_EQ);
    cr_assert_eq(s[0].labels[2].op, LOGQL_MATCH_NEQ);
    cr_assert_eq(s[0].labels[3].op, LOGQL_MATCH_RE);
    cr_assert(lmatch(&s[0].labels[3], "zzz"));
    cr_assert_not(lmatch(&s[0].labels[3], "azz"));
    cr_assert_eq(s[0].labels[4].op, LOGQL_MATCH_NRE);
    cr_assert_eq(s[1].kind, LOGQL_STAGE_KEEP);
    logql_free(e);

    /* a label named like a stage keyword is a label filter when compared */
    e = ok("{a=\"b\"} | json=\"x\" | drop=~\"y\"");
    cr_assert_eq(e->log.stages[0].kind, LOGQL_STAGE_LABEL_FILTER);
    str_eq(e->log.stages[0].lf->m.name, "json");
    cr_assert_eq(e->log.stages[1].kind, LOGQL_STAGE_LABEL_FILTER);
    logql_free(e);
}

/* ---- label filters ----------------------------------------------------------------- */

Test(logql, label_filter_expressions_and_binds_tighter_than_or)
{
    struct logql_expr *e = ok("{a=\"b\"} | json | status >= 500 and path=~\"/api.*\" or "
                              "latency > 1.5s, size <= 2KiB method=\"GET\" | x != -3");
    const struct logql_lf *t = e->log.stages[1].lf;
    /* (status>=500 AND path) OR ((latency AND size) AND method) */
    cr_assert_eq(t->kind, LOGQL_LF_OR);
    cr_assert_eq(t->left->kind, LOGQL_LF_AND);
    cr_assert_eq(t->left->left->kind, LOGQL_LF_NUMBER);
    str_eq(t->left->left->m.name, "status");
    cr_assert_eq(t->left->left->cmp, LOGQL_CMP_GE);
    cr_assert_float_eq(t->left->left->num, 500.0, 1e-12);
    cr_assert_eq(t->left->right->kind, LOGQL_LF_STRING);
    cr_assert_eq(t->left->right->m.op, LOGQL_MATCH_RE);
    const struct logql_lf *r = t->right;
    cr_assert_eq(r->kind, LOGQL_LF_AND);
    cr_assert_eq(r->left->kind, LOGQL_LF_AND);
    cr_assert_eq(r->left->left->kind, LOGQL_LF_DURATION);
    cr_assert_eq(r->left->left->dur_ns, 1500000000LL);
    cr_assert_eq(r->left->left->cmp, LOGQL_CMP_GT);
    cr_assert_eq(r->left->right->kind, LOGQL_LF_BYTES);
    cr_assert_float_eq(r->left->right->num, 2048.0, 1e-9);
    cr_assert_eq(r->left->right->cmp, LOGQL_CMP_LE);
    cr_assert_eq(r->right->kind, LOGQL_LF_STRING);
    str_eq(r->right->m.value, "GET");
    const struct logql_lf *x = e->log.stages[2].lf;
    cr_assert_eq(x->kind, LOGQL_LF_NUMBER);
    cr_assert_eq(x->cmp, LOGQL_CMP_NE);
    cr_assert_float_eq(x->num, -3.0, 1e-12);

    /* leaf tests on label values */
    const struct logql_lf *num = t->left->left, *dur = r->left->left, *byt = r->left->right;
    cr_assert_eq(lft(num, "503"), 1);
    cr_assert_eq(lft(num, "404"), 0);
    cr_assert_eq(lft(num, "5e2"), 1);
    cr_assert_eq(lft(num, "abc"), -EINVAL, "unparsable: Loki keeps it with __error__");
    cr_assert_eq(lft(num, NULL), 0, "a missing label drops the line");
    cr_assert_eq(lft(dur, "2s"), 1);
    cr_assert_eq(lft(dur, "1500ms"), 0);
    cr_assert_eq(lft(dur, "1m"), 1);
    cr_assert_eq(lft(dur, "1.5"), -EINVAL);
    cr_assert_eq(lft(dur, "1d"), -EINVAL, "label values are Go durations (no d)");
    cr_assert_eq(lft(byt, "2KiB"), 1);
    cr_assert_eq(lft(byt, "2.0 kB"), 1);
    cr_assert_eq(lft(byt, "3kb"), 0);
    cr_assert_eq(lft(byt, "lots"), -EINVAL);
    logql_free(e);

    e = ok("{a=\"b\"} | (a=\"1\" or b=\"2\") and c == 3 | d=ip(\"10.0.0.0/8\") | e!=ip(\"::1\")");
    t = e->log.stages[0].lf;
    cr_assert_eq(t->kind, LOGQL_LF_AND);
    cr_assert_eq(t->left->kind, LOGQL_LF_OR);
    cr_assert_eq(t->right->kind, LOGQL_LF_NUMBER);
    cr_assert_eq(t->right->cmp, LOGQL_CMP_EQ);
    cr_assert_eq(e->log.stages[1].lf->kind, LOGQL_LF_IP);
    str_eq(e->log.stages[1].lf->ip, "10.0.0.0/8");
    cr_assert_eq(e->log.stages[2].lf->cmp, LOGQL_CMP_NE);
    logql_free(e);
}

/* ---- metric queries ------------------------------------------------------------------ */

Test(logql, range_aggregations_ranges_and_offsets)
{
    static const struct {
        const char *q;
        enum logql_range_op op;
        int64_t range_ns, offset_ns;
        size_t n_stages;
    } cases[] = {
        {"count_over_time({a=\"b\"}[5m])", LOGQL_RANGE_COUNT_OVER_TIME, 300000000000LL, 0, 0},
        {"rate({a=\"b\"} |= \"x\" [1h30m])", LOGQL_RANGE_RATE, 5400000000000LL, 0, 1},
        {"bytes_over_time({a=\"b\"}[500ms] | json)", LOGQL_RANGE_BYTES_OVER_TIME, 500000000LL, 0,
         1},
        {"bytes_rate({a=\"b\"} | logfmt | x=\"1\" [1d] offset 1h)", LOGQL_RANGE_BYTES_RATE,
         86400000000000LL, 3600000000000LL, 2},
        {"absent_over_time({a=\"b\"}[1w])", LOGQL_RANGE_ABSENT_OVER_TIME, 604800000000000LL, 0, 0},
        {"count_over_time(({a=\"b\"}[10s]))", LOGQL_RANGE_COUNT_OVER_TIME, 10000000000LL, 0, 0},
        {"sum_over_time({a=\"b\"} | unwrap bytes(sz) [2m])", LOGQL_RANGE_SUM_OVER_TIME,
         120000000000LL, 0, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct logql_expr *e = ok(cases[i].q);
        cr_assert_eq(e->kind, LOGQL_EXPR_RANGE, "%s", cases[i].q);
        cr_assert_eq(e->range_op, cases[i].op, "%s", cases[i].q);
        cr_assert_eq(e->range_ns, cases[i].range_ns, "%s", cases[i].q);
        cr_assert_eq(e->offset_ns, cases[i].offset_ns, "%s", cases[i].q);
        cr_assert_eq(e->log.n_stages, cases[i].n_stages, "%s", cases[i].q);
        cr_assert(logql_is_metric(e));
        logql_free(e);
    }
    struct logql_expr *e =
        ok("quantile_over_time(0.99, {a=\"b\"} | json | unwrap duration(lat) | __error__=\"\" "
           "[5m]) by (path)");
    cr_assert_eq(e->range_op, LOGQL_RANGE_QUANTILE_OVER_TIME);
    cr_assert_float_eq(e->param, 0.99, 1e-12);
    cr_assert_eq(e->log.n_stages, 3);
    cr_assert_eq(e->log.stages[1].kind, LOGQL_STAGE_UNWRAP);
    str_eq(e->log.stages[1].unwrap_label, "lat");
    cr_assert_eq(e->log.stages[1].unwrap_conv, LOGQL_CONV_DURATION);
    cr_assert(e->grouping.has);
    str_eq(e->grouping.labels[0], "path");
    logql_free(e);
}

Test(logql, vector_aggregations_by_without_topk)
{
    struct logql_expr *e = ok("count without (pod, ns) (rate({a=\"b\"}[1m]))");
    cr_assert_eq(e->agg_op, LOGQL_AGG_COUNT);
    cr_assert(e->grouping.without);
    cr_assert_eq(e->grouping.n_labels, 2);
    logql_free(e);

    static const struct {
        const char *q;
        enum logql_agg_op op;
    } ops[] = {
        {"sum(rate({a=\"b\"}[1m]))", LOGQL_AGG_SUM},
        {"avg(rate({a=\"b\"}[1m])) by (x)", LOGQL_AGG_AVG},
        {"min by () (rate({a=\"b\"}[1m]))", LOGQL_AGG_MIN},
        {"max(bytes_rate({a=\"b\"}[1m])) without (y)", LOGQL_AGG_MAX},
        {"stddev(rate({a=\"b\"}[1m]))", LOGQL_AGG_STDDEV},
        {"stdvar(rate({a=\"b\"}[1m]))", LOGQL_AGG_STDVAR},
        {"sort_desc(rate({a=\"b\"}[1m]))", LOGQL_AGG_SORT_DESC},
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        e = ok(ops[i].q);
        cr_assert_eq(e->kind, LOGQL_EXPR_VECTOR_AGG, "%s", ops[i].q);
        cr_assert_eq(e->agg_op, ops[i].op, "%s", ops[i].q);
        cr_assert_eq(e->inner->kind, LOGQL_EXPR_RANGE, "%s", ops[i].q);
        logql_free(e);
    }
    e = ok("min by () (rate({a=\"b\"}[1m]))");
    cr_assert(e->grouping.has);
    cr_assert_eq(e->grouping.n_labels, 0);
    logql_free(e);

    e = ok("topk(5, sum by (path) (count_over_time({a=\"b\"}[5m])))");
    cr_assert_eq(e->agg_op, LOGQL_AGG_TOPK);
    cr_assert_float_eq(e->param, 5.0, 1e-12);
    cr_assert_not(e->grouping.has);
    cr_assert_eq(e->inner->agg_op, LOGQL_AGG_SUM);
    cr_assert_eq(e->inner->inner->kind, LOGQL_EXPR_RANGE);
    logql_free(e);
    e = ok("bottomk by (x) (2, rate({a=\"b\"}[1m]))");
    cr_assert_eq(e->agg_op, LOGQL_AGG_BOTTOMK);
    cr_assert_float_eq(e->param, 2.0, 1e-12);
    str_eq(e->grouping.labels[0], "x");
    logql_free(e);
}

Test(logql, binary_operators_follow_promql_precedence)
{
    /* 1 + 2 * 3 ^ 2 ^ 1 -> 1 + (2 * (3 ^ (2 ^ 1))) */
    struct logql_expr *e = ok("1 + 2 * 3 ^ 2 ^ 1");
    cr_assert_eq(e->bin_op, LOGQL_BIN_ADD);
    cr_assert_eq(e->lhs->kind, LOGQL_EXPR_NUMBER);
    cr_assert_eq(e->rhs->bin_op, LOGQL_BIN_MUL);
    cr_assert_eq(e->rhs->rhs->bin_op, LOGQL_BIN_POW);
    cr_assert_eq(e->rhs->rhs->rhs->bin_op, LOGQL_BIN_POW);
    logql_free(e);
    /* left associativity of - and / */
    e = ok("8 - 2 - 1");
    cr_assert_eq(e->lhs->bin_op, LOGQL_BIN_SUB);
    cr_assert_float_eq(e->rhs->value, 1.0, 1e-12);
    logql_free(e);
    e = ok("-1.5 * +2 % 4 / 1");
    cr_assert_eq(e->bin_op, LOGQL_BIN_DIV);
    cr_assert_eq(e->lhs->bin_op, LOGQL_BIN_MOD);
    cr_assert_float_eq(e->lhs->lhs->lhs->value, -1.5, 1e-12);
    logql_free(e);

    /* or < and/unless < comparison < arithmetic */
    e = ok("vector(1) + vector(2) > bool vector(3) and vector(4) or vector(5) unless vector(6)");
    cr_assert_eq(e->bin_op, LOGQL_BIN_OR);
    cr_assert_eq(e->lhs->bin_op, LOGQL_BIN_AND);
    cr_assert_eq(e->lhs->lhs->bin_op, LOGQL_BIN_GT);
    cr_assert(e->lhs->lhs->return_bool);
    cr_assert_eq(e->lhs->lhs->lhs->bin_op, LOGQL_BIN_ADD);
    cr_assert_eq(e->rhs->bin_op, LOGQL_BIN_UNLESS);
    logql_free(e);

    /* (a / on (x) group_left (y) b) * 100 */
    e = ok("sum by (x) (rate({a=\"b\"}[5m])) / on (x) group_left (y) "
           "sum by (x, y) (rate({a=\"c\"}[5m])) * 100");
    cr_assert_eq(e->bin_op, LOGQL_BIN_MUL);
    cr_assert_not(e->has_matching);
    cr_assert_float_eq(e->rhs->value, 100.0, 1e-12);
    const struct logql_expr *d = e->lhs;
    cr_assert_eq(d->bin_op, LOGQL_BIN_DIV);
    cr_assert(d->has_matching);
    cr_assert(d->on);
    cr_assert_eq(d->n_match_labels, 1);
    str_eq(d->match_labels[0], "x");
    cr_assert_eq(d->group_side, -1);
    cr_assert_eq(d->n_include_labels, 1);
    str_eq(d->include_labels[0], "y");
    cr_assert_eq(d->rhs->kind, LOGQL_EXPR_VECTOR_AGG);
    logql_free(e);

    e = ok("count_over_time({a=\"b\"}[1m]) != ignoring (z) group_right count_over_time({a=\"c\"}"
           "[1m]) >= 2");
    cr_assert_eq(e->bin_op, LOGQL_BIN_GE);
    cr_assert_eq(e->lhs->bin_op, LOGQL_BIN_NE);
    cr_assert_not(e->lhs->on);
    cr_assert_eq(e->lhs->group_side, 1);
    cr_assert_eq(e->lhs->n_include_labels, 0);
    logql_free(e);

    e = ok("label_replace(rate({a=\"b\"}[1m]), \"dst\", \"$1\", \"src\", \"(.*)-x\")");
    cr_assert_eq(e->kind, LOGQL_EXPR_LABEL_REPLACE);
    str_eq(e->dst, "dst");
    str_eq(e->replacement, "$1");
    str_eq(e->src, "src");
    str_eq(e->regex_text, "(.*)-x");
    cr_assert_not_null(e->regex);
    cr_assert_eq(qlex_re_match(e->regex, "a-x", 3), 1);
    cr_assert_eq(qlex_re_match(e->regex, "a-xy", 4), 0);
    logql_free(e);

    e = ok("(vector(2))");
    cr_assert_eq(e->kind, LOGQL_EXPR_VECTOR);
    logql_free(e);
    e = ok("vector(-3) # a comment\n");
    cr_assert_float_eq(e->value, -3.0, 1e-12);
    logql_free(e);
}

/* ---- rejected forms --------------------------------------------------------------------- */

Test(logql, rejected_queries_name_the_column_and_what_was_expected)
{
    bad("", 1, "expected a query, got end of query");
    bad("{a}", 3, "expected \"=\", \"!=\", \"=~\" or \"!~\" after label name, got \"}\"");
    bad("{a=b}", 4, "expected a string value in quotes after \"=\", got identifier \"b\"");
    bad("{a=\"b\"", 7, "expected \",\" or \"}\" in the stream selector, got end of query");
    bad("{a=\"b\",}", 8, "expected a label name in the stream selector, got \"}\"");
    bad("{1=\"b\"}", 2, "expected a label name in the stream selector, got number \"1\"");
    bad("{a=\"b}", 4, "unterminated string");
    bad("{a=\"b\nc\"}", 6, "newline in string");
    bad("{a=\"x\\q\"}", 6, "unknown escape sequence");
    bad("{a=\"b\"} |= 5", 12, "expected a string in quotes after \"|=\", got number \"5\"");
    bad("{a=\"b\"} |~ ", 12, "expected a string in quotes after \"|~\", got end of query");
    bad("{a=\"b\"} |= \"x\" or", 18, "expected a string in quotes after \"|=\"");
    bad("{a=\"b\"} | ", 11, "expected a parser (json, logfmt");
    bad("{a=\"b\"} | x", 12, "expected a comparison (=, !=, =~, !~, ==, >, >=, <, <=)");
    bad("{a=\"b\"} | x >", 14, "expected a value");
    bad("{a=\"b\"} | x > \"s\"", 13, "a string label filter supports =, !=, =~ and !~");
    bad("{a=\"b\"} | x =~ 5", 16, "expected a regular expression in quotes");
    bad("{a=\"b\"} | logfmt --fast", 18, "unknown logfmt flag \"--fast\"");
    bad("{a=\"b\"} | json a=", 18, "expected a json path in quotes");
    bad("{a=\"b\"} | json a=\"x[\"", 18, "invalid json path");
    bad("{a=\"b\"} | label_format a=b, a=c", 29, "sets label \"a\" more than once");
    bad("{a=\"b\"} | unwrap", 17, "expected a label name to unwrap");
    bad("{a=\"b\"} | unwrap x", 9, "| unwrap is only allowed inside a range aggregation");
    bad("{a=\"b\"}[5m]", 8, "a range such as [5m] is only allowed inside a range aggregation");
    bad("{a=\"b\"} foo", 9, "expected a pipeline stage");
    bad("count_over_time({a=\"b\"})", 24, "expected a range such as [5m] after the log query");
    bad("count_over_time({a=\"b\"}[5])", 25,
        "expected a duration such as 5m in the range, got "
        "number \"5\"");
    bad("count_over_time({a=\"b\"}[0s])", 25, "the range must be greater than 0");
    bad("count_over_time({a=\"b\"}[5x])", 25, "invalid number, duration or bytes literal \"5x\"");
    bad("count_over_time({a=\"b\"}[5m]", 28, "expected \")\" closing the function");
    bad("count_over_time({a=\"b\"}[5m] [1m])", 29, "a log query takes only one range");
    bad("count_over_time({a=\"b\"} | json [5m] | x=\"1\")", 37, "the range must come right after");
    /* Loki's RangeAggregationExpr.validate, with its messages */
    bad("count_over_time({a=\"b\"}[5m]) by (x)", 30,
        "grouping not allowed for count_over_time aggregation");
    bad("sum_over_time({a=\"b\"} | unwrap x [5m]) by (x)", 40,
        "grouping not allowed for sum_over_time aggregation");
    bad("sum_over_time({a=\"b\"}[5m])", 1, "invalid aggregation sum_over_time without unwrap");
    bad("count_over_time({a=\"b\"} | unwrap x [5m])", 1,
        "invalid aggregation count_over_time with unwrap");
    bad("approx_topk(2, rate({a=\"b\"}[1m])) by (a)", 35,
        "grouping not allowed for approx_topk aggregation");
    bad("approx_topk by (a) (2, rate({a=\"b\"}[1m]))", 13,
        "grouping not allowed for approx_topk aggregation");
    bad("count_over_time(({a=\"b\"} |= \"x\"))", 33,
        "expected a range such as [5m] after the log query");
    bad("count_over_time(({a=\"b\"}[5m])[5m])", 30, "expected \")\" closing the function");
    bad("{a=\"b\"} |~ ip(\"1.2.3.4\")", 12, "ip: invalid operation");
    bad("{a=\"b\"} |= ip(\"1.2.3\")", 15, "ip: invalid pattern: \"1.2.3\"");
    bad("sum by (a) (rate({a=\"b\"}[1m])) by (b)", 32, "by/without may be given only once");
    bad("sum({a=\"b\"})", 5, "sum expects a metric query, got a log query");
    bad("sum(1)", 5, "sum expects a vector, got a scalar");
    bad("topk(rate({a=\"b\"}[1m]))", 6, "parameter required for operation topk");
    bad("topk(x, rate({a=\"b\"}[1m]))", 6, "expected the number of series k");
    bad("topk(0, rate({a=\"b\"}[1m]))", 6, "invalid parameter (must be greater than 0) topk(0");
    bad("bottomk(1.5, rate({a=\"b\"}[1m]))", 9, "invalid parameter bottomk(1.5,");
    bad("sum(3, rate({a=\"b\"}[1m]))", 5, "unsupported parameter for operation sum(3,");
    bad("sum_over_time(50, {a=\"b\"} | unwrap x [1m])", 15,
        "parameter 50 not supported for operation sum_over_time");
    bad("quantile_over_time({a=\"b\"} | unwrap x [1m])", 20,
        "parameter required for operation quantile_over_time");
    bad("sort by (a) (rate({a=\"b\"}[1m]))", 6, "sort and sort_desc doesn't allow grouping by");
    bad("vector(x)", 8, "expected a number inside vector()");
    bad("vector(1) +", 12, "expected a query, got end of query");
    bad("{a=\"b\"} + 1", 1, "a log query cannot be an operand of a binary operator");
    bad("1 + {a=\"b\"}", 5, "a log query cannot be an operand of a binary operator");
    bad("1 and vector(1)", 3,
        "unexpected literal for left leg of logical/set binary operation (and): 1.000000");
    bad("vector(1) or 2", 11,
        "unexpected literal for right leg of logical/set binary operation (or): 2.000000");
    bad("vector(1) + bool vector(1)", 13, "bool modifier can only be used on comparison");
    bad("vector(1) and on (a) group_left vector(1)", 22, "no grouping allowed for and");
    bad("-vector(1)", 2, "expected a number after the sign");
    bad("foo(1)", 1, "function \"foo\" is not supported");
    bad("foo", 1, "expected a stream selector \"{...}\", a number, vector(...)");
    bad("vector(1) vector(1)", 11,
        "expected an operator or the end of the query, got identifier "
        "\"vector\"");
    bad("{a=\"b\"} & 1", 9, "unexpected \"&\"");
    bad("{a=\"b\"} |= \"x\" $", 16, "unexpected character \"$\"");
    bad("{a=\"b\"} |= \"\xff\" \xfe", 16, "unexpected byte 0xfe");
    bad_at("{a=\"b\"}\n| json\n| status >", 3, 11, "expected a value");
    bad_at("sum(\n  rate({a=\"b\"}[5m] |= 1)\n)", 2, 23,
           "expected a string in quotes after \"|=\"");
}

Test(logql, nesting_and_size_are_bounded)
{
    char q[1024];
    size_t n = 0;
    for (int i = 0; i < 100; i++) {
        q[n++] = '(';
    }
    memcpy(q + n, "vector(1)", 9);
    n += 9;
    for (int i = 0; i < 100; i++) {
        q[n++] = ')';
    }
    q[n] = '\0';
    bad(q, 65, "query nested too deeply");
    /* 60 levels are fine */
    char q2[512];
    n = 0;
    for (int i = 0; i < 60; i++) {
        q2[n++] = '(';
    }
    memcpy(q2 + n, "vector(1)", 9);
    n += 9;
    for (int i = 0; i < 60; i++) {
        q2[n++] = ')';
    }
    q2[n] = '\0';
    struct logql_expr *e = ok(q2);
    cr_assert_eq(e->kind, LOGQL_EXPR_VECTOR);
    logql_free(e);

    /* a long selector and pipeline: many matchers and stages */
    static char big[64 * 1024];
    n = (size_t)snprintf(big, sizeof(big), "{a=\"b\"");
    for (int i = 0; i < 500; i++) {
        n += (size_t)snprintf(big + n, sizeof(big) - n, ",l%d=~\"v%d.*\"", i, i);
    }
    n += (size_t)snprintf(big + n, sizeof(big) - n, "}");
    for (int i = 0; i < 500; i++) {
        n += (size_t)snprintf(big + n, sizeof(big) - n, " |= \"w%d\"", i);
    }
    e = ok(big);
    cr_assert_eq(e->log.n_matchers, 501);
    cr_assert_eq(e->log.n_stages, 500);
    str_eq(e->log.matchers[500].name, "l499");
    str_eq(e->log.stages[499].alts[0].value, "w499");
    logql_free(e);

    logql_free(NULL);
    /* the parser reads exactly len bytes: no NUL needed, trailing bytes ignored */
    const char *src = "{a=\"b\"}GARBAGE";
    char err[128];
    cr_assert_eq(logql_parse(src, 7, &e, err, sizeof(err)), 0);
    logql_free(e);
    cr_assert_eq(logql_parse(src, 6, &e, err, sizeof(err)), -EINVAL);
    cr_assert_null(e);
    /* a tiny error buffer truncates, NULL disables */
    cr_assert_eq(logql_parse("{", 1, &e, err, 8), -EINVAL);
    cr_assert_str_eq(err, "parse e");
    cr_assert_eq(logql_parse("{", 1, &e, NULL, 0), -EINVAL);
}

/* ---- regular expressions --------------------------------------------------------------- */

Test(logql, re2_incompatible_regex_syntax_is_rejected)
{
    static const struct {
        const char *re; /* as written inside `...` */
        const char *frag;
    } cases[] = {
        {"x(?=y)", "lookahead assertions are not supported"},
        {"x(?!y)", "lookahead assertions are not supported"},
        {"(?<=x)y", "lookbehind assertions are not supported"},
        {"(?<!x)y", "lookbehind assertions are not supported"},
        {"(a)\\1", "backreferences are not supported"},
        {"(?P<n>a)(?P=n)", "named backreferences are not supported"},
        {"(a)\\g1", "invalid or unsupported escape"},
        {"(a)\\k<n>", "invalid or unsupported escape"},
        {"a*+", "invalid nested repetition operator"},
        {"a++", "invalid nested repetition operator"},
        {"a?+", "invalid nested repetition operator"},
        {"a{2}+", "invalid nested repetition operator"},
        {"a**", "invalid nested repetition operator"},
        {"a*??", "invalid nested repetition operator"},
        {"(?>a+)b", "atomic groups are not supported"},
        {"(a|(?R))", "recursion"},
        {"(a)(?1)", "recursion"},
        {"(a)?(?(1)b|c)", "conditional groups are not supported"},
        {"a\\Kb", "invalid or unsupported escape"},
        {"a\\Z", "invalid or unsupported escape"},
        {"\\h+", "invalid or unsupported escape"},
        {"a\\R", "invalid or unsupported escape"},
        {"\\C", "invalid or unsupported escape"},
        {"(*UCP)\\w", "(*VERB)"},
        {"(*ANY)a", "(*VERB)"},
        {"a{1001}", "invalid repeat count"},
        {"a{2,1001}", "invalid repeat count"},
        {"(?#comment)a", "comments in expressions are not supported"},
        {"(?x) a", "flags are i, m, s, U"},
        {"(?|(a)|(b))", "branch reset groups"},
        {"(?C1)a", "callouts are not supported"},
        {"\\x", "invalid escape sequence \\x"},
        {"\\xZ1", "invalid escape sequence \\x"},
        {"[[:foo:]]", "invalid character class range"},
        {"[\\b]", "invalid escape sequence in character class"},
        {"(a", "missing closing parenthesis"},
        {"a)", "unmatched closing parenthesis"},
        {"[a", "missing closing ]"},
        {"*a", "missing argument to repetition operator"},
        {"\xff", "UTF-8 error"},
        {"a\\", "trailing backslash"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char q[128];
        snprintf(q, sizeof(q), "{a=\"b\"} |~ `%s`", cases[i].re);
        bad(q, 12, cases[i].frag);
        snprintf(q, sizeof(q), "{a=~`%s`}", cases[i].re);
        bad(q, 5, cases[i].frag);
    }
}

Test(logql, re2_syntax_that_pcre2_shares_is_accepted_with_go_meaning)
{
    static const struct {
        const char *re;
        const char *yes, *no; /* subjects for the unanchored line filter */
    } cases[] = {
        {"(?i)error", "an ERROR", "err"},
        {"(?P<n>ab)+", "xababx", "ba"},
        {"(?<n>ab)", "ab", "a b"},
        {"\\pL\\p{Greek}", "x\xce\xb1", "1\xce\xb1"},
        {"[[:alpha:]][[:^digit:]]", "ab", "a1"},
        {"\\Q.*\\E", "a.*b", "ab"},
        {"a\\z", "ba", "a\n"},
        {"\\x{41}\\x42", "AB", "ab"},
        {"\\101\\0", "A\0", "A"},  /* Go octal escapes */
        {"\\v", "\v", "\n"},       /* vertical tab, not PCRE2's class */
        {"a\\sb", "a\tb", "a\vb"}, /* Go's \s has no \v */
        {"x\\Sy", "xzy", "x y"},
        {"\\d\\w\\b", "1a ",
         "\xd9\xa1"
         "a "}, /* ASCII classes */
        {"a{2,3}?b", "aab", "ab"},
        {"(?U)a+", "a", "b"},
        {"(?s:a.b)", "a\nb", "ab"},
        {"(?m)^b$", "a\nb\nc", "abc"},
        {"a{,2}", "a{,2}", "aa"}, /* not a repeat in RE2: literal */
        {"\\[\\]\\{\\}\\.\\*\\+\\?\\(\\)\\|\\^\\$\\\\\\-\\/", "[]{}.*+?()|^$\\-/", "x"},
        {"[]a]", "]", "b"},
        {"[^]a]", "b", "]"},
        {"a|", "zzz", NULL}, /* the empty branch matches anything */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char q[160];
        snprintf(q, sizeof(q), "{a=\"b\"} |~ `%s`", cases[i].re);
        struct logql_expr *e = ok(q);
        const struct logql_stage *st = &e->log.stages[0];
        size_t yl = strlen(cases[i].yes);
        if (i == 8) {
            yl = 2; /* "A\0" */
        }
        cr_assert(logql_line_filter_match(st, cases[i].yes, yl), "%s should match \"%s\"",
                  cases[i].re, cases[i].yes);
        if (cases[i].no != NULL) {
            cr_assert_not(lf(st, cases[i].no), "%s should not match \"%s\"", cases[i].re,
                          cases[i].no);
        }
        logql_free(e);
    }
}

Test(logql, invalid_utf8_subjects_and_pathological_regexes_do_not_crash_or_hang)
{
    struct logql_expr *e = ok("{a=~\"a.b\"} |~ \"a.b\" |~ \"b\" |= \"\xff\" |~ \"(a+)+$\"");
    const struct logql_stage *s = e->log.stages;
    static const char bad1[] = "a\xff"
                               "b";
    static const char bad2[] = "\xc3(\xe2\x82\xf0\x9f\x98";
    cr_assert_not(logql_match_label(&e->log.matchers[0], bad1, 3), "bad bytes match nothing");
    cr_assert(logql_match_label(&e->log.matchers[0],
                                "a\xc3\xa9"
                                "b",
                                4),
              ". is one code point");
    cr_assert_not(logql_line_filter_match(&s[0], bad1, 3));
    cr_assert(logql_line_filter_match(&s[1], bad1, 3), "matching resumes after a bad byte");
    cr_assert_not(logql_line_filter_match(&s[1], bad2, sizeof(bad2) - 1));
    cr_assert(logql_line_filter_match(&s[2], bad1, 3), "|= compares bytes");
    cr_assert(logql_line_filter_match(&s[1], "xb", 2));
    cr_assert_not(logql_line_filter_match(&s[0], NULL, 0));

    char evil[64];
    memset(evil, 'a', 40);
    evil[40] = 'b';
    cr_assert_not(logql_line_filter_match(&s[3], evil, 41), "match limit: counted as no match");
    cr_assert_eq(qlex_re_match(s[3].alts[0].re, evil, 41), -E2BIG);
    cr_assert_eq(qlex_re_match(s[3].alts[0].re, "aaa", 3), 1);
    logql_free(e);
    /* the same for anchored matchers: =~ fails, !~ holds */
    e = ok("{a=~\"(a+)+$\", b!~\"(a+)+$\"}");
    cr_assert_eq(qlex_re_match(e->log.matchers[0].re, evil, 41), -E2BIG);
    cr_assert_not(logql_match_label(&e->log.matchers[0], evil, 41));
    cr_assert(logql_match_label(&e->log.matchers[1], evil, 41));
    cr_assert_not(logql_match_label(&e->log.matchers[1], "aa", 2));
    logql_free(e);
    qlex_thread_cleanup();
}

/* ---- pruning needles ------------------------------------------------------------------ */

static void needles_are(const char *q, const char *const *want, size_t n_want)
{
    struct logql_expr *e = ok(q);
    const struct logql_log *log = e->kind == LOGQL_EXPR_LOG ? &e->log : &e->inner->log;
    size_t n;
    const struct logql_str *nd = logql_log_needles(log, &n);
    cr_assert_eq(n, n_want, "%s: %zu needles, want %zu", q, n, n_want);
    for (size_t i = 0; i < n; i++) {
        str_eq(nd[i], want[i]);
    }
    logql_free(e);
}

Test(logql, needles_are_only_tokens_bounded_inside_the_filter)
{
    needles_are("{a=\"b\"} |= \"error\"", NULL, 0); /* may sit inside "errors" */
    needles_are("{a=\"b\"} |= \"rro\"", NULL, 0);
    const char *const w1[] = {"error"};
    needles_are("{a=\"b\"} |= \" error \"", w1, 1);
    needles_are("{a=\"b\"} |= \"level=ERROR \"", w1, 1);
    const char *const w2[] = {"user_id", "42"};
    needles_are("{a=\"b\"} |= \"x user_id=42 y\" |= \"n user_id \"", w2, 2);
    const char *const w3[] = {"level", "error"};
    needles_are("{a=\"b\"} |> \"<_> level=error <_>\"", w3, 2);
    const char *const w4[] = {"bar"};
    needles_are("{a=\"b\"} |> \"foo bar\"", w4, 1); /* first run is searched; last ends the line */
    needles_are("{a=\"b\"} |> \"<_>bar<_>\"", NULL, 0);
    /* negative, alternatives and regexes give none */
    needles_are("{a=\"b\"} != \" x \" |= \" y \" or \" z \" |~ \" w \"", NULL, 0);
    /* after line_format the filter sees a rewritten line */
    const char *const w5[] = {"a"};
    needles_are("{a=\"b\"} |= \" a \" | line_format \"{{.x}}\" |= \" b \"", w5, 1);
    needles_are("{a=\"b\"} | decolorize |= \" b \"", NULL, 0);
    /* parsers and label filters keep the line: later filters still count */
    const char *const w6[] = {"timeout"};
    needles_are("sum(count_over_time({a=\"b\"} | json | x=\"1\" |= \"[timeout]\" [5m]))", w6, 1);
    const char *const w7[] = {"a"};
    needles_are("{a=\"b\"} |= \" a \" |= \" A \"", w7, 1); /* case-folded, deduplicated */
}

/* ---- selector-only parsing and regex captures ------------------------------------ */

Test(logql, bare_selectors_for_series_and_label_endpoints)
{
    char err[256];
    struct logql_expr *e = NULL;
    cr_assert_eq(logql_parse_selector("{}", 2, true, &e, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(e->kind, LOGQL_EXPR_LOG);
    cr_assert_eq(e->log.n_matchers, 0);
    cr_assert_eq(e->log.n_stages, 0);
    logql_free(e);
    const char *q = " { job =~ \".*\", env!=\"dev\" } ";
    cr_assert_eq(logql_parse_selector(q, strlen(q), true, &e, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(e->log.n_matchers, 2);
    cr_assert(lmatch(&e->log.matchers[0], ""));
    logql_free(e);
    cr_assert_eq(logql_parse_selector(q, strlen(q), false, &e, err, sizeof(err)), -EINVAL);
    cr_assert_null(e);
    cr_assert_not_null(strstr(err, "parse error at line 1, col 2: queries require at least one"));
    q = "{a=\"b\"} |= \"x\"";
    cr_assert_eq(logql_parse_selector(q, strlen(q), false, &e, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "parse error at line 1, col 9: expected the end of the stream "
                          "selector, got \"|=\"");
    q = "sum(rate({a=\"b\"}[1m]))";
    cr_assert_eq(logql_parse_selector(q, strlen(q), true, &e, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "parse error at line 1, col 1: expected a stream selector \"{...}\", "
                          "got identifier \"sum\"");
    cr_assert_eq(logql_parse_selector("", 0, true, &e, err, sizeof(err)), -EINVAL);
    q = "{service_name=\"api\"}";
    cr_assert_eq(logql_parse_selector(q, strlen(q), false, &e, err, sizeof(err)), 0);
    str_eq(e->log.matchers[0].value, "api");
    logql_free(e);
}

Test(logql, regex_captures_for_regexp_stage_and_label_replace)
{
    struct logql_expr *e = ok("{a=\"b\"} | regexp \"(?P<method>[A-Z]+) (?P<path>/\\\\S*)( "
                              "(?P<code>\\\\d+))?\"");
    const qlex_re *re = e->log.stages[0].re;
    cr_assert_eq(qlex_re_capture_count(re), 4);
    cr_assert_eq(qlex_re_named_groups(re), 3);
    const char *name;
    unsigned group;
    /* PCRE2 lists names in alphabetical order */
    cr_assert_eq(qlex_re_group_name(re, 0, &name, &group), 0);
    cr_assert_str_eq(name, "code");
    cr_assert_eq(group, 4);
    cr_assert_eq(qlex_re_group_name(re, 1, &name, &group), 0);
    cr_assert_str_eq(name, "method");
    cr_assert_eq(group, 1);
    cr_assert_eq(qlex_re_group_name(re, 2, &name, &group), 0);
    cr_assert_str_eq(name, "path");
    cr_assert_eq(group, 2);
    cr_assert_eq(qlex_re_group_name(re, 3, &name, &group), -ENOENT);

    size_t ov[10];
    const char *line = "ts=1 GET /api/x done";
    cr_assert_eq(qlex_re_exec(re, line, strlen(line), ov, 5), 1);
    cr_assert_eq(ov[0], 5); /* whole match "GET /api/x" */
    cr_assert_eq(ov[1], 15);
    cr_assert_eq(ov[2], 5); /* method */
    cr_assert_eq(ov[3], 8);
    cr_assert_eq(ov[4], 9); /* path */
    cr_assert_eq(ov[5], 15);
    cr_assert_eq(ov[8], SIZE_MAX, "code did not take part");
    cr_assert_eq(ov[9], SIZE_MAX);
    line = "POST /b 201";
    cr_assert_eq(qlex_re_exec(re, line, strlen(line), ov, 5), 1);
    cr_assert_eq(ov[8], 8);
    cr_assert_eq(ov[9], 11);
    /* fewer pairs than groups: the first ones are still filled */
    cr_assert_eq(qlex_re_exec(re, line, strlen(line), ov, 2), 1);
    cr_assert_eq(ov[2], 0);
    cr_assert_eq(ov[3], 4);
    cr_assert_eq(qlex_re_exec(re, "lower /x", 8, ov, 5), 0);
    cr_assert_eq(qlex_re_exec(re, "X /", 3, ov, 0), -EINVAL);
    logql_free(e);
    qlex_thread_cleanup();
}

/* ---- required substrings (the body gram bloom) ------------------------------------ */

/* The literals of regex |re| joined by "&" (none: ""). */
static void re_lits_are(const char *re, const char *want)
{
    char buf[256], got[512] = "";
    struct logql_str out[8];
    size_t n = logql_re_literals(re, strlen(re), buf, out, 8);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_geq(out[i].n, 3, "%s: literal %zu is short", re, i);
        at += (size_t)snprintf(got + at, sizeof(got) - at, "%s%.*s", i ? "&" : "", (int)out[i].n,
                               out[i].s);
    }
    cr_assert_str_eq(got, want, "regex %s: got \"%s\", want \"%s\"", re, got, want);
}

Test(logql, regex_literals_are_only_the_provably_required_runs)
{
    re_lits_are("timeout", "timeout");
    re_lits_are("conn.*refused", "conn&refused");
    re_lits_are("^start", "start");
    re_lits_are("end$", "end");
    /* an optional or starred atom leaves the run; a + keeps it once */
    re_lits_are("abc?d", "");
    re_lits_are("abcd?efg", "abc&efg");
    re_lits_are("x*abcd", "abcd");
    re_lits_are("xabc+def", "xabc&def");
    re_lits_are("xabc+?def", "xabc&def");
    re_lits_are("abcd{2}efg", "abc&efg");
    re_lits_are("abcd{1,3}?efg", "abc&efg");
    re_lits_are("abc{,2}def", "abc&,2}def"); /* "{,2}" is literal in RE2 */
    /* a quantifier after a multi-byte character drops the whole character */
    re_lits_are("h\xc3\xa9llo?", "h\xc3\xa9ll");
    re_lits_are("h\xc3\xa9?llo", "llo");
    /* alternation at the top: nothing is required; inside a group: the group is skipped */
    re_lits_are("error|warn", "");
    re_lits_are("error|", "");
    re_lits_are("(error|warn) timeout", " timeout");
    re_lits_are("a(b|c)*xyz", "xyz");
    re_lits_are("(?:abc)?def", "def");
    re_lits_are("(?P<x>abc)def", "def");
    /* classes, dots, escapes */
    re_lits_are("[abc]def\\.ghi", "def.ghi");
    re_lits_are("[]|)]xyz", "xyz");
    re_lits_are("[^]a]xyz", "xyz");
    re_lits_are("[[:alpha:]|]xyz", "xyz");
    re_lits_are("a.b.c", "");
    re_lits_are("\\d+ms elapsed", "ms elapsed");
    re_lits_are("\\x41BCD", "BCD");
    re_lits_are("\\x{263a}BCD", "BCD");
    re_lits_are("\\pLBCD", "BCD");
    re_lits_are("\\p{Greek}BCD", "BCD");
    re_lits_are("\\QBCD\\E", "");
    re_lits_are("foo\\tbar\\|baz", "foo\tbar|baz");
    re_lits_are("ab\\bcde", "cde");
    re_lits_are("\\0123xy", "");
    /* (?i): letters whose case variants leave ASCII (k: Kelvin sign, s: long s) end a run */
    re_lits_are("(?i)Timeout", "Timeout");
    re_lits_are("(?i)kafka", "");
    re_lits_are("(?i)broker down", "bro&er down");
    re_lits_are("(?i)ssl\\.handshake", "l.hand");
    re_lits_are("(?i)h\xc3\xa9llo", "llo");
    re_lits_are("abc(?i)defk", "abc&def");
    re_lits_are("(?i)abc(?-i)kkk", "abc&kkk");
    re_lits_are("(?i:kkk)sss", "sss");
    re_lits_are("(?s).*foo", "foo");
    re_lits_are("(?U)abc+", "abc");
    /* what this code does not understand yields nothing */
    re_lits_are("abc)", "");
    re_lits_are("(abc", "");
    re_lits_are("[abc", "");
    re_lits_are("", "");
}

/* The substages of |q|: stages split by " ; ", alternatives by " or ",
 * literals by "&". */
static void substrs_are(const char *q, const char *want)
{
    struct logql_expr *e = ok(q);
    const struct logql_log *log = e->kind == LOGQL_EXPR_LOG ? &e->log : &e->inner->log;
    size_t n;
    const struct logql_substage *ss = logql_log_substrs(log, &n);
    char got[512] = "";
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        at += (size_t)snprintf(got + at, sizeof(got) - at, "%s", i ? " ; " : "");
        for (size_t a = 0; a < ss[i].n_alts; a++) {
            at += (size_t)snprintf(got + at, sizeof(got) - at, "%s", a ? " or " : "");
            for (size_t k = 0; k < ss[i].alts[a].n_lits; k++) {
                const struct logql_str *l = &ss[i].alts[a].lits[k];
                at += (size_t)snprintf(got + at, sizeof(got) - at, "%s%.*s", k ? "&" : "",
                                       (int)l->n, l->s);
            }
        }
    }
    cr_assert_str_eq(got, want, "%s: got \"%s\", want \"%s\"", q, got, want);
    logql_free(e);
}

Test(logql, substring_requirements_come_from_positive_filters_on_the_original_line)
{
    substrs_are("{a=\"b\"} |= \"needle\"", "needle");
    substrs_are("{a=\"b\"} |= \"ab\"", "");            /* shorter than a gram */
    substrs_are("{a=\"b\"} |= \"\"", "");              /* matches every line */
    substrs_are("{a=\"b\"} |= \"abc\" or \"xy\"", ""); /* one alternative rules nothing out */
    substrs_are("{a=\"b\"} |= \"abc\" or \"def\"", "abc or def");
    substrs_are("{a=\"b\"} != \"abc\" !~ \"abc\" !> \"<_>abc\"", "");
    substrs_are("{a=\"b\"} |~ \"err.*timeout\" |= \"Needle\"", "err&timeout ; Needle");
    substrs_are("{a=\"b\"} |~ \"a|bcd\"", "");
    substrs_are("{a=\"b\"} |~ \"(?i)abc\" or \"xyz\"", "abc or xyz");
    substrs_are("{a=\"b\"} |> \"<_> level=error <_> took <_>\"", " level=error & took ");
    substrs_are("{a=\"b\"} |> \"<_> <_>\"", "");
    /* parsers and label filters keep the line; line_format, decolorize and unpack do not */
    substrs_are("{a=\"b\"} | json | x=\"1\" |= \"abc\"", "abc");
    substrs_are("{a=\"b\"} |= \"abc\" | line_format \"{{.x}}\" |= \"def\"", "abc");
    substrs_are("{a=\"b\"} | decolorize |= \"def\"", "");
    substrs_are("{a=\"b\"} | unpack |= \"def\"", "");
    substrs_are("sum(count_over_time({a=\"b\"} |= \"abc\" [5m]))", "abc");
}

/* Sound on lines the filter keeps: every literal of the stage is in the
 * line, ASCII case folded (the gram bloom folds too). */
static void lits_in_line(const char *q, const char *line)
{
    struct logql_expr *e = ok(q);
    cr_assert(logql_line_filter_match(&e->log.stages[0], line, strlen(line)),
              "%s should keep \"%s\"", q, line);
    char fl[256];
    size_t n = strlen(line);
    for (size_t i = 0; i < n; i++) {
        fl[i] = line[i] >= 'A' && line[i] <= 'Z' ? (char)(line[i] + 32) : line[i];
    }
    size_t ns;
    const struct logql_substage *ss = logql_log_substrs(&e->log, &ns);
    cr_assert_eq(ns, 1, "%s", q);
    cr_assert_eq(ss[0].n_alts, 1);
    for (size_t k = 0; k < ss[0].alts[0].n_lits; k++) {
        const struct logql_str *l = &ss[0].alts[0].lits[k];
        char fk[64];
        for (size_t i = 0; i < l->n; i++) {
            fk[i] = l->s[i] >= 'A' && l->s[i] <= 'Z' ? (char)(l->s[i] + 32) : l->s[i];
        }
        cr_assert_not_null(memmem(fl, n, fk, l->n), "%s: \"%.*s\" not in \"%s\"", q, (int)l->n,
                           l->s, line);
    }
    logql_free(e);
}

Test(logql, regex_literals_are_in_every_line_the_regex_keeps)
{
    lits_in_line("{a=\"b\"} |~ \"(?i)kafka broker\"", "KAFKA BROKER");
    /* the Kelvin sign matches (?i)k: no literal may hold a k */
    lits_in_line("{a=\"b\"} |~ \"(?i)kafka broker\"", "\xe2\x84\xaa"
                                                      "afka bro\xe2\x84\xaa"
                                                      "er");
    lits_in_line("{a=\"b\"} |~ \"(?i)ssl handshake\"", "\xc5\xbfSL HAND\xc5\xbfHAKE");
    lits_in_line("{a=\"b\"} |~ \"conn(ection)? refused\"", "conn refused");
    lits_in_line("{a=\"b\"} |~ \"abcd?efg\"", "abcefg");
    lits_in_line("{a=\"b\"} |~ \"xabc+def\"", "xabcccdef");
    lits_in_line("{a=\"b\"} |~ \"h\xc3\xa9?llo\"", "hllo");
    lits_in_line("{a=\"b\"} |~ \"a(b|c)*xyz\"", "axyz");
    lits_in_line("{a=\"b\"} |~ \"abc{,2}def\"", "abc{,2}def");
}

/* ---- issue 14: Loki's syntax the parser took wrongly before ---------------- */

Test(logql, parenthesised_log_queries_before_the_range)
{
    struct logql_expr *e = ok("count_over_time(({foo=\"bar\"} |= \"baz\")[5m] offset 1m)");
    cr_assert_eq(e->kind, LOGQL_EXPR_RANGE);
    cr_assert_eq(e->range_ns, INT64_C(300000000000));
    cr_assert_eq(e->offset_ns, INT64_C(60000000000));
    cr_assert_eq(e->log.n_stages, 1);
    str_eq(e->log.stages[0].alts[0].value, "baz");
    logql_free(e);
    /* the whole range expression in parentheses, twice */
    e = ok("rate((({job=\"mysql\"} |= \"error\" [10s])))");
    cr_assert_eq(e->range_ns, INT64_C(10000000000));
    cr_assert_eq(e->log.n_stages, 1);
    logql_free(e);
    e = ok("sum_over_time(({a=\"b\"} | unwrap x)[1m]) ");
    cr_assert_eq(e->log.n_stages, 1);
    cr_assert_eq(e->log.stages[0].kind, LOGQL_STAGE_UNWRAP);
    logql_free(e);
}

Test(logql, leading_dot_numbers_negative_offsets_and_folded_literal_comparisons)
{
    struct logql_expr *e = ok("quantile_over_time(.99, {a=\"b\"} | unwrap x [5m] offset -5m)");
    cr_assert_float_eq(e->param, 0.99, 1e-12);
    cr_assert_eq(e->offset_ns, -INT64_C(300000000000));
    logql_free(e);
    e = ok("rate({a=\"b\"}[1m]) > .5");
    cr_assert_eq(e->kind, LOGQL_EXPR_BINARY);
    cr_assert_float_eq(e->rhs->value, 0.5, 1e-12);
    logql_free(e);
    /* Loki's reduceBinOp: a comparison of two literals is 1 or 0, bool or not */
    e = ok("1 > 1 > 1");
    cr_assert_eq(e->kind, LOGQL_EXPR_BINARY);
    cr_assert(e->return_bool);
    cr_assert(e->lhs->return_bool);
    logql_free(e);
    bad("bool 1 > 1", 1, "expected a stream selector");
}

Test(logql, ip_line_filters_scan_the_line_for_addresses)
{
    struct logql_expr *e =
        ok("{a=\"b\"} |= ip(\"10.0.0.0/8\") or \"special\" != ip(\"192.168.1.1-192.168.1.9\")");
    cr_assert_eq(e->log.n_stages, 2);
    const struct logql_stage *s0 = &e->log.stages[0], *s1 = &e->log.stages[1];
    cr_assert_eq(s0->n_alts, 2);
    cr_assert(s0->alts[0].ip);
    cr_assert_not(s0->alts[1].ip);
    cr_assert(lf(s0, "client 10.1.2.3 connected"));
    cr_assert(lf(s0, "a special line"));
    cr_assert_not(lf(s0, "client 11.1.2.3 connected"));
    cr_assert_not(lf(s0, "version 10.1.2 only"));
    cr_assert(lf(s0, "x=10.0.0.1"));
    cr_assert(lf(s1, "from 192.168.1.10"));
    cr_assert_not(lf(s1, "from 192.168.1.5 to 8.8.8.8"));
    /* an ip() literal is no needle or substring */
    size_t n;
    logql_log_needles(&e->log, &n);
    cr_assert_eq(n, 0);
    logql_free(e);
    e = ok("{a=\"b\"} |= ip(\"2001:db8::/32\")");
    cr_assert(lf(&e->log.stages[0], "peer [2001:db8::1]:443 closed"));
    cr_assert_not(lf(&e->log.stages[0], "peer [2001:db9::1]:443 closed"));
    logql_free(e);
}

Test(logql, approx_topk_and_templates_compile_with_the_query)
{
    struct logql_expr *e = ok("approx_topk(3, sum by (a) (rate({a=\"b\"}[1m])))");
    cr_assert_eq(e->agg_op, LOGQL_AGG_APPROX_TOPK);
    cr_assert_float_eq(e->param, 3, 0);
    logql_free(e);
    e = ok("{a=\"b\"} | line_format `{{ .x | ToUpper }}` | label_format y=`{{ add 1 2 }}`, z=a");
    cr_assert_not_null(e->log.stages[0].tmpl);
    cr_assert_not_null(e->log.stages[1].params[0].tmpl);
    cr_assert_null(e->log.stages[1].params[1].tmpl);
    logql_free(e);
    bad("{a=\"b\"} | line_format \"{{ nosuch .x }}\"", 23,
        "template: function \"nosuch\" not defined");
    bad("{a=\"b\"} | line_format \"{{ if .x }}\"", 23, "template: unexpected EOF");
    bad("{a=\"b\"} | line_format `{{ regexReplaceAll .re .x \"y\" }}`", 23,
        "the regex of this function must be a string literal");
    bad("{a=\"b\"} | line_format `{{ count \"(?=x)\" .x }}`", 23, "lookahead assertions");
}
