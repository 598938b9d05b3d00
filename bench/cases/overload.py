"""overload case: twice the sustainable rate, open loop.

1. The sustainable rate: a fresh daemon, closed loop, 1,000-record log
   requests; the acknowledged requests/s of the first of 16, 4 and 1
   connections that runs without a failure.
2. A fresh daemon (default memory budget, --admit-wait 1000 so the wait
   shows within a short run) takes an open-loop run at twice that rate with
   enough concurrent requests that the client does not throttle itself
   (gRPC: 24 connections x 32 streams; HTTP: 384 connections).
3. Checks: every refused request got a retryable answer (HTTP 429/503, gRPC
   UNAVAILABLE) and none went unanswered; the admission wait holds (no
   refusal later than the wait plus 500 ms of slack, server-side mean wait
   within the wait); peak RSS (VmHWM) within the memory budget; and every
   acknowledged record is present afterwards (/metrics rows, once the
   sealer has caught up, equal the records otlp-load saw acknowledged).

    python3 bench/cases/overload.py BUILD_DIR
Runs gRPC and HTTP/protobuf; 6 s at the overload rate each (BENCH_QUICK=1:
gRPC only, 3 s).
"""

import sys

import benchlib as bl

ADMIT_WAIT_MS = 1000
SLACK_MS = 500
BUDGET = 256 << 20  # the default --memory-budget
RETRYABLE = {"http:429", "http:503", "grpc:14"}


def sustainable(build, proto, secs):
    """The closed-loop acknowledged rate of the first of 16, 4 and 1 connections that runs
    without a single failure (a run with errors measures no capacity); the last run's rate,
    flagged, when none is clean."""
    tried = []
    for conns in (16, 4, 1):
        data = bl.fresh_data("overload")
        d = bl.Daemon(bl.miradb_bin(build), data, [], name="overload").start()
        try:
            rep = bl.load(build, d.port(proto), "logs", protocol=proto, connections=conns,
                          duration=secs, records=1000)
        finally:
            d.stop()
        bl.remove_data(data)
        fails = rep["requests"]["failed"] + rep["requests"]["unanswered"]
        tried.append({"connections": conns, "requests_per_s": round(rep["requests_per_s"], 1),
                      "requests_failed": fails,
                      "failed_by_status": rep["requests"]["failed_by_status"]})
        if fails == 0:
            break
    return {"requests_per_s": rep["requests_per_s"], "records_per_s": rep["records_per_s"],
            "connections": conns, "clean": fails == 0, "tried": tried}


def overload(build, proto, rate, secs):
    data = bl.fresh_data("overload")
    d = bl.Daemon(bl.miradb_bin(build), data, ["--admit-wait", str(ADMIT_WAIT_MS)],
                  name="overload").start()
    try:
        if proto == "grpc":
            conns, streams = 24, 32
        else:
            conns, streams = 384, None
        rep = bl.load(build, d.port(proto), "logs", protocol=proto, connections=conns,
                      streams=streams, duration=secs, records=1000, rate=rate,
                      server_pid=d.pid, timeout=60)
        rows, settle_s, m = bl.settle(d, "logs", rep["records"]["acknowledged"])
    finally:
        status = d.stop()
    bl.remove_data(data)
    return rep, rows, settle_s, m, status, conns * (streams or 1)


def one(build, proto, secs):
    base = sustainable(build, proto, 3 if not bl.QUICK else 2)
    r_sus = base["requests_per_s"]
    rate = 2 * r_sus
    rep, rows, settle_s, m, status, slots = overload(build, proto, rate, secs)
    s = bl.summary(rep)
    fails = rep["requests"]["failed_by_status"]
    nonretry = {k: v for k, v in fails.items() if k not in RETRYABLE}
    waits = m.get("miradb_admission_waits_total", 0)
    wait_s = m.get("miradb_admission_wait_seconds_total", 0)
    due = rate * rep["issuing_s"]
    ref_max = s["refusal_max_ms"]
    out = {
        "sustainable": base,
        "rate_requests_per_s": round(rate, 1),
        "concurrent_slots": slots,
        "requests_due": round(due),
        "client_kept_up": rep["requests"]["sent"] >= 0.95 * due,
        "run": s,
        "goodput_vs_sustainable": round(rep["records_per_s"] / base["records_per_s"], 3)
        if base["records_per_s"] else None,
        "admission_waits": int(waits),
        "admission_mean_wait_ms": round(wait_s / waits * 1e3, 1) if waits else None,
        "admission_shed": int(m.get("miradb_admission_shed_total", 0)),
        "refused_overloaded": int(m.get('miradb_otlp_request_errors_total{reason="overloaded"}',
                                        0)),
        "nonretryable_failures": nonretry,
        "rows_after": rows,
        "seal_catchup_s": round(settle_s, 2),
        "daemon_exit": status,
    }
    # Refusal latency is measured from the scheduled send time. When the
    # client could not keep up (HTTP/1.1: one request in flight per
    # connection, so due requests queue in the client), it includes that
    # client-side queueing and says nothing about the server's wait; the
    # server's own mean wait is then the measure.
    checks = {
        "shed_answers_retryable": not nonretry and rep["requests"]["unanswered"] == 0,
        "admission_wait_holds": (ref_max is None or ref_max <= ADMIT_WAIT_MS + SLACK_MS
                                 or not out["client_kept_up"])
        and (not waits or wait_s / waits * 1e3 <= ADMIT_WAIT_MS),
        "peak_rss_within_budget": (s["peak_rss_bytes"] or 0) <= BUDGET,
        "acked_records_present": rows == rep["records"]["acknowledged"],
        "overload_reached": s["requests_failed"] > 0 or waits > 0,
        "sustainable_rate_clean": base["clean"],
    }
    out["checks"] = checks
    return out


def main():
    build = bl.build_dir(sys.argv)
    secs = 3 if bl.QUICK else 6
    protos = ["grpc"] if bl.QUICK else ["grpc", "http/protobuf"]
    res = {"case": "overload", "quick": bl.QUICK, "signal": "logs",
           "records_per_request": 1000, "admit_wait_ms": ADMIT_WAIT_MS,
           "memory_budget_bytes": BUDGET, "seconds": secs, "loop": "open",
           "latency_from": "scheduled send time"}
    ok = True
    for p in protos:
        key = "grpc" if p == "grpc" else "http"
        bl.log("overload %s" % key)
        try:
            r = one(build, p, secs)
        except (RuntimeError, OSError) as e:
            res[key] = {"error": str(e)[:400]}
            ok = False
            continue
        res[key] = r
        ok = ok and all(r["checks"].values())
    res["machine"] = bl.machine()
    bl.emit(res)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
