#!/usr/bin/env python3
"""Overhead of otelprof's profile types (cpu, wall, alloc, live, lock), each on its own and
all together, on a CPU-bound and an allocation-heavy fixed-work JVM workload, against a no-agent
baseline measured in the same run; and the live heap beside async-profiler's (`event=alloc,live`).

Same method as bench/overhead.py (whose setup, process and machine-load helpers it reuses):
alternating rounds, every round runs every configuration once in a freshly shuffled order;
per run the whole-process wall time (spawn to exit) and the child's CPU time; reported per
configuration the median, and the median / min / max of the per-round ratio to that round's
no-agent run, next to an A/A control (a second no-agent configuration: the noise floor of the
run). Workloads: `cpu`, bench/workloads/FixedWork.java's compute kind (deep call chains over
arithmetic, next to no allocation), and `alloc`, bench/workloads/AllocHeavy.java's arrays kind
(about 1.8 GB/s of arrays allocated through 25-frame stacks); both run alike from JVM to JVM.
`service` and `records` are the earlier, more realistic but much noisier kinds of each.

Every run is checked: exit code 0, the same checksum as every other run of that workload; with
the agent its start line, its `stopped;` line with no write errors, one readable pprof file per
enabled type (`cpu-`, `wall-`, `alloc-`, `lock-`), and samples of every enabled type that the
workload exercises (lock: only the file, no workload contends; alloc on `cpu`: only the
file). A broken run stops the benchmark: no table is printed from runs that did not do what
they claim. An async-profiler run (configurations `ap-*`, the library given by
--async-profiler) is checked for its exit code, checksum and a non-empty recording.

The live heap (`live=`) shares the allocation sampler with `alloc=`: the `live` configurations
measure what it adds, `alloc=512k,live=512k` against `alloc=512k` (same samples, a JNI weak
reference each, the table), with the default rate bound and without it (`alloc_rate=0`, so
both sample at 512 KiB like async-profiler, which has no bound), next to async-profiler's
`event=alloc,alloc=512k,live` and `event=alloc,alloc=512k`. Pairs of configurations are
compared round by round (the median of the per-round ratio of their wall times): the goal is
`alloc=512k,live=512k` at most 1.02 × `alloc=512k`, and no more than async-profiler's
`alloc,live` costs against its own `alloc`.

Method, goal and current figures: BENCHMARKS.md, "Overhead of each profile type"; every run
goes into a dated report in bench/reports/.

    python3 bench/types_overhead.py                       # default java, 7 rounds, ~25 min
    python3 bench/types_overhead.py --jdk /usr/lib/jvm/temurin-25-jdk-amd64 --rounds 9
    python3 bench/types_overhead.py --quick               # smoke run: 2 short rounds
    python3 bench/types_overhead.py --workloads alloc --configs all
    python3 bench/types_overhead.py --workloads alloc --configs live-vs-async-profiler
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gzip
import os
import platform
import random
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead as oh  # noqa: E402  (the CPU-sampler benchmark: shared setup and helpers)

GOAL_ALL_RATIO = 1.02
GOAL_LIVE_RATIO = 1.02
@dataclasses.dataclass(frozen=True)
class Config:
    key: str
    options: str  # agent options, "" for no agent (out= and period= are added)
    # "otelprof", or "async-profiler" (options are then its agent arguments; file= is added)
    profiler: str = "otelprof"

    @property
    def kinds(self) -> list[str]:
        """The otelprof profile types these options turn on."""
        if not self.options or self.profiler != "otelprof":
            return []
        opts = dict(kv.split("=", 1) for kv in self.options.split(","))
        kinds = [] if opts.get("cpu") == "off" else ["cpu"]
        kinds += [k for k in ("wall", "alloc", "live", "lock") if opts.get(k, "off") != "off"]
        return kinds

    def label(self) -> str:
        if not self.options:
            return "no agent"
        return self.options if self.profiler == "otelprof" else f"async-profiler {self.options}"


CONFIGS = {
    c.key: c
    for c in [
        Config("none", ""),
        Config("none-aa", ""),
        Config("cpu", "cpu=10ms"),
        Config("wall", "cpu=off,wall=50ms"),
        Config("alloc", "cpu=off,alloc=512k"),
        Config("lock", "cpu=off,lock=10ms"),
        Config("all", "cpu=10ms,wall=50ms,alloc=512k,lock=10ms"),
        Config("live", "cpu=off,alloc=512k,live=512k"),
        Config("alloc-unbounded", "cpu=off,alloc=512k,alloc_rate=0"),
        Config("live-unbounded", "cpu=off,alloc=512k,live=512k,alloc_rate=0"),
        Config("ap-alloc", "start,event=alloc,alloc=512k", "async-profiler"),
        Config("ap-live", "start,event=alloc,alloc=512k,live", "async-profiler"),
    ]
}

# Named sets of configurations for --configs.
CONFIG_SETS = {
    "live-vs-async-profiler": ["alloc", "live", "alloc-unbounded", "live-unbounded", "ap-alloc", "ap-live"],
}

# (configuration, against): compared round by round; the goal applies to the first pair, the
# others are for the reader (the unbounded pair, and each profiler's live heap over its alloc).
PAIRS = [
    ("live", "alloc"),
    ("live-unbounded", "alloc-unbounded"),
    ("ap-live", "ap-alloc"),
    ("live-unbounded", "ap-live"),
]

# (main class, threads, requests per thread: default, --quick, further arguments, types the
# workload does not exercise: their files are required, their samples are not)
WORKLOADS = {
    # FixedWork's compute kind: identical runs agree within a few percent here, where the
    # service-like kind ("service") differs by up to ±30 % between identical runs. It
    # allocates next to nothing: allocation sampling is exercised by the alloc workloads.
    "cpu": ("FixedWork", 2, 1_000_000, 150_000, ["0", "compute"], {"alloc", "lock"}),
    "service": ("FixedWork", 2, 200_000, 30_000, [], {"lock"}),
    # AllocHeavy's arrays kind: allocation through deep stacks and little else, steady from
    # run to run; "records" is the kind with collections, streams and strings.
    "alloc": ("AllocHeavy", 2, 150_000, 30_000, ["arrays"], {"lock"}),
    "records": ("AllocHeavy", 2, 15_000, 3_000, [], {"lock"}),
}

# The counter that proves each type sampled something.
# The live heap: objects tracked and then found collected (AllocHeavy's arrays all die).
TYPE_COUNTER = {"cpu": "cpu_ticks", "wall": "wall_samples", "alloc": "alloc_samples", "lock": "lock_samples",
                "live": "live_collected"}


@dataclasses.dataclass
class Run:
    config: str
    round: int
    wall_s: float
    cpu_s: float
    other_load: float
    stats: dict


def check_agent(cfg: Config, run_dir: Path, stderr: str, not_exercised: set[str]) -> dict:
    lines = [l for l in stderr.splitlines() if l.startswith("otelprof:")]
    started = [l for l in lines if l.startswith("otelprof: profiling ")]
    stopped = [l for l in lines if l.startswith("otelprof: stopped;")]
    if len(started) != 1 or len(stopped) != 1:
        raise oh.BenchError(f"expected one start and one stopped line, got: {lines}")
    fatal = [l for l in lines if "profiling is off" in l or "internal error" in l or "stays off" in l]
    if fatal:
        raise oh.BenchError(f"the agent reported: {fatal[0]}")
    stats = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)\b", stopped[0])}
    if stats.get("write_errors", 1) != 0:
        raise oh.BenchError(f"write errors: {stopped[0]}")
    out = run_dir / "out"
    for kind in cfg.kinds:
        files = sorted(out.glob(f"{kind}-*.pb.gz"))
        if not files:
            raise oh.BenchError(f"no {kind}-*.pb.gz in {out}: {sorted(p.name for p in out.iterdir())}")
        for f in files:
            if not gzip.decompress(f.read_bytes()):
                raise oh.BenchError(f"{f.name} is an empty profile")
        counter = TYPE_COUNTER[kind]
        if kind not in not_exercised and stats.get(counter, 0) == 0:
            raise oh.BenchError(f"{kind} took no samples ({counter}=0): {stopped[0]}")
    unexpected = sorted({p.name.split("-")[0] for p in out.glob("*.pb.gz")} - set(cfg.kinds))
    if unexpected:
        raise oh.BenchError(f"files of types not asked for: {unexpected}")
    return stats


def check_async_profiler(run_dir: Path) -> dict:
    """async-profiler's recording exists and holds something."""
    out = run_dir / "out" / "async-profiler.jfr"
    if not out.is_file() or out.stat().st_size == 0:
        raise oh.BenchError(f"async-profiler wrote no recording ({out})")
    return {}


