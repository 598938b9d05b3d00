/*
 * main.c - the miradb command: `miradb serve` runs the daemon.
 *
 * Start-up order: config, shards (each replays its WAL on its own thread),
 * I/O threads and their listening sockets, then the listening line on
 * stderr; /ready turns 200 once every shard has replayed. A data directory
 * another miradb holds (DATA/LOCK), or a port another process listens on,
 * is refused at start with one line and exit 1.
 *
 * SIGTERM/SIGINT: the listeners stop accepting and finish the requests in
 * flight, the shards drain and sync their WALs, exit 0, all within
 * --shutdown-timeout (plus one seal attempt): connections still open at
 * the deadline are closed, and a seal still failing then (disk full) is
 * abandoned, its rows left in the WAL for the next boot to replay.
 * SIGHUP is a reload (see reload()), never an exit.
 *
 * Under systemd (Type=notify, NOTIFY_SOCKET set) the service manager hears
 * READY=1 when /ready turns 200 and STOPPING=1 on SIGTERM (notify.h).
 * Subcommands: serve, health (health.h), inspect and fsck (cli.h),
 * version (version.h), help; exit status 0, 1 failure, 2 usage/config.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <malloc.h>

#include "lib/clock.h"
#include "query/pool.h"
#include "server/addr.h"
#include "server/cli.h"
#include "server/config.h"
#include "server/grpc.h"
#include "server/health.h"
#include "server/http1.h"
#include "server/ingest.h"
#include "server/iot.h"
#include "server/log.h"
#include "server/notify.h"
#include "server/ops.h"
#include "server/version.h"
#include "storage/adm.h"
#include "storage/block.h"
#include "storage/sealer.h"
#include "storage/store.h"
#include "storage/wal.h"
#include "server/loki.h"
#include "server/prom.h"
#include "server/tempo.h"
#include "server/auth.h"
#include "server/origin.h"
#include "server/tls.h"
#include "server/ui.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: miradb <command> [options]   (miradb <command> --help for each)\n\n"
               "commands:\n"
               "  serve      run the daemon (miradb serve [--config FILE] [options])\n"
               "  health     ask a running daemon's /ready (miradb health [--http ADDR:PORT])\n"
               "  inspect    print a block file's tables, codecs, CRCs, zone maps and blooms\n"
               "             (miradb inspect FILE [--json])\n"
               "  fsck       verify every table of every block under a data directory\n"
               "             (miradb fsck DATA); exits 1 listing every failure\n"
               "  version    the release, the commit and the build flags (also --version)\n"
               "  help       this text (miradb help COMMAND: that command's --help)\n"
               "\nexit status: 0 success; 1 failure (the daemon failed to start or to run,\n"
               "damage found, not ready); 2 usage or configuration error.\n");
}

static int cmd_version(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: miradb version\n"
               "Prints the release, the git commit the binary was built from and its\n"
               "build flags and compiler.\nexit status: 0 printed, 2 usage error.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "miradb version: unexpected argument '%s'\nusage: miradb version\n",
                argv[1]);
        return 2;
    }
    version_print(stdout);
    return 0;
}

/*
 * One SO_REUSEPORT socket per I/O thread, all on one port. The first is
 * bound and set listening *without* SO_REUSEPORT, so its bind fails with
 * EADDRINUSE whenever any other socket holds the port; with the flag, the
 * kernel lets every process of the same user share the port, and a second
 * miradb would silently take part of the traffic into its own data
 * directory. Only then does the first socket set SO_REUSEPORT, which lets
 * this process's other sockets join it: Linux checks the flag of the
 * sockets already bound when the next one binds. Another miradb's first
 * socket, bound without the flag, conflicts with ours, so no window opens
 * between the check and the join. The first socket also fixes port 0.
 */
