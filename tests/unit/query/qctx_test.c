/*
 * qctx_test.c - query/qctx.c, the query context every executor runs on,
 * over a real catalog of log rows: a sealed block (SEALED rows, times
 * T0+0 .. T0+SEALED-1 seconds) and an open one (OPEN rows after them).
 * The snapshot sees each row once (and keeps doing so while the open block
 * grows and is sealed), the row limit, the deadline and the cancel flag
 * stop the query with their errors, the first error wins, and a block
 * whose attribute table fails verification is quarantined once, with its
 * warning, while the query goes on with the open block's rows.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "query/qctx.h"
#include "storage/arena.h"
#include "storage/batch.h"
#include "storage/block.h"
#include "storage/catalog.h"
#include "storage/oblock.h"
#include "storage/val.h"
#include "tests/util/tclock.h"
#include "tests/util/blkflip.h"
#include "tests/util/tmpdir.h"

#define T0 UINT64_C(1700000000) /* seconds */
#define NS UINT64_C(1000000000)
#define SEALED 40
#define OPEN 8
#define ALL (SEALED + OPEN)

static char dir[256];
static char sealed_path[512];   /* the sealed block's file */
static struct cat_open *open_h; /* the open block's catalog handle */

/* Rows first .. first + n - 1: time T0 + i seconds, body "row <i>", one
 * attribute k="v<i>" (so the block has an attribute table). */
static struct batch *rows(int first, int n)
{
    struct batch *b = batch_new(SIG_LOGS);
    cr_assert_not_null(b);
    struct res_row *rr = batch_add_resource(b);
    size_t off = b->heap.len;
    cr_assert_eq(val_put_key(&b->heap, "service.name", 12), 0);
    cr_assert_eq(val_put_str(&b->heap, "svc", 3), 0);
    rr->attrs = (struct attrs){.blob = {(uint32_t)off, (uint32_t)(b->heap.len - off)}, .count = 1};
    struct scope_row *sc = batch_add_scope(b);
    sc->resource = 0;
    static char bodies[ALL + 16][16];
    for (int i = first; i < first + n; i++) {
        struct log_row *l = batch_add_log(b);
        l->time_ns = (T0 + (uint64_t)i) * NS;
        l->scope = 0;
        l->body_type = VAL_STR;
        snprintf(bodies[i], sizeof(bodies[i]), "row %d", i);
        l->body_str = (struct mstr){bodies[i], (uint32_t)strlen(bodies[i])};
        char v[16];
        snprintf(v, sizeof(v), "v%d", i);
        off = b->heap.len;
        cr_assert_eq(val_put_key(&b->heap, "k", 1), 0);
        cr_assert_eq(val_put_str(&b->heap, v, strlen(v)), 0);
        l->attrs =
            (struct attrs){.blob = {(uint32_t)off, (uint32_t)(b->heap.len - off)}, .count = 1};
    }
    return b;
}

static oblock *make_block(int first, int n)
{
    struct batch *b = rows(first, n);
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, b, 1), 0);
    batch_free(b);
    return ob;
}

/* Seals the open block behind |h| as DATA/logs/<name>.blk and publishes
 * it; with |damage|, one byte in the middle of its attribute table is
 * flipped after writing and before anything reads the table. */
static void seal(struct cat_open *h, uint64_t seal_id, bool damage, char *path, size_t cap)
{
    oblock *ob = catalog_open_block(h);
    struct blk_meta m = {.shard = 0, .wal_seq = seal_id, .seal_id = seal_id};
    char sub[300], err[256];
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "logs"), 0);
    mkdir(sub, 0755);
    cr_assert_eq(blk_write(sub, ob, oblock_rows(ob), &m, path, cap), 0);
    blk *b;
    cr_assert_eq(blk_open(path, &b, err, sizeof(err)), 0, "%s", err);
    if (damage) {
        blk_unref(b);
        cr_assert_eq(blkflip_table(path, BLK_T_ATTRS), 0);
        cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), 0, "%s", err);
    }
    cr_assert_eq(catalog_publish(h, b, path), 0);
}

static void corpus_ex(bool damage)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    struct cat_open *h = catalog_open_add(SIG_LOGS, make_block(0, SEALED));
    cr_assert_not_null(h);
    seal(h, 1, damage, sealed_path, sizeof(sealed_path));
    open_h = catalog_open_add(SIG_LOGS, make_block(SEALED, OPEN));
    cr_assert_not_null(open_h);
}

static void corpus(void)
{
    corpus_ex(false);
}

static void damaged_corpus(void)
{
    corpus_ex(true);
}

static void teardown(void)
{
    catalog_fini();
}

TestSuite(qctx, .init = corpus, .fini = teardown);

/* What one scan of every source saw. */
struct seen {
    unsigned hits[ALL + 16]; /* by row number (time - T0) */
    uint64_t read;           /* rows read */
    int end_rc;              /* the last qctx_scan_end */
};

/* Scans every source of |q| as an executor item does (qctx.h SHAPE):
 * load |want|, rows forward with a check every |row_check| rows and the
 * clock, each row read, a row failing verification quarantining its
 * source. Stops at the first source once the query has an error. */
