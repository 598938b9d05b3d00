/*
 * walcopy - what a WAL append costs on this disk, by write pattern (issue 13, h-tail).
 *
 *   build/walcopy DIR MODE [MiB] [FRAME_BYTES]
 *
 * Appends MiB (default 512) of FRAME_BYTES frames (default 367,000: the peer
 * case's 1,000-record request and its header) into 64 MiB segments in DIR, the
 * way storage/wal.c would under --ack wal (no fsync), keeping two segments and
 * dropping the older as the WAL's release would, then fdatasyncs the last one.
 * MODE:
 *   append    a fresh segment file per 64 MiB, extended by pwrite (wal.c today)
 *   keep      append, but the older segments are left on disk until the end
 *             (what the unlinks cost, against append)
 *   recycle   segments written once beforehand and overwritten in place
 *   direct    recycled segments written with O_DIRECT from a 4 KiB-aligned
 *             staging buffer: the frame is copied in, whole pages go out, and
 *             the partial last page is written again by the next append
 *   dontneed  append, plus every 4 MiB sync_file_range(WRITE) of that step and
 *             POSIX_FADV_DONTNEED of the step before it (written back by then)
 *   wal       storage/wal.c itself (wal_append of SIG_LOGS frames, releasing
 *             all but the last two segments' worth of frames after each
 *             append, wal_sync at the end): whatever the library linked in
 *             does (h-walrec: recycled segments), so two builds compare
 * Prints one JSON object: the process's user and system CPU (getrusage; the
 * kernel's writeback threads are not in it), the CPU of the whole machine from
 * /proc/stat over the run (others' work included: use it on a quiet machine),
 * wall time, and the append latency p50/p99/max.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "storage/wal.h"

#define SEG (64ull << 20)
#define PAGE 4096u
#define STEP (4ull << 20)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double machine_busy_s(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (f == NULL || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                            &v[3], &v[4], &v[5], &v[6], &v[7]) != 8) {
        if (f != NULL) {
            fclose(f);
        }
        return 0;
    }
    fclose(f);
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void seg_path(char *buf, size_t n, const char *dir, int i)
{
    snprintf(buf, n, "%s/seg-%d", dir, i);
}

/* Writes segment |i| whole once (not timed): the recycled modes overwrite it. */
static int prefill(const char *dir, int i, const uint8_t *zeros)
{
    char p[4096];
    seg_path(p, sizeof(p), dir, i);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        return -errno;
    }
    for (uint64_t off = 0; off < SEG; off += STEP) {
        if (pwrite(fd, zeros, STEP, (off_t)off) != (ssize_t)STEP) {
            close(fd);
            return -EIO;
        }
    }
    int rc = fdatasync(fd) < 0 ? -errno : 0;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return rc;
}

