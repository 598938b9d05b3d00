/*
 * ops.c - /ready and the /metrics page (Prometheus text format 0.0.4).
 * Per-thread counters are summed here, on read (stats.h).
 */
#include "server/ops.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "query/qctx.h"
#include "query/qstats.h"
#include "server/auth.h"
#include "server/ingest.h"
#include "server/log.h"
#include "server/version.h"
#include "server/origin.h"
#include "server/prom.h"
#include "server/iot.h"
#include "server/promcheck.h"
#include "server/tls.h"
#include "storage/adm.h"
#include "storage/block.h"
#include "storage/catalog.h"
#include "storage/compact.h"
#include "storage/diskfree.h"
#include "storage/oblock.h"
#include "storage/sealer.h"
#include "storage/store.h"
#include "storage/wal.h"

bool ops_ready(void)
{
    return store_ready() && !iot_stopping() && !diskfree_low();
}

const char *ops_not_ready_reason(char *buf, size_t cap)
{
    struct diskfree_stats d;
    if (!store_ready()) {
        snprintf(buf, cap, "not ready: replaying the write-ahead log");
    } else if (iot_stopping()) {
        snprintf(buf, cap, "not ready: shutting down");
    } else if (diskfree_low()) {
        diskfree_get_stats(&d);
        snprintf(buf, cap,
                 "not ready: the data directory's filesystem has %llu bytes free, below "
                 "--min-free-bytes %llu; exports are refused until space returns",
                 (unsigned long long)d.free_bytes, (unsigned long long)d.min_free);
    } else {
        return NULL;
    }
    return buf;
}

void ops_disk_changed(bool low, uint64_t free_bytes, uint64_t min_free)
{
    if (low) {
        log_error("ops",
                  "event=disk_low free_bytes=%llu min_free_bytes=%llu msg=\"exports are refused "
                  "503 / UNAVAILABLE and /ready is 503 until space returns; queries go on\"",
                  (unsigned long long)free_bytes, (unsigned long long)min_free);
    } else {
        log_info("ops",
                 "event=disk_recovered free_bytes=%llu min_free_bytes=%llu msg=\"exports are "
                 "accepted again\"",
                 (unsigned long long)free_bytes, (unsigned long long)min_free);
    }
}

static uint64_t ld(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void sum_stats(struct io_stats *out)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < iot_count(); i++) {
        const struct io_stats *s = &iot_get(i)->stats;
        for (int g = 0; g < 3; g++) {
            for (int t = 0; t < TR_COUNT; t++) {
                out->requests[g][t] += ld(&s->requests[g][t]);
                out->records[g][t] += ld(&s->records[g][t]);
                out->bytes[g][t] += ld(&s->bytes[g][t]);
            }
            out->rejected_records[g] += ld(&s->rejected_records[g]);
        }
        for (int r = 0; r < RJ_COUNT; r++) {
            out->rejections[r] += ld(&s->rejections[r]);
        }
        out->admit_waits += ld(&s->admit_waits);
        out->admit_wait_ns += ld(&s->admit_wait_ns);
        out->shed += ld(&s->shed);
        out->paced += ld(&s->paced);
        out->paced_ns += ld(&s->paced_ns);
        out->connections_accepted += ld(&s->connections_accepted);
    }
}