static void scan_all(struct qctx *q, unsigned want, uint32_t row_check, struct seen *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < q->n_src && qctx_err(q) == 0; i++) {
        struct qctx_src *s = &q->src[i];
        if (qctx_load(q, s, want) < 0) {
            continue;
        }
        struct qctx_scan it;
        qctx_scan_begin(&it, q, 0, s->rows, false, row_check, true);
        uint64_t row;
        while (qctx_scan_next(&it, &row)) {
            struct log_view v;
            int rc = qctx_read_log(s, row, want, &v);
            if (rc == -EBADMSG) {
                qctx_src_fail(q, s, qctx_scan_left(&it));
                break;
            }
            cr_assert_eq(rc, 0);
            uint64_t k = v.time_ns / NS - T0;
            cr_assert_lt(k, ALL + 16);
            out->hits[k]++;
            out->read++;
        }
        out->end_rc = qctx_scan_end(&it);
    }
}

/* ---- the snapshot ---- */

Test(qctx, the_snapshot_sees_each_row_once_across_the_sealed_and_the_open_block)
{
    struct qctx q;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    cr_assert_eq(q.n_src, 2);
    cr_assert_not_null(q.src[0].b, "sealed blocks first");
    cr_assert_null(q.src[0].ob);
    cr_assert_eq(q.src[0].rows, SEALED);
    cr_assert_eq(q.src[0].tmin, T0 * NS);
    cr_assert_eq(q.src[0].tmax, (T0 + SEALED - 1) * NS);
    cr_assert_null(q.src[1].b, "then the open ones");
    cr_assert_eq(q.src[1].ob, catalog_open_block(open_h));
    cr_assert_eq(q.src[1].rows, OPEN);
    cr_assert_eq(q.src[1].tmin, 0);
    cr_assert_eq(q.src[1].tmax, UINT64_MAX);

    /* rows appended after the snapshot are not part of it */
    struct batch *more = rows(ALL, 4);
    cr_assert_eq(oblock_append(catalog_open_block(open_h), more, 2), 0);
    batch_free(more);

    struct seen s;
    scan_all(&q, BLK_ROOT | BLK_ATTRS, 1, &s);
    cr_assert_eq(qctx_err(&q), 0, "%s", qctx_message(&q));
    cr_assert_eq(s.read, ALL);
    for (int i = 0; i < ALL + 4; i++) {
        cr_assert_eq(s.hits[i], i < ALL ? 1u : 0u, "row %d seen %u times", i, s.hits[i]);
    }
    cr_assert_eq(q.st.rows_scanned, ALL);
    cr_assert_eq(q.rows, ALL);

    /* the open block is sealed while the first query still holds it: a new
     * query sees its rows once, in the sealed block only; the first one
     * still reads the open block it took */
    char path[512];
    seal(open_h, 2, false, path, sizeof(path));
    struct qctx q2;
    cr_assert_eq(qctx_open(&q2, SIG_LOGS, NULL, "rows"), 0);
    cr_assert_eq(q2.n_src, 2);
    cr_assert_not_null(q2.src[0].b);
    cr_assert_not_null(q2.src[1].b, "no open block any more");
    struct seen s2;
    scan_all(&q2, BLK_ROOT, 1, &s2);
    cr_assert_eq(qctx_err(&q2), 0, "%s", qctx_message(&q2));
    cr_assert_eq(s2.read, ALL + 4);
    for (int i = 0; i < ALL + 4; i++) {
        cr_assert_eq(s2.hits[i], 1u, "row %d seen %u times after the seal", i, s2.hits[i]);
    }
    scan_all(&q, BLK_ROOT, 1, &s);
    cr_assert_eq(s.read, ALL, "the first snapshot is unchanged");
    qctx_close(&q2);
    qctx_close(&q);
    qctx_close(&q); /* once; a second close is harmless */
}

/* ---- limits ---- */

Test(qctx, the_row_limit_stops_the_scan_with_e2big_at_exactly_the_limit)
{
    /* exactly as many rows as the query has: it completes */
    struct qctx q;
    struct qctx_limits lim = {.max_rows = ALL};
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    struct seen s;
    scan_all(&q, BLK_ROOT, 1, &s);
    cr_assert_eq(qctx_err(&q), 0, "%s", qctx_message(&q));
    cr_assert_eq(s.read, ALL);
    qctx_close(&q);

    /* one fewer: the row past the limit is not handed out */
    lim.max_rows = 25;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    scan_all(&q, BLK_ROOT, 1, &s);
    cr_assert_eq(s.read, 25);
    cr_assert_eq(s.end_rc, -E2BIG);
    cr_assert_eq(qctx_err(&q), -E2BIG);
    cr_assert_eq(qctx_cause(&q), QCTX_ROWS);
    cr_assert_str_eq(qctx_message(&q), "the query scanned more than 25 rows (--query-max-rows); "
                                       "narrow the time range or the selector");
    qctx_close(&q);

    /* counted directly, as planning does */
    lim.max_rows = 10;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    cr_assert_eq(qctx_rows(&q, 10), 0);
    cr_assert_eq(qctx_rows(&q, 1), -E2BIG);
    cr_assert_eq(q.st.rows_scanned, 11);
    qctx_close(&q);
}

