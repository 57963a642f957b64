# Shared by the scripts: install what is missing, as on a fresh Debian machine.
# shellcheck shell=bash

APT_UPDATED=""

# apt_install PACKAGE... : installs Debian packages (as root, or through sudo).
apt_install() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  if [ -z "$APT_UPDATED" ]; then
    $sudo apt-get update -qq
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# ensure_tools: Java (JDK 17), Go's pprof, and the Rust toolchain's components.
ensure_tools() {
  if ! command -v javac >/dev/null 2>&1; then
    echo "installing openjdk-17-jdk-headless" >&2
    apt_install openjdk-17-jdk-headless
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "installing golang-go (for go tool pprof)" >&2
    apt_install golang-go
  fi
}

# leftovers DIR: the processes still running whose executable or command line lies under DIR
# (e.g. a receiver or a JVM a test started from target/), one "PID COMMAND LINE" each. This
# shell and its ancestors are left out.
leftovers() {
  local dir exe cmd pid self ancestors
  dir=$(cd "$1" 2>/dev/null && pwd -P) || return 0
  ancestors=" "
  self=$$
  while [ -n "$self" ] && [ "$self" != 0 ]; do
    ancestors="$ancestors$self "
    self=$(awk '/^PPid:/ {print $2}' "/proc/$self/status" 2>/dev/null)
  done
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    case "$ancestors" in *" $pid "*) continue ;; esac
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    case "$exe $cmd" in
      *"$dir/"*) echo "$pid $cmd" ;;
    esac
  done
}

# no_leftovers DIR: fails, naming them, when processes started from DIR are still running
# after a grace period (children asked for SIGTERM when the tests ended; a JVM takes a moment
# to run its shutdown hooks).
no_leftovers() {
  local left=""
  for _ in $(seq 1 50); do
    left=$(leftovers "$1")
    [ -z "$left" ] && return 0
    sleep 0.2
  done
  echo "processes started from $1 are still running after the tests:" >&2
  echo "$left" >&2
  return 1
}

# leftovers_self_test DIR: the check finds a process deliberately left running from DIR.
leftovers_self_test() {
  local probe_dir="$1/leftover-probe" pid
  mkdir -p "$probe_dir"
  cp "$(command -v sleep)" "$probe_dir/sleep"
  "$probe_dir/sleep" 300 &
  pid=$!
  if ! leftovers "$1" | grep -q "^$pid "; then
    kill "$pid"
    echo "the leftover check missed process $pid, started from $probe_dir" >&2
    return 1
  fi
  if no_leftovers "$1" 2>/dev/null; then
    kill "$pid"
    echo "the leftover check passed with process $pid running from $probe_dir" >&2
    return 1
  fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo "the leftover check finds a process left running: ok"
}
