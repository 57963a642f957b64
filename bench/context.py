#!/usr/bin/env python3
"""Cost of otelprof's span-context write path (issue: span context, point 7).

Runs bench/context/ContextBench.java in fresh JVMs ("forks"), alternating configurations in
every round so that machine drift hits them alike, and reports medians and differences:

  direct   ns per ThreadContext.set + clear pair (static API, with its thread-local lookup)
           and per Handle.set + clear pair, each minus the same loop without the calls;
  activate ns per span.makeCurrent() + scope.close() with otelprof's context-storage wrapper
           vs the same JVM without it (the difference is what the wrapper adds);
  spans    CPU seconds of a span-heavy loop (>= 100k activations/s), after a warm-up, with
           the agent and the wrapper vs the agent without the wrapper (-agentpath only): the
           ratio is the CPU overhead of context tracking.

Usage: python3 bench/context.py [--forks 5] [--span-forks 21] [--jdk PATH] [--quick]
                                [--parts direct,activate,spans] [--work ROOT,CHILD]
                                [--jvm-flag FLAG ...]

--work sets the span-heavy loop's work per activation (loop iterations of the root's and of
each child's work; default 5000,7000: about 150k activations/s on this machine; 7000,10000
gives about 105k/s, near the issue's floor of 100k/s).
Needs: cargo build --release (agent + otelprof.jar) and the OpenTelemetry SDK jar
(scripts/fetch-otel-java.sh, run automatically).
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def result(out, key):
    for line in out.splitlines():
        if line.startswith(f"result {key} "):
            return float(line.split()[2])
    raise SystemExit(f"no 'result {key}' in output:\n{out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--forks", type=int, default=5)
    ap.add_argument("--span-forks", type=int, default=21,
                    help="forks of each span-heavy configuration (identical runs differ by a few percent)")
    ap.add_argument("--jdk", default=os.environ.get("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--parts", default="direct,activate,spans",
                    help="which measurements to run (comma-separated: direct, activate, spans)")
    ap.add_argument("--jvm-flag", action="append", default=[],
                    help="extra JVM flag for every fork (repeatable), e.g. --sun-misc-unsafe-memory-access=allow")
    ap.add_argument("--work", default="5000,7000",
                    help="span-heavy loop: work of the root and of each child, in loop iterations")
    args = ap.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"direct", "activate", "spans"}:
        raise SystemExit(f"--parts: expected some of direct, activate, spans; got {args.parts!r}")
    try:
        root_work, child_work = (int(x) for x in args.work.split(","))
    except ValueError:
        raise SystemExit(f"--work: expected ROOT,CHILD (two integers); got {args.work!r}")
    if root_work < 0 or child_work < 0:
        raise SystemExit("--work: iterations must not be negative")
    java = Path(args.jdk) / "bin" / "java"
    javac = Path(args.jdk) / "bin" / "javac"
    release = ROOT / "target" / "release"
    agent, jar = release / "libotelprof.so", release / "otelprof.jar"
    for f in (agent, jar):
        if not f.is_file():
            raise SystemExit(f"{f} missing: run cargo build --release")
    sdk = sh(["bash", str(ROOT / "scripts/fetch-otel-java.sh")]).stdout.strip()
    classes = Path(tempfile.mkdtemp(prefix="otelprof-ctxbench-"))
    sh([str(javac), "--release", "17", "-cp", sdk, "-d", str(classes), str(ROOT / "bench/context/ContextBench.java")])
    out_dir = Path(tempfile.mkdtemp(prefix="otelprof-ctxbench-out-"))
    cp_sdk = f"{classes}:{sdk}"
    agentpath = f"-agentpath:{agent}=cpu=10ms,out={out_dir},period=60s"
    javaagent = f"-javaagent:{jar}"

    n_direct = "20000000" if args.quick else "100000000"
    n_activate = "5000000" if args.quick else "20000000"
    n_spans = "100000" if args.quick else "500000"
    warm_spans = "30000" if args.quick else "150000"
    warm = "3" if args.quick else "5"
    work = [f"-DrootWork={root_work}", f"-DchildWork={child_work}"]
    configs = {
        # name: (jvm args, bench args, result key)
        "direct-baseline": ([agentpath, javaagent], ["direct-baseline", n_direct, warm], "direct-baseline"),
        "direct": ([agentpath, javaagent], ["direct", n_direct, warm], "direct"),
        "direct-handle": ([agentpath, javaagent], ["direct-handle", n_direct, warm], "direct-handle"),
        "activate-plain": ([], ["activate", n_activate, warm], "activate"),
        "activate-wrapped": ([agentpath, javaagent], ["activate", n_activate, warm], "activate"),
        "spans-agent-only": ([agentpath, *work], ["spans", n_spans, warm_spans], "spans"),
        "spans-agent-context": ([agentpath, javaagent, *work], ["spans", n_spans, warm_spans], "spans"),
    }
    configs = {k: v for k, v in configs.items() if k.split("-")[0] in parts}
    samples = {k: [] for k in configs}
    rate = []
    rng = random.Random(args.seed)
    version = sh([str(java), "-version"]).stderr.splitlines()[0]
    print(f"# {version} {' '.join(args.jvm_flag)}; {args.forks} forks per configuration ({args.span_forks} for the span-heavy loop),"
          " order shuffled per round", file=sys.stderr)
    forks = lambda name: args.span_forks if name.startswith("spans") else args.forks
    rounds = max(forks(name) for name in configs)
    for round_ in range(rounds):
        order = [name for name in configs if round_ < forks(name)]
        rng.shuffle(order)
        for name in order:
            jvm, bench, key = configs[name]
            p = subprocess.run([str(java), *args.jvm_flag, *jvm, "-cp", cp_sdk, "ContextBench", *bench],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"{name} failed:\n{p.stdout}\n{p.stderr}")
            if jvm and "otelprof: stopped" not in p.stderr and name != "activate-plain":
                raise SystemExit(f"{name}: the agent did not run:\n{p.stderr}")
            samples[name].append(result(p.stdout, key))
            for line in p.stdout.splitlines():
                if line.startswith("activations_per_s"):
                    rate.append(float(line.split()[1]))
        print(f"# round {round_ + 1}/{rounds} done", file=sys.stderr)

    med = {k: statistics.median(v) for k, v in samples.items()}
    print(f"| measurement | median | min..max over the forks | goal |")
    print("|---|---|---|---|")
    if "direct" in parts:
        base = med["direct-baseline"]
        for name, label in (("direct", "ThreadContext.set + clear (static API)"),
                            ("direct-handle", "Handle.set + clear (per-thread handle)")):
            print(f"| {label} | {med[name] - base:.1f} ns | "
                  f"{min(samples[name]) - base:.1f}..{max(samples[name]) - base:.1f} | ≤ 10 ns |")
    if "activate" in parts:
        for name, label in (("activate-plain", "makeCurrent + close, plain"),
                            ("activate-wrapped", "makeCurrent + close, with the wrapper")):
            print(f"| {label} | {med[name]:.1f} ns | {min(samples[name]):.1f}..{max(samples[name]):.1f} | |")
        print(f"| added by the wrapper per pair | {med['activate-wrapped'] - med['activate-plain']:.1f} ns | | ≤ 30 ns |")
    if "spans" in parts:
        ratios = [c / a for c, a in zip(samples["spans-agent-context"], samples["spans-agent-only"])]
        added_ns = (med["spans-agent-context"] - med["spans-agent-only"]) * 1e9 / (3 * int(n_spans))
        print(f"| span-heavy loop CPU, context on / agent only | {statistics.median(ratios):.4f} | "
              f"{min(ratios):.4f}..{max(ratios):.4f} | ≤ 1.01 |")
        print(f"| same, ratio of the two configurations' medians | "
              f"{med['spans-agent-context'] / med['spans-agent-only']:.4f} | | ≤ 1.01 |")
        print(f"| CPU added per activation (difference of the medians) | {added_ns:.0f} ns | | |")
        print(f"| span activations per second in that loop (work {root_work},{child_work}) | "
              f"{statistics.median(rate):,.0f} | | ≥ 100,000 |")

if __name__ == "__main__":
    main()
