#!/usr/bin/python3
"""agones_standin.py — a stand-in for the Agones SDK server's REST API, for
tests. It is NOT the Agones SDK server: it implements only the documented
REST paths physd uses (agones.dev "REST Game Server Client API", and
sdks/swagger/sdk.swagger.json and beta.swagger.json of the Agones
repository), with the checks the real server makes on them, and records
every call with its arrival time.

Paths:
  POST /ready, /health, /shutdown, /allocate   body {} -> {}
  PUT  /metadata/label, /metadata/annotation   body {"key": K, "value": V}; the key gets the
                                               "agones.dev/sdk-" prefix; labels must follow
                                               Kubernetes' label syntax (else 400)
  GET  /gameserver                             the GameServer as JSON
  GET  /watch/gameserver                       chunked newline-delimited {"result": GameServer},
                                               the current one first, then one per change
  GET  /v1beta1/counters/{name}                {"name", "count", "capacity"} (int64 as strings)
  PATCH /v1beta1/counters/{name}               {"count"?, "capacity"?, "countDiff"?}; an unknown
                                               counter or a count outside [0, capacity] is an
                                               error, as in the SDK server's UpdateCounter
The GameServer's counters and ports come from a Fleet manifest
(deploy/k8s/fleet.yaml), so the manifest and physd's defaults are checked
against each other. Standalone: agones_standin.py FLEET_YAML [PORT].
"""
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def load_fleet(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    fleet = next(d for d in docs if d.get("kind") == "Fleet")
    spec = fleet["spec"]["template"]["spec"]
    counters = {k: {"count": int(v.get("count") or 0), "capacity": int(v.get("capacity") or 0)}
                for k, v in (spec.get("counters") or {}).items()}
    ports = [p["name"] for p in spec.get("ports", [])]
    return counters, ports


class StandIn:
    def __init__(self, fleet_yaml, port=0):
        self.counters, self.port_names = load_fleet(fleet_yaml)
        self.calls = []  # (t, method, path, body or None, http status)
        self.labels, self.annotations = {}, {}
        self.state, self.address, self.ports = "Scheduled", "", []
        self.cond = threading.Condition()
        self.version = 0
        self.on_call = None  # called (method, path, body) before the reply, in the handler's thread
        self.closing = False
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def reply(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def read_body(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                if not raw:
                    return None, raw
                try:
                    return json.loads(raw), raw
                except ValueError:
                    return ValueError, raw

            def handle_any(self, method):
                body, raw = self.read_body() if method != "GET" else (None, b"")
                path = self.path
                if standin.on_call:
                    standin.on_call(method, path, body)
                code, obj = standin.route(method, path, body, self)
                if code is None:
                    return  # streamed
                with standin.cond:
                    standin.calls.append((time.monotonic(), method, path, body, code))
                    standin.cond.notify_all()
                self.reply(code, obj)

            def do_GET(self):
                self.handle_any("GET")

            def do_POST(self):
                self.handle_any("POST")

            def do_PUT(self):
                self.handle_any("PUT")

            def do_PATCH(self):
                self.handle_any("PATCH")

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                # A client that goes away (physd exiting) is not an error here.
                if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
                    super().handle_error(request, client_address)

        self.httpd = Server(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    # ------------------------------------------------------------- state
    def gameserver(self):
        return {
            "object_meta": {"name": "physd-standin", "namespace": "default", "uid": "1234",
                            "labels": dict(self.labels), "annotations": dict(self.annotations)},
            "status": {"state": self.state, "address": self.address,
                       "ports": [{"name": n, "port": p} for n, p in self.ports],
                       "counters": {k: {"count": str(v["count"]), "capacity": str(v["capacity"])}
                                    for k, v in self.counters.items()}},
        }

    def changed(self):
        with self.cond:
            self.version += 1
            self.cond.notify_all()

    def set_state(self, state):
        self.state = state
        self.changed()

    def set_address(self, address, port):
        self.address = address
        self.ports = [(n, port) for n in self.port_names]
        self.changed()

    def close(self):
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---------------------------------------------------------- routing
    def route(self, method, path, body, handler):
        if body is ValueError:
            return 400, {"code": 3, "message": "body is not JSON"}
        if path in ("/ready", "/health", "/shutdown", "/allocate"):
            if method != "POST":
                return 405, {"code": 12, "message": "method not allowed"}
            if body not in (None, {}):
                return 400, {"code": 3, "message": "the body must be {}"}
            if path == "/allocate":
                self.state = "Allocated"
                self.changed()
            if path == "/ready" and self.state in ("Scheduled", "RequestReady", "Allocated"):
                self.state = "Ready"
                self.changed()
            if path == "/shutdown":
                self.state = "Shutdown"
                self.changed()
            return 200, {}
        if path in ("/metadata/label", "/metadata/annotation"):
            if method != "PUT":
                return 405, {"code": 12, "message": "method not allowed"}
            if not isinstance(body, dict) or not isinstance(body.get("key"), str) or \
                    not isinstance(body.get("value"), str):
                return 400, {"code": 3, "message": "expected {\"key\": string, \"value\": string}"}
            key = "agones.dev/sdk-" + body["key"]
            if path == "/metadata/label":
                name = key.split("/", 1)[1]
                if len(name) > 63 or not LABEL_NAME.match(name):
                    return 400, {"code": 3, "message": "invalid label key %r" % key}
                if len(body["value"]) > 63 or not LABEL_VALUE.match(body["value"]):
                    return 400, {"code": 3, "message": "invalid label value %r" % body["value"]}
                self.labels[key] = body["value"]
            else:
                self.annotations[key] = body["value"]
            self.changed()
            return 200, {}
        if path == "/gameserver" and method == "GET":
            return 200, self.gameserver()
        if path == "/watch/gameserver" and method == "GET":
            self.stream(handler)
            return None, None
        m = re.match(r"^/v1beta1/counters/([^/]+)$", path)
        if m:
            name = m.group(1)
            if name not in self.counters:
                return 500, {"code": 2, "message": "counter not found: %s" % name}
            c = self.counters[name]
            if method == "GET":
                return 200, {"name": name, "count": str(c["count"]), "capacity": str(c["capacity"])}
            if method != "PATCH":
                return 405, {"code": 12, "message": "method not allowed"}
            if not isinstance(body, dict):
                return 400, {"code": 3, "message": "expected a CounterUpdateRequest"}
            try:
                count = int(body["count"]) if "count" in body else None
                cap = int(body["capacity"]) if "capacity" in body else None
                diff = int(body.get("countDiff", 0))
            except (TypeError, ValueError):
                return 400, {"code": 3, "message": "int64 fields must be integers"}
            if count is None and cap is None and diff == 0:
                return 500, {"code": 2, "message": "invalid argument. Malformed CounterUpdateRequest"}
            new_cap = cap if cap is not None else c["capacity"]
            if new_cap < 0:
                return 500, {"code": 2, "message": "out of range. Capacity must be >= 0"}
            new_count = count if count is not None else c["count"]
            new_count += diff
            if new_count < 0 or new_count > new_cap:
                return 500, {"code": 2, "message": "out of range. Count must be within range [0,Capacity]"}
            c["count"], c["capacity"] = new_count, new_cap
            self.changed()
            return 200, {"name": name, "count": str(new_count), "capacity": str(new_cap)}
        return 404, {"code": 5, "message": "Not Found"}

    def stream(self, h):
        with self.cond:
            self.calls.append((time.monotonic(), "GET", "/watch/gameserver", None, 200))
            self.cond.notify_all()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        seen = -1
        try:
            while True:
                with self.cond:
                    while self.version == seen and not self.closing:
                        self.cond.wait(0.5)
                    if self.closing:
                        break
                    seen = self.version
                    line = (json.dumps({"result": self.gameserver()}) + "\n").encode()
                h.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                h.wfile.flush()
        except OSError:
            pass
        h.close_connection = True

    # ---------------------------------------------------------- queries
    def snapshot(self):
        with self.cond:
            return list(self.calls)

    def wait_for(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for c in self.calls:
                    if pred(c):
                        return c
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("stand-in: no %s within %.1f s" % (what, timeout))
                self.cond.wait(left)


if __name__ == "__main__":
    s = StandIn(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print("Agones SDK stand-in (not the real SDK server) on 127.0.0.1:%d" % s.port, flush=True)
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        s.close()
