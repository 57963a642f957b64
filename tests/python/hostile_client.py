#!/usr/bin/env python3
"""Hostile OTLP/gRPC clients for tests/tests/hostile/receiver.rs, on grpcio (the wire a
Collector's exporter speaks): many large exports at once, with or without the token.

    hostile_client.py flood --target HOST:PORT --count N --bytes SIZE [--token T] [--gzip]

Sends N exports of SIZE random bytes at once, each on its own channel (its own connection),
and prints one JSON object: {"answers": [{"code": NAME, "message": str, "seconds": float}]}.
"""
import argparse
import json
import os
import sys
import threading
import time

import grpc

EXPORT = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"


def send(target, body, token, use_gzip, out):
    # A large message must be allowed on the sending side; the receiver decides.
    channel = grpc.insecure_channel(
        target, options=[("grpc.max_send_message_length", len(body) + (1 << 20))]
    )
    call = channel.unary_unary(
        EXPORT, request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    metadata = [("authorization", "Bearer " + token)] if token else None
    start = time.monotonic()
    try:
        call(
            body,
            timeout=60,
            metadata=metadata,
            compression=grpc.Compression.Gzip if use_gzip else grpc.Compression.NoCompression,
        )
        answer = {"code": "OK", "message": ""}
    except grpc.RpcError as e:
        answer = {"code": e.code().name, "message": e.details() or ""}
    finally:
        channel.close()
    answer["seconds"] = time.monotonic() - start
    out.append(answer)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    flood = sub.add_parser("flood")
    flood.add_argument("--target", required=True)
    flood.add_argument("--count", type=int, required=True)
    flood.add_argument("--bytes", type=int, required=True)
    flood.add_argument("--token", default="")
    flood.add_argument("--gzip", action="store_true")
    a = ap.parse_args()
    body = os.urandom(a.bytes)
    answers = []
    threads = [
        threading.Thread(target=send, args=(a.target, body, a.token, a.gzip, answers))
        for _ in range(a.count)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    json.dump({"answers": answers}, sys.stdout)


if __name__ == "__main__":
    main()
