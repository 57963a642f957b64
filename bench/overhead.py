#!/usr/bin/env python3
"""Overhead of the otelprof CPU sampler on a fixed-work JVM workload, against a no-agent
baseline and JFR measured in the same run.

Two measurements, each in alternating rounds (every round runs every configuration once, in a
freshly shuffled order, so that drift on a shared machine hits all configurations alike):

1. CPU overhead: bench/workloads/FixedWork.java, a fixed amount of work on 2 threads (by
   default its `compute` kind: deep call chains over arithmetic, whose runs agree to about 1 %;
   `--workload service` for the service-like requests, whose runs do not). For each run:
   whole-process wall time (spawn to exit, so JVM start-up and the agent's final profile
   write are included) and the child's CPU time (user + sys from wait4); with `--warmup N`
   also the process's CPU time over the requests after N warm-up requests per thread (the
   steady state, without the JIT's own CPU time). Reported per configuration: the median, and
   the median / min / max of the per-round ratio to the same round's no-agent run. A second
   no-agent configuration (the A/A control) shows how far two identical configurations drift
   apart in the same run: the noise floor of that run. `--pairing concurrent` runs each
   configuration at the same time as a no-agent run of its own instead, so that whatever
   slows the machine down slows both.
2. Memory: bench/workloads/IdleThreads.java, 200 threads blocked on a latch for 3 s, then the
   JVM's own VmRSS. Reported: the median per-round RSS difference agent minus no agent.

Every run is checked (exit code 0, the workload's result line, identical checksums across
runs; with the agent the `otelprof: stopped;` line and readable pprof files; with JFR a
recording file). A broken run stops the benchmark with an error: it never reports a ratio
computed from a run that did not do what it claims.

Progress goes to stderr; the results go to stdout as markdown, ready for a dated report in
bench/reports/. BENCHMARKS.md ("CPU sampler overhead") explains the method, the caveats, the
goals and the current numbers.

    python3 bench/overhead.py                      # default java, 7 rounds
    python3 bench/overhead.py --jdk all --rounds 9 # every JDK under /usr/lib/jvm
    python3 bench/overhead.py --quick              # smoke run for CI (about a minute per JDK)
    python3 bench/overhead.py --configs none-aa,agent --rounds 15 --max-other-load 0.25
    python3 bench/overhead.py --workload service --pairing concurrent --warmup 300000
    python3 bench/overhead.py --configs agent-timers,agent-perf-1ms,agent-timers-1ms,asprof-cpu-1ms \
        --async-profiler /path/to/libasyncProfiler.so      # the CPU engines, walks per CPU second

The table's "walks per CPU second" is the stack walks a run made (otelprof's `cpu_walks`; for
async-profiler the samples in its collapsed output) over the process's CPU time: at `cpu=1ms`
perf events walk once per millisecond of CPU, the tick-bound CPU timers about once per tick.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gzip
import hashlib
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def shown_path(p: Path) -> str:
    """`p` relative to the repository when inside it: results name no machine's paths."""
    try:
        return str(Path(p).resolve().relative_to(REPO))
    except ValueError:
        return str(p)
WORKLOADS = REPO / "bench" / "workloads"
DEFAULT_AGENT = REPO / "target" / "release" / "libotelprof.so"
JVM_ROOT = Path("/usr/lib/jvm")

# Identical for every configuration. A fixed heap keeps heap sizing out of the comparison;
# G1 is named so that GC ergonomics cannot differ between machines with 1 and 2 CPUs.
COMMON_JVM_ARGS = ["-XX:+UseG1GC", "-Xms512m", "-Xmx512m"]

# FixedWork requests per thread, by workload kind: about 5 s per run on the benchmark machine.
FULL = {"rounds": 7, "mem_rounds": 5, "requests": {"compute": 1_000_000, "service": 200_000}, "idle_wait_ms": 3000}
QUICK = {"rounds": 3, "mem_rounds": 2, "requests": {"compute": 150_000, "service": 30_000}, "idle_wait_ms": 1000}

WORK_THREADS = 2
IDLE_THREADS = 200
RUN_TIMEOUT_S = 300

QUICK_CAVEAT = " (a --quick run is too short and has too few rounds to judge this)"

# Goals, as BENCHMARKS.md states them ("CPU sampler overhead").
GOAL_WALL_RATIO = 1.01
GOAL_RSS_MB = 30.0  # decimal MB, as the goal says; the tables are in MiB
GOAL_RSS_MIB = GOAL_RSS_MB * 1e6 / 2**20

