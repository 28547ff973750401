"""Kubeconfigs for the session's sandbox (``sandbox``: kube-apiserver behind the sandbox's front
proxy), a namespace per test, faults turned on per test, and a backend pod reached through the
service proxy.

Every test talks to the real API server over HTTPS through ``nrl_k8s.kube.client.Kube`` (urllib3
underneath), with the user's kubeconfig: its requests pass the front proxy, which counts them
(``sandbox.request_counts``) and injects the ``api-errors`` and ``api-outage`` faults; ``rbac-deny``
and ``proxy-forbidden`` are real RBAC. Set-up and clean-up use the operators' kubeconfig (straight
to kube-apiserver: not counted, no faults). Counts start at zero in every test and every fault a
test turns on (``fault``) is turned back off after it.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from sandbox_harness import DEADLINE_S, Sandbox, eventually, unique

from nrl_k8s.errors import ConflictError
from nrl_k8s.kinds import pod
from nrl_k8s.kinds.core import NAMESPACE
from nrl_k8s.kinds.service import KIND as SERVICE
from nrl_k8s.kube.client import Kube, Tuning

FAST = Tuning(backoff_s=0.01, backoff_cap_s=0.05, retry_budget_s=10.0, poll_interval_s=0.05)


def user_entry(box: Sandbox) -> tuple[dict, dict]:
    """(cluster, user) of the sandbox user's kubeconfig: the front proxy's URL and CA, the bearer token."""
    doc = yaml.safe_load(box.kubeconfig.read_text())
    return doc["clusters"][0]["cluster"], doc["users"][0]["user"]


def user_token(box: Sandbox) -> str:
    return user_entry(box)[1]["token"]


def ca_pem(box: Sandbox) -> bytes:
    return base64.b64decode(user_entry(box)[0]["certificate-authority-data"])


def write_kubeconfig(path: Path, box: Sandbox, *, server: str | None = None, token: str | None = None,
                     user: dict | None = None, contexts: dict[str, str | None] | None = None,
                     current: str = "sandbox") -> Path:
    """A kubeconfig for ``box`` (its cluster entry: URL and CA; ``server`` instead of its URL) with one
    user (``user``, else ``token``, else the sandbox user's token) and ``contexts`` (name -> namespace or None)."""
    cluster = {**user_entry(box)[0], **({"server": server} if server else {})}
    contexts = contexts if contexts is not None else {"sandbox": None}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "clusters": [{"name": "sandbox", "cluster": cluster}],
        "users": [{"name": "user", "user": user or {"token": token or user_token(box)}}],
        "contexts": [
            {"name": name, "context": {"cluster": "sandbox", "user": "user", **({"namespace": ns} if ns else {})}}
            for name, ns in contexts.items()
        ],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def kubeconfig(sandbox) -> Path:
    """The sandbox user's own kubeconfig (tests that change one write their own: ``write_kubeconfig``)."""
    return sandbox.kubeconfig


def admin(box: Sandbox) -> Kube:
    """A Kube with the operators' kubeconfig: straight to kube-apiserver, never counted, never faulted."""
    return Kube.connect(kubeconfig=box.info["admin_kubeconfig"], tuning=FAST)


def make_namespace(box: Sandbox, prefix: str = "t") -> str:
    name = unique(prefix)
    with admin(box) as kube:
        try:
            kube.create(NAMESPACE, {"metadata": {"name": name}})
        except ConflictError:  # a create that timed out on a loaded server and was retried had landed
            pass
    return name


def delete_namespace(box: Sandbox, name: str) -> None:
    """Delete it (the namespace controller empties it in the background)."""
    with admin(box) as kube:
        kube.delete(NAMESPACE, name)


@pytest.fixture
def fault(sandbox) -> Iterator[Callable[..., None]]:
    """``fault(name, value=None)`` turns a fault on for the rest of the test; each is set back after it."""
    changed: list[str] = []

    def turn_on(name: str, value: str | None = None) -> None:
        changed.append(name)
        sandbox.set_fault(name, value)

    yield turn_on
    for name in reversed(list(dict.fromkeys(changed))):
        if name in sandbox.faults:
            sandbox.set_fault(name, sandbox.faults[name] or None)
        else:
            sandbox.clear_fault(name)


@pytest.fixture(autouse=True)
def _counts_from_zero(request):
    """Every test that uses the sandbox counts its requests from zero."""
    if "sandbox" in request.fixturenames:
        request.getfixturevalue("sandbox").request_counts(reset=True)
    yield


@pytest.fixture
def kube(sandbox, kubeconfig) -> Iterator[Kube]:
    """A Kube (the user's kubeconfig) whose default namespace is a fresh one made for this test;
    counts start at zero."""
    name = make_namespace(sandbox)
    sandbox.request_counts(reset=True)
    try:
        with Kube.connect(kubeconfig=str(kubeconfig), namespace=name, tuning=FAST) as client:
            yield client
    finally:
        delete_namespace(sandbox, name)


# -- a backend behind a pod, reached through the API server's service proxy ------------------------------
@dataclass(frozen=True)
class Backend:
    """``tests/kube/proxied_backend.py`` serving port ``port`` of Service ``service`` in ``namespace``."""

    namespace: str
    service: str
    port: int
    record: Path

    def requests(self) -> list[dict]:
        """What reached the backend: {method, path, headers} per request, in order."""
        return [json.loads(line) for line in self.record.read_text().splitlines()]


HEAD_POD = {"metadata": {"name": "backend", "labels": {"ray.io/node-type": "head", "app": "backend"}},
            "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray",
                                     "ports": [{"containerPort": 8265}, {"containerPort": 8000}]}]}}


