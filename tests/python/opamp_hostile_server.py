"""A hostile OpAMP server for otelprof's agent-side client (tests/tests/opamp/client.rs): its
answers, in turn, are 2 MiB of protobuf-looking bytes, garbage, an HTML 500 page, a
BAD_REQUEST error_response, a capture of 5 KiB, a capture asking for a path, a remote config
with a file that is not otelprof's, and a settings file that is not UTF-8; then, once, a good
capture (id=good, wall=20ms for 1 s), and empty answers after that. Built with the generated
classes of PyPI opentelemetry-opamp-client.

  opamp_hostile_server.py PORT

Prints one JSON line per request: the index of the answer given and the custom message the
agent sent, if any. Exits after an AgentDisconnect, or after 60 s.
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry._opamp.proto import opamp_pb2

CAPABILITY = "io.opentelemetry.otelprof.capture"
PORT = int(sys.argv[1])
state = {"n": 0, "done": False}


def capture(text):
    m = opamp_pb2.ServerToAgent(instance_uid=b"\x00" * 16)
    m.custom_message.capability = CAPABILITY
    m.custom_message.type = "start"
    m.custom_message.data = text.encode()
    return 200, m.SerializeToString()


def config(name, body):
    m = opamp_pb2.ServerToAgent(instance_uid=b"\x00" * 16)
    m.remote_config.config.config_map[name].body = body
    m.remote_config.config_hash = name.encode() + body[:4]
    return 200, m.SerializeToString()


def answers():
    big = opamp_pb2.ServerToAgent(instance_uid=b"\x00" * 16)
    big.custom_message.data = b"x" * (2 << 20)
    bad = opamp_pb2.ServerToAgent(instance_uid=b"\x00" * 16)
    bad.error_response.type = opamp_pb2.ServerErrorResponseType_BadRequest
    bad.error_response.error_message = "your message is bad \x1b[31m"
    return [
        (200, big.SerializeToString()),
        (200, b"\xff\xff\xff\xff\x0f garbage"),
        (500, b"<html><body>Internal Server Error</body></html>"),
        (200, bad.SerializeToString()),
        capture("id=huge,wall=20ms,seconds=1," + "x=1," * 1300),
        capture("id=path,wall=20ms,seconds=1,out=/etc"),
        config("collector.yaml", b"receivers: {}"),
        config("otelprof", b"\xff\xfe wall=50ms"),
        capture("id=good,wall=20ms,seconds=1"),
    ]


ANSWERS = answers()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        message = opamp_pb2.AgentToServer()
        message.ParseFromString(body)
        i = state["n"]
        state["n"] += 1
        status, payload = ANSWERS[i] if i < len(ANSWERS) else (200, opamp_pb2.ServerToAgent(instance_uid=message.instance_uid).SerializeToString())
        record = {"answer": i}
        if message.HasField("custom_message"):
            record["status"] = message.custom_message.data.decode()
        if message.HasField("remote_config_status"):
            record["config_status"] = message.remote_config_status.status
            record["config_error"] = message.remote_config_status.error_message
        if message.HasField("agent_disconnect"):
            record["bye"] = True
            state["done"] = True
        print(json.dumps(record), flush=True)
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf" if status == 200 else "text/html")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
server.timeout = 0.2
deadline = time.time() + 60
while not state["done"] and time.time() < deadline:
    server.handle_request()
