"""benchlib - what the bench cases share: the daemon under test, otlp-load,
/metrics, data directories on a real disk, and one-line JSON output.

Every case prints exactly one JSON object on one line on stdout; progress
and diagnostics go to stderr. Everything is bounded in time: each child
process gets a deadline, and a daemon started here is killed (SIGKILL via
PR_SET_PDEATHSIG, and again at exit) if the case dies first.

Environment:
  BENCH_QUICK=1        trimmed grids and shorter runs (a smoke run)
  MIRADB_BIN           daemon binary (default BUILD/miradb)
  BENCH_LOAD_BIN       load generator (default BUILD/otlp-load)
  BENCH_DATA           parent of the data directories (default bench/data;
                       refused when it is tmpfs)
"""

import atexit
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")

_children = []


def log(msg):
    sys.stderr.write("bench: %s\n" % msg)
    sys.stderr.flush()


def emit(obj):
    """Prints the case's one JSON object on one line."""
    sys.stdout.write(json.dumps(obj, separators=(",", ":"), sort_keys=False) + "\n")
    sys.stdout.flush()


def build_dir(argv):
    b = argv[1] if len(argv) > 1 else "build"
    return b if os.path.isabs(b) else os.path.join(ROOT, b)


def miradb_bin(build):
    return os.environ.get("MIRADB_BIN") or os.path.join(build, "miradb")


def load_bin(build):
    return os.environ.get("BENCH_LOAD_BIN") or os.path.join(build, "otlp-load")


# ---------------------------------------------------------------- machine


def fs_type(path):
    """The filesystem type of |path| as stat -f names it ("ext2/ext3", "tmpfs", ...)."""
    try:
        out = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return None


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    disk = "unknown"
    try:
        dev = subprocess.run(["df", "--output=source", data_root()], capture_output=True,
                             text=True, timeout=10).stdout.split()[-1]
        name = os.path.basename(dev)
        with open("/sys/block/%s/queue/rotational" % re.sub(r"\d+$", "", name)) as f:
            disk = "%s (%s, rotational=%s)" % (dev, name, f.read().strip())
    except (OSError, IndexError, subprocess.TimeoutExpired):
        pass
    return {"nproc": os.cpu_count(), "cpu_model": model, "data_fs": fs_type(data_root()),
            "data_disk": disk, "loadavg_1m": loadavg(),
            "shared": "other sessions build and test on this machine at the same time"}


# ---------------------------------------------------------------- data dirs


def data_root():
    d = os.environ.get("BENCH_DATA") or os.path.join(ROOT, "bench", "data")
    os.makedirs(d, exist_ok=True)
    return d


def fresh_data(name):
    """An empty data directory bench/data/NAME on a real disk (never tmpfs)."""
    d = os.path.join(data_root(), name)
    subprocess.run(["rm", "-rf", d], check=True, timeout=120)
    os.makedirs(d)
    t = fs_type(d)
    if t in ("tmpfs", "ramfs"):
        raise SystemExit("bench: %s is on %s; durability and replay figures would mean "
                         "nothing (set BENCH_DATA to a directory on a disk)" % (d, t))
    return d


def remove_data(d):
    subprocess.run(["rm", "-rf", d], timeout=120)


def du_bytes(d):
    total = 0
    for dirpath, _, files in os.walk(d):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


# ---------------------------------------------------------------- children


def _pdeathsig():
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _kill_children():
    for p in _children:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass


atexit.register(_kill_children)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def run_json(argv, timeout):
    """Runs |argv| with a deadline and returns (exit status, parsed JSON of its stdout or None,
    stderr text)."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           preexec_fn=_pdeathsig)
    except subprocess.TimeoutExpired:
        return -1, None, "timed out after %ss" % timeout
    try:
        return p.returncode, json.loads(p.stdout), p.stderr
    except ValueError:
        return p.returncode, None, p.stderr + p.stdout[-2000:]


def load(build, port, signal_, protocol="grpc", connections=4, duration=None, requests=None,
         records=1000, rate=None, streams=None, server_pid=None, seed=1, pool=32,
         timeout=30, extra=(), deadline=None):
    """One otlp-load run; returns its report (dict). Raises on a run that printed nothing."""
    argv = [load_bin(build), "--endpoint", "127.0.0.1:%d" % port, "--protocol", protocol,
            "--signal", signal_, "--connections", str(connections), "--records-per-request",
            str(records), "--seed", str(seed), "--pool", str(pool), "--timeout", str(timeout)]
    bound = 0
    if duration is not None:
        argv += ["--duration", str(duration)]
        bound += duration
    if requests is not None:
        argv += ["--requests", str(requests)]
    if duration is None and requests is None:
        raise ValueError("an unbounded load run")
    if rate is not None:
        argv += ["--rate", "%.3f" % rate]
    if streams is not None:
        argv += ["--streams-per-connection", str(streams)]
    if server_pid is not None:
        argv += ["--server-pid", str(server_pid)]
    argv += list(extra)
    # Deadline: the run's own bound, pool building, the answer timeout, slack.
    limit = deadline or (bound + timeout + 120 if duration is not None else 600)
    rc, j, err = run_json(argv, limit)
    if j is None:
        raise RuntimeError("otlp-load %s printed no report (status %s): %s"
                           % (" ".join(argv[1:]), rc, err.strip()[-500:]))
    return j


# ---------------------------------------------------------------- the daemon


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (for peers that need a port number)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def http_get(port, path, timeout=10):
    """(status, body bytes); status 0 when the connection failed."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                    timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


class Daemon:
    """`miradb serve` on 127.0.0.1 with OS-picked ports and a data directory.

    t_spawn..t_ready is the wall time from fork to the first 200 from /ready
    (polled every 2 ms): the boot time as a client sees it."""

    def __init__(self, binary, data, args=(), name="miradb"):
        self.binary = binary
        self.data = data
        self.args = list(args)
        self.log_path = os.path.join(data_root(), name + ".log")
        self.proc = None
        self.grpc_port = self.http_port = None
        self.boot_s = None

    def start(self, deadline=120):
        logf = open(self.log_path, "w")
        argv = [self.binary, "serve", "--data", self.data, "--grpc-listen", "127.0.0.1:0",
                "--http-listen", "127.0.0.1:0"] + self.args
        t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=logf,
                                     preexec_fn=_pdeathsig)
        logf.close()
        _children.append(self.proc)
        while self.http_port is None:
            self._read_ports()
            self._check_alive(t0, deadline, "listening")
            if self.http_port is None:
                time.sleep(0.002)
        while True:
            st, _ = http_get(self.http_port, "/ready", timeout=5)
            if st == 200:
                break
            self._check_alive(t0, deadline, "/ready")
            time.sleep(0.002)
        self.boot_s = time.monotonic() - t0
        return self

    def logged_boot_ms(self):
        """boot_ms from the daemon's own ready line (its main loop ticks every 20 ms, so it
        may log after /ready already answers; read it after stop())."""
        m = re.search(r"event=ready .*boot_ms=(\d+)", self.read_log())
        return int(m.group(1)) if m else None

    def _check_alive(self, t0, deadline, what):
        if self.proc.poll() is not None:
            raise RuntimeError("miradb exited (%s) before %s:\n%s"
                               % (self.proc.returncode, what, self.read_log()[-2000:]))
        if time.monotonic() - t0 > deadline:
            self.kill()
            raise RuntimeError("miradb: no %s within %ss" % (what, deadline))

    def read_log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def _read_ports(self):
        m = re.search(r"event=listening grpc=127\.0\.0\.1:(\d+) http=127\.0\.0\.1:(\d+)",
                      self.read_log())
        if m:
            self.grpc_port, self.http_port = int(m.group(1)), int(m.group(2))

    def listening_line(self):
        m = re.search(r"event=listening (.*)", self.read_log())
        return m.group(1) if m else ""

    @property
    def pid(self):
        return self.proc.pid

    def port(self, protocol):
        return self.grpc_port if protocol == "grpc" else self.http_port

    def metrics(self):
        """/metrics as {series text: value}."""
        st, body = http_get(self.http_port, "/metrics", timeout=30)
        if st != 200:
            raise RuntimeError("/metrics answered %s" % st)
        out = {}
        for line in body.decode("utf-8", "replace").splitlines():
            if not line or line.startswith("#"):
                continue
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
        return out

    def stop(self, timeout=60):
        """SIGTERM and wait; returns the exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


SIGNALS = ("logs", "traces", "metrics")


def rows(metrics, signal_):
    """Rows the daemon holds for a signal: open blocks plus sealed blocks."""
    return int(metrics.get('miradb_open_block_rows{signal="%s"}' % signal_, 0)
               + metrics.get('miradb_block_rows{signal="%s"}' % signal_, 0))


def proc_cpu_s(pid):
    """User + system CPU seconds of process |pid| (all threads) from /proc."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def acked_records(metrics, signal_):
    """Records the daemon acknowledged for a signal over every transport."""
    return int(metric_sum(metrics, "miradb_otlp_records_total", 'signal="%s"' % signal_))