def agent_args(cfg: Config, agent: Path, async_profiler: Path | None, run_dir: Path) -> list[str]:
    if not cfg.options:
        return []
    if cfg.profiler == "async-profiler":
        if async_profiler is None or not async_profiler.is_file():
            raise oh.BenchError(f"configuration {cfg.key} needs async-profiler: --async-profiler {async_profiler}")
        return [f"-agentpath:{async_profiler}={cfg.options},file={run_dir / 'out' / 'async-profiler.jfr'}"]
    return [f"-agentpath:{agent}={cfg.options},out={run_dir / 'out'},period=60s"]


def run_once(jdk, cfg: Config, main: list[str], classes: Path, agent: Path, work: Path, tag: str,
             not_exercised: set[str], async_profiler: Path | None = None) -> tuple[Run, str]:
    run_dir = work / tag
    (run_dir / "out").mkdir(parents=True)
    agent_args_ = agent_args(cfg, agent, async_profiler, run_dir)
    cmd = [str(jdk.java), *oh.COMMON_JVM_ARGS, *agent_args_, "-cp", str(classes), *main]
    ex = oh.spawn_and_wait(cmd, run_dir, oh.RUN_TIMEOUT_S)

    def fail(why: str) -> oh.BenchError:
        tail = lambda t: "\n".join(t.splitlines()[-15:])  # noqa: E731
        return oh.BenchError(f"invalid run {tag} ({cfg.label()}, {jdk.short}): {why}\ncommand: {' '.join(cmd)}\n"
                             f"stdout tail:\n{tail(ex.stdout)}\nstderr tail:\n{tail(ex.stderr)}")

    if ex.code != 0:
        raise fail(f"exit code {ex.code}")
    result = re.search(r"^result=\S+.*$", ex.stdout, re.M)
    if not result:
        raise fail("the workload printed no result line")
    stats = {}
    try:
        if cfg.profiler == "async-profiler" and cfg.options:
            stats = check_async_profiler(run_dir)
        elif cfg.options:
            stats = check_agent(cfg, run_dir, ex.stderr, not_exercised)
        elif "otelprof" in ex.stderr:
            raise oh.BenchError("otelprof output in a run without the agent")
    except oh.BenchError as e:
        raise fail(str(e)) from None
    shutil.rmtree(run_dir)
    return Run(cfg.key, 0, ex.wall_s, ex.cpu_s, ex.other_load, stats), result.group(0)