# Children must see exactly the flags we pass: these would add options behind our back.
SCRUBBED_ENV = ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A run was invalid, or the benchmark could not be set up: no numbers are reported."""


@dataclasses.dataclass(frozen=True)
class Config:
    key: str
    label: str
    kind: str  # "none" | "agent" | "jfr" | "asprof"
    setting: str = ""  # agent options (out= and period= are added), JFR settings name, or async-profiler's
    default: bool = True  # measured unless --configs says otherwise
    agent: Path | None = None  # another build of the agent than --agent (--baseline-agent)

    def jvm_args(self, run_dir: Path, agent: Path) -> list[str]:
        if self.kind == "asprof":
            if ASYNC_PROFILER is None:
                raise BenchError(f"{self.key} needs --async-profiler PATH (libasyncProfiler.so)")
            return [f"-agentpath:{ASYNC_PROFILER}=start,{self.setting},collapsed,file={run_dir / 'asprof.txt'}"]
        if self.kind == "agent":
            return [f"-agentpath:{self.agent or agent}={self.setting},out={run_dir / 'out'},period=60s"]
        if self.kind == "jfr":
            rec = run_dir / "recording.jfr"
            return [f"-XX:StartFlightRecording:settings={self.setting},filename={rec},dumponexit=true"]
        return []


# libasyncProfiler.so for the `asprof` configurations (--async-profiler).
ASYNC_PROFILER: Path | None = None

BASELINE = Config("none", "no agent (baseline)", "none")
CONFIGS = {
    c.key: c
    for c in [
        BASELINE,
        # A second no-agent run per round: its ratio to the baseline is the noise floor.
        Config("none-aa", "no agent, again (A/A control)", "none"),
        Config("agent", "otelprof cpu=10ms", "agent", "cpu=10ms"),
        Config("agent-itimer", "otelprof cpu=10ms,clock=itimer", "agent", "cpu=10ms,clock=itimer"),
        # The CPU engines side by side (not by default): `agent` takes perf events where the
        # kernel allows them; these name the engine, at 10 ms and 1 ms, and async-profiler's
        # perf-events engine at both (--async-profiler).
        Config("agent-perf", "otelprof cpu=10ms,clock=perf", "agent", "cpu=10ms,clock=perf", default=False),
        Config("agent-timers", "otelprof cpu=10ms,clock=cpu", "agent", "cpu=10ms,clock=cpu", default=False),
        Config("agent-perf-1ms", "otelprof cpu=1ms,clock=perf", "agent", "cpu=1ms,clock=perf", default=False),
        Config("agent-timers-1ms", "otelprof cpu=1ms,clock=cpu", "agent", "cpu=1ms,clock=cpu", default=False),
        Config("asprof-cpu-1ms", "async-profiler event=cpu,interval=1ms", "asprof", "event=cpu,interval=1ms",
               default=False),
        Config("asprof-cpu-10ms", "async-profiler event=cpu,interval=10ms", "asprof", "event=cpu,interval=10ms",
               default=False),
        # Not by default: a tenth of the signals, so what remains of the overhead at 100 ms is
        # the agent's fixed cost (JVMTI events, start-up, the final write), not sampling.
        Config("agent-100ms", "otelprof cpu=100ms", "agent", "cpu=100ms", default=False),
        Config("jfr-default", "JFR settings=default", "jfr", "default"),
        Config("jfr-profile", "JFR settings=profile", "jfr", "profile"),
    ]
}
MEM_CONFIGS = [BASELINE, CONFIGS["agent"]]


@dataclasses.dataclass
class Run:
    config: str
    round: int
    wall_s: float
    cpu_s: float
    other_load: float
    stdout: str
    agent_stats: dict[str, int]
    notes: list[str]
    # FixedWork's steady-state window (after its warm-up requests): process CPU time.
    window_cpu_s: float | None = None


@dataclasses.dataclass
class Jdk:
    java: Path
    home: Path
    version: str  # runtime name and build, from `java -version`
    short: str


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Setup


def resolve_jdks(specs: list[str]) -> list[Jdk]:
    javas: list[Path] = []
    for spec in specs or ["default"]:
        if spec == "default":
            found = shutil.which("java")
            if not found:
                raise BenchError("no `java` on PATH; pass --jdk /path/to/jdk")
            javas.append(Path(found))
        elif spec == "all":
            javas.extend(sorted(p / "bin" / "java" for p in JVM_ROOT.iterdir() if (p / "bin" / "java").is_file()))
        else:
            p = Path(spec)
            java = p if p.is_file() else p / "bin" / "java"
            if not java.is_file():
                raise BenchError(f"--jdk {spec}: neither a java executable nor a JDK home")
            javas.append(java)
    seen: dict[Path, Path] = {}
    for j in javas:
        seen.setdefault(j.resolve(), j)
    jdks = []
    for real in seen:
        out = subprocess.run([str(real), "-version"], capture_output=True, text=True, check=True).stderr
        lines = [l.strip() for l in out.splitlines() if l.strip()]
        m = re.search(r'version "([^"]+)"', lines[0]) if lines else None
        build = re.search(r"\(build ([^)]+)\)", lines[1]) if len(lines) > 1 else None
        short = m.group(1) if m else "?"
        vendor = lines[1].split(" (build")[0] if len(lines) > 1 else ""
        version = f"{vendor} {build.group(1) if build else short}".strip()
        jdks.append(Jdk(java=real, home=real.parent.parent, version=version, short=short))
    return jdks


def compile_workloads(jdks: list[Jdk], classes: Path) -> None:
    javacs = [j.home / "bin" / "javac" for j in jdks if (j.home / "bin" / "javac").is_file()]
    if not javacs:
        raise BenchError("none of the --jdk choices has a javac; pass at least one JDK, not only JREs")
    javac = javacs[0]
    sources = sorted(str(p) for p in WORKLOADS.glob("*.java"))
    # --release 17: the same class files run on every JDK we compare.
    cmd = [str(javac), "--release", "17", "-d", str(classes), *sources]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"javac failed:\n{r.stdout}{r.stderr}")


def snapshot_agent(agent: Path, into: Path) -> tuple[Path, str]:
    """Copies the agent into the temp dir, so a rebuild by someone else mid-run cannot mix two
    builds in one benchmark. Waits a while if the file is briefly missing (a rebuild)."""
    deadline = time.monotonic() + 120
    if not agent.is_file():
        log(f"waiting up to 2 min for {agent} to appear (rebuild in progress?)")
    while not agent.is_file():
        if time.monotonic() > deadline:
            raise BenchError(f"agent not found: {agent} (build it with `cargo build --release`)")
        time.sleep(2)
    data = agent.read_bytes()
    copy = into / agent.name
    copy.write_bytes(data)
    return copy, hashlib.sha256(data).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# One run


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["LC_ALL"] = "C"
    return env


def machine_busy_s() -> float:
    """CPU-seconds the whole machine has spent not idle since boot (all CPUs, /proc/stat),
    counting steal: time the hypervisor gave to other guests is time our child did not get."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    # cpu user nice system idle iowait irq softirq steal [guest guest_nice: already in user]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def wait_for_quiet(limit: float, max_wait_s: float = 120.0) -> None:
    """Waits until the machine's load (all of it: nothing of ours runs now) has been ≤ `limit`
    CPUs for 2 s in a row, or `max_wait_s` has passed; a round started into someone else's
    build would only be discarded."""
    deadline = time.monotonic() + max_wait_s
    quiet_since = None
    busy, t = machine_busy_s(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        busy2, t2 = machine_busy_s(), time.monotonic()
        load = (busy2 - busy) / (t2 - t)
        busy, t = busy2, t2
        if load > limit:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = t2
        elif t2 - quiet_since >= 2.0:
            return
    log(f"  the machine stayed busy for {max_wait_s:.0f} s; starting the round anyway")


@dataclasses.dataclass
class Exit:
    code: int
    wall_s: float
    cpu_s: float
    # CPUs' worth of work by everything else on the machine while the child ran.
    other_load: float
    stdout: str
    stderr: str


def spawn_and_wait(cmd: list[str], cwd: Path, timeout_s: float) -> Exit:
    """Runs `cmd` to its end (see spawn_together)."""
    return spawn_together([(cmd, cwd)], timeout_s)[0]


def spawn_together(jobs: list[tuple[list[str], Path]], timeout_s: float) -> list[Exit]:
    """Starts every (command, directory) at once and waits for all of them. Output goes to
    files, not pipes, so a child never blocks on us; wait4 gives each child's own rusage (all
    its threads, reaped) and the moment it exited. Other load: what the rest of the machine
    used meanwhile, these children excluded."""
    files = []
    procs: list[subprocess.Popen] = []
    busy_before = machine_busy_s()
    start = time.monotonic()
    try:
        for cmd, cwd in jobs:
            out, err = open(cwd / "stdout.txt", "wb"), open(cwd / "stderr.txt", "wb")
            files += [out, err]
            procs.append(subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          env=child_env()))
        pending = {p.pid: i for i, p in enumerate(procs)}
        done: dict[int, tuple[int, float, float]] = {}

        def kill_on_timeout() -> None:
            for pid in list(pending):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        timer = threading.Timer(timeout_s, kill_on_timeout)
        timer.start()
        try:
            while pending:
                pid, status, usage = os.wait4(-1, 0)
                i = pending.pop(pid, None)
                if i is None:
                    continue  # not one of ours
                code = os.waitstatus_to_exitcode(status)
                procs[i].returncode = code  # reaped by wait4; keeps Popen from waiting again
                done[i] = (code, time.monotonic() - start, usage.ru_utime + usage.ru_stime)
        finally:
            timer.cancel()
            kill_on_timeout()
    finally:
        for f in files:
            f.close()
    wall_all = time.monotonic() - start
    busy = machine_busy_s() - busy_before
    other = max(0.0, busy - sum(d[2] for d in done.values())) / wall_all
    return [Exit(done[i][0], done[i][1], done[i][2], other,
                 (cwd / "stdout.txt").read_text(errors="replace"), (cwd / "stderr.txt").read_text(errors="replace"))
            for i, (_, cwd) in enumerate(jobs)]


