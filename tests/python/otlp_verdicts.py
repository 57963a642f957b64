#!/usr/bin/env python3
"""The official protobuf parser's verdict on many OTLP profiles requests, for
tests/tests/hostile/conformance.

    otlp_verdicts.py CASES OUT

CASES holds the requests back to back, each as a 4-byte little-endian length and that many bytes
of an ExportProfilesServiceRequest. OUT gets one JSON line per case, in order:

    {"ok": false, "error": "..."}      the parser rejected the bytes
    {"ok": true, "summary": {...}}     it accepted them, and this is what it read

The parser is Google's protobuf for Python (PyPI `protobuf`, pinned in requirements.txt) with its
upb backend, on the generated classes of PyPI `opentelemetry-proto`: the official decoder the
Rust decoder is held to. The script refuses to run on another backend, whose verdicts could
differ.

The summary is what the parser read, in the terms the Rust test compares with otelprof's model:
the dictionary's tables (strings, functions, locations, links, stacks) and, per profile in
request order, its resource attributes, value types, period, times and samples. Integers are
sent as they are (JSON has no width); doubles as their IEEE bits, so that NaN survives.
"""
import json
import struct
import sys

from google.protobuf.internal import api_implementation
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as service


def value(v, strings):
    """An AnyValue as [kind, value], or None for kinds otelprof's model does not keep
    (arrays, key-value lists, bytes, unset) and for a string index out of range."""
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return ["s", v.string_value]
    if kind == "string_value_strindex":
        return string_at(strings, v.string_value_strindex, ["s"])
    if kind == "bool_value":
        return ["b", v.bool_value]
    if kind == "int_value":
        return ["i", v.int_value]
    if kind == "double_value":
        return ["d", struct.unpack("<Q", struct.pack("<d", v.double_value))[0]]
    return None


def string_at(strings, index, prefix):
    # An empty table has the implied zero value "" at index 0 (profiles.proto).
    if index == 0 and not strings:
        return prefix + [""]
    if 0 <= index < len(strings):
        return prefix + [strings[index]]
    return None


def resource(res, strings):
    """Resource attributes as otelprof's model keeps them: the key from `key`, or when that is
    empty from `key_strindex`; attributes whose key index is out of range or whose value is of a
    kind the model does not keep are left out (see `value`)."""
    out = []
    for kv in res.attributes:
        if kv.key:
            key = kv.key
        else:
            k = string_at(strings, kv.key_strindex, [])
            if k is None:
                continue
            key = k[0]
        v = value(kv.value, strings)
        if v is not None:
            out.append([key, v])
    return out


def value_type(vt):
    return [vt.type_strindex, vt.unit_strindex]


def summary(req):
    d = req.dictionary
    strings = list(d.string_table)
    profiles = []
    for rp in req.resource_profiles:
        attributes = resource(rp.resource, strings)
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                profiles.append(
                    {
                        "resource": attributes,
                        "sample_type": value_type(p.sample_type) if p.HasField("sample_type") else None,
                        "period_type": value_type(p.period_type),
                        "period": p.period,
                        "time": p.time_unix_nano,
                        "duration": p.duration_nano,
                        "samples": [
                            [s.stack_index, list(s.values), list(s.timestamps_unix_nano), s.link_index]
                            for s in p.samples
                        ],
                    }
                )
    return {
        "strings": strings,
        "functions": [
            [f.name_strindex, f.system_name_strindex, f.filename_strindex, f.start_line] for f in d.function_table
        ],
        "locations": [[loc.address, [[ln.function_index, ln.line] for ln in loc.lines]] for loc in d.location_table],
        "links": [[link.trace_id.hex(), link.span_id.hex()] for link in d.link_table],
        "stacks": [list(s.location_indices) for s in d.stack_table],
        "profiles": profiles,
    }


def main():
    if api_implementation.Type() != "upb":
        sys.exit(f"protobuf runs on its {api_implementation.Type()} backend, not upb")
    cases, out_path = sys.argv[1], sys.argv[2]
    with open(cases, "rb") as f:
        data = f.read()
    pos = 0
    with open(out_path, "w") as out:
        while pos < len(data):
            (n,) = struct.unpack_from("<I", data, pos)
            body = data[pos + 4 : pos + 4 + n]
            if len(body) != n:
                sys.exit(f"truncated case at byte {pos}")
            pos += 4 + n
            try:
                req = service.ExportProfilesServiceRequest.FromString(body)
            except DecodeError as e:
                out.write(json.dumps({"ok": False, "error": str(e)}) + "\n")
                continue
            out.write(json.dumps({"ok": True, "summary": summary(req)}) + "\n")


if __name__ == "__main__":
    main()
