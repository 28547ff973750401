"""One JSON answer of an ``http.server`` handler: the sandbox's stand-in servers and the tests' fakes."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


def send_json(handler: BaseHTTPRequestHandler, code: int, body: object) -> None:
    """Answer ``code`` with ``body`` as JSON (headers only to a HEAD request)."""
    data = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)