def check_agent_output(cfg: Config, run_dir: Path, stderr: str, want_samples: bool) -> tuple[dict[str, int], list[str]]:
    lines = [l for l in stderr.splitlines() if l.startswith("otelprof:")]
    started = [l for l in lines if "profiling CPU every" in l]
    stopped = [l for l in lines if l.startswith("otelprof: stopped;")]
    if not started:
        raise BenchError("the agent did not log that it started profiling")
    if "clock=itimer" in cfg.setting and "ITIMER_PROF" not in started[0]:
        raise BenchError(f"clock=itimer asked, but the agent says: {started[0]}")
    engine = [l for l in lines if "cpu engine:" in l]
    if "clock=perf" in cfg.setting and not any("cpu engine: perf (" in l for l in engine):
        raise BenchError(f"clock=perf asked, but the agent says: {engine}")
    if len(stopped) != 1:
        raise BenchError("no `otelprof: stopped;` line on stderr")
    fatal = [l for l in lines if "profiling is off" in l or "internal error" in l]
    if fatal:
        raise BenchError(f"the agent reported: {fatal[0]}")
    stats = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)\b", stopped[0])}
    # Builds before the counters were renamed (a --baseline-agent) say `samples=`.
    if "samples_all_types" not in stats and "samples" in stats:
        stats["samples_all_types"] = stats["samples"]
    for key in ("samples_all_types", "profiles_written", "write_errors"):
        if key not in stats:
            raise BenchError(f"`{key}=` missing from the stopped line: {stopped[0]}")
    if stats["profiles_written"] < 1 or stats["write_errors"] != 0:
        raise BenchError(f"the agent wrote no profile or had write errors: {stopped[0]}")
    if want_samples and stats["samples_all_types"] == 0:
        raise BenchError(f"the agent took no samples of a CPU-bound workload: {stopped[0]}")
    files = sorted((run_dir / "out").glob("*.pb.gz"))
    if not files:
        raise BenchError(f"no *.pb.gz in {run_dir / 'out'}")
    for f in files:
        try:
            if not gzip.decompress(f.read_bytes()):
                raise BenchError(f"{f.name} is an empty profile")
        except (OSError, EOFError) as e:
            raise BenchError(f"{f.name} is not valid gzip: {e}") from e
    others = [l for l in lines if l not in started and l not in stopped]
    return stats, others


