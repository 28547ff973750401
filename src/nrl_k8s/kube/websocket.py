"""A small websocket client (RFC 6455) on an httpx client: enough to read the Ray dashboard's
log tail (``/api/jobs/ID/logs/tail``) with the client's TLS, proxy and credentials, also
through the Kubernetes API server's service proxy (which relays upgraded connections), and to
run a command in a pod (``podexec``: binary messages both ways, a subprotocol chosen).

httpx hands over the raw connection after ``101 Switching Protocols``
(``response.extensions["network_stream"]``); frames are read and written here. Text and
continuation frames make messages, pings are answered, a close frame ends the stream
(``Closed``), an end without one is ``Dropped``. No extension is offered, so the server uses
none (no compression). The client sends no pings: Ray's log tail never reads its socket, so it
would never answer them.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import struct
from collections.abc import Iterator

import httpcore

from nrl_k8s.signals import held_back

from ._httpx import httpx

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_CONTINUATION, _TEXT, _BINARY, _CLOSE, _PING, _PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_READ_SIZE = 65536


class Dropped(Exception):
    """The connection ended without a close frame, or failed."""


class Closed(Exception):
    """The server closed the websocket (a close frame); ``code`` is its status code or None."""

    def __init__(self, code: int | None):
        super().__init__(f"closed with code {code}")
        self.code = code


class Refused(Exception):
    """The server answered the upgrade request with something else than 101 (the response, read)."""

    def __init__(self, response: httpx.Response):
        super().__init__(f"upgrade refused: {response.status_code}")
        self.response = response


class WebSocket:
    """One open websocket (the client side)."""

    def __init__(self, stream, protocol: str | None = None):
        self._stream = stream
        self.protocol = protocol  # the subprotocol the server chose, if any
        self._buffer = bytearray()
        self._parts: list[bytes] = []  # a fragmented message so far

    def receive(self, timeout: float) -> str | None:
        """The next text message; None when ``timeout`` seconds passed without one."""
        message = self.receive_bytes(timeout)
        return None if message is None else message.decode("utf-8", errors="replace")

    def receive_bytes(self, timeout: float) -> bytes | None:
        """The next message (text or binary) as bytes; None when ``timeout`` seconds passed without one."""
        while True:
            try:
                fin, opcode, payload = self._frame(timeout)
            except httpcore.TimeoutException:
                return None
            if opcode == _PING:
                self._send(_PONG, payload)
            elif opcode == _CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                with contextlib.suppress(Dropped):
                    self._send(_CLOSE, payload[:2])
                raise Closed(code)
            elif opcode in (_TEXT, _BINARY, _CONTINUATION):
                self._parts.append(payload)
                if fin:
                    message, self._parts = b"".join(self._parts), []
                    return message

    def _frame(self, timeout: float) -> tuple[bool, int, bytes]:
        """(FIN, opcode, payload) of the next whole frame; partial data stays buffered on a timeout."""
        head = self._fill(2, timeout)
        fin, opcode, length, offset = bool(head[0] & 0x80), head[0] & 0x0F, head[1] & 0x7F, 2
        masked = bool(head[1] & 0x80)
        if length == 126:
            length, offset = struct.unpack("!H", bytes(self._fill(4, timeout)[2:4]))[0], 4
        elif length == 127:
            length, offset = struct.unpack("!Q", bytes(self._fill(10, timeout)[2:10]))[0], 10
        mask_end = offset + (4 if masked else 0)
        data = self._fill(mask_end + length, timeout)
        payload = bytes(data[mask_end:mask_end + length])
        if masked:  # servers do not mask; accept it anyway
            mask = data[offset:mask_end]
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        del self._buffer[:mask_end + length]
        return fin, opcode, payload

    def _fill(self, size: int, timeout: float) -> bytearray:
        while len(self._buffer) < size:
            try:
                chunk = self._stream.read(_READ_SIZE, timeout=timeout)
            except (httpcore.NetworkError, httpcore.ProtocolError, OSError) as exc:
                raise Dropped(f"{type(exc).__name__}: {exc}") from exc
            if not chunk:
                raise Dropped("the connection ended without a close frame")
            self._buffer += chunk
        return self._buffer

    def send_bytes(self, payload: bytes) -> None:
        """One binary message."""
        self._send(_BINARY, payload)

    def _send(self, opcode: int, payload: bytes) -> None:
        """One masked frame (clients must mask)."""
        mask = os.urandom(4)
        size = len(payload)
        if size < 126:
            head = bytes([0x80 | opcode, 0x80 | size])
        elif size < 1 << 16:
            head = bytes([0x80 | opcode, 0x80 | 126]) + struct.pack("!H", size)
        else:
            head = bytes([0x80 | opcode, 0x80 | 127]) + struct.pack("!Q", size)
        frame = head + mask + _masked(payload, mask)
        try:
            self._stream.write(frame, timeout=10.0)
        except (httpcore.NetworkError, httpcore.TimeoutException, OSError) as exc:
            raise Dropped(f"{type(exc).__name__}: {exc}") from exc


def _masked(payload: bytes, mask: bytes) -> bytes:
    """``payload`` XOR the repeated 4-byte ``mask``, as one big-integer operation (fast for large payloads)."""
    if not payload:
        return b""
    size = len(payload)
    key = (mask * (size // 4 + 1))[:size]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(size, "big")


@contextlib.contextmanager
def connect(client: httpx.Client, path: str, protocols: tuple[str, ...] = ()) -> Iterator[WebSocket]:
    """Open a websocket at ``path`` of ``client``'s base URL, offering ``protocols`` (subprotocols, in
    order of preference); Refused when the server does not switch."""
    key = base64.b64encode(os.urandom(16)).decode()
    headers = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": key}
    if protocols:
        headers["Sec-WebSocket-Protocol"] = ", ".join(protocols)
    response = None
    try:
        with held_back():  # httpx's pool (see signals.held_back); the frames are read past it
            response = client.send(client.build_request("GET", path, headers=headers), stream=True)
        if response.status_code != 101:
            with held_back():
                response.read()
            raise Refused(response)
        expected = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
        if response.headers.get("sec-websocket-accept") != expected:
            raise Dropped("the server's Sec-WebSocket-Accept does not match the key sent")
        stream = response.extensions["network_stream"]
        try:
            yield WebSocket(stream, response.headers.get("sec-websocket-protocol"))
        finally:
            stream.close()
    finally:
        if response is not None:  # set inside held_back: a Ctrl-C held back is raised after it
            with held_back():
                response.close()
