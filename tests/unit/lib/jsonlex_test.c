#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "lib/jsonlex.h"

Test(jsonlex, walks_an_object_and_unescapes_a_string)
{
    const char *t = " {\"k\\u00e9y\" : [1, -2.5e3, true, null], \"s\":\"a\\nb\\ud83d\\ude00\"} ";
    struct jsonlex x;
    jsonlex_init(&x, t, strlen(t));
    cr_assert_eq(jsonlex_peek(&x), '{');
    x.pos++;
    bool first = true;
    struct jsonlex_str k;
    cr_assert_eq(jsonlex_obj_next(&x, &k, &first), 1);
    cr_assert(k.esc);
    char buf[16];
    const char *p;
    cr_assert(jsonlex_str_bytes(&x, &k, buf, sizeof(buf), &p));
    cr_assert_eq(k.len, 4);
    cr_assert_eq(memcmp(p, "k\xc3\xa9y", 4), 0);
    cr_assert_eq(jsonlex_skip(&x), 0); /* the array */
    cr_assert_eq(jsonlex_obj_next(&x, &k, &first), 1);
    struct jsonlex_str v;
    cr_assert_eq(jsonlex_str(&x, &v), 0);
    cr_assert_eq(v.len, 7);
    jsonlex_unescape(&x, &v, buf);
    cr_assert_eq(memcmp(buf, "a\nb\xf0\x9f\x98\x80", 7), 0);
    cr_assert_eq(jsonlex_obj_next(&x, &k, &first), 0);
    cr_assert_eq(jsonlex_peek(&x), -1);
}

Test(jsonlex, says_what_is_wrong_and_where)
{
    const char *t = "[\"ab\\x\"]";
    struct jsonlex x;
    jsonlex_init(&x, t, strlen(t));
    cr_assert_eq(jsonlex_skip(&x), -EPROTO);
    cr_assert_str_eq(x.err, "bad escape '\\x'");
    cr_assert_eq(x.err_at, 4);

    jsonlex_init(&x, "\"\\udc00\"", 8);
    cr_assert_eq(jsonlex_skip(&x), -EPROTO);
    cr_assert_str_eq(x.err, "lone low surrogate in a \\u escape");

    jsonlex_init(&x, "{\"a\" 1}", 7);
    cr_assert_eq(jsonlex_skip(&x), -EPROTO);
    cr_assert_str_eq(x.err, "expected ':'");
    cr_assert_eq(x.err_at, 5);
}

Test(jsonlex, skips_nesting_up_to_its_limit_and_no_deeper)
{
    static char t[2 * (JSONLEX_SKIP_DEPTH + 1)];
    for (int deeper = 0; deeper <= 1; deeper++) {
        size_t d = JSONLEX_SKIP_DEPTH + (size_t)deeper;
        memset(t, '[', d);
        memset(t + d, ']', d);
        struct jsonlex x;
        jsonlex_init(&x, t, 2 * d);
        cr_assert_eq(jsonlex_skip(&x), deeper ? -EPROTO : 0);
    }
}

Test(jsonlex, measures_numbers_by_the_json_grammar)
{
    cr_assert_eq(jsonlex_num_span("-0.5e+10,", 9), 8);
    cr_assert_eq(jsonlex_num_span("01", 2), 1);
    cr_assert_eq(jsonlex_num_span("1.", 2), 0);
    cr_assert_eq(jsonlex_num_span("-", 1), 0);
}
