"""OpAMP messages through the generated classes of PyPI opentelemetry-opamp-client (its
opamp_pb2, built from the specification's opamp.proto), to hold otelprof's hand-written prost
structs (opamp/src/proto.rs) to the real field numbers and types.

  opamp_messages.py read FILE AgentToServer|ServerToAgent   -> the message as JSON on stdout
  opamp_messages.py write DIR                               -> DIR/agent_to_server.bin and
                                                               DIR/server_to_agent.bin, every
                                                               field otelprof reads set

Used by tests/tests/opamp/messages.rs.
"""
import json
import sys

from google.protobuf import json_format
from opentelemetry._opamp.proto import anyvalue_pb2, opamp_pb2


def read(path, name):
    message = getattr(opamp_pb2, name)()
    with open(path, "rb") as f:
        message.ParseFromString(f.read())
    # Field names as in opamp.proto; 64-bit integers as JSON strings (proto3 JSON mapping).
    print(json_format.MessageToJson(message, preserving_proto_field_name=True, sort_keys=True))


def kv(key, **value):
    return anyvalue_pb2.KeyValue(key=key, value=anyvalue_pb2.AnyValue(**value))


def write(directory):
    agent = opamp_pb2.AgentToServer(
        instance_uid=bytes(range(16)),
        sequence_num=7,
        capabilities=opamp_pb2.AgentCapabilities_ReportsStatus
        | opamp_pb2.AgentCapabilities_AcceptsRemoteConfig
        | opamp_pb2.AgentCapabilities_ReportsHealth,
        flags=opamp_pb2.AgentToServerFlags_RequestInstanceUid,
        agent_description=opamp_pb2.AgentDescription(
            identifying_attributes=[kv("service.name", string_value="shop")],
            non_identifying_attributes=[
                kv("process.pid", int_value=4242),
                kv("sampled", bool_value=True),
                kv("ratio", double_value=0.5),
                kv("raw", bytes_value=b"\x01\xff"),
                kv("list", array_value=anyvalue_pb2.ArrayValue(values=[anyvalue_pb2.AnyValue(string_value="a")])),
            ],
        ),
        health=opamp_pb2.ComponentHealth(
            healthy=True,
            start_time_unix_nano=1_700_000_000_000_000_000,
            status="profiling",
            status_time_unix_nano=1_700_000_001_000_000_000,
            last_error="",
            component_health_map={
                "wall": opamp_pb2.ComponentHealth(healthy=False, last_error="unavailable"),
            },
        ),
        effective_config=opamp_pb2.EffectiveConfig(
            config_map=opamp_pb2.AgentConfigMap(
                config_map={"otelprof": opamp_pb2.AgentConfigFile(body=b"cpu=10ms", content_type="text/plain")}
            )
        ),
        remote_config_status=opamp_pb2.RemoteConfigStatus(
            last_remote_config_hash=b"\xaa\xbb",
            status=opamp_pb2.RemoteConfigStatuses_FAILED,
            error_message="out is a path",
        ),
        agent_disconnect=opamp_pb2.AgentDisconnect(),
        custom_capabilities=opamp_pb2.CustomCapabilities(capabilities=["io.opentelemetry.otelprof.capture"]),
        custom_message=opamp_pb2.CustomMessage(
            capability="io.opentelemetry.otelprof.capture", type="status", data=b"id=c-1,state=done"
        ),
        # A field otelprof does not read: it must be skipped, not refused.
        package_statuses=opamp_pb2.PackageStatuses(error_message="ignored"),
    )
    server = opamp_pb2.ServerToAgent(
        instance_uid=bytes(range(16)),
        remote_config=opamp_pb2.AgentRemoteConfig(
            config=opamp_pb2.AgentConfigMap(
                config_map={"otelprof": opamp_pb2.AgentConfigFile(body=b"wall=50ms", content_type="text/plain; charset=utf-8")}
            ),
            config_hash=b"\x01\x02\x03",
        ),
        flags=opamp_pb2.ServerToAgentFlags_ReportFullState,
        capabilities=opamp_pb2.ServerCapabilities_AcceptsStatus | opamp_pb2.ServerCapabilities_OffersRemoteConfig,
        agent_identification=opamp_pb2.AgentIdentification(new_instance_uid=bytes(range(16, 32))),
        custom_capabilities=opamp_pb2.CustomCapabilities(capabilities=["io.opentelemetry.otelprof.capture"]),
        custom_message=opamp_pb2.CustomMessage(
            capability="io.opentelemetry.otelprof.capture", type="start", data=b"id=c-1,wall=20ms,seconds=60"
        ),
        command=opamp_pb2.ServerToAgentCommand(type=opamp_pb2.CommandType_Restart),
    )
    error = opamp_pb2.ServerToAgent(
        instance_uid=bytes(range(16)),
        error_response=opamp_pb2.ServerErrorResponse(
            type=opamp_pb2.ServerErrorResponseType_Unavailable,
            error_message="busy",
            retry_info=opamp_pb2.RetryInfo(retry_after_nanoseconds=5_000_000_000),
        ),
    )
    for name, message in [("agent_to_server", agent), ("server_to_agent", server), ("server_error", error)]:
        with open(f"{directory}/{name}.bin", "wb") as f:
            f.write(message.SerializeToString())
    print(json.dumps({"written": 3}))


if __name__ == "__main__":
    if sys.argv[1] == "read":
        read(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        sys.exit(f"unknown mode {sys.argv[1]!r}")
