"""The user's door to the API server: a TLS proxy in front of kube-apiserver for faults and counts.

The user's kubeconfig points here (the operators talk to kube-apiserver directly). Each request is read
up to its headers, classified as ``VERB RESOURCE`` (``list pods``, ``create rayjobs``, ``get
services/proxy``) and counted; while ``api-outage`` lasts it is answered 503, and a matching
``api-errors`` entry answers its code, as a Kubernetes ``Status`` with nothing forwarded; a matching
``api-latency`` entry holds the request its seconds first. Otherwise the request goes to kube-apiserver
unchanged (the user's own bearer token decides what RBAC allows), and its answer comes back as it
streams, so watches and followed logs stream as they would; exec and port-forward upgrades are spliced.
Connections are kept alive as kube-apiserver keeps them (each client connection has one of its own
upstream, and every request on it is still read up to its head, so every request is seen): one request
per connection made every API call two TLS handshakes and a thread, ~8 CPU-ms against ~1.5 on a kept
connection, on the suite's tens of thousands of calls. While ``rules-incomplete`` is on, a
SelfSubjectRulesReview's answer is kube-apiserver's marked ``incomplete`` with a webhook authorizer's
evaluation error, as a cluster whose authorizers include a webhook answers it.

``/sandbox/faults`` (GET, PUT ``{"set": {NAME: VALUE|null}, "clear": [NAME]}``),
``/sandbox/stats`` (GET, DELETE) and ``/sandbox/objects`` (GET: object counts) answer the
operator token only.
"""

from __future__ import annotations

import http.client
import json
import logging
import select
import socket
import socketserver
import ssl
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable

from ..faults import Faults
from .egress import Head
from .pki import Pair

log = logging.getLogger("nrl_k8s_sandbox.front")
#: How long a kept-alive connection waits for its next request: less than kube-apiserver's 90 s, so
#: the door lets an idle client go before kube-apiserver could let its upstream go.
IDLE_S = 60.0
_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "AlreadyExists",
            410: "Expired", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
            504: "Timeout"}
#: What kube-apiserver's Webhook authorizer says when asked for a user's rules (it cannot list them).
WEBHOOK_RULES_ERROR = "webhook authorizer does not support user rule resolution"


def classify(method: str, target: str) -> tuple[str, str]:
    """(verb, resource) of a Kubernetes API request: ``("list", "pods")``, ``("get", "services/proxy")``."""
    url = urllib.parse.urlsplit(target)
    parts = [p for p in url.path.split("/") if p]
    query = urllib.parse.parse_qs(url.query)
    if not parts or parts[0] not in ("api", "apis"):
        return method.lower(), ""
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    watching = bool(rest) and rest[0] == "watch"
    rest = rest[1:] if watching else rest
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        rest = rest[2:]
    resource, name, sub = (rest + ["", "", ""])[:3]
    if sub:
        resource = f"{resource}/{sub}"
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    if verb is None:
        watching = watching or query.get("watch", [""])[0] in ("1", "true")
        verb = "watch" if watching else ("get" if name else "list")
    return verb, resource


