#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "lib/jsonw.h"
#include "storage/val.h"

/* The writer's text, NUL-terminated (owned). */
static char *text(struct evbuffer *b)
{
    size_t n = evbuffer_get_length(b);
    char *s = malloc(n + 1);
    evbuffer_remove(b, s, n);
    s[n] = '\0';
    return s;
}

/* {"a":[{"a":[ ... ]}]} with |levels| JSON levels, a leaf 1 at the bottom. */
static void nest(struct jsonw *w, int levels)
{
    for (int i = 0; i < levels; i++) {
        if (i % 2 == 0) {
            jsonw_obj_begin(w);
            jsonw_key(w, "a");
        } else {
            jsonw_arr_begin(w);
        }
    }
    jsonw_int(w, 1);
    for (int i = levels - 1; i >= 0; i--) {
        if (i % 2 == 0) {
            jsonw_obj_end(w);
        } else {
            jsonw_arr_end(w);
        }
    }
}

/* How many levels of |j| (nested as nest() writes) lead to |leaf|. */
static int levels_of(json_t *j, json_t **leaf)
{
    int n = 0;
    for (;;) {
        if (json_is_object(j)) {
            cr_assert_eq(json_object_size(j), 1);
            j = json_object_get(j, "a");
        } else if (json_is_array(j)) {
            cr_assert_eq(json_array_size(j), 1);
            j = json_array_get(j, 0);
        } else {
            break;
        }
        n++;
    }
    *leaf = j;
    return n;
}

Test(jsonw, nests_an_anyvalue_of_the_accepted_depth_inside_an_envelope)
{
    /* an OTLP/JSON AnyValue costs up to 4 JSON levels per value level;
     * an answer wraps it in a dozen or more levels of its own */
    int levels = 4 * VAL_MAX_DEPTH + 32;
    cr_assert_geq(JSONW_MAX_DEPTH, levels);
    struct evbuffer *b = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, b);
    nest(&w, levels);
    cr_assert_eq(w.err, 0);
    cr_assert_eq(w.depth, 0);
    char *s = text(b);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    cr_assert_not_null(j, "not JSON: %s", je.text);
    json_t *leaf;
    cr_assert_eq(levels_of(j, &leaf), levels);
    cr_assert_eq(json_integer_value(leaf), 1);
    json_decref(j);
    free(s);
    evbuffer_free(b);
}

Test(jsonw, a_container_past_the_limit_is_null_and_the_text_stays_valid)
{
    struct evbuffer *b = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, b);
    jsonw_arr_begin(&w);
    nest(&w, JSONW_MAX_DEPTH + 3); /* 2 levels too many, with members inside */
    jsonw_str(&w, "after", 5);     /* the siblings that follow still come out */
    jsonw_arr_end(&w);
    cr_assert_eq(w.err, -E2BIG);
    cr_assert_eq(w.depth, 0);
    cr_assert_eq(w.over, 0);
    char *s = text(b);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    cr_assert_not_null(j, "not JSON (%s): ...%s", je.text, s + strlen(s) - 40);
    cr_assert_eq(json_array_size(j), 2);
    cr_assert_str_eq(json_string_value(json_array_get(j, 1)), "after");
    json_t *leaf;
    cr_assert_eq(levels_of(json_array_get(j, 0), &leaf), JSONW_MAX_DEPTH - 1);
    cr_assert(json_is_null(leaf), "the refused container is written as null");
    json_decref(j);
    free(s);
    evbuffer_free(b);
}

