#!/usr/bin/env python3
"""A profiler's fixed cost: the CPU a JVM that does almost no work uses with it loaded, less
the CPU the same JVM uses without it, in the same round.

The CPU ratio of a whole FixedWork run (bench/overhead.py) adds this cost to the sampling's:
whatever a profiler does once per process (reading the kernel's symbols, building libjvm's
unwind table, naming libraries' symbols, JVMTI set-up, writing the profile at exit) weighs
1 % of a 5 s run on two threads if it takes 100 ms, a third of that in a 16 s run. This
script measures that part alone, so that it can be followed and compared with
async-profiler's.

Each round runs every configuration once, in a freshly shuffled order, each in a JVM of its
own: bench/workloads/FixedWork.java with 2 threads and a few thousand requests (about 0.3 s
of CPU), wrapped by bench/workloads/ThreadCpuAtExit.java, which prints the CPU time of the
process's thread groups at the end (the JVM's main thread, the agent's own threads, the JIT
compilers, the rest). The process's whole CPU time (user + system) comes from wait4's
rusage. Reported: per configuration, the median CPU time, the median and min / max of the
difference to the same round's `none`, and the median CPU of each thread group.

    python3 bench/startup_cost.py --async-profiler ASYNC_PROFILER/build/lib/libasyncProfiler.so
    python3 bench/startup_cost.py --rounds 15 --jdk /usr/lib/jvm/temurin-25-jdk-amd64
    python3 bench/startup_cost.py --baseline-agent OLD/libotelprof.so   # two builds side by side

Wrap the run in the machine's CPU lock (`flock -x /tmp/otelprof-cpu.lock`) on a shared
machine; never run it beside another timing measurement.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
AGENT = REPO / "target" / "release" / "libotelprof.so"
GROUPS = ("main", "otelprof", "jit", "workload")


def configs(agent: Path, baseline: Path | None, async_profiler: Path | None,
            out: Path) -> dict[str, list[str]]:
    """JVM options of each configuration."""
    ours = f"-agentpath:{agent}={{}},out={out},period=60s"
    c: dict[str, list[str]] = {
        "none": [],
        "none-again": [],
        "otelprof cpu=10ms,clock=perf": [ours.format("cpu=10ms,clock=perf")],
        "otelprof cpu=10ms,clock=cpu": [ours.format("cpu=10ms,clock=cpu")],
    }
    if baseline is not None:
        c["otelprof cpu=10ms,clock=perf, baseline build"] = [
            f"-agentpath:{baseline}=cpu=10ms,clock=perf,out={out},period=60s"
        ]
    if async_profiler is not None:
        c["async-profiler event=cpu,interval=10ms"] = [
            f"-agentpath:{async_profiler}=start,event=cpu,interval=10ms,collapsed,file={out / 'asprof.txt'}"
        ]
    return c


def one_run(java: Path, classes: Path, options: list[str], requests: int) -> tuple[float, dict[str, float]]:
    """One JVM: its whole CPU time in seconds and each thread group's in milliseconds."""
    cmd = [str(java), *options, "-cp", str(classes), "ThreadCpuAtExit", "FixedWork", "2", str(requests)]
    # One pipe for both streams: reading two pipes one after the other could block on a full
    # one. wait4 then gives this child's own rusage, whatever else runs on the machine.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    output = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or "A fatal error" in output:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output}")
    m = re.search(r"^thread_cpu_ms (.*)$", output, re.M)
    if m is None or "result=" not in output:
        raise SystemExit(f"{' '.join(cmd)}: no result or thread_cpu_ms line:\n{output}")
    groups = {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    return usage.ru_utime + usage.ru_stime, groups


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agent", type=Path, default=AGENT, help="libotelprof.so (default: %(default)s)")
    p.add_argument("--baseline-agent", type=Path, metavar="SO",
                   help="another build of libotelprof.so, run with cpu=10ms,clock=perf in every round")
    p.add_argument("--async-profiler", type=Path, metavar="SO", help="libasyncProfiler.so, to compare with")
    p.add_argument("--jdk", type=Path, default=Path("/usr/lib/jvm/java-17-openjdk-amd64"),
                   help="JDK home (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=9, help="rounds (default: %(default)s)")
    p.add_argument("--requests", type=int, default=5000,
                   help="FixedWork requests per thread: a little work, so the JVM is not all start-up "
                        "(default: %(default)s)")
    p.add_argument("--seed", type=int, default=20261128, help="seed of the per-round order shuffle")
    args = p.parse_args()
    if args.rounds < 1 or args.requests < 1:
        raise SystemExit("--rounds and --requests must be at least 1")
    for path, what in ((args.agent, "--agent"), (args.baseline_agent, "--baseline-agent"),
                       (args.async_profiler, "--async-profiler")):
        if path is not None and not path.is_file():
            raise SystemExit(f"{what}: no such file: {path}")
    java, javac = args.jdk / "bin" / "java", args.jdk / "bin" / "javac"
    if not javac.is_file():
        raise SystemExit(f"--jdk {args.jdk}: no bin/javac there")

    with tempfile.TemporaryDirectory(prefix="otelprof-startup-") as tmp:
        work = Path(tmp)
        classes, out = work / "classes", work / "out"
        classes.mkdir()
        out.mkdir()
        sources = [REPO / "bench" / "workloads" / f for f in ("FixedWork.java", "ThreadCpuAtExit.java")]
        r = subprocess.run([str(javac), "--release", "17", "-d", str(classes), *map(str, sources)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"javac failed:\n{r.stdout}{r.stderr}")
        cfgs = configs(args.agent, args.baseline_agent, args.async_profiler, out)
        rng = random.Random(args.seed)
        cpu: dict[str, list[float]] = {k: [] for k in cfgs}
        delta: dict[str, list[float]] = {k: [] for k in cfgs}
        groups: dict[str, dict[str, list[float]]] = {k: {g: [] for g in GROUPS} for k in cfgs}
        for rnd in range(1, args.rounds + 1):
            order = list(cfgs)
            rng.shuffle(order)
            this: dict[str, float] = {}
            for name in order:
                seconds, g = one_run(java, classes, cfgs[name], args.requests)
                this[name] = seconds
                for k in GROUPS:
                    groups[name][k].append(g.get(k, 0.0))
            for name, seconds in this.items():
                cpu[name].append(seconds)
                delta[name].append((seconds - this["none"]) * 1000)
            print(f"round {rnd}: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in this.items()),
                  file=sys.stderr, flush=True)

    print(f"JDK {args.jdk}, {args.rounds} rounds, FixedWork 2 threads × {args.requests} requests\n")
    print("| configuration | process CPU median | minus `none`, median (min – max) | "
          + " | ".join(f"`{g}` threads" for g in GROUPS) + " |")
    print("|---|---:|---:|" + "---:|" * len(GROUPS))
    for name in cfgs:
        d = delta[name]
        cells = " | ".join(f"{statistics.median(groups[name][g]):.0f} ms" for g in GROUPS)
        print(f"| {name} | {statistics.median(cpu[name]) * 1000:.0f} ms | "
              f"{statistics.median(d):+.0f} ms ({min(d):+.0f} – {max(d):+.0f}) | {cells} |")


if __name__ == "__main__":
    main()
