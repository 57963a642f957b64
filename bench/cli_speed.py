#!/usr/bin/env python3
"""Speed of `otelprof receive`, `top` and `diff` on stores of growing size.

For each size N (profiles per side): a fresh `otelprof receive` store, filled over OTLP/gRPC
by bench/cli_load.rs with N profiles of version 1.0 then N of version 2.0 (10-second CPU
profiles of a simulated busy service, ~2,000 distinct stacks each; N = 360 is one hour per
side), timing the receiver's exports/s; then `otelprof top`, `top --by span_name` and
`diff --base service.version=1.0 --head service.version=2.0` on the store, each run
--runs times (median wall, CPU, peak RSS). Every diff must name the method the generator
made hotter in 2.0, or the benchmark fails.

    cargo build --release -p otelprof-cli --bin otelprof --example cli_load
    python3 bench/cli_speed.py                 # sizes 90,180,360 per side, ~4 min
    python3 bench/cli_speed.py --sizes 360 --runs 5
    # the same, against another build of otelprof in the same run (ratios = this build / it):
    python3 bench/cli_speed.py --sizes 360 --runs 5 --baseline /path/to/other/otelprof

Markdown goes to stdout, progress to stderr. Method, goals and current figures: BENCHMARKS.md,
"Reading and receiving speed"; every run goes into a dated report in bench/reports/.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OTELPROF = os.path.join(ROOT, "target/release/otelprof")
LOAD = os.path.join(ROOT, "target/release/examples/cli_load")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def timed(cmd):
    """Runs cmd; returns (wall s, cpu s, max rss MiB, stdout, exit code)."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = b"", b""
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - start
    out = p.stdout.read()
    err = p.stderr.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"BENCHMARK FAILED: {' '.join(cmd)} exited {code}: {err.decode()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.decode(), code


