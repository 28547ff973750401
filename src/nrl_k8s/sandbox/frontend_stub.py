"""A loopback OpenAI-style stand-in for a Dynamo frontend: one small HTTP server per DGD.

Answers ``GET /v1/models`` (the served model id), ``GET /health`` (``{"status": "healthy"}``)
and ``GET /live``; everything else is 404. With ``unavailable_for`` seconds it answers 503 to
every request for that long after it starts (the ``frontend-unavailable`` fault). It serves
no completions: nothing is inferred.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        stub = self.server.stub
        if stub.unavailable():
            self._reply(503, {"error": {"message": "frontend is starting (sandbox fault frontend-unavailable)"}})
        elif self.path == "/v1/models":
            model = {"id": stub.model, "object": "model", "created": int(stub.started), "owned_by": "nvidia"}
            self._reply(200, {"object": "list", "data": [model]})
        elif self.path == "/health":
            self._reply(200, {"status": "healthy", "endpoints": ["/v1/models"], "instances": []})
        elif self.path == "/live":
            self._reply(200, {"status": "live"})
        else:
            self._reply(404, {"error": {"message": f"no route for {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802
        self.do_GET()

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (signature from the base)
        """Quiet: the daemon log is not an access log."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: "FrontendStub"


class FrontendStub:
    """One stub frontend on 127.0.0.1 (a free port); ``url`` is where it listens."""

    def __init__(self, model: str, unavailable_for: float = 0.0):
        self.model = model
        self.unavailable_for = unavailable_for
        self.started = time.time()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"stub-{model}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def unavailable(self) -> bool:
        return time.time() - self.started < self.unavailable_for

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
