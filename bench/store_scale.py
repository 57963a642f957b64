#!/usr/bin/env python3
"""Issue 16.4 on the fleet-day store: how long each view of `otelprof serve` takes on a 1 h
window and on the whole day, cold start, and the store's size against the OTLP it received.

    cargo run --release -p otelprof-store --example bench_store -- --otlp-only --out /tmp/fleet
    python3 bench/store_scale.py --otelprof target/release/otelprof --otlp /tmp/fleet \
        --baseline /path/to/main/otelprof --work /tmp/fleet-bench

The store is made from the generator's OTLP files (hard links, so the generator's copy stays):
`serve` converts and compacts it in its first maintenance pass (timed here), then is started
again cold, and every view is asked for through its HTTP API, `--runs` times each, median
reported. The baseline build reads the same OTLP files (a copy of the store before
conversion), as main does; both in one run, never at the same time.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request

DAY = "2025-01-31"
HOUR = ("2025-01-31T12:00:00Z", "2025-01-31T13:00:00Z")
SHIFTED = ("2025-01-31T11:30:00Z", "2025-01-31T12:30:00Z")
WHOLE = ("2025-01-31T00:00:00Z", "2025-02-01T00:00:00Z")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


class Serve:
    def __init__(self, binary, store, log):
        self.ui = free_port()
        self.log = open(log, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [binary, "serve", "--store", store, "--ui", f"127.0.0.1:{self.ui}",
             "--grpc", f"127.0.0.1:{free_port()}", "--http", f"127.0.0.1:{free_port()}"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def get(self, endpoint, params):
        url = f"http://127.0.0.1:{self.ui}/api/{endpoint}?" + urllib.parse.urlencode(params)
        t = time.monotonic()
        with urllib.request.urlopen(url, timeout=600) as r:
            body = r.read()
        return time.monotonic() - t, body

    def wait_ready(self):
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/", timeout=60) as r:
                    r.read()
                return time.monotonic() - self.started
            except OSError:
                if self.proc.poll() is not None:
                    sys.exit("serve exited; see its log")
                time.sleep(0.02)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def views(window):
    frm, to = window
    t = {"from": frm, "to": to}
    return [
        ("top", "top", t),
        ("top by endpoint", "top", {**t, "by": "span_name"}),
        ("timeline", "timeline", t),
        ("traces", "traces", t),
    ]


def compares(window):
    """The Compare view of the hour before the window against the window (1 h), or of
    version 1.0 against 2.0 (the day: 1.0 ran its first half)."""
    frm, to = window
    if window == WHOLE:
        return [("compare 1.0 -> 2.0", "diff", {"from": frm, "to": to,
                                                "base": "service.version=1.0",
                                                "head": "service.version=2.0"})]
    before = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(
        time.mktime(time.strptime(frm, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone - 3600))
    return [("compare previous hour", "diff", {"base": "", "head": "",
                                               "base_from": before, "base_to": frm,
                                               "head_from": frm, "head_to": to})]


def measure(serve, runs):
    rows = {}
    for label, window in (("1 h on the hour", HOUR), ("1 h across hours", SHIFTED),
                          ("24 h", WHOLE)):
        for name, endpoint, params in views(window) + compares(window):
            times = []
            for _ in range(runs):
                dt, body = serve.get(endpoint, params)
                json.loads(body)
                times.append(dt)
            rows[(label, name)] = (statistics.median(times), times[0])
    for name in ("instances", "values"):
        times = [serve.get(name, {})[0] for _ in range(runs)]
        rows[("store", name)] = (statistics.median(times), times[0])
    return rows


def rss_mib(pid):
    """The resident memory of process `pid` (MiB), from /proc."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--otelprof", default="target/release/otelprof")
    ap.add_argument("--baseline", help="otelprof of main before the change")
    ap.add_argument("--otlp", required=True, help="bench_store --otlp-only output")
    ap.add_argument("--work", default="/tmp/fleet-bench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--converted", help="measure this store, converted already (no first "
                    "pass, no baseline): its columnar store and what profiles/ still holds")
    a = ap.parse_args()
    if a.converted:
        s = Serve(a.otelprof, a.converted, os.path.join(a.converted, "..", "serve-measure.log"))
        ready = s.wait_ready()
        first_answer, _ = s.get("top", {"from": HOUR[0], "to": HOUR[1]})
        new = measure(s, a.runs)
        rss = rss_mib(s.proc.pid)
        s.stop()
        print(f"store: {dir_bytes(a.converted):,} bytes")
        print(f"cold start: UI ready {ready:.2f} s, first 1 h top {first_answer:.2f} s")
        print(f"serve's resident memory after the views: {rss:.0f} MiB")
        print("| window | view | median (s) | first of the runs (s) |")
        print("|---|---|---|---|")
        for key, (t, first) in new.items():
            print(f"| {key[0]} | {key[1]} | {t:.3f} | {first:.3f} |")
        return

    shutil.rmtree(a.work, ignore_errors=True)
    new_store = os.path.join(a.work, "new")
    base_store = os.path.join(a.work, "base")
    os.makedirs(new_store)
    os.makedirs(base_store)
    src = os.path.join(a.otlp, "profiles")
    subprocess.run(["cp", "-al", src, os.path.join(new_store, "profiles")], check=True)
    subprocess.run(["cp", "-al", src, os.path.join(base_store, "profiles")], check=True)
    otlp_bytes = dir_bytes(src)

    # First start: converts the day and compacts it in the background (timed to the log line).
    log = os.path.join(a.work, "serve-first.log")
    s = Serve(a.otelprof, new_store, log)
    s.wait_ready()
    while "hours compacted" not in open(log).read():
        if s.proc.poll() is not None:
            sys.exit("serve exited during its first pass")
        time.sleep(0.5)
    first_pass = time.monotonic() - s.started
    s.stop()
    print(open(log).read().strip().splitlines()[-1])
    store_bytes = dir_bytes(new_store)

    # Cold start (page cache dropped when allowed), then every view.
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        cold = "page cache dropped"
    except OSError:
        cold = "page cache not dropped (not root)"
    s = Serve(a.otelprof, new_store, os.path.join(a.work, "serve.log"))
    ready = s.wait_ready()
    first_answer, _ = s.get("top", {"from": HOUR[0], "to": HOUR[1]})
    new = measure(s, a.runs)
    s.stop()

    base = None
    if a.baseline:
        s = Serve(a.baseline, base_store, os.path.join(a.work, "serve-base.log"))
        s.wait_ready()
        base = measure(s, a.runs)
        s.stop()

    print(f"\nstore: {store_bytes:,} bytes; OTLP received {otlp_bytes:,} bytes "
          f"(ratio {store_bytes / otlp_bytes:.3f})")
    print(f"first pass (convert + compact the day): {first_pass:.1f} s")
    print(f"cold start ({cold}): UI ready {ready:.2f} s, first 1 h top {first_answer:.2f} s")
    print("\n| window | view | this build (s) |" + (" baseline (s) | ratio |" if base else ""))
    print("|---|---|---|" + ("---|---|" if base else ""))
    for key, (t, _) in new.items():
        line = f"| {key[0]} | {key[1]} | {t:.3f} |"
        if base:
            b = base[key][0]
            line += f" {b:.3f} | {t / b:.3f} |"
        print(line)


if __name__ == "__main__":
    main()