def fill(store, n, stacks, concurrency, gzip, otelprof=OTELPROF):
    port = free_port()
    recv = subprocess.Popen([otelprof, "receive", "--quiet", "--store", store,
                             "--grpc", f"127.0.0.1:{port}", "--http", "off"])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("BENCHMARK FAILED: receive did not start")
                time.sleep(0.05)
        results = []
        for i, version in enumerate(["1.0", "2.0"]):
            out = subprocess.run([LOAD, "--grpc", f"127.0.0.1:{port}", "--profiles", str(n),
                                  "--stacks", str(stacks), "--concurrency", str(concurrency),
                                  "--gzip", "1" if gzip else "0", "--version", version,
                                  "--start", str(1_700_000_000 + i * 10 * n)],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"BENCHMARK FAILED: cli_load: {out.stdout}{out.stderr}")
            results.append(json.loads(out.stdout))
        with open(f"/proc/{recv.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        receiver_cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        return results, receiver_cpu
    finally:
        recv.terminate()
        recv.wait()


def store_size(store):
    total, files = 0, 0
    for d, _, fs in os.walk(store):
        for f in fs:
            total += os.path.getsize(os.path.join(d, f))
            files += 1
    return total / (1 << 20), files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="90,180,360", help="profiles per side, comma-separated")
    ap.add_argument("--stacks", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-gzip", action="store_true", help="send uncompressed")
    ap.add_argument("--baseline", metavar="OTELPROF",
                    help="another otelprof binary: receive into a second store with it and run each "
                         "reading command with both builds in turn, then print this build / baseline")
    a = ap.parse_args()
    for tool in (OTELPROF, LOAD) + ((a.baseline,) if a.baseline else ()):
        if not os.path.exists(tool):
            raise SystemExit(f"{tool} is missing: cargo build --release -p otelprof-cli --bin otelprof --example cli_load")
    tmp = tempfile.mkdtemp(prefix="otelprof-cli-speed-")
    rows = []
    try:
        for n in [int(x) for x in a.sizes.split(",")]:
            store = os.path.join(tmp, f"store-{n}")
            log(f"== {n} profiles per side: filling through otelprof receive (load {loadavg():.2f})")
            sent, receiver_cpu = fill(store, n, a.stacks, a.concurrency, not a.no_gzip)
            regressed = sent[1]["regressed"]
            mib, files = store_size(store)
            row = {"n": n, "files": files, "mib": mib, "raw_mib": sum(s["mib_raw"] for s in sent),
                   "exports": [s["exports_per_s"] for s in sent], "load": [loadavg()],
                   "receiver_ms": 1000 * receiver_cpu / (2 * n)}
            log(f"  receive: {row['exports']} exports/s, receiver CPU {row['receiver_ms']:.1f} ms per export")
            if a.baseline:
                base_store = os.path.join(tmp, f"store-{n}-baseline")
                base_sent, base_cpu = fill(base_store, n, a.stacks, a.concurrency, not a.no_gzip,
                                           otelprof=a.baseline)
                shutil.rmtree(base_store, ignore_errors=True)
                row["base exports"] = [s["exports_per_s"] for s in base_sent]
                row["base receiver_ms"] = 1000 * base_cpu / (2 * n)
                log(f"  baseline receive: {row['base exports']} exports/s, "
                    f"receiver CPU {row['base receiver_ms']:.1f} ms per export")
            commands = {
                "top": ["top", store],
                "top --by span_name": ["top", "--by", "span_name", store],
                "diff": ["diff", "--base", "service.version=1.0",
                         "--head", "service.version=2.0", store],
            }
            builds = [("", OTELPROF)] + ([("base ", a.baseline)] if a.baseline else [])
            for name, args in commands.items():
                samples = {prefix: ([], [], []) for prefix, _ in builds}
                for _ in range(a.runs):
                    # Builds in turn, so that a busy moment of the machine hits both.
                    for prefix, binary in builds:
                        wall, cpu, mem, out, _ = timed([binary] + args)
                        if name == "diff" and f"Largest significant increase: {regressed} " not in out:
                            raise SystemExit(f"BENCHMARK FAILED: {binary} diff did not name {regressed}:\n{out}")
                        for into, v in zip(samples[prefix], (wall, cpu, mem)):
                            into.append(v)
                for prefix, _ in builds:
                    walls, cpus, rss = samples[prefix]
                    row[prefix + name] = (statistics.median(walls), statistics.median(cpus), max(rss))
                    log(f"  {prefix}{name}: {row[prefix + name][0]:.2f} s wall, "
                        f"{row[prefix + name][1]:.2f} s CPU, {row[prefix + name][2]:.0f} MiB")
            row["load"].append(loadavg())
            rows.append(row)
            shutil.rmtree(store, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"Profiles of ~{a.stacks} distinct stacks, {a.concurrency} exports in flight, "
          f"{'uncompressed' if a.no_gzip else 'gzip'} over OTLP/gRPC; median of {a.runs} runs; "
          f"{os.cpu_count()} CPUs; load average (other processes included) shown per size.\n")
    print("| profiles (per side) | store | receive exports/s (1.0, 2.0) | receiver CPU per export | top | top --by span_name | diff | peak RSS (diff) | load avg |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cell = lambda k: f"{r[k][0]:.2f} s wall / {r[k][1]:.2f} s CPU"
        print(f"| {2 * r['n']} ({r['n']}) | {r['files']} files, {r['mib']:.0f} MiB | "
              f"{r['exports'][0]:.0f}, {r['exports'][1]:.0f} | {r['receiver_ms']:.1f} ms | {cell('top')} | "
              f"{cell('top --by span_name')} | {cell('diff')} | {r['diff'][2]:.0f} MiB | "
              f"{r['load'][0]:.1f}–{r['load'][1]:.1f} |")
    if a.baseline:
        print(f"\nThis build against {a.baseline}, in the same run (ratio = this / baseline; "
              "below 1 is faster):\n")
        print("| profiles (per side) | receive exports/s | receiver CPU per export | top wall / CPU | "
              "top --by span_name wall / CPU | diff wall / CPU | peak RSS (diff) |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            ratio = lambda k, i: r[k][i] / r["base " + k][i] if r["base " + k][i] else float("nan")
            cell = lambda k: f"{ratio(k, 0):.2f} / {ratio(k, 1):.2f}"
            exports = statistics.mean(r["exports"]) / statistics.mean(r["base exports"])
            print(f"| {2 * r['n']} ({r['n']}) | {exports:.2f} | {r['receiver_ms'] / r['base receiver_ms']:.2f} | "
                  f"{cell('top')} | {cell('top --by span_name')} | {cell('diff')} | {ratio('diff', 2):.2f} |")


if __name__ == "__main__":
    main()
