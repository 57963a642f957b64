#!/usr/bin/env python3
"""The floor under the CPU engines: what the kernel's signal delivery costs a busy thread on
this machine when no profiler runs at all, and what reading /proc/kallsyms costs.

bench/workloads/signal_floor.c does a fixed amount of work on one thread while one of the two
mechanisms the agent's CPU engines use interrupts it: a per-thread CPU-time POSIX timer
(`clock=cpu`) or a per-thread software `cpu-clock` perf event with its ring and `F_SETSIG`
signal (`clock=perf`). Its handler does nothing beyond what the mechanism needs. In alternating
rounds (each round runs every configuration once, in a freshly shuffled order), each run's
thread CPU time for the work is divided by the same round's run without signals. The cost per
signal is the difference over the signals delivered. Two kinds of work: `memory` (a 1 MiB table
read and written at random, so that the interrupt and the handler evict what the work keeps in
the caches, as with a JVM) and `alu` (registers only).

A separate measurement reads /proc/kallsyms, the kernel's symbol list, which an agent must read
once to name kernel frames; the time is the reading thread's CPU time, nearly all of it spent in
the kernel formatting the list.

From these the report derives, for each interval, the least CPU ratio any profiler that names
kernel frames with this mechanism can have on a run of `--run-cpu-s` seconds of CPU (FixedWork's
whole run has about 10): the mechanism's median CPU ratio + kallsyms CPU / run CPU.

    python3 bench/signal_floor.py                    # 15 rounds at 10 ms and 1 ms, both kinds
    python3 bench/signal_floor.py --rounds 25 --intervals 10000

Results go to stdout as markdown (bench/reports/); progress to stderr. BENCHMARKS.md ("The
floor under the CPU engines") explains what the figures mean.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "workloads" / "signal_floor.c"
MODES = ("none", "timer", "perf")
LINE = re.compile(r"mode=(\S+) cpu_s=([0-9.]+) signals=(\d+) check=(\d+)")


class BenchError(Exception):
    pass


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def build(out: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise BenchError("no C compiler (cc or gcc) on PATH")
    exe = out / "signal_floor"
    subprocess.run([cc, "-O2", "-Wall", "-Werror", "-o", str(exe), str(SOURCE)], check=True)
    return exe


def run(exe: Path, args: list[str]) -> tuple[float, int, int]:
    p = subprocess.run([str(exe), *args], capture_output=True, text=True)
    m = LINE.search(p.stdout)
    if p.returncode != 0 or not m:
        raise BenchError(f"signal_floor {' '.join(args)} failed ({p.returncode}): {p.stdout}{p.stderr}")
    return float(m.group(2)), int(m.group(3)), int(m.group(4))


def calibrate(exe: Path, kind: str, seconds: float) -> int:
    work = 20_000_000
    cpu, _, _ = run(exe, ["none", "10000", str(work), kind])
    return max(1, int(work * seconds / max(cpu, 1e-6)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--intervals", default="10000,1000", help="sampling intervals in µs (default 10000,1000)")
    p.add_argument("--kinds", default="memory,alu", help="kinds of work (default memory,alu)")
    p.add_argument("--seconds", type=float, default=1.5, help="CPU seconds of work per run (default 1.5)")
    p.add_argument("--run-cpu-s", type=float, default=10.0,
                   help="CPU seconds of the run the floor is derived for (default 10: FixedWork's whole run)")
    args = p.parse_args()
    intervals = [int(x) for x in args.intervals.split(",") if x]
    kinds = [k for k in args.kinds.split(",") if k]
    if args.rounds < 1 or not intervals or any(i <= 0 for i in intervals) or not kinds \
            or any(k not in ("memory", "alu") for k in kinds):
        raise BenchError("bad --rounds, --intervals or --kinds")

    with tempfile.TemporaryDirectory(prefix="signal-floor-") as tmp:
        exe = build(Path(tmp))
        try:
            run(exe, ["perf", "10000", "1000", "alu"])
        except BenchError as e:
            raise BenchError(f"perf events are refused here, so there is no perf floor to measure: {e}")
        work = {k: calibrate(exe, k, args.seconds) for k in kinds}
        configs = [(k, i, m) for k in kinds for i in intervals for m in MODES]
        results: dict[tuple[str, int, str], list[tuple[int, float, int]]] = {c: [] for c in configs}
        checks: dict[str, int] = {}
        kallsyms: list[float] = []
        kallsyms_bytes = 0
        for r in range(1, args.rounds + 1):
            order = configs[:]
            random.shuffle(order)
            for kind, interval, mode in order:
                cpu, sigs, check = run(exe, [mode, str(interval), str(work[kind]), kind])
                if checks.setdefault(kind, check) != check:
                    raise BenchError(f"{kind} work gave checksum {check}, earlier {checks[kind]}")
                if mode != "none" and sigs == 0:
                    raise BenchError(f"{mode} at {interval} µs delivered no signal")
                results[(kind, interval, mode)].append((r, cpu, sigs))
            cpu, _, kallsyms_bytes = run(exe, ["kallsyms"])
            kallsyms.append(cpu)
            log(f"round {r}/{args.rounds} done")

    print(f"# The floor under the CPU engines ({platform.node()}, kernel {platform.release()})\n")
    print(f"`python3 bench/signal_floor.py {' '.join(sys.argv[1:])}`: {args.rounds} rounds, "
          f"{os.cpu_count()} CPUs, about {args.seconds} CPU s of work per run.\n")
    print("| work | interval | mechanism | CPU median (s) | CPU ratio median | CPU ratio min–max "
          "| signals per CPU s (median) | cost per signal, median (µs) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    median_ratio: dict[tuple[str, int, str], float] = {}
    median_cost: dict[tuple[str, int, str], float] = {}
    for kind, interval, mode in configs:
        runs = results[(kind, interval, mode)]
        base = {r: cpu for r, cpu, _ in results[(kind, interval, "none")]}
        cpu = statistics.median(c for _, c, _ in runs)
        if mode == "none":
            print(f"| {kind} | {interval / 1000:g} ms | none | {cpu:.4f} | 1 | – | – | – |")
            continue
        ratio = [c / base[r] for r, c, _ in runs]
        cost = statistics.median((c - base[r]) / s * 1e6 for r, c, s in runs)
        sps = statistics.median(s / c for _, c, s in runs)
        median_ratio[(kind, interval, mode)] = statistics.median(ratio)
        median_cost[(kind, interval, mode)] = cost
        print(f"| {kind} | {interval / 1000:g} ms | {mode} | {cpu:.4f} | **{statistics.median(ratio):.4f}** "
              f"| {min(ratio):.4f}–{max(ratio):.4f} | {sps:.0f} | {cost:.1f} |")
    ks = statistics.median(kallsyms)
    print(f"\nReading /proc/kallsyms ({kallsyms_bytes / 1e6:.1f} MB): median {ks * 1e3:.1f} ms of CPU, "
          f"{min(kallsyms) * 1e3:.1f}–{max(kallsyms) * 1e3:.1f} over {len(kallsyms)} reads.\n")
    print(f"The least CPU ratio of a run of {args.run_cpu_s:g} CPU s that names kernel frames "
          "(perf events) or does not (timers), from the medians above:\n")
    print("| work | interval | timers | perf events + kallsyms |"
          + (" perf events + kallsyms, from the cost per signal at the shortest interval |" if len(intervals) > 1 else ""))
    print("|---|---:|---:|---:|" + ("---:|" if len(intervals) > 1 else ""))
    shortest = min(intervals)
    for kind in kinds:
        for interval in intervals:
            t = median_ratio[(kind, interval, "timer")]
            f = median_ratio[(kind, interval, "perf")] + ks / args.run_cpu_s
            row = f"| {kind} | {interval / 1000:g} ms | {t:.4f} | {f:.4f} |"
            if len(intervals) > 1:
                # Shorter intervals deliver more signals per run, so their cost per signal is
                # measured with less noise; that cost (µs) at one signal per `interval` (µs):
                per = median_cost[(kind, shortest, "perf")] / interval
                row += f" {1 + per + ks / args.run_cpu_s:.4f} |"
            print(row)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"signal_floor: {e}", file=sys.stderr)
        sys.exit(1)
