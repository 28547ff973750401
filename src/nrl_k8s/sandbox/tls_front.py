"""A loopback TLS front door for the sandbox API server.

kubectl (client-go) never sends credentials over plain HTTP: with an ``http://`` server it
drops the kubeconfig's token, and the API server answers 401. So the kubeconfig points at this
relay instead: ``https://127.0.0.1:PORT`` with a fresh self-signed certificate (SAN
``127.0.0.1``/``localhost``, embedded as ``certificate-authority-data``), which decrypts each
connection and pipes the bytes to the plain-HTTP API server. The API server itself still
answers plain HTTP on its own port (the operators use that).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import select
import socket
import ssl
import tempfile
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

log = logging.getLogger("nrl_k8s.sandbox.tls_front")
CHUNK = 65536


def self_signed_certificate() -> tuple[bytes, bytes]:
    """(certificate PEM, private key PEM) for 127.0.0.1 and localhost, valid 30 days."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nrl-k8s-sandbox")])
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


class TlsFront:
    """Accept TLS on 127.0.0.1 and relay each connection to ``127.0.0.1:backend_port``."""

    def __init__(self, backend_port: int, cert_pem: bytes, key_pem: bytes):
        self.backend_port = backend_port
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as scratch:
            cert_file, key_file = Path(scratch) / "tls.crt", Path(scratch) / "tls.key"
            cert_file.write_bytes(cert_pem)
            key_file.write_bytes(key_pem)
            self._context.load_cert_chain(cert_file, key_file)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._closed = threading.Event()

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1]

    def start(self) -> int:
        threading.Thread(target=self._accept, name="tls-front", daemon=True).start()
        return self.port

    def stop(self) -> None:
        self._closed.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), name="tls-relay", daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        try:
            secure = self._context.wrap_socket(client, server_side=True)
        except (ssl.SSLError, OSError) as err:
            log.debug("TLS handshake failed: %s", err)
            client.close()
            return
        try:
            with secure, socket.create_connection(("127.0.0.1", self.backend_port)) as backend:
                _pump(secure, backend)
        except OSError as err:  # ssl.SSLError is an OSError
            log.debug("relay closed: %s", err)


def _pump(secure: ssl.SSLSocket, backend: socket.socket) -> None:
    """Copy bytes both ways on one thread (an SSL socket must not be shared across threads)."""
    while True:
        readable = [secure] if secure.pending() else select.select([secure, backend], [], [])[0]
        for source in readable:
            data = source.recv(CHUNK)
            if not data:
                return
            (backend if source is secure else secure).sendall(data)
