"""The API server's way to pods and nodes: an HTTP CONNECT proxy on a Unix socket.

kube-apiserver dials pod IPs for ``services/proxy`` and ``pods/proxy``, and node addresses for
``pods/log``, ``exec`` and ``port-forward``. Its egress selector (``cluster``) sends each of those
connections here instead, as ``CONNECT IP:PORT``. A resolver maps the fake address to a loopback
port of a local process (a Ray head, a stub, kwok's kubelet server); any address it does not
know is refused with 502, so no packet ever leaves the machine. Requests to a Ray dashboard are
read up to their headers first, so a fault can answer them in the dashboard's place.
"""

from __future__ import annotations

import logging
import os
import socket
import socketserver
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("nrl_k8s_sandbox.egress")
Resolver = Callable[[str, int], "int | None"]  # (host, port) -> a loopback port, or None
#: (host, port, method, path, headers) of a request to an HTTP port: an answer to send instead of
#: forwarding it, or None. Only asked for the ports ``http_ports(host, port)`` says are HTTP.
Inspector = Callable[[str, int, str, str, "dict[str, str]"], "bytes | None"]
_HEAD_LIMIT = 64 << 10
_CHUNK = 256 << 10


def egress_config(socket_path: Path) -> str:
    """The ``--egress-selector-config-file`` that sends cluster traffic through ``socket_path``."""
    return (
        "apiVersion: apiserver.k8s.io/v1beta1\n"
        "kind: EgressSelectorConfiguration\n"
        "egressSelections:\n"
        "- name: cluster\n"
        "  connection:\n"
        "    proxyProtocol: HTTPConnect\n"
        "    transport:\n"
        f"      uds:\n        udsName: {socket_path}\n"
    )


class Head:
    """An HTTP/1.1 head read off a socket, and the bytes that came after it: a request's, or a
    response's (whose ``method`` and ``target`` are then its version and status)."""

    def __init__(self, lines: list[str], rest: bytes):
        self.lines = lines
        self.rest = rest
        self.method, self.target = (lines[0].split(" ") + ["", ""])[:2]
        self.headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}

    @classmethod
    def read(cls, sock: socket.socket, received: bytes = b"", *, body: bool = True) -> Head | None:
        """The head (None when the peer closed first or it is over 64 KiB); with ``body``, ``rest``
        holds the whole ``Content-Length`` body, else only what came with the head."""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk or len(received) > _HEAD_LIMIT:
                return None
            received += chunk
        head, _, rest = received.partition(b"\r\n\r\n")
        request = cls(head.decode("latin-1").split("\r\n"), rest)
        length = request.headers.get("content-length", "")
        if body and length.isdigit() and len(rest) < int(length):  # the whole body, before it is forwarded
            whole = bytearray(rest)  # grown in place: a bytes += per chunk made a 100 MiB body take minutes
            while len(whole) < int(length):
                chunk = sock.recv(_CHUNK)
                if not chunk:
                    return None
                whole += chunk
            request.rest = bytes(whole)
        return request

    def raw(self, lines: list[str] | None = None) -> bytes:
        """The head as it goes on the wire (``lines`` in place of its own), without what followed."""
        return "\r\n".join(self.lines if lines is None else lines).encode("latin-1") + b"\r\n\r\n"

    def closing(self) -> bytes:
        """The request to forward: with ``Connection: close`` (one request per connection, so each
        is seen) unless it asks for an upgrade, which is spliced as it is."""
        lines = self.lines
        if "upgrade" not in self.headers.get("connection", "").lower():
            lines = [line for line in lines if not line.lower().startswith(("connection:", "keep-alive:"))]
            lines.append("Connection: close")
        return self.raw(lines) + self.rest


def pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` to ``sink`` until either end closes; then shut both down, which ends the
    other direction's ``pipe`` too."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (sink, source):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def splice(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways between ``a`` and ``b`` until one of them closes."""
    back = threading.Thread(target=pipe, args=(b, a), daemon=True)
    back.start()
    pipe(a, b)
    back.join()


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client: socket.socket = self.request
        connect = Head.read(client)
        if connect is None:
            return
        method, target, rest = connect.method, connect.target, connect.rest
        host, _, port = target.rpartition(":")
        local = self.server.resolve(host.strip("[]"), int(port)) if method == "CONNECT" and port.isdigit() else None
        if local is None:
            log.info("refused %s %s: no local process has that address", method, target)
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", local), timeout=10)
        except OSError:
            client.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
            return
        upstream.settimeout(None)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if self.server.inspect is not None and self.server.is_http(host.strip("[]"), int(port)):
            rest = self._inspect(client, host.strip("[]"), int(port), rest)
            if rest is None:
                upstream.close()
                return
        if rest:
            upstream.sendall(rest)
        splice(client, upstream)
        upstream.close()


    def _inspect(self, client: socket.socket, host: str, port: int, rest: bytes) -> bytes | None:
        """Read the tunnel's first request head; answer it here (None) or return it to forward,
        with ``Connection: close`` so that every request comes in a tunnel of its own."""
        request = Head.read(client, rest)
        if request is None:
            return None
        answer = self.server.inspect(host, port, request.method, request.target, request.headers)
        if answer is not None:
            client.sendall(answer)
            return None
        return request.closing()


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, resolve: Resolver, inspect: Inspector | None,
                 is_http: Callable[[str, int], bool]):
        self.resolve = resolve
        self.inspect = inspect
        self.is_http = is_http
        super().__init__(path, _Handler)


class EgressProxy:
    """Serves CONNECT on ``socket_path`` (0600) until ``stop``."""

    def __init__(self, socket_path: Path, resolve: Resolver, inspect: Inspector | None = None,
                 is_http: Callable[[str, int], bool] = lambda host, port: False):
        socket_path.unlink(missing_ok=True)
        self.path = socket_path
        self._server = _Server(str(socket_path), resolve, inspect, is_http)
        os.chmod(socket_path, 0o600)
        self._thread = threading.Thread(target=self._server.serve_forever, name="egress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.path.unlink(missing_ok=True)
