"""Sends many small OTLP profiles requests (built with the official classes, otlp_client.py)
over HTTP to one or more receivers in turn, and says what was acknowledged: the tests that
kill receivers count every acknowledged sample against what the store answers.

    otlp_send_many.py --targets http://127.0.0.1:P1,http://127.0.0.1:P2 --requests N \
        --first I --hour-ns H [--hours K]

Request i goes to target i % len(targets): service `checkout` or `cart` (i // 2 % 2), hour
i % K of the K (2) starting at H, function `py.fleet.Work.f<i % 7>`, 1 + (i * 37) % 50
samples, a profile id of its own. Prints one JSON object: {"acked": n, "refused": n,
"samples": total acknowledged, "by_function": {function: samples}}.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from otlp_client import profile_request, send_http  # noqa: E402

HOUR_NS = 3600 * 1_000_000_000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--first", type=int, default=0, help="index of the first request")
    ap.add_argument("--hour-ns", type=int, required=True, help="start of the first hour (ns)")
    ap.add_argument("--hours", type=int, default=2, help="hours the requests spread over")
    a = ap.parse_args()
    targets = a.targets.split(",")
    out = {"acked": 0, "refused": 0, "samples": 0, "by_function": {}}
    for i in range(a.first, a.first + a.requests):
        function = f"py.fleet.Work.f{i % 7}"
        samples = 1 + (i * 37) % 50
        start = a.hour_ns + (i % a.hours) * HOUR_NS + (i * 7919 % 3000) * 1_000_000_000
        service = ("checkout", "cart")[i // 2 % 2]
        body = profile_request(service, "1", function, samples, start, i.to_bytes(16, "big"))
        result = send_http(targets[i % len(targets)], body, True, "", "application/x-protobuf")
        if result["ok"]:
            out["acked"] += 1
            out["samples"] += samples
            out["by_function"][function] = out["by_function"].get(function, 0) + samples
        else:
            out["refused"] += 1
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
