"""The ``services/NAME[:PORT]/proxy/PATH`` subresource, forwarded to loopback backends.

Backends are read from the Service annotation ``sandbox.nrl-k8s.io/endpoints``: a JSON object
mapping port numbers and port names (as strings) to a base URL such as
``http://127.0.0.1:41234``, written by the simulated controllers (KubeRay for head Services,
Dynamo for frontends, the endpoints controller for Services selecting a Deployment's pods) or
by hand. Only loopback URLs are ever contacted. A Ray head Service's dashboard port goes
through ``head_proxy`` first.

An upgrade request (a websocket, e.g. the Ray dashboard's ``/api/jobs/ID/logs/tail``) is relayed
as the real API server does: the request goes to the backend with its upgrade headers, then
bytes flow both ways unchanged until either side closes (``ServiceProxy.relay``).
"""

from __future__ import annotations

import json
import select
import socket
import ssl
from urllib.parse import urlsplit

import httpx

from nrl_k8s.sandbox.statuses import ApiStatus

ENDPOINTS_ANNOTATION = "sandbox.nrl-k8s.io/endpoints"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_FORWARDED_HEADERS = ("content-type", "accept")
_UPGRADE_HEADERS = ("connection", "upgrade", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol",
                    "sec-websocket-extensions", "origin")
_TIMEOUT = httpx.Timeout(60.0, connect=5.0)


def _unavailable(name: str, why: str = "") -> ApiStatus:
    message = f'no endpoints available for service "{name}"' + (f": {why}" if why else "")
    return ApiStatus(503, message, name=name, kind="services")


def target_port(target: str) -> str | None:
    """The port (number or name) of a proxy URL segment ``[SCHEME:]NAME[:PORT]``; None: not given."""
    parts = target.split(":")
    return parts[-1] if len(parts) > 1 and parts[-1] else None


def service_port(service: dict, target: str) -> dict | None:
    """The Service port a proxy URL segment addresses (no port given: the first one)."""
    ports = (service.get("spec") or {}).get("ports") or []
    port = target_port(target)
    if port is None:
        return ports[0] if ports else None
    return next((p for p in ports if port in (str(p.get("port")), p.get("name"))), None)


def backend_url(service: dict, target: str) -> str:
    """The base URL behind the port (number or name; none = the first port) that a proxy URL
    segment ``[SCHEME:]NAME[:PORT]`` addresses on a Service object."""
    name = service["metadata"]["name"]
    raw = (service["metadata"].get("annotations") or {}).get(ENDPOINTS_ANNOTATION)
    try:
        endpoints = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        endpoints = {}
    port = service_port(service, target) or {}
    candidates = [target_port(target), str(port["port"]) if "port" in port else None, port.get("name")]
    url = next((endpoints[c] for c in candidates if c and c in endpoints), None)
    if not isinstance(url, str):
        raise _unavailable(name)
    if urlsplit(url).hostname not in _LOOPBACK:
        raise _unavailable(name, f"refusing to proxy to non-loopback endpoint {url}")
    return url.rstrip("/")


class ServiceProxy:
    def __init__(self) -> None:
        self._client = httpx.Client(timeout=_TIMEOUT, follow_redirects=False, trust_env=False)

    def close(self) -> None:
        self._client.close()

    def forward(
        self, service: dict, target: str, method: str, path: str, query: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes, str]:
        """Forward one request; ``target`` is the ``[SCHEME:]NAME[:PORT]`` URL segment."""
        url = backend_url(service, target) + (path or "/") + (f"?{query}" if query else "")
        forwarded = {k: v for k, v in headers.items() if k in _FORWARDED_HEADERS}
        try:
            reply = self._client.request(method, url, content=body or None, headers=forwarded)
        except httpx.TransportError as exc:
            raise _unavailable(service["metadata"]["name"], f"error trying to reach service: {exc}") from None
        return reply.status_code, reply.content, reply.headers.get("content-type", "text/plain")

    def relay(self, service: dict, target: str, path: str, query: str, headers: dict[str, str],
              client: socket.socket) -> None:
        """Relay an upgrade request to the backend, then bytes both ways until either side closes."""
        url = urlsplit(backend_url(service, target))
        try:
            backend = socket.create_connection((url.hostname, url.port or 80), timeout=5)
        except OSError as exc:
            raise _unavailable(service["metadata"]["name"], f"error trying to reach service: {exc}") from None
        lines = [f"GET {path or '/'}{'?' + query if query else ''} HTTP/1.1", f"Host: {url.netloc}",
                 *(f"{k}: {v}" for k, v in headers.items() if k in _UPGRADE_HEADERS)]
        with backend:
            backend.settimeout(None)
            backend.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            pipe(client, backend)


def pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes between two connected sockets (TLS or not) until one of them ends."""
    peers = {a: b, b: a}
    try:
        while True:
            ready = [s for s in peers if isinstance(s, ssl.SSLSocket) and s.pending()]
            if not ready:
                ready, _, _ = select.select(list(peers), [], [])
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                peers[sock].sendall(data)
    except OSError:  # reset, broken pipe, a TLS error at shutdown: the relay is over
        return
