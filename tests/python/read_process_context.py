#!/usr/bin/env python3
"""Reads a process's OpenTelemetry process context (OTEP 4719) the way an external reader
such as the OpenTelemetry eBPF profiler does, and prints its attributes as JSON.

Usage: read_process_context.py PID

Finds the mapping named OTEL_CTX in /proc/PID/maps, checks signature and version, reads the
payload between two reads of published_at_ns, and decodes it with the official
opentelemetry-proto classes (Resource). Exit 1 if there is no valid context.
"""
import json
import re
import struct
import sys

from opentelemetry.proto.resource.v1.resource_pb2 import Resource


def any_value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def main():
    pid = int(sys.argv[1])
    with open(f"/proc/{pid}/maps") as f:
        starts = [int(m.group(1), 16) for line in f
                  if (m := re.match(r"([0-9a-f]+)-[0-9a-f]+ .*(/memfd:OTEL_CTX|\[anon_shmem:OTEL_CTX\]|\[anon:OTEL_CTX\])", line))]
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for start in starts:
            for _ in range(10):
                mem.seek(start)
                header = mem.read(32)
                signature, version, size, published, payload_at = struct.unpack("=8sIIQQ", header)
                if signature != b"OTEL_CTX" or version != 2:
                    break
                if published == 0:
                    continue  # an update is in progress
                mem.seek(payload_at)
                payload = mem.read(size)
                mem.seek(start + 16)
                if struct.unpack("=Q", mem.read(8))[0] != published:
                    continue  # changed while we read: read again
                resource = Resource()
                resource.ParseFromString(payload)
                print(json.dumps({a.key: any_value(a.value) for a in resource.attributes}, sort_keys=True))
                return 0
    print("no OTEL_CTX process context", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
