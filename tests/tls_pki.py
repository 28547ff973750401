"""Test PKI, a loopback HTTPS server that requires client certificates, and an HTTP CONNECT proxy.

The server answers every GET with ``body`` (JSON) and records the path, the Authorization header
and the client certificate's common name of each request.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import select
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nrl_k8s_sandbox.json_reply import send_json

#: A TLS alert record: content type 21, TLS 1.2, 2 bytes: fatal (2), decode_error (50).
FATAL_DECODE_ERROR = bytes([21, 3, 3, 0, 2, 2, 50])


def issue(name: str, issuer: tuple | None, *, ca: bool = False, ip: str | None = None, dns: str | None = None):
    """(certificate, key) for ``name``, signed by ``issuer`` (certificate, key), else self-signed."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = (issuer[0].subject, issuer[1]) if issuer else (subject, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    names = [x509.IPAddress(ipaddress.ip_address(ip))] if ip else []
    names += [x509.DNSName(dns)] if dns else []
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def pem(cert, key) -> tuple[bytes, bytes]:
    return cert.public_bytes(serialization.Encoding.PEM), key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def write(directory: Path, name: str, cert, key) -> tuple[str, str]:
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_pem, key_pem = pem(cert, key)
    cert_path.write_bytes(cert_pem)
    key_path.write_bytes(key_pem)
    return str(cert_path), str(key_path)


def make_pki(directory: Path) -> dict:
    """Files of a CA, a server certificate for 127.0.0.1, one for the name apiserver.internal only, and client alice."""
    ca = issue("test-ca", None, ca=True)
    return {
        "ca": write(directory, "ca", *ca)[0],
        "server": write(directory, "server", *issue("apiserver", ca, ip="127.0.0.1")),
        "named-server": write(directory, "named-server", *issue("apiserver", ca, dns="apiserver.internal")),
        "client": write(directory, "client", *issue("alice", ca)),
    }


@contextlib.contextmanager
def https_server(pki: dict, server: str = "server", body: dict | None = None,
                 alerts: int = 0, late_s: float | None = 0.0) -> Iterator[tuple[str, list[dict]]]:
    """A TLS server requiring client certificates from the CA; yields (base URL, list of seen requests).
    Its first ``alerts`` connections get a fatal TLS alert (decode_error) instead of a handshake; it
    answers each request ``late_s`` after reading it (a loaded server), or with ``None`` never (a
    server silent after the handshake: the request is held until the server closes)."""
    seen: list[dict] = []
    closed = threading.Event()
    payload = body or {"version": "4", "ray_version": "2.60.0"}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            peer = self.connection.getpeercert()
            seen.append({
                "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "client": dict(item[0] for item in peer["subject"])["commonName"],
            })  # fmt: skip
            if closed.wait(late_s):  # None: until the server closes, the request unanswered
                return
            send_json(self, 200, payload)

        def log_message(self, *args):
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*pki[server])
    context.load_verify_locations(pki["ca"])
    context.verify_mode = ssl.CERT_REQUIRED
    left = [alerts]

    class Server(ThreadingHTTPServer):
        def get_request(self):
            sock, address = self.socket.accept()
            if left[0] > 0:
                left[0] -= 1
                sock.sendall(FATAL_DECODE_ERROR)
                sock.close()
                raise OSError("alerted")  # socketserver drops this connection
            return context.wrap_socket(sock, server_side=True), address

    httpd = Server(("127.0.0.1", 0), Handler)
    with _serving(httpd) as port:
        try:
            yield f"https://127.0.0.1:{port}", seen
        finally:
            closed.set()


@contextlib.contextmanager
def connect_proxy() -> Iterator[tuple[str, list[str]]]:
    """An HTTP proxy that tunnels CONNECT requests; yields (proxy URL, the CONNECT targets and auth seen)."""
    seen: list[str] = []

    class Tunnel(socketserver.StreamRequestHandler):
        def handle(self):
            request = self.rfile.readline().decode().split()
            lines = iter(self.rfile.readline, b"\r\n")
            headers = {name.lower(): value for name, value in (line.decode().strip().split(": ", 1) for line in lines)}
            seen.append(" ".join([*request[:2], headers.get("proxy-authorization", "")]).strip())
            host, port = request[1].rsplit(":", 1)
            with socket.create_connection((host, int(port))) as upstream:
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                ends = [self.connection, upstream]
                while True:
                    for end in select.select(ends, [], [])[0]:
                        data = end.recv(65536)
                        if not data:
                            return
                        (upstream if end is self.connection else self.connection).sendall(data)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Tunnel)
    server.daemon_threads = True
    with _serving(server) as port:
        yield f"http://127.0.0.1:{port}", seen


@contextlib.contextmanager
def _serving(server: socketserver.BaseServer) -> Iterator[int]:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
