#!/usr/bin/env python3
"""Checks OpenTelemetry Collector YAML files for a profiles pipeline (collector-config/):

- valid YAML, with only the Collector's top-level sections;
- every pipeline references only components defined in the file, and every defined
  component is used by some pipeline (or service.extensions);
- pipeline ids are <signal>[/<name>] with signal traces, metrics, logs or profiles;
- each profiles pipeline has memory_limiter first, no batch processor (it does not support
  profiles), and only components known to handle profiles.

    check_collector_config.py FILE...   # exit 1 and one line per problem on failure
"""

import sys

import yaml

SECTIONS = {"receivers", "processors", "exporters", "extensions", "connectors", "service"}
SIGNALS = {"traces", "metrics", "logs", "profiles"}
PROFILE_COMPONENTS = {
    "receivers": {"otlp"},
    "processors": {"memory_limiter", "resource", "resourcedetection", "k8sattributes", "transform"},
    "exporters": {"otlp_grpc", "otlp_http", "debug"},
}


def kind(component_id):
    return component_id.split("/", 1)[0]


def check(path):
    problems = []
    with open(path) as f:
        doc = yaml.safe_load(f)
    if not isinstance(doc, dict):
        return [f"{path}: not a YAML mapping"]
    for key in doc:
        if key not in SECTIONS:
            problems.append(f"{path}: unknown top-level section {key!r}")
    service = doc.get("service") or {}
    pipelines = service.get("pipelines") or {}
    if not pipelines:
        problems.append(f"{path}: no service.pipelines")
    defined = {s: set((doc.get(s) or {}).keys()) for s in ("receivers", "processors", "exporters", "extensions", "connectors")}
    used = {s: set() for s in defined}
    for ext in service.get("extensions") or []:
        used["extensions"].add(ext)
        if ext not in defined["extensions"]:
            problems.append(f"{path}: service.extensions uses undefined extension {ext!r}")
    has_profiles = False
    for pid, pipeline in pipelines.items():
        signal = kind(pid)
        if signal not in SIGNALS:
            problems.append(f"{path}: pipeline {pid!r} is not <signal>[/<name>]")
        pipeline = pipeline or {}
        for section in ("receivers", "processors", "exporters"):
            for cid in pipeline.get(section) or []:
                # A connector may stand as a receiver or an exporter.
                if cid in defined[section] or (section != "processors" and cid in defined["connectors"]):
                    used[section if cid in defined[section] else "connectors"].add(cid)
                else:
                    problems.append(f"{path}: pipeline {pid} uses undefined {section[:-1]} {cid!r}")
        if not pipeline.get("receivers"):
            problems.append(f"{path}: pipeline {pid} has no receivers")
        if not pipeline.get("exporters"):
            problems.append(f"{path}: pipeline {pid} has no exporters")
        if signal == "profiles":
            has_profiles = True
            procs = pipeline.get("processors") or []
            if not procs or kind(procs[0]) != "memory_limiter":
                problems.append(f"{path}: pipeline {pid} must start with memory_limiter")
            for section, allowed in PROFILE_COMPONENTS.items():
                for cid in pipeline.get(section) or []:
                    if kind(cid) == "batch":
                        problems.append(f"{path}: pipeline {pid}: the batch processor does not support profiles")
                    elif kind(cid) not in allowed:
                        problems.append(f"{path}: pipeline {pid}: {cid!r} is not known to support profiles")
    if not has_profiles:
        problems.append(f"{path}: no profiles pipeline")
    for section, ids in defined.items():
        for cid in sorted(ids - used[section]):
            problems.append(f"{path}: {section[:-1]} {cid!r} is defined but never used")
    return problems


def main():
    problems = []
    for path in sys.argv[1:]:
        problems += check(path)
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"{len(sys.argv) - 1} collector configurations OK")


if __name__ == "__main__":
    main()