def run_once(jdk: Jdk, cfg: Config, main: list[str], classes: Path, agent: Path, work_dir: Path,
             tag: str, want_samples: bool) -> Run:
    return run_together(jdk, [(cfg, tag)], main, classes, agent, work_dir, want_samples)[0]


def run_together(jdk: Jdk, runs: list[tuple[Config, str]], main: list[str], classes: Path, agent: Path,
                 work_dir: Path, want_samples: bool) -> list[Run]:
    """Runs each (configuration, tag) at the same time, checks every run and returns them in order."""
    jobs = []
    for cfg, tag in runs:
        run_dir = work_dir / tag
        (run_dir / "out").mkdir(parents=True)
        jobs.append(([str(jdk.java), *COMMON_JVM_ARGS, *cfg.jvm_args(run_dir, agent), "-cp", str(classes), *main],
                     run_dir))
    exits = spawn_together(jobs, RUN_TIMEOUT_S)
    return [checked_run(jdk, cfg, tag, cmd, run_dir, ex, want_samples)
            for (cfg, tag), (cmd, run_dir), ex in zip(runs, jobs, exits)]


def checked_run(jdk: Jdk, cfg: Config, tag: str, cmd: list[str], run_dir: Path, ex: Exit, want_samples: bool) -> Run:
    stdout, stderr = ex.stdout, ex.stderr

    def fail(why: str) -> BenchError:
        def tail(text: str) -> str:
            return "\n".join(text.splitlines()[-15:])

        return BenchError(f"invalid run {tag} ({cfg.label}, {jdk.short}): {why}\n"
                          f"command: {' '.join(cmd)}\nstdout tail:\n{tail(stdout)}\nstderr tail:\n{tail(stderr)}")

    if ex.code != 0:
        raise fail(f"exit code {ex.code}")
    if not re.search(r"^result=\S+", stdout, re.M):
        raise fail("the workload printed no result line")
    stats: dict[str, int] = {}
    notes: list[str] = []
    try:
        if cfg.kind == "agent":
            stats, notes = check_agent_output(cfg, run_dir, stderr, want_samples)
        elif "otelprof" in stderr:
            raise BenchError("otelprof output in a run without the agent")
        if cfg.kind == "asprof":
            stats["cpu_walks"] = asprof_samples(run_dir / "asprof.txt")
        if cfg.kind == "jfr":
            rec = run_dir / "recording.jfr"
            if not rec.is_file() or rec.stat().st_size == 0:
                raise BenchError("JFR wrote no recording")
            with open(rec, "rb") as f:
                if f.read(4) != b"FLR\0":
                    raise BenchError("the JFR recording has no FLR magic")
    except BenchError as e:
        raise fail(str(e)) from None
    shutil.rmtree(run_dir)
    window = re.search(r"^window cpu_s=([\d.]+)", stdout, re.M)
    return Run(cfg.key, 0, ex.wall_s, ex.cpu_s, ex.other_load, stdout, stats, notes,
               float(window.group(1)) if window else None)


def asprof_samples(collapsed: Path) -> int:
    """The samples in async-profiler's collapsed output: each line ends with its count."""
    if not collapsed.is_file():
        raise BenchError("async-profiler wrote no output")
    total = 0
    for line in collapsed.read_text(errors="replace").splitlines():
        count = line.rsplit(" ", 1)[-1]
        if count.isdigit():
            total += int(count)
    if total == 0:
        raise BenchError("async-profiler's output has no samples")
    return total


# ---------------------------------------------------------------------------------------------
# Rounds


def round_orders(configs: list[Config], rounds: int, rng: random.Random) -> list[list[Config]]:
    orders = []
    for _ in range(rounds):
        order = list(configs)
        rng.shuffle(order)
        orders.append(order)
    return orders


