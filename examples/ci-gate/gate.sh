#!/usr/bin/env bash
# A CPU regression gate for CI: builds two checkouts of a JVM service, runs the same load
# against each with the otelprof agent, and compares them with `otelprof diff --fail-above`.
#
#   gate.sh BASE_CHECKOUT HEAD_CHECKOUT
#
# Exit status: 0 no regression, 3 a regression (a function's share of the CPU grew by more than
# GATE_FAIL_ABOVE percentage points, and the samples show it; or, with GATE_FINDINGS, a finding
# the base did not have), anything else: the gate itself failed (a build, the service, the
# load, or no profiles) -- fail the pipeline then too.
#
# Settings (environment, defaults in brackets):
#   OTELPROF         the otelprof executable; libotelprof.so lies beside it [otelprof]
#   GATE_BUILD       builds a checkout; run inside it [./build.sh]
#   GATE_RUN         starts the service in the foreground until SIGTERM: a command and its
#                    arguments, split at spaces, no shell; it must be (or exec) the JVM, so
#                    that SIGTERM reaches it; run inside the checkout being measured [./run.sh]
#   GATE_LOAD        drives the load against the service and returns when done; run inside
#                    HEAD_CHECKOUT for both sides, so both get the same load [./load.sh]
#   GATE_WARMUP      seconds of each side's load left out (JIT compilation) [5]
#   GATE_FAIL_ABOVE  percentage points a function's share may grow [2]
#   GATE_CPU         CPU sampling interval [2ms]
#   GATE_FINDINGS    also fail on a new finding (`otelprof findings`: one the base did not have,
#                    the same rule in the same method) of this severity or above: info,
#                    warning or critical [off]
#   GATE_OUT         directory for the store, the report and the differential flame graph
#                    [./otelprof-gate]
# The service and the load find each other on SERVICE_PORT [8080], which the gate exports.
set -euo pipefail

if [ $# -ne 2 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
base_dir=$(cd "$1" && pwd)
head_dir=$(cd "$2" && pwd)
otelprof=${OTELPROF:-otelprof}
build=${GATE_BUILD:-./build.sh}
run=${GATE_RUN:-./run.sh}
load=${GATE_LOAD:-./load.sh}
warmup=${GATE_WARMUP:-5}
fail_above=${GATE_FAIL_ABOVE:-2}
cpu=${GATE_CPU:-2ms}
findings=${GATE_FINDINGS:-}
out=$(mkdir -p "${GATE_OUT:-otelprof-gate}" && cd "${GATE_OUT:-otelprof-gate}" && pwd)
export SERVICE_PORT=${SERVICE_PORT:-8080}

say() { echo "gate: $*" >&2; }

# 1. Build both versions.
for dir in "$base_dir" "$head_dir"; do
  say "building $dir"
  (cd "$dir" && eval "$build")
done

# 2. A local OTLP receiver stores what the agents send (profiles, and the service's
#    http.server.request.duration metrics if it exports them: per-request numbers).
rm -rf "$out/store"
"$otelprof" receive --store "$out/store" --grpc off --http 127.0.0.1:0 2>"$out/receive.log" &
receiver=$!
service= load_pid=
# Ends a process and all it started, its children first (a subshell's children outlive it).
kill_tree() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$child"; done
  kill -TERM "$1" 2>/dev/null
}
cleanup() { # (every step even if one fails: set -e would stop at a JVM's exit status 143)
  if [ -n "$load_pid" ]; then kill_tree "$load_pid" || true; fi
  if [ -n "$service" ]; then kill -TERM "$service" 2>/dev/null && wait "$service" 2>/dev/null || true; fi
  kill -TERM "$receiver" 2>/dev/null && wait "$receiver" 2>/dev/null || true
}
trap cleanup EXIT
# Stopped by CI (a timeout, a cancelled job): the EXIT trap ends what the gate started.
trap 'exit 143' TERM INT HUP
endpoint=
for _ in $(seq 100); do
  endpoint=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$out/receive.log" | head -n 1 || true)
  [ -n "$endpoint" ] && break
  kill -0 "$receiver" 2>/dev/null || { cat "$out/receive.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$endpoint" ] || { say "the receiver did not start"; cat "$out/receive.log" >&2; exit 1; }

# 3. Each side: the service under the agent, the same load, a time range without warm-up.
measure() { # side dir -> sets from and to (Unix seconds)
  local side=$1 dir=$2 start
  say "profiling $side ($dir) on port $SERVICE_PORT"
  (cd "$dir" &&
    OTEL_SERVICE_NAME=gated-service \
    OTEL_RESOURCE_ATTRIBUTES="service.version=$side" \
    OTEL_EXPORTER_OTLP_ENDPOINT="$endpoint" \
    OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
    exec "$otelprof" run --out "$out/$side-pprof" --cpu "$cpu" --period 5s \
      --agent-options timestamps=on,log=warn -- $run) >"$out/$side-service.log" 2>&1 &
  # ($run unquoted on purpose: a command and its arguments.)
  service=$!
  start=$(date +%s)
  # In the background, waited for: a signal to the gate is handled at once, not after it.
  (cd "$head_dir" && eval "$load") >"$out/$side-load.log" 2>&1 &
  load_pid=$!
  if ! wait "$load_pid"; then
    load_pid=
    say "the load failed on $side:"; cat "$out/$side-load.log" "$out/$side-service.log" >&2
    exit 1
  fi
  load_pid=
  to=$(date +%s)
  from=$((start + warmup))
  kill -TERM "$service"
  wait "$service" || true   # a JVM stopped by SIGTERM exits with 143; the agent has flushed
  service=
}
measure base "$base_dir"
base_from=$from base_to=$to
measure head "$head_dir"
head_from=$from head_to=$to
if [ "$base_from" -ge "$base_to" ] || [ "$head_from" -ge "$head_to" ]; then
  say "the load ran no longer than GATE_WARMUP ($warmup s)"; exit 1
fi

# 4. Compare: exit 3 when a function grew by more than GATE_FAIL_ABOVE pp, significantly.
status=0
"$otelprof" diff \
  --base service.version=base --base-from "$base_from" --base-to "$base_to" \
  --head service.version=head --head-from "$head_from" --head-to "$head_to" \
  --fail-above "$fail_above" --output "$out/diff.html" "$out/store" \
  >"$out/diff.txt" 2>"$out/diff.err" || status=$?
cat "$out/diff.txt"
cat "$out/diff.err" >&2
case $status in
  0) say "pass: no function's share grew by more than $fail_above pp" ;;
  3) say "FAIL: a regression (report: $out/diff.txt, flame graph: $out/diff.html)" ;;
  *) say "the comparison itself failed (exit $status)" ;;
esac
[ "$status" = 0 ] && [ -n "$findings" ] || exit "$status"

# 5. Findings: exit 3 when the head has one of GATE_FINDINGS or above that the base had not.
"$otelprof" findings --where service.version=head --from "$head_from" --to "$head_to" \
  --new-against "service.version=base,from=$base_from,to=$base_to" \
  --fail-on "$findings" "$out/store" >"$out/findings.txt" 2>"$out/findings.err" || status=$?
cat "$out/findings.txt"
cat "$out/findings.err" >&2
case $status in
  0) say "pass: no new finding of $findings or above" ;;
  3) say "FAIL: a new finding (report: $out/findings.txt)" ;;
  *) say "the findings themselves failed (exit $status)" ;;
esac
exit "$status"
