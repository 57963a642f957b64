#!/usr/bin/env python3
"""An OTLP receiver for the tests: profiles and metrics over gRPC or HTTP/protobuf.

It is independent of otelprof: it parses every request with the official generated classes
of the PyPI package opentelemetry-proto (proto v1.10 layout) and saves the received bytes,
one file per request, for otlp_check.py to examine.

    otlp_receiver.py --protocol grpc|http --port N --out DIR --ready FILE [--script S]

--port 0 picks a free port; the port is written to --ready once the server listens.
--script lists answers for the first profile requests, then every request succeeds:
  HTTP: status codes, with ":SECONDS" for a Retry-After header (e.g. "503,429:2,400");
  gRPC: status code names, with ":SECONDS" for a google.rpc.RetryInfo detail
        (e.g. "UNAVAILABLE,RESOURCE_EXHAUSTED:2,INVALID_ARGUMENT").
Every request is logged as a JSON line in DIR/requests.log (time, signal, answer, profile ids,
decoded size and, over HTTP, the size on the wire).
"""

import argparse
import gzip
import json
import os
import sys
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics_service
from opentelemetry.proto.collector.profiles.v1development import (
    profiles_service_pb2 as profiles_service,
)

PROFILES_GRPC = "opentelemetry.proto.collector.profiles.v1development.ProfilesService"
METRICS_GRPC = "opentelemetry.proto.collector.metrics.v1.MetricsService"
PROFILES_PATH = "/v1development/profiles"
METRICS_PATH = "/v1/metrics"


class Store:
    """Saves requests and answers the scripted responses, thread-safely."""

    def __init__(self, out, script):
        self.out = out
        self.script = list(script)
        self.lock = threading.Lock()
        self.count = {"profiles": 0, "metrics": 0}

    def next_answer(self, signal):
        with self.lock:
            if signal == "profiles" and self.script:
                return self.script.pop(0)
            return None

    def save(self, signal, raw, answer, wire_bytes=None):
        """Parses `raw` with the official class and logs the request; returns whether it
        parsed. `wire_bytes` is the size as received (compressed), when known."""
        ids = []
        try:
            if signal == "profiles":
                req = profiles_service.ExportProfilesServiceRequest.FromString(raw)
                for rp in req.resource_profiles:
                    for sp in rp.scope_profiles:
                        ids.extend(p.profile_id.hex() for p in sp.profiles)
            else:
                metrics_service.ExportMetricsServiceRequest.FromString(raw)
            ok = True
        except Exception as e:  # noqa: BLE001 - any parse failure is a rejection
            print(f"receiver: cannot parse {signal} request: {e}", file=sys.stderr)
            ok = False
        with self.lock:
            n = self.count[signal]
            self.count[signal] += 1
            accepted = ok and answer is None
            if accepted:
                with open(os.path.join(self.out, f"{signal}-{n:04d}.pb"), "wb") as f:
                    f.write(raw)
            with open(os.path.join(self.out, "requests.log"), "a") as f:
                f.write(
                    json.dumps(
                        {
                            "t": time.time(),
                            "signal": signal,
                            "n": n,
                            "bytes": len(raw),
                            "wire_bytes": wire_bytes if wire_bytes is not None else len(raw),
                            "answer": "ok" if accepted else (answer or "unparsable"),
                            "profile_ids": ids,
                        }
                    )
                    + "\n"
                )
        return ok


def parse_script(text):
    out = []
    for item in filter(None, (s.strip() for s in (text or "").split(","))):
        code, _, delay = item.partition(":")
        out.append((code, int(delay) if delay else None))
    return out


# --- HTTP ---------------------------------------------------------------------------------


def http_server(port, store):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, body=b"", headers=()):
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if self.headers.get("Content-Encoding", "") == "gzip":
                raw = gzip.decompress(raw)
            if self.headers.get("Content-Type", "") != "application/x-protobuf":
                return self.reply(415)
            if self.path == PROFILES_PATH:
                signal = "profiles"
            elif self.path == METRICS_PATH:
                signal = "metrics"
            else:
                return self.reply(404)
            answer = store.next_answer(signal)
            ok = store.save(signal, raw, None if answer is None else f"http-{answer[0]}", length)
            if not ok:
                return self.reply(400, b"unparsable")
            if answer is not None:
                code, delay = answer
                headers = [("Retry-After", str(delay))] if delay is not None else []
                return self.reply(int(code), b"scripted failure", headers)
            if signal == "profiles":
                body = profiles_service.ExportProfilesServiceResponse().SerializeToString()
            else:
                body = metrics_service.ExportMetricsServiceResponse().SerializeToString()
            self.reply(200, body)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


# --- gRPC ---------------------------------------------------------------------------------


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, wire, payload):
    key = varint((number << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def rpc_status_with_retry_info(code, message, delay_seconds):
    """google.rpc.Status{code, message, details=[Any(google.rpc.RetryInfo)]}, by hand."""
    duration = field(1, 0, delay_seconds)
    retry_info = field(1, 2, duration)
    any_msg = field(1, 2, b"type.googleapis.com/google.rpc.RetryInfo") + field(2, 2, retry_info)
    return field(1, 0, code) + field(2, 2, message.encode()) + field(3, 2, any_msg)


def grpc_server(port, store):
    def handler(signal, response):
        def export(raw, context):
            answer = store.next_answer(signal)
            ok = store.save(signal, raw, None if answer is None else f"grpc-{answer[0]}")
            if not ok:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unparsable")
            if answer is not None:
                name, delay = answer
                code = grpc.StatusCode[name]
                if delay is not None:
                    details = rpc_status_with_retry_info(code.value[0], "scripted", delay)
                    context.set_trailing_metadata((("grpc-status-details-bin", details),))
                context.abort(code, "scripted failure")
            return response

        return grpc.unary_unary_rpc_method_handler(
            export,
            request_deserializer=None,  # keep the received bytes
            response_serializer=lambda m: m.SerializeToString(),
        )

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                PROFILES_GRPC,
                {"Export": handler("profiles", profiles_service.ExportProfilesServiceResponse())},
            ),
            grpc.method_handlers_generic_handler(
                METRICS_GRPC,
                {"Export": handler("metrics", metrics_service.ExportMetricsServiceResponse())},
            ),
        )
    )
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    if bound == 0:
        raise SystemExit(f"cannot bind 127.0.0.1:{port}")
    server.start()
    return bound, server


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["grpc", "http"], required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--script", default="")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    store = Store(args.out, parse_script(args.script))
    keep = None
    if args.protocol == "http":
        port = http_server(args.port, store)
    else:
        port, keep = grpc_server(args.port, store)
    tmp = args.ready + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.rename(tmp, args.ready)
    # Serve until killed (the test harness kills it on drop); exit if the parent dies.
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)
    del keep


if __name__ == "__main__":
    main()
