/*
 * logql_tmpl_test.c - the LogQL template interpreter: syntax (actions,
 * trimming, pipes, variables, if/range/with), the functions Loki documents
 * with the values Go and sprig give, and errors at compile and at render
 * time.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "query/logql_tmpl.h"
#include "query/qlex.h"
#include "storage/arena.h"

static const char *const LABELS[][2] = {
    {"app", "api"},
    {"status", "200"},
    {"duration", "1500"},
    {"msg", "hello World foo"},
    {"queries", "[{\"query\":\"up\",\"n\":1},{\"query\":\"rate(x[5m])\",\"n\":2.5}]"},
    {"obj", "{\"a\":{\"b\":\"deep\"},\"list\":[1,2,3]}"},
    {"ip", "10.0.0.7"},
    {"created", "2024-03-05"},
    {"from", "1700000000"},
    {"empty", ""},
    {"path", "/api/v1/users?id=42&x=a b"},
};

static const char *label(void *ctx, const char *name, size_t nn, size_t *vn)
{
    (void)ctx;
    for (size_t i = 0; i < sizeof(LABELS) / sizeof(LABELS[0]); i++) {
        if (strlen(LABELS[i][0]) == nn && memcmp(LABELS[i][0], name, nn) == 0) {
            *vn = strlen(LABELS[i][1]);
            return LABELS[i][1];
        }
    }
    return NULL;
}

static bool label_at(void *ctx, size_t i, const char **name, size_t *nn, const char **v, size_t *vn)
{
    (void)ctx;
    if (i >= sizeof(LABELS) / sizeof(LABELS[0])) {
        return false;
    }
    *name = LABELS[i][0];
    *nn = strlen(LABELS[i][0]);
    *v = LABELS[i][1];
    *vn = strlen(LABELS[i][1]);
    return true;
}

/* Compiles and renders |t|; returns the render's rc, the text in out. */
static int render(const char *t, char *out, size_t cap, char *err, size_t errlen)
{
    arena *a = arena_new(4096), *scratch = arena_new(4096);
    cr_assert_not_null(a);
    cr_assert_not_null(scratch);
    struct qlex lx;
    qlex_init(&lx, QLEX_LOGQL, t, strlen(t), a, err, errlen);
    logql_tmpl *tp = NULL;
    int rc = logql_tmpl_compile(&lx, 0, t, strlen(t), &tp);
    if (rc == 0) {
        struct logql_tmpl_env env = {.label = label,
                                     .label_at = label_at,
                                     .line = "the line",
                                     .line_n = 8,
                                     .ts_ns = INT64_C(1700000000123456789)};
        const char *o;
        size_t n;
        rc = logql_tmpl_render(tp, &env, scratch, &o, &n, err, errlen);
        if (rc == 0) {
            cr_assert_lt(n, cap);
            memcpy(out, o, n);
            out[n] = '\0';
        }
    }
    qlex_re_free_all(lx.res);
    arena_free(scratch);
    arena_free(a);
    return rc;
}

static void expect(const char *t, const char *want)
{
    char out[1024], err[512] = "";
    int rc = render(t, out, sizeof(out), err, sizeof(err));
    cr_assert_eq(rc, 0, "template %s: rc %d: %s", t, rc, err);
    cr_assert_str_eq(out, want, "template %s", t);
}

static void compile_error(const char *t, const char *frag)
{
    char out[64], err[512] = "";
    int rc = render(t, out, sizeof(out), err, sizeof(err));
    cr_assert_eq(rc, -EINVAL, "template %s: rc %d, want a compile error", t, rc);
    cr_assert_not_null(strstr(err, "template: "), "template %s: %s", t, err);
    cr_assert_not_null(strstr(err, frag), "template %s: \"%s\" lacks \"%s\"", t, err, frag);
}

static void render_error(const char *t, const char *frag)
{
    char out[64], err[512] = "";
    int rc = render(t, out, sizeof(out), err, sizeof(err));
    cr_assert_eq(rc, -EINVAL, "template %s: rc %d, want a render error", t, rc);
    cr_assert_null(strstr(err, "template: "), "template %s: a compile error: %s", t, err);
    cr_assert_not_null(strstr(err, frag), "template %s: \"%s\" lacks \"%s\"", t, err, frag);
}

Test(logql_tmpl, text_labels_line_and_trimming)
{
    expect("plain text", "plain text");
    expect("", "");
    expect("{{.app}}/{{ .status }}", "api/200");
    expect("[{{.missing}}]", "[]");
    expect("{{ __line__ }}!", "the line!");
    expect("a  {{- .app -}}  b", "aapib");
    expect("a {{/* a comment */}}b", "a b");
    expect("{{ \"quo\\\"ted\\n\" }}", "quo\"ted\n");
    expect("{{ `raw\\n` }}", "raw\\n");
    expect("{{ 42 }} {{ -1.5 }} {{ true }} {{ 1e6 }} {{ 0.0001 }} {{ 0x1F }}",
           "42 -1.5 true 1e+06 0.0001 31");
}

