"""An OpAMP server played with the generated classes of PyPI opentelemetry-opamp-client (its
opamp_pb2), for otelprof's agent-side client (tests/tests/opamp/client.rs).

  opamp_server.py PORT TOKEN

Serves POST /v1/opamp on 127.0.0.1:PORT. Prints one JSON line per AgentToServer received
(the message in proto3 JSON, plus the request headers that matter), and answers by script:

- the first message: the server's capabilities, a capture (id=py-1, wall 20ms for 1 s) and a
  remote config (wall=50ms, hash h1);
- once py-1 is reported running: a capture the agent must refuse (a path in it), id=py-2;
- the second request after that: HTTP 503 with Retry-After: 1 (the agent waits, then
  reports everything again);
- otherwise: an empty answer (instance_uid only).

Exits after an AgentDisconnect, or after 60 s.
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry._opamp.proto import opamp_pb2

CAPABILITY = "io.opentelemetry.otelprof.capture"
PORT, TOKEN = int(sys.argv[1]), sys.argv[2]
state = {"requests": 0, "py2_sent": False, "after_py2": 0, "done": False}


def start(cid, text):
    return opamp_pb2.CustomMessage(capability=CAPABILITY, type="start", data=f"id={cid},{text}".encode())


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        message = opamp_pb2.AgentToServer()
        message.ParseFromString(body)
        state["requests"] += 1
        record = json_format.MessageToDict(message, preserving_proto_field_name=True)
        record["_headers"] = {
            "content_type": self.headers.get("Content-Type"),
            "authorization": self.headers.get("Authorization"),
            "instance_uid": self.headers.get("OpAMP-Instance-UID"),
        }
        print(json.dumps(record), flush=True)
        answer = opamp_pb2.ServerToAgent(instance_uid=message.instance_uid)
        status = 200
        data = message.custom_message.data.decode() if message.HasField("custom_message") else ""
        if state["requests"] == 1:
            answer.capabilities = (
                opamp_pb2.ServerCapabilities_AcceptsStatus
                | opamp_pb2.ServerCapabilities_OffersRemoteConfig
                | opamp_pb2.ServerCapabilities_AcceptsEffectiveConfig
            )
            answer.custom_capabilities.capabilities.append(CAPABILITY)
            answer.custom_message.CopyFrom(start("py-1", "wall=20ms,seconds=1"))
            answer.remote_config.config.config_map["otelprof"].body = b"wall=50ms"
            answer.remote_config.config.config_map["otelprof"].content_type = "text/plain"
            answer.remote_config.config_hash = b"h1"
        elif data.startswith("id=py-1,state=running") and not state["py2_sent"]:
            state["py2_sent"] = True
            answer.custom_message.CopyFrom(start("py-2", "wall=20ms,seconds=5,out=/etc"))
        elif state["py2_sent"]:
            state["after_py2"] += 1
            if state["after_py2"] == 2:
                status = 503
        if message.HasField("agent_disconnect"):
            state["done"] = True
        payload = answer.SerializeToString() if status == 200 else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        if status == 503:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(payload)


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
server.timeout = 0.2
deadline = time.time() + 60
while not state["done"] and time.time() < deadline:
    server.handle_request()
