#!/usr/bin/env python3
"""Grafana Pyroscope's OTLP ingest, as rules, over OTLP profiles requests saved by
otlp_receiver.py: what Pyroscope would name each profile, and every rule of its ingest that
would refuse, cut or multiply what otelprof sends.

    pyroscope_check.py DIR [--bounded]

Each rule is written from Pyroscope's source and cites it: grafana/pyroscope at commit
3fe6a457a32004efc46da819cbc114472d07415e (main, after v2.2.1), file, function and lines.
Limits are the defaults of an open-source Pyroscope (pkg/validation/limits.go, RegisterFlags).
Nothing here runs Pyroscope; the rules are read from its code (see docs/pyroscope.md).

"violations" are what Pyroscope refuses (a request, a profile or a series). With --bounded,
what backend=pyroscope promises is checked as well (no stack Pyroscope would cut, no trace id
made a series label by 1.20 to 2.0, no profile over the rate limiter's burst, sample attributes
of few values only, profiles no longer than Grafana's 30 s window); without it those are
"warnings". Requests are read with the official generated classes (PyPI opentelemetry-proto).
"""

import glob
import json
import os
import re
import sys
from collections import defaultdict

from opentelemetry.proto.collector.profiles.v1development import (
    profiles_service_pb2 as profiles_service,
)

# pkg/validation/limits.go, RegisterFlags.
MAX_LABEL_NAMES = 30  # -validation.max-label-names-per-series (line 164)
MAX_LABEL_NAME_LENGTH = 1024  # -validation.max-length-label-name (162)
MAX_LABEL_VALUE_LENGTH = 2048  # -validation.max-length-label-value (163)
MAX_SAMPLES = 16000  # -validation.max-profile-stacktrace-samples (191)
MAX_SAMPLE_LABELS = 100  # -validation.max-profile-stacktrace-sample-labels (192)
MAX_DEPTH = 1000  # -validation.max-profile-stacktrace-depth (193)
MAX_PROFILE_BYTES = 4 << 20  # -validation.max-profile-size-bytes (190)
BURST_BYTES = 2 << 20  # -distributor.ingestion-burst-size-mb (157)
REJECT_OLDER_NS = 3600 * 10**9  # -validation.reject-older-than (217-218)
REJECT_NEWER_NS = 600 * 10**9  # -validation.reject-newer-than (214-215)
# Grafana: a span's profiles are asked for within span +- 30 s (the embedded flame graph,
# public/app/features/explore/TraceView/components/TraceTimelineViewer/SpanDetail/SpanFlameGraph.tsx),
# +- 60 s for the link (createTraceLink.ts, getTimeRangeFromTimestamps), of the profile's time.
GRAFANA_WINDOW_NS = 30 * 10**9

# pkg/ingester/otlp/ingest_handler.go, export (284-297): the labels of every series before
# resource, scope and sample attributes.
FIXED_LABELS = ["__delta__", "__otel__", "__name__", "service_name"]
# Sample label keys Pyroscope treats apart (pkg/model/pprofsplit/pprof_split.go 37-38: profile_id
# is renamed span_id, span_id and trace_id are kept off series; ingest_handler.go: service.name
# splits the profile, service_name is a series label) and the reserved prefix.
SPECIAL_SAMPLE_KEYS = {"profile_id", "span_id", "trace_id", "service_name", "service.name"}
# Sample attributes with few values, which backend=pyroscope may send.
BOUNDED_SAMPLE_KEYS = {"span_name", "otelprof.capture.id"}
# Pyroscope <= 1.21 sanitises label names (pkg/validation/validate.go 204-240,
# SanitizeLegacyLabelName 247-271): this pattern, dots turned into underscores.
LEGACY_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def profile_type(st, su, pt, pu, period):
    """The profile's name and type id as Pyroscope's OTLP ingest makes them.

    pkg/ingester/otlp/convert.go, profileType (183-197): the key is
    "sample_type:sample_unit:period_type:period_unit", the period half empty without a period
    type or with period 0. newProfileBuilder (134-172): "samples:count:cpu:nanoseconds" is
    process_cpu (its sample type rewritten to cpu/nanoseconds, values times the period),
    "off_cpu:nanoseconds::" is off_cpu, anything else is named after the key's third field, the
    period type. pkg/phlaredb/labels/labels.go, CreateProfileLabels (29-56): the type id is
    name:sample_type:sample_unit:period_type:period_unit, from the converted profile.
    """
    key = f"{st}:{su}:{pt}:{pu}" if (pt or pu) and period != 0 else f"{st}:{su}::"
    if key == "samples:count:cpu:nanoseconds":
        name, st, su = "process_cpu", "cpu", "nanoseconds"
    elif key == "off_cpu:nanoseconds::":
        name = "off_cpu"
    else:
        name = key.split(":")[2]
    return name, f"{name}:{st}:{su}:{pt}:{pu}"


