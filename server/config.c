/*
 * config.c - one option table drives the flags, the keys of the --config
 * file (syntax: conffile.c), defaults, --help and --print-config, so an
 * option cannot exist in one place and be missing from another. A row
 * added to the table is a flag, a key and a printed line at once.
 */
#include "server/config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server/addr.h"
#include "server/conffile.h"
#include "server/log.h"

enum opt_type {
    OPT_STR,
    OPT_INT,
    OPT_BYTES,
    OPT_ENUM,
    OPT_DUR,   /* "500ms", "30s", "5m", "24h", "7d"; stored as uint64 ms */
    OPT_COUNT, /* a uint64 count (suffixes as OPT_BYTES: 1M = 1000000) */
    OPT_ADDR,  /* a listener's ADDR:PORT or [V6]:PORT (addr.h), kept as text */
};

struct opt {
    const char *name;
    enum opt_type type;
    const char *def;     /* NULL: computed at run time (see defaults) */
    const char *choices; /* OPT_ENUM: "a|b|c", the index is stored */
    long long min;
    long long max;
    size_t off;
    size_t size; /* OPT_STR buffer size */
    const char *help;
};

#define STR(f) offsetof(struct config, f), sizeof(((struct config *)0)->f)
#define NUM(f) offsetof(struct config, f), 0

/* --ack's choices ("wal|fsync|seal") are enum shard_ack's values, in order. */
_Static_assert(SHARD_ACK_WAL == 0 && SHARD_ACK_FSYNC == 1 && SHARD_ACK_SEAL == 2,
               "--ack choices follow enum shard_ack");

