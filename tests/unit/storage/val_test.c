#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "storage/val.h"

Test(val, every_kind_round_trips_with_nesting)
{
    struct vbuf b;
    vbuf_init(&b);
    cr_assert_eq(val_put_key(&b, "s", 1), 0);
    cr_assert_eq(val_put_str(&b, "hello", 5), 0);
    cr_assert_eq(val_put_key(&b, "i", 1), 0);
    cr_assert_eq(val_put_int(&b, INT64_MIN), 0);
    cr_assert_eq(val_put_key(&b, "d", 1), 0);
    cr_assert_eq(val_put_double(&b, -2.5), 0);
    cr_assert_eq(val_put_key(&b, "b", 1), 0);
    cr_assert_eq(val_put_bool(&b, true), 0);
    cr_assert_eq(val_put_key(&b, "y", 1), 0);
    cr_assert_eq(val_put_bytes(&b, "\x00\xff", 2), 0);
    cr_assert_eq(val_put_key(&b, "e", 1), 0);
    cr_assert_eq(val_put_empty(&b), 0);
    cr_assert_eq(val_put_key(&b, "a", 1), 0);
    long arr = val_open(&b, VAL_ARRAY);
    cr_assert_geq(arr, 0);
    val_put_int(&b, 7);
    long kv = val_open(&b, VAL_KVLIST);
    val_put_key(&b, "k", 1);
    val_put_str(&b, "v", 1);
    val_close(&b, kv, 1);
    val_close(&b, arr, 2);
    cr_assert_eq(val_check_attrs(b.p, b.len, 7), 0);
    cr_assert_eq(val_check_attrs(b.p, b.len, 6), -EBADMSG, "count must match the blob exactly");

    struct val_rd r = {b.p, b.p + b.len};
    struct val v;
    const char *k;
    size_t kn;
    cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
    cr_assert(kn == 1 && k[0] == 's' && v.type == VAL_STR && v.n == 5 && !memcmp(v.s, "hello", 5));
    cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
    cr_assert(v.type == VAL_INT && v.i == INT64_MIN);
    cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
    cr_assert(v.type == VAL_DOUBLE && v.d == -2.5);
    cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
    cr_assert(v.type == VAL_BOOL && v.b);
    cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
    cr_assert(v.type == VAL_BYTES && v.n == 2 && !memcmp(v.s, "\x00\xff", 2));
    cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
    cr_assert_eq(v.type, VAL_EMPTY);
    cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
    cr_assert(v.type == VAL_ARRAY && v.count == 2);
    struct val_rd in = v.inner;
    struct val e;
    cr_assert_eq(val_rd_value(&in, &e), 0);
    cr_assert(e.type == VAL_INT && e.i == 7);
    cr_assert_eq(val_rd_value(&in, &e), 0);
    cr_assert(e.type == VAL_KVLIST && e.count == 1);
    cr_assert_eq(val_rd_kv(&e.inner, &k, &kn, &v), 0);
    cr_assert(kn == 1 && *k == 'k' && v.type == VAL_STR && v.n == 1 && *v.s == 'v');
    cr_assert_eq(in.p, in.end);
    cr_assert_eq(r.p, r.end);
    vbuf_fini(&b);
}

Test(val, truncated_or_hostile_encodings_are_refused_not_overread)
{
    struct vbuf b;
    vbuf_init(&b);
    val_put_key(&b, "key", 3);
    long arr = val_open(&b, VAL_ARRAY);
    val_put_str(&b, "abcdef", 6);
    val_put_double(&b, NAN);
    val_close(&b, arr, 2);
    /* Every proper prefix must be refused. */
    for (size_t n = 0; n < b.len; n++) {
        cr_assert_eq(val_check_attrs(b.p, n, 1), -EBADMSG, "prefix %zu accepted", n);
    }
    cr_assert_eq(val_check_attrs(b.p, b.len, 1), 0);
    /* An unknown type byte and a bool that is not 0/1. */
    uint8_t bad1[] = {1, 'k', 9};
    uint8_t bad2[] = {1, 'k', VAL_BOOL, 2};
    cr_assert_eq(val_check_attrs(bad1, sizeof(bad1), 1), -EBADMSG);
    cr_assert_eq(val_check_attrs(bad2, sizeof(bad2), 1), -EBADMSG);
    vbuf_fini(&b);
}

Test(val, nesting_past_the_limit_is_refused)
{
    struct vbuf b;
    long at[VAL_MAX_DEPTH + 2];
    vbuf_init(&b);
    val_put_key(&b, "deep", 4);
    for (int i = 0; i < VAL_MAX_DEPTH + 2; i++) {
        at[i] = val_open(&b, VAL_ARRAY);
    }
    for (int i = VAL_MAX_DEPTH + 1; i >= 0; i--) {
        val_close(&b, at[i], i == VAL_MAX_DEPTH + 1 ? 0 : 1);
    }
    cr_assert_eq(val_check_attrs(b.p, b.len, 1), -EBADMSG);
    vbuf_fini(&b);
}

Test(val, varints_cover_the_whole_range)
{
    struct vbuf b;
    uint64_t cases[] = {0, 1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX};
    vbuf_init(&b);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        vbuf_put_uv(&b, cases[i]);
    }
    struct val_rd r = {b.p, b.p + b.len};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v;
        cr_assert_eq(val_rd_uv(&r, &v), 0);
        cr_assert_eq(v, cases[i]);
    }
    cr_assert_eq(b.len, 1 + 1 + 1 + 2 + 2 + 3 + 5 + 10);
    vbuf_fini(&b);
}