Test(logql_tmpl, pipes_variables_and_control_flow)
{
    expect("{{ .msg | ToUpper | TrimSpace }}", "HELLO WORLD FOO");
    expect("{{ $x := .app }}{{ $x }}-{{ $x = \"z\" }}{{ $x }}", "api-z");
    expect("{{ if eq .status \"200\" }}ok{{ else if eq .status \"500\" }}bad{{ else }}?{{ end }}",
           "ok");
    expect("{{ if .empty }}y{{ else }}n{{ end }}", "n");
    expect("{{ with .app }}<{{ . }}>{{ end }}{{ with .empty }}x{{ else }}none{{ end }}",
           "<api>none");
    expect("{{ range $i, $q := fromJson .queries }}{{ $i }}={{ $q.query }};{{ end }}",
           "0=up;1=rate(x[5m]);");
    expect("{{ range fromJson .queries }}{{ .n }} {{ end }}", "1 2.5 ");
    expect("{{ range $q := fromJson .queries }}{{ if eq $q.query \"up\" }}{{ continue }}{{ end }}"
           "{{ $q.query }}{{ break }}{{ end }}",
           "rate(x[5m])");
    expect("{{ range fromJson \"[]\" }}x{{ else }}empty{{ end }}", "empty");
    expect("{{ (fromJson .obj).a.b }} {{ index (fromJson .obj) \"list\" 1 }} "
           "{{ len (fromJson .obj).list }}",
           "deep 2 3");
    expect("{{ and .app .empty }}|{{ or .empty .app }}|{{ not .empty }}", "|api|true");
    /* a range over the labels goes in key order and skips empty ones */
    expect("{{ range $k, $v := . }}{{ if hasPrefix \"d\" $k }}{{ $k }}={{ $v }};{{ end }}{{ end }}",
           "duration=1500;");
    expect("{{ range $k, $v := . }}{{ $k }},{{ end }}",
           "app,created,duration,from,ip,msg,obj,path,queries,status,");
}

Test(logql_tmpl, string_functions_follow_go_and_sprig)
{
    expect("{{ Replace .msg \"o\" \"0\" -1 }} {{ Replace .msg \"o\" \"0\" 1 }}",
           "hell0 W0rld f00 hell0 World foo");
    expect("{{ replace \"o\" \"0\" .msg }}", "hell0 W0rld f00");
    expect("{{ .msg | lower }} {{ upper .app }} {{ title \"a big dog\" }}",
           "hello world foo API A Big Dog");
    expect("{{ trunc 5 .msg }}|{{ trunc -3 .msg }}|{{ substr 6 11 .msg }}", "hello|foo|World");
    expect("{{ contains \"World\" .msg }} {{ hasPrefix \"hel\" .msg }} {{ hasSuffix \"x\" .msg }}",
           "true true false");
    expect("{{ Trim \"xxhixx\" \"x\" }} {{ TrimLeft \"xxhi\" \"x\" }} {{ TrimPrefix .msg \"hello "
           "\" }} "
           "{{ trimSuffix \" foo\" .msg }} {{ trimAll \"-\" \"--a--\" }} [{{ trim \"  a \" }}]",
           "hi hi World foo hello World a [a]");
    expect("{{ repeat 3 \"ab\" }} {{ indent 2 \"a\\nb\" }}", "ababab   a\n  b");
    expect("{{ alignLeft 5 .app }}|{{ alignRight 5 .app }}|{{ alignLeft 2 .app }}",
           "api  |  api|ap");
    expect("{{ printf \"%s=%d %.2f %q %5s|%-4d|\" .app 7 3.14159 \"x\" \"ab\" 3 }}",
           "api=7 3.14 \"x\"    ab|3   |");
    expect("{{ .path | urlencode }}", "%2Fapi%2Fv1%2Fusers%3Fid%3D42%26x%3Da+b");
    expect("{{ urldecode \"a%2Fb+c\" }}", "a/b c");
    expect("{{ b64enc .app }} {{ b64dec \"YXBp\" }} {{ b64dec \"YXB\" }}", "YXBp api ap");
    expect("{{ default \"-\" .empty }} {{ default \"-\" .app }} {{ .missing | default \"none\" }}",
           "- api none");
    expect("{{ regexReplaceAll \"(o+)\" .msg \"<$1>\" }}", "hell<o> W<o>rld f<oo>");
    expect("{{ regexReplaceAllLiteral \"o+\" .msg \"$1\" }}", "hell$1 W$1rld f$1");
    expect("{{ __line__ | count \"e\" }} {{ count \"x*\" \"ab\" }}", "2 3");
    expect("{{ html \"<a href='x'>&</a>\" }}", "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;");
}