static const struct opt opts[] = {
    {"data", OPT_STR, "./data", NULL, 0, 0, STR(data_dir), "data directory (WAL and blocks)"},
    {"grpc-listen", OPT_ADDR, "127.0.0.1:4317", NULL, 0, 0, STR(grpc_listen),
     "OTLP/gRPC address ADDR:PORT (port 0 picks a free port)"},
    {"http-listen", OPT_ADDR, "127.0.0.1:4318", NULL, 0, 0, STR(http_listen),
     "OTLP/HTTP, operator and query address ADDR:PORT"},
    {"io-threads", OPT_INT, NULL, NULL, 1, 64, NUM(io_threads),
     "I/O threads, each with its own event loop (default: cores)"},
    {"shards", OPT_INT, NULL, NULL, 1, 64, NUM(shards),
     "shard threads per signal, each with one WAL and one open block (default: cores)"},
    {"queue", OPT_INT, "64", NULL, 1, 1 << 20, NUM(queue),
     "export requests a shard queue holds before new ones wait"},
    {"admit-wait", OPT_INT, "5000", NULL, 0, 3600000, NUM(admit_wait_ms),
     "ms a request waits for queue room or memory before 503 / UNAVAILABLE"},
    {"body-timeout", OPT_DUR, "30s", NULL, 1, 3600000, NUM(body_timeout_ms),
     "an admitted export whose body has not all arrived this long after admission is answered "
     "408 / DEADLINE_EXCEEDED and its memory returned"},
    {"min-receive-rate", OPT_BYTES, "1KiB", NULL, 0, 1ll << 30, NUM(min_receive_rate),
     "bytes a second an admitted export's body must arrive at, measured over each "
     "--receive-rate-window from admission; slower is cut off with 408 / DEADLINE_EXCEEDED "
     "(0 = off)"},
    {"receive-rate-window", OPT_DUR, "5s", NULL, 100, 600000, NUM(receive_rate_window_ms),
     "the window --min-receive-rate is measured over; the first one is also the grace period"},
    {"header-timeout", OPT_DUR, "10s", NULL, 1, 3600000, NUM(header_timeout_ms),
     "an HTTP request's line and headers must all arrive this long after its first byte "
     "(408 and close)"},
    {"max-header-bytes", OPT_BYTES, "64KiB", NULL, 1024, 16ll << 20, NUM(max_header_bytes),
     "bytes an HTTP request line and headers may take together (431 above)"},
    {"max-headers", OPT_INT, "100", NULL, 8, 10000, NUM(max_headers),
     "header lines an HTTP request may have (431 above)"},
    {"grpc-max-streams", OPT_INT, "128", NULL, 1, 65536, NUM(grpc_max_streams),
     "concurrent streams one gRPC connection may open (SETTINGS_MAX_CONCURRENT_STREAMS); one "
     "more is reset with REFUSED_STREAM"},
    {"grpc-max-header-list", OPT_BYTES, "16KiB", NULL, 1024, 1ll << 20, NUM(grpc_max_header_list),
     "bytes of a gRPC request's header list (SETTINGS_MAX_HEADER_LIST_SIZE, name + value + 32 "
     "each), advertised and enforced: RESOURCE_EXHAUSTED above"},
    {"max-connections", OPT_COUNT, "4096", NULL, 1, 1 << 24, NUM(max_connections),
     "open connections on both listeners together; one more is refused at accept (HTTP 503, "
     "or a close); keep it under the descriptor limit (RLIMIT_NOFILE, logged at start)"},
    {"max-connections-per-client", OPT_COUNT, "256", NULL, 1, 1 << 24,
     NUM(max_connections_per_client), "open connections from one client address, likewise"},
    {"idle-timeout", OPT_DUR, "2m", NULL, 1000, 86400000ll, NUM(idle_timeout_ms),
     "a keep-alive connection that sends nothing this long between requests is closed (gRPC: "
     "GOAWAY first)"},
    {"grpc-reset-rate", OPT_INT, "100", NULL, 1, 1000000, NUM(h2_reset_rate),
     "RST_STREAM frames a second one gRPC connection may send (burst as many), against Rapid "
     "Reset (CVE-2023-44487); past it GOAWAY(ENHANCE_YOUR_CALM) and close"},
    {"grpc-ping-rate", OPT_INT, "50", NULL, 1, 1000000, NUM(h2_ping_rate),
     "PING frames a second one gRPC connection may send (burst as many); past it GOAWAY"},
    {"grpc-settings-rate", OPT_INT, "10", NULL, 1, 1000000, NUM(h2_settings_rate),
     "SETTINGS frames a second one gRPC connection may send (burst as many); past it GOAWAY"},
    {"memory-budget", OPT_BYTES, "256MiB", NULL, 16ll << 20, 1ll << 50, NUM(memory_budget),
     "bytes ingest may hold: request bodies, queued batches, open blocks"},
    {"max-request-bytes", OPT_BYTES, "64MiB", NULL, 1024, 1ll << 31, NUM(max_request_bytes),
     "largest export body accepted, checked after gunzip too (413 / RESOURCE_EXHAUSTED)"},
    {"ack", OPT_ENUM, "wal", "wal|fsync|seal", 0, 0, NUM(ack),
     "wal: ack after the WAL write(2); fsync: after fdatasync (group commit); seal: no WAL, "
     "ack once the block holding the rows is sealed"},
    {"block-target", OPT_BYTES, "32MiB", NULL, 2ll << 20, 1ll << 34, NUM(block_target),
     "seal an open block once it holds this many bytes (capped at a third of the memory "
     "budget shared by all shards)"},
    {"wal-segment", OPT_BYTES, "64MiB", NULL, 64ll << 10, 1ll << 30, NUM(wal_segment),
     "start a new WAL segment once the current one holds this many bytes (a released one "
     "is kept as a spare and overwritten)"},
    {"block-max-age", OPT_DUR, "0", NULL, 0, 86400000ll, NUM(block_max_age_ms),
     "seal an open block once its first row is this old; 0 = 60s, or 1s with --ack seal"},
    {"retention-age", OPT_DUR, "0", NULL, 0, 1ll << 50, NUM(retention_age_ms),
     "delete sealed blocks whose newest row is older than this (0 = keep)"},
    {"retention-bytes", OPT_BYTES, "0", NULL, 0, 1ll << 50, NUM(retention_bytes),
     "delete the oldest sealed blocks while all blocks take more than this (0 = keep)"},
    {"compact-after", OPT_DUR, "1h", NULL, 0, 1ll << 50, NUM(compact_after_ms),
     "merge sealed blocks whose newest row is older than this into zstd cold blocks, per time "
     "window of this width (0 = off)"},
    {"cold-target", OPT_BYTES, "256MiB", NULL, 1 << 20, 1ll << 40, NUM(cold_target),
     "sealed block bytes merged into one cold block at most (and a sixteenth of the memory "
     "budget: the merge holds its rows in memory)"},
    {"zstd-level", OPT_INT, "3", NULL, 1, 19, NUM(zstd_level),
     "zstd level of the cold blocks' tables"},
    {"hot-zstd-level", OPT_INT, "1", NULL, 0, 19, NUM(hot_zstd_level),
     "zstd level of the tables the seal writes (logs: root and detail; spans: attributes and "
     "detail; points: every table); 0 = plain tables"},
    {"min-free-bytes", OPT_BYTES, "256MiB", NULL, 0, 1ll << 50, NUM(min_free_bytes),
     "refuse exports (503 / UNAVAILABLE, /ready 503) while the data directory's filesystem has "
     "less free space; the rest stays for the seals that free WAL space (0 = until full)"},
    {"query-workers", OPT_INT, NULL, NULL, 1, 64, NUM(query_workers),
     "threads that scan blocks for queries (default: cores)"},
    {"query-timeout", OPT_DUR, "30s", NULL, 1, 3600000, NUM(query_timeout_ms),
     "a query running longer is ended with an error"},
    {"query-max-rows", OPT_COUNT, "1000000", NULL, 1, 1ll << 40, NUM(query_max_rows),
     "most rows a query may scan before it is ended with an error"},
    {"query-memory", OPT_BYTES, NULL, NULL, 1 << 20, 1ll << 40, NUM(query_memory),
     "most memory one query may hold (series, partial results) before it is ended (default: a "
     "quarter of --memory-budget; the open queries together hold at most that quarter, or this "
     "when set larger)"},
    {"shutdown-timeout", OPT_DUR, "10s", NULL, 0, 3600000ll, NUM(shutdown_timeout_ms),
     "on SIGTERM, how long requests in flight and failing seals may take; then connections "
     "close and unsealed rows are left in the WAL for the next start"},
    {"log-level", OPT_ENUM, "info", "debug|info|warn|error", 0, 0, NUM(log_level),
     "least severe log level written to stderr"},
    {"tls-cert", OPT_STR, NULL, NULL, 0, 0, STR(tls_cert),
     "PEM certificate chain: both listeners speak TLS (1.2+) when set with --tls-key; "
     "reloaded on SIGHUP"},
    {"tls-key", OPT_STR, NULL, NULL, 0, 0, STR(tls_key), "PEM private key of --tls-cert"},
    {"tls-client-ca", OPT_STR, NULL, NULL, 0, 0, STR(tls_client_ca),
     "PEM CA certificates: clients must present a certificate they signed (mutual TLS)"},
    {"tls-handshake-timeout", OPT_DUR, "10s", NULL, 1, 3600000, NUM(tls_handshake_timeout_ms),
     "a connection that has not completed its TLS handshake this long after accept is closed"},
    {"ingest-token-file", OPT_STR, NULL, NULL, 0, 0, STR(ingest_token_file),
     "file of bearer tokens (one a line, # comments) that OTLP exports must present; "
     "reloaded on SIGHUP"},
    {"query-token-file", OPT_STR, NULL, NULL, 0, 0, STR(query_token_file),
     "file of bearer tokens the query APIs and /metrics require; reloaded on SIGHUP"},
    {"cors-origins", OPT_STR, NULL, NULL, 0, 0, STR(cors_origins),
     "browser origins allowed by CORS, comma-separated, exact (* = any); default none"},
    {"allowed-hosts", OPT_STR, NULL, NULL, 0, 0, STR(allowed_hosts),
     "Host values the query APIs and /metrics answer, comma-separated (* = any); default: "
     "the listener's address, localhost, 127.0.0.1, [::1] and the host name"},
    {"test-shard-delay", OPT_INT, "0", NULL, 0, 60000, NUM(test_shard_delay_ms),
     "testing only: ms every shard sleeps per drain, to simulate a slow disk"},
    {"test-seal-delay", OPT_INT, "0", NULL, 0, 60000, NUM(test_seal_delay_ms),
     "testing only: ms the sealer sleeps before each seal, to simulate a sealer that lags"},
    {"test-query-held", OPT_BYTES, "0", NULL, 0, 1ll << 40, NUM(test_query_held),
     "testing only: bytes counted as held by other queries against the open queries' memory "
     "bound, to refuse a query at it"},
};
#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

