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

/* The inline readers give what the called ones give, on every prefix of an
 * encoding holding each fast case and its edges (lengths 0, 127, 128;
 * integers -64, 63, 64; both bools; a bad bool) and the slow ones. */
Test(val, the_inline_readers_equal_the_called_ones)
{
    struct vbuf b;
    vbuf_init(&b);
    char big[200];
    memset(big, 'z', sizeof(big));
    const size_t lens[] = {0, 1, 126, 127, 128, 200};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        cr_assert_eq(val_put_key(&b, big, lens[i]), 0);
        cr_assert_eq(val_put_str(&b, big, lens[i]), 0);
        cr_assert_eq(val_put_bytes(&b, big, lens[i]), 0);
    }
    const int64_t ints[] = {0, -1, 1, -64, 63, 64, -65, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        cr_assert_eq(val_put_int(&b, ints[i]), 0);
    }
    cr_assert_eq(val_put_bool(&b, true), 0);
    cr_assert_eq(val_put_bool(&b, false), 0);
    cr_assert_eq(val_put_double(&b, 2.5), 0);
    cr_assert_eq(val_put_empty(&b), 0);
    long arr = val_open(&b, VAL_ARRAY);
    cr_assert_eq(val_put_str(&b, "x", 1), 0);
    val_close(&b, arr, 1);
    const uint8_t badbool[] = {VAL_BOOL, 2, VAL_STR, 0x80};
    cr_assert_eq(vbuf_put(&b, badbool, sizeof(badbool)), 0);
    unsigned values = 0;
    for (size_t cut = 0; cut <= b.len; cut++) {
        for (size_t at = 0; at < cut; at++) {
            /* from every start, as a value and as a string */
            struct val_rd r1 = {b.p + at, b.p + cut}, r2 = r1;
            struct val v1, v2;
            memset(&v1, 0xa5, sizeof(v1));
            memset(&v2, 0xa5, sizeof(v2));
            int rc1 = val_rd_value(&r1, &v1), rc2 = val_rd_value_in(&r2, &v2);
            cr_assert_eq(rc1, rc2, "value at %zu cut %zu", at, cut);
            if (rc1 == 0) {
                cr_assert_eq(r1.p, r2.p);
                cr_assert_eq(v1.type, v2.type);
                cr_assert_eq(v1.count, v2.count);
                if (v1.type == VAL_STR || v1.type == VAL_BYTES) {
                    cr_assert(v1.s == v2.s && v1.n == v2.n, "value at %zu cut %zu", at, cut);
                } else if (v1.type == VAL_INT) {
                    cr_assert_eq(v1.i, v2.i);
                } else if (v1.type == VAL_BOOL) {
                    cr_assert_eq(v1.b, v2.b);
                }
                values += cut == b.len;
            }
            struct val_rd s1 = {b.p + at, b.p + cut}, s2 = s1;
            const char *p1 = NULL, *p2 = NULL;
            size_t n1 = 7, n2 = 7;
            rc1 = val_rd_str(&s1, &p1, &n1);
            rc2 = val_rd_str_in(&s2, &p2, &n2);
            cr_assert_eq(rc1, rc2, "str at %zu cut %zu", at, cut);
            if (rc1 == 0) {
                cr_assert(s1.p == s2.p && p1 == p2 && n1 == n2, "str at %zu cut %zu", at, cut);
            }
        }
    }
    cr_assert_gt(values, 40);
    vbuf_fini(&b);
}
