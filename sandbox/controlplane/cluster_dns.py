"""Cluster DNS for what the sandbox runs: an HTTP forward proxy on 127.0.0.1.

A driver the sandbox runs (a Ray job on a head, an exec driver, a daemon, a dev pod's command)
reaches a Service as it would in a pod, ``http://SVC.NS.svc.cluster.local:PORT``, ``SVC.NS.svc``,
``SVC.NS`` or ``SVC`` (its own namespace), and a pod by its IP (``10.250.x.y``), without the
machine's resolver: ``env(namespace)`` gives the process ``HTTP_PROXY``/``http_proxy`` pointing
here and ``NO_PROXY``/``no_proxy`` for loopback, so its HTTP client sends such requests to this
proxy and everything on 127.0.0.1 (Ray's own ports, the API server) goes direct.

The proxy URL carries the caller's namespace and the session's token as its userinfo
(``http://NS:TOKEN@127.0.0.1:PORT``), which clients send as ``Proxy-Authorization: Basic``; a
request without the token is answered 407 and nothing else. Absolute-form requests (``GET
http://HOST:PORT/PATH``) go upstream in origin form with ``Connection: close``, the credentials
removed, their bodies and answers streamed; ``CONNECT HOST:PORT`` is spliced. A name or address
is mapped to a loopback port by the callbacks (``resolve_service``, ``resolve_pod``) and the
connection is made to 127.0.0.1 at that port only: anything else (a public name, another address,
a Service with no local process behind it) is answered 502 naming it; nothing is ever looked up
in DNS or dialled off loopback.

Who follows the env: Python's urllib (``build_opener``/``urlopen``), requests (Ray's job SDK and
``ray job submit --no-wait``/``status``/``logs``), httpx (``trust_env``, the default), curl (the
lower-case ``http_proxy`` only), aiohttp only with ``trust_env=True`` (Ray's log tail, in ``ray job
submit`` without ``--no-wait`` and ``ray job logs -f``, does not set it), gRPC (which is why
loopback must stay in ``no_proxy``: Ray's own gRPC goes to 127.0.0.1). ``HTTPS_PROXY`` is left
alone: public HTTPS (package indexes) goes as it would without the sandbox.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import ipaddress
import logging
import re
import secrets
import socket
import socketserver
import threading
import urllib.parse
from collections.abc import Callable

from .egress import Head, pipe, splice

log = logging.getLogger("nrl_k8s_sandbox.cluster_dns")
ServiceResolver = Callable[[str, str, int], "int | None"]  # (namespace, service, port) -> a loopback port, or None
PodResolver = Callable[[str, int], "int | None"]  # (pod IP, port) -> a loopback port, or None
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
#: Never through the proxy: loopback, where the sandbox's own processes listen.
NO_PROXY = "127.0.0.1,localhost,::1"
HEAD_TIMEOUT_S = 30.0  # for a client's request head
CONNECT_TIMEOUT_S = 10.0  # for the connection to the local process
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def service_of(host: str, namespace: str) -> tuple[str, str] | None:
    """(namespace, service) that ``host`` names to a pod in ``namespace``: ``SVC.NS.svc.cluster.local``,
    ``SVC.NS.svc``, ``SVC.NS`` or ``SVC``; None for any other name."""
    labels = host.lower().removesuffix(".").split(".")
    if labels[2:] in (["svc", "cluster", "local"], ["svc"]):
        labels = labels[:2]
    if len(labels) == 1:
        labels.append(namespace)
    if len(labels) != 2 or not all(_LABEL.fullmatch(label) for label in labels):
        return None
    return labels[1], labels[0]


def _answer(code: int, reason: str, line: str, *headers: str) -> bytes:
    body = f"{line}\n".encode()
    head = [f"HTTP/1.1 {code} {reason}", *headers, "Content-Type: text/plain; charset=utf-8",
            f"Content-Length: {len(body)}", "Connection: close"]
    return "\r\n".join(head).encode() + b"\r\n\r\n" + body


_UNAUTHORIZED = _answer(407, "Proxy Authentication Required",
                        "the sandbox's cluster DNS proxy takes NAMESPACE:TOKEN as proxy credentials",
                        'Proxy-Authenticate: Basic realm="nrl-k8s sandbox"')


def _target(request: Head) -> tuple[str, int, str | None] | None:
    """(host, port, the request target to send upstream, None for CONNECT), or None if malformed."""
    if request.method == "CONNECT":
        host, _, number = request.target.rpartition(":")
        if not (host and number.isdigit() and 0 < int(number) < 65536):
            return None
        return host.strip("[]").lower(), int(number), None
    url = urllib.parse.urlsplit(request.target)
    try:
        port = url.port or 80
    except ValueError:
        return None
    if url.scheme != "http" or not url.hostname:
        return None
    return url.hostname, port, (url.path or "/") + (f"?{url.query}" if url.query else "")


def _forward(client: socket.socket, upstream: socket.socket, request: Head, path: str) -> None:
    """Send ``request`` upstream in origin form, stream its body, and stream the answer back with
    ``Connection: close`` (interim ``1xx`` heads as they are; a ``101`` upgrade is spliced)."""
    version = request.lines[0].rpartition(" ")[2]
    lines = [f"{request.method} {path} {version}"] + [
        line for line in request.lines[1:] if not line.lower().startswith(("proxy-authorization:", "proxy-connection:"))
    ]
    upstream.sendall(Head(lines, request.rest).closing())
    body = threading.Thread(target=pipe, args=(client, upstream), daemon=True)
    body.start()
    try:
        received = b""
        while (reply := Head.read(upstream, received, body=False)) is not None:
            status = reply.target  # a response's head: (version, status)
            if not status.startswith("1") or status == "101":
                client.sendall(reply.closing())
                pipe(upstream, client)
                return
            client.sendall(reply.raw())
            received = reply.rest
        client.sendall(_answer(502, "Bad Gateway", f"{request.target}: the local process closed without an answer"))
    finally:
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        body.join()


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client: socket.socket = self.request
        with contextlib.suppress(OSError):  # the client went away, or its head took too long
            client.settimeout(HEAD_TIMEOUT_S)
            request = Head.read(client, body=False)
            if request is not None:
                self._serve(client, request)

    def _serve(self, client: socket.socket, request: Head) -> None:
        dns = self.server.dns
        namespace = dns.caller(request.headers.get("proxy-authorization", ""))
        if namespace is None:
            client.sendall(_UNAUTHORIZED)
            return
        target = _target(request)
        if target is None:
            client.sendall(_answer(400, "Bad Request", f"{request.method} {request.target}: this proxy takes "
                                   "an absolute http:// URL or CONNECT HOST:PORT"))
            return
        host, port, path = target
        local = dns.resolve(host, port, namespace)
        if local is None:
            log.info("refused %s %s from %s: not a cluster address", request.method, request.target, namespace)
            client.sendall(_answer(502, "Bad Gateway", f"{host}:{port} is not a cluster address of this sandbox"))
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", local), timeout=CONNECT_TIMEOUT_S)
        except OSError as err:
            client.sendall(_answer(503, "Service Unavailable", f"{host}:{port}: the local process refused ({err})"))
            return
        with upstream:
            client.settimeout(None)
            upstream.settimeout(None)
            if path is None:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                upstream.sendall(request.rest)
                splice(client, upstream)
            else:
                _forward(client, upstream, request, path)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    dns: ClusterDns


class ClusterDns:
    """The proxy on 127.0.0.1:``port`` (a free one by default), from ``start`` until ``stop``.
    ``pod_cidr``: the addresses ``resolve_pod`` is asked about; other addresses are refused."""

    def __init__(self, resolve_service: ServiceResolver, resolve_pod: PodResolver, pod_cidr: Network,
                 port: int = 0):
        self._resolve_service = resolve_service
        self._resolve_pod = resolve_pod
        self._pod_cidr = pod_cidr
        self._token = secrets.token_urlsafe(32)
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.dns = self
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="cluster-dns", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def url(self, namespace: str) -> str:
        """The proxy URL for a process in ``namespace`` (it carries the session's token)."""
        return f"http://{namespace}:{self._token}@127.0.0.1:{self.port}"

    def env(self, namespace: str) -> dict[str, str]:
        """The env a process in ``namespace`` needs to reach the cluster's names through the proxy."""
        url = self.url(namespace)
        return {"HTTP_PROXY": url, "http_proxy": url, "NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}

    def caller(self, authorization: str) -> str | None:
        """The namespace of a ``Proxy-Authorization`` header that carries the token, else None."""
        scheme, _, encoded = authorization.strip().partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            namespace, _, token = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except ValueError:  # not base64, or not UTF-8
            return None
        if not hmac.compare_digest(token.encode(), self._token.encode()) or not _LABEL.fullmatch(namespace):
            return None
        return namespace

    def resolve(self, host: str, port: int, namespace: str) -> int | None:
        """The loopback port behind ``host:port`` as a pod in ``namespace`` names it, or None."""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            named = service_of(host, namespace)
            return None if named is None else self._resolve_service(*named, port)
        return self._resolve_pod(str(address), port) if address in self._pod_cidr else None