Test(qctx, memory_over_the_limit_is_enomem)
{
    struct qctx q;
    struct qctx_limits lim = {.max_memory = 1000};
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    cr_assert_eq(qctx_charge(&q, 1000), 0);
    qctx_uncharge(&q, 400);
    cr_assert_eq(qctx_charge(&q, 400), 0);
    cr_assert_eq(qctx_err(&q), 0);
    cr_assert_eq(qctx_charge(&q, 1), -ENOMEM);
    cr_assert_eq(qctx_err(&q), -ENOMEM);
    cr_assert_eq(qctx_cause(&q), QCTX_MEMORY);
    qctx_close(&q);
}

Test(qctx, a_bound_arena_charges_its_chunks_and_stops_at_the_limit)
{
    struct qctx q;
    struct qctx_limits lim = {.max_memory = 200 << 10};
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    uint64_t before = qctx_memory_held();
    arena *a = arena_new(64 << 10);
    qctx_arena_bind(&q, a);
    cr_assert_not_null(arena_alloc(a, 100));
    cr_expect_eq(q.mem, (int64_t)arena_footprint(a));
    cr_expect_eq(qctx_memory_held(), before + arena_footprint(a));
    cr_assert_not_null(arena_alloc(a, 100 << 10)); /* a chunk of its own */
    cr_expect_eq(q.mem, (int64_t)arena_footprint(a));
    /* past the limit: no chunk, the query's error, nothing more held */
    size_t had = arena_footprint(a);
    cr_expect_null(arena_alloc(a, 100 << 10));
    cr_expect_eq(arena_footprint(a), had);
    cr_expect_eq(q.mem, (int64_t)had);
    cr_expect_eq(qctx_err(&q), -ENOMEM);
    cr_expect_eq(qctx_cause(&q), QCTX_MEMORY);
    arena_reset(a); /* keeps one chunk */
    cr_expect_eq(q.mem, (int64_t)arena_footprint(a));
    arena_free(a);
    cr_expect_eq(q.mem, 0);
    cr_expect_eq(qctx_memory_held(), before);
    qctx_close(&q);
}

Test(qctx, the_open_queries_together_stop_at_the_total)
{
    struct qctx q1, q2;
    qctx_set_total_memory(1000);
    cr_assert_eq(qctx_open(&q1, SIG_LOGS, NULL, "rows"), 0);
    cr_assert_eq(qctx_open(&q2, SIG_LOGS, NULL, "rows"), 0);
    cr_expect_eq(qctx_charge(&q1, 600), 0);
    cr_expect_eq(qctx_charge(&q2, 400), 0);
    cr_expect_eq(qctx_charge(&q2, 1), -ENOMEM);
    cr_expect_eq(qctx_cause(&q2), QCTX_SHARED);
    cr_expect(strstr(qctx_message(&q2), "1000 bytes of memory together") != NULL, "%s",
              qctx_message(&q2));
    cr_expect_eq(qctx_err(&q1), 0, "the other query goes on");
    qctx_close(&q2);
    cr_expect_eq(qctx_memory_held(), 600);
    qctx_uncharge(&q1, 600);
    qctx_uncharge(&q1, 600); /* past what it holds: nothing */
    cr_expect_eq(qctx_memory_held(), 0);
    qctx_close(&q1);
    qctx_set_total_memory(0);
}

Test(qctx, a_child_context_drops_its_memory_error_and_passes_the_others)
{
    struct qctx q, sub;
    struct qctx_limits lim = {.max_rows = 100};
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    qctx_sub_open(&sub, &q, 500);
    cr_expect_eq(sub.n_src, q.n_src);
    cr_expect_eq(qctx_rows(&sub, 30), 0);
    cr_expect_eq(qctx_charge(&sub, 501), -ENOMEM);
    cr_expect_eq(qctx_memory_held(), 501);
    cr_expect_eq(qctx_sub_close(&sub, &q), -ENOMEM);
    cr_expect_eq(qctx_memory_held(), 0);
    cr_expect_eq(qctx_err(&q), 0, "a memory error stays the child's");
    cr_expect_eq(q.rows, 30);
    qctx_sub_open(&sub, &q, 0);
    cr_expect_eq(qctx_rows(&sub, 80), 0, "the child counts no row limit of its own");
    cr_expect_eq(qctx_sub_close(&sub, &q), 0);
    cr_expect_eq(qctx_err(&q), -E2BIG, "its rows count in the parent's limit");
    qctx_close(&q);
}

Test(qctx, an_expired_deadline_stops_qctx_check_with_etimedout)
{
    struct qctx q;
    struct qctx_limits lim = {.deadline_ns = tclock_ns() + 60 * NS};
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    cr_assert_eq(qctx_check(&q), 0, "a deadline a minute away");
    qctx_close(&q);

    lim.deadline_ns = tclock_ns() - 1;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    cr_assert_eq(qctx_check(&q), -ETIMEDOUT);
    cr_assert_eq(qctx_err(&q), -ETIMEDOUT);
    cr_assert_eq(qctx_cause(&q), QCTX_DEADLINE);
    cr_assert(strstr(qctx_message(&q), "request timed out") != NULL, "%s", qctx_message(&q));
    qctx_close(&q);

    /* a cursor with the clock looks every QCTX_CLOCK_ROWS rows: the row it
     * looks at is not handed out */
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    struct seen s;
    scan_all(&q, BLK_ROOT, 1000, &s);
    cr_assert_eq(s.read, QCTX_CLOCK_ROWS - 1);
    cr_assert_eq(qctx_err(&q), -ETIMEDOUT);
    qctx_close(&q);
}

