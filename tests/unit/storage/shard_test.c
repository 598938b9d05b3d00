/*
 * shard_test.c - storage/shard.c: the queue bound, jobs logged, appended
 * and acknowledged in submission order, WAL replay of only the frames above
 * the sealed watermark, --ack seal answering the waiting jobs once their
 * block is sealed, and who drains: the submitting thread when the shard is
 * idle, the shard thread when it is busy or under --ack fsync.
 *
 * A job's payload here is 12 bytes (u64 seed, u32 rows) and the replay
 * hook turns it back into the same batch with blkgen's generator, so a
 * replayed frame and a live job make the same rows.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "storage/adm.h"
#include "storage/catalog.h"
#include "storage/sealer.h"
#include "storage/shard.h"
#include "storage/wal.h"
#include "tests/unit/storage/blkgen.h"
#include "tests/util/tmpdir.h"
#include "tests/util/tclock.h"
#include "tests/util/wait.h"

#define PAYLOAD_LEN 12

static char dir[256], wal_dir[300], block_dir[300];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int n_done;
static int done_order[16];
static int done_rc[16];
static int n_decoded;
static pthread_t done_thread[16]; /* the thread each done() ran on */
/* on_done submits this job to this shard once, from inside the done() of
 * job 0 (a submit that finds the shard busy). */
static shard *resubmit_to;
static struct shard_job *resubmit_job;

static void encode(uint8_t *p, uint64_t seed, uint32_t rows)
{
    memcpy(p, &seed, 8);
    memcpy(p + 8, &rows, 4);
}

/* The replay hook: 12 bytes back into a batch; anything else is refused. */
static int decode(enum signal sig, enum otlp_fmt fmt, const uint8_t *p, size_t n,
                  struct batch *scratch, arena *a)
{
    uint64_t seed;
    uint32_t rows;
    if (n != PAYLOAD_LEN || fmt != OTLP_PROTOBUF) {
        return -EINVAL;
    }
    memcpy(&seed, p, 8);
    memcpy(&rows, p + 8, 4);
    gen_batch(scratch, a, sig, &seed, rows);
    pthread_mutex_lock(&mu);
    n_decoded++;
    pthread_mutex_unlock(&mu);
    return 0;
}

struct tjob {
    struct shard_job j; /* first */
    int idx;
    struct batch *b;
    arena *a;
    uint8_t payload[PAYLOAD_LEN];
};

static void on_done(struct shard_job *j)
{
    struct tjob *t = (struct tjob *)j;
    pthread_mutex_lock(&mu);
    if (n_done < 16) {
        done_order[n_done] = t->idx;
        done_rc[n_done] = j->result;
        done_thread[n_done] = pthread_self();
    }
    n_done++;
    struct shard_job *again = t->idx == 0 ? resubmit_job : NULL;
    resubmit_job = again != NULL ? NULL : resubmit_job;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    if (again != NULL) {
        shard_submit_take(resubmit_to, again);
    }
}

static void make_job(struct tjob *t, int idx, uint64_t seed, uint32_t rows)
{
    uint64_t s = seed;
    memset(t, 0, sizeof(*t));
    t->idx = idx;
    t->b = batch_new(SIG_LOGS);
    t->a = arena_new(0);
    cr_assert(t->b != NULL && t->a != NULL);
    gen_batch(t->b, t->a, SIG_LOGS, &s, rows);
    encode(t->payload, seed, rows);
    t->j.batch = t->b;
    t->j.payload = t->payload;
    t->j.payload_len = PAYLOAD_LEN;
    t->j.format = OTLP_PROTOBUF;
    t->j.done = on_done;
}

static void free_job(struct tjob *t)
{
    batch_free(t->b);
    arena_free(t->a);
}

/* Waits up to 10 s for *counter >= want; returns the count seen. */
static int wait_for(const int *counter, int want)
{
    return wait_counter(&mu, &cv, counter, want, 10000000000ull);
}

