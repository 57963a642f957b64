#!/usr/bin/env bash
# The main job, end to end, no collector needed: build otelprof (agent, Java API, CLI), then
# `otelprof demo`: an example shop service runs as version 1.0 and 2.0 under load, profiled
# through the embedded OTLP receiver, and otelprof prints CPU per endpoint, the drilldown of
# the slowest trace and the 1.0 -> 2.0 diff naming the regressed method, and writes flame
# graphs. Extra arguments go to `otelprof demo` (e.g. --seconds 40, --dir DIR).
# `--serve` (first argument) keeps the web UI running on the demo's store afterwards
# (`otelprof serve`, http://127.0.0.1:4040; Ctrl-C stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_tools

serve=0
if [ "${1:-}" = "--serve" ]; then
  serve=1
  shift
fi
# The demo's directory: the user's --dir, else target/otelprof-demo (given to the demo only
# when the user gave none: clap refuses a flag given twice). --serve serves that store.
dir=""
args=("$@")
for i in "${!args[@]}"; do
  case "${args[$i]}" in
    --dir) dir="${args[$((i + 1))]:-}" ;;
    --dir=*) dir="${args[$i]#--dir=}" ;;
  esac
done
if [ -z "$dir" ]; then
  dir=target/otelprof-demo
  set -- --dir "$dir" "$@"
fi
cargo build --release -q
if [ "$serve" = 0 ]; then
  exec target/release/otelprof demo "$@"
fi
target/release/otelprof demo "$@"
exec target/release/otelprof serve --store "$dir/store"