Test(qctx, the_cancel_flag_stops_qctx_check_with_ecanceled)
{
    int cancel = 0;
    struct qctx q;
    struct qctx_limits lim = {.cancel = &cancel};
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    cr_assert_eq(qctx_check(&q), 0);
    cr_assert_eq(qctx_tick(&q), 0);
    cancel = 1;
    cr_assert_eq(qctx_check(&q), -ECANCELED);
    cr_assert_eq(qctx_err(&q), -ECANCELED);
    cr_assert_eq(qctx_cause(&q), QCTX_CANCEL);
    cr_assert_str_eq(qctx_message(&q), "the client closed the connection");
    qctx_close(&q);
}

/* ---- the first error ---- */

Test(qctx, the_first_error_wins)
{
    int cancel = 0;
    struct qctx q;
    struct qctx_limits lim = {.max_rows = 5, .cancel = &cancel};
    cr_assert_eq(qctx_open(&q, SIG_LOGS, &lim, "rows"), 0);
    cr_assert_str_eq(qctx_message(&q), "");
    qctx_fail(&q, -EIO, "first %d", 1);
    cr_assert_eq(qctx_err(&q), -EIO);
    qctx_fail(&q, -EINVAL, "second");
    cancel = 1;
    cr_assert_eq(qctx_check(&q), -EIO, "the cancel flag does not replace it");
    cr_assert_eq(qctx_rows(&q, 100), -EIO, "nor the row limit");
    cr_assert_eq(qctx_charge(&q, 0), 0);
    cr_assert_eq(qctx_err(&q), -EIO);
    cr_assert_eq(qctx_cause(&q), QCTX_OTHER);
    cr_assert_str_eq(qctx_message(&q), "first 1");
    qctx_close(&q);
}

struct racer {
    struct qctx *q;
    int rc;
    pthread_barrier_t *go;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    pthread_barrier_wait(r->go);
    qctx_fail(r->q, r->rc, "error %d", -r->rc);
    return NULL;
}

Test(qctx, racing_errors_leave_one_error_with_its_own_message)
{
    struct qctx q;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 8);
    pthread_t t[8];
    struct racer r[8];
    for (int i = 0; i < 8; i++) {
        r[i] = (struct racer){&q, -(100 + i), &go};
        cr_assert_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
    }
    pthread_barrier_destroy(&go);
    int err = qctx_err(&q);
    cr_assert(err <= -100 && err >= -107, "%d", err);
    char want[32];
    snprintf(want, sizeof(want), "error %d", -err);
    cr_assert_str_eq(qctx_message(&q), want);
    qctx_close(&q);
}

/* ---- quarantine ---- */

static int count_warnings(const char *joined)
{
    if (joined[0] == '\0') {
        return 0;
    }
    int n = 1;
    for (const char *p = joined; (p = strstr(p, "; ")) != NULL; p += 2) {
        n++;
    }
    return n;
}

/* The warnings of |q| are the one quarantine warning of the sealed block,
 * all of its rows skipped, counted as |noun|. */
static void expect_one_quarantine(struct qctx *q, const char *noun)
{
    char joined[1024], want[1024];
    qctx_warnings_join(q, joined, sizeof(joined));
    snprintf(want, sizeof(want),
             "a block failed verification and was quarantined: %d %s skipped (the server log "
             "names the block)",
             SEALED, noun);
    cr_assert_str_eq(joined, want);
    cr_assert_eq(count_warnings(joined), 1);
    /* the path is for the log only, once */
    char path[300];
    cr_assert(qctx_quarantined_next(path, sizeof(path)));
    cr_assert_str_eq(path, sealed_path);
    cr_assert(!qctx_quarantined_next(path, sizeof(path)));
}

TestSuite(qctx_damaged, .init = damaged_corpus, .fini = teardown);

Test(qctx_damaged, a_block_failing_verification_is_quarantined_once_and_the_query_goes_on)
{
    struct qctx q;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    cr_assert_eq(q.n_src, 2);
    struct seen s;
    scan_all(&q, BLK_ROOT | BLK_ATTRS, 1, &s);
    cr_assert_eq(qctx_err(&q), 0, "a quarantine is not the query's error: %s", qctx_message(&q));
    cr_assert_eq(s.read, OPEN, "the open block's rows, none of the damaged block's");
    for (int i = 0; i < ALL; i++) {
        cr_assert_eq(s.hits[i], i < SEALED ? 0u : 1u, "row %d seen %u times", i, s.hits[i]);
    }
    cr_assert(qctx_src_failed(&q.src[0]));
    cr_assert(!qctx_src_failed(&q.src[1]));
    cr_assert_eq(q.st.blocks_failed, 1);

    /* again, both ways: still one quarantine and one warning */
    cr_assert_eq(qctx_load(&q, &q.src[0], BLK_ROOT), -EBADMSG, "failed already");
    qctx_src_fail(&q, &q.src[0], 7);
    scan_all(&q, BLK_ROOT | BLK_ATTRS, 1, &s);
    cr_assert_eq(s.read, OPEN);
    cr_assert_eq(q.st.blocks_failed, 1);
    expect_one_quarantine(&q, "rows");
    qctx_close(&q);

    /* moved to DATA/quarantine/ and out of the catalog: the next query has
     * only the open block */
    char qdir[300];
    struct stat st;
    cr_assert_eq(tmpdir_join(qdir, sizeof(qdir), dir, "quarantine"), 0);
    cr_assert_eq(stat(qdir, &st), 0, "quarantine directory");
    cr_assert_neq(stat(sealed_path, &st), 0, "the block left DATA/logs/");
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    cr_assert_eq(q.n_src, 1);
    cr_assert_null(q.src[0].b);
    scan_all(&q, BLK_ROOT | BLK_ATTRS, 1, &s);
    cr_assert_eq(s.read, OPEN);
    cr_assert_eq(q.st.blocks_failed, 0);
    qctx_close(&q);
}