static void header(struct evbuffer *o, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The cold tier (storage/compact.h): blocks and bytes by tier, compactions. */
static void cold_metrics(struct evbuffer *o)
{
    static const char *const tiers[2] = {"hot", "cold"};
    struct cat_tier t[3][2];
    for (int g = 0; g < 3; g++) {
        catalog_get_tiers(g + 1, t[g]);
    }
    header(o, "miradb_tier_blocks", "gauge",
           "Sealed blocks by tier (cold: written by compaction).");
    for (int g = 0; g < 3; g++) {
        for (int k = 0; k < 2; k++) {
            evbuffer_add_printf(o, "miradb_tier_blocks{signal=\"%s\",tier=\"%s\"} %llu\n",
                                signal_name(g + 1), tiers[k], (unsigned long long)t[g][k].blocks);
        }
    }
    header(o, "miradb_tier_block_bytes", "gauge", "Bytes of sealed block files by tier.");
    for (int g = 0; g < 3; g++) {
        for (int k = 0; k < 2; k++) {
            evbuffer_add_printf(o, "miradb_tier_block_bytes{signal=\"%s\",tier=\"%s\"} %llu\n",
                                signal_name(g + 1), tiers[k], (unsigned long long)t[g][k].bytes);
        }
    }
    struct compact_stats cs;
    compact_get_stats(&cs);
    header(o, "miradb_compaction_backlog_blocks", "gauge",
           "Hot blocks whose newest row is older than --compact-after (at the last pass).");
    for (int g = 0; g < 3; g++) {
        evbuffer_add_printf(o, "miradb_compaction_backlog_blocks{signal=\"%s\"} %llu\n",
                            signal_name(g + 1), (unsigned long long)cs.backlog[g]);
    }
    const struct {
        const char *name, *help;
        double v;
    } c[] = {
        {"miradb_compaction_passes_total", "Compaction passes over the sealed blocks.",
         (double)cs.passes},
        {"miradb_compactions_total", "Cold blocks written by compaction.", (double)cs.compactions},
        {"miradb_compaction_failures_total", "Compactions that failed (the inputs stay).",
         (double)cs.failures},
        {"miradb_compaction_blocks_in_total", "Hot blocks compaction replaced.",
         (double)cs.blocks_in},
        {"miradb_compaction_bytes_in_total", "File bytes of the blocks compaction replaced.",
         (double)cs.bytes_in},
        {"miradb_compaction_bytes_out_total", "File bytes of the cold blocks written.",
         (double)cs.bytes_out},
        {"miradb_compaction_rows_total", "Rows rewritten by compaction.", (double)cs.rows},
        {"miradb_compaction_seconds_total", "Time spent compacting.", (double)cs.ns / 1e9},
        {"miradb_compaction_deferrals_total",
         "Times a merge waited because ingest was short of memory room.", (double)cs.deferrals},
        {"miradb_compaction_deferred_seconds_total", "Time merges spent waiting for room.",
         (double)cs.deferred_ns / 1e9},
        {"miradb_compaction_yields_total",
         "Merges given up (their memory returned) because ingest stayed short of room.",
         (double)cs.yields},
    };
    for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
        header(o, c[k].name, "counter", c[k].help);
        evbuffer_add_printf(o, "%s %.17g\n", c[k].name, c[k].v);
    }
    header(o, "miradb_compaction_peak_bytes", "gauge",
           "The most memory one merge held charged to the budget.");
    evbuffer_add_printf(o, "miradb_compaction_peak_bytes %llu\n",
                        (unsigned long long)cs.peak_bytes);
    header(o, "miradb_compaction_peak_input_bytes", "gauge",
           "The input file bytes of the merge that held the most.");
    evbuffer_add_printf(o, "miradb_compaction_peak_input_bytes %llu\n",
                        (unsigned long long)cs.peak_bytes_in);
    header(o, "miradb_admission_memory_refusals_total", "counter",
           "Admission attempts that found no memory room (a request then waits or is shed).");
    evbuffer_add_printf(o, "miradb_admission_memory_refusals_total %llu\n",
                        (unsigned long long)adm_refusals());
}

static void per_signal_transport(struct evbuffer *o, const char *name, const char *help,
                                 uint64_t v[3][TR_COUNT])
{
    header(o, name, "counter", help);
    for (int g = 0; g < 3; g++) {
        for (int t = 0; t < TR_COUNT; t++) {
            evbuffer_add_printf(o, "%s{signal=\"%s\",transport=\"%s\"} %llu\n", name,
                                signal_name(g + 1), stats_transport_name(t),
                                (unsigned long long)v[g][t]);
        }
    }
}