static int bind_one(struct sockaddr_storage *ss, socklen_t len, bool first)
{
    int one = 1;
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        (!first && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) ||
        bind(fd, (struct sockaddr *)ss, len) < 0 || listen(fd, 1024) < 0 ||
        (first && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    if (((struct sockaddr_in *)ss)->sin_port == 0) {
        socklen_t l = len;
        getsockname(fd, (struct sockaddr *)ss, &l);
    }
    return fd;
}

static int attach_all(const char *what, const char *addr, int (*attach)(struct iot *, int),
                      char *bound, size_t boundlen)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (addr_parse(addr, &ss, &len) < 0) {
        log_error("main", "event=bad_address listener=%s addr=%s", what, addr);
        return -EINVAL;
    }
    for (int i = 0; i < iot_count(); i++) {
        int fd = bind_one(&ss, len, i == 0);
        if (fd == -EADDRINUSE) {
            log_error("main",
                      "event=address_in_use listener=%s addr=%s msg=\"%s is already in use by "
                      "another process (another miradb?); refusing to start\"",
                      what, addr, addr);
            return fd;
        }
        if (fd < 0) {
            log_error("main", "event=bind_failed listener=%s addr=%s error=\"%s\"", what, addr,
                      strerror(-fd));
            return fd;
        }
        int rc = attach(iot_get(i), fd);
        if (rc < 0) {
            log_error("main", "event=listen_failed listener=%s error=\"%s\"", what, strerror(-rc));
            return rc;
        }
    }
    addr_format(&ss, bound, boundlen);
    return 0;
}

static void quiesce_all(struct iot *t)
{
    http1_quiesce(t);
    grpc_quiesce(t);
}

static int active_all(struct iot *t)
{
    return http1_active(t) + grpc_active(t);
}

/* Per-request failures are not logged one by one: every SUMMARY_S seconds,
 * one line says how many requests were refused since the last one, by reason. */
#define SUMMARY_S 10

static void log_rejection_summary(uint64_t last[RJ_COUNT])
{
    uint64_t now[RJ_COUNT] = {0};
    char line[512];
    size_t n = 0;
    uint64_t total = 0;
    for (int i = 0; i < iot_count(); i++) {
        for (int r = 0; r < RJ_COUNT; r++) {
            now[r] += __atomic_load_n(&iot_get(i)->stats.rejections[r], __ATOMIC_RELAXED);
        }
    }
    line[0] = '\0';
    for (int r = 0; r < RJ_COUNT; r++) {
        if (now[r] > last[r] && n < sizeof(line)) {
            n += (size_t)snprintf(line + n, sizeof(line) - n, " %s=%llu",
                                  stats_reject_reason_name(r),
                                  (unsigned long long)(now[r] - last[r]));
            total += now[r] - last[r];
        }
        last[r] = now[r];
    }
    if (total > 0) {
        log_warn("main", "event=requests_refused total=%llu window_s=%d%s",
                 (unsigned long long)total, SUMMARY_S, line);
    }
}

/* Blocks a query found damaged were moved to DATA/quarantine/ (the query's
 * answer names them); one line says so, at the boundary, once. */
static void log_quarantines(const char *data_dir, uint64_t *last)
{
    struct blk_stats bs;
    blk_get_stats(&bs);
    if (bs.quarantined > *last) {
        log_error("main",
                  "event=blocks_quarantined count=%llu dir=%s/quarantine "
                  "reason=\"a table failed its CRC or structure check when read\"",
                  (unsigned long long)(bs.quarantined - *last), data_dir);
        *last = bs.quarantined;
    }
}

/*
 * Takes DATA/LOCK (flock, exclusive) for the process's lifetime, so a
 * second miradb on the same directory refuses to start instead of
 * replaying, and cutting, the WAL this one appends to. The kernel drops
 * the lock when the process ends, however it ends (no stale lock after a
 * crash); the file holds the owner's pid for the message. Returns the fd
 * (kept open) or -1 after logging why.
 */
static int lock_data_dir(const char *dir)
{
    char path[600], buf[32];
    snprintf(path, sizeof(path), "%s/LOCK", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_error("main", "event=data_dir_failed dir=%s error=\"cannot open %s: %s\"", dir, path,
                  strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        if (e == EWOULDBLOCK) {
            ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
            buf[n > 0 ? n : 0] = '\0';
            long pid = strtol(buf, NULL, 10);
            char who[40] = "pid unknown";
            if (pid > 0) {
                snprintf(who, sizeof(who), "pid %ld", pid);
            }
            log_error("main",
                      "event=data_dir_in_use dir=%s msg=\"data directory %s is in use by another "
                      "miradb (%s); refusing to start\"",
                      dir, dir, who);
        } else {
            log_error("main", "event=data_dir_failed dir=%s error=\"cannot lock %s: %s\"", dir,
                      path, strerror(e));
        }
        close(fd);
        return -1;
    }
    int len = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
        /* The lock holds; only the pid in the message of a second daemon is lost. */
        log_warn("main", "event=lock_pid_not_written path=%s error=\"%s\"", path, strerror(errno));
    }
    return fd;
}