/* |v| * |mul| as a whole number; a product past any option's range is
 * LLONG_MAX (then refused by the range check), never an undefined cast. */
static int scaled(double v, double mul, long long *out)
{
    double r = v * mul;
    if (isnan(r)) {
        return -EINVAL;
    }
    *out = r >= 9.0e18 ? LLONG_MAX : (long long)r;
    return 0;
}

static int parse_bytes(const char *s, long long *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || v < 0) {
        return -EINVAL;
    }
    static const struct {
        const char *suf;
        double mul;
    } sufs[] = {{"", 1},
                {"b", 1},
                {"k", 1e3},
                {"kb", 1e3},
                {"m", 1e6},
                {"mb", 1e6},
                {"g", 1e9},
                {"gb", 1e9},
                {"kib", 1024.0},
                {"mib", 1048576.0},
                {"gib", 1073741824.0},
                {"ki", 1024.0},
                {"mi", 1048576.0},
                {"gi", 1073741824.0}};
    for (size_t i = 0; i < sizeof(sufs) / sizeof(sufs[0]); i++) {
        if (strcasecmp(end, sufs[i].suf) == 0) {
            return scaled(v, sufs[i].mul, out);
        }
    }
    return -EINVAL;
}

static int parse_dur(const char *s, long long *ms)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || v < 0) {
        return -EINVAL;
    }
    static const struct {
        const char *suf;
        double mul;
    } sufs[] = {{"ms", 1}, {"s", 1000}, {"", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    for (size_t i = 0; i < sizeof(sufs) / sizeof(sufs[0]); i++) {
        if (strcmp(end, sufs[i].suf) == 0) {
            return scaled(v, sufs[i].mul, ms);
        }
    }
    return -EINVAL;
}

/* Writes |v| with the largest binary suffix that divides it exactly, so
 * parse_bytes reads back the same number. */
static void fmt_bytes(char *buf, size_t cap, uint64_t v)
{
    static const struct {
        const char *suf;
        uint64_t mul;
    } sufs[] = {{"GiB", 1ull << 30}, {"MiB", 1ull << 20}, {"KiB", 1ull << 10}};
    for (size_t i = 0; v != 0 && i < sizeof(sufs) / sizeof(sufs[0]); i++) {
        if (v % sufs[i].mul == 0) {
            snprintf(buf, cap, "%llu%s", (unsigned long long)(v / sufs[i].mul), sufs[i].suf);
            return;
        }
    }
    snprintf(buf, cap, "%llu", (unsigned long long)v);
}

/* Milliseconds with the largest unit that divides them exactly. */
static void fmt_dur(char *buf, size_t cap, uint64_t ms)
{
    static const struct {
        const char *suf;
        uint64_t mul;
    } units[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
    for (size_t i = 0; ms != 0 && i < sizeof(units) / sizeof(units[0]); i++) {
        if (ms % units[i].mul == 0) {
            snprintf(buf, cap, "%llu%s", (unsigned long long)(ms / units[i].mul), units[i].suf);
            return;
        }
    }
    snprintf(buf, cap, ms == 0 ? "0" : "%llums", (unsigned long long)ms);
}

/* Sets |o| from |val|; -EINVAL with the reason alone in |err| (the caller
 * says where the value came from: "--NAME" or "FILE:LINE: NAME"). */
static int set_opt(struct config *c, const struct opt *o, const char *val, char *err, size_t errlen)
{
    char *field = (char *)c + o->off;
    long long n = 0;
    char *end;

    struct sockaddr_storage ss;
    socklen_t sl;
    if (o->type == OPT_ADDR && addr_parse(val, &ss, &sl) < 0) {
        snprintf(err, errlen,
                 "'%s' is not ADDR:PORT (e.g. 127.0.0.1:4318, 0.0.0.0:4317, [::]:4318)", val);
        return -EINVAL;
    }
    switch (o->type) {
    case OPT_STR:
    case OPT_ADDR:
        /* A line break could not be written back by --print-config, and
         * no path or address needs a control character. */
        for (const char *q = val; *q != '\0'; q++) {
            if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f) {
                snprintf(err, errlen, "contains a control character (byte 0x%02x)",
                         (unsigned char)*q);
                return -EINVAL;
            }
        }
        if (strlen(val) >= o->size) {
            snprintf(err, errlen, "value longer than %zu bytes", o->size - 1);
            return -EINVAL;
        }
        strcpy(field, val);
        return 0;
    case OPT_INT:
        errno = 0;
        n = strtoll(val, &end, 10);
        if (errno != 0 || end == val || *end != '\0') {
            snprintf(err, errlen, "'%s' is not an integer", val);
            return -EINVAL;
        }
        break;
    case OPT_BYTES:
    case OPT_COUNT:
        if (parse_bytes(val, &n) < 0) {
            snprintf(err, errlen, "'%s' is not a size (e.g. 256MiB, 1048576)", val);
            return -EINVAL;
        }
        break;
    case OPT_DUR:
        if (parse_dur(val, &n) < 0) {
            snprintf(err, errlen, "'%s' is not a duration (e.g. 500ms, 30s, 5m, 24h, 7d)", val);
            return -EINVAL;
        }
        break;
    case OPT_ENUM: {
        const char *p = o->choices;
        int idx = 0;
        size_t vl = strlen(val);
        while (p != NULL && *p != '\0') {
            const char *bar = strchr(p, '|');
            size_t l = bar ? (size_t)(bar - p) : strlen(p);
            if (l == vl && strncmp(p, val, l) == 0) {
                *(int *)field = idx;
                return 0;
            }
            idx++;
            p = bar ? bar + 1 : NULL;
        }
        snprintf(err, errlen, "'%s' is not one of %s", val, o->choices);
        return -EINVAL;
    }
    }
    if (n < o->min || n > o->max) {
        char lo[32], hi[32];
        if (o->type == OPT_BYTES) {
            fmt_bytes(lo, sizeof(lo), (uint64_t)o->min);
            fmt_bytes(hi, sizeof(hi), (uint64_t)o->max);
        } else if (o->type == OPT_DUR) {
            fmt_dur(lo, sizeof(lo), (uint64_t)o->min);
            fmt_dur(hi, sizeof(hi), (uint64_t)o->max);
        } else {
            snprintf(lo, sizeof(lo), "%lld", o->min);
            snprintf(hi, sizeof(hi), "%lld", o->max);
        }
        snprintf(err, errlen, "'%s' is outside %s..%s", val, lo, hi);
        return -EINVAL;
    }
    if (o->type == OPT_BYTES || o->type == OPT_DUR || o->type == OPT_COUNT) {
        *(uint64_t *)field = (uint64_t)n;
    } else {
        *(int *)field = (int)n;
    }
    return 0;
}

static const struct opt *find_opt(const char *name)
{
    for (size_t i = 0; i < N_OPTS; i++) {
        if (strcmp(opts[i].name, name) == 0) {
            return &opts[i];
        }
    }
    return NULL;
}

void config_print(FILE *f, const struct config *c)
{
    fprintf(f, "# miradb serve --print-config: the effective configuration (defaults, then\n"
               "# --config FILE, then flags); readable back with --config.\n");
    for (size_t i = 0; i < N_OPTS; i++) {
        const struct opt *o = &opts[i];
        const char *field = (const char *)c + o->off;
        char v[64];
        switch (o->type) {
        case OPT_STR:
        case OPT_ADDR:
            conffile_write_quoted(f, o->name, field);
            continue;
        case OPT_INT:
            snprintf(v, sizeof(v), "%d", *(const int *)field);
            break;
        case OPT_COUNT:
            snprintf(v, sizeof(v), "%llu", (unsigned long long)*(const uint64_t *)field);
            break;
        case OPT_BYTES:
            fmt_bytes(v, sizeof(v), *(const uint64_t *)field);
            break;
        case OPT_DUR:
            fmt_dur(v, sizeof(v), *(const uint64_t *)field);
            break;
        case OPT_ENUM: {
            const char *p = o->choices;
            for (int k = *(const int *)field; k > 0 && p != NULL; k--) {
                p = strchr(p, '|');
                p = p != NULL ? p + 1 : NULL;
            }
            size_t l = p != NULL ? strcspn(p, "|") : 0;
            snprintf(v, sizeof(v), "%.*s", (int)l, p != NULL ? p : "");
            break;
        }
        }
        fprintf(f, "%s = %s\n", o->name, v);
    }
}

void config_usage(FILE *f)
{
    fprintf(f, "usage: miradb serve [--config FILE] [options]\n\n"
               "Runs the MiraDB daemon: OTLP/gRPC and OTLP/HTTP ingest into a write-ahead log\n"
               "and open blocks, /health, /ready and /metrics on the HTTP listener.\n\n"
               "Every option is also a key of the --config file (`memory-budget = 1GiB`);\n"
               "flags override the file.\n\noptions:\n");
    fprintf(f, "  %-30s %s\n", "--config FILE",
            "read settings from FILE first: lines of `key = value`, # comments");
    fprintf(f, "  %-30s %s\n", "--print-config",
            "print the effective settings in the --config format and exit");
    for (size_t i = 0; i < N_OPTS; i++) {
        const struct opt *o = &opts[i];
        char lhs[64];
        snprintf(lhs, sizeof(lhs), "--%s %s", o->name,
                 o->type == OPT_ENUM                          ? o->choices
                 : o->type == OPT_BYTES                       ? "BYTES"
                 : o->type == OPT_INT || o->type == OPT_COUNT ? "N"
                 : o->type == OPT_DUR                         ? "DURATION"
                 : o->type == OPT_ADDR                        ? "ADDR:PORT"
                                                              : "VALUE");
        fprintf(f, "  %-30s %s", lhs, o->help);
        if (o->def != NULL) {
            fprintf(f, " [%s]", o->def);
        }
        fputc('\n', f);
    }
    fprintf(f, "  %-30s %s\n", "-h, --help", "this text");
    fprintf(f, "\nexit status: 0 stopped cleanly (SIGTERM/SIGINT), 1 failed to start or to run\n"
               "(data directory or port in use, storage failure), 2 usage or configuration\n"
               "error (unknown option or key, bad value).\n");
}

/* The --config file's settings, each key at most once. */
struct file_ctx {
    struct config *c;
    int line[N_OPTS]; /* where each key was set, 0: not yet */
};

/* Edit distance of two short keys, capped: 3 means "3 or more". */
static int key_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int row[64];
    if (la >= 63 || lb >= 63) {
        return 3;
    }
    for (size_t j = 0; j <= lb; j++) {
        row[j] = (int)j;
    }
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] < 3 ? row[lb] : 3;
}

