#!/usr/bin/env python3
"""Bytes on the wire of otelprof's OTLP profiles (BENCHMARKS.md, "OTLP profile size").

Runs the 2-thread CPU workload (examples CpuSplit) at 100 Hz (cpu=10ms) with the agent
exporting OTLP/HTTP (gzip) to the test receiver (tests/python/otlp_receiver.py, official
opentelemetry-proto classes), once in the default aggregated shape and once with
timestamps=on, and reports per minute and per 1,000 samples, compressed (what crossed the
wire) and uncompressed (the decoded request). The same run also writes pprof files, for
comparison. A "sample" is one sampling interval (what samples/count counts); a minute of the
workload is 2 busy threads x 100 Hz x 60 s = 12,000 samples.

Reference: async-profiler's OTLP output spends about 2.9 bytes per sample uncompressed,
without file names or line numbers (the reference figure of the goal in BENCHMARKS.md).

    target/otlp-venv/bin/python bench/otlp_size.py [--seconds 60]

Needs `cargo build --release` and the venv made by scripts/test.sh.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
AGENT = os.path.join(TARGET, "release", "libotelprof.so")
ASYNC_PROFILER_BYTES_PER_SAMPLE = 2.9


def receiver(out):
    ready = os.path.join(out, "ready")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tests/python/otlp_receiver.py"),
         "--protocol", "http", "--port", "0", "--out", os.path.join(out, "received"), "--ready", ready]
    )
    for _ in range(300):
        if os.path.exists(ready):
            return proc, int(open(ready).read())
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the receiver did not start")


def run(classes, variant, options, seconds, java):
    out = tempfile.mkdtemp(prefix=f"otlp-size-{variant}-")
    files = os.path.join(out, "pprof")
    os.makedirs(files)
    proc, port = receiver(out)
    try:
        agent = f"cpu=10ms,period=60s,endpoint=http://127.0.0.1:{port},protocol=http/protobuf,out={files}"
        if options:
            agent += "," + options
        start = time.monotonic()
        subprocess.run(
            [java, f"-agentpath:{AGENT}={agent}", "-cp", classes,
             "otelprof.workloads.CpuSplit", "2", str(seconds)],
            check=True, stdout=subprocess.DEVNULL,
        )
        wall = time.monotonic() - start
    finally:
        proc.kill()
        proc.wait()
    received = os.path.join(out, "received")
    log = [json.loads(l) for l in open(os.path.join(received, "requests.log"))]
    profiles = [r for r in log if r["signal"] == "profiles" and r["answer"] == "ok"]
    check = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tests/python/otlp_check.py"), received],
        check=True, capture_output=True, text=True,
    )
    summary = json.loads(check.stdout)
    if summary["violations"]:
        raise SystemExit(f"{variant}: rule violations: {summary['violations']}")
    pprof = sum(os.path.getsize(p) for p in glob.glob(os.path.join(files, "*.pb.gz")))
    return {
        "variant": variant,
        "wall_s": wall,
        "requests": len(profiles),
        "samples": summary["total"],
        "distinct_samples": summary["samples"],
        "raw": sum(r["bytes"] for r in profiles),
        "gzip": sum(r["wire_bytes"] for r in profiles),
        "pprof_gz": pprof,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60, help="CPU seconds per worker thread")
    ap.add_argument("--java", default="java")
    args = ap.parse_args()
    if not os.path.exists(AGENT):
        raise SystemExit(f"{AGENT} missing: run cargo build --release")
    classes = tempfile.mkdtemp(prefix="otlp-size-classes-")
    subprocess.run(
        ["javac", "--release", "17", "-d", classes,
         os.path.join(ROOT, "examples/workloads/otelprof/workloads/CpuSplit.java")],
        check=True,
    )
    results = [
        run(classes, "aggregated (default)", "", args.seconds, args.java),
        run(classes, "timestamps=on", "timestamps=on", args.seconds, args.java),
    ]
    print(f"2 threads x {args.seconds:g} CPU-s at 100 Hz, OTLP/HTTP with gzip; a sample = one 10 ms interval")
    print()
    # A minute of the workload = 2 busy threads x 100 Hz x 60 s = 12,000 samples (wall time
    # would depend on how busy the machine was).
    print("| shape | wall | samples | requests | uncompressed B/min | gzip B/min "
          "| uncompressed B/1000 samples | gzip B/1000 samples | uncompressed B/sample | vs async-profiler 2.9 B/sample | pprof.gz B/1000 samples |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        per_k = lambda b: 1000 * b / r["samples"]  # noqa: E731
        print(
            f"| {r['variant']} | {r['wall_s']:.0f} s | {r['samples']} | {r['requests']} "
            f"| {12 * per_k(r['raw']):,.0f} | {12 * per_k(r['gzip']):,.0f} "
            f"| {per_k(r['raw']):,.0f} | {per_k(r['gzip']):,.0f} "
            f"| {r['raw'] / r['samples']:.2f} | {r['raw'] / r['samples'] / ASYNC_PROFILER_BYTES_PER_SAMPLE:.2f}x "
            f"| {per_k(r['pprof_gz']):,.0f} |"
        )
    print()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
