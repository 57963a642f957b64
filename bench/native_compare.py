#!/usr/bin/env python3
"""Mixed stacks beside async-profiler, on a workload whose split between Java and C is known.

tests/java/otelprof/tests/NativeMix runs JNI threads that alternate between Java arithmetic and
the same arithmetic in a C function (`burn_c_loop`, built -O2 -fomit-frame-pointer, so callers
are found only through its unwind tables), each half timed by the thread's own CPU clock, and a
writer thread doing write(2) in a loop. Each round runs it once under otelprof
(`cpu=INTERVAL,clock=perf`) and once under async-profiler (`event=cpu,interval=INTERVAL`,
collapsed stacks with thread names and frame kinds), alternating which goes first, and reads
from each profile:

- the C function's share of the JNI threads' samples, against the truth the workload printed;
- the share of the writer's samples that hold kernel frames;
- the heaviest frames (self) of the JNI threads and of the writer.

Accuracy, not speed: the runs may share the machine. Usage:

    python3 bench/native_compare.py --async-profiler PATH/libasyncProfiler.so [--rounds 3]
        [--interval 1ms] [--jdk JAVA_HOME] [--markdown FILE]
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGENT = os.path.join(REPO, "target/release/libotelprof.so")
CLI = os.path.join(REPO, "target/release/otelprof")
C_FUNCTION = "burn_c_loop"
KERNEL_FILE = "[kernel.kallsyms]"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def build(jdk, work):
    classes = os.path.join(work, "classes")
    os.makedirs(classes)
    run([os.path.join(jdk, "bin/javac"), "-d", classes,
         os.path.join(REPO, "tests/java/otelprof/tests/NativeMix.java")])
    include = os.path.join(jdk, "include")
    run(["gcc", "-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-o",
         os.path.join(work, "libnativemix.so"), "-I", include, "-I", os.path.join(include, "linux"),
         os.path.join(REPO, "tests/c/native_mix.c")])
    return classes


def java_cmd(jdk, work, classes, agent_arg, threads, seconds):
    return [os.path.join(jdk, "bin/java"), agent_arg, f"-Djava.library.path={work}",
            "-cp", classes, "otelprof.tests.NativeMix", str(threads), str(seconds)]


def truth(stdout):
    java = c = 0
    for line in stdout.splitlines():
        m = re.match(r"truth thread=\S+ java_ns=(\d+) c_ns=(\d+)", line)
        if m:
            java += int(m.group(1))
            c += int(m.group(2))
    if java + c == 0:
        sys.exit("the workload printed no truth lines:\n" + stdout)
    return c / (java + c)


def top_rows(store, where, limit=0):
    """otelprof top's rows: (self, total, function, file) in nanoseconds."""
    out = run([CLI, "top", "--where", where, "--limit", str(limit), store]).stdout
    rows = []
    for line in out.splitlines()[2:]:
        m = re.match(r"\s*(\S+)\s+\S+%\s+(\S+)\s+\S+%\s+(.+?)(?: \((.*)\))?$", line)
        if m:
            rows.append((duration(m.group(1)), duration(m.group(2)), m.group(3), m.group(4) or ""))
    return rows, out.splitlines()[0]