static void hist_text(struct evbuffer *o, const char *name, const char *label,
                      const struct lathist *h)
{
    const char *sep = label[0] != '\0' ? "," : "";
    uint64_t cum = 0;
    for (int i = 0; i <= LH_BUCKETS; i++) {
        cum += h->n[i];
        if (i < LH_BUCKETS) {
            evbuffer_add_printf(o, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, label, sep,
                                (double)lathist_bound_us(i) / 1e6, (unsigned long long)cum);
        } else {
            evbuffer_add_printf(o, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, label, sep,
                                (unsigned long long)cum);
        }
    }
    const char *open = label[0] != '\0' ? "{" : "", *close = label[0] != '\0' ? "}" : "";
    evbuffer_add_printf(o, "%s_sum%s%s%s %.6f\n%s_count%s%s%s %llu\n", name, open, label, close,
                        (double)h->sum_ns / 1e9, name, open, label, close, (unsigned long long)cum);
}

/* The ack-phase, WAL append and block fsync histograms and ingest's kept
 * caches (server/stats.h, storage/wal.h, storage/block.h). */
static void ack_metrics_text(struct evbuffer *o)
{
    static const char *const names[PH_COUNT] = {"admit", "body",  "decode",
                                                "shard", "reply", "total"};
    struct lathist ph[PH_COUNT];
    uint64_t cache[2] = {0, 0};
    memset(ph, 0, sizeof(ph));
    for (int i = 0; i < iot_count(); i++) {
        const struct io_stats *st = &iot_get(i)->stats;
        for (int p = 0; p < PH_COUNT; p++) {
            lathist_sum(&ph[p], &st->phase[p]);
        }
        cache[0] += __atomic_load_n(&st->cache_bytes[0], __ATOMIC_RELAXED);
        cache[1] += __atomic_load_n(&st->cache_bytes[1], __ATOMIC_RELAXED);
    }
    evbuffer_add_printf(o, "# HELP miradb_ack_phase_seconds Where acknowledged exports' time "
                           "went: admit (waiting for a queue slot and memory), body (reading it), "
                           "decode (gunzip and decode), shard (the shard's queue, WAL write and "
                           "append), reply (back to the I/O thread), total.\n"
                           "# TYPE miradb_ack_phase_seconds histogram\n");
    for (int p = 0; p < PH_COUNT; p++) {
        char label[32];
        snprintf(label, sizeof(label), "phase=\"%s\"", names[p]);
        hist_text(o, "miradb_ack_phase_seconds", label, &ph[p]);
    }
    struct lathist wh;
    memset(&wh, 0, sizeof(wh));
    wal_append_hist(&wh);
    evbuffer_add_printf(o, "# HELP miradb_wal_append_seconds How long WAL appends took (the "
                           "write, and a segment rotation when one was due).\n"
                           "# TYPE miradb_wal_append_seconds histogram\n");
    hist_text(o, "miradb_wal_append_seconds", "", &wh);
    memset(&wh, 0, sizeof(wh));
    blk_fsync_hist(&wh);
    evbuffer_add_printf(o, "# HELP miradb_block_fsync_seconds How long the fsync of a sealed "
                           "block file took.\n"
                           "# TYPE miradb_block_fsync_seconds histogram\n");
    hist_text(o, "miradb_block_fsync_seconds", "", &wh);
    evbuffer_add_printf(o,
                        "# HELP miradb_ingest_cache_bytes Buffers, batches and arenas the "
                        "I/O threads keep for reuse (charged to the memory budget).\n"
                        "# TYPE miradb_ingest_cache_bytes gauge\n"
                        "miradb_ingest_cache_bytes{kind=\"buffers\"} %llu\n"
                        "miradb_ingest_cache_bytes{kind=\"batches\"} %llu\n",
                        (unsigned long long)cache[0], (unsigned long long)cache[1]);
}

static uint64_t trims, trim_ns; /* ops_note_trim */

void ops_note_trim(uint64_t ns)
{
    __atomic_add_fetch(&trims, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&trim_ns, ns, __ATOMIC_RELAXED);
}

