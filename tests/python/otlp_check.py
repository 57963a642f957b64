#!/usr/bin/env python3
"""Checks OTLP profiles requests saved by otlp_receiver.py against the rules of
docs/output-format.md (proto v1.10) and summarises them as JSON for the Rust tests to assert on.

    otlp_check.py DIR      # reads DIR/profiles-*.pb and DIR/metrics-*.pb

Everything is read with the official generated classes (PyPI opentelemetry-proto). Rule
violations are listed under "violations" (the tests require it to be empty); the rest of the
summary is what the profiles say: resource, sample types, functions with files and lines,
thread names, links, frame types, and the agent's own metrics.
"""

import glob
import json
import os
import sys
from collections import defaultdict

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics_service
from opentelemetry.proto.collector.profiles.v1development import (
    profiles_service_pb2 as profiles_service,
)
from opentelemetry.proto.profiles.v1development import profiles_pb2 as pb

FRAME_TYPES = {"jvm", "native", "kernel"}
REQUIRED_RESOURCE = [
    "service.name",
    "service.instance.id",
    "process.pid",
    "host.name",
    "process.runtime.name",
    "process.runtime.version",
    "process.runtime.description",
    "telemetry.sdk.name",
    "telemetry.sdk.language",
    "telemetry.sdk.version",
]