Test(logql_tmpl, math_functions_follow_sprig)
{
    expect("{{ add 1 2 3 }} {{ sub 10 .status }} {{ mul 2 3 4 }} {{ div .duration 1000 }} "
           "{{ mod 7 3 }}",
           "6 -190 24 1 1");
    expect("{{ addf 1.5 2 }} {{ subf 5 0.5 }} {{ mulf 1.5 2 }} {{ divf .duration 1000 }}",
           "3.5 4.5 3 1.5");
    expect("{{ max 1 9 3 }} {{ min 4 2 8 }} {{ maxf 1.5 0.5 }} {{ minf 1.5 0.5 }}", "9 2 1.5 0.5");
    expect("{{ ceil 1.2 }} {{ floor 1.8 }} {{ round 3.14159 2 }} {{ round 2.5 0 }}", "2 1 3.14 3");
    expect("{{ int \"42\" }} {{ int \"4.0\" }} {{ int \"x\" }} {{ float64 \"2.5\" }} {{ int 3.9 }}",
           "42 4 0 2.5 3");
    expect("{{ bytes \"1.5KiB\" }} {{ duration \"1m30s\" }}", "1536 90");
    expect("{{ if gt (int .status) 100 }}big{{ end }} {{ lt 1.5 2 }} {{ ne .app \"x\" }}",
           "big true true");
    render_error("{{ div 1 0 }}", "integer divide by zero");
    render_error("{{ eq .app 1 }}", "incompatible types for comparison");
}

Test(logql_tmpl, date_functions_use_go_layouts_in_utc)
{
    expect("{{ __timestamp__ | unixEpoch }} {{ unixEpochMillis __timestamp__ }} "
           "{{ unixEpochNanos __timestamp__ }}",
           "1700000000 1700000000123 1700000000123456789");
    expect("{{ date \"2006-01-02T15:04:05.000Z07:00\" __timestamp__ }}",
           "2023-11-14T22:13:20.123Z");
    expect("{{ __timestamp__ | date \"Mon Jan _2 03:04:05 PM 2006\" }}",
           "Tue Nov 14 10:13:20 PM 2023");
    expect("{{ __timestamp__ }}", "2023-11-14 22:13:20.123456789 +0000 UTC");
    expect("{{ unixEpoch (toDate \"2006-01-02\" .created) }}", "1709596800");
    expect("{{ toDate \"2006-01-02 15:04 -07:00\" \"2024-03-05 10:30 +02:00\" | unixEpoch }}",
           "1709627400");
    expect("{{ date \"2006-01-02\" (unixToTime .from) }}", "2023-11-14");
    expect("{{ unixToTime \"1700000000123\" | unixEpochMillis }}", "1700000000123");
    expect("{{ toDate \"2006-01-02\" \"junk\" | unixEpoch }}", "-62135596800");
    expect("{{ toDateInZone \"2006-01-02\" \"UTC\" \"2024-03-05\" | unixEpoch }}", "1709596800");
    render_error("{{ unixToTime \"12\" }}", "unable to parse time");
    render_error("{{ unixEpoch .app }}", "expected time.Time");
}

Test(logql_tmpl, compile_errors_name_what_is_wrong)
{
    compile_error("{{ nosuch 1 }}", "function \"nosuch\" not defined");
    compile_error("{{ .app ", "unclosed action");
    compile_error("{{ if .app }}x", "unexpected EOF");
    compile_error("x{{ end }}", "unexpected {{end}}");
    compile_error("{{ else }}", "unexpected {{else}}");
    compile_error("{{ $undefined }}", "undefined variable \"$undefined\"");
    compile_error("{{ template \"x\" }}", "define, template and block are not supported");
    compile_error("{{ break }}", "{{break}} outside {{range}}");
    compile_error("{{ \"unterminated }}", "unterminated quoted string");
    compile_error("{{ count .app .msg }}", "the regex of this function must be a string literal");
    compile_error("{{ .app | }}", "missing value for command");
    render_error("{{ .app 1 }}", "can't give argument to non-function");
    render_error("{{ ToUpper }}", "wrong number of args for ToUpper: want 1 got 0");
    render_error("{{ .app.x }}", "can't evaluate field x");
    render_error("{{ range .app }}{{ end }}", "range can't iterate over a non-list value");
}
