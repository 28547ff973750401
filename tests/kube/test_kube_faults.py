"""Retries on 429/5xx/connection errors only; 4xx (401/403/409/...) are typed and never retried.

The errors are the sandbox front proxy's answers (``api-errors``: a Kubernetes Status with that code,
nothing forwarded) and real RBAC denials (``rbac-deny``); the counts are the front proxy's.
"""

from __future__ import annotations

import socket

import pytest
from conftest import write_kubeconfig

from nrl_k8s.errors import ApiError, ConflictError, ForbiddenError, NotFoundError, ServerError, UnreachableError
from nrl_k8s.kinds import rayjob
from nrl_k8s.kinds.core import CONFIGMAP
from nrl_k8s.kube.client import Kube, Tuning


@pytest.mark.parametrize(
    ("errors", "stat"),
    [
        ("create:configmaps:500:2", "create configmaps"),
        ("create:configmaps:429:2", "create configmaps"),
        ("create:configmaps:503:1", "create configmaps"),
    ],
    ids=["500-twice", "429-twice-with-retry-after", "503-once"],
)
def test_transient_errors_are_retried_and_create_lands_once(kube, sandbox, fault, errors, stat):
    failures = int(errors.rsplit(":", 1)[1])
    fault("api-errors", errors)
    created = kube.create(CONFIGMAP, {"metadata": {"name": "survivor"}, "data": {"k": "v"}})
    assert sandbox.request_counts()[stat] == failures + 1
    found = kube.list(CONFIGMAP, field_selector="metadata.name=survivor")
    assert [cm["metadata"]["uid"] for cm in found] == [created["metadata"]["uid"]]


def test_reads_are_retried(kube, sandbox, fault):
    kube.create(CONFIGMAP, {"metadata": {"name": "read-me"}})
    fault("api-errors", "get:configmaps:502:2")
    assert kube.get(CONFIGMAP, "read-me")["metadata"]["name"] == "read-me"
    assert sandbox.request_counts()["get configmaps"] == 3


def test_retries_are_bounded_by_time(kubeconfig, kube, sandbox, fault):
    fault("api-errors", "create:configmaps:500:100000")
    short = Tuning(backoff_s=0.01, backoff_cap_s=0.02, retry_budget_s=0.3)
    with Kube.connect(kubeconfig=str(kubeconfig), namespace=kube.namespace, tuning=short) as client:
        with pytest.raises(ServerError) as caught:
            client.create(CONFIGMAP, {"metadata": {"name": "never"}})
    assert caught.value.status == 500
    assert caught.value.message.startswith(f'cannot create configmaps in namespace "{kube.namespace}"')
    assert 2 <= sandbox.request_counts()["create configmaps"] < 100000
    assert kube.find(CONFIGMAP, "never") is None


def test_retries_outlast_many_failures(kube, sandbox, fault):
    """Far more than a handful of attempts: the budget is time, not a count."""
    fault("api-errors", "get:configmaps:503:12")
    kube.create(CONFIGMAP, {"metadata": {"name": "patient"}})
    assert kube.get(CONFIGMAP, "patient")["metadata"]["name"] == "patient"
    assert sandbox.request_counts()["get configmaps"] == 13


@pytest.mark.parametrize(
    ("kind", "manifest", "resource"),
    [
        (CONFIGMAP, {"metadata": {"name": "denied"}}, "configmaps"),
        (rayjob.KIND, {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "denied"}}, "rayjobs.ray.io"),
    ],
    ids=["core-kind", "custom-kind"],
)
def test_forbidden_names_verb_and_resource_and_is_not_retried(kube, sandbox, fault, kind, manifest, resource):
    fault("rbac-deny", f"create:{kind.plural}")
    sandbox.request_counts(reset=True)
    with pytest.raises(ForbiddenError) as caught:
        kube.create(kind, manifest)
    assert caught.value.message == f'forbidden: cannot create {resource} in namespace "{kube.namespace}"'
    assert f"kubectl auth can-i create {resource} -n {kube.namespace}" in caught.value.hint
    assert "Role" in caught.value.hint
    assert sandbox.request_counts()[f"create {kind.plural}"] == 1


@pytest.mark.parametrize(
    ("code", "error"),
    [(400, ApiError), (404, NotFoundError), (409, ConflictError), (422, ApiError)],
    ids=["400", "404", "409", "422"],
)
def test_client_errors_are_not_retried(kube, sandbox, fault, code, error):
    fault("api-errors", f"create:configmaps:{code}:3")
    with pytest.raises(error) as caught:
        kube.create(CONFIGMAP, {"metadata": {"name": "rejected"}})
    assert caught.value.status == code
    assert sandbox.request_counts()["create configmaps"] == 1


def test_a_server_that_never_answered_is_unreachable_at_once(tmp_path, sandbox):
    """Refused before the server ever answered: one UnreachableError, not retried, and raised again
    by the next request without trying (a command ends, whichever caller swallows errors)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))  # bound, not listening: refused
        port = probe.getsockname()[1]
        path = write_kubeconfig(tmp_path / "kubeconfig", sandbox, server=f"https://127.0.0.1:{port}")
        sent: list = []
        with Kube.connect(kubeconfig=str(path), tuning=Tuning(retry_budget_s=60)) as kube:
            kube.observer = sent.append
            for _ in range(2):
                with pytest.raises(UnreachableError) as caught:
                    kube.list(CONFIGMAP)
    assert caught.value.message == f"cannot reach the API server at https://127.0.0.1:{port}: connection refused"
    assert "kubectl cluster-info" in caught.value.hint
    assert len(sent) == 1