Test(qctx_damaged, a_row_failing_verification_mid_scan_quarantines_the_block)
{
    /* the root table is intact: the load of it passes, the first row read
     * with the attributes fails, and every row left is skipped */
    struct qctx q;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "noun"), 0);
    struct qctx_src *b = &q.src[0];
    cr_assert_not_null(b->b);
    cr_assert_eq(qctx_load(&q, b, BLK_ROOT), 0);
    struct qctx_scan it;
    qctx_scan_begin(&it, &q, 0, b->rows, false, 1, true);
    uint64_t row, read = 0;
    while (qctx_scan_next(&it, &row)) {
        struct log_view v;
        int rc = qctx_read_log(b, row, BLK_ROOT | BLK_ATTRS, &v);
        if (rc == -EBADMSG) {
            qctx_src_fail(&q, b, qctx_scan_left(&it));
            break;
        }
        read++;
    }
    cr_assert_eq(qctx_scan_end(&it), 0);
    cr_assert_eq(read, 0);
    cr_assert(qctx_src_failed(b));
    cr_assert_eq(q.st.blocks_failed, 1);
    expect_one_quarantine(&q, "noun");
    cr_assert_eq(qctx_err(&q), 0);
    qctx_close(&q);
}

/* ---- the page window (qctx_load) ---- */

#include "storage/adm.h"
#include "tests/unit/storage/blkgen.h"

#define PW_BLOCKS 6
#define PW_ROWS 3000

static blk *pw_blocks[PW_BLOCKS];

/* PW_BLOCKS sealed log blocks of PW_ROWS random rows each (blkgen.h),
 * published as the sealer does, no open block. */
static void pages_corpus(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    adm_init(1ull << 34);
    char sub[300], path[512], err[256];
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "logs"), 0);
    mkdir(sub, 0755);
    for (int k = 0; k < PW_BLOCKS; k++) {
        oblock *ob = gen_oblock(SIG_LOGS, 500 + (uint64_t)k, PW_ROWS, 200);
        struct cat_open *h = catalog_open_add(SIG_LOGS, ob);
        cr_assert_not_null(h);
        struct blk_meta m = {.shard = 0, .wal_seq = (uint64_t)k + 1, .seal_id = (uint64_t)k + 1};
        cr_assert_eq(blk_write(sub, ob, oblock_rows(ob), &m, path, sizeof(path)), 0);
        cr_assert_eq(blk_open(path, &pw_blocks[k], err, sizeof(err)), 0, "%s", err);
        blk_drop_tables(pw_blocks[k]);
        cr_assert_eq(catalog_publish(h, pw_blocks[k], path), 0);
    }
}

static void pages_teardown(void)
{
    catalog_set_table_cap(0);
    catalog_fini();
}

/* Resident bytes of the mappings of |path| (/proc/self/smaps), or of
 * every *.blk file for NULL. */
static uint64_t resident(const char *path)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    cr_assert_not_null(f);
    char line[1024];
    bool in = false;
    uint64_t sum = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        int name = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &name) == 2 && name > 0) {
            char *p = line + name;
            p[strcspn(p, "\n")] = '\0';
            size_t n = strlen(p);
            in = path != NULL ? strcmp(p, path) == 0 : n > 4 && strcmp(p + n - 4, ".blk") == 0;
        } else if (in && strncmp(line, "Rss:", 4) == 0) {
            sum += strtoull(line + 4, NULL, 10) * 1024;
        }
    }
    fclose(f);
    return sum;
}

/* Every row of every sealed source, loaded with the attribute table: a
 * digest per block into dig[] (NULL: none); after each block, |after|. */
static void pw_scan(struct qctx *q, uint64_t dig[PW_BLOCKS],
                    void (*after)(struct qctx *q, size_t i))
{
    for (size_t i = 0; i < q->n_src; i++) {
        struct qctx_src *s = &q->src[i];
        cr_assert_not_null(s->b);
        cr_assert_eq(qctx_load(q, s, BLK_ROOT | BLK_ATTRS), 0);
        uint64_t h = 0xcbf29ce484222325ull;
        for (uint64_t r = 0; r < s->rows; r++) {
            struct log_view v;
            cr_assert_eq(qctx_read_log(s, r, BLK_ROOT | BLK_ATTRS, &v), 0);
            const uint8_t *p[] = {(const uint8_t *)&v.time_ns, (const uint8_t *)v.body_str.p,
                                  (const uint8_t *)v.attrs.p};
            size_t n[] = {sizeof(v.time_ns), v.body_str.len, v.attrs.len};
            for (int f = 0; f < 3; f++) {
                for (size_t j = 0; j < n[f]; j++) {
                    h = (h ^ p[f][j]) * 0x100000001b3ull;
                }
            }
        }
        if (dig != NULL) {
            dig[i] = h;
        }
        if (after != NULL) {
            after(q, i);
        }
    }
}

