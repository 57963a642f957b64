#!/usr/bin/env bash
# Runs every test: formatting and lints, unit tests, then the cross-component tests that run
# real JVMs (OpenJDK 17 and Temurin 25) with the agent and read the profiles back with
# `go tool pprof`. Installs what it needs on a fresh Debian machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_tools
for jdk in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
  if [ ! -x "$jdk/bin/java" ] && [ -z "${OTELPROF_JDK17:-}${OTELPROF_JDK25:-}" ]; then
    echo "missing JDK $jdk (set OTELPROF_JDK17 / OTELPROF_JDK25 to other homes)" >&2
    exit 1
  fi
done

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings

echo "== build"
cargo build --release --workspace

echo "== unit tests"
cargo test --release --workspace --exclude otelprof-tests

echo "== JVM tests (one at a time: they measure CPU)"
cargo test --release -p otelprof-tests -- --test-threads=1 --nocapture
