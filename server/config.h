/*
 * config.h - the daemon's settings, filled from one option table that also
 * drives --help (config.c).
 */
#ifndef MIRADB_CONFIG_H
#define MIRADB_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "storage/shard.h"

struct config {
    char config_file[512]; /* --config FILE, "" without one */
    char data_dir[512];
    char grpc_listen[128]; /* ADDR:PORT; port 0 picks a free one */
    char http_listen[128];
    int io_threads;
    int shards; /* per signal */
    int queue;  /* batches a shard queue holds (reserved + queued) */
    int admit_wait_ms;
    uint64_t body_timeout_ms;        /* an admitted export's body must arrive within this */
    uint64_t min_receive_rate;       /* body bytes/s over each window; 0 = off */
    uint64_t receive_rate_window_ms; /* the window (and grace) of min_receive_rate */
    uint64_t header_timeout_ms;      /* HTTP request line + headers, from the first byte */
    uint64_t max_header_bytes;       /* HTTP/1 request line + headers (431 above) */
    int max_headers;                 /* HTTP/1 header lines a request may have (431 above) */
    int grpc_max_streams;            /* SETTINGS_MAX_CONCURRENT_STREAMS */
    uint64_t grpc_max_header_list;   /* SETTINGS_MAX_HEADER_LIST_SIZE, advertised and enforced */
    uint64_t max_connections;        /* open on both listeners together */
    uint64_t max_connections_per_client; /* open from one source address */
    uint64_t idle_timeout_ms;            /* a connection with nothing to do is closed */
    int h2_reset_rate;    /* RST_STREAM frames a second one HTTP/2 connection may send */
    int h2_ping_rate;     /* PING frames (not acks), likewise */
    int h2_settings_rate; /* SETTINGS frames (not acks), likewise */
    uint64_t memory_budget;
    uint64_t max_request_bytes;
    int ack; /* enum shard_ack: the option's choices in that order */
    uint64_t block_target;
    uint64_t wal_segment;      /* wal_segment_bytes (storage/wal.h) */
    uint64_t block_max_age_ms; /* 0: automatic (60 s, or 1 s under --ack seal) */
    uint64_t retention_age_ms; /* 0: keep */
    uint64_t retention_bytes;  /* 0: keep */
    uint64_t compact_after_ms; /* the cold tier (storage/compact.h); 0: off */
    uint64_t cold_target;
    int zstd_level;
    int hot_zstd_level;      /* 0: plain hot blocks */
    uint64_t min_free_bytes; /* refuse exports below this free space; 0: never */
    /* SIGTERM to exit, at most (plus one seal attempt) */
    uint64_t shutdown_timeout_ms;
    int log_level;
    int query_workers;
    uint64_t query_timeout_ms;
    uint64_t query_max_rows;
    uint64_t query_memory;
    int test_shard_delay_ms;  /* tests only: a slow shard */
    int test_seal_delay_ms;   /* tests only: a lagging sealer */
    uint64_t test_query_held; /* tests only: bytes other queries seem to hold */
    /* TLS, tokens and browsers (server/tls.h, auth.h, origin.h); "" = off */
    char tls_cert[512];
    char tls_key[512];
    char tls_client_ca[512];
    uint64_t tls_handshake_timeout_ms;
    char ingest_token_file[512];
    char query_token_file[512];
    char cors_origins[1024];  /* comma list */
    char allowed_hosts[1024]; /* comma list; "" = the defaults */
};

/*
 * Defaults, then the file of `--config FILE` (format: conffile.h; every
 * option is a key), then the other flags of argv (after the "serve" word),
 * so flags override the file. Returns 0; 1 when --help or --print-config
 * was printed to stdout (the caller exits 0); -EINVAL with a message in
 * |err|: "--NAME: reason" for a flag, "FILE:LINE: KEY: reason" for the
 * file (an unknown key, a bad value, a key set twice), "FILE: reason"
 * when it cannot be read.
 */
int config_parse(struct config *c, int argc, char **argv, char *err, size_t errlen);
void config_usage(FILE *f);
/* Writes every option as `key = value` (header comments first): the
 * --config format, which config_parse reads back to the same settings. */
void config_print(FILE *f, const struct config *c);

#endif