def cpu_benchmark(jdk: Jdk, configs: list[Config], args, classes: Path, agent: Path, work: Path,
                  rng: random.Random) -> tuple[dict[str, list[Run]], int]:
    """Returns the runs of the kept rounds per configuration, and how many rounds were
    discarded because something else on the machine was busy (--max-other-load)."""
    main = ["FixedWork", str(WORK_THREADS), str(args.requests)]
    if args.warmup or args.workload != "service":
        main += [str(args.warmup), args.workload]
    results: dict[str, list[Run]] = {c.key: [] for c in configs}
    checksums: set[str] = set()

    def checked(run: Run, tag: str) -> Run:
        line = re.search(r"^result=\S+.*$", run.stdout, re.M)
        checksums.add(line.group(0) if line else "")
        if len(checksums) != 1:
            raise BenchError(f"run {tag} printed a different result than earlier runs: {sorted(checksums)}; "
                             "the configurations did not do identical work")
        return run

    # One untimed run per configuration: warms the page cache and the JDK's CDS archive, and
    # fails fast on a broken configuration before minutes of rounds.
    for cfg in configs:
        log(f"  warm-up {cfg.label}")
        checked(run_once(jdk, cfg, main, classes, agent, work, f"warmup-{cfg.key}", True), "warm-up")
    kept = tried = pairs = 0
    limit = args.max_other_load
    max_tries = args.rounds if limit is None else (args.max_tries or args.rounds * 3)
    while kept < args.rounds:
        if tried == max_tries:
            raise BenchError(f"the machine was too busy: only {kept} of {tried} rounds had other load "
                             f"≤ {limit} CPUs; run later, or raise --max-other-load")
        tried += 1
        if limit is not None:
            wait_for_quiet(limit)
        runs = []
        if args.pairing == "concurrent":
            # Each configuration beside a baseline run of its own, started together; the pair
            # shares its round number, so ratios compare the two runs of a pair.
            others = [c for c in round_orders(configs, 1, rng)[0] if c.key != BASELINE.key]
            for cfg in others:
                pairs += 1
                pair = [(BASELINE, f"t{tried}-p{pairs}-{BASELINE.key}"), (cfg, f"t{tried}-p{pairs}-{cfg.key}")]
                order = pair if pairs % 2 else pair[::-1]  # which one starts first alternates
                done = run_together(jdk, order, main, classes, agent, work, True)
                for run, (_, tag) in zip(done, order):
                    run.round = pairs
                    runs.append(checked(run, tag))
        else:
            for cfg in round_orders(configs, 1, rng)[0]:
                tag = f"t{tried}-{cfg.key}"
                runs.append(checked(run_once(jdk, cfg, main, classes, agent, work, tag, True), tag))
        worst = max(r.other_load for r in runs)
        detail = ", ".join(f"{r.config} {r.wall_s:.2f}s/{r.cpu_s:.2f}cpu" for r in runs)
        # The whole round goes, whichever run was disturbed: dropping single runs would favour
        # whichever configuration happened to run in the quiet moments.
        if limit is not None and worst > limit:
            log(f"  round discarded (other load up to {worst:.2f} CPUs > {limit}): {detail}")
            continue
        kept += 1
        for run in runs:
            if args.pairing != "concurrent":
                run.round = kept
            results[run.config].append(run)
        log(f"  round {kept}/{args.rounds} (other load ≤ {worst:.2f} CPUs): {detail}")
    return results, tried - kept


def memory_benchmark(jdk: Jdk, args, classes: Path, agent: Path, work: Path,
                     rng: random.Random) -> dict[str, list[tuple[int, float, float]]]:
    """Per config: (round, VmRSS MiB, VmHWM MiB)."""
    main = ["IdleThreads", str(IDLE_THREADS), str(args.idle_wait_ms)]
    results: dict[str, list[tuple[int, float, float]]] = {c.key: [] for c in MEM_CONFIGS}
    for r, order in enumerate(round_orders(MEM_CONFIGS, args.mem_rounds, rng), 1):
        line = []
        for cfg in order:
            tag = f"mem{r}-{cfg.key}"
            run = run_once(jdk, cfg, main, classes, agent, work, tag, False)
            m = re.search(r"rss_kb=(\d+) hwm_kb=(\d+) threads=(\d+)", run.stdout)
            if not m:
                raise BenchError(f"run {tag}: IdleThreads printed no rss_kb= line:\n{run.stdout}")
            if int(m.group(3)) < IDLE_THREADS:
                raise BenchError(f"run {tag}: only {m.group(3)} threads alive at the measurement")
            rss, hwm = int(m.group(1)) / 1024, int(m.group(2)) / 1024
            results[cfg.key].append((r, rss, hwm))
            line.append(f"{cfg.key} {rss:.1f} MiB")
        log(f"  memory round {r}/{args.mem_rounds}: " + ", ".join(line))
    return results


# ---------------------------------------------------------------------------------------------
# Report


def ratios(runs: list[Run], base: list[Run], attr: str) -> list[float]:
    by_round = {b.round: getattr(b, attr) for b in base}
    return [getattr(r, attr) / by_round[r.round] for r in runs]