def _serve(kube: Kube, namespace: str, entrypoint: str) -> None:
    """Run ``entrypoint`` as a Ray job on the backend pod's head until port 8000 answers through
    the service proxy. A submission the dashboard refuses (while the head's job agent starts, or
    before the Service has its endpoint) is made again, and so is a job that ended."""
    submitted: list[str] = []

    def answering() -> bool:
        if kube.proxy("GET", "backend", 8000, "/", namespace=namespace, timeout_s=60)[0] == 200:
            return True
        if submitted:
            code, data = kube.proxy("GET", "backend", 8265, f"/api/jobs/{submitted[-1]}", namespace=namespace,
                                    timeout_s=60)
            if code == 200 and json.loads(data).get("status") in ("PENDING", "RUNNING"):
                return False
        code, data = kube.proxy("POST", "backend", 8265, "/api/jobs/", namespace=namespace,
                                json={"entrypoint": entrypoint}, timeout_s=60)
        if code == 200:
            submitted.append(json.loads(data)["submission_id"])
        return False

    eventually(answering, what="the backend answering through the service proxy")


@pytest.fixture(scope="module")
def backend(sandbox, tmp_path_factory) -> Iterator[Backend]:
    """A Ray head pod (the sandbox's local kubelet runs a real ``ray start --head`` for it) whose
    container port 8000 is served by a Ray job running ``proxied_backend.py``, behind Service
    ``backend``: the API server proxies to the pod's IP, its egress to the job's loopback port.
    One per module: an idle Ray head costs ~5 % of a CPU, so none outlives the tests that use it."""
    box = sandbox
    namespace = make_namespace(box, "backend")
    record = tmp_path_factory.mktemp("backend") / "requests.jsonl"
    record.touch()
    script = Path(__file__).with_name("proxied_backend.py")
    with admin(box) as kube:
        kube.create(SERVICE, {"metadata": {"name": "backend", "namespace": namespace},
                              "spec": {"selector": {"app": "backend"},
                                       "ports": [{"name": "dashboard", "port": 8265}, {"name": "web", "port": 8000}]}})
        kube.create(pod.KIND, {**HEAD_POD, "metadata": {**HEAD_POD["metadata"], "namespace": namespace}})
        kube.wait(pod.KIND, pod.readiness, name="backend", namespace=namespace, timeout_s=DEADLINE_S)
        _serve(kube, namespace, f"{sys.executable} {script} $NRL_K8S_SANDBOX_PORT_8000 {record}")
    try:
        yield Backend(namespace, "backend", 8000, record)
    finally:
        delete_namespace(box, namespace)
