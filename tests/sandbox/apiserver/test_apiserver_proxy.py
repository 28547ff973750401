"""The services/proxy subresource, forwarding to a loopback HTTP server started by the test."""

from __future__ import annotations

import base64
import hashlib
import json
import socketserver
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from kubernetes.client.rest import ApiException
from sandbox_harness import DEADLINE_S

from nrl_k8s.sandbox.proxy import ENDPOINTS_ANNOTATION


class _Echo(BaseHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002
        return

    def _reply(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        payload = json.dumps({"method": self.command, "path": self.path, "body": body}).encode()
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = _reply


@pytest.fixture
def backend():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _service(core, endpoints: dict | None, name: str = "head-svc"):
    annotations = {ENDPOINTS_ANNOTATION: json.dumps(endpoints)} if endpoints is not None else {}
    ports = [{"name": "dashboard", "port": 8265}, {"name": "client", "port": 10001}]
    core.create_namespaced_service("default", {"metadata": {"name": name, "annotations": annotations}, "spec": {"ports": ports}})




@pytest.mark.parametrize(
    "target, endpoints",
    [
        ("head-svc:8265", {"8265": "BACKEND"}),
        ("head-svc:dashboard", {"dashboard": "BACKEND"}),
        ("head-svc:8265", {"dashboard": "BACKEND"}),
        ("head-svc", {"8265": "BACKEND"}),
        ("http:head-svc:8265", {"8265": "BACKEND"}),
    ],
    ids=["port-number", "port-name", "number-resolves-to-name", "first-port-by-default", "scheme-prefix"],
)
def test_proxy_get_resolves_the_backend(core, http, backend, target, endpoints):
    _service(core, {k: v.replace("BACKEND", backend) for k, v in endpoints.items()})
    reply = http.get(f"/api/v1/namespaces/default/services/{target}/proxy/api/jobs/", params={"limit": "5"})
    assert reply.status_code == 200
    assert reply.json() == {"method": "GET", "path": "/api/jobs/?limit=5", "body": ""}


def test_proxy_through_the_official_client(core, backend):
    _service(core, {"8265": backend})
    reply = core.connect_get_namespaced_service_proxy_with_path("head-svc:8265", "default", "api/version")
    assert json.loads(reply.replace("'", '"'))["path"] == "/api/version"


def test_proxy_post_forwards_body_and_status(core, http, backend):
    _service(core, {"8265": backend})
    reply = http.post("/api/v1/namespaces/default/services/head-svc:8265/proxy/api/jobs/", json={"entrypoint": "echo hi"})
    assert reply.status_code == 201
    assert (reply.json()["method"], json.loads(reply.json()["body"])) == ("POST", {"entrypoint": "echo hi"})


@pytest.mark.parametrize(
    "endpoints",
    [None, {"8265": "http://127.0.0.1:1"}, {"8265": "http://example.com:80"}],
    ids=["no-endpoints", "connection-refused", "not-loopback"],
)
def test_proxy_unavailable_is_503(core, endpoints):
    _service(core, endpoints)
    with pytest.raises(ApiException) as err:
        core.connect_get_namespaced_service_proxy_with_path("head-svc:8265", "default", "api/version")
    body = json.loads(err.value.body)
    assert (err.value.status, body["reason"]) == (503, "ServiceUnavailable")
    assert body["message"].startswith('no endpoints available for service "head-svc"')


def test_proxy_to_missing_service_is_404(core):
    with pytest.raises(ApiException) as err:
        core.connect_get_namespaced_service_proxy_with_path("absent:8265", "default", "x")
    assert err.value.status == 404


def test_proxy_forbidden_fault(core, faults, backend):
    _service(core, {"8265": backend})
    faults.set("proxy-forbidden")
    with pytest.raises(ApiException) as err:
        core.connect_get_namespaced_service_proxy_with_path("head-svc:8265", "default", "api/version")
    assert err.value.status == 403
    assert 'cannot get resource "services/proxy"' in json.loads(err.value.body)["message"]


def test_proxy_forwards_a_chunked_body(core, http, backend):
    _service(core, {"8265": backend})
    chunks = (part for part in (b'{"entry', b'point": ', b'"echo hi"}'))
    reply = http.post("/api/v1/namespaces/default/services/head-svc:8265/proxy/api/jobs/", content=chunks,
                      headers={"Content-Type": "application/json"})  # fmt: skip
    assert reply.status_code == 201
    assert json.loads(reply.json()["body"]) == {"entrypoint": "echo hi"}


def test_bodies_over_the_limit_are_413(core, http, backend, monkeypatch):
    from nrl_k8s.sandbox import apiserver

    _service(core, {"8265": backend})
    monkeypatch.setattr(apiserver, "MAX_PROXY_BODY_BYTES", 1000)
    assert http.put("/api/v1/namespaces/default/services/head-svc:8265/proxy/x", content=b"x" * 1000).status_code == 200
    too_large = http.put("/api/v1/namespaces/default/services/head-svc:8265/proxy/x", content=b"x" * 1001)
    assert (too_large.status_code, too_large.json()["reason"]) == (413, "RequestEntityTooLarge")
    big = {"metadata": {"name": "big"}, "data": {"k": "x" * apiserver.MAX_BODY_BYTES}}
    reply = http.post("/api/v1/namespaces/default/configmaps", json=big)
    assert (reply.status_code, reply.json()["message"]) == (413, f"Request entity too large: limit is {apiserver.MAX_BODY_BYTES}")


class _Upgrading(socketserver.BaseRequestHandler):
    """A websocket backend: answers an upgrade with 101, pings, reads the client's pong, then sends
    one text frame with the request line, the Authorization header and the pong's payload it got,
    and closes (without a close frame)."""

    def handle(self):
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.request.recv(4096)
        head, _, data = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        accept = base64.b64encode(hashlib.sha1(headers["sec-websocket-key"].encode()
                                               + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()).decode()
        self.request.sendall(f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode() + bytes([0x89, 2]) + b"p1")
        while len(data) < 2 or len(data) < 6 + (data[1] & 0x7F):  # the client's pong: masked, short
            data += self.request.recv(4096)
        mask, payload = data[2:6], data[6:6 + (data[1] & 0x7F)]
        pong = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)).decode()
        seen = json.dumps({"request": lines[0], "authorization": headers.get("authorization"),
                           "opcode": data[0] & 0x0F, "pong": pong}).encode()
        self.request.sendall(bytes([0x81, 126]) + struct.pack("!H", len(seen)) + seen)


def test_an_upgrade_request_is_relayed_both_ways_until_the_backend_closes(core, server):
    from nrl_k8s import _websocket

    backend = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Upgrading)
    threading.Thread(target=backend.serve_forever, args=(0.05,), daemon=True).start()
    try:
        _service(core, {"8265": f"http://127.0.0.1:{backend.server_address[1]}"})
        with httpx.Client(base_url=server.url, headers={"Authorization": "Bearer user-token"}) as session:
            path = "/api/v1/namespaces/default/services/head-svc:8265/proxy/api/jobs/j1/logs/tail"
            with _websocket.connect(session, path) as ws:
                seen = json.loads(ws.receive(timeout=DEADLINE_S))
                with pytest.raises(_websocket.Dropped):  # the backend closed without a close frame
                    ws.receive(timeout=DEADLINE_S)
    finally:
        backend.shutdown()
        backend.server_close()
    # The API server's credentials stay with the API server, as the real one does.
    assert seen == {"request": "GET /api/jobs/j1/logs/tail HTTP/1.1", "authorization": None, "opcode": 0xA, "pong": "p1"}
