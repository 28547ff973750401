"""The services/proxy subresource, forwarding to a loopback HTTP server started by the test."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes.client.rest import ApiException
from sandbox_harness import DEADLINE_S
from upgrade_backend import GREETING, upgrade_backend

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


def test_proxy_relays_an_upgrade_over_tls_like_the_api_server(server, core, http):
    """101 and what follows it, then bytes both ways on the client's TLS connection; the token stays here."""
    with upgrade_backend() as (backend, upgrades), _tls_to(server) as sock:
        _service(core, {"8265": backend})
        sock.sendall(_upgrade_request("/api/v1/namespaces/default/services/head-svc:8265/proxy/tail?x=1", http))
        answer = _until(sock, GREETING)
        assert answer.startswith(b"HTTP/1.1 101 Switching Protocols") and answer.endswith(GREETING)
        sock.sendall(b"ping")
        assert _until(sock, b"PING") == b"PING"
    (seen,) = upgrades
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert seen["path"] == "/tail?x=1" and headers["upgrade"] == "echo" and "authorization" not in headers


def test_proxy_upgrade_refusals(server, core, http):
    """The backend's refusal comes back with its body; a Service without endpoints is the API server's 503."""
    with upgrade_backend() as (backend, _):
        _service(core, {"8265": backend})
        _service(core, None, name="idle-svc")
        with _tls_to(server) as sock:
            sock.sendall(_upgrade_request("/api/v1/namespaces/default/services/head-svc:8265/proxy/denied", http))
            refused = _until(sock, b"upgrade refused")
        with _tls_to(server) as sock:
            sock.sendall(_upgrade_request("/api/v1/namespaces/default/services/idle-svc:8265/proxy/tail", http))
            unavailable = _until(sock, b"}")
    assert refused.startswith(b"HTTP/1.1 403 Forbidden")
    assert unavailable.startswith(b"HTTP/1.1 503 ") and b'no endpoints available for service \\"idle-svc\\"' in unavailable


@contextlib.contextmanager
def _tls_to(server):
    context = ssl.create_default_context(cadata=server.ca_pem.decode())
    port = int(server.url.rsplit(":", 1)[1])
    with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S), server_hostname="127.0.0.1") as sock:
        yield sock


def _upgrade_request(path: str, http) -> bytes:
    """An upgrade request for ``path`` with the user's token (that of the ``http`` fixture)."""
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {http.headers['Authorization']}\r\n"
            "Connection: Upgrade\r\nUpgrade: echo\r\n\r\n").encode()


def _until(sock, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        more = sock.recv(65536)
        assert more, data
        data += more
    return data