/* Polls the shard's counters until |pred| holds (10 s at most). */
static bool wait_stats(shard *s, bool (*pred)(const struct shard_stats *), struct shard_stats *st)
{
    uint64_t deadline = tclock_ns() + 10000000000ull;
    for (;;) {
        shard_get_stats(s, st);
        if (pred(st) || tclock_ns() >= deadline) {
            return pred(st);
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

static bool replayed(const struct shard_stats *st)
{
    return st->replayed;
}

static bool idle(const struct shard_stats *st)
{
    return st->queue_depth == 0;
}

static void setup(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    cr_assert_eq(tmpdir_join(wal_dir, sizeof(wal_dir), dir, "wal-logs-0"), 0);
    cr_assert_eq(tmpdir_join(block_dir, sizeof(block_dir), dir, "logs"), 0);
    cr_assert_eq(mkdir(wal_dir, 0755), 0);
    cr_assert_eq(mkdir(block_dir, 0755), 0);
    adm_init(1ull << 30);
    catalog_init(dir);
    cr_assert_eq(sealer_start(0, 0), 0);
}

static void teardown(void)
{
    sealer_stop();
    catalog_fini();
}

TestSuite(shard, .init = setup, .fini = teardown);

static struct shard_cfg cfg_of(enum shard_ack ack, uint64_t wal_after)
{
    return (struct shard_cfg){
        .wal_dir = wal_dir,
        .block_dir = block_dir,
        .signal = SIG_LOGS,
        .index = 0,
        .queue_cap = 4,
        .ack = ack,
        .block_target = 1u << 30, /* no seal by size */
        .block_max_age_ms = 600000,
        .wal_after = wal_after,
        .next_seal_id = 1,
        .decode = decode,
    };
}

static uint64_t open_rows(void)
{
    struct cat_snap sn;
    uint64_t n = 0;
    cr_assert_eq(catalog_snapshot(SIG_LOGS, &sn), 0);
    for (size_t i = 0; i < sn.n_open; i++) {
        n += sn.open_rows[i];
    }
    catalog_snap_release(&sn);
    return n;
}

struct frames {
    int n;
    uint64_t seq[16];
    uint32_t rows[16];
};

static int collect(void *ctx, uint64_t seq, enum signal sig, enum otlp_fmt fmt, const uint8_t *p,
                   size_t n)
{
    struct frames *f = ctx;
    (void)sig, (void)fmt;
    if (f->n < 16 && n == PAYLOAD_LEN) {
        f->seq[f->n] = seq;
        memcpy(&f->rows[f->n], p + 8, 4);
        f->n++;
    }
    return 0;
}

/* A shard on |c| that has replayed (so its thread has let go of it). */
static shard *start_replayed(const struct shard_cfg *c)
{
    shard *s;
    struct shard_stats st;
    cr_assert_eq(shard_start(c, &s), 0);
    cr_assert(wait_stats(s, replayed, &st));
    return s;
}

/* Makes job |idx| of |rows| rows and hands it to |s| on a fresh slot. */
static void submit_new(shard *s, struct tjob *j, int idx, uint64_t seed, uint32_t rows)
{
    make_job(j, idx, seed, rows);
    cr_assert(shard_reserve(s));
    shard_submit_take(s, &j->j);
}

static void expect_published(uint64_t blocks, uint64_t rows)
{
    struct cat_stats cs;
    catalog_get_stats(SIG_LOGS, &cs);
    cr_expect_eq(cs.blocks, blocks);
    cr_expect_eq(cs.rows, rows);
}

Test(shard, a_full_queue_refuses_a_reservation_until_a_slot_is_returned)
{
    shard *s;
    struct shard_cfg c = cfg_of(SHARD_ACK_WAL, 0);
    struct shard_stats st;
    cr_assert_eq(shard_start(&c, &s), 0);
    for (int i = 0; i < 4; i++) {
        cr_assert(shard_reserve(s), "slot %d", i);
    }
    cr_expect_not(shard_reserve(s), "a fifth slot past queue_cap 4");
    shard_get_stats(s, &st);
    cr_expect_eq(st.queue_depth, 4);
    shard_unreserve(s);
    cr_expect(shard_reserve(s), "a returned slot can be taken again");
    for (int i = 0; i < 4; i++) {
        shard_unreserve(s);
    }
    shard_get_stats(s, &st);
    cr_expect_eq(st.queue_depth, 0);
    shard_stop(s);
}

Test(shard, jobs_are_logged_appended_and_acked_in_submission_order)
{
    shard *s;
    struct shard_cfg c = cfg_of(SHARD_ACK_WAL, 0);
    struct shard_stats st;
    struct tjob jobs[4];
    static const uint32_t rows[4] = {3, 5, 7, 9};
    cr_assert_eq(shard_start(&c, &s), 0);
    cr_assert(wait_stats(s, replayed, &st), "an empty WAL replays at once");

    for (int i = 0; i < 4; i++) {
        make_job(&jobs[i], i, 100 + (uint64_t)i, rows[i]);
        cr_assert(shard_reserve(s));
    }
    for (int i = 0; i < 4; i++) {
        shard_submit_take(s, &jobs[i].j);
    }
    cr_assert_eq(wait_for(&n_done, 4), 4);
    pthread_mutex_lock(&mu);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(done_order[i], i, "ack %d was job %d", i, done_order[i]);
        cr_expect_eq(done_rc[i], 0);
    }
    pthread_mutex_unlock(&mu);
    cr_assert(wait_stats(s, idle, &st));
    cr_expect_eq(st.wal.frames_appended, 4);
    cr_expect_eq(st.block_rows, 24);
    cr_expect_eq(open_rows(), 24, "the rows are readable once acknowledged");
    shard_stop(s);
    for (int i = 0; i < 4; i++) {
        free_job(&jobs[i]);
    }

    /* The WAL holds one frame per job, in the same order. */
    struct frames f = {0};
    wal *w;
    cr_assert_eq(wal_open(wal_dir, 0, collect, &f, &w), 0);
    wal_close(w);
    cr_assert_eq(f.n, 4);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(f.seq[i], (uint64_t)i + 1);
        cr_expect_eq(f.rows[i], rows[i]);
    }
}

Test(shard, replay_appends_only_the_frames_above_the_watermark)
{
    uint8_t p[PAYLOAD_LEN];
    wal *w;
    cr_assert_eq(wal_open(wal_dir, 0, NULL, NULL, &w), 0);
    for (uint32_t k = 1; k <= 4; k++) {
        encode(p, 200 + k, k + 1); /* frame k holds k + 1 rows */
        cr_assert_eq(wal_append(w, SIG_LOGS, OTLP_PROTOBUF, p, sizeof(p)), (int64_t)k);
    }
    cr_assert_eq(wal_append(w, SIG_LOGS, OTLP_PROTOBUF, "not a payload", 13), 5);
    cr_assert_eq(wal_sync(w), 0);
    wal_close(w);

    /* Frames 1 and 2 are in a sealed block already. */
    shard *s;
    struct shard_cfg c = cfg_of(SHARD_ACK_WAL, 2);
    struct shard_stats st;
    cr_assert_eq(shard_start(&c, &s), 0);
    cr_assert(wait_stats(s, replayed, &st));
    cr_expect_eq(st.error, 0);
    cr_expect_eq(st.wal.frames_skipped, 2);
    cr_expect_eq(st.replay_frames, 3, "frames 3, 4 and 5 are handed to the replay hook");
    cr_expect_eq(st.replay_bad_frames, 1, "the frame the hook refused is counted, not fatal");
    cr_expect_eq(n_decoded, 2);
    cr_expect_eq(st.block_rows, 4 + 5, "rows of frames 3 and 4 only");
    cr_expect_eq(open_rows(), 9);
    cr_expect_eq(st.sealed_seq, 2);

    /* New frames continue after the replayed ones. */
    struct tjob j;
    make_job(&j, 0, 300, 2);
    cr_assert(shard_reserve(s));
    shard_submit_take(s, &j.j);
    cr_assert_eq(wait_for(&n_done, 1), 1);
    cr_expect_eq(done_rc[0], 0);
    shard_stop(s);
    free_job(&j);
    struct frames f = {0};
    cr_assert_eq(wal_open(wal_dir, 4, collect, &f, &w), 0);
    wal_close(w);
    cr_assert_eq(f.n, 1, "frame 5 is not a payload; the job's frame follows it");
    cr_expect_eq(f.seq[0], 6);
    cr_expect_eq(f.rows[0], 2);
}

Test(shard, ack_seal_answers_the_waiting_jobs_once_their_block_is_sealed)
{
    shard *s;
    struct shard_cfg c = cfg_of(SHARD_ACK_SEAL, 0);
    struct shard_stats st;
    struct tjob jobs[2];
    cr_assert_eq(shard_start(&c, &s), 0);
    cr_assert(wait_stats(s, replayed, &st));
    for (int i = 0; i < 2; i++) {
        make_job(&jobs[i], i, 400 + (uint64_t)i, 4);
        cr_assert(shard_reserve(s));
        shard_submit_take(s, &jobs[i].j);
    }
    cr_assert(wait_stats(s, idle, &st));
    cr_expect_eq(st.block_rows, 8);
    struct timespec pause = {0, 100000000};
    nanosleep(&pause, NULL); /* an ack that (wrongly) came with the drain has run by now */
    pthread_mutex_lock(&mu);
    cr_expect_eq(n_done, 0, "no ack before the block is sealed");
    pthread_mutex_unlock(&mu);
    cr_expect_eq(st.wal.frames_appended, 0, "no WAL under --ack seal");

    /* Stopping seals what is open, so every waiting job gets its answer. */
    shard_stop(s);
    cr_assert_eq(wait_for(&n_done, 2), 2);
    pthread_mutex_lock(&mu);
    cr_expect_eq(done_order[0], 0);
    cr_expect_eq(done_order[1], 1);
    cr_expect_eq(done_rc[0], 0);
    cr_expect_eq(done_rc[1], 0);
    pthread_mutex_unlock(&mu);
    expect_published(1, 8);
    for (int i = 0; i < 2; i++) {
        free_job(&jobs[i]);
    }
}

static bool sealed_one(const struct shard_stats *st)
{
    return st->seals_started == 1 && st->block_rows == 0;
}

static bool published_one(const struct shard_stats *st)
{
    return st->sealed_seq == 1;
}

Test(shard, a_job_for_an_idle_shard_is_drained_on_the_submitting_thread)
{
    struct shard_cfg c = cfg_of(SHARD_ACK_WAL, 0);
    struct shard_stats st;
    struct tjob j;
    shard *s = start_replayed(&c);
    submit_new(s, &j, 0, 500, 6);
    /* No wait: the ack ran before shard_submit_take returned. */
    pthread_mutex_lock(&mu);
    cr_expect_eq(n_done, 1, "acked within the submit");
    cr_expect(pthread_equal(done_thread[0], pthread_self()), "done() ran on the submitting thread");
    cr_expect_eq(done_rc[0], 0);
    pthread_mutex_unlock(&mu);
    shard_get_stats(s, &st);
    cr_expect_eq(st.queue_depth, 0, "the slot is returned with the ack");
    cr_expect_eq(st.wal.frames_appended, 1);
    cr_expect_eq(st.block_rows, 6);
    cr_expect_eq(open_rows(), 6);
    shard_stop(s);
    free_job(&j);
}

Test(shard, a_job_that_finds_the_shard_busy_is_drained_by_the_shard_thread_after_it)
{
    struct shard_cfg c = cfg_of(SHARD_ACK_WAL, 0);
    struct shard_stats st;
    struct tjob jobs[3];
    shard *s = start_replayed(&c);
    make_job(&jobs[0], 0, 600, 3);
    make_job(&jobs[1], 1, 601, 4);
    make_job(&jobs[2], 2, 602, 1);
    for (int i = 0; i < 3; i++) {
        cr_assert(shard_reserve(s));
    }
    /* A first job, so the block's age deadline is old news to the shard
     * thread and only the queued job can be the reason to wake it. */
    shard_submit_take(s, &jobs[2].j);
    struct timespec pause = {0, 100000000};
    nanosleep(&pause, NULL); /* the shard thread, woken for that deadline, sleeps again */
    /* Job 1 is submitted from job 0's done(), while this thread holds the
     * shard's drain: it must queue, and the shard thread must be woken for
     * it when the drain lets go. */
    resubmit_to = s;
    resubmit_job = &jobs[1].j;
    shard_submit_take(s, &jobs[0].j);
    cr_assert_eq(wait_for(&n_done, 3), 3);
    pthread_mutex_lock(&mu);
    cr_expect_eq(done_order[0], 2);
    cr_expect_eq(done_order[1], 0);
    cr_expect_eq(done_order[2], 1);
    cr_expect(pthread_equal(done_thread[1], pthread_self()));
    cr_expect_not(pthread_equal(done_thread[2], pthread_self()),
                  "the queued job was drained by the shard thread");
    cr_expect_eq(done_rc[2], 0);
    pthread_mutex_unlock(&mu);
    cr_assert(wait_stats(s, idle, &st));
    cr_expect_eq(st.wal.frames_appended, 3);
    cr_expect_eq(st.block_rows, 8);
    shard_stop(s);
    for (int i = 0; i < 3; i++) {
        free_job(&jobs[i]);
    }
    struct frames f = {0};
    wal *w;
    cr_assert_eq(wal_open(wal_dir, 0, collect, &f, &w), 0);
    wal_close(w);
    cr_assert_eq(f.n, 3);
    cr_expect_eq(f.rows[0], 1, "the frames are in drain order");
    cr_expect_eq(f.rows[1], 3);
    cr_expect_eq(f.rows[2], 4);
}

Test(shard, under_ack_fsync_the_shard_thread_drains_every_job)
{
    struct shard_cfg c = cfg_of(SHARD_ACK_FSYNC, 0);
    struct shard_stats st;
    struct tjob j;
    shard *s = start_replayed(&c);
    submit_new(s, &j, 0, 700, 2);
    cr_assert_eq(wait_for(&n_done, 1), 1);
    pthread_mutex_lock(&mu);
    cr_expect_not(pthread_equal(done_thread[0], pthread_self()),
                  "the fdatasync is not the submitting thread's");
    cr_expect_eq(done_rc[0], 0);
    pthread_mutex_unlock(&mu);
    cr_assert(wait_stats(s, idle, &st));
    cr_expect_eq(st.wal.fsyncs, 1);
    shard_stop(s);
    free_job(&j);
}

Test(shard, an_open_block_filled_by_an_inline_drain_is_still_sealed_by_age)
{
    struct shard_cfg c = cfg_of(SHARD_ACK_WAL, 0);
    struct shard_stats st;
    struct tjob j;
    c.block_max_age_ms = 50;
    shard *s = start_replayed(&c);
    submit_new(s, &j, 0, 800, 5);
    pthread_mutex_lock(&mu);
    cr_assert_eq(n_done, 1, "drained inline");
    pthread_mutex_unlock(&mu);
    /* The shard thread slept with no deadline (its block was empty): the
     * inline drain must hand it the block's age deadline. */
    cr_expect(wait_stats(s, sealed_one, &st), "seals %llu, rows %llu",
              (unsigned long long)st.seals_started, (unsigned long long)st.block_rows);
    cr_assert(wait_stats(s, published_one, &st), "sealed_seq %llu",
              (unsigned long long)st.sealed_seq);
    expect_published(1, 5);
    shard_stop(s);
    free_job(&j);
}
