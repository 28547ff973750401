"""An in-process sandbox API server per test module, a kubeconfig for it, and a namespace per test.

Every test talks to the server over real HTTP through ``nrl_k8s.kube.Kube`` (urllib3
underneath). Faults and request counts are reset around each test.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from nrl_k8s.kinds.core import NAMESPACE
from nrl_k8s.kube import Kube, Tuning
from nrl_k8s.sandbox.apiserver import ApiServer
from nrl_k8s.sandbox.crds import RAYCLUSTER_CRD, RAYJOB_CRD
from nrl_k8s.sandbox.faults import Faults

USER_TOKEN = "kube-test-user-token"
OPERATOR_TOKEN = "kube-test-operator-token"
HISTORY_SIZE = 100  # small, so a test can push a watch's resourceVersion out of history (410)
FAST = Tuning(backoff_s=0.01, backoff_cap_s=0.05, retry_budget_s=10.0, poll_interval_s=0.05)


@dataclass
class Sandbox:
    server: ApiServer
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict[str, int]:
        """Request counts by "VERB RESOURCE", read over HTTP from GET /sandbox/stats."""
        request = urllib.request.Request(f"{self.url}/sandbox/stats", headers={"Authorization": f"Bearer {USER_TOKEN}"})
        with urllib.request.urlopen(request, timeout=5) as reply:
            return json.loads(reply.read())


def write_kubeconfig(
    path: Path, server: str, *, token: str = USER_TOKEN, contexts: dict[str, str | None] | None = None, current: str = "sandbox"
) -> Path:
    """A kubeconfig with one cluster/user and ``contexts`` (name -> namespace or None)."""
    contexts = contexts if contexts is not None else {"sandbox": None}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "clusters": [{"name": "sandbox", "cluster": {"server": server}}],
        "users": [{"name": "user", "user": {"token": token}}],
        "contexts": [
            {"name": name, "context": {"cluster": "sandbox", "user": "user", **({"namespace": ns} if ns else {})}}
            for name, ns in contexts.items()
        ],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def sandbox():
    server = ApiServer(user_token=USER_TOKEN, operator_token=OPERATOR_TOKEN, faults=Faults(), history_size=HISTORY_SIZE)
    port = server.start(port=0)
    for crd in (RAYCLUSTER_CRD, RAYJOB_CRD):
        server.install_crd(crd)
    yield Sandbox(server, port)
    server.stop()


@pytest.fixture(autouse=True)
def _clean_sandbox(request):
    """Reset faults and request counts around every test that uses the sandbox."""
    if "sandbox" not in request.fixturenames:
        yield
        return
    box: Sandbox = request.getfixturevalue("sandbox")
    yield
    for fault in box.server.faults.active():
        box.server.faults.clear(fault)
    box.server.reset_counts()


@pytest.fixture
def kubeconfig(tmp_path, sandbox) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", sandbox.url)


@pytest.fixture
def kube(kubeconfig, sandbox):
    """A Kube whose default namespace is a fresh one made for this test; counts start at zero."""
    with Kube.connect(kubeconfig=str(kubeconfig), tuning=FAST) as admin:
        name = f"t-{uuid.uuid4().hex[:8]}"
        admin.create(NAMESPACE, {"metadata": {"name": name}})
    sandbox.server.reset_counts()
    with Kube.connect(kubeconfig=str(kubeconfig), namespace=name, tuning=FAST) as client:
        yield client
