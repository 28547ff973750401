"""A loopback HTTP/1.1 backend that upgrades: ``Upgrade: echo`` gets a 101 and a greeting in the same
write (the bytes after the head must reach the client too), then every byte echoed upper-cased; a
path ending in ``/denied`` gets a 403 with a body instead. It records each request's headers."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GREETING = b"hello\n"


class UpgradeEcho(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upgrades: list[dict] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        if not self.upgrade():
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    def upgrade(self) -> bool:
        """Answer an upgrade request (True), else leave the request alone (False)."""
        if self.headers.get("Upgrade") != "echo":
            return False
        self.upgrades.append({"path": self.path, "headers": dict(self.headers.items())})
        self.close_connection = True
        if self.path.endswith("/denied"):
            body = json.dumps({"kind": "Status", "code": 403, "message": "upgrade refused"}).encode()
            self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body), body))
            return True
        self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n" + GREETING)
        while data := self.connection.recv(65536):
            self.connection.sendall(data.upper())
        return True


@contextlib.contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[int]:
    """Serve in a background thread; yields the port; shut down after."""
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def upgrade_backend() -> Iterator[tuple[str, list[dict]]]:
    """(its URL, the upgrade requests it saw)."""
    handler = type("Handler", (UpgradeEcho,), {"upgrades": []})
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as port:
        yield f"http://127.0.0.1:{port}", handler.upgrades
