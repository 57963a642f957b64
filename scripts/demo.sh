#!/usr/bin/env bash
# The main job, end to end, no collector needed: build otelprof, profile an example Java
# workload with `otelprof run`, and print where its CPU went with `otelprof top`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_tools

cargo build --release -q
classes=target/examples
mkdir -p "$classes"
javac --release 17 -d "$classes" examples/workloads/otelprof/workloads/*.java

out=target/demo-profiles
rm -rf "$out"
# Two threads split 6 s of CPU 60/30/10 between three methods.
target/release/otelprof run --out "$out" --cpu 10ms --period 10s -- \
  java -cp "$classes" otelprof.workloads.CpuSplit 2 3
echo
target/release/otelprof top --limit 12 "$out"
echo
echo "pprof files: $out (open with: go tool pprof -http=: $out/*.pb.gz)"
