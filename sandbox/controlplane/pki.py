"""The control plane's certificates: one CA, serving certificates for loopback, client certificates.

Every certificate is signed by a CA made for this sandbox alone and written 0600 into its folder.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..pids import open_private

LOOPBACK_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                  "kubernetes.default.svc.cluster.local")
LOOPBACK_IPS = ("127.0.0.1", "10.96.0.1")  # the first address of --service-cluster-ip-range
_YEARS = datetime.timedelta(days=3650)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


class Authority:
    """A CA that signs the sandbox's certificates, kept in ``folder``."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nrl-k8s-sandbox-ca")])
        self._name = name
        self._cert = (self._builder(name, self._key.public_key())
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self.cert = self._write("ca.crt", self.pem)

    def _builder(self, subject: x509.Name, public_key) -> x509.CertificateBuilder:
        start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(getattr(self, "_name", subject))
                .public_key(public_key).serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(start + _YEARS))

    def _write(self, name: str, data: bytes) -> Path:
        path = self.folder / name
        with open_private(path, "wb") as handle:
            handle.write(data)
        return path

    def issue(self, name: str, common_name: str, *, organizations: tuple[str, ...] = (), server: bool = False,
              client: bool = False) -> Pair:
        """A key pair for ``common_name`` (groups = ``organizations``), serving loopback when ``server``."""
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        )
        builder = (self._builder(x509.Name(attributes), key.public_key())
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if server:
            sans: list[x509.GeneralName] = [x509.DNSName(n) for n in LOOPBACK_NAMES]
            sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in LOOPBACK_IPS]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return Pair(self._write(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM)),
                    self._write(f"{name}.key", _key_pem(key)))

    def service_account_key(self) -> Pair:
        """The RSA key pair that signs and checks ServiceAccount tokens."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
        return Pair(self._write("sa.pub", public), self._write("sa.key", _key_pem(key)))
