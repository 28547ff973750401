"""The DGD conversion webhook the API server calls: ``POST /convert`` over HTTPS on loopback.

The API server sends an ``apiextensions.k8s.io/v1`` ConversionReview whenever a DGD is read or
written in a version other than the stored one; ``review`` answers it with every object converted
by ``conversion.convert`` (the mapping the Dynamo operator's webhook does). Each connection
is served on a thread of its own, TLS handshake included.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from ..json_reply import send_json
from .conversion import convert

log = logging.getLogger("nrl_k8s_sandbox.controlplane.webhook")
REVIEW_VERSION = "apiextensions.k8s.io/v1"
PATH = "/convert"
HANDSHAKE_TIMEOUT_S = 10.0


def _converted(obj: object, desired: str) -> dict:
    """``obj`` in the apiVersion ``desired``; ValueError when it cannot be."""
    if not isinstance(obj, dict):
        raise ValueError(f"not an object: {obj!r:.100}")
    out = convert(obj, desired)
    if out.get("apiVersion") != desired:
        raise ValueError(f"cannot convert {obj.get('kind')} from {obj.get('apiVersion')} to {desired}")
    return out


def review(body: dict) -> dict:
    """The ConversionReview answering the request in ``body``."""
    request = body.get("request") if isinstance(body.get("request"), dict) else {}
    response: dict = {"uid": request.get("uid", "")}
    try:
        objects = request.get("objects") or []
        response["convertedObjects"] = [_converted(obj, request.get("desiredAPIVersion") or "") for obj in objects]
        response["result"] = {"status": "Success"}
    except ValueError as err:
        response["result"] = {"status": "Failure", "message": str(err)}
    return {"apiVersion": REVIEW_VERSION, "kind": "ConversionReview", "response": response}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the API server reuses its connections

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        length = self.headers.get("Content-Length") or "0"
        if not length.isdigit():
            self.close_connection = True  # the body's end is unknown
            return send_json(self, 400, {"error": "a Content-Length is required"})
        data = self.rfile.read(int(length))  # read before answering: the connection is reused
        if urlsplit(self.path).path != PATH:  # the API server appends ?timeout=...
            return send_json(self, 404, {"error": f"no such path {self.path}"})
        try:
            body = json.loads(data)
        except ValueError as err:
            return send_json(self, 400, {"error": f"not a JSON ConversionReview: {err}"})
        if not isinstance(body, dict):
            return send_json(self, 400, {"error": "not a JSON ConversionReview"})
        send_json(self, 200, review(body))

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (signature from the base)
        log.debug(format, *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    context: ssl.SSLContext

    def finish_request(self, request: socket.socket, client_address: tuple) -> None:
        """TLS on this connection's own thread, so a slow handshake holds up no other."""
        try:
            request.settimeout(HANDSHAKE_TIMEOUT_S)
            tls = self.context.wrap_socket(request, server_side=True)
            tls.settimeout(None)
        except (ssl.SSLError, OSError) as err:
            log.debug("TLS handshake from %s failed: %s", client_address, err)
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            tls.close()


class ConversionWebhook:
    """Serves ``POST /convert`` on 127.0.0.1 (a free port) with the certificate ``cert``/``key``."""

    def __init__(self, cert: Path, key: Path):
        self._server = _Server(("127.0.0.1", 0), _Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.set_alpn_protocols(["http/1.1"])
        context.load_cert_chain(str(cert), str(key))
        self._server.context = context
        self.url = f"https://127.0.0.1:{self._server.server_address[1]}{PATH}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="dgd-webhook", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
