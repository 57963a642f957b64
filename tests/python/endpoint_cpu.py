#!/usr/bin/env python3
"""CPU per endpoint in a time range, read from an `otelprof receive` store with the official
generated classes (PyPI opentelemetry-proto): the independent side of the diff-by-endpoint
test.

    endpoint_cpu.py STORE FROM_NS TO_NS    # prints {"<span_name>": cpu_ns, ...} as JSON

Every CPU profile (sample type samples/count, period cpu/nanoseconds) under STORE/profiles is
read; a sample's CPU is its count (or, with timestamps only, its number of timestamps) times
the period, and the share of it inside [FROM_NS, TO_NS) is the share of its timestamps there
(all of it when it has none and its profile overlaps the range).
"""
import glob
import gzip
import json
import os
import sys
from collections import defaultdict

from opentelemetry.proto.collector.profiles.v1development import (
    profiles_service_pb2 as profiles_service,
)


def main():
    store, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cpu = defaultdict(float)
    for path in glob.glob(os.path.join(store, "profiles", "**", "*.otlp.pb*"), recursive=True):
        if os.path.basename(path).startswith("."):
            continue
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".gz"):
            raw = gzip.decompress(raw)
        req = profiles_service.ExportProfilesServiceRequest()
        req.ParseFromString(raw)
        d = req.dictionary
        s = d.string_table
        for rp in req.resource_profiles:
            for sp in rp.scope_profiles:
                for p in sp.profiles:
                    kind = (s[p.sample_type.type_strindex], s[p.period_type.type_strindex])
                    if kind != ("samples", "cpu"):
                        continue
                    start, end = p.time_unix_nano, p.time_unix_nano + p.duration_nano
                    for smp in p.samples:
                        count = smp.values[0] if smp.values else len(smp.timestamps_unix_nano)
                        if smp.timestamps_unix_nano:
                            inside = sum(1 for t in smp.timestamps_unix_nano if lo <= t < hi)
                            share = inside / len(smp.timestamps_unix_nano)
                        else:
                            share = 1.0 if start < hi and end > lo else 0.0
                        if share == 0:
                            continue
                        endpoint = "<none>"
                        for a in smp.attribute_indices:
                            kv = d.attribute_table[a]
                            if s[kv.key_strindex] == "span_name":
                                endpoint = kv.value.string_value
                        cpu[endpoint] += count * p.period * share
    json.dump(cpu, sys.stdout)


if __name__ == "__main__":
    main()