/* Mode wal: the WAL module's own appends. */
static int wal_mode(const char *dir, uint64_t total, size_t frame, const uint8_t *payload)
{
    wal *w;
    int rc = wal_open(dir, 0, NULL, NULL, &w);
    if (rc < 0) {
        fprintf(stderr, "walcopy: wal_open: %s\n", strerror(-rc));
        return 1;
    }
    uint64_t keep = 2 * (SEG / frame + 1); /* frames of two segments */
    size_t nlat = total / frame + 2, k = 0;
    uint64_t *lat = calloc(nlat, sizeof(*lat));
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double m0 = machine_busy_s();
    uint64_t t0 = now_ns();
    for (uint64_t done = 0; done < total; done += frame) {
        uint64_t a0 = now_ns();
        int64_t seq = wal_append(w, SIG_LOGS, OTLP_PROTOBUF, payload, frame);
        if (seq < 0) {
            fprintf(stderr, "walcopy: wal_append: %s\n", strerror((int)-seq));
            return 1;
        }
        lat[k++] = now_ns() - a0;
        if ((uint64_t)seq > keep) {
            wal_release_upto(w, (uint64_t)seq - keep);
        }
    }
    wal_sync(w);
    uint64_t wall = now_ns() - t0;
    wal_settle();
    double m1 = machine_busy_s();
    getrusage(RUSAGE_SELF, &r1);
    qsort(lat, k, sizeof(*lat), cmp_u64);
    double us = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
                (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6;
    double sy = (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
                (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
    printf("{\"mode\": \"wal\", \"mib\": %llu, \"frame\": %zu, \"appends\": %zu, \"user_s\": %.3f, "
           "\"sys_s\": %.3f, \"cpu_ns_per_mib\": %.0f, \"machine_cpu_s\": %.2f, \"wall_s\": %.3f, "
           "\"append_us_p50\": %.1f, \"p99\": %.1f, \"max\": %.1f, \"disk_bytes\": %llu}\n",
           (unsigned long long)(total >> 20), frame, k, us, sy,
           (us + sy) * 1e9 / (double)(total >> 20), m1 - m0, (double)wall / 1e9,
           (double)lat[k / 2] / 1e3, (double)lat[k * 99 / 100] / 1e3, (double)lat[k - 1] / 1e3,
           (unsigned long long)wal_stats(w)->disk_bytes);
    wal_close(w);
    free(lat);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: walcopy DIR append|keep|recycle|direct|dontneed|wal [MiB] [FRAME_BYTES]\n");
        return 2;
    }
    const char *dir = argv[1], *mode = argv[2];
    uint64_t total = (argc > 3 ? strtoull(argv[3], NULL, 10) : 512) << 20;
    size_t frame = argc > 4 ? strtoull(argv[4], NULL, 10) : 367000;
    bool recycled = strcmp(mode, "recycle") == 0 || strcmp(mode, "direct") == 0;
    bool direct = strcmp(mode, "direct") == 0, dontneed = strcmp(mode, "dontneed") == 0;
    bool keep = strcmp(mode, "keep") == 0, walmod = strcmp(mode, "wal") == 0;
    if (!recycled && !dontneed && !keep && !walmod && strcmp(mode, "append") != 0) {
        fprintf(stderr, "walcopy: unknown mode %s\n", mode);
        return 2;
    }
    uint8_t *payload = malloc(frame), *stage = NULL, *zeros = calloc(1, STEP);
    size_t stage_cap = frame + 2 * PAGE;
    if (payload == NULL || zeros == NULL || posix_memalign((void **)&stage, PAGE, stage_cap) != 0) {
        return 1;
    }
    for (size_t i = 0; i < frame; i++) {
        payload[i] = (uint8_t)(i * 131u + 7u);
    }
    if (walmod) {
        int rc = wal_mode(dir, total, frame, payload);
        free(payload);
        free(stage);
        free(zeros);
        return rc; /* the caller removes DIR: the segments, and a spare */
    }
    mkdir(dir, 0755);
    if (recycled) {
        for (int i = 0; i < 2; i++) {
            if (prefill(dir, i, zeros) < 0) {
                fprintf(stderr, "walcopy: prefill: %s\n", strerror(errno));
                return 1;
            }
        }
    }
    size_t nlat = total / frame + 2, k = 0;
    uint64_t *lat = calloc(nlat, sizeof(*lat));
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double m0 = machine_busy_s();
    uint64_t t0 = now_ns();

    int fd = -1, seg = -1, old_fd = -1;
    uint64_t off = SEG, done = 0, next_step = STEP;
    while (done < total) {
        uint64_t a0 = now_ns();
        if (off + frame > SEG) {
            if (old_fd >= 0) {
                close(old_fd); /* the release: the older of two segments goes */
                if (!recycled && !keep) {
                    char p[4096];
                    seg_path(p, sizeof(p), dir, seg - 1);
                    unlink(p);
                }
            }
            old_fd = fd;
            seg++;
            char p[4096];
            seg_path(p, sizeof(p), dir, recycled ? seg % 2 : seg);
            int fl = O_WRONLY | (recycled ? 0 : O_CREAT | O_EXCL) | (direct ? O_DIRECT : 0);
            fd = open(p, fl, 0644);
            if (fd < 0) {
                fprintf(stderr, "walcopy: open %s: %s\n", p, strerror(errno));
                return 1;
            }
            off = 0;
            next_step = STEP;
        }
        if (direct) {
            /* stage holds the partial page at off & ~(PAGE-1); append after it */
            size_t lead = off % PAGE;
            memcpy(stage + lead, payload, frame);
            size_t end = lead + frame, len = (end + PAGE - 1) / PAGE * PAGE;
            memset(stage + end, 0, len - end);
            if (pwrite(fd, stage, len, (off_t)(off - lead)) != (ssize_t)len) {
                fprintf(stderr, "walcopy: pwrite: %s\n", strerror(errno));
                return 1;
            }
            memmove(stage, stage + end / PAGE * PAGE, end % PAGE); /* the next partial page */
        } else if (pwrite(fd, payload, frame, (off_t)off) != (ssize_t)frame) {
            fprintf(stderr, "walcopy: pwrite: %s\n", strerror(errno));
            return 1;
        }
        off += frame;
        done += frame;
        if (dontneed && off >= next_step) {
            sync_file_range(fd, (off_t)(next_step - STEP), STEP, SYNC_FILE_RANGE_WRITE);
            if (next_step >= 2 * STEP) {
                /* the step before: its write-back was started a step ago */
                sync_file_range(fd, (off_t)(next_step - 2 * STEP), STEP,
                                SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                    SYNC_FILE_RANGE_WAIT_AFTER);
                posix_fadvise(fd, (off_t)(next_step - 2 * STEP), STEP, POSIX_FADV_DONTNEED);
            }
            next_step += STEP;
        }
        lat[k++] = now_ns() - a0;
    }
    fdatasync(fd);
    uint64_t wall = now_ns() - t0;
    double m1 = machine_busy_s();
    getrusage(RUSAGE_SELF, &r1);
    qsort(lat, k, sizeof(*lat), cmp_u64);
    double us = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
                (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6;
    double sy = (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
                (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
    printf("{\"mode\": \"%s\", \"mib\": %llu, \"frame\": %zu, \"appends\": %zu, \"user_s\": %.3f, "
           "\"sys_s\": %.3f, \"cpu_ns_per_mib\": %.0f, \"machine_cpu_s\": %.2f, \"wall_s\": %.3f, "
           "\"append_us_p50\": %.1f, \"p99\": %.1f, \"max\": %.1f}\n",
           mode, (unsigned long long)(total >> 20), frame, k, us, sy,
           (us + sy) * 1e9 / (double)(total >> 20), m1 - m0, (double)wall / 1e9,
           (double)lat[k / 2] / 1e3, (double)lat[k * 99 / 100] / 1e3, (double)lat[k - 1] / 1e3);
    close(fd);
    if (old_fd >= 0) {
        close(old_fd);
    }
    for (int i = 0; i <= seg; i++) {
        char p[4096];
        seg_path(p, sizeof(p), dir, i);
        unlink(p);
    }
    free(lat);
    free(payload);
    free(stage);
    free(zeros);
    return 0;
}
