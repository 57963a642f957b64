#!/usr/bin/env python3
"""What a stopped agent costs: the same fixed work timed in JVMs that never had the agent,
that have it loaded and running, and that had it loaded, running, and stopped: after `stop`,
the application must run at its no-agent speed.

Each round runs the three configurations once, in a freshly shuffled order, each in a JVM of
its own (bench/workloads/AfterStop.java): the JVM warms up, then the agent is loaded into it
with `otelprof attach PID start|stop` (HotSpot's attach protocol, spoken by otelprof):

- `none`: nothing is loaded (and `none-again`, the same: the A/A control that shows the
  noise floor of the run);
- `running`: `start` with every profile type (cpu=10ms, wall=50ms, alloc=512k, lock=10ms);
- `stopped`: the same `start`, 2 s of profiling, then `stop`;

and only then is the timed part let go (two threads, a fixed number of requests mixing calls,
small allocations, a contended monitor and thread starts). The time is measured inside the
JVM, so the attach itself is not in it. Reported: the median time per configuration and the
median / min / max of the per-round ratio to the same round's `none`.

Wrap the run in the machine's CPU lock (`flock -x /tmp/otelprof-cpu.lock`) on a shared
machine. Results are printed as markdown for BENCHMARKS.md.

    python3 bench/stop_cost.py                       # OpenJDK 17, 7 rounds
    python3 bench/stop_cost.py --jdk /usr/lib/jvm/temurin-25-jdk-amd64 --rounds 7
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / "target" / "release" / "otelprof"
AGENT = REPO / "target" / "release" / "libotelprof.so"
CONFIGS = ["none", "none-again", "running", "stopped"]
START = "start,cpu=10ms,wall=50ms,alloc=512k,lock=10ms,period=600s,out={out}"


def attach(jdk: Path, pid: int, args: str, reply: Path) -> str:
    """`otelprof attach PID VERB [OPTIONS]` (HotSpot's attach protocol, spoken by otelprof);
    `args` is `start,OPTIONS` or `stop`. Its printed reply is returned."""
    verb, _, options = args.partition(",")
    cmd = [str(CLI), "attach", str(pid), verb] + ([options] if options else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0 or not out.stdout.startswith("ok"):
        raise SystemExit(f"otelprof attach {args!r} failed: {out.stdout}{out.stderr}")
    return out.stdout


def one_run(jdk: Path, classes: Path, config: str, units: int, work: Path) -> float:
    go = work / f"go-{config}-{time.monotonic_ns()}"
    out = work / f"out-{config}"
    out.mkdir(exist_ok=True)
    proc = subprocess.Popen(
        [str(jdk / "bin" / "java"), "-XX:+UseG1GC", "-Xms256m", "-Xmx256m",
         "-cp", str(classes), "AfterStop", str(units), str(go)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("warm"):
        proc.kill()
        raise SystemExit(f"{config}: no warm-up line: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    reply = work / "reply"
    if config in ("running", "stopped"):
        attach(jdk, proc.pid, START.format(out=out), reply)
    if config == "stopped":
        time.sleep(2)
        attach(jdk, proc.pid, "stop", reply)
    go.write_text("")
    stdout, stderr = proc.communicate(timeout=600)
    if proc.returncode != 0 or "A fatal error" in stderr:
        raise SystemExit(f"{config}: the JVM failed ({proc.returncode}):\n{stderr}")
    elapsed = [l for l in stdout.splitlines() if l.startswith("elapsed_ms ")]
    if not elapsed:
        raise SystemExit(f"{config}: no elapsed_ms line:\n{stdout}\n{stderr}")
    if config != "none" and "otelprof: stopped;" not in stderr and config == "stopped":
        raise SystemExit(f"{config}: the agent did not say it stopped:\n{stderr}")
    return float(elapsed[0].split()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jdk", default="/usr/lib/jvm/java-17-openjdk-amd64")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--units", type=int, default=8_000_000, help="requests per thread (about 3 s of timed work here)")
    args = ap.parse_args()
    jdk = Path(args.jdk)
    if not AGENT.is_file():
        raise SystemExit(f"{AGENT} missing: cargo build --release")
    with tempfile.TemporaryDirectory(prefix="otelprof-stop-cost-") as tmp:
        work = Path(tmp)
        classes = work / "classes"
        subprocess.run([str(jdk / "bin" / "javac"), "-d", str(classes),
                        str(REPO / "bench" / "workloads" / "AfterStop.java")], check=True)
        times: dict[str, list[float]] = {c: [] for c in CONFIGS}
        ratios: dict[str, list[float]] = {c: [] for c in CONFIGS if c != "none"}
        for r in range(args.rounds):
            order = CONFIGS[:]
            random.shuffle(order)
            this_round = {}
            for config in order:
                this_round[config] = one_run(jdk, classes, config, args.units, work)
                print(f"round {r + 1}: {config} {this_round[config]:.0f} ms", file=sys.stderr)
            for config in CONFIGS:
                times[config].append(this_round[config])
            for config in ratios:
                ratios[config].append(this_round[config] / this_round["none"])
    version = subprocess.run([str(jdk / "bin" / "java"), "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    digest = hashlib.sha256(AGENT.read_bytes()).hexdigest()[:16]
    print(f"JDK: {version}; {args.rounds} rounds, {args.units} requests per thread, 2 threads; "
          f"agent sha256 {digest}…\n")
    print("| configuration | median time | ratio to none: median | min | max |")
    print("|---|---|---|---|---|")
    print(f"| none | {statistics.median(times['none']):.0f} ms | 1 | | |")
    for config, rs in ratios.items():
        print(f"| {config} | {statistics.median(times[config]):.0f} ms | {statistics.median(rs):.3f} | "
              f"{min(rs):.3f} | {max(rs):.3f} |")


if __name__ == "__main__":
    main()
