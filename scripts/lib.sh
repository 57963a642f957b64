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