/* Every seal attempt that failed, with its cause; called on a sealer thread. */
static enum shard_ack seal_log_ack;

static void log_seal_failure(const struct seal_failure *f)
{
    char next[120];
    if (f->retry_in_s >= 0) {
        snprintf(next, sizeof(next), "retry in %ds", f->retry_in_s);
    } else {
        snprintf(next, sizeof(next), "%s",
                 seal_log_ack == SHARD_ACK_SEAL
                     ? "given up at shutdown; its rows were never acknowledged"
                     : "given up at shutdown; the WAL keeps its rows for the next start");
    }
    log_error("sealer",
              "event=seal_failed signal=%s shard=%u seal_id=%llu rows=%llu attempt=%u step=%s "
              "error=\"%s\"%s%s%s path=%s next=\"%s\"",
              signal_name(f->signal), f->shard, (unsigned long long)f->seal_id,
              (unsigned long long)f->rows, f->attempt, f->step, strerror(-f->error),
              f->detail[0] ? " detail=\"" : "", f->detail, f->detail[0] ? "\"" : "", f->path, next);
}

/* Starts storage (store.h) with the settings and hooks of |c|, and logs
 * what the boot found: the shards raised to the WAL directories on disk,
 * blocks that failed to open. 0 or -errno with a message in |err|. */
static int open_store(const struct config *c, char *err, size_t errlen)
{
    wal_segment_bytes = (size_t)c->wal_segment; /* before any wal_open */
    struct store_cfg sc = {
        .data_dir = c->data_dir,
        .shards = c->shards,
        .queue = c->queue,
        .ack = (enum shard_ack)c->ack,
        .memory_budget = c->memory_budget,
        .block_target = c->block_target,
        .block_max_age_ms = c->block_max_age_ms,
        .retention_age_ms = c->retention_age_ms,
        .retention_bytes = c->retention_bytes,
        .compact_after_ms = c->compact_after_ms,
        .cold_target = c->cold_target,
        .zstd_level = c->zstd_level,
        .hot_zstd_level = c->hot_zstd_level > 0 ? c->hot_zstd_level : -1,
        .replay = ingest_replay_decode,
        .seal_failed = log_seal_failure,
        .min_free_bytes = c->min_free_bytes,
        .disk_changed = ops_disk_changed,
        .test_shard_delay_ms = c->test_shard_delay_ms,
        .test_seal_delay_ms = c->test_seal_delay_ms,
    };
    struct store_boot boot;
    int rc = store_open(&sc, &boot, err, errlen);
    if (boot.shards_raised) {
        log_warn("ingest",
                 "event=shards_raised shards=%d reason=\"WAL directories of %d shards "
                 "exist; all are replayed and kept\"",
                 boot.shards, boot.shards);
    }
    for (int s = 0; s < SIG_COUNT; s++) {
        if (boot.quarantined[s] > 0) {
            log_warn("ingest", "event=blocks_quarantined signal=%s count=%llu dir=%s/quarantine",
                     signal_name(s + 1), (unsigned long long)boot.quarantined[s], c->data_dir);
        }
    }
    return rc;
}

/* sd_notify (notify.h). A failure is logged once, not per message: if
 * READY=1 is lost, systemd's start timeout says so on its side. */
static void tell_manager(const char *msg)
{
    static bool logged;
    int rc = notify_send(msg);
    if (rc < 0 && !logged) {
        log_warn("main", "event=notify_failed socket=%s error=\"%s\"", getenv("NOTIFY_SOCKET"),
                 strerror(-rc));
        logged = true;
    }
}

/*
 * SIGHUP (ExecReload of deploy/miradb.service): a new TLS certificate and
 * new token files for new connections and requests; a file that fails to
 * load keeps what was loaded before. The --config file is not read again:
 * its settings size threads, shards and budgets at start, so a change to
 * it takes a restart.
 */