def label_value(v):
    """A resource/scope attribute value as a label, or None (ingest_handler.go,
    stringValueFromAnyValue 379-408: non-empty strings, ints, one-element arrays of those)."""
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value or None
    if kind == "int_value":
        return str(v.int_value)
    if kind == "array_value" and len(v.array_value.values) == 1:
        return label_value(v.array_value.values[0])
    return None


def varint_len(n):
    n = max(int(n), 0)
    length = 1
    while n >= 0x80:
        n >>= 7
        length += 1
    return length


def field_len(length):
    return 1 + varint_len(length) + length


class Checker:
    def __init__(self, bounded):
        self.bounded = bounded
        self.violations = []
        self.warnings = defaultdict(int)
        self.requests = 0
        self.profiles = 0
        self.types = {}  # type id -> name
        self.series = defaultdict(set)  # type id -> label value combinations
        self.max_label_names = 0
        self.max_samples = 0
        self.max_depth = 0
        self.max_pprof_bytes = 0
        self.max_duration = 0
        self.type_samples = defaultdict(int)  # (type, time, duration) -> samples over its parts
        self.type_parts = defaultdict(int)  # (type, time, duration) -> parts
        self.links = 0
        self.links_with_trace = 0
        self.deepest = []
        self.totals = defaultdict(int)  # type id -> sum of values

    def fail(self, where, rule, what):
        if len(self.violations) < 50:
            self.violations.append(f"{where}: {rule}: {what}")

    def promise(self, where, rule, what):
        """What Pyroscope accepts but backend=pyroscope promises to avoid."""
        if self.bounded:
            self.fail(where, rule, what)
        else:
            self.warnings[f"{rule}: {what}"] += 1

    def check_file(self, path):
        name = os.path.basename(path)
        with open(path, "rb") as f:
            raw = f.read()
        received_ns = int(os.stat(path).st_mtime * 1e9)
        req = profiles_service.ExportProfilesServiceRequest.FromString(raw)
        self.requests += 1
        # ingest_handler.go export 256-264: a request needs its dictionary and resource profiles.
        if not req.HasField("dictionary"):
            return self.fail(name, "ingest_handler.go 256-259", "no dictionary")
        if not req.resource_profiles:
            return self.fail(name, "ingest_handler.go 261-264", "no resource_profiles")
        d = req.dictionary
        self.check_dictionary(name, d)
        for rp in req.resource_profiles:
            base = {}
            for kv in rp.resource.attributes:
                v = label_value(kv.value)
                if v is not None:
                    base[kv.key] = v
            for sp in rp.scope_profiles:
                scope = dict(base)
                for kv in sp.scope.attributes:
                    v = label_value(kv.value)
                    if v is not None and kv.key not in scope:
                        scope[kv.key] = v
                for p in sp.profiles:
                    self.check_profile(name, d, p, scope, received_ns)

    def check_dictionary(self, name, d):
        S = d.string_table
        # The converter writes "" at index 0 of pprof's string table (convert.go 97) and
        # validate.go validateStringTableAccess (403-406) reads the converted table: otelprof's
        # own rule, index 0 the zero value, keeps the two the same.
        if not S or S[0] != "":
            self.fail(name, "profiles.proto ProfilesDictionary", 'string_table[0] is not ""')
        # convert.go convertSampleBack 357-367, convertLocationBack 240-244: every location's
        # mapping_index is read from mapping_table, so it needs at least its zero entry.
        if not d.mapping_table:
            self.fail(name, "convert.go convertLocationBack 240-244", "mapping_table is empty")
        for i, loc in enumerate(d.location_table):
            if not 0 <= loc.mapping_index < len(d.mapping_table):
                self.fail(name, "convert.go convertLocationBack 240-244", f"location {i}: mapping out of range")
            for line in loc.lines:
                # convert.go convertLineBack 271-274.
                if not 0 <= line.function_index < len(d.function_table):
                    self.fail(name, "convert.go convertLineBack 271-274", f"location {i}: function out of range")
        for i, f in enumerate(d.function_table):
            # convert.go convertFunctionBack 286-297: name, system name, file name in range.
            for s in (f.name_strindex, f.system_name_strindex, f.filename_strindex):
                if not 0 <= s < len(S):
                    self.fail(name, "convert.go convertFunctionBack 286-297", f"function {i}: string out of range")
        for i, m in enumerate(d.mapping_table):
            if not 0 <= m.filename_strindex < len(S):
                self.fail(name, "convert.go convertMappingBack 479-482", f"mapping {i}: file name out of range")
        for i, link in enumerate(d.link_table[1:], 1):
            # convert.go 416-431: span_id = hex of the link's span id; pkg/pprof/pprof.go
            # decodeSpanID 1143-1149 keeps it only as 16 hex digits (8 bytes), and the span
            # selector accepts only those (pkg/model/profile.go NewSpanSelector 88-101).
            if len(link.span_id) != 8:
                self.fail(name, "pprof.go decodeSpanID 1143-1149", f"link {i}: span id of {len(link.span_id)} bytes")

    def check_profile(self, name, d, p, resource_labels, received_ns):
        self.profiles += 1
        where = f"{name} profile {self.profiles}"
        S = d.string_table

        def s(i):
            return S[i] if 0 <= i < len(S) else None

        # convert.go newProfileBuilder 99-101: "sample type is missing".
        if not p.HasField("sample_type"):
            return self.fail(where, "convert.go 99-101", "no sample type")
        st, su = s(p.sample_type.type_strindex), s(p.sample_type.unit_strindex)
        pt = s(p.period_type.type_strindex) if p.HasField("period_type") else ""
        pu = s(p.period_type.unit_strindex) if p.HasField("period_type") else ""
        if None in (st, su, pt, pu):
            return self.fail(where, "convert.go at() 24-30", "type string out of range")
        type_name, type_id = profile_type(st, su, pt, pu, p.period)
        self.types[type_id] = type_name
        # validate.go ValidateLabels 140-143: an empty __name__ is "invalid metric name".
        if not type_name:
            self.fail(where, "validate.go ValidateLabels 140-143", f"empty profile name ({type_id}, period {p.period})")
        # pkg/model/profile.go ParseProfileTypeSelector (28 on): a type id is 5 ':' fields.
        if len(type_id.split(":")) != 5:
            self.fail(where, "profile.go ParseProfileTypeSelector", f"':' inside a type or unit: {type_id}")
        # validate.go 387-393: a sample type containing '-' is refused.
        if "-" in st:
            self.fail(where, "validate.go 387-393", f"sample type {st!r} contains '-'")
        if len(type_name) > MAX_LABEL_VALUE_LENGTH:
            self.fail(where, "validate.go ValidateLabels 161-163", "profile name too long")

        # validate.go ValidateProfile 329-336, ingestionWindow.valid 309-315: the profile's time
        # must be within (now - 1h, now + 10m) when it arrives.
        t = p.time_unix_nano
        if not (received_ns - REJECT_OLDER_NS < t < received_ns + REJECT_NEWER_NS):
            self.fail(where, "validate.go ingestionWindow 309-315", f"time {t} outside the window at receipt {received_ns}")
        self.max_duration = max(self.max_duration, p.duration_nano)
        if p.duration_nano > GRAFANA_WINDOW_NS:
            self.promise(where, "Grafana span window (SpanFlameGraph.tsx)", "profile longer than 30 s")

        # validate.go ValidateProfile 341-343: more samples than the limit refuses the profile.
        n = len(p.samples)
        self.max_samples = max(self.max_samples, n)
        if n > MAX_SAMPLES:
            self.fail(where, "validate.go 341-343", f"{n} samples (limit {MAX_SAMPLES})")
        # A profile sent in parts (backend=pyroscope): requests with the same type and window.
        whole = (type_id, p.time_unix_nano, p.duration_nano)
        self.type_samples[whole] += n
        self.type_parts[whole] += 1

        series = {}
        size = PprofSize(d)
        for j, smp in enumerate(p.samples):
            sw = f"{where} sample {j}"
            # convert.go convertSampleBack 315-323, 339-341; validate.go 379-381: one value per
            # sample type (there is one), or timestamps only (their count is the value).
            if len(smp.values) == 1:
                value = smp.values[0]
            elif not smp.values and smp.timestamps_unix_nano:
                value = len(smp.timestamps_unix_nano)
            else:
                self.fail(sw, "convert.go 315-341", f"{len(smp.values)} values, {len(smp.timestamps_unix_nano)} timestamps")
                continue
            if type_name == "process_cpu":
                value *= p.period  # convert.go 327-328
            self.totals[type_id] += value
            # convert.go 348-351: stack_index in range; at() for every location.
            if not 0 <= smp.stack_index < len(d.stack_table):
                self.fail(sw, "convert.go 348-351", "stack out of range")
                continue
            stack = d.stack_table[smp.stack_index].location_indices
            if any(not 0 <= li < len(d.location_table) for li in stack):
                self.fail(sw, "convert.go convertSampleBack 357-367", "location out of range")
                continue
            depth = len(stack)
            self.max_depth = max(self.max_depth, depth)
            # validate.go ValidateProfile 349-353: deeper stacks keep their last 1,000 entries,
            # the root end; the leaf, where the time is, is lost.
            if depth > MAX_DEPTH:
                self.promise(sw, "validate.go 349-353", f"stack of {depth} frames loses its leaf")
            self.note_depth(d, stack)
            # convert.go serviceNameFromSample 36-39: an attribute index out of range drops the
            # whole profile silently.
            labels = {}
            for a in smp.attribute_indices:
                if not 0 <= a < len(d.attribute_table):
                    self.fail(sw, "convert.go 36-39", "attribute index out of range: the profile is dropped")
                    continue
                kv = d.attribute_table[a]
                key = s(kv.key_strindex)
                v = label_value(kv.value)
                if key is None:
                    self.fail(sw, "convert.go convertSampleAttributesToLabelsBack 394-414", "key out of range")
                elif key == "service.name":
                    continue  # splits the profile per service (convert.go 33-60)
                elif v is not None:
                    labels[key] = v
            for key in labels:
                if key in SPECIAL_SAMPLE_KEYS or key.startswith("__"):
                    self.fail(sw, "pprof_split.go 37-38 / ingest_handler.go 284-297", f"sample attribute {key!r} collides with Pyroscope's own labels")
                if key not in BOUNDED_SAMPLE_KEYS:
                    self.promise(sw, "series cardinality (pprof_split.go VisitSampleSeries)", f"sample attribute {key}")
            if smp.link_index:
                # convert.go 416: link_index 0 is none.
                if not 0 < smp.link_index < len(d.link_table):
                    self.fail(sw, "convert.go 416-431", "link out of range")
                    continue
                link = d.link_table[smp.link_index]
                self.links += 1
                # convert.go 425-430: a 16-byte trace id becomes the label trace_id, which
                # Pyroscope 1.20.0 to 2.0.x promote to a series label (pprof_split.go:38 at
                # v1.20.0 .. v2.0.6; fixed in v2.1.0, commit eb3f7545a): a series per trace.
                if len(link.trace_id) == 16:
                    self.links_with_trace += 1
                    self.promise(sw, "pprof_split.go:38 (1.20-2.0)", "trace id made a series label")
            # validate.go 354-356: labels per sample (the link adds span_id and trace_id).
            n_labels = len(labels) + (2 if smp.link_index else 0)
            if n_labels > MAX_SAMPLE_LABELS:
                self.fail(sw, "validate.go 354-356", f"{n_labels} labels")
            series.setdefault(tuple(sorted(labels.items())), True)
            size.add(smp, stack)

        # Every combination of sample attribute values is a series (pprof_split.go
        # VisitSampleSeries 66-99), labelled with the fixed labels, the resource's and scope's,
        # and its own sample labels; validate.go ValidateLabels checks each.
        for combo in series:
            self.series[type_id].add(combo)
            names = list(FIXED_LABELS) + list(resource_labels) + [k for k, _ in combo]
            values = dict(resource_labels)
            values.update(combo)
            values["__name__"] = type_name
            # ingest_handler.go getServiceNameFromAttributes 329-345.
            values["service_name"] = resource_labels.get("service.name", "unknown_service")
            self.check_labels(where, names, values)
        pprof_bytes = size.total()
        self.max_pprof_bytes = max(self.max_pprof_bytes, pprof_bytes)
        # validate.go 338-340 (max_profile_size_bytes, on the converted pprof); and the rate
        # limiter's burst (distributor.go 563-575, rateLimit 1097-1106): a push over it never
        # passes.
        if pprof_bytes > MAX_PROFILE_BYTES:
            self.fail(where, "validate.go 338-340", f"about {pprof_bytes} bytes as pprof")
        elif pprof_bytes > BURST_BYTES:
            self.promise(where, "distributor.go rateLimit (burst)", f"about {pprof_bytes} bytes as pprof")

    def check_labels(self, where, names, values):
        # validate.go ValidateLabels 135-139: at most 30 label names. On 2.x service.name and
        # service_name are two names; on 1.x (sanitisation) they are one: count as 2.x.
        n = len(set(names))
        self.max_label_names = max(self.max_label_names, n)
        if n > MAX_LABEL_NAMES:
            self.fail(where, "validate.go ValidateLabels 135-139", f"{n} label names (limit {MAX_LABEL_NAMES})")
        if not values.get("service_name", "x"):
            self.fail(where, "validate.go ValidateLabels 144-147", "empty service_name")
        sanitised = {}
        for k in set(names):
            if len(k) > MAX_LABEL_NAME_LENGTH:
                self.fail(where, "validate.go 158-160", f"label name of {len(k)} bytes")
            v = values.get(k, "")
            if len(v.encode()) > MAX_LABEL_VALUE_LENGTH:
                self.fail(where, "validate.go 161-163", f"label {k} value of {len(v.encode())} bytes")
            # <= 1.21: names outside the legacy pattern refuse the profile; names equal after
            # dots became underscores must agree (validate.go 204-240).
            if not LEGACY_LABEL_NAME.match(k):
                self.fail(where, "validate.go 204-240 (<= 1.21)", f"label name {k!r}")
            legacy = k.replace(".", "_")
            if legacy in sanitised and sanitised[legacy] != v and k not in FIXED_LABELS:
                self.fail(where, "validate.go 204-240 (<= 1.21)", f"{k} collides with another name once sanitised")
            sanitised[legacy] = v

    def note_depth(self, d, stack):
        if self.deepest and len(stack) <= self.deepest[-1][0] and len(self.deepest) >= 3:
            return
        def name(li):
            loc = d.location_table[li]
            fn = loc.lines[0].function_index if loc.lines else 0
            return d.string_table[d.function_table[fn].name_strindex]

        def is_java(li):
            for ai in d.location_table[li].attribute_indices:
                kv = d.attribute_table[ai]
                if d.string_table[kv.key_strindex] == "profile.frame.type":
                    return kv.value.string_value == "jvm"
            return False

        # The innermost Java frame (native and kernel frames may sit above it: the leaf's
        # own calls into the JVM or the kernel) and the root.
        names = []
        if stack:
            java = next((li for li in stack if is_java(li)), stack[0])
            names = [name(java), name(stack[-1])]
        self.deepest.append((len(stack), names))
        self.deepest = sorted(self.deepest, key=lambda x: -x[0])[:3]

    def summary(self):
        split = {f"{k[0]} at {k[1]}": [self.type_samples[k], self.type_parts[k]] for k in self.type_parts if self.type_parts[k] > 1}
        return {
            "violations": self.violations,
            "warnings": dict(self.warnings),
            "requests": self.requests,
            "profiles": self.profiles,
            "types": self.types,
            "series": {k: len(v) for k, v in self.series.items()},
            "max_label_names": self.max_label_names,
            "max_samples": self.max_samples,
            "max_samples_over_parts": max(self.type_samples.values(), default=0),
            "split": split,
            "max_depth": self.max_depth,
            "deepest": self.deepest,
            "max_pprof_bytes": self.max_pprof_bytes,
            "max_duration_ns": self.max_duration,
            "links": self.links,
            "links_with_trace_id": self.links_with_trace,
            "totals": dict(self.totals),
        }


