/*
 * shard_stress.c - the shard's drain ownership under ThreadSanitizer
 * (`make tsan`; not part of `make test`: its build takes minutes).
 *
 * Three submitting threads hand 1,500 jobs each to ONE shard, so submits
 * race each other, the shard thread (queued jobs, the age-based seal every
 * 3 ms, WAL deletion) and the sealer (a seal every 64 KiB, WAL segments
 * of 4 KiB): every path that takes or gives up the shard's drain runs
 * concurrently. Under each ack mode (argv[1]: wal, fsync or seal) every
 * job must be acked exactly once with result 0, every frame logged once
 * (none under seal), and the catalog (sealed blocks and the open one)
 * must hold exactly the rows submitted. Exit status 0, or 1 with the first mismatch; TSan's reports
 * fail the run too (scripts/run-tsan.sh).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/adm.h"
#include "storage/catalog.h"
#include "storage/sealer.h"
#include "storage/shard.h"
#include "storage/wal.h"
#include "tests/unit/storage/blkgen.h"
#include "tests/util/tmpdir.h"

#define SUBMITTERS 3
#define PER_THREAD 1500
#define IN_FLIGHT 4 /* jobs a submitter keeps handed over at once */

static shard *target;
static atomic_int acked, acked_inline, acked_twice, failed;

struct sjob {
    struct shard_job j; /* first */
    atomic_int done;
    pthread_t submitter;
    struct batch *b;
    arena *a;
    uint8_t payload[12]; /* u64 seed, u32 rows: the batch again, for replay */
};

static void on_done(struct shard_job *j)
{
    struct sjob *t = (struct sjob *)j;
    if (j->result != 0) {
        atomic_fetch_add(&failed, 1);
    }
    if (pthread_equal(t->submitter, pthread_self())) {
        atomic_fetch_add(&acked_inline, 1);
    }
    if (atomic_exchange(&t->done, 1) != 0) {
        atomic_fetch_add(&acked_twice, 1);
    }
    atomic_fetch_add(&acked, 1);
}

static int decode(enum signal sig, enum otlp_fmt fmt, const uint8_t *p, size_t n,
                  struct batch *scratch, arena *a)
{
    uint64_t seed;
    uint32_t rows;
    (void)fmt;
    if (n != 12) {
        return -EINVAL;
    }
    memcpy(&seed, p, 8);
    memcpy(&rows, p + 8, 4);
    gen_batch(scratch, a, sig, &seed, rows);
    return 0;
}

static uint32_t rows_of(int i)
{
    return 1 + (uint32_t)(i % 7);
}

static void *submit_all(void *arg)
{
    int id = (int)(intptr_t)arg;
    struct sjob jobs[IN_FLIGHT];
    memset(jobs, 0, sizeof(jobs));
    for (int k = 0; k < IN_FLIGHT; k++) {
        jobs[k].b = batch_new(SIG_LOGS);
        jobs[k].a = arena_new(0);
        atomic_store(&jobs[k].done, 1);
    }
    for (int i = 0; i < PER_THREAD; i++) {
        struct sjob *x = &jobs[i % IN_FLIGHT];
        while (!atomic_load(&x->done)) {
            usleep(50);
        }
        atomic_store(&x->done, 0);
        uint64_t seed = (uint64_t)id * 100000u + (uint64_t)i, s = seed;
        uint32_t rows = rows_of(i);
        batch_reset(x->b, SIG_LOGS);
        arena_reset(x->a);
        gen_batch(x->b, x->a, SIG_LOGS, &s, rows);
        memcpy(x->payload, &seed, 8);
        memcpy(x->payload + 8, &rows, 4);
        x->j.batch = x->b;
        x->j.payload = x->payload;
        x->j.payload_len = sizeof(x->payload);
        x->j.format = OTLP_PROTOBUF;
        x->j.done = on_done;
        x->submitter = pthread_self();
        while (!shard_reserve(target)) {
            usleep(50);
        }
        shard_submit_take(target, &x->j);
    }
    for (int k = 0; k < IN_FLIGHT; k++) {
        while (!atomic_load(&jobs[k].done)) {
            usleep(50);
        }
        batch_free(jobs[k].b);
        arena_free(jobs[k].a);
    }
    return NULL;
}

static int expect_eq(const char *what, unsigned long long got, unsigned long long want)
{
    if (got != want) {
        fprintf(stderr, "shard_stress: %s: %llu, expected %llu\n", what, got, want);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    enum shard_ack ack = SHARD_ACK_WAL;
    if (argc > 1 && strcmp(argv[1], "fsync") == 0) {
        ack = SHARD_ACK_FSYNC;
    } else if (argc > 1 && strcmp(argv[1], "seal") == 0) {
        ack = SHARD_ACK_SEAL;
    } else if (argc > 1 && strcmp(argv[1], "wal") != 0) {
        fprintf(stderr, "usage: shard_stress [wal|fsync|seal]\n");
        return 2;
    }
    char dir[256], wal_dir[300], block_dir[300];
    if (tmpdir_make(dir, sizeof(dir)) < 0 ||
        tmpdir_join(wal_dir, sizeof(wal_dir), dir, "wal") < 0 ||
        tmpdir_join(block_dir, sizeof(block_dir), dir, "logs") < 0) {
        return 2;
    }
    if (mkdir(wal_dir, 0755) < 0 || mkdir(block_dir, 0755) < 0) {
        perror("mkdir");
        return 2;
    }
    wal_segment_bytes = 4096;
    adm_init(1ull << 30);
    catalog_init(dir);
    if (sealer_start(0, 0) != 0) {
        return 2;
    }
    struct shard_cfg c = {
        .wal_dir = wal_dir,
        .block_dir = block_dir,
        .signal = SIG_LOGS,
        .queue_cap = 16,
        .ack = ack,
        .block_target = 64u << 10,
        .block_max_age_ms = 3,
        .next_seal_id = 1,
        .decode = decode,
    };
    if (shard_start(&c, &target) != 0) {
        return 2;
    }
    pthread_t th[SUBMITTERS];
    for (int i = 0; i < SUBMITTERS; i++) {
        pthread_create(&th[i], NULL, submit_all, (void *)(intptr_t)i);
    }
    for (int i = 0; i < SUBMITTERS; i++) {
        pthread_join(th[i], NULL);
    }
    struct shard_stats st;
    shard_get_stats(target, &st);
    shard_stop(target);
    sealer_stop();
    struct cat_stats cs;
    catalog_get_stats(SIG_LOGS, &cs);
    catalog_fini();

    unsigned long long rows = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        rows += rows_of(i);
    }
    rows *= SUBMITTERS;
    int bad = 0;
    bad |= expect_eq("acks", (unsigned long long)atomic_load(&acked), SUBMITTERS * PER_THREAD);
    bad |= expect_eq("second acks", (unsigned long long)atomic_load(&acked_twice), 0);
    bad |= expect_eq("failed jobs", (unsigned long long)atomic_load(&failed), 0);
    bad |= expect_eq("WAL frames", st.wal.frames_appended,
                     ack == SHARD_ACK_SEAL ? 0 : SUBMITTERS * PER_THREAD);
    bad |= expect_eq("rows in the catalog", cs.rows, rows);
    printf("shard_stress %s: %d acks (%d on the submitting thread), %llu seals, %llu blocks, "
           "%llu rows\n",
           argc > 1 ? argv[1] : "wal", atomic_load(&acked), atomic_load(&acked_inline),
           (unsigned long long)st.seals_started, (unsigned long long)cs.blocks,
           (unsigned long long)cs.rows);
    tmpdir_remove(dir);
    return bad;
}