def duration(text):
    m = re.match(r"([\d.]+)(ns|µs|us|ms|s|min|h)$", text)
    if not m:
        return 0.0
    scale = {"ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9, "min": 60e9, "h": 3600e9}
    return float(m.group(1)) * scale[m.group(2)]


def total_of(header):
    m = re.search(r"total (\S+)$", header)
    return duration(m.group(1)) if m else 0.0


def otelprof_side(jdk, work, classes, interval, threads, seconds):
    out_dir = os.path.join(work, "otelprof-out")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    agent = f"-agentpath:{AGENT}=cpu={interval},clock=perf,period=1s,out={out_dir}"
    p = run(java_cmd(jdk, work, classes, agent, threads, seconds))
    jni = jni_threads(out_dir, threads)
    writer_rows, writer_header = top_rows(out_dir, "thread.name=writer")
    writer_total = total_of(writer_header)
    return {
        "truth": truth(p.stdout),
        "c_share": jni["c"] / jni["total"] if jni["total"] else 0.0,
        "kernel_share": kernel_share(out_dir, "writer"),
        "jni_top": jni["top"],
        "writer_top": [(n + (f" ({f})" if f else ""), s / writer_total)
                       for s, _, n, f in sorted(writer_rows, key=lambda r: -r[0])[:8]],
    }


def kernel_share(out_dir, thread):
    """The share of `thread`'s CPU samples that hold a kernel frame, read by `go tool pprof -raw`
    (each location's mapping), independently of otelprof's own reader."""
    total = kernel = 0
    for name in sorted(os.listdir(out_dir)):
        if not (name.startswith("cpu") and name.endswith(".pb.gz")):
            continue
        raw = run(["go", "tool", "pprof", "-raw", os.path.join(out_dir, name)]).stdout
        section, samples, mapping_of, kernel_maps = None, [], {}, set()
        for line in raw.splitlines():
            if line in ("Samples:", "Locations", "Mappings"):
                section = line
                continue
            if section == "Samples:":
                m = re.match(r"\s+(\d+)\s+\d+: ([\d ]+)$", line)
                if m:
                    samples.append([int(m.group(1)), m.group(2).split(), ""])
                elif samples and "thread_name:[" in line:
                    samples[-1][2] = re.search(r"thread_name:\[([^\]]*)\]", line).group(1)
            elif section == "Locations":
                m = re.match(r"\s*(\d+): 0x[0-9a-f]+ M=(\d+)", line)
                if m:
                    mapping_of[m.group(1)] = m.group(2)
            elif section == "Mappings":
                m = re.match(r"(\d+): \S+ (\S+)", line)
                if m and m.group(2) == KERNEL_FILE:
                    kernel_maps.add(m.group(1))
        for count, ids, t in samples:
            if t != thread:
                continue
            total += count
            if any(mapping_of.get(i) in kernel_maps for i in ids):
                kernel += count
    return kernel / total if total else 0.0


def jni_threads(store, threads):
    """The JNI threads' C share and top frames, added over jni-0 … jni-(N-1)."""
    c = total = 0.0
    self_by = collections.Counter()
    for i in range(threads):
        rows, header = top_rows(store, f"thread.name=jni-{i}")
        total += total_of(header)
        for s, t, name, f in rows:
            if name == C_FUNCTION:
                c += t
            self_by[name + (f" ({f})" if f else "")] += s
    top = [(n, v / total if total else 0.0) for n, v in self_by.most_common(8)]
    return {"c": c, "total": total, "top": top}


def asprof_side(jdk, work, classes, lib, interval, threads, seconds):
    collapsed = os.path.join(work, "asprof.collapsed")
    agent = (f"-agentpath:{lib}=start,event=cpu,interval={interval},threads,ann,"
             f"collapsed,file={collapsed}")
    p = run(java_cmd(jdk, work, classes, agent, threads, seconds))
    jni_total = jni_c = writer_total = writer_kernel = 0
    jni_self = collections.Counter()
    writer_self = collections.Counter()
    with open(collapsed) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            frames = stack.split(";")
            thread = frames[0]
            leaf = frames[-1]
            if re.match(r"\[jni-\d+ tid=\d+\]", thread):
                jni_total += n
                if any(fr.startswith(C_FUNCTION) for fr in frames):
                    jni_c += n
                jni_self[leaf] += n
            elif thread.startswith("[writer "):
                writer_total += n
                if any(fr.endswith("_[k]") for fr in frames):
                    writer_kernel += n
                writer_self[leaf] += n
    return {
        "truth": truth(p.stdout),
        "c_share": jni_c / jni_total if jni_total else 0.0,
        "kernel_share": writer_kernel / writer_total if writer_total else 0.0,
        "jni_top": [(k, v / jni_total) for k, v in jni_self.most_common(8)],
        "writer_top": [(k, v / writer_total) for k, v in writer_self.most_common(8)],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--async-profiler", required=True, metavar="SO")
    ap.add_argument("--jdk", default="/usr/lib/jvm/java-17-openjdk-amd64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--interval", default="1ms")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--markdown", metavar="FILE", help="also write the tables here")
    a = ap.parse_args()
    for path in (AGENT, CLI, a.async_profiler):
        if not os.path.exists(path):
            sys.exit(f"missing {path} (cargo build --release; async-profiler built from its repository)")
    work = tempfile.mkdtemp(prefix="native-compare-")
    classes = build(a.jdk, work)
    results = {"otelprof": [], "async-profiler": []}
    for r in range(a.rounds):
        sides = ["otelprof", "async-profiler"] if r % 2 == 0 else ["async-profiler", "otelprof"]
        for side in sides:
            if side == "otelprof":
                res = otelprof_side(a.jdk, work, classes, a.interval, a.threads, a.seconds)
            else:
                res = asprof_side(a.jdk, work, classes, a.async_profiler, a.interval, a.threads,
                                  a.seconds)
            results[side].append(res)
            print(f"round {r + 1} {side}: C share {100 * res['c_share']:.2f} % "
                  f"(truth {100 * res['truth']:.2f} %), writer samples with kernel frames "
                  f"{100 * res['kernel_share']:.1f} %", flush=True)
    lines = report(results, a)
    print("\n".join(lines))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    shutil.rmtree(work, ignore_errors=True)


def report(results, a):
    lines = [f"NativeMix, {a.threads} JNI threads × {a.seconds} CPU s + a writer, "
             f"interval {a.interval}, {a.rounds} rounds, JDK {a.jdk}", "",
             "| round | profiler | C share (truth) | error pp | writer samples with kernel frames |",
             "|---|---|---:|---:|---:|"]
    for side in ("otelprof", "async-profiler"):
        for i, r in enumerate(results[side]):
            err = 100 * (r["c_share"] - r["truth"])
            lines.append(f"| {i + 1} | {side} | {100 * r['c_share']:.2f} % ({100 * r['truth']:.2f} %) "
                         f"| {err:+.2f} | {100 * r['kernel_share']:.1f} % |")
    for what, key in (("JNI threads", "jni_top"), ("writer", "writer_top")):
        lines += ["", f"Heaviest frames (self share) of the {what}, last round:", "",
                  "| otelprof | share | async-profiler | share |", "|---|---:|---|---:|"]
        o, p = results["otelprof"][-1][key], results["async-profiler"][-1][key]
        for i in range(max(len(o), len(p))):
            left = o[i] if i < len(o) else ("", 0)
            right = p[i] if i < len(p) else ("", 0)
            lines.append(f"| `{left[0]}` | {100 * left[1]:.1f} % | `{right[0]}` | {100 * right[1]:.1f} % |")
    return lines


if __name__ == "__main__":
    main()
