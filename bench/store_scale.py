#!/usr/bin/env python3
"""Issue 16.4 on the fleet-day store: how long each view of `otelprof serve` takes on a 1 h
window and on the whole day, cold start, and the store's size against the OTLP it received.

    cargo run --release -p otelprof-store --example bench_store -- --otlp-only --out /tmp/fleet
    python3 bench/store_scale.py --otelprof target/release/otelprof --otlp /tmp/fleet \
        --baseline /path/to/main/otelprof --work /tmp/fleet-bench

`--s3` serves the converted day from an S3 API server on loopback instead (moto, from the
test venv: `--python`): the store is uploaded to a bucket, `serve --store s3://…` reads it
through its bounded cache (`--cache-size`), and every view also reports the bytes it fetched
from the bucket, on its first run (cold cache) and on the later ones (warm).

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


def bytes_fetched(log, offset):
    """The bytes fetched from a bucket, by OTELPROF_BUCKET_STATS's lines past `offset`."""
    total = 0
    with open(log, "rb") as f:
        f.seek(offset)
        for line in f.read().decode("utf-8", "replace").splitlines():
            if " fetched (" in line:
                total += int(line.split(" fetched (")[1].split(" ")[0])
    return total


class Serve:
    def __init__(self, binary, store, log, extra=(), env=None):
        self.ui = free_port()
        self.log_path = log
        self.log = open(log, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [binary, "serve", "--store", store, "--ui", f"127.0.0.1:{self.ui}",
             "--grpc", f"127.0.0.1:{free_port()}", "--http", f"127.0.0.1:{free_port()}",
             *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.fetched = []

    def get(self, endpoint, params):
        url = f"http://127.0.0.1:{self.ui}/api/{endpoint}?" + urllib.parse.urlencode(params)
        seen = os.path.getsize(self.log_path)
        t = time.monotonic()
        with urllib.request.urlopen(url, timeout=600) as r:
            body = r.read()
        dt = time.monotonic() - t
        self.fetched.append(bytes_fetched(self.log_path, seen))
        return dt, body

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


def measure(serve, runs, fetches=None):
    """Each view's median and first time; `fetches` gets each view's bytes fetched from a
    bucket, on the first run and on the later ones together."""
    fetches = {} if fetches is None else fetches
    rows = {}
    for label, window in (("1 h on the hour", HOUR), ("1 h across hours", SHIFTED),
                          ("24 h", WHOLE)):
        for name, endpoint, params in views(window) + compares(window):
            times = []
            serve.fetched = []
            for _ in range(runs):
                dt, body = serve.get(endpoint, params)
                json.loads(body)
                times.append(dt)
            rows[(label, name)] = (statistics.median(times), times[0])
            fetches[(label, name)] = (serve.fetched[0], sum(serve.fetched[1:]))
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


MOTO_BUCKET = "otelprof-bench"

UPLOAD = """
import os, sys, boto3
from concurrent.futures import ThreadPoolExecutor
s3 = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id="test",
                  aws_secret_access_key="test", region_name="us-east-1")
s3.create_bucket(Bucket=sys.argv[2])
root = sys.argv[3]
files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
         if not os.path.relpath(os.path.join(d, f), root).startswith(".")]
with ThreadPoolExecutor(8) as pool:
    list(pool.map(lambda p: s3.upload_file(p, sys.argv[2], "fleet/" + os.path.relpath(p, root)),
                  files))
print(len(files))
"""


def measure_s3(a, store):
    """The converted `store` served from moto on loopback: each view's time and bytes fetched."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    moto = subprocess.Popen([a.python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        t = time.monotonic()
        n = subprocess.run([a.python, "-c", UPLOAD, endpoint, MOTO_BUCKET, store], check=True,
                           capture_output=True, text=True).stdout.strip()
        print(f"uploaded {n} objects ({dir_bytes(store):,} bytes) to moto in "
              f"{time.monotonic() - t:.1f} s")
        env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="test",
                   AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1", AWS_ALLOW_HTTP="true",
                   OTELPROF_BUCKET_STATS="1", XDG_CACHE_HOME=os.path.join(a.work, "xdg"))
        cache = os.path.join(a.work, "s3-cache")
        shutil.rmtree(cache, ignore_errors=True)
        url = f"s3://{MOTO_BUCKET}/fleet"
        s = Serve(a.otelprof, url, os.path.join(a.work, "serve-s3.log"),
                  ["--cache", cache, "--cache-size", a.cache_size], env)
        ready = s.wait_ready()
        settle_maintenance(os.path.join(a.work, "xdg"))
        fetches = {}
        rows = measure(s, a.runs, fetches)
        s.stop()
    finally:
        moto.terminate()
        moto.wait()
    print(f"served from {url} on moto: UI ready {ready:.2f} s; cache {a.cache_size}, "
          f"{dir_bytes(cache):,} bytes after the views")
    print("| window | view | median (s) | first of the runs (s) | bytes fetched, first run "
          "| bytes fetched, later runs |")
    print("|---|---|---|---|---|---|")
    for key, (t, first) in rows.items():
        cold, warm = fetches.get(key, (0, 0))
        print(f"| {key[0]} | {key[1]} | {t:.3f} | {first:.3f} | {cold:,} | {warm:,} |")


def settle_maintenance(xdg):
    """Waits until serve's own maintenance (the lease holder's first pass copies the whole
    store into a working directory under XDG_CACHE_HOME) has stopped fetching, so that the
    views are timed without it."""
    last, still = -1, 0
    while still < 4:
        now = dir_bytes(xdg)
        still = still + 1 if now == last else 0
        last = now
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--otelprof", default="target/release/otelprof")
    ap.add_argument("--baseline", help="otelprof of main before the change")
    ap.add_argument("--otlp", required=True, help="bench_store --otlp-only output")
    ap.add_argument("--work", default="/tmp/fleet-bench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--converted", help="measure this store, converted already (no first "
                    "pass, no baseline): its columnar store and what profiles/ still holds")
    ap.add_argument("--s3", action="store_true", help="serve the converted store from moto "
                    "(S3 API) on loopback; report the bytes each view fetches")
    ap.add_argument("--python", default="target/otlp-venv/bin/python",
                    help="a Python with moto[server] and boto3 (--s3)")
    ap.add_argument("--cache-size", default="2GiB", help="serve's --cache-size (--s3)")
    a = ap.parse_args()
    if a.s3 and a.converted:
        os.makedirs(a.work, exist_ok=True)
        measure_s3(a, a.converted)
        return
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
    if a.s3:
        measure_s3(a, new_store)
        return

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