static void reload(void)
{
    char err[600];
    int a = tls_reload(err, sizeof(err));
    if (a < 0) {
        log_error("main", "event=reload_failed what=tls error=\"%s\"", err);
    }
    int b = auth_reload(err, sizeof(err));
    if (b < 0) {
        log_error("main", "event=reload_failed what=tokens error=\"%s\"", err);
    }
    log_info("main", "event=reloaded tls=%s tokens=%s", a < 0 ? "kept_old" : "ok",
             b < 0 ? "kept_old" : "ok");
}

/* Resident bytes from /proc/self/statm (|fd| open on it), or 0. */
static uint64_t resident_bytes(int fd, uint64_t page)
{
    char buf[128];
    unsigned long long vm, res;
    ssize_t got = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
    if (got <= 0) {
        return 0;
    }
    buf[got] = '\0';
    return sscanf(buf, "%llu %llu", &vm, &res) == 2 ? res * page : 0;
}

/* Freed heap glibc keeps inside its arenas (the middle of a thread's heap,
 * below a chunk still in use) counts in RSS like memory in use: when what
 * the charges do not cover passes 1/TRIM_DIV of the budget, malloc_trim
 * gives those pages back, at most every TRIM_GAP_NS. */
#define TRIM_DIV 32
#define TRIM_GAP_NS (200 * 1000000ull)

static uint64_t last_trim_ns;

/* Every tick of the main loop: the budget against the whole process. */
static void memory_tick(int fd, uint64_t page, uint64_t budget)
{
    uint64_t rss = resident_bytes(fd, page);
    if (rss == 0) {
        return;
    }
#if defined(__SANITIZE_ADDRESS__)
    /* Under AddressSanitizer the resident set is mostly its shadow memory
     * and quarantine, not the daemon's: measured, it would take the
     * admission limit of a small budget to nothing. */
    (void)budget;
    store_memory_tick(adm_in_use());
    return;
#endif
    uint64_t counted = adm_in_use(), now = clock_mono_ns();
    if (rss > counted + budget / TRIM_DIV && now - last_trim_ns >= TRIM_GAP_NS) {
        malloc_trim(0);
        last_trim_ns = now;
        ops_note_trim(clock_mono_ns() - now);
        rss = resident_bytes(fd, page);
    }
    store_memory_tick(rss);
}

