"""Dashboard.via_api_proxy over real TLS, with a real kubernetes.client.Configuration.

A loopback HTTPS server plays the API server's service proxy: it trusts one CA for client
certificates, presents a server certificate from that CA, and records what each request carried.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes.client import Configuration

from nrl_k8s.dashboard import Dashboard
from nrl_k8s.errors import DashboardError


def _issue(name: str, issuer: tuple | None, *, ca: bool = False, ip: str | None = None):
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = (issuer[0].subject, issuer[1]) if issuer else (subject, key)
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ip:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def _write(directory, name: str, cert, key) -> tuple[str, str]:
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pki")
    ca = _issue("test-ca", None, ca=True)
    return {
        "ca": _write(directory, "ca", *ca)[0],
        "server": _write(directory, "server", *_issue("apiserver", ca, ip="127.0.0.1")),
        "client": _write(directory, "client", *_issue("alice", ca)),
    }


@pytest.fixture(scope="module")
def proxy(pki):
    """A TLS server requiring client certs from the CA; yields (base URL, list of seen requests)."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            peer = self.connection.getpeercert()
            seen.append({
                "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "client": dict(item[0] for item in peer["subject"])["commonName"],
            })  # fmt: skip
            body = json.dumps({"version": "4", "ray_version": "2.60.0"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*pki["server"])
    context.load_verify_locations(pki["ca"])
    context.verify_mode = ssl.CERT_REQUIRED
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def configuration(host: str, pki: dict, **overrides) -> Configuration:
    config = Configuration()
    config.host = host
    config.api_key = {"BearerToken": "Bearer tok-1"}  # where kubernetes>=33 keeps a kubeconfig token
    config.ssl_ca_cert = pki["ca"]
    config.cert_file, config.key_file = pki["client"]
    for name, value in overrides.items():
        setattr(config, name, value)
    return config


CASES = {
    "ca-and-client-cert": {},
    "verify-off": {"ssl_ca_cert": None, "verify_ssl": False},
}


@pytest.mark.parametrize("overrides", CASES.values(), ids=CASES.keys())
def test_api_proxy_over_tls_with_kubeconfig_credentials(proxy, pki, overrides):
    url, seen = proxy
    seen.clear()
    with Dashboard.via_api_proxy(configuration(url, pki, **overrides), "rc-head-svc", "team") as dash:
        assert dash.version()["ray_version"] == "2.60.0"
    assert seen == [{
        "path": "/api/v1/namespaces/team/services/rc-head-svc:8265/proxy/api/version",
        "authorization": "Bearer tok-1",
        "client": "alice",
    }]  # fmt: skip


def test_untrusted_server_certificate_fails_at_once(proxy, pki):
    url, _ = proxy
    dash = Dashboard.via_api_proxy(configuration(url, pki, ssl_ca_cert=None), "rc-head-svc", "team", backoff_s=30)
    with pytest.raises(DashboardError, match=r"after 1 attempt\(s\).*CERTIFICATE_VERIFY_FAILED"):
        dash.version()
