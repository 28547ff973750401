"""Dashboard.via_api_proxy over real TLS, with a Connection from a real kubeconfig.

A loopback HTTPS server (tests/tls_pki.py) plays the API server's service proxy: it trusts one CA
for client certificates, presents a server certificate from that CA, and records what each
request carried.
"""

from __future__ import annotations

import os

import pytest
import yaml
from tls_pki import connect_proxy, https_server, make_pki

from nrl_k8s.errors import DashboardError
from nrl_k8s.kube.connection import Connection, from_kubeconfig
from nrl_k8s.ray.dashboard import Dashboard


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def proxy(pki):
    with https_server(pki) as served:
        yield served


def connection(tmp_path, host: str, pki: dict, **cluster_overrides) -> Connection:
    """The real kubeconfig loader's Connection: token, CA and client certificate (paths relative to the file)."""
    def relative(path: str) -> str:
        return os.path.relpath(path, tmp_path)

    cluster = {"server": host, "certificate-authority": relative(pki["ca"]), **cluster_overrides}
    user = {
        "token": "tok-1",
        "client-certificate": relative(pki["client"][0]),
        "client-key": relative(pki["client"][1]),
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump({
        "current-context": "c",
        "clusters": [{"name": "c", "cluster": {k: v for k, v in cluster.items() if v is not None}}],
        "users": [{"name": "u", "user": user}], "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    return from_kubeconfig(str(tmp_path / "kubeconfig"), None)[0]


CASES = {
    "ca-and-client-cert": {},
    "verify-off": {"certificate-authority": None, "insecure-skip-tls-verify": True},
}


@pytest.mark.parametrize("overrides", CASES.values(), ids=CASES.keys())
def test_api_proxy_over_tls_with_kubeconfig_credentials(tmp_path, proxy, pki, overrides):
    url, seen = proxy
    seen.clear()
    with Dashboard.via_api_proxy(connection(tmp_path, url, pki, **overrides), "rc-head-svc", "team") as dash:
        assert dash.version()["ray_version"] == "2.60.0"
    assert seen == [{
        "path": "/api/v1/namespaces/team/services/rc-head-svc:8265/proxy/api/version",
        "authorization": "Bearer tok-1",
        "client": "alice",
    }]  # fmt: skip


def test_untrusted_server_certificate_fails_at_once(tmp_path, proxy, pki):
    url, _ = proxy
    dash = Dashboard.via_api_proxy(
        connection(tmp_path, url, pki, **{"certificate-authority": None}), "rc-head-svc", "team", backoff_s=30
    )
    with pytest.raises(DashboardError, match=r"after 1 attempt\(s\).*CERTIFICATE_VERIFY_FAILED"):
        dash.version()


def test_api_proxy_honours_tls_server_name_and_proxy_url(tmp_path, pki):
    """The server's certificate names only apiserver.internal; the API server is reached through a proxy."""
    with https_server(pki, "named-server") as (url, seen), connect_proxy() as (proxy_url, tunnels):
        conn = connection(tmp_path, url, pki, **{"tls-server-name": "apiserver.internal", "proxy-url": proxy_url})
        with Dashboard.via_api_proxy(conn, "rc-head-svc", "team") as dash:
            assert dash.version()["ray_version"] == "2.60.0"
    assert [(s["client"], s["authorization"]) for s in seen] == [("alice", "Bearer tok-1")]
    assert tunnels == [f"CONNECT 127.0.0.1:{url.rsplit(':', 1)[1]}"]
