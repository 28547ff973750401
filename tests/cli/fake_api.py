"""A stand-in Kubernetes API server for offline CLI tests (plain HTTP on 127.0.0.1, in a thread):
every collection is empty, every named object is missing (404), and Ray dashboards behind the
service proxy (``.../services/NAME:8265/proxy/...``) have no jobs except the logs in ``logs``.
Each request's method and path are kept in ``requests``."""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from nrl_k8s_sandbox.json_reply import send_json

_COLLECTION = re.compile(r"^/api/v1(/namespaces/[^/]+)?/[a-z]+$|^/apis/[^/]+/[^/]+(/namespaces/[^/]+)?/[a-z]+$")
_JOB_LOGS = re.compile(r"/proxy/api/jobs/([^/]+)/logs$")


class FakeApi:
    def __init__(self, logs: dict[str, str] | None = None):
        self.logs = dict(logs or {})
        self.requests: list[tuple[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - stdlib hook
                path = self.path.partition("?")[0]
                fake.requests.append(("GET", self.path))
                if (found := _JOB_LOGS.search(path)) and found[1] in fake.logs:
                    send_json(self, 200, {"logs": fake.logs[found[1]]})
                elif path.endswith("/proxy/api/jobs/"):
                    send_json(self, 200, [])
                elif _COLLECTION.match(path):
                    send_json(self, 200, {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                                          "items": []})
                else:
                    name = path.rsplit("/", 1)[-1]
                    send_json(self, 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                          "reason": "NotFound", "details": {"name": name}, "code": 404,
                                          "message": f"{name} not found"})

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kubeconfig(self, path: Path, namespace: str = "team") -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": self.url}}],
            "users": [{"name": "u", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": namespace}}]}))
        return path

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
