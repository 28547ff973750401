"""Relaying an upgraded HTTP/1.1 connection (a websocket) between two sockets, as the API server's
proxy does (``UpgradeAwareHandler``): the request head goes to the backend, the answer head back to
the client, and after a ``101 Switching Protocols`` the bytes flow both ways until either side ends;
any other answer is relayed with its body and the connection ends. Used by ``nrl-k8s dashboard``
(client → API server) and by the sandbox's service proxy (API server → backend).
"""

from __future__ import annotations

import http.client
import io
import select
import socket
import ssl
from http.server import BaseHTTPRequestHandler

__all__ = ["CHUNK", "close_socket", "is_upgrade", "request_head", "splice", "upgrade"]

CHUNK = 64 * 1024  # what the relay reads at once, both ways (server.py too)
MAX_HEAD_BYTES = 64 * 1024


def is_upgrade(connection: str | None, upgrade: str | None) -> bool:
    """Whether a request with these ``Connection`` and ``Upgrade`` headers asks for a protocol upgrade."""
    return "upgrade" in {t.strip().lower() for t in (connection or "").split(",")} and bool(upgrade)


def request_head(method: str, target: str, host: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def upgrade(h: BaseHTTPRequestHandler, sock: socket.socket, head: bytes) -> None:
    """Send the request ``head`` on ``sock`` and relay the answer to ``h``'s client (see the module)."""
    h.close_connection = True
    sock.sendall(head)
    answer, rest = _read_head(sock)
    h.wfile.write(answer)
    if answer.split(b" ", 2)[1:2] == [b"101"]:
        splice(h.connection, sock, first=(_buffered(h), rest))
    else:
        _copy_body(sock, h.wfile, answer, rest)


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """(the response head through its blank line, the bytes that came after it)."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(CHUNK)
        if not more or len(data) > MAX_HEAD_BYTES:
            raise OSError("the connection ended before a complete response head")
        data += more
    end = data.index(b"\r\n\r\n") + 4
    return data[:end], data[end:]


def _copy_body(sock: socket.socket, out, head: bytes, first: bytes) -> None:
    """The body of the response ``head`` (its Content-Length, else all until the end), ``first`` its start."""
    fields = http.client.parse_headers(io.BytesIO(head.split(b"\r\n", 1)[1]))
    left = int(fields["Content-Length"]) - len(first) if fields["Content-Length"] else None
    out.write(first)
    while left is None or left > 0:
        data = sock.recv(CHUNK if left is None else min(CHUNK, left))
        if not data:
            return
        out.write(data)
        left = None if left is None else left - len(data)


def _buffered(h: BaseHTTPRequestHandler) -> bytes:
    """What the client sent after its request head and the handler has already read (without waiting)."""
    h.connection.setblocking(False)
    try:
        return h.rfile.read1(CHUNK) or b""
    except OSError:
        return b""
    finally:
        h.connection.setblocking(True)


def splice(a: socket.socket, b: socket.socket, *, first: tuple[bytes, bytes] = (b"", b"")) -> None:
    """Copy bytes both ways between sockets ``a`` and ``b`` (TLS or not) until either side ends.

    ``first`` = (bytes already read from ``a``, from ``b``), sent before anything else. One thread,
    non-blocking: neither direction waits on the other, and a TLS socket is never used by two
    threads at once (OpenSSL does not allow it)."""
    peer = {a: b, b: a}
    pending = {b: bytearray(first[0]), a: bytearray(first[1])}  # bytes waiting to go to each socket
    attempt: dict[socket.socket, int] = {}  # a TLS write that must be repeated with the same length
    for sock in peer:
        sock.setblocking(False)
    try:
        while True:
            readers = [s for s in peer if len(pending[peer[s]]) < CHUNK]
            writers = [s for s in pending if pending[s]]
            ready = [s for s in readers if isinstance(s, ssl.SSLSocket) and s.pending()]  # decrypted, unseen by select
            readable, writable, _ = (ready, [], []) if ready else select.select(readers, writers, [])
            for sock in readable:
                try:
                    data = sock.recv(CHUNK)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    continue
                if not data:
                    _flush(peer[sock], pending[peer[sock]])
                    return
                pending[peer[sock]] += data
            for sock in writable:
                size = attempt.pop(sock, min(len(pending[sock]), CHUNK))
                try:
                    sent = sock.send(pending[sock][:size])
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    attempt[sock] = size
                    continue
                del pending[sock][:sent]
    except (OSError, ValueError):  # ValueError: a socket closed under us (the relay is stopping)
        return


def _flush(sock: socket.socket, data: bytearray) -> None:
    """Send what is left to ``sock`` before the splice ends (the other side closed)."""
    sock.setblocking(True)
    sock.sendall(data)


def close_socket(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