def _status(code: int, message: str) -> bytes:
    body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                       "reason": _REASONS.get(code, "InternalError"), "code": code}).encode()
    return (f"HTTP/1.1 {code} {_REASONS.get(code, 'Error')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def _reply(code: int, data: object) -> bytes:
    body = json.dumps(data).encode()
    return (f"HTTP/1.1 {code} OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


def _incomplete_rules(upstream: ssl.SSLSocket, request: Head) -> bytes:
    """Forward a SelfSubjectRulesReview and return kube-apiserver's answer with ``incomplete: true``
    and the webhook authorizer's ``evaluationError``; the rules RBAC granted are kept, as a union
    with a webhook authorizer keeps them. The answer is asked for in JSON, so it can be changed."""
    lines = [line for line in request.lines if not line.lower().startswith(("accept:", "accept-encoding:"))]
    upstream.sendall(Head([*lines, "Accept: application/json"], request.rest).closing())
    reply = http.client.HTTPResponse(upstream)
    reply.begin()
    body = reply.read()
    if 200 <= reply.status < 300:
        review = json.loads(body)
        review["status"] = {**(review.get("status") or {}), "incomplete": True, "evaluationError": WEBHOOK_RULES_ERROR}
        body = json.dumps(review).encode()
    return (f"HTTP/1.1 {reply.status} {reply.reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


class _Body:
    """Where a message's body ends in the bytes that follow its head: ``length`` bytes, chunked
    (RFC 9112 7.1: size lines, data, trailers), or, with neither, only where the sender closes."""

    def __init__(self, length: int | None, chunked: bool):
        self.left = length  # bytes of the body (chunked: of the current chunk and its CRLF) still to come
        self.chunked = chunked
        self.line = b""  # a chunk-size or trailer line read so far
        self.trailers = False

    def feed(self, data: bytes) -> int | None:
        """How many of ``data``'s bytes end the body, or None while all of them belong to it."""
        if not self.chunked:
            if self.left is None or len(data) < self.left:
                self.left = None if self.left is None else self.left - len(data)
                return None
            return self.left
        at = 0
        while at < len(data):
            if self.left:
                step = min(self.left, len(data) - at)
                self.left -= step
                at += step
                continue
            end = data.find(b"\n", at)
            if end < 0:
                self.line += data[at:]
                return None
            line, self.line, at = (self.line + data[at:end]).strip(), b"", end + 1
            if self.trailers:
                if not line:
                    return at
            elif (size := int(line.split(b";")[0], 16)) == 0:
                self.trailers = True
            else:
                self.left = size + 2
        return None


def _relay(upstream: ssl.SSLSocket, client: ssl.SSLSocket, body: _Body, head: bytes, data: bytes) -> bool:
    """Send a response's head at once (a watch's comes long before its first event) with the body
    bytes that came with it, then copy the rest of the body as it arrives; False when either side
    closed before its end."""
    if body.left == 0 and not body.chunked:
        client.sendall(head)
        return True
    while True:
        end = body.feed(data) if data else None
        if data or head:
            client.sendall(head + (data if end is None else data[:end]))
            head = b""
        if end is not None:
            return True
        ready = [upstream] if upstream.pending() else _readable([upstream, client])
        if client in ready and not upstream.pending():
            return False  # a client never sends before its answer has ended: it hung up (a watch stopped)
        try:
            data = upstream.recv(65536)
        except (ssl.SSLWantReadError, BlockingIOError):
            data = b""
            continue
        except OSError:
            return False
        if not data:
            return False


def _idle_closed(upstream: ssl.SSLSocket) -> bool:
    """Whether kube-apiserver closed a kept connection while it sat idle (it is readable: nothing
    else arrives unasked)."""
    return bool(_readable([upstream], 0))


def _readable(sockets: list[socket.socket], timeout_s: float | None = None) -> list[socket.socket]:
    """Those of ``sockets`` with something to read (or closed), waiting up to ``timeout_s``: poll,
    not select, which fails on descriptors past 1023."""
    poller = select.poll()
    for sock in sockets:
        poller.register(sock, select.POLLIN)
    ready = {fd for fd, _ in poller.poll(None if timeout_s is None else int(timeout_s * 1000))}
    return [sock for sock in sockets if sock.fileno() in ready]


def _splice(a: socket.socket, b: socket.socket) -> None:
    sockets = [a, b]
    while True:
        ready = [s for s in sockets if isinstance(s, ssl.SSLSocket) and s.pending()]
        if not ready:
            ready = _readable(sockets, 3600)
            if not ready:
                return
        for source in ready:
            try:
                data = source.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            except OSError:
                return
            if not data:
                return
            (b if source is a else a).sendall(data)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            client = self.server.front.serving.wrap_socket(self.request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        upstream: ssl.SSLSocket | None = None
        try:
            while True:
                client.settimeout(IDLE_S)
                try:
                    request = Head.read(client)
                except OSError:
                    return
                client.settimeout(None)
                if request is None:
                    return
                try:
                    upstream = self._answer(client, request, upstream)
                except OSError:
                    return
                if upstream is None:
                    return
        finally:
            if upstream is not None:
                upstream.close()

    def _answer(self, client: ssl.SSLSocket, request: Head, upstream: ssl.SSLSocket | None) -> ssl.SSLSocket | None:
        """Answer one request; return the upstream connection to keep for the next one, or None
        when this connection is done (it was spliced, refused, or either side closes it)."""
        method, target, headers = request.method, request.target, request.headers
        front = self.server.front
        if target.startswith("/sandbox/"):
            client.sendall(front.admin(method, target, headers, request.rest))
            return None
        verb, resource = classify(method, target)
        refusal = front.gate(verb, resource)
        if refusal is not None:
            client.sendall(refusal)
            return None
        if upstream is not None and _idle_closed(upstream):  # kube-apiserver let it go while it was idle
            upstream.close()
            upstream = None
        upstream = upstream or front.connect()
        if (verb, resource) == ("create", "selfsubjectrulesreviews") and front.faults.get(
            "rules-incomplete"
        ) is not None:
            client.sendall(_incomplete_rules(upstream, request))
            upstream.close()
            return None
        if "upgrade" in headers.get("connection", "").lower() or "transfer-encoding" in headers:
            upstream.sendall(request.closing())  # exec, port-forward, a streamed body: spliced
            _splice(client, upstream)
            upstream.close()
            return None
        upstream.sendall(request.raw() + request.rest)
        reply = Head.read(upstream, body=False)
        while reply is not None and reply.target.startswith("1"):  # 100 Continue and the like
            client.sendall(reply.raw())
            reply = Head.read(upstream, reply.rest, body=False)
        if reply is None:
            upstream.close()
            return None
        length = reply.headers.get("content-length", "")
        chunked = "chunked" in reply.headers.get("transfer-encoding", "").lower()
        empty = method == "HEAD" or reply.target in ("204", "304")
        body = _Body(0, False) if empty else _Body(int(length) if length.isdigit() and not chunked else None, chunked)
        head = reply.raw()
        ended = _relay(upstream, client, body, head, reply.rest)
        if not ended or "close" in (reply.headers.get("connection", "") + headers.get("connection", "")).lower():
            upstream.close()
            return None
        return upstream


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # socketserver's 5 overflows when a loaded machine's tests all connect at once
    front: FrontProxy


class FrontProxy:
    """Listens on 127.0.0.1:``port`` (TLS with ``pair``) and forwards to kube-apiserver at ``upstream``."""

    def __init__(self, port: int, upstream: int, pair: Pair, ca: str, faults: Faults, operator_token: str,
                 on_change: Callable[[dict[str, str]], None], objects: Callable[[], dict[str, int]]):
        self.serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.serving.set_alpn_protocols(["http/1.1"])
        self.serving.load_cert_chain(str(pair.cert), str(pair.key))
        self.client = ssl.create_default_context(cafile=ca)
        self.upstream = upstream
        self.faults = faults
        self.operator_token = operator_token
        self.on_change = on_change
        self.objects = objects
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.front = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="front", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def connect(self) -> ssl.SSLSocket:
        sock = socket.create_connection(("127.0.0.1", self.upstream))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.client.wrap_socket(sock, server_hostname="127.0.0.1")

    def gate(self, verb: str, resource: str) -> bytes | None:
        """The fault's answer to this request, or None to forward it."""
        with self._lock:
            self.counts[f"{verb} {resource}"] += 1
        if self.faults.in_outage():
            return _status(503, "the API server is unavailable (sandbox fault api-outage)")
        code = self.faults.take("api-errors", verb, resource)
        if code is not None:
            return _status(int(code), f"{verb} {resource} failed (sandbox fault api-errors)")
        late = self.faults.take("api-latency", verb, resource)
        if late is not None:  # a loaded API server: the request waits its turn, then is served
            time.sleep(late)
        return None

    def admin(self, method: str, target: str, headers: dict[str, str], rest: bytes) -> bytes:
        if headers.get("authorization") != f"Bearer {self.operator_token}":
            return _status(401, "the sandbox's admin endpoints take the operator token")
        path = urllib.parse.urlsplit(target).path
        if path == "/sandbox/stats":
            with self._lock:
                counts = dict(self.counts)
                if method == "DELETE":
                    self.counts.clear()
            return _reply(200, counts)
        if path == "/sandbox/objects" and method == "GET":
            return _reply(200, self.objects())
        if path == "/sandbox/faults" and method == "GET":
            return _reply(200, self.faults.active())
        if path == "/sandbox/faults" and method == "PUT":
            change = json.loads(rest or b"{}")
            try:
                for name, value in (change.get("set") or {}).items():
                    self.faults.set(name, value)
                for name in change.get("clear") or []:
                    self.faults.clear(name)
            except ValueError as err:
                return _status(400, str(err))
            active = self.faults.active()
            self.on_change(active)
            return _reply(200, active)
        return _status(404, f"no sandbox endpoint {method} {path}")
