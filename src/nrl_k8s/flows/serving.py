"""Three-gate DGD readiness: operator state, pods Ready and counted, frontend answering HTTP.

The Dynamo operator reports ``successful`` before pods have finished pulling images and before
the frontend process has bound port 8000, so `serving` only returns once all three agree.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from nrl_k8s.errors import ApiError, ForbiddenError, ResourceFailed, WaitTimeout
from nrl_k8s.events import Emit, Waiting
from nrl_k8s.kinds import dgd, pod
from nrl_k8s.kinds.readiness import Pending, Readiness, Ready
from nrl_k8s.kinds.service import cluster_url

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

_PROBE_INTERVAL_S = 0.5
Answer = tuple[int | None, bytes]  # (HTTP status or None when nothing answered, body)


def healthy(status: int | None, body: bytes) -> bool:
    """What a healthCheckUrl must answer: a 2xx."""
    return status is not None and 200 <= status < 300


def serves_a_model(status: int | None, body: bytes) -> bool:
    """The frontend's ``/v1/models`` once it serves: 200 listing a model (Dynamo's frontend lists
    none until a worker registered with it, for a moment after every pod is Ready), or 404 (an
    older frontend without the route: its listener is up). 502/503/refused mean not yet."""
    if status == 404:
        return True
    try:
        return status == 200 and bool(json.loads(body).get("data"))
    except (ValueError, AttributeError):
        return False


def pods_readiness(desired: int):
    def check(pods: list[dict]) -> Readiness:
        ready = [p for p in pods if pod.containers_ready(p)]
        if pods and len(ready) >= desired:
            return Ready()
        reasons = sorted({f"{_component(p)}: {r}" for p in pods if (r := pod.waiting_reason(p))})
        detail = f"  ({'; '.join(reasons)})" if reasons else ""
        return Pending(f"{len(ready)}/{desired} pods ready{detail}")

    return check


def _component(p: dict) -> str:
    labels = (p.get("metadata") or {}).get("labels") or {}
    return labels.get("nvidia.com/dynamo-component") or p["metadata"]["name"]


def _models_url(name: str, namespace: str) -> str:
    """The /v1/models URL of DGD ``name``'s frontend (cluster DNS: ``probe_url`` proxies it from a laptop)."""
    return cluster_url(dgd.frontend_service(name), namespace, dgd.FRONTEND_PORT) + "/v1/models"


def probe_url(kube: Kube, url: str, namespace: str) -> Answer:
    """(HTTP status, body) of GET ``url``; the status None when nothing answers in time, directly or
    through the API server's proxy, which has answered before (an API server never reached raises
    UnreachableError).

    A Service URL (``http://SVC[.NS[.svc[.cluster.local]]][:PORT]/path``) goes to cluster DNS
    from inside a pod and through the API server's service proxy from a laptop; other hosts
    are asked directly.
    """
    parts = urlsplit(url)
    labels = (parts.hostname or "").split(".")
    service = len(labels) <= 2 or labels[2:] in (["svc"], ["svc", "cluster", "local"])
    if kube.in_cluster or not service or labels[0] == "" or labels[0].isdigit():
        from nrl_k8s.kube._httpx import httpx  # only here: most probes go through the API server (``kube.proxy``)

        try:
            response = httpx.get(url, timeout=5)
            return response.status_code, response.content
        except httpx.HTTPError:
            return None, b""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path.lstrip("/") + (f"?{parts.query}" if parts.query else "")
    try:
        return kube.proxy("GET", labels[0], port, path, labels[1] if len(labels) > 1 else namespace)
    except ApiError as err:
        if err.status is not None:
            raise
        return None, b""  # no answer within the probe's timeout (a slow upstream, a loaded node): not yet


def wait_http(kube: Kube, label: str, url: str, namespace: str, deadline: float, emit: Emit, *,
              up: Callable[[int | None, bytes], bool] = healthy, failed=lambda: None, what: str | None = None) -> bool:
    """Wait until GET ``url``'s answer is ``up``. False (after a note) when the API
    server forbids services/proxy, so the caller can rely on its other gates. ``failed()``
    returning a reason (what should answer has died) ends the wait with ResourceFailed."""
    last = None
    while True:
        dead = failed()
        if dead:
            raise ResourceFailed(f"{label}: {url} will not answer: {dead}")
        try:
            status, body = probe_url(kube, url, namespace)
        except ForbiddenError as err:
            emit(Waiting(label, f"cannot probe {what or url} ({err.message}); relying on pod readiness"))
            return False
        if up(status, body):
            return True
        reason = f"{url} answered {status or 'nothing'}" + (" (no model yet)" if status == 200 else "")
        if reason != last:
            emit(Waiting(label, reason))
            last = reason
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"{label}: {url} never answered ({reason})")
        time.sleep(_PROBE_INTERVAL_S)


def wait_frontend(kube: Kube, label: str, name: str, namespace: str, deadline: float, emit: Emit) -> bool:
    """Gate 3. Returns False (after a warning) when the API server forbids services/proxy."""
    return wait_http(kube, label, _models_url(name, namespace), namespace, deadline, emit, up=serves_a_model,
                     what="the frontend")


def wait_serving(kube: Kube, label: str, manifest: dict, timeout_s: float, emit: Emit) -> None:
    """Block until the DGD passes all three gates; raise ResourceFailed/WaitTimeout with the reason."""
    name = manifest["metadata"]["name"]
    namespace = manifest["metadata"]["namespace"]
    deadline = time.monotonic() + timeout_s

    def remaining() -> float:
        return max(deadline - time.monotonic(), 0.0)

    def progress(reason: str) -> None:
        emit(Waiting(label, reason))

    pods = dgd.pod_selector(name)
    try:
        kube.wait(dgd.kind_of(manifest), present(dgd.readiness), name=name, namespace=namespace, timeout_s=remaining(),
                  on_progress=progress, what=f"{label} ({name})", pods=pods)
        kube.wait(pod.KIND, pods_readiness(dgd.desired_pods(manifest)), label_selector=pods,
                  namespace=namespace, timeout_s=remaining(), on_progress=progress, what=f"{label} pods", pods=pods)
    except (WaitTimeout, ResourceFailed) as err:
        raise type(err)(err.message, hint=_hint(name, namespace)) from None
    wait_frontend(kube, label, name, namespace, deadline, emit)


def present(readiness):
    """Adapt an object readiness function to the wait primitive (None = not found)."""

    def check(obj: dict | None) -> Readiness:
        return Pending("not found") if obj is None else readiness(obj)

    return check


def _hint(name: str, namespace: str) -> str:
    return (
        f"kubectl -n {namespace} describe dgd {name}; "
        f"kubectl -n {namespace} get pods -l {dgd.pod_selector(name)}"
    )
