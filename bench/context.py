#!/usr/bin/env python3
"""Cost of otelprof's span-context write path (BENCHMARKS.md, "Span-context cost"; the
protocol it measures: docs/context-protocol.md).

Runs bench/context/ContextBench.java in fresh JVMs ("forks"), alternating configurations in
every round so that machine drift hits them alike, and reports medians and differences:

  direct   ns per ThreadContext.set + clear pair (static API, with its thread-local lookup)
           and per Handle.set + clear pair, each minus the same loop without the calls;
  activate ns per span.makeCurrent() + scope.close() with otelprof's context-storage wrapper
           vs the same JVM without it (the difference is what the wrapper adds);
  newspan  the same for a new child span per activation (start, makeCurrent, close, end): the
           wrapper also reads the new span's ids (not in the default parts);
  spans    CPU seconds of a span-heavy loop (>= 100k activations/s), after a warm-up, with
           the agent and the wrapper vs the agent without the wrapper (-agentpath only): the
           ratio is the CPU overhead of context tracking.

With otelprof.jar the span modes (newspan, spans) also give the SDK otelprof's span processor,
as autoconfigure and the OpenTelemetry javaagent do (endpoint names, pyroscope.profile.id on
local roots). --base-jar OTHER/otelprof.jar measures another build of the jar in the same run:
each wrapped configuration runs with both jars, and the span-heavy loop's pairs compare this
jar with the other one (its A/A pairs: the other one twice). Before/after a change to the shim:
  python3 bench/context.py --parts activate,newspan,spans --base-jar BEFORE/otelprof.jar

The span-heavy loop is single-threaded, so by default (--pairing concurrent) the two forks
of a round run at the same time, one per core: whatever slows this shared machine down
(other tenants of the host, frequency) then slows both alike, and the per-round ratio keeps
only the difference between them. Rounds of two agent-only forks at once measure what is
left of the noise (the A/A control). --pairing sequential runs one fork at a time instead.

Usage: python3 bench/context.py [--forks 5] [--span-forks 15] [--aa-forks 9] [--jdk PATH]
                                [--quick] [--parts direct,activate,newspan,spans] [--work ROOT,CHILD]
                                [--pairing concurrent|sequential] [--jvm-flag FLAG ...]
                                [--agent PATH] [--jar PATH] [--base-jar PATH]

--work sets the span-heavy loop's work per activation (loop iterations of the root's and of
each child's work; default 5000,7000: about 150k activations/s on this machine; 7000,10000
gives about 105k/s, near the goal's floor of 100k/s in BENCHMARKS.md).
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
    ap.add_argument("--aa-forks", type=int, default=9,
                    help="span-heavy loop, concurrent pairing: rounds of the A/A control (0: none)")
    ap.add_argument("--pairing", choices=("concurrent", "sequential"), default="concurrent",
                    help="span-heavy loop: run a round's two forks at the same time or one after the other")
    ap.add_argument("--span-forks", type=int, default=15,
                    help="forks of each span-heavy configuration (identical runs differ by a few percent)")
    ap.add_argument("--jdk", default=os.environ.get("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--parts", default="direct,activate,spans",
                    help="which measurements to run (comma-separated: direct, activate, newspan, spans)")
    ap.add_argument("--jvm-flag", action="append", default=[],
                    help="extra JVM flag for every fork (repeatable), e.g. --sun-misc-unsafe-memory-access=allow")
    ap.add_argument("--agent", help="the agent to test (default target/release/libotelprof.so)")
    ap.add_argument("--jar", help="the jar to test (default target/release/otelprof.jar)")
    ap.add_argument("--base-jar", help="another build of the jar to compare with, in the same run")
    ap.add_argument("--work", default="5000,7000",
                    help="span-heavy loop: work of the root and of each child, in loop iterations")
    args = ap.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"direct", "activate", "newspan", "spans"}:
        raise SystemExit(f"--parts: expected some of direct, activate, newspan, spans; got {args.parts!r}")
    try:
        root_work, child_work = (int(x) for x in args.work.split(","))
    except ValueError:
        raise SystemExit(f"--work: expected ROOT,CHILD (two integers); got {args.work!r}")
    if root_work < 0 or child_work < 0:
        raise SystemExit("--work: iterations must not be negative")
    java = Path(args.jdk) / "bin" / "java"
    javac = Path(args.jdk) / "bin" / "javac"
    release = ROOT / "target" / "release"
    agent = Path(args.agent) if args.agent else release / "libotelprof.so"
    jar = Path(args.jar) if args.jar else release / "otelprof.jar"
    base_jar = Path(args.base_jar) if args.base_jar else None
    for f in (agent, jar, *([base_jar] if base_jar else [])):
        if not f.is_file():
            raise SystemExit(f"{f} missing: run cargo build --release (or check --agent/--jar)")
    sdk = sh(["bash", str(ROOT / "scripts/fetch-otel-java.sh")]).stdout.strip()
    classes = Path(tempfile.mkdtemp(prefix="otelprof-ctxbench-"))
    sh([str(javac), "--release", "17", "-cp", sdk, "-d", str(classes), str(ROOT / "bench/context/ContextBench.java")])
    out_dir = Path(tempfile.mkdtemp(prefix="otelprof-ctxbench-out-"))
    cp_sdk = f"{classes}:{sdk}"
    agentpath = f"-agentpath:{agent}=cpu=10ms,out={out_dir},period=60s"
    javaagent = f"-javaagent:{jar}"
    processor = "-Dbench.otelprofProcessor=true"

    n_direct = "20000000" if args.quick else "100000000"
    n_activate = "5000000" if args.quick else "20000000"
    n_newspan = "1000000" if args.quick else "5000000"
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
        "newspan-plain": ([], ["newspan", n_newspan, warm], "newspan"),
        "newspan-wrapped": ([agentpath, javaagent, processor], ["newspan", n_newspan, warm], "newspan"),
        "spans-agent-only": ([agentpath, *work], ["spans", n_spans, warm_spans], "spans"),
        "spans-agent-context": ([agentpath, javaagent, processor, *work], ["spans", n_spans, warm_spans], "spans"),
    }
    if base_jar:
        # The loop's pairs compare the two jars, not context on and off.
        del configs["spans-agent-only"]
        # The same configurations with the other jar.
        for name in ("activate-wrapped", "newspan-wrapped", "spans-agent-context"):
            jvm, bench, key = configs[name]
            other = [f"-javaagent:{base_jar}" if a == javaagent else a for a in jvm]
            configs[name + "-base"] = (other, bench, key)
    # The span-heavy loop's pairs: (A, B), B measured against A.
    pair = ("spans-agent-context-base", "spans-agent-context") if base_jar else ("spans-agent-only", "spans-agent-context")
    configs = {k: v for k, v in configs.items() if k.split("-")[0] in parts}
    concurrent = "spans" in parts and args.pairing == "concurrent"
    samples = {k: [] for k in configs}
    rate = []
    rng = random.Random(args.seed)
    version = sh([str(java), "-version"]).stderr.splitlines()[0]
    print(f"# {version} {' '.join(args.jvm_flag)}; {args.forks} forks per configuration ({args.span_forks} for the span-heavy loop"
          f"{f', run in concurrent pairs, and {args.aa_forks} A/A pairs' if concurrent else ''}), order shuffled per round",
          file=sys.stderr)

    def start(name):
        jvm, bench, _ = configs[name]
        return subprocess.Popen([str(java), *args.jvm_flag, *jvm, "-cp", cp_sdk, "ContextBench", *bench],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(name, p):
        """Waits for a fork, checks it and returns (its result, its measured window or None)."""
        out, err = p.communicate()
        jvm, _, key = configs[name]
        if p.returncode != 0:
            raise SystemExit(f"{name} failed:\n{out}\n{err}")
        if jvm and "otelprof: stopped" not in err and not name.endswith("-plain"):
            raise SystemExit(f"{name}: the agent did not run:\n{err}")
        window = None
        for line in out.splitlines():
            if line.startswith("activations_per_s"):
                rate.append(float(line.split()[1]))
            if line.startswith("window_ms"):
                window = tuple(int(x) for x in line.split()[1:3])
        return result(out, key), window

    # One fork at a time: everything but the span-heavy loop when its forks run in pairs.
    forks = lambda name: 0 if concurrent and name in pair else (
        args.span_forks if name.startswith("spans") else args.forks)
    rounds = max([forks(name) for name in configs] + [0])
    for round_ in range(rounds):
        order = [name for name in configs if round_ < forks(name)]
        rng.shuffle(order)
        for name in order:
            samples[name].append(finish(name, start(name))[0])
        print(f"# round {round_ + 1}/{rounds} done", file=sys.stderr)

    # The span-heavy loop in concurrent pairs: context vs agent only (A/B) and agent only
    # twice (A/A), rounds of both kinds shuffled; which fork starts first alternates.
    pair_ratios, aa_ratios, added, overlaps = [], [], [], []
    if concurrent:
        kinds = ["ab"] * args.span_forks + ["aa"] * args.aa_forks
        rng.shuffle(kinds)
        for i, kind in enumerate(kinds):
            names = [pair[0], pair[1] if kind == "ab" else pair[0]]
            first = i % 2
            procs = {}
            for j in (first, 1 - first):
                procs[j] = start(names[j])
            (a, wa), (b, wb) = (finish(names[j], procs[j]) for j in (0, 1))
            overlap = (min(wa[1], wb[1]) - max(wa[0], wb[0])) / max(wa[1] - wa[0], wb[1] - wb[0])
            if overlap < 0.5:
                raise SystemExit(f"pair {i + 1}: the two measurements overlapped for only {overlap:.0%} "
                                 "of their time; is something else holding a core?")
            overlaps.append(overlap)
            if kind == "ab":
                samples[pair[0]].append(a)
                samples[pair[1]].append(b)
                pair_ratios.append(b / a)
                added.append((b - a) * 1e9 / (3 * int(n_spans)))
            else:
                aa_ratios.append(b / a)
            print(f"# pair {i + 1}/{len(kinds)} ({kind}) done: {b / a:.4f}", file=sys.stderr)

    med = {k: statistics.median(v) for k, v in samples.items() if v}
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
    if "newspan" in parts:
        for name, label in (("newspan-plain", "new child span: start, makeCurrent, close, end, plain"),
                            ("newspan-wrapped", "the same with the wrapper")):
            print(f"| {label} | {med[name]:.1f} ns | {min(samples[name]):.1f}..{max(samples[name]):.1f} | |")
        print(f"| added by the wrapper per new span | {med['newspan-wrapped'] - med['newspan-plain']:.1f} ns | | |")
    if base_jar:
        for name in ("activate-wrapped", "newspan-wrapped"):
            if name + "-base" in med:
                print(f"| {name}, this jar / --base-jar | {med[name] / med[name + '-base']:.4f} | "
                      f"{med[name + '-base']:.1f} ns before, {med[name]:.1f} ns now | 1 |")
    if "spans" in parts:
        if not concurrent:
            pair_ratios = [c / a for c, a in zip(samples[pair[1]], samples[pair[0]])]
            added = [(med[pair[1]] - med[pair[0]]) * 1e9 / (3 * int(n_spans))]
        how = "forks run in concurrent pairs" if concurrent else "forks run one at a time"
        what, control = (("context on, this jar / --base-jar", "--base-jar / --base-jar") if base_jar
                         else ("context on / agent only", "agent only / agent only"))
        print(f"| span-heavy loop CPU, {what} ({how}; median of per-round ratios) | "
              f"{statistics.median(pair_ratios):.4f} | {min(pair_ratios):.4f}..{max(pair_ratios):.4f} | ≤ 1.01 |")
        if aa_ratios:
            print(f"| A/A control: {control}, concurrent pairs ({len(aa_ratios)}) | "
                  f"{statistics.median(aa_ratios):.4f} | {min(aa_ratios):.4f}..{max(aa_ratios):.4f} | 1 |")
        print(f"| same, ratio of the two configurations' medians | "
              f"{med[pair[1]] / med[pair[0]]:.4f} | | ≤ 1.01 |")
        print(f"| CPU added per activation ({'median of per-round differences' if concurrent else 'difference of the medians'}) | "
              f"{statistics.median(added):.0f} ns | | |")
        print(f"| span activations per second in that loop (work {root_work},{child_work}) | "
              f"{statistics.median(rate):,.0f} | | ≥ 100,000 |")
        if overlaps:
            print(f"| overlap of the two measurements of a pair (smallest) | {min(overlaps):.0%} | | |")

if __name__ == "__main__":
    main()