def bench_workload(jdk, workload: str, configs: list[Config], args, classes: Path, agent: Path, work: Path,
                   rng: random.Random) -> tuple[dict[str, list[Run]], int]:
    cls, threads, requests, quick_requests, extra, not_exercised = WORKLOADS[workload]
    main = [cls, str(threads), str(quick_requests if args.quick else requests), *extra]
    results: dict[str, list[Run]] = {c.key: [] for c in configs}
    checksums: set[str] = set()

    def checked(pair: tuple[Run, str], tag: str) -> Run:
        run, result = pair
        checksums.add(result)
        if len(checksums) != 1:
            raise oh.BenchError(f"run {tag} printed a different result than earlier runs: {sorted(checksums)}")
        return run

    for cfg in configs:
        oh.log(f"  [{workload}] warm-up {cfg.label()}")
        checked(run_once(jdk, cfg, main, classes, agent, work, f"warmup-{workload}-{cfg.key}", not_exercised,
                         args.async_profiler), "warm-up")
    kept = tried = 0
    limit = args.max_other_load
    max_tries = args.rounds if limit is None else args.rounds * 3
    while kept < args.rounds:
        if tried == max_tries:
            raise oh.BenchError(f"the machine was too busy: {kept} of {tried} rounds kept")
        tried += 1
        if limit is not None:
            oh.wait_for_quiet(limit)
        order = list(configs)
        rng.shuffle(order)
        runs = [checked(run_once(jdk, c, main, classes, agent, work, f"{workload}-t{tried}-{c.key}", not_exercised,
                                 args.async_profiler), c.key)
                for c in order]
        worst = max(r.other_load for r in runs)
        detail = ", ".join(f"{r.config} {r.wall_s:.2f}s" for r in runs)
        if limit is not None and worst > limit:
            oh.log(f"  [{workload}] round discarded (other load up to {worst:.2f} CPUs): {detail}")
            continue
        kept += 1
        for r in runs:
            r.round = kept
            results[r.config].append(r)
        oh.log(f"  [{workload}] round {kept}/{args.rounds} (other load ≤ {worst:.2f}): {detail}")
    return results, tried - kept


