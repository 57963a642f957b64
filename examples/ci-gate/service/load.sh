#!/usr/bin/env bash
# Drives the example service on $SERVICE_PORT for $LOAD_SECONDS with $LOAD_CLIENTS clients.
set -euo pipefail
cd "$(dirname "$0")"
exec "${JAVA_HOME:+$JAVA_HOME/bin/}java" -cp classes otelprof.example.LoadGen \
  "http://127.0.0.1:${SERVICE_PORT:-8080}" "${LOAD_SECONDS:-20}" "${LOAD_CLIENTS:-2}"