TestSuite(qctx_pages, .init = pages_corpus, .fini = pages_teardown);

Test(qctx_pages, a_finished_query_leaves_no_block_pages_resident_and_reads_the_same_after)
{
    cr_assert_eq(resident(NULL), 0, "published blocks are not resident");
    uint64_t in_use = adm_in_use();
    struct qctx q;
    uint64_t first[PW_BLOCKS], again[PW_BLOCKS];
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    cr_assert_eq(q.n_src, PW_BLOCKS);
    pw_scan(&q, first, NULL);
    uint64_t during = resident(NULL);
    cr_assert_gt(during, 16 * 4096, "the scan read the tables through the mapping: %llu",
                 (unsigned long long)during);
    uint64_t files = 0;
    for (int k = 0; k < PW_BLOCKS; k++) {
        files += blk_file_bytes(pw_blocks[k]);
    }
    struct blk_stats bs;
    blk_get_stats(&bs);
    cr_assert_eq(adm_in_use() - in_use, files + bs.table_heap_bytes,
                 "no cap: every loaded block's file is charged while in the window");
    qctx_close(&q);
    cr_assert_eq(resident(NULL), 0, "after the query: %llu bytes still resident",
                 (unsigned long long)resident(NULL));
    blk_get_stats(&bs);
    cr_assert_eq(adm_in_use() - in_use, bs.table_heap_bytes, "the window's charge is returned");

    /* The pages come back from the page cache: the same rows. */
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    pw_scan(&q, again, NULL);
    for (int k = 0; k < PW_BLOCKS; k++) {
        cr_assert_eq(again[k], first[k], "block %d", k);
    }
    qctx_close(&q);
    cr_assert_eq(resident(NULL), 0);
}

/* After block i of a scan under a 1-byte bound: only block i is in the
 * window (qpool_workers() is 0 here: one kept), nothing before it is
 * resident. */
static void only_the_last_is_resident(struct qctx *q, size_t i)
{
    cr_assert_gt(resident(blk_path(q->src[i].b)), 0, "block %zu, just read", i);
    for (size_t j = 0; j < i; j++) {
        cr_assert_eq(resident(blk_path(q->src[j].b)), 0, "block %zu after block %zu", j, i);
        cr_assert_eq(q->src[j].paged, 0);
    }
    cr_assert_eq(q->pg_n, 1);
    cr_assert_eq(q->pg_bytes, blk_file_bytes(q->src[i].b));
}

Test(qctx_pages, over_the_bound_a_running_scan_keeps_only_its_current_block_resident)
{
    uint64_t first[PW_BLOCKS], again[PW_BLOCKS];
    struct qctx q;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    pw_scan(&q, first, NULL);
    qctx_close(&q);

    uint64_t dropped = blk_pages_dropped();
    catalog_set_table_cap(1);
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    pw_scan(&q, again, only_the_last_is_resident);
    for (int k = 0; k < PW_BLOCKS; k++) {
        cr_assert_eq(again[k], first[k], "block %d", k);
    }
    cr_assert_eq(blk_pages_dropped() - dropped, PW_BLOCKS - 1, "one drop per block left behind");
    /* A block read again after it left the window enters it again. */
    cr_assert_eq(qctx_load(&q, &q.src[0], BLK_ROOT), 0);
    cr_assert_eq(q.src[0].paged, 1);
    cr_assert_eq(q.pg_n, 1);
    qctx_close(&q);
    cr_assert_eq(resident(NULL), 0);
}

static uint64_t table_heap(void)
{
    struct blk_stats bs;
    blk_get_stats(&bs);
    return bs.table_heap_bytes;
}

/* Loads and reads every row of |s| (the attribute table too). */
static void pw_read(struct qctx *q, struct qctx_src *s)
{
    cr_assert_eq(qctx_load(q, s, BLK_ROOT | BLK_ATTRS), 0);
    for (uint64_t r = 0; r < s->rows; r++) {
        struct log_view v;
        cr_assert_eq(qctx_read_log(s, r, BLK_ROOT | BLK_ATTRS, &v), 0);
    }
}