def cpu_table(configs: list[Config], results: dict[str, list[Run]], steady: bool = False) -> tuple[str, dict]:
    """steady: add the steady-state window's CPU ratios (runs with a FixedWork warm-up)."""
    base = results[BASELINE.key]
    rows = [
        "| configuration | wall median (s) | wall ratio median | wall ratio min–max "
        "| CPU median (s) | CPU ratio median | CPU ratio min–max "
        + ("| steady-state CPU ratio median | steady-state CPU ratio min–max " if steady else "")
        + "| agent samples (median) | walks per CPU second (median) | other load (CPUs, median) |",
        "|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if steady else "") + "---:|---:|---:|",
    ]
    summary = {}
    for cfg in configs:
        runs = results[cfg.key]
        wall = statistics.median(r.wall_s for r in runs)
        cpu = statistics.median(r.cpu_s for r in runs)
        wr, cr = ratios(runs, base, "wall_s"), ratios(runs, base, "cpu_s")
        sr = ratios(runs, base, "window_cpu_s") if steady else []
        samples = statistics.median(r.agent_stats["samples_all_types"] for r in runs) if cfg.kind == "agent" else None
        other = statistics.median(r.other_load for r in runs)
        walks = (statistics.median(r.agent_stats["cpu_walks"] / r.cpu_s for r in runs)
                 if all("cpu_walks" in r.agent_stats for r in runs) and cfg.kind != "none" else None)
        walks_cell = "–" if walks is None else f"{walks:.0f}"
        summary[cfg.key] = {
            "wall_median_s": wall, "cpu_median_s": cpu,
            "wall_ratio_median": statistics.median(wr), "wall_ratio_min": min(wr), "wall_ratio_max": max(wr),
            "cpu_ratio_median": statistics.median(cr), "cpu_ratio_min": min(cr), "cpu_ratio_max": max(cr),
            "samples_median": samples, "walks_per_cpu_s_median": walks, "other_load_median": other,
        }
        if steady:
            summary[cfg.key] |= {"steady_cpu_ratio_median": statistics.median(sr), "steady_cpu_ratio_min": min(sr),
                                 "steady_cpu_ratio_max": max(sr)}
        if cfg.key == BASELINE.key:
            rows.append(f"| {cfg.label} | {wall:.3f} | 1 | – | {cpu:.3f} | 1 | – | " + ("1 | – | " if steady else "")
                        + f"– | – | {other:.2f} |")
        else:
            rows.append(
                f"| {cfg.label} | {wall:.3f} | **{statistics.median(wr):.3f}** | {min(wr):.3f}–{max(wr):.3f} "
                f"| {cpu:.3f} | {statistics.median(cr):.3f} | {min(cr):.3f}–{max(cr):.3f} "
                + (f"| **{statistics.median(sr):.4f}** | {min(sr):.4f}–{max(sr):.4f} " if steady else "")
                + f"| {'–' if samples is None else f'{samples:.0f}'} | {walks_cell} | {other:.2f} |")
    return "\n".join(rows), summary


def mem_table(results: dict[str, list[tuple[int, float, float]]]) -> tuple[str, dict]:
    base = {r: (rss, hwm) for r, rss, hwm in results[BASELINE.key]}
    rows = [
        "| configuration | VmRSS median (MiB) | Δ RSS vs no agent, median (MiB) | Δ min–max | Δ VmHWM median (MiB) |",
        "|---|---:|---:|---:|---:|",
    ]
    summary = {}
    for cfg in MEM_CONFIGS:
        runs = results[cfg.key]
        rss = statistics.median(x[1] for x in runs)
        d = [x[1] - base[x[0]][0] for x in runs]
        dh = [x[2] - base[x[0]][1] for x in runs]
        summary[cfg.key] = {"rss_median_mib": rss, "rss_delta_median_mib": statistics.median(d),
                            "rss_delta_min_mib": min(d), "rss_delta_max_mib": max(d),
                            "hwm_delta_median_mib": statistics.median(dh)}
        if cfg.key == BASELINE.key:
            rows.append(f"| {cfg.label} | {rss:.1f} | 0 | – | 0 |")
        else:
            rows.append(f"| {cfg.label} | {rss:.1f} | **{statistics.median(d):+.1f}** "
                        f"| {min(d):+.1f} – {max(d):+.1f} | {statistics.median(dh):+.1f} |")
    return "\n".join(rows), summary