static int file_setting(void *arg, const char *key, const char *value, int line, char *err,
                        size_t errlen)
{
    struct file_ctx *fc = arg;
    const struct opt *o = find_opt(key);
    if (o == NULL && key[0] == '-') {
        snprintf(err, errlen, "write the key without the dashes of its flag");
        return -EINVAL;
    }
    if (o == NULL) {
        bool flag_only = strcmp(key, "config") == 0 || strcmp(key, "print-config") == 0 ||
                         strcmp(key, "help") == 0;
        const struct opt *near = NULL;
        int best = 3;
        for (size_t i = 0; i < N_OPTS; i++) {
            int dist = key_distance(key, opts[i].name);
            if (dist < best) {
                best = dist;
                near = &opts[i];
            }
        }
        if (flag_only) {
            snprintf(err, errlen, "a flag only, not a key of the file");
        } else if (near != NULL) {
            snprintf(err, errlen, "unknown key (did you mean %s?)", near->name);
        } else {
            snprintf(err, errlen, "unknown key (miradb serve --help lists the keys)");
        }
        return -EINVAL;
    }
    size_t i = (size_t)(o - opts);
    if (fc->line[i] != 0) {
        snprintf(err, errlen, "set twice (first on line %d)", fc->line[i]);
        return -EINVAL;
    }
    fc->line[i] = line;
    return set_opt(fc->c, o, value, err, errlen);
}