def table(configs: list[Config], results: dict[str, list[Run]]) -> tuple[str, dict]:
    base = {r.round: r for r in results["none"]}
    rows = [
        "| configuration | wall median (s) | wall ratio median | wall ratio min–max | CPU ratio median "
        "| CPU ratio min–max | samples (median): cpu / wall / alloc / live / lock | other load (CPUs, median) |",
        "|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    summary = {}
    for cfg in configs:
        runs = results[cfg.key]
        wr = [r.wall_s / base[r.round].wall_s for r in runs]
        cr = [r.cpu_s / base[r.round].cpu_s for r in runs]
        wall = statistics.median(r.wall_s for r in runs)
        other = statistics.median(r.other_load for r in runs)
        summary[cfg.key] = {"wall_ratio_median": statistics.median(wr), "wall_ratio_min": min(wr),
                            "wall_ratio_max": max(wr), "cpu_ratio_median": statistics.median(cr),
                            "wall_median_s": wall}
        if cfg.options and cfg.profiler == "otelprof":
            med = lambda k: statistics.median(r.stats.get(k, 0) for r in runs)  # noqa: E731
            samples = (f"{med('weight'):.0f} / {med('wall_samples'):.0f} / {med('alloc_samples'):.0f} / "
                       f"{med('live_collected') + med('live_entries'):.0f} tracked / {med('lock_samples'):.0f}")
        else:
            samples = "–"
        if cfg.key == "none":
            rows.append(f"| {cfg.label()} (baseline) | {wall:.3f} | 1 | – | 1 | – | – | {other:.2f} |")
        else:
            label = "no agent, again (A/A control)" if cfg.key == "none-aa" else f"`{cfg.label()}`"
            rows.append(f"| {label} | {wall:.3f} | **{statistics.median(wr):.3f}** | {min(wr):.3f}–{max(wr):.3f} "
                        f"| {statistics.median(cr):.3f} | {min(cr):.3f}–{max(cr):.3f} | {samples} | {other:.2f} |")
    return "\n".join(rows), summary


def pairs(configs: list[Config], results: dict[str, list[Run]]) -> list[str]:
    """Each pair of PAIRS both measured: the median (min–max) of the per-round ratio of their
    wall times."""
    keys = {c.key for c in configs}
    lines = []
    for a, b in PAIRS:
        if a not in keys or b not in keys:
            continue
        other = {r.round: r for r in results[b]}
        ratios = [r.wall_s / other[r.round].wall_s for r in results[a]]
        label = lambda k: CONFIGS[k].label()  # noqa: E731
        lines.append(f"- `{label(a)}` / `{label(b)}`: **{statistics.median(ratios):.3f}** "
                     f"({min(ratios):.3f}–{max(ratios):.3f})")
    return lines


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jdk", action="append", default=[], help="as in bench/overhead.py (default: java on PATH)")
    p.add_argument("--rounds", type=int, help="rounds per workload (default 7, --quick 2)")
    p.add_argument("--agent", type=Path, default=oh.DEFAULT_AGENT)
    p.add_argument("--quick", action="store_true", help="smoke run: less work, 2 rounds; ratios not meaningful")
    p.add_argument("--workloads", default="cpu,alloc",
                   help="comma-separated: cpu (FixedWork compute), service (FixedWork service-like), alloc "
                        "(AllocHeavy arrays), records (AllocHeavy records) (default: %(default)s)")
    p.add_argument("--configs", default="none-aa,cpu,wall,alloc,lock,all,live",
                   help="configurations, or a named set (" + ", ".join(CONFIG_SETS) + ") (default: %(default)s); "
                        "'none' is always included")
    p.add_argument("--async-profiler", type=Path,
                   help="libasyncProfiler.so (built from async-profiler's repository, never committed), "
                        "for the ap-* configurations")
    p.add_argument("--max-other-load", type=float, metavar="CPUS",
                   help="discard and repeat a round in which the rest of the machine used more than this")
    p.add_argument("--seed", type=int, default=20261122)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 2 if args.quick else 7
    keys = [k.strip() for k in args.configs.split(",") if k.strip()]
    keys = [x for k in keys for x in CONFIG_SETS.get(k, [k])]
    bad = [k for k in keys if k not in CONFIGS]
    if bad:
        p.error(f"unknown configuration(s) {bad}; known: {', '.join(CONFIGS)}")
    args.config_list = [CONFIGS["none"]] + [CONFIGS[k] for k in keys if k != "none"]
    args.workload_list = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if any(w not in WORKLOADS for w in args.workload_list):
        p.error(f"--workloads: known are {', '.join(WORKLOADS)}")
    return args


def main(argv) -> int:
    args = parse_args(argv)
    command = "python3 bench/types_overhead.py" + ("" if not argv else " " + " ".join(argv))
    work = Path(tempfile.mkdtemp(prefix="otelprof-types-bench-"))
    code = 0
    try:
        jdks = oh.resolve_jdks(args.jdk)
        classes = work / "classes"
        oh.compile_workloads(jdks, classes)
        agent, sha = oh.snapshot_agent(args.agent.resolve(), work)
        started = datetime.datetime.now(datetime.timezone.utc)
        out = [
            f"Command: `{command}`  ",
            f"Date: {started:%Y-%m-%d %H:%M} UTC; host: {oh.cpu_model()}, {os.cpu_count()} CPUs, "
            f"Linux {platform.release()}; load average at start {os.getloadavg()[0]:.2f}  ",
            f"Agent: `{oh.shown_path(args.agent)}` (sha256 {sha}…); JVM flags of every run: `{' '.join(oh.COMMON_JVM_ARGS)}`; "
            f"{args.rounds} rounds per workload",
        ]
        verdicts = []
        for i, jdk in enumerate(jdks):
            out.append(f"\n#### {jdk.version}\n")
            oh.log(f"JDK {jdk.version} ({jdk.java})")
            for w in args.workload_list:
                rng = random.Random(args.seed + i * 100 + len(w))
                results, discarded = bench_workload(jdk, w, args.config_list, args, classes, agent, work, rng)
                t, summary = table(args.config_list, results)
                cls, threads, requests, quick_requests, extra, _ = WORKLOADS[w]
                n = quick_requests if args.quick else requests
                out += [f"{cls} {' '.join(extra[-1:])} ({threads} threads × {n} requests), {args.rounds} rounds"
                        + (f", {discarded} busier rounds discarded" if discarded else "") + ":\n", t, ""]
                compared = pairs(args.config_list, results)
                if compared:
                    out += ["Round by round (wall time of one configuration over the other's):\n", *compared, ""]
                if "live" in summary and "alloc" in summary:
                    other = {r.round: r for r in results["alloc"]}
                    r = statistics.median(x.wall_s / other[x.round].wall_s for x in results["live"])
                    state = "not judged (--quick)" if args.quick else ("met" if r <= GOAL_LIVE_RATIO else "NOT met")
                    sentence = (f"Goal (`alloc=512k,live=512k` ≤ {GOAL_LIVE_RATIO} × `alloc=512k`) on {cls}: "
                                f"{r:.3f}, **{state}**.")
                    out.append(sentence + "\n")
                    verdicts.append(sentence)
                if "all" in summary:
                    r = summary["all"]["wall_ratio_median"]
                    aa = summary.get("none-aa", {}).get("wall_ratio_median")
                    state = "met" if r <= GOAL_ALL_RATIO else "NOT met"
                    if args.quick:
                        state = "not judged (--quick)"
                    sentence = (f"Goal (all four types together ≤ {GOAL_ALL_RATIO}) on {cls}: "
                                f"{r:.3f}, **{state}**" + (f" (A/A control {aa:.3f})" if aa else "") + ".")
                    out.append(sentence + "\n")
                    verdicts.append(sentence)
        out.append(f"Load average at end {os.getloadavg()[0]:.2f}; took "
                   f"{(datetime.datetime.now(datetime.timezone.utc) - started).total_seconds() / 60:.1f} min.")
        print("\n".join(out))
    except oh.BenchError as e:
        oh.log(f"\nBENCHMARK FAILED, no results reported:\n{e}")
        code = 1
    finally:
        if args.keep or code == 1:
            oh.log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
