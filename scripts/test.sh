#!/usr/bin/env bash
# Runs every test: formatting and lints, unit tests, then the cross-component tests that run
# real JVMs (OpenJDK 17 and Temurin 25) with the agent and read the profiles back with
# `go tool pprof` and with OTLP receivers built on the official Python classes, and the
# `otelprof` commands end to end (receive, the demo, flame graphs and the web UI in headless
# Chromium).
# Installs what it needs on a fresh Debian machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_tools
# The flame graph test opens otelprof's HTML in headless Chromium; the receiver's TLS test
# makes a certificate with openssl.
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing chromium (for the flame graph test)" >&2
  apt_install chromium
fi
if ! command -v openssl >/dev/null 2>&1; then
  apt_install openssl
fi
# The mixed-stack tests build their JNI and seccomp helpers with gcc.
if ! command -v gcc >/dev/null 2>&1; then
  apt_install gcc
fi
# `otelprof attach`'s tests (tests/tests/attach/cli.rs, as root) run JVMs in their own mount
# and pid namespaces (unshare) and as the user nobody (setpriv): util-linux.
if ! command -v unshare >/dev/null 2>&1 || ! command -v setpriv >/dev/null 2>&1; then
  apt_install util-linux
fi

# The web UI's browser test (tests/tests/serve/browser.rs) drives that Chromium with
# Playwright's playwright-core from npm, pinned in tests/browser/package.json and installed
# under the target directory (never committed; reinstalled when the pin changes; no browser
# download: it uses /usr/bin/chromium).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "installing nodejs and npm (for the web UI's browser test)" >&2
  apt_install nodejs npm
fi
browser_node="${CARGO_TARGET_DIR:-target}/browser-node"
if [ ! -f "$browser_node/node_modules/playwright-core/package.json" ] \
  || ! cmp -s tests/browser/package.json "$browser_node/package.json"; then
  echo "== playwright-core for the browser test ($browser_node)"
  rm -rf "$browser_node"
  mkdir -p "$browser_node"
  cp tests/browser/package.json "$browser_node/package.json"
  (cd "$browser_node" && npm install --no-package-lock --no-audit --no-fund --loglevel=error)
fi
for jdk in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
  if [ ! -x "$jdk/bin/java" ] && [ -z "${OTELPROF_JDK17:-}${OTELPROF_JDK25:-}" ]; then
    echo "missing JDK $jdk (set OTELPROF_JDK17 / OTELPROF_JDK25 to other homes)" >&2
    exit 1
  fi
done

# The independent OTLP receivers and checkers (tests/python) run on the official generated
# classes from PyPI, pinned in tests/python/requirements.txt, in a venv under the target
# directory (works as non-root; rebuilt when the pins change).
venv="${CARGO_TARGET_DIR:-target}/otlp-venv"
requirements=tests/python/requirements.txt
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$requirements" "$venv/requirements.txt"; then
  echo "== python venv for the OTLP receivers ($venv)"
  rm -rf "$venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    rm -rf "$venv"
    apt_install python3-venv
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$venv/requirements.txt"
fi

echo "== format, lints and module structure"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
python3 scripts/module_cycles.py --self-test
python3 scripts/module_cycles.py

echo "== build"
cargo build --release --workspace

echo "== unit tests"
cargo test --release --workspace --exclude otelprof-tests

echo "== JVM tests (one at a time: they measure CPU)"
jvm_tests=0
cargo test --release -p otelprof-tests --no-fail-fast -- --test-threads=1 --nocapture || jvm_tests=$?

# Every process a test starts must end with its test binary (tests/src/process.rs): nothing
# started from the target directory may still run now, whether the tests passed or not (a
# failing test is when a child is most likely left behind).
echo "== no process left behind"
leftovers_self_test "${CARGO_TARGET_DIR:-target}"
no_leftovers "${CARGO_TARGET_DIR:-target}"
exit "$jvm_tests"