def verdict(summary: dict, metric: str, label: str, quick: bool, digits: int = 3) -> tuple[str, str]:
    """('met' | 'NOT met' | 'inconclusive', the sentence for the report) for the agent's median
    `metric` ratio (a key prefix of the summary: wall_ratio, steady_cpu_ratio). The A/A control
    (a second no-agent configuration) shows how far two identical configurations drift apart in
    this run; when that is more than the 1 % we try to resolve, the agent's ratio says nothing."""
    w = summary["agent"][f"{metric}_median"]
    head = f"Goal: otelprof cpu=10ms median {label} ≤ {GOAL_WALL_RATIO}: {w:.{digits}f}"
    if quick:
        return "inconclusive", f"{head}, **not judged**{QUICK_CAVEAT}."
    aa = summary.get("none-aa")
    if aa is None:
        state = "met" if w <= GOAL_WALL_RATIO else "NOT met"
        return state, f"{head}, **{state}** (no A/A control in this run to tell the noise)."
    control = aa[f"{metric}_median"]
    if abs(control - 1) > GOAL_WALL_RATIO - 1:
        return "inconclusive", (
            f"{head}, **inconclusive**: the A/A control (no agent vs no agent) came out at "
            f"{control:.{digits}f}, so this run cannot resolve "
            f"{(GOAL_WALL_RATIO - 1) * 100:.0f} %. Rerun on a quieter machine, with more rounds, "
            "or with --max-other-load.")
    state = "met" if w <= GOAL_WALL_RATIO else "NOT met"
    return state, f"{head}, **{state}** (A/A control {control:.{digits}f})."


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str]):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jdk", action="append", default=[],
                   help="'default' (java on PATH), 'all' (every JDK under /usr/lib/jvm), or a JDK home / "
                        "java executable; repeatable. Default: default")
    p.add_argument("--rounds", type=int, help=f"rounds of the CPU benchmark (default {FULL['rounds']}, "
                                              f"--quick {QUICK['rounds']})")
    p.add_argument("--mem-rounds", type=int, help=f"rounds of the memory benchmark (default {FULL['mem_rounds']})")
    p.add_argument("--agent", type=Path, default=DEFAULT_AGENT, help="path to libotelprof.so (default: %(default)s)")
    p.add_argument("--async-profiler", type=Path, metavar="SO",
                   help="path to libasyncProfiler.so, for the asprof-* configurations")
    p.add_argument("--baseline-agent", type=Path, metavar="SO",
                   help="another build of libotelprof.so: adds the configuration agent-baseline (cpu=10ms "
                        "with that build) to every round, so two builds compare in one run")
    p.add_argument("--quick", action="store_true", help="smoke run for CI: fewer rounds, less work per run")
    p.add_argument("--requests", type=int, help=f"FixedWork requests per thread (default by --workload: "
                                                f"{FULL['requests']}, --quick {QUICK['requests']})")
    p.add_argument("--configs", default=",".join(k for k, c in CONFIGS.items() if c.default),
                   help="comma-separated configurations of the CPU benchmark (default: %(default)s; "
                        f"also: {', '.join(k for k, c in CONFIGS.items() if not c.default)}); "
                        "'none' is always included")
    p.add_argument("--pairing", choices=("sequential", "concurrent"), default="sequential",
                   help="CPU benchmark: run configurations one at a time (default), or each at the same "
                        "time as a no-agent run of its own, so that whatever slows the machine down slows "
                        "both (each JVM then has about one CPU; compare CPU times, not wall times)")
    p.add_argument("--workload", choices=("compute", "service"), default="compute",
                   help="FixedWork's kind of request: deep call chains over arithmetic, which runs alike in "
                        "every JVM (default), or the service-like one, more realistic but up to ±30 %% apart "
                        "between identical runs (see BENCHMARKS.md)")
    p.add_argument("--warmup", type=int, default=0, metavar="N",
                   help="FixedWork warm-up requests per thread before the measured ones; adds the "
                        "steady-state CPU ratio (process CPU over the measured requests only)")
    p.add_argument("--skip-cpu", action="store_true", help="memory benchmark only")
    p.add_argument("--skip-memory", action="store_true", help="CPU benchmark only")
    p.add_argument("--max-other-load", type=float, metavar="CPUS",
                   help="discard and repeat a CPU-benchmark round if, during any of its runs, the rest of "
                        "the machine used more than this many CPUs (from /proc/stat, steal included); "
                        "also waits (up to 2 min) for a quiet moment before each round; gives up after "
                        "--max-tries rounds. Default: keep every round")
    p.add_argument("--max-tries", type=int, metavar="N",
                   help="with --max-other-load: rounds to try in all before giving up (default 3 × --rounds)")
    p.add_argument("--seed", type=int, default=20240601, help="seed of the per-round order shuffle")
    p.add_argument("--json", type=Path, help="also write raw runs and summaries to this file")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (classes, copies of the agent)")
    p.add_argument("--check-goals", action="store_true",
                   help=f"exit 3 unless the agent's median wall ratio is judged ≤ {GOAL_WALL_RATIO} and its RSS delta ≤ "
                        f"{GOAL_RSS_MB:.0f} MB (not for noisy CI machines)")
    args = p.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    for key in ("rounds", "mem_rounds", "requests"):
        if getattr(args, key) is None:
            setattr(args, key, sizes[key][args.workload] if key == "requests" else sizes[key])
    args.idle_wait_ms = sizes["idle_wait_ms"]
    if args.rounds < 1 or args.mem_rounds < 1 or args.requests < 1:
        p.error("--rounds, --mem-rounds and --requests must be positive")
    if args.warmup < 0:
        p.error("--warmup must not be negative")
    keys = [k.strip() for k in args.configs.split(",") if k.strip()]
    unknown = [k for k in keys if k not in CONFIGS]
    if unknown:
        p.error(f"unknown configuration(s) {unknown}; known: {', '.join(CONFIGS)}")
    args.config_list = [BASELINE] + [CONFIGS[k] for k in keys if k != BASELINE.key]
    if any(c.kind == "asprof" for c in args.config_list):
        if args.async_profiler is None or not args.async_profiler.is_file():
            p.error("the asprof-* configurations need --async-profiler PATH to libasyncProfiler.so")
    return args


