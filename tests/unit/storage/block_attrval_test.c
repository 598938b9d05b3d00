/*
 * block_attrval_test.c - the seal's attribute walk (block_write.c's
 * record_attrs and its value reader) over every value type and length:
 * each type before a string attribute and last in its list, so a value
 * read to the wrong end would lose the key-values after it from the
 * attribute bloom and the key counts, or misplace the value positions
 * the key coding writes from.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "storage/block.h"
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"

TestSuite(block_attrval, .init = fresh_dir);

#define KINDS 26
#define ROWS (4 * KINDS)

static const int64_t ints[] = {0,         -1,        63,        64,        8191,
                               1ll << 20, 1ll << 27, 1ll << 34, 1ll << 41, 1ll << 48,
                               1ll << 55, INT64_MAX, INT64_MIN};

/* Value kind |k| of row |row| under key "t<k>". */
static void put_kind(struct vbuf *h, unsigned k, uint32_t row)
{
    char key[8], s[200];
    snprintf(key, sizeof(key), "t%u", k);
    cr_assert_eq(val_put_key(h, key, strlen(key)), 0);
    memset(s, 'a' + (char)(row % 26), sizeof(s));
    switch (k) {
    case 0:
        cr_assert_eq(val_put_empty(h), 0);
        break;
    case 1:
        cr_assert_eq(val_put_str(h, "", 0), 0);
        break;
    case 2:
        cr_assert_eq(val_put_str(h, s, 7), 0);
        break;
    case 3:
        cr_assert_eq(val_put_str(h, s, 127), 0); /* the longest one-byte length */
        break;
    case 4:
        cr_assert_eq(val_put_str(h, s, 128), 0); /* a two-byte length */
        break;
    case 5:
        cr_assert_eq(val_put_bytes(h, "\0\1\2", 3), 0);
        break;
    case 6:
    case 7:
        cr_assert_eq(val_put_bool(h, k == 7), 0);
        break;
    case 8 ... 20: /* varints of 1 to 10 bytes */
        cr_assert_eq(val_put_int(h, ints[k - 8]), 0);
        break;
    case 21:
        cr_assert_eq(val_put_double(h, 2.25), 0);
        break;
    case 22: {
        long at = val_open(h, VAL_ARRAY);
        cr_assert_geq(at, 0);
        snprintf(s, sizeof(s), "ae%u", row);
        cr_assert_eq(val_put_str(h, s, strlen(s)), 0);
        cr_assert_eq(val_put_int(h, 7), 0);
        val_close(h, at, 2);
        break;
    }
    case 23: {
        long at = val_open(h, VAL_KVLIST);
        cr_assert_geq(at, 0);
        cr_assert_eq(val_put_key(h, "a", 1), 0);
        cr_assert_eq(val_put_str(h, "b", 1), 0);
        val_close(h, at, 1);
        break;
    }
    case 24:
        cr_assert_eq(val_put_bytes(h, s, 127), 0);
        break;
    default:
        cr_assert_eq(val_put_str(h, s, 30), 0);
        break;
    }
}

/* Row i: kind i % KINDS, then after = "v<i>", then kind (7i + 3) % KINDS
 * last (fewer than 9 bytes after its type byte when it is short). */
static struct batch *kinds_batch(void)
{
    struct batch *bt = batch_new(SIG_LOGS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    for (uint32_t i = 0; i < ROWS; i++) {
        struct log_row *r = batch_add_log(bt);
        cr_assert_not_null(r);
        r->time_ns = r->observed_ns = (uint64_t)(i + 1) * 1000000000ull;
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        char v[16];
        put_kind(h, i % KINDS, i);
        snprintf(v, sizeof(v), "v%u", i);
        cr_assert_eq(val_put_key(h, "after", 5), 0);
        cr_assert_eq(val_put_str(h, v, strlen(v)), 0);
        put_kind(h, (7 * i + 3) % KINDS, i);
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 3};
    }
    return bt;
}

static void check_kinds(const struct blk_wopts *o)
{
    struct batch *bt = kinds_batch();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    write_block(ob, ROWS, 0, 1, o, path, sizeof(path));
    blk *b = open_ok(path);
    check_block(b, ob, ROWS); /* every list read back byte for byte */
    check_hot(b);             /* the key counts: every key seen where it is */
    for (uint32_t i = 0; i < ROWS; i++) {
        char v[16];
        snprintf(v, sizeof(v), "v%u", i);
        cr_assert(blk_may_have_attr(b, "after", 5, v, strlen(v)), "row %u after=%s", i, v);
        if (i % KINDS == 22) {
            snprintf(v, sizeof(v), "ae%u", i);
            cr_assert(blk_may_have_attr(b, "t22", 3, v, strlen(v)), "row %u t22 element", i);
        }
    }
    cr_assert_not(blk_may_have_attr(b, "after", 5, "v9999", 5)); /* the bloom answers no */
    blk_unref(b);
    oblock_free(ob);
    batch_free(bt);
}

Test(block_attrval, every_value_type_and_length_is_walked_to_its_end)
{
    check_kinds(NULL);
}

Test(block_attrval, every_value_type_and_length_is_walked_to_its_end_hot)
{
    struct blk_wopts o = blk_hot_wopts(BLK_HOT_ZSTD_LEVEL, SIG_LOGS);
    check_kinds(&o);
}
