#!/usr/bin/env bash
# Builds the example service into classes/ (JDK 17 or newer: $JAVA_HOME, else the PATH).
set -euo pipefail
cd "$(dirname "$0")"
rm -rf classes
"${JAVA_HOME:+$JAVA_HOME/bin/}javac" --release 17 -d classes $(find src -name '*.java')
