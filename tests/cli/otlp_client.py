"""An independent OTLP client for the `otelprof receive` tests, on the official generated
classes (PyPI opentelemetry-proto) and grpcio: what a Collector's otlp / otlphttp exporter
sends, over the same wire.

    otlp_client.py --protocol grpc --target 127.0.0.1:4317 --body FILE [--gzip] [--token T]
    otlp_client.py --protocol http --target http://127.0.0.1:4318 --body FILE [--gzip] ...
    otlp_client.py --make-profile OUT   # writes a valid request built here, not by otelprof

Prints one JSON object: {"ok": bool, "code": <gRPC status name or HTTP status>, "message": str}.
"""
import argparse
import gzip
import json
import sys
import urllib.error
import urllib.request

import grpc
from opentelemetry.proto.collector.profiles.v1development import (
    profiles_service_pb2 as svc,
    profiles_service_pb2_grpc as svc_grpc,
)
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.profiles.v1development import profiles_pb2 as pb


def make_profile(path, service, version, function, samples):
    """Writes profile_request(...) to PATH."""
    with open(path, "wb") as f:
        f.write(profile_request(service, version, function, samples))


def profile_request(service, version, function, samples, start_ns=1_700_000_000_000_000_000,
                    profile_id=bytes(range(1, 17))):
    """A minimal valid proto v1.10 request: one resource, one stack main -> FUNCTION."""
    d = pb.ProfilesDictionary()
    d.string_table.extend(["", "py.sender.Main.main", function, "Main.java", "samples", "count",
                           "cpu", "nanoseconds", "span_name", "GET /py", "profile.frame.type", "jvm"])
    d.mapping_table.add()
    d.function_table.add()
    d.function_table.add(name_strindex=1, system_name_strindex=1, filename_strindex=3)
    d.function_table.add(name_strindex=2, system_name_strindex=2, filename_strindex=3)
    d.attribute_table.add()
    frame_type = d.attribute_table.add(key_strindex=10)
    frame_type.value.string_value = "jvm"
    endpoint = d.attribute_table.add(key_strindex=8)
    endpoint.value.string_value = "GET /py"
    d.location_table.add()
    d.location_table.add(lines=[pb.Line(function_index=1, line=3)], attribute_indices=[1])
    d.location_table.add(lines=[pb.Line(function_index=2, line=7)], attribute_indices=[1])
    d.stack_table.add()
    d.stack_table.add(location_indices=[2, 1])  # leaf first
    d.link_table.add()
    req = svc.ExportProfilesServiceRequest(dictionary=d)
    rp = req.resource_profiles.add()
    for k, v in (("service.name", service), ("service.version", version)):
        rp.resource.attributes.add(key=k, value=common_pb2.AnyValue(string_value=v))
    sp = rp.scope_profiles.add()
    sp.scope.name = "py-sender"
    p = sp.profiles.add()
    p.sample_type.type_strindex = 4
    p.sample_type.unit_strindex = 5
    p.period_type.type_strindex = 6
    p.period_type.unit_strindex = 7
    p.period = 10_000_000
    p.time_unix_nano = start_ns
    p.duration_nano = 10_000_000_000
    p.profile_id = profile_id
    p.samples.add(stack_index=1, attribute_indices=[2], values=[samples])
    return req.SerializeToString()


def send_grpc(target, body, use_gzip, token, cacert=None):
    if cacert:
        with open(cacert, "rb") as f:
            channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(f.read()))
    else:
        channel = grpc.insecure_channel(target)
    stub = svc_grpc.ProfilesServiceStub(channel)
    # A raw-bytes call, so that malformed bodies can be sent as they are.
    call = channel.unary_unary(
        "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
        request_serializer=lambda b: b,
        response_deserializer=svc.ExportProfilesServiceResponse.FromString,
    )
    del stub
    metadata = [("authorization", "Bearer " + token)] if token else None
    try:
        call(body, timeout=30, metadata=metadata,
             compression=grpc.Compression.Gzip if use_gzip else grpc.Compression.NoCompression)
        return {"ok": True, "code": "OK", "message": ""}
    except grpc.RpcError as e:
        return {"ok": False, "code": e.code().name, "message": e.details() or ""}
    finally:
        channel.close()


def send_http(target, body, use_gzip, token, content_type, cacert=None):
    headers = {"Content-Type": content_type}
    if use_gzip:
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(target + "/v1development/profiles", data=body, headers=headers,
                                 method="POST")
    try:
        context = None
        if cacert:
            import ssl
            context = ssl.create_default_context(cafile=cacert)
        with urllib.request.urlopen(req, timeout=30, context=context) as r:
            return {"ok": r.status == 200, "code": r.status, "message": ""}
    except urllib.error.HTTPError as e:
        raw = e.read()
        message = ""
        try:
            from google.rpc import status_pb2  # noqa: F401  (not always installed)
        except ImportError:
            pass
        # google.rpc.Status: field 2 is the message; decode it with the generic reader.
        from google.protobuf.internal.decoder import _DecodeVarint
        i = 0
        while i < len(raw):
            key, i = _DecodeVarint(raw, i)
            field, wire = key >> 3, key & 7
            if wire == 0:
                _, i = _DecodeVarint(raw, i)
            elif wire == 2:
                n, i = _DecodeVarint(raw, i)
                if field == 2:
                    message = raw[i:i + n].decode("utf-8", "replace")
                i += n
            else:
                break
        return {"ok": False, "code": e.code, "message": message}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["grpc", "http"])
    ap.add_argument("--target")
    ap.add_argument("--body")
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--token", default="")
    ap.add_argument("--content-type", default="application/x-protobuf")
    ap.add_argument("--make-profile")
    ap.add_argument("--cacert", help="trust this PEM certificate (TLS)")
    ap.add_argument("--service", default="py-sender")
    ap.add_argument("--version", default="1")
    ap.add_argument("--function", default="py.sender.Work.compute")
    ap.add_argument("--samples", type=int, default=5)
    a = ap.parse_args()
    if a.make_profile:
        make_profile(a.make_profile, a.service, a.version, a.function, a.samples)
        return
    with open(a.body, "rb") as f:
        body = f.read()
    if a.protocol == "grpc":
        result = send_grpc(a.target, body, a.gzip, a.token, a.cacert)
    else:
        result = send_http(a.target, body, a.gzip, a.token, a.content_type, a.cacert)
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