void ops_metrics_text(struct evbuffer *o)
{
    struct io_stats s;
    struct shard_stats sh;
    int n = store_shard_count();

    sum_stats(&s);
    per_signal_transport(o, "miradb_otlp_requests_total", "Export requests acknowledged.",
                         s.requests);
    per_signal_transport(o, "miradb_otlp_records_total",
                         "Records acknowledged (log records, spans, metric data points).",
                         s.records);
    per_signal_transport(o, "miradb_otlp_bytes_total",
                         "Request body bytes received, before gunzip.", s.bytes);

    header(o, "miradb_otlp_rejected_records_total", "counter",
           "Records refused inside accepted requests (partial success).");
    for (int g = 0; g < 3; g++) {
        evbuffer_add_printf(o, "miradb_otlp_rejected_records_total{signal=\"%s\"} %llu\n",
                            signal_name(g + 1), (unsigned long long)s.rejected_records[g]);
    }
    header(o, "miradb_otlp_request_errors_total", "counter", "Export requests refused, by reason.");
    for (int r = 0; r < RJ_COUNT; r++) {
        evbuffer_add_printf(o, "miradb_otlp_request_errors_total{reason=\"%s\"} %llu\n",
                            stats_reject_reason_name(r), (unsigned long long)s.rejections[r]);
    }
    header(o, "miradb_promql_unmapped_points_total", "counter",
           "Metric points stored but left out of PromQL, by reason (logged once per metric).");
    for (int k = 0; k < PROMCHECK_COUNT_; k++) {
        evbuffer_add_printf(o, "miradb_promql_unmapped_points_total{reason=\"%s\"} %llu\n",
                            promcheck_reason_name((enum promcheck_reason)k),
                            (unsigned long long)promcheck_count((enum promcheck_reason)k));
    }
    header(o, "miradb_admission_waits_total", "counter",
           "Requests that waited for queue room or memory before admission.");
    evbuffer_add_printf(o, "miradb_admission_waits_total %llu\n",
                        (unsigned long long)s.admit_waits);
    header(o, "miradb_admission_wait_seconds_total", "counter", "Time requests spent waiting.");
    evbuffer_add_printf(o, "miradb_admission_wait_seconds_total %.6f\n",
                        (double)s.admit_wait_ns / 1e9);
    header(o, "miradb_admission_shed_total", "counter",
           "Requests refused (503 / UNAVAILABLE) when the admission wait ran out.");
    evbuffer_add_printf(o, "miradb_admission_shed_total %llu\n", (unsigned long long)s.shed);
    header(o, "miradb_admission_paced_total", "counter",
           "Requests whose admission was delayed a little because the sealer lagged.");
    evbuffer_add_printf(o, "miradb_admission_paced_total %llu\n", (unsigned long long)s.paced);
    header(o, "miradb_admission_paced_seconds_total", "counter", "Total delay paced requests got.");
    evbuffer_add_printf(o, "miradb_admission_paced_seconds_total %.6f\n", (double)s.paced_ns / 1e9);
    ack_metrics_text(o);
    header(o, "miradb_connections_accepted_total", "counter", "Connections accepted.");
    evbuffer_add_printf(o, "miradb_connections_accepted_total %llu\n",
                        (unsigned long long)s.connections_accepted);
    /* miradb_connections_open{listener}: connlim.c, counted at accept and close. */
    header(o, "miradb_memory_budget_bytes", "gauge", "The ingest memory budget.");
    evbuffer_add_printf(o, "miradb_memory_budget_bytes %llu\n", (unsigned long long)adm_budget());
    header(o, "miradb_memory_in_use_bytes", "gauge",
           "Bytes charged to the budget: request bodies, batches, open and sealing blocks, cached "
           "chunks and buffers, seal scratch.");
    evbuffer_add_printf(o, "miradb_memory_in_use_bytes %llu\n", (unsigned long long)adm_in_use());
    /* The process's resident set beside the budget's count: what the budget
     * does not account for shows as the difference (bench/cases/rss.sh). */
    unsigned long long vm_pages = 0, rss_pages = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (statm != NULL) {
        if (fscanf(statm, "%llu %llu", &vm_pages, &rss_pages) != 2) {
            rss_pages = 0;
        }
        fclose(statm);
    }
    header(o, "miradb_process_resident_bytes", "gauge",
           "The daemon's resident memory (RSS), to compare with miradb_memory_in_use_bytes.");
    evbuffer_add_printf(o, "miradb_process_resident_bytes %llu\n",
                        rss_pages * (unsigned long long)sysconf(_SC_PAGESIZE));

    /* Per shard gauges, then per signal sums of the WAL counters. */
    header(o, "miradb_shard_queue_depth", "gauge", "Requests reserved or queued on a shard.");
    for (int g = 1; g <= 3; g++) {
        for (int i = 0; i < n; i++) {
            store_shard_stats(g, i, &sh);
            evbuffer_add_printf(o, "miradb_shard_queue_depth{signal=\"%s\",shard=\"%d\"} %u\n",
                                signal_name(g), i, sh.queue_depth);
        }
    }
    struct {
        const char *name, *type, *help;
        size_t off;
    } const per_sig[] = {
        {"miradb_wal_frames_total", "counter", "WAL frames written.",
         offsetof(struct shard_stats, wal.frames_appended)},
        {"miradb_wal_bytes_total", "counter", "WAL bytes written, frame headers included.",
         offsetof(struct shard_stats, wal.bytes_appended)},
        {"miradb_wal_fsyncs_total", "counter", "WAL fdatasync calls.",
         offsetof(struct shard_stats, wal.fsyncs)},
        {"miradb_wal_replayed_frames_total", "counter", "WAL frames replayed at boot.",
         offsetof(struct shard_stats, wal.frames_replayed)},
        {"miradb_wal_replayed_bytes_total", "counter", "WAL payload bytes replayed at boot.",
         offsetof(struct shard_stats, wal.bytes_replayed)},
        {"miradb_wal_torn_frames_total", "counter", "Torn or corrupt WAL tails truncated at boot.",
         offsetof(struct shard_stats, wal.torn_frames)},
        {"miradb_wal_replay_bad_frames_total", "counter",
         "Intact WAL frames that did not decode at replay (skipped).",
         offsetof(struct shard_stats, replay_bad_frames)},
        {"miradb_wal_disk_bytes", "gauge", "Bytes the WAL segments take on disk now.",
         offsetof(struct shard_stats, wal.disk_bytes)},
        {"miradb_open_block_rows", "gauge", "Rows in the open blocks.",
         offsetof(struct shard_stats, block_rows)},
        {"miradb_open_block_bytes", "gauge", "Memory held by the open blocks.",
         offsetof(struct shard_stats, block_bytes)},
    };
    uint64_t sums[sizeof(per_sig) / sizeof(per_sig[0])][3] = {{0}};
    for (int g = 1; g <= 3; g++) {
        for (int i = 0; i < n; i++) {
            store_shard_stats(g, i, &sh);
            for (size_t k = 0; k < sizeof(per_sig) / sizeof(per_sig[0]); k++) {
                sums[k][g - 1] += *(const uint64_t *)((const char *)&sh + per_sig[k].off);
            }
        }
    }
    for (size_t k = 0; k < sizeof(per_sig) / sizeof(per_sig[0]); k++) {
        header(o, per_sig[k].name, per_sig[k].type, per_sig[k].help);
        for (int g = 0; g < 3; g++) {
            evbuffer_add_printf(o, "%s{signal=\"%s\"} %llu\n", per_sig[k].name, signal_name(g + 1),
                                (unsigned long long)sums[k][g]);
        }
    }
    struct cat_stats cs[3];
    for (int g = 0; g < 3; g++) {
        catalog_get_stats(g + 1, &cs[g]);
    }
    struct {
        const char *name, *type, *help;
        size_t off;
    } const per_cat[] = {
        {"miradb_blocks", "gauge", "Sealed blocks.", offsetof(struct cat_stats, blocks)},
        {"miradb_block_bytes", "gauge", "Bytes of sealed block files.",
         offsetof(struct cat_stats, block_bytes)},
        {"miradb_block_rows", "gauge", "Rows in sealed blocks.", offsetof(struct cat_stats, rows)},
        {"miradb_unsealed_rows", "gauge",
         "Rows not yet in a sealed block: open blocks and blocks being sealed.",
         offsetof(struct cat_stats, unsealed_rows)},
        {"miradb_unsealed_blocks", "gauge", "Open blocks, those being sealed included.",
         offsetof(struct cat_stats, unsealed_blocks)},
        {"miradb_retention_deleted_blocks_total", "counter", "Sealed blocks deleted by retention.",
         offsetof(struct cat_stats, retention_deleted)},
        {"miradb_retention_deleted_bytes_total", "counter", "Bytes deleted by retention.",
         offsetof(struct cat_stats, retention_bytes_deleted)},
        {"miradb_compaction_inputs_removed_at_boot", "gauge",
         "Sealed blocks the boot removed because a cold block already held their rows (a "
         "compaction interrupted between its rename and its inputs' unlink).",
         offsetof(struct cat_stats, cold_inputs_removed)},
    };
    for (size_t k = 0; k < sizeof(per_cat) / sizeof(per_cat[0]); k++) {
        header(o, per_cat[k].name, per_cat[k].type, per_cat[k].help);
        for (int g = 0; g < 3; g++) {
            evbuffer_add_printf(
                o, "%s{signal=\"%s\"} %llu\n", per_cat[k].name, signal_name(g + 1),
                (unsigned long long)*(const uint64_t *)((const char *)&cs[g] + per_cat[k].off));
        }
    }
    cold_metrics(o);
    struct sealer_stats ss;
    sealer_get_stats(&ss);
    struct blk_stats bs;
    blk_get_stats(&bs);
    struct qctx_wait_stats qw;
    qctx_wait_stats(&qw);
    struct oblock_cache_stats oc;
    oblock_cache_get_stats(&oc);
    const struct {
        const char *name, *type, *help;
        double v;
    } plain[] = {
        {"miradb_memory_uncounted_bytes", "gauge",
         "The daemon's resident memory beyond miradb_memory_in_use_bytes (0 when the charges "
         "exceed it), measured every 20 ms: admission leaves it out of what it admits.",
         (double)adm_uncounted()},
        {"miradb_heap_trims_total", "counter",
         "Times freed heap was given back to the system (malloc_trim) because the resident "
         "memory passed the charges by 1/32 of the budget.",
         (double)__atomic_load_n(&trims, __ATOMIC_RELAXED)},
        {"miradb_heap_trim_seconds_total", "counter", "Time those trims took.",
         (double)__atomic_load_n(&trim_ns, __ATOMIC_RELAXED) / 1e9},
        {"miradb_open_block_cache_bytes", "gauge",
         "Chunks of sealed open blocks kept for the next blocks to fill (charged to the memory "
         "budget; emptied after 10 s without a draw or when the budget is short).",
         (double)oc.bytes},
        {"miradb_open_block_chunks_reused_total", "counter",
         "Open-block chunks taken from that cache.", (double)oc.reused},
        {"miradb_open_block_chunks_fresh_total", "counter",
         "Open-block chunks allocated because the cache had none (fresh memory: a page fault "
         "per page on first write).",
         (double)oc.fresh},
        {"miradb_open_block_chunks_dropped_total", "counter",
         "Chunks of a freed open block the cache had no room for.", (double)oc.dropped},
        {"miradb_open_block_chunks_trimmed_total", "counter",
         "Cached chunks freed again (idle, or the memory budget short).", (double)oc.trimmed},
        {"miradb_query_memory_waits_total", "counter",
         "Block loads that waited for room in the memory budget (ingest admission held back "
         "meanwhile; at most 0.2 s per query).",
         (double)qw.room_waits},
        {"miradb_query_memory_wait_seconds_total", "counter", "Time those loads waited.",
         (double)qw.room_wait_ns / 1e9},
        {"miradb_query_shared_waits_total", "counter",
         "Query charges that waited for other queries to release memory (the open queries' "
         "bound).",
         (double)qw.shared_waits},
        {"miradb_query_shared_wait_seconds_total", "counter", "Time those charges waited.",
         (double)qw.shared_wait_ns / 1e9},
        {"miradb_seals_total", "counter", "Open blocks sealed into block files.", (double)ss.seals},
        {"miradb_seal_failures_total", "counter", "Seals that failed (rows stay in the WAL).",
         (double)ss.seal_failures},
        {"miradb_rows_sealed_total", "counter", "Rows written into block files.",
         (double)ss.rows_sealed},
        {"miradb_seal_seconds_total", "counter", "Time spent sealing.", (double)ss.seal_ns / 1e9},
        {"miradb_retention_runs_total", "counter", "Retention passes over the sealed blocks.",
         (double)ss.retention_runs},
        {"miradb_block_tables_verified_total", "counter", "Block tables whose CRC was checked.",
         (double)bs.tables_verified},
        {"miradb_block_bytes_hashed_total", "counter", "Bytes hashed to verify block tables.",
         (double)bs.bytes_hashed},
        {"miradb_verify_cache_hits_total", "counter",
         "Block table and footer verifications skipped by the cache.", (double)bs.cache_hits},
        {"miradb_verify_cache_misses_total", "counter", "Verification cache misses.",
         (double)bs.cache_misses},
        {"miradb_verify_cache_clears_total", "counter", "Times the full cache was cleared.",
         (double)bs.cache_clears},
        {"miradb_blocks_quarantined_total", "counter", "Blocks moved to DATA/quarantine/.",
         (double)(bs.quarantined + cs[0].quarantined_at_boot + cs[1].quarantined_at_boot +
                  cs[2].quarantined_at_boot)},
        {"miradb_block_table_heap_bytes", "gauge",
         "Heap the sealed blocks hold outside their mappings, charged to the memory budget: "
         "loaded tables (decoded columns, inflated zstd tables, rebuilt attribute lists and "
         "metric detail, time columns; a block's tables load on its first read) and decoded "
         "stream indexes.",
         (double)bs.table_heap_bytes},
        {"miradb_block_table_heap_cap_bytes", "gauge",
         "Above this, the tables of the least recently read blocks no query holds are dropped "
         "(a quarter of --memory-budget).",
         (double)catalog_table_cap()},
        {"miradb_block_tables_dropped_total", "counter",
         "Times a sealed block's loaded tables were dropped to stay under the cap.",
         (double)catalog_tables_dropped()},
        {"miradb_block_page_drops_total", "counter",
         "Times a sealed block's file pages were dropped from the process (a query done with "
         "it, its page window full, a seal); the page cache keeps them.",
         (double)blk_pages_dropped()},
        {"miradb_query_memory_bytes", "gauge",
         "Memory the running queries hold by their own count (series, candidates, results; "
         "each bounded by --query-memory).",
         (double)qctx_memory_held()},
        {"miradb_query_page_window_bytes", "gauge",
         "File bytes of the sealed blocks the running queries read through their mappings, "
         "charged to the memory budget (bounded by the table cap, pages dropped past it).",
         (double)qctx_window_bytes()},
    };
    for (size_t k = 0; k < sizeof(plain) / sizeof(plain[0]); k++) {
        header(o, plain[k].name, plain[k].type, plain[k].help);
        evbuffer_add_printf(o, "%s %.17g\n", plain[k].name, plain[k].v);
    }
    struct diskfree_stats df;
    diskfree_get_stats(&df);
    const struct {
        const char *name, *type, *help;
        uint64_t v;
    } disk[] = {
        {"miradb_disk_free_bytes", "gauge",
         "Free bytes on the data directory's filesystem (statvfs, checked every second).",
         df.free_bytes},
        {"miradb_disk_min_free_bytes", "gauge",
         "--min-free-bytes: exports are refused below this free space (0: only when full).",
         df.min_free},
        {"miradb_disk_low", "gauge", "1 while free space is below --min-free-bytes.",
         df.low ? 1u : 0u},
        {"miradb_disk_low_refusals_total", "counter",
         "Exports refused because free space was below --min-free-bytes.", df.refusals},
    };
    for (size_t k = 0; k < sizeof(disk) / sizeof(disk[0]); k++) {
        header(o, disk[k].name, disk[k].type, disk[k].help);
        evbuffer_add_printf(o, "%s %llu\n", disk[k].name, (unsigned long long)disk[k].v);
    }
    header(o, "miradb_ready", "gauge",
           "1 once WAL replay is done, while not stopping and free space is above the minimum.");
    evbuffer_add_printf(o, "miradb_ready %d\n", ops_ready() ? 1 : 0);
    header(o, "miradb_build_info", "gauge", "Always 1; the labels say which build runs.");
    evbuffer_add_printf(o, "miradb_build_info{version=\"%s\",commit=\"%s\"} 1\n", MIRADB_VERSION,
                        version_commit());
    query_metrics_text(o);
    prom_metrics_text(o);
    tls_metrics_text(o);
    auth_metrics_text(o);
    origin_metrics_text(o);
}
