"""``python proxied_backend.py PORT RECORD``: the backend behind a sandbox pod's port, reached
through the real API server's service proxy (a Ray job on the pod's Ray head runs it).

Fixed answers per path (``ANSWERS``), ``/query...`` echoes its path and query, POST echoes its
JSON body, ``/`` answers ``ok``; ``Upgrade: echo`` is answered as ``upgrade_backend.UpgradeEcho``
answers it (a 101 and a greeting, then every byte echoed upper-cased; ``.../denied`` a 403 with a
body). Each request's method, path and headers are appended to RECORD as a JSON line, so a test
can see what reached the backend.
"""

from __future__ import annotations

import json
import sys
from http.server import ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from upgrade_backend import UpgradeEcho  # noqa: E402 - tests/ on the path first

ANSWERS = {"/": (200, b"ok"), "/v1/models": (200, b'{"data": [{"id": "model"}]}'), "/teapot": (418, b"short and stout"),
           "/upstream-forbidden": (403, b'{"error": "upstream says no"}')}


class Backend(UpgradeEcho):
    record: Path

    def _note(self) -> None:
        with self.record.open("a") as out:
            out.write(
                json.dumps({"method": self.command, "path": self.path, "headers": dict(self.headers.items())}) + "\n"
            )

    def do_GET(self) -> None:  # noqa: N802 - stdlib hook
        self._note()
        if self.upgrade():
            return
        if self.path.startswith("/query"):
            self._reply(200, self.path.encode())
        else:
            self._reply(*ANSWERS.get(self.path, (404, b"no such page")))

    def do_POST(self) -> None:  # noqa: N802 - stdlib hook
        self._note()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._reply(201, json.dumps({"path": self.path, "got": json.loads(body)}).encode())

    def _reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main(port: str, record: str) -> None:
    handler = type("Handler", (Backend,), {"record": Path(record), "upgrades": []})
    server = ThreadingHTTPServer(("127.0.0.1", int(port)), handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:])