Test(qctx_pages, a_scan_done_with_each_block_holds_one_blocks_tables_over_the_cap)
{
    uint64_t first[PW_BLOCKS], again[PW_BLOCKS];
    struct qctx q;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    pw_scan(&q, first, NULL);
    qctx_close(&q); /* no cap: every block keeps its tables */
    uint64_t all = table_heap();
    cr_assert_gt(all, 0);
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    catalog_set_table_cap(1);
    cr_assert_eq(catalog_trim_tables(), 0, "the snapshot pins every block: nothing dropped");
    cr_assert_eq(table_heap(), all);
    qctx_close(&q); /* ... until it lets go */
    cr_assert_eq(table_heap(), 0);

    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    uint64_t most = 0;
    for (size_t i = 0; i < q.n_src; i++) {
        pw_read(&q, &q.src[i]);
        uint64_t h = table_heap();
        most = h > most ? h : most;
        qctx_done(&q, &q.src[i]);
        cr_expect(!blk_holds_tables(q.src[i].b), "block %zu dropped once done", i);
        cr_expect(q.src[i].unpinned);
    }
    cr_expect_eq(table_heap(), 0, "every block done: %llu", (unsigned long long)table_heap());
    cr_expect_lt(most, all / 2, "at most one block's tables at a time: %llu of %llu",
                 (unsigned long long)most, (unsigned long long)all);
    /* Read again after done: qctx_load pins and loads; the same rows. */
    pw_scan(&q, again, NULL);
    for (int k = 0; k < PW_BLOCKS; k++) {
        cr_assert_eq(again[k], first[k], "block %d", k);
        cr_expect(!q.src[k].unpinned, "pinned again by its load");
    }
    qctx_close(&q);
    cr_expect_eq(table_heap(), 0, "released: dropped under the cap");
}

Test(qctx_pages, a_block_two_items_loaded_is_kept_until_both_are_done)
{
    catalog_set_table_cap(1);
    struct qctx q;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    struct qctx_src *s = &q.src[0];
    pw_read(&q, s); /* item 1 */
    struct log_view held;
    cr_assert_eq(qctx_read_log(s, 0, BLK_ROOT | BLK_ATTRS, &held), 0);
    pw_read(&q, s); /* item 2, still running */
    cr_assert_eq(s->users, 2);
    qctx_done(&q, s); /* item 1 */
    cr_expect(blk_holds_tables(s->b), "item 2 still reads it");
    cr_expect(!s->unpinned);
    struct log_view v;
    cr_assert_eq(qctx_read_log(s, 0, BLK_ROOT | BLK_ATTRS, &v), 0);
    cr_assert_eq(v.attrs.len, held.attrs.len);
    cr_assert_eq(memcmp(v.attrs.p, held.attrs.p, v.attrs.len), 0); /* ASan: not freed */
    qctx_done(&q, s);                                              /* item 2 */
    cr_expect(!blk_holds_tables(s->b));
    cr_expect(s->unpinned);
    qctx_done(&q, s); /* one done too many: nothing more */
    cr_expect_eq(s->users, 0);
    qctx_close(&q);
}

/* ---- memory waits and the budget's pressure (issue 13) ---- */

static struct qctx *release_q;

static void *release_later(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 40 * 1000000};
    nanosleep(&ts, NULL);
    qctx_uncharge(release_q, 600);
    return NULL;
}

Test(qctx, at_the_shared_bound_a_charge_waits_for_another_query_to_release)
{
    struct qctx q1, q2;
    struct qctx_wait_stats w0, w1;
    qctx_set_total_memory(1000);
    cr_assert_eq(qctx_open(&q1, SIG_LOGS, NULL, "rows"), 0);
    cr_assert_eq(qctx_open(&q2, SIG_LOGS, NULL, "rows"), 0);
    cr_expect_eq(qctx_charge(&q1, 600), 0);
    qctx_wait_stats(&w0);
    release_q = &q1;
    pthread_t t;
    pthread_create(&t, NULL, release_later, NULL);
    cr_expect_eq(qctx_charge(&q2, 500), 0, "q1 let go within the wait");
    pthread_join(t, NULL);
    qctx_wait_stats(&w1);
    cr_expect_eq(w1.shared_waits - w0.shared_waits, 1);
    cr_expect_geq(w1.shared_wait_ns - w0.shared_wait_ns, 30 * 1000000ull);
    cr_expect_lt(w1.shared_wait_ns - w0.shared_wait_ns, QCTX_SHARED_WAIT_NS);
    cr_expect_eq(qctx_err(&q2), 0);
    cr_expect_eq(qctx_memory_held(), 500);
    qctx_close(&q1);
    qctx_close(&q2);
    cr_expect_eq(qctx_memory_held(), 0);
    qctx_set_total_memory(0);
}

Test(qctx, a_shared_refusal_answers_ebusy_and_the_own_bound_enomem_without_a_wait)
{
    struct qctx q1, q2, q3;
    struct qctx_wait_stats w0, w1;
    struct qctx_limits lim = {.max_memory = 300};
    qctx_set_total_memory(1000);
    cr_assert_eq(qctx_open(&q1, SIG_LOGS, NULL, "rows"), 0);
    cr_assert_eq(qctx_open(&q2, SIG_LOGS, NULL, "rows"), 0);
    cr_assert_eq(qctx_open(&q3, SIG_LOGS, &lim, "rows"), 0);
    cr_expect_eq(qctx_charge(&q1, 900), 0);
    qctx_wait_stats(&w0);
    /* over its own bound first: 422's cause, at once */
    cr_expect_eq(qctx_charge(&q3, 301), -ENOMEM);
    cr_expect_eq(qctx_cause(&q3), QCTX_MEMORY);
    cr_expect_eq(qctx_answer_rc(&q3, qctx_err(&q3)), -ENOMEM);
    qctx_wait_stats(&w1);
    cr_expect_eq(w1.shared_waits, w0.shared_waits, "no wait for its own bound");
    /* the shared bound, q1 holding on: a wait, then -EBUSY to answer */
    uint64_t t0 = tclock_ns();
    cr_expect_eq(qctx_charge(&q2, 200), -ENOMEM);
    cr_expect_geq(tclock_ns() - t0, QCTX_SHARED_WAIT_NS);
    cr_expect_eq(qctx_cause(&q2), QCTX_SHARED);
    cr_expect_eq(qctx_answer_rc(&q2, qctx_err(&q2)), -EBUSY);
    cr_expect_eq(qctx_answer_rc(&q2, -E2BIG), -E2BIG, "only the memory error is mapped");
    qctx_wait_stats(&w1);
    cr_expect_eq(w1.shared_waits - w0.shared_waits, 1);
    qctx_close(&q2);
    qctx_close(&q3);
    /* alone over the bound: nobody to wait for */
    qctx_wait_stats(&w0);
    cr_expect_eq(qctx_charge(&q1, 200), -ENOMEM);
    cr_expect_eq(qctx_cause(&q1), QCTX_SHARED);
    qctx_wait_stats(&w1);
    cr_expect_eq(w1.shared_waits, w0.shared_waits);
    qctx_close(&q1);
    cr_expect_eq(qctx_memory_held(), 0);
    qctx_set_total_memory(0);
}

