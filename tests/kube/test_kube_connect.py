"""Kube.connect: kubeconfig, context and namespace selection, in-cluster config, bad credentials."""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

import pytest
from conftest import FAST, ca_pem, user_token, write_kubeconfig

from nrl_k8s.errors import ConfigError, UnauthorizedError
from nrl_k8s.kinds.core import CONFIGMAP, NAMESPACE
from nrl_k8s.kube import client as kube_module
from nrl_k8s.kube.client import Kube, NoClusterError

CONTEXTS = {"sandbox": "ctx-ns", "other": None, "team": "team-ns"}


@pytest.mark.parametrize(
    ("context", "namespace", "expected_context", "expected_namespace"),
    [
        (None, None, "sandbox", "ctx-ns"),
        ("other", None, "other", "default"),
        ("team", None, "team", "team-ns"),
        (None, "explicit", "sandbox", "explicit"),
        ("team", "explicit", "team", "explicit"),
    ],
    ids=[
        "current-context-namespace",
        "context-without-namespace",
        "chosen-context",
        "explicit-wins",
        "explicit-wins-over-chosen",
    ],
)
def test_context_and_namespace_selection(tmp_path, sandbox, context, namespace, expected_context, expected_namespace):
    path = write_kubeconfig(tmp_path / "kubeconfig", sandbox, contexts=CONTEXTS)
    with Kube.connect(kubeconfig=str(path), context=context, namespace=namespace, tuning=FAST) as kube:
        assert (kube.context, kube.namespace, kube.in_cluster) == (expected_context, expected_namespace, False)
        assert kube.connection.host == sandbox.api_url
        assert kube.get(NAMESPACE, "default")["metadata"]["name"] == "default"


def test_kubeconfig_from_environment(tmp_path, sandbox, monkeypatch):
    path = write_kubeconfig(tmp_path / "kubeconfig", sandbox, contexts=CONTEXTS)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{path}")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with Kube.connect(tuning=FAST) as kube:
        assert (kube.context, kube.namespace) == ("sandbox", "ctx-ns")
        assert kube.get(NAMESPACE, "default")["metadata"]["name"] == "default"


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({}, NoClusterError, "no Kubernetes cluster configured"),
        ({"kubeconfig": "{tmp}/nope"}, ConfigError, "kubeconfig"),
        ({"kubeconfig": "{kubeconfig}", "context": "typo"}, ConfigError, "kube context 'typo' not found"),
        ({"kubeconfig": "{no_current}"}, NoClusterError, "no current context"),
    ],
    ids=["nothing-configured", "explicit-kubeconfig-missing", "unknown-context", "no-current-context"],
)
def test_unusable_configuration(tmp_path, sandbox, monkeypatch, kwargs, error, text):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    paths = {
        "tmp": tmp_path,
        "kubeconfig": write_kubeconfig(tmp_path / "kubeconfig", sandbox),
        "no_current": write_kubeconfig(tmp_path / "no-current", sandbox, current=""),
    }
    with pytest.raises(error, match=text) as caught:
        Kube.connect(**{k: v.format(**paths) for k, v in kwargs.items()}, tuning=FAST)
    assert caught.value.hint


def test_in_cluster_config_from_service_account(tmp_path, sandbox, monkeypatch):
    """A pod's service account (token, the cluster CA, namespace) and KUBERNETES_SERVICE_HOST/PORT."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(user_token(sandbox))
    (account / "ca.crt").write_bytes(ca_pem(sandbox))
    (account / "namespace").write_text("pod-ns\n")
    port = urlsplit(sandbox.api_url).port
    monkeypatch.setattr(kube_module, "SERVICE_ACCOUNT_DIR", account)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))
    with Kube.connect(tuning=FAST) as kube:
        assert (kube.in_cluster, kube.namespace, kube.context) == (True, "pod-ns", None)
        assert kube.connection.host == f"https://127.0.0.1:{port}"
        assert kube.connection.headers()["Authorization"] == f"Bearer {user_token(sandbox)}"
        assert kube.get(NAMESPACE, "default")["metadata"]["name"] == "default"  # over TLS, trusting ca.crt
    with Kube.connect(namespace="mine", tuning=FAST) as kube:
        assert (kube.in_cluster, kube.namespace) == (True, "mine")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", sandbox)
    with Kube.connect(kubeconfig=str(kubeconfig), tuning=FAST) as kube:
        assert (kube.in_cluster, kube.connection.host) == (False, sandbox.api_url)


def test_bad_token_is_unauthorized(tmp_path, sandbox):
    path = write_kubeconfig(tmp_path / "kubeconfig", sandbox, token="wrong")
    with Kube.connect(kubeconfig=str(path), tuning=FAST) as kube, pytest.raises(UnauthorizedError) as caught:
        kube.list(CONFIGMAP)
    assert caught.value.status == 401
    assert "credentials" in caught.value.message and caught.value.hint


EXEC_PLUGIN = """#!{python}
import json, pathlib
queue = pathlib.Path({queue!r})
tokens = queue.read_text().splitlines()
queue.write_text("\\n".join(tokens[1:] or tokens[-1:]))  # each run takes the next token; the last one stays
runs = pathlib.Path({runs!r})
runs.write_text(runs.read_text() + "run\\n" if runs.exists() else "run\\n")
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": tokens[0]}}}}))
"""


def exec_kubeconfig(tmp_path, sandbox, tokens: list[str]):
    """A kubeconfig whose user is an exec plugin handing out ``tokens`` in turn, with no expiry."""
    (tmp_path / "tokens").write_text("\n".join(tokens))
    plugin = tmp_path / "plugin"
    plugin.write_text(
        EXEC_PLUGIN.format(python=sys.executable, queue=str(tmp_path / "tokens"), runs=str(tmp_path / "runs"))
    )
    plugin.chmod(0o700)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}}
    path = write_kubeconfig(tmp_path / "kubeconfig", sandbox, user=user)
    return path, lambda: len((tmp_path / "runs").read_text().splitlines())


def test_a_revoked_exec_credential_is_renewed_once_on_401(tmp_path, sandbox):
    """client-go's rule: a 401 runs the plugin again (its credential had no expiry, or was revoked
    early); the request is retried once with the new token."""
    path, runs = exec_kubeconfig(tmp_path, sandbox, ["revoked", user_token(sandbox)])
    with Kube.connect(kubeconfig=str(path), tuning=FAST) as kube:
        kube.get(NAMESPACE, "default")
    assert runs() == 2


def test_an_exec_credential_still_refused_after_renewal_is_unauthorized(tmp_path, sandbox):
    path, runs = exec_kubeconfig(tmp_path, sandbox, ["revoked", "also-wrong"])
    with Kube.connect(kubeconfig=str(path), tuning=FAST) as kube, pytest.raises(UnauthorizedError):
        kube.get(NAMESPACE, "default")
    assert runs() == 2  # renewed once, not in a loop


def test_a_rotated_token_file_is_read_again_on_401(tmp_path, sandbox):
    token_file = tmp_path / "token"
    token_file.write_text("old")
    path = write_kubeconfig(tmp_path / "kubeconfig", sandbox, user={"tokenFile": str(token_file)})
    with Kube.connect(kubeconfig=str(path), tuning=FAST) as kube:
        token_file.write_text(
            user_token(sandbox)
        )  # rotated after it was first read (re-read only after TOKEN_TTL_S otherwise)
        kube.get(NAMESPACE, "default")