def main(argv: list[str]) -> int:
    global ASYNC_PROFILER
    args = parse_args(argv)
    if args.async_profiler:
        ASYNC_PROFILER = args.async_profiler.resolve()
    command = "python3 bench/overhead.py" + ("" if not argv else " " + " ".join(argv))
    work = Path(tempfile.mkdtemp(prefix="otelprof-bench-"))
    exit_code = 0
    try:
        jdks = resolve_jdks(args.jdk)
        classes = work / "classes"
        compile_workloads(jdks, classes)
        agent, agent_sha = snapshot_agent(args.agent.resolve(), work)
        if args.baseline_agent:
            (work / "baseline").mkdir()
            base_agent, base_sha = snapshot_agent(args.baseline_agent.resolve(), work / "baseline")
            args.config_list.append(Config("agent-baseline", f"otelprof cpu=10ms, baseline build {base_sha}",
                                           "agent", "cpu=10ms", agent=base_agent))
        load_before = os.getloadavg()
        started = datetime.datetime.now(datetime.timezone.utc)
        out = [
            f"Command: `{command}`  ",
            f"Date: {started:%Y-%m-%d %H:%M} UTC; host: {cpu_model()}, {os.cpu_count()} CPUs, "
            f"Linux {platform.release()}; load average at start {load_before[0]:.2f}  ",
            f"Agent: `{shown_path(args.agent)}` (sha256 {agent_sha}…); JVM flags of every run: `{' '.join(COMMON_JVM_ARGS)}`  ",
            f"CPU benchmark: FixedWork ({args.workload}), {WORK_THREADS} threads × {args.requests} requests"
            f"{f' after {args.warmup} warm-up requests' if args.warmup else ''}, {args.rounds} rounds"
            f"{' in concurrent pairs' if args.pairing == 'concurrent' else ''}; "
            f"memory: IdleThreads, {IDLE_THREADS} threads idle {args.idle_wait_ms} ms, {args.mem_rounds} rounds",
        ]
        report: dict = {"command": command, "date": started.isoformat(), "agent_sha256": agent_sha, "jdks": []}
        goals_missed = []
        for i, jdk in enumerate(jdks):
            rng = random.Random(args.seed + i)
            log(f"JDK {jdk.version} ({jdk.java})")
            out.append(f"\n#### {jdk.version}\n")
            entry: dict = {"jdk": jdk.version, "java": str(jdk.java)}
            if not args.skip_cpu:
                results, discarded = cpu_benchmark(jdk, args.config_list, args, classes, agent, work, rng)
                table, summary = cpu_table(args.config_list, results, steady=args.warmup > 0)
                kept = f"{args.rounds} round{'' if args.rounds == 1 else 's'}"
                if args.max_other_load is not None:
                    kept += (f" with other load ≤ {args.max_other_load} CPUs ({discarded} busier rounds "
                             "discarded)")
                if args.pairing == "concurrent":
                    how = ("each configuration ran at the same time as a no-agent run of its own (a pair); "
                           "ratios: to the no-agent run of the same pair; other load: CPUs used by the rest "
                           "of the machine during the pair")
                else:
                    how = ("ratios: per round, to that round's no-agent run; other load: CPUs used by the "
                           "rest of the machine during the run")
                if args.warmup:
                    how += (f"; steady state: process CPU time over the {args.requests} requests per thread "
                            f"that follow {args.warmup} warm-up requests per thread")
                out += [f"Wall and CPU time of FixedWork, {kept}; {how}:\n", table]
                notes = sorted({n for runs in results.values() for r in runs for n in r.notes})
                if notes:
                    out.append("\nAgent messages: " + "; ".join(f"`{n}`" for n in notes))
                entry["cpu"] = {"summary": summary, "discarded_rounds": discarded,
                                "runs": {k: [dataclasses.asdict(r) | {"stdout": None} for r in v]
                                         for k, v in results.items()}}
                if "agent" in summary:
                    state, sentence = verdict(summary, "wall_ratio", "wall ratio", args.quick)
                    out.append("\n" + sentence)
                    if args.warmup:
                        out.append("\n" + verdict(summary, "steady_cpu_ratio", "steady-state CPU ratio",
                                                   args.quick, digits=4)[1])
                    entry["cpu"]["wall_goal"] = state
                    if state != "met":
                        goals_missed.append(f"{jdk.short}: wall ratio {state}")
            if not args.skip_memory:
                mem, msummary = mem_table(memory_benchmark(jdk, args, classes, agent, work, rng))
                out += [f"\nResident memory with {IDLE_THREADS} idle threads, {args.mem_rounds} rounds "
                        "(Δ: per round, to that round's no-agent run):\n", mem]
                entry["memory"] = msummary
                d = msummary["agent"]["rss_delta_median_mib"]
                met = d <= GOAL_RSS_MIB
                out.append(f"\nGoal: RSS over the no-agent JVM ≤ {GOAL_RSS_MB:.0f} MB ({GOAL_RSS_MIB:.1f} MiB): "
                           f"{d:+.1f} MiB, "
                           f"**{'met' if met else 'NOT met'}**.")
                if not met:
                    goals_missed.append(f"{jdk.short}: RSS {d:+.1f} MiB")
            report["jdks"].append(entry)
        load_after = os.getloadavg()
        out.append(f"\nLoad average at end {load_after[0]:.2f}; "
                   f"took {(datetime.datetime.now(datetime.timezone.utc) - started).total_seconds() / 60:.1f} min.")
        print("\n".join(out))
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
        if goals_missed:
            log("goals missed: " + "; ".join(goals_missed))
            if args.check_goals:
                exit_code = 3
    except BenchError as e:
        log(f"\nBENCHMARK FAILED, no results reported:\n{e}")
        exit_code = 1
    finally:
        if args.keep or exit_code == 1:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