def any_value(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    return getattr(v, kind)


class Checker:
    def __init__(self):
        self.violations = []
        self.requests = 0
        self.profiles = 0
        self.profile_ids = []
        self.resource = {}
        self.resources_differ = False
        self.types = set()
        self.total = 0
        self.samples = 0
        self.shapes = defaultdict(int)
        self.functions = {}
        self.threads = defaultdict(int)
        self.pools = defaultdict(int)
        self.sample_attr_keys = set()
        self.span_names = defaultdict(int)
        self.frame_types = defaultdict(int)
        self.pseudo_frames = defaultdict(int)
        self.links = []
        self.links_without_trace = 0
        self.samples_without_thread = 0
        self.linked_value = 0
        self.heaviest = []
        self.orphans = defaultdict(int)
        self.windows = []
        self.no_file = set()

    def fail(self, where, what):
        if len(self.violations) < 50:
            self.violations.append(f"{where}: {what}")

    def check_request(self, name, raw):
        req = profiles_service.ExportProfilesServiceRequest.FromString(raw)
        self.requests += 1
        if not req.HasField("dictionary"):
            return self.fail(name, "no dictionary")
        d = req.dictionary
        # Zero values at index 0 of every table.
        for table, zero in [
            ("mapping_table", pb.Mapping()),
            ("location_table", pb.Location()),
            ("function_table", pb.Function()),
            ("link_table", pb.Link()),
            ("attribute_table", pb.KeyValueAndUnit()),
            ("stack_table", pb.Stack()),
        ]:
            t = getattr(d, table)
            if len(t) == 0 or t[0] != zero:
                self.fail(name, f"{table}[0] is not the zero value")
        if len(d.string_table) == 0 or d.string_table[0] != "":
            self.fail(name, 'string_table[0] is not ""')
        S = d.string_table
        ok = lambda i, table: 0 <= i < len(table)  # noqa: E731

        def s(i, where):
            if not ok(i, S):
                self.fail(name, f"{where}: string index {i} out of range")
                return ""
            return S[i]

        def attrs(indices, where):
            out = {}
            for a in indices:
                if not ok(a, d.attribute_table) or a == 0:
                    self.fail(name, f"{where}: attribute index {a} out of range or zero")
                    continue
                kv = d.attribute_table[a]
                key = s(kv.key_strindex, where)
                s(kv.unit_strindex, where)
                if key in out:
                    self.fail(name, f"{where}: attribute key {key} twice")
                out[key] = any_value(kv.value) if kv.HasField("value") else None
            return out

        used = {t: set() for t in ["location", "function", "link", "attribute", "stack", "string"]}
        for i, f in enumerate(d.function_table[1:], 1):
            fname = s(f.name_strindex, f"function {i}")
            s(f.system_name_strindex, f"function {i}")
            s(f.filename_strindex, f"function {i}")
            if not fname:
                self.fail(name, f"function {i} has no name")
        loc_info = {}
        for i, loc in enumerate(d.location_table[1:], 1):
            if not ok(loc.mapping_index, d.mapping_table):
                self.fail(name, f"location {i}: mapping index out of range")
            la = attrs(loc.attribute_indices, f"location {i}")
            used["attribute"].update(loc.attribute_indices)
            ft = la.get("profile.frame.type")
            if ft not in FRAME_TYPES:
                self.fail(name, f"location {i}: profile.frame.type is {ft!r}")
            self.frame_types[ft] += 1
            if not loc.lines:
                self.fail(name, f"location {i} has no lines")
            frames = []
            for line in loc.lines:
                if not ok(line.function_index, d.function_table) or line.function_index == 0:
                    self.fail(name, f"location {i}: function index {line.function_index}")
                    continue
                used["function"].add(line.function_index)
                f = d.function_table[line.function_index]
                frames.append(
                    (
                        S[f.name_strindex] if ok(f.name_strindex, S) else "",
                        S[f.filename_strindex] if ok(f.filename_strindex, S) else "",
                        f.start_line,
                        line.line,
                    )
                )
            pseudo = la.get("otelprof.frame.pseudo") is True
            if not pseudo:
                # Classes the JVM generates (lambdas, proxies) have no source file.
                for fname, filename, _, _ in frames:
                    if not filename:
                        self.no_file.add(fname)
            loc_info[i] = (frames, pseudo)
        for i, st in enumerate(d.stack_table[1:], 1):
            for li in st.location_indices:
                if not ok(li, d.location_table) or li == 0:
                    self.fail(name, f"stack {i}: location index {li}")
        for i, link in enumerate(d.link_table[1:], 1):
            # A span id alone is what link_trace_id=off sends (docs/output-format.md).
            if len(link.trace_id) not in (0, 16) or len(link.span_id) != 8:
                self.fail(name, f"link {i}: trace_id {len(link.trace_id)} / span_id {len(link.span_id)} bytes")
            if link.trace_id == bytes(16):
                self.fail(name, f"link {i}: all-zero trace id")
            if link.span_id == bytes(8):
                self.fail(name, f"link {i}: all-zero span id")
            if not link.trace_id:
                self.links_without_trace += 1

        for rp in req.resource_profiles:
            res = {}
            keys = [kv.key for kv in rp.resource.attributes]
            if len(keys) != len(set(keys)):
                self.fail(name, "resource keys are not unique")
            for kv in rp.resource.attributes:
                if not kv.key:
                    self.fail(name, "a resource attribute without a plain key")
                res[kv.key] = any_value(kv.value)
            for k in REQUIRED_RESOURCE:
                if k not in res:
                    self.fail(name, f"resource has no {k}")
            if self.resource and res != self.resource:
                changed = {k for k in set(res) | set(self.resource) if res.get(k) != self.resource.get(k)}
                self.resources_differ = sorted(changed)
            self.resource = res
            for sp in rp.scope_profiles:
                for p in sp.profiles:
                    self.check_profile(name, d, p, loc_info, attrs, used, s)
        # Orphans (SHOULD NOT): entries no sample reaches.
        stacks = used["stack"] - {0}
        locations = {li for si in stacks for li in d.stack_table[si].location_indices}
        functions = {ln.function_index for li in locations for ln in d.location_table[li].lines}
        for table, reached in [("stack", stacks), ("location", locations), ("function", functions)]:
            n = len(getattr(d, table + "_table")) - 1 - len(reached - {0})
            if n > 0:
                self.orphans[table] += n

    def check_profile(self, name, d, p, loc_info, attrs, used, s):
        self.profiles += 1
        where = f"{name} profile {self.profiles}"
        if len(p.profile_id) != 16 or p.profile_id == bytes(16):
            self.fail(where, f"profile_id is {p.profile_id.hex()!r}")
        self.profile_ids.append(p.profile_id.hex())
        if not p.HasField("sample_type"):
            self.fail(where, "no sample_type")
        st = (s(p.sample_type.type_strindex, where), s(p.sample_type.unit_strindex, where))
        pt = (s(p.period_type.type_strindex, where), s(p.period_type.unit_strindex, where))
        self.types.add(f"{st[0]}/{st[1]} period {pt[0]}/{pt[1]} {p.period}")
        if p.original_payload_format or p.original_payload:
            if not (p.original_payload_format and p.original_payload):
                self.fail(where, "original_payload_format and original_payload not set together")
        start, end = p.time_unix_nano, p.time_unix_nano + p.duration_nano
        self.windows.append([start, end])
        identities = set()
        with_thread = without_thread = 0
        for j, smp in enumerate(p.samples):
            sw = f"{where} sample {j}"
            if len(smp.values) == 1 and not smp.timestamps_unix_nano:
                value = smp.values[0]
                self.shapes["one value"] += 1
            elif not smp.values and smp.timestamps_unix_nano:
                value = len(smp.timestamps_unix_nano)
                self.shapes["timestamps only"] += 1
            else:
                self.fail(sw, f"{len(smp.values)} values and {len(smp.timestamps_unix_nano)} timestamps")
                continue
            for t in smp.timestamps_unix_nano:
                if not (start <= t < end):
                    self.fail(sw, f"timestamp {t} outside [{start}, {end})")
            if not (0 <= smp.stack_index < len(d.stack_table)):
                self.fail(sw, f"stack index {smp.stack_index} out of range")
                continue
            if not (0 <= smp.link_index < len(d.link_table)):
                self.fail(sw, f"link index {smp.link_index} out of range")
                continue
            used["stack"].add(smp.stack_index)
            used["attribute"].update(smp.attribute_indices)
            sa = attrs(smp.attribute_indices, sw)
            key = (smp.stack_index, frozenset(smp.attribute_indices), smp.link_index)
            if key in identities:
                self.fail(sw, "identical {stack, attributes, link} not merged")
            identities.add(key)
            self.samples += 1
            self.total += value
            self.sample_attr_keys.update(sa)
            if "thread.name" in sa:
                self.threads[sa["thread.name"]] += value
                with_thread += 1
            else:
                # backend=pyroscope sends no thread attributes at all (every sample attribute
                # is a series label there): a profile has them on every sample or on none.
                without_thread += 1
            if "thread.pool" in sa:
                self.pools[sa["thread.pool"]] += value
            if "span_name" in sa:
                self.span_names[sa["span_name"]] += value
            stack = []
            for li in d.stack_table[smp.stack_index].location_indices:
                frames, pseudo = loc_info.get(li, ([], False))
                for fr in frames:
                    stack.append(fr)
                    if pseudo:
                        self.pseudo_frames[fr[0]] += value
            seen = set()
            for depth, (fname, filename, start_line, line) in enumerate(stack):
                f = self.functions.setdefault(
                    fname,
                    {"self": 0, "cum": 0, "file": filename, "start_line": start_line, "lines": defaultdict(int)},
                )
                if depth == 0:
                    f["self"] += value
                    f["lines"][str(line)] += value
                if fname not in seen:
                    f["cum"] += value
                    seen.add(fname)
            names = [fr[0] for fr in stack]
            if smp.link_index:
                link = d.link_table[smp.link_index]
                self.linked_value += value
                self.links.append([link.trace_id.hex(), link.span_id.hex(), value, names[:64]])
            self.heaviest.append((value, names[:8]))
            self.heaviest = sorted(self.heaviest, key=lambda x: -x[0])[:5]
        if with_thread and without_thread:
            self.fail(where, f"{without_thread} samples without thread.name")
        self.samples_without_thread += without_thread

    def summary(self, metrics):
        return {
            "violations": self.violations,
            "requests": self.requests,
            "profiles": self.profiles,
            "unique_profile_ids": len(set(self.profile_ids)),
            "resource": {k: str(v) for k, v in self.resource.items()},
            "resource_changed_keys": self.resources_differ or [],
            "types": sorted(self.types),
            "samples": self.samples,
            "total": self.total,
            "shapes": dict(self.shapes),
            "functions": {
                k: {**v, "lines": dict(v["lines"])} for k, v in self.functions.items()
            },
            "threads": dict(self.threads),
            "pools": dict(self.pools),
            "sample_attribute_keys": sorted(self.sample_attr_keys),
            "span_names": dict(self.span_names),
            "frame_types": {str(k): v for k, v in self.frame_types.items()},
            "pseudo_frames": dict(self.pseudo_frames),
            "linked_value": self.linked_value,
            "links_without_trace": self.links_without_trace,
            "samples_without_thread": self.samples_without_thread,
            "links": self.links,
            "heaviest": [names for _, names in self.heaviest],
            "orphans": dict(self.orphans),
            "functions_without_file": sorted(self.no_file),
            "windows": self.windows,
            "metrics": metrics,
        }


def read_metrics(paths):
    """Last value of each metric (per attribute set) across the metrics requests."""
    out = {}
    for path in paths:
        with open(path, "rb") as f:
            req = metrics_service.ExportMetricsServiceRequest.FromString(f.read())
        for rm in req.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    points = getattr(m, kind).data_points if kind in ("sum", "gauge") else []
                    for dp in points:
                        label = ",".join(f"{kv.key}={any_value(kv.value)}" for kv in dp.attributes)
                        v = dp.as_int if dp.WhichOneof("value") == "as_int" else dp.as_double
                        out[m.name + ("{" + label + "}" if label else "")] = v
    return out


def main():
    directory = sys.argv[1]
    c = Checker()
    for path in sorted(glob.glob(os.path.join(directory, "profiles-*.pb"))):
        with open(path, "rb") as f:
            c.check_request(os.path.basename(path), f.read())
    metrics = read_metrics(sorted(glob.glob(os.path.join(directory, "metrics-*.pb"))))
    json.dump(c.summary(metrics), sys.stdout)


if __name__ == "__main__":
    main()