class PprofSize:
    """The size of the pprof profile Pyroscope converts an OTLP profile to (convert.go:
    samples with their values, location ids and labels; the locations, functions and strings
    they reach), counted as protobuf lays it out, ids as small as the converter makes them."""

    def __init__(self, d):
        self.d = d
        self.locations = {}
        self.functions = {}
        self.strings = {"": 0}
        self.bytes = 0

    def string(self, text):
        if text not in self.strings:
            self.strings[text] = len(self.strings)
            self.bytes += field_len(len(text.encode()))
        return self.strings[text]

    def function(self, fi):
        if fi not in self.functions:
            f = self.d.function_table[fi]
            S = self.d.string_table
            fid = len(self.functions) + 1
            self.functions[fi] = fid
            ids = [self.string(S[f.name_strindex]), self.string(S[f.system_name_strindex]), self.string(S[f.filename_strindex])]
            body = 1 + varint_len(fid) + sum(1 + varint_len(i) for i in ids) + (1 + varint_len(f.start_line) if f.start_line else 0)
            self.bytes += field_len(body)
        return self.functions[fi]

    def location(self, li):
        if li not in self.locations:
            loc = self.d.location_table[li]
            lid = len(self.locations) + 1
            self.locations[li] = lid
            body = 1 + varint_len(lid) + 2 + (1 + varint_len(loc.address) if loc.address else 0)
            for line in loc.lines:
                fid = self.function(line.function_index)
                body += field_len(1 + varint_len(fid) + (1 + varint_len(line.line) if line.line else 0))
            self.bytes += field_len(body)
        return self.locations[li]

    def add(self, smp, stack):
        ids = [self.location(li) for li in stack]
        body = field_len(sum(varint_len(i) for i in ids)) if ids else 0
        body += field_len(11)  # the value
        labels = 0
        for a in smp.attribute_indices:
            kv = self.d.attribute_table[a]
            v = label_value(kv.value)
            if v is not None:
                labels += field_len(2 + varint_len(self.string(self.d.string_table[kv.key_strindex])) + varint_len(self.string(v)))
        if smp.link_index:
            link = self.d.link_table[smp.link_index]
            for key, value in (("span_id", link.span_id), ("trace_id", link.trace_id)):
                if value:
                    labels += field_len(2 + varint_len(self.string(key)) + varint_len(self.string(value.hex())))
        self.bytes += field_len(body + labels)

    def total(self):
        return self.bytes


def main():
    directory = sys.argv[1]
    c = Checker("--bounded" in sys.argv[2:])
    for path in sorted(glob.glob(os.path.join(directory, "profiles-*.pb"))):
        c.check_file(path)
    json.dump(c.summary(), sys.stdout)


if __name__ == "__main__":
    main()
