#!/usr/bin/env bash
# Starts the example service on $SERVICE_PORT until SIGTERM (exec: the JVM gets the signal).
# TCP_NODELAY (sun.net.httpserver.nodelay): without it the JDK's HTTP server answers small
# requests about 40 ms late (Nagle against delayed ACKs), and the service would sit idle.
set -euo pipefail
cd "$(dirname "$0")"
exec "${JAVA_HOME:+$JAVA_HOME/bin/}java" -Xmx256m -Dsun.net.httpserver.nodelay=true \
  -cp classes otelprof.example.Storefront "${SERVICE_PORT:-8080}"