def settle(d, signal_, want=None, deadline=120.0):
    """Waits until the rows the daemon holds for |signal_| (open + sealed blocks) equal |want|
    (default: the records it acknowledged). Open blocks handed to the sealer are counted in
    neither gauge until their seal is published, so right after a run the sum lags while the
    sealer catches up. Returns (rows, seconds waited, metrics); rows != want after the
    deadline."""
    t0 = time.monotonic()
    while True:
        m = d.metrics()
        target = acked_records(m, signal_) if want is None else want
        r = rows(m, signal_)
        if r == target or time.monotonic() - t0 > deadline:
            return r, time.monotonic() - t0, m
        time.sleep(0.1)


def metric_sum(metrics, name, label=None):
    """Sum of every series of |name| (any labels)."""
    total = 0.0
    for k, v in metrics.items():
        if (k == name or k.startswith(name + "{")) and (label is None or label in k):
            total += v
    return total


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return None
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def summary(rep):
    """The figures of an otlp-load report a case keeps, with their counts."""
    srv = rep.get("server", {})
    lat = rep.get("ack_latency_ms", {})
    return {
        "requests_sent": rep["requests"]["sent"],
        "requests_acked": rep["requests"]["acknowledged"],
        "requests_failed": rep["requests"]["failed"],
        "failed_by_status": rep["requests"]["failed_by_status"],
        "unanswered": rep["requests"]["unanswered"],
        "records_acked": rep["records"]["acknowledged"],
        "elapsed_s": round(rep["elapsed_s"], 3),
        "records_per_s": round(rep["records_per_s"]),
        "server_cores_busy": round(srv["cores_busy"], 3) if "cores_busy" in srv else None,
        "records_per_cpu_s": round(srv["records_per_cpu_s"]) if "records_per_cpu_s" in srv
        else None,
        "peak_rss_bytes": srv.get("peak_rss_bytes"),
        "ack_samples": lat.get("samples", 0),
        "ack_p50_ms": lat.get("p50"),
        "ack_p99_ms": lat.get("p99"),
        "ack_max_ms": lat.get("max"),
        "refusal_samples": rep.get("refusal_latency_ms", {}).get("samples", 0),
        "refusal_p50_ms": rep.get("refusal_latency_ms", {}).get("p50"),
        "refusal_max_ms": rep.get("refusal_latency_ms", {}).get("max"),
        "client_cores_busy": round(rep["client"]["cores_busy"], 3),
    }


def payload_shape(rep):
    p = rep.get("payload", {})
    keep = ("records_per_request", "request_bytes_avg", "attrs_per_record_avg",
            "log_body_bytes_avg")
    return {k: (round(p[k], 1) if isinstance(p[k], float) else p[k]) for k in keep if k in p}