Test(jsonw, a_key_inside_a_dropped_container_leaves_no_member_pending)
{
    struct evbuffer *b = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, b);
    for (int i = 0; i < JSONW_MAX_DEPTH; i++) {
        jsonw_arr_begin(&w);
    }
    jsonw_obj_begin(&w); /* refused: null */
    jsonw_key(&w, "k");
    jsonw_obj_begin(&w); /* a member of the dropped object, without a value */
    jsonw_obj_end(&w);
    jsonw_obj_end(&w);
    jsonw_int(&w, 7); /* a sibling: needs its comma */
    for (int i = 0; i < JSONW_MAX_DEPTH; i++) {
        jsonw_arr_end(&w);
    }
    cr_assert_eq(w.err, -E2BIG);
    char *s = text(b);
    size_t n = strlen(s);
    cr_assert_eq(strncmp(s + JSONW_MAX_DEPTH, "null,7]", 7), 0, "%s", s + JSONW_MAX_DEPTH);
    cr_assert_eq(n, 2 * JSONW_MAX_DEPTH + 6);
    free(s);
    evbuffer_free(b);
}

static void put_buf(void *ctx, const void *p, size_t n)
{
    char *b = ctx;
    strncat(b, p, n);
}

Test(jsonw, escapes_into_any_sink_as_into_an_evbuffer)
{
    const char s[] = "a\"\\\n\x01<\xff\xc3\xa9";
    char got[64] = "";
    jsonw_escape_to(put_buf, got, s, sizeof(s) - 1, true);
    struct evbuffer *b = evbuffer_new();
    jsonw_escape(b, s, sizeof(s) - 1, true);
    char *want = text(b);
    cr_assert_str_eq(got, "a\\\"\\\\\\n\\u0001\\u003c\xef\xbf\xbd\xc3\xa9");
    cr_assert_str_eq(got, want);
    free(want);
    evbuffer_free(b);
}

Test(jsonw, nesting_commas_escapes_and_numbers)
{
    struct evbuffer *b = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, b);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "a");
    jsonw_arr_begin(&w);
    jsonw_int(&w, -5);
    jsonw_uint(&w, 18446744073709551615ull);
    jsonw_double(&w, 0.1);
    jsonw_double(&w, NAN);
    jsonw_bool(&w, true);
    jsonw_null(&w);
    jsonw_arr_begin(&w);
    jsonw_arr_end(&w);
    jsonw_obj_begin(&w);
    jsonw_obj_end(&w);
    jsonw_arr_end(&w);
    jsonw_key(&w, "s\"q");
    jsonw_str(&w, "a\"b\\c\n\t\x01<\xc3\xa9\xff\xe2\x82", 14);
    jsonw_key(&w, "v");
    jsonw_double_str(&w, 2);
    jsonw_key(&w, "ts");
    jsonw_uint_str(&w, 1700000000123456789ull);
    jsonw_key(&w, "raw");
    jsonw_raw(&w, "{\"x\":1}", 7);
    jsonw_key(&w, "f");
    jsonw_strf(&w, "%d-%s", 7, "x");
    jsonw_obj_end(&w);
    cr_assert_eq(w.err, 0);
    char *s = text(b);
    cr_assert_str_eq(s, "{\"a\":[-5,18446744073709551615,0.1,\"NaN\",true,null,[],{}],"
                        "\"s\\\"q\":\"a\\\"b\\\\c\\n\\t\\u0001<\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd"
                        "\xef\xbf\xbd\",\"v\":\"2\",\"ts\":\"1700000000123456789\","
                        "\"raw\":{\"x\":1},\"f\":\"7-x\"}");
    free(s);

    jsonw_init(&w, b);
    w.html = true;
    jsonw_cstr(&w, "<a&b>");
    s = text(b);
    cr_assert_str_eq(s, "\"\\u003ca\\u0026b\\u003e\"");
    free(s);
    evbuffer_free(b);

    char buf[32];
    struct {
        double v;
        const char *s;
    } cases[] = {{2, "2"},
                 {-3, "-3"},
                 {0.5, "0.5"},
                 {1.0 / 3, "0.3333333333333333"},
                 {1e21, "1e+21"},
                 {INFINITY, "+Inf"},
                 {-INFINITY, "-Inf"},
                 {-0.0, "0"},
                 {1700000000.123, "1700000000.123"},
                 {0.1 + 0.2, "0.30000000000000004"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = jsonw_fmt_double(buf, cases[i].v);
        cr_assert_str_eq(buf, cases[i].s);
        cr_assert_eq(n, strlen(cases[i].s));
    }
}
