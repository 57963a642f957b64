#!/usr/bin/env bash
# Fetches the real OpenTelemetry Java SDK (1.30.1) for the tests and prints the jar's path.
#
# Maven Central is not reachable here; the PyPI wheel apache-flink-libraries 2.3.0 carries
# flink-metrics-otel-2.3.0.jar, a fat jar with the unshaded OpenTelemetry Java 1.30.1 classes
# (context, api, sdk, sdk-trace, autoconfigure-spi). The 329 MB wheel is downloaded once; only
# the jar is kept, in ${OTELPROF_CACHE:-~/.cache/otelprof}. Nothing of it is committed.
set -euo pipefail
cache="${OTELPROF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/otelprof}"
jar="$cache/flink-metrics-otel-2.3.0.jar"
if [ ! -s "$jar" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetching the OpenTelemetry Java SDK (PyPI apache-flink-libraries==2.3.0, 329 MB, once)" >&2
  python3 -m pip download --quiet --no-deps --only-binary :all: apache-flink-libraries==2.3.0 -d "$tmp" >&2
  python3 - "$tmp" "$jar" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/apache_flink_libraries-2.3.0-*.whl")[0]
member = "pyflink/plugins/metrics-otel/flink-metrics-otel-2.3.0.jar"
with zipfile.ZipFile(wheel) as z, open(sys.argv[2] + ".part", "wb") as out:
    out.write(z.read(member))
PY
  mv "$jar.part" "$jar"
fi
echo "$jar"
