"""``python -m nrl_k8s_sandbox.controlplane.stub``: an nrl-k8s Deployment pod's stand-in process, run by
the local kubelet.

``http --label L --port P [--port Q ...]``: ``HttpStub``, 200 with a JSON body naming itself and
the path, on every ``GET``/``HEAD``/``POST``, one server per port.
It prints a start line and one line per request to stdout (the pod's log), and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TextIO

from ..json_reply import send_json


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        code, body = self.server.stub.answer(self.path)
        self.server.stub.print(f'{self.client_address[0]} "{self.command} {self.path}" {code}')
        send_json(self, code, body)

    do_HEAD = do_POST = do_GET  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (signature from the base)
        """Quiet: the daemon log is not an access log."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: HttpStub


class HttpStub:
    """One stub server on 127.0.0.1 (``port``, or a free one); ``url`` is where it listens. What it
    prints (a start line, then one line per request) goes to ``output``: the pod's log."""

    def __init__(self, label: str, output: TextIO | None = None, port: int = 0):
        self.label = label
        self.started = time.time()
        self.output = output
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.stub = self
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"stub-{label}", daemon=True)
        self._thread.start()
        self.print(self.banner())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def banner(self) -> str:
        return f"sandbox stub for {self.label} listening on {self.url} (200 on every GET)"

    def print(self, line: str) -> None:
        if self.output is not None:
            print(line, file=self.output, flush=True)

    def answer(self, path: str) -> tuple[int, dict]:
        return 200, {"status": "ok", "stub": self.label, "path": path}

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nrl_k8s_sandbox.controlplane.stub")
    parser.add_argument("kind", choices=("http",))
    parser.add_argument("--label", default="")
    parser.add_argument("--port", type=int, action="append", default=[])
    args = parser.parse_args(argv)
    stubs = [HttpStub(args.label, sys.stdout, port=port) for port in args.port]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    for stub in stubs:
        stub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
