#!/usr/bin/env python3
"""Writes hostile and edge-case OTLP profiles requests, built with the official generated
classes (PyPI opentelemetry-proto), for tests/tests/hostile/store.rs.

    hostile_requests.py OUTDIR

Each file is one ExportProfilesServiceRequest (uncompressed protobuf):

- stack_bomb.otlp.pb: one stack of 100,000 frames shared by 100,000 samples (~0.7 MB on the
  wire; a reader that copies the stack per sample needs 40 GB);
- deep_shared.otlp.pb: the same shape at the depth limit, 16,384 frames under 100,000 samples;
- dictionary_bomb.otlp.pb: one dictionary of 200,000 strings shared by 5,000 profiles (~2 MB;
  a reader that copies the dictionary per profile needs a billion strings);
- deep_distinct.otlp.pb: one sample whose stack is 16,384 distinct functions deep, so that a
  flame graph of it is 16,384 levels deep;
- good-NN.otlp.pb: 20 ordinary CPU profiles of service `good`, 1,000 samples of 10 ms each
  under `good.Work.run`, so that readers have something to answer from beside the bombs.

Prints a JSON object: file name -> size in bytes.
"""
import json
import os
import sys

from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as service
from opentelemetry.proto.common.v1 import common_pb2 as common
from opentelemetry.proto.profiles.v1development import profiles_pb2 as pb

START = 1_700_000_000_000_000_000


def base_request(strings, service_name):
    req = service.ExportProfilesServiceRequest()
    d = req.dictionary
    d.string_table.extend(strings)
    d.mapping_table.add()
    d.location_table.add()
    d.function_table.add()
    d.link_table.add()
    d.attribute_table.add()
    d.stack_table.add()
    rp = req.resource_profiles.add()
    rp.resource.attributes.add(key="service.name", value=common.AnyValue(string_value=service_name))
    return req, rp.scope_profiles.add()


def cpu_profile(scope, strings, time, samples_count, stack_index, value=1):
    p = scope.profiles.add()
    p.sample_type.type_strindex = strings.index("samples")
    p.sample_type.unit_strindex = strings.index("count")
    p.period_type.type_strindex = strings.index("cpu")
    p.period_type.unit_strindex = strings.index("nanoseconds")
    p.period = 10_000_000
    p.time_unix_nano = time
    p.duration_nano = 10_000_000_000
    p.profile_id = bytes(range(1, 17))
    for _ in range(samples_count):
        s = p.samples.add()
        s.stack_index = stack_index
        s.values.append(value)
    return p


def add_function_location(d, name_index, file_index):
    d.function_table.add(name_strindex=name_index, system_name_strindex=name_index, filename_strindex=file_index)
    loc = d.location_table.add()
    loc.lines.add(function_index=len(d.function_table) - 1, line=1)
    return len(d.location_table) - 1


def shared_stack(depth, samples):
    strings = ["", "samples", "count", "cpu", "nanoseconds", "bomb.Deep.recurse", "Deep.java"]
    req, scope = base_request(strings, "bomb")
    loc = add_function_location(req.dictionary, 5, 6)
    req.dictionary.stack_table.add().location_indices.extend([loc] * depth)
    cpu_profile(scope, strings, START, samples, 1)
    return req


def dictionary_bomb(strings_count=200_000, profiles=5_000):
    strings = ["", "samples", "count", "cpu", "nanoseconds", "bomb.Dict.f", "Dict.java"]
    strings += [f"s{i:07d}" for i in range(strings_count - len(strings))]
    req, scope = base_request(strings, "bomb")
    loc = add_function_location(req.dictionary, 5, 6)
    req.dictionary.stack_table.add().location_indices.append(loc)
    for i in range(profiles):
        cpu_profile(scope, strings, START + i * 10_000_000_000, 1, 1)
    return req


def deep_distinct(depth=16_384):
    strings = ["", "samples", "count", "cpu", "nanoseconds", "Deep.java"]
    req, scope = base_request(strings, "deep")
    d = req.dictionary
    locations = []
    for i in range(depth):
        d.string_table.append(f"deep.Level.f{i:05d}")
        locations.append(add_function_location(d, len(d.string_table) - 1, 5))
    # Leaf first: the deepest level is the leaf.
    d.stack_table.add().location_indices.extend(reversed(locations))
    cpu_profile(scope, list(d.string_table), START, 1, 1, value=100)
    return req


def good(i):
    strings = ["", "samples", "count", "cpu", "nanoseconds", "good.Work.run", "good.Main.main", "Work.java"]
    req, scope = base_request(strings, "good")
    d = req.dictionary
    run = add_function_location(d, 5, 7)
    main = add_function_location(d, 6, 7)
    d.stack_table.add().location_indices.extend([run, main])
    cpu_profile(scope, strings, START + i * 10_000_000_000, 1, 1, value=1_000)
    return req


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    files = {
        "stack_bomb.otlp.pb": shared_stack(100_000, 100_000),
        "deep_shared.otlp.pb": shared_stack(16_384, 100_000),
        "dictionary_bomb.otlp.pb": dictionary_bomb(),
        "deep_distinct.otlp.pb": deep_distinct(),
    }
    for i in range(20):
        files[f"good-{i:02d}.otlp.pb"] = good(i)
    sizes = {}
    for name, req in files.items():
        data = req.SerializeToString()
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        sizes[name] = len(data)
    print(json.dumps(sizes))


if __name__ == "__main__":
    main()