static int serve(int argc, char **argv)
{
    static struct config c; /* static: a few kilobytes of paths */
    char err[1024];
    char grpc_addr[80], http_addr[80];
    sigset_t sigs;
    int rc = config_parse(&c, argc, argv, err, sizeof(err));
    if (rc == 1) {
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "miradb serve: %s\n(see miradb serve --help)\n", err);
        return 2;
    }
    if (c.config_file[0] != '\0') {
        log_info("main", "event=config_loaded file=%s", c.config_file);
    }
    log_set_level((enum log_level)c.log_level);
    /* Fixed thresholds: glibc otherwise raises its mmap threshold after the
     * first large free, and the megabyte buffers of requests, open blocks and
     * seals then stay in the heap after they are freed, so RSS would keep the
     * high-water mark of the memory budget and then some. */
    mallopt(M_MMAP_THRESHOLD, 256 << 10);
    mallopt(M_TRIM_THRESHOLD, 1 << 20);
    if (c.max_request_bytes > c.memory_budget / 2) {
        log_warn("main", "event=config_warning msg=\"--max-request-bytes is more than half of "
                         "--memory-budget: large requests may wait and be refused\"");
    }
    /* The floor measured under 1,000-record exports (bench/cases/rss.sh):
     * the fixed RSS (code, libraries, stacks: ~6 MiB), each shard's open
     * blocks at their 2 MiB minimum plus the blocks being sealed and the
     * seal scratch. Below it admission cannot keep RSS inside the budget. */
    uint64_t floor = (16ull << 20) + (uint64_t)c.shards * (12ull << 20);
    if (c.memory_budget < floor) {
        log_warn("main",
                 "event=config_warning msg=\"--memory-budget is below %llu MiB (16 MiB + 12 MiB "
                 "per shard): exports will wait and be refused and RSS may pass the budget\"",
                 (unsigned long long)(floor >> 20));
    }

    /* Signals are taken by sigtimedwait on this thread only. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP); /* systemctl reload: certificates and token files */
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    json_object_seed(0);

    if (mkdir(c.data_dir, 0755) < 0 && errno != EEXIST) {
        log_error("main", "event=data_dir_failed dir=%s error=\"%s\"", c.data_dir, strerror(errno));
        return 1;
    }
    int lock_fd = lock_data_dir(c.data_dir);
    if (lock_fd < 0) {
        return 1;
    }
    seal_log_ack = (enum shard_ack)c.ack;
    rc = open_store(&c, err, sizeof(err));
    if (rc < 0) {
        log_error("main", "event=init_failed error=\"%s\"", err);
        return 1;
    }
    ingest_init(&c);
    if (tls_init(&c, err, sizeof(err)) < 0 || auth_init(&c, err, sizeof(err)) < 0 ||
        origin_init(&c, err, sizeof(err)) < 0) {
        log_error("main", "event=init_failed error=\"%s\"", err);
        return 1;
    }
    rc = iot_init(c.io_threads);
    if (rc < 0) {
        log_error("main", "event=init_failed error=\"%s\"", strerror(-rc));
        return 1;
    }
    /* Query endpoints register their HTTP routes here, before the loops start. */
    if (loki_register(&c) < 0) {
        log_error("main", "event=init_failed error=\"loki routes\"");
        return 1;
    }
    if (tempo_register(&c) < 0) {
        log_error("main", "event=init_failed error=\"tempo routes\"");
        return 1;
    }
    if (prom_register(&c) < 0) {
        log_error("main", "event=init_failed error=\"prometheus routes\"");
        return 1;
    }
    if (ui_register() < 0) {
        log_error("main", "event=init_failed error=\"ui routes\"");
        return 1;
    }

    if (attach_all("grpc", c.grpc_listen, grpc_attach, grpc_addr, sizeof(grpc_addr)) < 0 ||
        attach_all("http", c.http_listen, http1_attach, http_addr, sizeof(http_addr)) < 0) {
        return 1;
    }
    rc = iot_start();
    if (rc < 0) {
        log_error("main", "event=init_failed error=\"%s\"", strerror(-rc));
        return 1;
    }
    log_info("main",
             "event=listening grpc=%s http=%s io_threads=%d shards=%d ack=%s data=%s "
             "memory_budget=%llu",
             grpc_addr, http_addr, c.io_threads, c.shards,
             c.ack == SHARD_ACK_FSYNC  ? "fsync"
             : c.ack == SHARD_ACK_SEAL ? "seal"
                                       : "wal",
             c.data_dir, (unsigned long long)c.memory_budget);

    bool ready = false;
    uint64_t replay_bytes_told = 0;
    int exit_code = 0;
    uint64_t refused[RJ_COUNT] = {0};
    uint64_t quarantined = 0;
    struct timespec start, last_summary, last_progress, tick = {0, 20 * 1000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    last_summary = last_progress = start;
    /* The budget against the whole process: every tick, the resident set
     * (store_memory_tick). One pread of statm, ~10 us. */
    int statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    for (;;) {
        int sig = sigtimedwait(&sigs, NULL, &tick);
        memory_tick(statm_fd, page, c.memory_budget);
        if (sig == SIGTERM || sig == SIGINT) {
            log_info("main", "event=stopping signal=%s", sig == SIGTERM ? "TERM" : "INT");
            tell_manager("STOPPING=1\nSTATUS=stopping: finishing requests in flight");
            break;
        }
        if (sig == SIGHUP) {
            reload();
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - last_summary.tv_sec >= SUMMARY_S) {
            log_rejection_summary(refused);
            last_summary = now;
        }
        log_quarantines(c.data_dir, &quarantined);
        if (!ready) {
            struct shard_stats st;
            bool all = true;
            uint64_t frames = 0, bytes = 0, torn = 0;
            for (int g = 1; g <= SIG_COUNT; g++) {
                for (int i = 0; i < store_shard_count(); i++) {
                    store_shard_stats(g, i, &st);
                    if (st.error < 0) {
                        log_error("main", "event=wal_open_failed signal=%s shard=%d error=\"%s\"",
                                  signal_name(g), i, strerror(-st.error));
                        exit_code = 1;
                        goto stop;
                    }
                    all = all && st.replayed;
                    frames += st.replay_frames;
                    bytes += st.replay_bytes;
                    torn += st.wal.torn_frames;
                }
            }
            if (!all && now.tv_sec > last_progress.tv_sec) {
                uint64_t total = store_wal_bytes_at_boot();
                double pct = total > 0 ? 100.0 * (double)bytes / (double)total : 100.0;
                log_info("main", "event=replay_progress frames=%llu bytes=%llu percent=%.1f",
                         (unsigned long long)frames, (unsigned long long)bytes, pct);
                /* A long replay that still moves asks systemd for more start
                 * time (TimeoutStartSec); one that stalls does not. */
                char note[160];
                snprintf(note, sizeof(note), "%sSTATUS=replaying the WAL: %.1f%%",
                         bytes > replay_bytes_told ? "EXTEND_TIMEOUT_USEC=30000000\n" : "", pct);
                tell_manager(note);
                replay_bytes_told = bytes;
                last_progress = now;
            }
            if (all) {
                log_info(
                    "main",
                    "event=ready replayed_frames=%llu replayed_bytes=%llu "
                    "torn_frames=%llu boot_ms=%ld",
                    (unsigned long long)frames, (unsigned long long)bytes, (unsigned long long)torn,
                    (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
                ready = true;
                char note[256];
                snprintf(note, sizeof(note), "READY=1\nSTATUS=serving: grpc %s, http %s", grpc_addr,
                         http_addr);
                tell_manager(note);
            }
        }
    }
stop:
    if (statm_fd >= 0) {
        close(statm_fd);
    }
    /* One deadline for the whole stop: the requests in flight get until
     * then, and so do seals that keep failing (sealer_give_up_at). */
    uint64_t t_stop = clock_mono_ns();
    uint64_t deadline = t_stop + c.shutdown_timeout_ms * 1000000u;
    iot_stop_and_join(quiesce_all, active_all, (int)c.shutdown_timeout_ms);
    qpool_stop(); /* a query still running would post to a loop that is gone */
    store_close(deadline);
    ingest_fini();
    iot_run_pending();
    http1_fini(); /* connections the grace period left behind */
    iot_fini();
    tls_fini();
    auth_fini();
    origin_fini();
    struct sealer_stats ss;
    sealer_get_stats(&ss);
    if (ss.seals_abandoned > 0) {
        log_warn("main", "event=seals_abandoned count=%llu msg=\"%s\"",
                 (unsigned long long)ss.seals_abandoned,
                 c.ack == SHARD_ACK_SEAL
                     ? "blocks whose seal kept failing were dropped; their rows were "
                       "never acknowledged"
                     : "blocks whose seal kept failing were left unsealed; the WAL "
                       "keeps their rows and the next start replays them");
    }
    log_info("main", "event=stopped exit=%d stop_ms=%llu", exit_code,
             (unsigned long long)((clock_mono_ns() - t_stop) / 1000000u));
    close(lock_fd);
    return exit_code;
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"serve", serve},   {"health", cli_health},   {"inspect", cli_inspect},
    {"fsck", cli_fsck}, {"version", cmd_version},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0) {
        return cmd_version(argc - 1, argv + 1);
    }
    bool help = strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0;
    if (help && argc == 2) {
        usage(stdout);
        return 0;
    }
    if (help && argc == 3) {
        /* miradb help COMMAND: that command's own --help */
        cmd = argv[2];
        char *hargv[] = {argv[2], "--help", NULL};
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
            if (strcmp(cmd, commands[i].name) == 0) {
                return commands[i].run(2, hargv);
            }
        }
    }
    for (size_t i = 0; !help && i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(cmd, commands[i].name) == 0) {
            return commands[i].run(argc - 1, argv + 1);
        }
    }
    if (help && argc > 3) {
        fprintf(stderr, "miradb help: unexpected argument '%s'\n", argv[3]);
    } else {
        fprintf(stderr, "miradb: unknown command '%s'\n", cmd);
    }
    usage(stderr);
    return 2;
}