Test(qctx, a_child_contexts_charges_fail_while_the_process_is_over_the_admission_limit)
{
    struct qctx q, sub;
    adm_init(1 << 20);
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    qctx_sub_open(&sub, &q, 0);
    cr_expect_eq(qctx_charge(&sub, 1000), 0, "inside the limit");
    adm_set_uncounted(1 << 20); /* the process holds the budget outside the charges */
    cr_expect_gt(adm_excess(), 0);
    cr_expect_eq(qctx_charge(&sub, 1000), -ENOMEM);
    cr_expect_eq(qctx_cause(&sub), QCTX_MEMORY);
    cr_expect_eq(qctx_sub_close(&sub, &q), -ENOMEM);
    cr_expect_eq(qctx_err(&q), 0, "the query goes on without the optional work");
    cr_expect_eq(qctx_charge(&q, 1000), 0, "its own charges are committed");
    qctx_close(&q);
    cr_expect_eq(adm_in_use(), 0);
    adm_init(0);
}

Test(qctx_pages, idle_tables_are_dropped_while_the_process_is_over_the_admission_limit)
{
    uint64_t first[PW_BLOCKS];
    struct qctx q;
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    pw_scan(&q, first, NULL);
    qctx_close(&q); /* no cap: the tables stay, a cache */
    uint64_t all = table_heap();
    cr_assert_gt(all, 0);
    cr_expect_eq(catalog_trim_tables(), 0, "inside the limit: kept");
    cr_expect_eq(table_heap(), all);
    /* The chunks of the open blocks these blocks were sealed from are
     * cached (charged): past the limit, they go before any table. */
    size_t cached = oblock_cache_bytes();
    cr_assert_gt(cached, 0);
    adm_set_uncounted(adm_admit_limit() - adm_in_use() + 1);
    cr_expect_eq(catalog_trim_tables(), 0, "the chunk cache gave way");
    cr_expect_eq(table_heap(), all);
    cr_expect_lt(oblock_cache_bytes(), cached);
    cr_expect_eq(adm_excess(), 0);
    adm_set_uncounted(0);
    oblock_cache_limit(0); /* from here on, the tables alone */
    /* uncounted memory takes the process past the limit by 1 byte of
     * tables: the least recently read block's tables go, the rest stay */
    uint64_t in = adm_in_use(), b = adm_budget();
    cr_assert_lt(in, adm_admit_limit());
    adm_set_uncounted(adm_admit_limit() - in + 1);
    cr_expect_eq(catalog_trim_tables(), 1);
    cr_expect_lt(table_heap(), all);
    cr_expect_gt(table_heap(), 0);
    cr_expect_eq(adm_excess(), 0);
    adm_set_uncounted(b); /* far past: every idle block's tables */
    catalog_trim_tables();
    cr_expect_eq(table_heap(), 0);
    adm_set_uncounted(0);
}

Test(qctx_pages, a_load_waits_for_room_at_most_the_querys_allowance_and_then_loads)
{
    struct qctx q;
    struct qctx_wait_stats w0, w1;
    adm_set_uncounted(adm_budget()); /* no room at all */
    cr_assert_eq(qctx_open(&q, SIG_LOGS, NULL, "rows"), 0);
    qctx_wait_stats(&w0);
    uint64_t t0 = tclock_ns();
    cr_expect_eq(qctx_load(&q, &q.src[0], BLK_ROOT), 0, "loaded after the wait");
    cr_expect_geq(tclock_ns() - t0, QCTX_ROOM_WAIT_NS);
    cr_expect_eq(qctx_load(&q, &q.src[1], BLK_ROOT), 0, "no allowance left: no wait");
    qctx_wait_stats(&w1);
    cr_expect_eq(w1.room_waits - w0.room_waits, 1);
    cr_expect_geq(w1.room_wait_ns - w0.room_wait_ns, QCTX_ROOM_WAIT_NS);
    qctx_close(&q);
    adm_set_uncounted(0);
    /* the demand was given back: admission takes the whole limit again */
    cr_expect(adm_try_charge(adm_admit_limit() - adm_in_use()));
}
