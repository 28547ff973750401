"""Kube over real TLS with what the kubeconfig loader built: CA and client certificates from files,
inline data and an exec plugin, tls-server-name, a path prefix and an HTTP CONNECT proxy.

The API server is a loopback HTTPS server requiring client certificates (tests/tls_pki.py).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
import yaml
from tls_pki import connect_proxy, https_server, make_pki

from nrl_k8s.errors import UnreachableError
from nrl_k8s.kinds.core import NAMESPACE
from nrl_k8s.kube.client import Kube, Tuning
from nrl_k8s.kube.connection import REACH_S

FAST = Tuning(backoff_s=0.01, backoff_cap_s=0.05, retry_budget_s=10.0)
DEFAULT_NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
PLUGIN = """#!{python}
import json, pathlib
read = lambda name: pathlib.Path({directory!r}, name).read_text()
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"clientCertificateData": read("client.crt"), "clientKeyData": read("client.key")}}}}))
"""


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def b64file(path: str) -> str:
    return base64.b64encode(Path(path).read_bytes()).decode()


def kubeconfig(tmp_path: Path, pki: dict, server: str, case: str, proxy: str | None = None) -> str:
    cluster = {"server": server, "certificate-authority": pki["ca"]}
    user = {"token": "tok-1", "client-certificate": pki["client"][0], "client-key": pki["client"][1]}
    if case == "inline-data":
        cluster = {"server": server, "certificate-authority-data": b64file(pki["ca"])}
        user = {"token": "tok-1", "client-certificate-data": b64file(pki["client"][0]),
                "client-key-data": b64file(pki["client"][1])}
    elif case == "exec-client-certificate":
        plugin = tmp_path / "plugin"
        plugin.write_text(PLUGIN.format(python=sys.executable, directory=str(Path(pki["ca"]).parent)))
        plugin.chmod(0o700)
        user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}}
    elif case == "tls-server-name":
        cluster["tls-server-name"] = "apiserver.internal"
    elif case == "untrusted":
        del cluster["certificate-authority"]
    if proxy:
        cluster["proxy-url"] = proxy
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "current-context": "c", "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    return str(path)


CASES = {
    # name: (server certificate, path prefix, through a proxy, Authorization sent)
    "files": ("server", "", False, "Bearer tok-1"),
    "inline-data": ("server", "", False, "Bearer tok-1"),
    "exec-client-certificate": ("server", "", False, None),
    "tls-server-name": ("named-server", "", False, "Bearer tok-1"),
    "path-prefix": ("server", "/k8s/clusters/c-1", False, "Bearer tok-1"),
    "proxy-url": ("server", "", True, "Bearer tok-1"),
}


@pytest.mark.parametrize("case", CASES)
def test_kube_over_tls(tmp_path, pki, case):
    server, prefix, proxied, authorization = CASES[case]
    with https_server(pki, server, body=DEFAULT_NS) as (url, seen), connect_proxy() as (proxy_url, tunnels):
        proxy = proxy_url.replace("http://", "http://bob:pw@") if proxied else None
        with Kube.connect(kubeconfig=kubeconfig(tmp_path, pki, url + prefix, case, proxy), tuning=FAST) as kube:
            assert kube.get(NAMESPACE, "default")["metadata"]["name"] == "default"
    assert seen == [{"path": f"{prefix}/api/v1/namespaces/default", "authorization": authorization, "client": "alice"}]
    port = url.rsplit(":", 1)[1]
    assert tunnels == ([f"CONNECT 127.0.0.1:{port} Basic {base64.b64encode(b'bob:pw').decode()}"] if proxied else [])


FAILURES = {
    "untrusted": ("server", "CERTIFICATE_VERIFY_FAILED"),
    "name-mismatch": ("named-server", "CERTIFICATE_VERIFY_FAILED|match|mismatch"),
}


@pytest.mark.parametrize(("server", "message"), FAILURES.values(), ids=FAILURES.keys())
def test_tls_failure_is_not_retried(tmp_path, pki, server, message):
    case = "untrusted" if server == "server" else "files"
    with https_server(pki, server, body=DEFAULT_NS) as (url, seen):
        with Kube.connect(kubeconfig=kubeconfig(tmp_path, pki, url, case), tuning=FAST) as kube:
            failed = f"cannot reach the API server at {url}: TLS failed.*({message})"
            with pytest.raises(UnreachableError, match=failed) as caught:
                kube.get(NAMESPACE, "default")
    assert "certificate-authority" in caught.value.hint
    assert seen == []
    assert json.dumps(caught.value.message).count("tok-1") == 0


@pytest.mark.parametrize("alerts", [1, 3])
def test_a_handshake_the_server_breaks_off_is_tried_again(tmp_path, pki, alerts):
    """A loaded server (or its load balancer) now and then answers a handshake with an alert: the
    request is tried again, on first contact within the reach budget, and then gets its answer."""
    with https_server(pki, body=DEFAULT_NS, alerts=alerts) as (url, seen):
        with Kube.connect(kubeconfig=kubeconfig(tmp_path, pki, url, "files"), tuning=FAST) as kube:
            assert kube.get(NAMESPACE, "default")["metadata"]["name"] == "default"
            assert kube.get(NAMESPACE, "default")["metadata"]["name"] == "default"
    assert len(seen) == 2


def test_alerts_past_the_reach_budget_are_unreachable(tmp_path, pki):
    with https_server(pki, body=DEFAULT_NS, alerts=10**6) as (url, seen):
        with Kube.connect(kubeconfig=kubeconfig(tmp_path, pki, url, "files"), tuning=FAST) as kube:
            with pytest.raises(UnreachableError, match=f"cannot reach the API server at {url}: TLS failed"):
                kube.get(NAMESPACE, "default")
    assert seen == []


def test_a_first_answer_later_than_the_reach_budget_after_a_handshake_is_waited_for(tmp_path, pki):
    """The handshake proves the server runs; a loaded one answers its first request late, and that
    is not an unreachable server (it failed `run` on a slow machine)."""
    with https_server(pki, body=DEFAULT_NS, late_s=REACH_S + 1) as (url, seen):
        tuning = Tuning(first_answer_s=10 * REACH_S)  # the default reach budget: a slow handshake still fits
        with Kube.connect(kubeconfig=kubeconfig(tmp_path, pki, url, "files"), tuning=tuning) as kube:
            assert kube.get(NAMESPACE, "default")["metadata"]["name"] == "default"
    assert len(seen) == 1


def test_a_server_silent_after_the_handshake_is_unreachable_within_the_first_answer_budget(tmp_path, pki):
    with https_server(pki, body=DEFAULT_NS, late_s=None) as (url, seen):
        tuning = Tuning(first_answer_s=0.5)
        with Kube.connect(kubeconfig=kubeconfig(tmp_path, pki, url, "files"), tuning=tuning) as kube:
            message = f"cannot reach the API server at {url}: no answer within 0.5s of the TLS handshake"
            for _ in range(2):  # and the next request raises it again without trying
                with pytest.raises(UnreachableError, match=message):
                    kube.get(NAMESPACE, "default")
    assert len(seen) == 1
