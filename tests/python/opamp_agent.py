"""An OpAMP agent that is not otelprof's: PyPI opentelemetry-opamp-client's OpAMPClient (its
messages, transport and sequence numbers), polling otelprof serve's OpAMP server the way the
plain-HTTP transport says, and acting the capture protocol of io.opentelemetry.otelprof.capture
by hand. Used by tests/tests/opamp/server.rs.

  opamp_agent.py URL INSTANCE_ID SECONDS [TOKEN]

(with OPAMP_CA=PEM in the environment, an https:// URL is trusted through that certificate)

Prints one JSON line per thing the server sent (connected, capture, remote_config, error) and
answers: a capture with state=running then, once its seconds are over, state=done (a capture
asking for lock is refused, to test refusals); a remote config with RemoteConfigStatus
APPLIED. Polls every 0.2 s for SECONDS, then sends AgentDisconnect.
"""
import json
import os
import sys
import time

from opentelemetry._opamp import messages
from opentelemetry._opamp.client import OpAMPClient
from opentelemetry._opamp.proto import opamp_pb2

CAPABILITY = "io.opentelemetry.otelprof.capture"


def say(**event):
    print(json.dumps(event), flush=True)


def main():
    url, instance_id, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    headers = {"Authorization": "Bearer " + sys.argv[4]} if len(sys.argv) > 4 else {}
    client = OpAMPClient(
        endpoint=url,
        headers=headers,
        timeout_millis=5000,
        agent_identifying_attributes={"service.name": "python-shop", "service.instance.id": instance_id},
        agent_non_identifying_attributes={"host.name": "test-host", "process.pid": 4242},
        tls_certificate=os.environ.get("OPAMP_CA", True),
    )
    client.update_effective_config({"otelprof": "cpu=10ms"}, "text/plain")
    first = opamp_pb2.AgentToServer()
    first.ParseFromString(client.build_full_state_message())
    first.custom_capabilities.capabilities.append(CAPABILITY)
    first.health.healthy = True
    first.health.status = "profiling cpu"
    first.health.component_health_map["cpu"].healthy = True
    first.health.component_health_map["cpu"].status = "active 10ms"
    reply = client.send(messages.encode_message(first))
    say(
        event="connected",
        server_capabilities=reply.capabilities,
        custom_capabilities=list(reply.custom_capabilities.capabilities),
        flags=reply.flags,
    )
    captures = {}  # id -> end time (None once reported done)
    answered = set()
    outgoing = None
    end = time.time() + seconds
    while time.time() < end:
        if outgoing is None:
            data = client.build_heartbeat_message()
        else:
            data, outgoing = outgoing, None
        reply = client.send(data)
        if reply.HasField("error_response"):
            say(event="error", message=reply.error_response.error_message)
        if reply.flags & opamp_pb2.ServerToAgentFlags_ReportFullState:
            outgoing = client.build_full_state_message()
        if reply.HasField("custom_message") and reply.custom_message.capability == CAPABILITY:
            text = reply.custom_message.data.decode()
            fields = dict(kv.split("=", 1) for kv in text.split(","))
            cid = fields["id"]
            if cid not in answered:
                answered.add(cid)
                say(event="capture", type=reply.custom_message.type, data=text)
                if "lock" in fields:
                    status = f"id={cid},state=refused,reason=lock profiling is not available here, sorry"
                else:
                    captures[cid] = time.time() + float(fields["seconds"])
                    status = f"id={cid},state=running,ends={int(captures[cid])}"
            else:
                status = None
            if status:
                m = opamp_pb2.AgentToServer()
                m.ParseFromString(client.build_heartbeat_message())
                m.custom_message.capability = CAPABILITY
                m.custom_message.type = "status"
                m.custom_message.data = status.encode()
                outgoing = m.SerializeToString()
        if reply.HasField("remote_config"):
            files = reply.remote_config.config.config_map
            body = files["otelprof"].body.decode() if "otelprof" in files else None
            say(event="remote_config", body=body, content_type=files["otelprof"].content_type if body is not None else None)
            status = client.update_remote_config_status(
                reply.remote_config.config_hash, opamp_pb2.RemoteConfigStatuses_APPLIED
            )
            if status is not None:
                outgoing = client.build_remote_config_status_response_message(status)
        for cid, ends in list(captures.items()):
            if ends is not None and time.time() >= ends and outgoing is None:
                m = opamp_pb2.AgentToServer()
                m.ParseFromString(client.build_heartbeat_message())
                m.custom_message.capability = CAPABILITY
                m.custom_message.type = "status"
                m.custom_message.data = f"id={cid},state=done".encode()
                outgoing = m.SerializeToString()
                captures[cid] = None
        time.sleep(0.2)
    client.send(client.build_agent_disconnect_message())
    say(event="disconnected")


if __name__ == "__main__":
    main()