enum { OPT_ID_CONFIG = 900, OPT_ID_PRINT = 901 };

int config_parse(struct config *c, int argc, char **argv, char *err, size_t errlen)
{
    struct option lopts[N_OPTS + 4];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char why[200];
    bool print = false;
    const char *file = NULL;

    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < N_OPTS; i++) {
        if (opts[i].def != NULL && set_opt(c, &opts[i], opts[i].def, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "default of --%s: %s", opts[i].name, why);
            return -EINVAL;
        }
        lopts[i] = (struct option){opts[i].name, required_argument, NULL, (int)i + 1000};
    }
    c->io_threads = c->shards = c->query_workers = cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
    lopts[N_OPTS] = (struct option){"help", no_argument, NULL, 'h'};
    lopts[N_OPTS + 1] = (struct option){"config", required_argument, NULL, OPT_ID_CONFIG};
    lopts[N_OPTS + 2] = (struct option){"print-config", no_argument, NULL, OPT_ID_PRINT};
    lopts[N_OPTS + 3] = (struct option){NULL, 0, NULL, 0};

    /* Two passes over the flags: the first finds --config (and any error),
     * the file is read, then the second applies the flags over it. */
    for (int pass = 0; pass < 2; pass++) {
        optind = 0; /* glibc: a full restart of the scan, permutation state included */
        opterr = 0;
        for (;;) {
            int ch = getopt_long(argc, argv, ":h", lopts, NULL);
            if (ch == -1) {
                break;
            }
            if (ch == 'h') {
                config_usage(stdout);
                return 1;
            }
            if (ch == '?' || ch == ':') {
                snprintf(err, errlen, "%s: %s", ch == ':' ? "missing value for" : "unknown option",
                         argv[optind - 1]);
                return -EINVAL;
            }
            if (ch == OPT_ID_CONFIG) {
                if (pass == 0 && file != NULL) {
                    snprintf(err, errlen, "--config given twice");
                    return -EINVAL;
                }
                file = optarg;
                continue;
            }
            if (ch == OPT_ID_PRINT) {
                print = true;
                continue;
            }
            if (pass == 1 && set_opt(c, &opts[ch - 1000], optarg, why, sizeof(why)) < 0) {
                snprintf(err, errlen, "--%s: %s", opts[ch - 1000].name, why);
                return -EINVAL;
            }
        }
        if (optind < argc) {
            snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
            return -EINVAL;
        }
        if (pass == 0 && file != NULL) {
            struct file_ctx fc = {.c = c};
            if (strlen(file) >= sizeof(c->config_file)) {
                snprintf(err, errlen, "--config: path longer than %zu bytes",
                         sizeof(c->config_file) - 1);
                return -EINVAL;
            }
            strcpy(c->config_file, file);
            if (conffile_read(file, file_setting, &fc, err, errlen) < 0) {
                return -EINVAL;
            }
        }
    }
    if (c->query_memory == 0) {
        /* A quarter of the budget: the share the table cap (storage/store.c)
         * and each query's page window (query/qctx.h) also get, so tables,
         * pages and query state together leave ingest's admission the rest.
         * At the 64 MiB floor that is 16 MiB, enough for the series of a
         * range query over a few hundred thousand points. */
        c->query_memory = c->memory_budget / 4 > (1u << 20) ? c->memory_budget / 4 : 1u << 20;
    }
    if (print) {
        config_print(stdout, c);
        return 1;
    }
    return 0;
}
