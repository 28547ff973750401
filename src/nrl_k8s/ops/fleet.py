"""What a trainer binds to behind a DGD, for `status`: the frontend (reachable, health, models) and
the RL fleet its RL listener lists (workers: short instance id, system URL, routes, world size,
weight version).

Every request goes through the API server's proxies (``Kube.proxy``): the frontend Service's port
8000 (``/v1/models``, ``/health``), the frontend pod's ``DYN_RL_PORT`` (``/v1/rl/workers``) and
each worker pod's system port (``POST /engine/get_weight_version``). Each request waits at most
``Bounds.request_s``, all of them together (one ``Budget`` for the whole DYNAMO section) at most
``Bounds.section_s``. What cannot be asked or does not answer becomes one line of text in the
result (``detail``, ``error``), never an exception.

A worker's short instance id is the hex of its instance id (as Dynamo's file discovery names
instances), its first 8 digits, more only where two instances of the DGD would share them.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from nrl_k8s.errors import ApiError
from nrl_k8s.kinds import dgd, pod, service
from nrl_k8s.kube.errors import status_body

if TYPE_CHECKING:
    from nrl_k8s.kinds.base import Kind
    from nrl_k8s.kube.client import Kube

COMPONENT_LABEL = "nvidia.com/dynamo-component-type"
RL_PORT = 8001  # the frontend's RL listener when its DYN_RL_PORT is not set
WEIGHT_ROUTE = "get_weight_version"
RL_OFF = "RL discovery off (DYN_ENABLE_RL not set on the frontend)"
_SHORT = 8  # hex digits of a short instance id
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Bounds:
    """How long one proxied request, and all of a DYNAMO section's, may wait."""

    request_s: float = 3.0
    section_s: float = 10.0


BOUNDS = Bounds()


@dataclass
class Budget:
    """The time left for a DYNAMO section's requests (shared by its DGDs and their threads)."""

    bounds: Bounds
    ends: float = field(init=False)

    def __post_init__(self) -> None:
        self.ends = time.monotonic() + self.bounds.section_s

    def timeout(self) -> float | None:
        """The wait for the next request; None when the section's time has run out."""
        left = self.ends - time.monotonic()
        return None if left < 0.1 else min(self.bounds.request_s, left)


Answer = tuple[int, bytes] | str  # the upstream's (status, body), or one line saying why there is none


def _ask(kube: Kube, budget: Budget, method: str, target: str, port: int, path: str, ns: str, *,
         kind: Kind = service.KIND, body: object = None) -> Answer:
    timeout = budget.timeout()
    if timeout is None:
        return f"not asked: the {budget.bounds.section_s:g} s for the DYNAMO section ran out"
    sent = time.monotonic()
    try:
        return kube.proxy(method, target, port, path, ns, json=body, timeout_s=timeout, kind=kind)
    except ApiError as err:
        if err.status is None and time.monotonic() - sent >= timeout * 0.9:
            return f"no answer within {timeout:g} s"
        return err.message


def _unreached(code: int, data: bytes) -> str | None:
    """The API server's own message when it answered for an upstream it could not reach (its
    Status object: no endpoints, connection refused, a pod without an address); None for an
    answer of the upstream itself."""
    found = status_body(data)
    return f"HTTP {code}: {found.get('message') or found.get('reason') or 'no detail'}" if found else None


def _json(data: bytes) -> dict:
    try:
        doc = json.loads(data)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def frontend(kube: Kube, name: str, ns: str, budget: Budget) -> dict:
    """The frontend Service: reachable (``/v1/models`` answers 200 or 404), ``health`` (the
    ``status`` of ``/health``, else why there is none), the models it serves and the instance ids
    of the ``rl`` endpoints ``/health`` lists (what NeMo-RL's refit discovers)."""
    target = dgd.frontend_service(name)
    row: dict = {"address": service.cluster_address(target, ns, dgd.FRONTEND_PORT), "reachable": False,
                 "detail": "", "health": None, "models": [], "rl_instances": []}
    answer = _ask(kube, budget, "GET", target, dgd.FRONTEND_PORT, "/v1/models", ns)
    if isinstance(answer, str):
        row["detail"] = answer
        return row
    code, data = answer
    unreached = _unreached(code, data)
    row["reachable"] = unreached is None and code in (200, 404)
    row["detail"] = unreached or f"HTTP {code}"
    if not row["reachable"]:
        return row
    row["models"] = [m["id"] for m in _json(data).get("data") or [] if isinstance(m, dict) and m.get("id")]
    answer = _ask(kube, budget, "GET", target, dgd.FRONTEND_PORT, "/health", ns)
    if isinstance(answer, str):
        row["health"] = answer
        return row
    code, data = answer
    health = _json(data)
    row["health"] = _unreached(code, data) or health.get("status") or f"HTTP {code}"
    row["rl_instances"] = sorted({i["instance_id"] for i in health.get("instances") or []
                                  if isinstance(i, dict) and i.get("endpoint") == "rl" and "instance_id" in i})
    return row


def observe(kube: Kube, name: str, ns: str, pods: list[dict], budget: Budget) -> tuple[dict, dict]:
    """``frontend`` and ``rl_fleet`` of DGD ``name`` (whose pods are ``pods``), with short instance
    ids; the RL listener is not asked when the frontend is not reachable."""
    front = frontend(kube, name, ns, budget)
    if front["reachable"]:
        rl = rl_fleet(kube, name, ns, pods, budget)
    else:
        rl = {"state": "unknown", "detail": "not asked: the frontend is not reachable", "source": None, "workers": []}
    _shorten(front, rl)
    return front, rl


def rl_fleet(kube: Kube, name: str, ns: str, pods: list[dict], budget: Budget) -> dict:
    """The workers the frontend's RL listener lists, each with its weight version.

    ``state``: ``on`` (the listener answered), ``off`` (no listener and ``DYN_ENABLE_RL`` not set on
    the frontend pod) or ``unknown`` (``detail`` says why).
    """
    row: dict = {"state": "unknown", "detail": "", "source": None, "workers": []}
    front = _frontend_pod(pods)
    if front is None:
        row["detail"] = "no running frontend pod"
        return row
    env = _env(front)
    enabled = (env.get("DYN_ENABLE_RL") or "").lower() in _TRUE
    try:
        port = int(env.get("DYN_RL_PORT") or RL_PORT)
    except ValueError:
        row["detail"] = f"the frontend's DYN_RL_PORT is not a port: {env['DYN_RL_PORT']!r}"
        return row
    row["source"] = f"{front['metadata']['name']}:{port}"
    answer = _ask(kube, budget, "GET", front["metadata"]["name"], port, "/v1/rl/workers", ns, kind=pod.KIND)
    if isinstance(answer, str):
        row["detail"] = f"RL listener {row['source']}: {answer}"
        return row
    code, data = answer
    unreached = _unreached(code, data)
    if (unreached or code == 404) and not enabled:
        row.update(state="off", detail=RL_OFF)
        return row
    if unreached or code != 200:
        row["detail"] = f"RL listener {row['source']} (DYN_ENABLE_RL is set): {unreached or f'HTTP {code}'}"
        return row
    listed = [w for w in _json(data).get("workers") or [] if isinstance(w, dict)]
    row["state"] = "on"
    row["detail"] = f"{len(listed)} worker(s) listed by {row['source']}"
    workers = [_worker(w, name, pods) for w in listed]
    asked = [w for w in workers if w["pod"] and not (w["error"] or w["detail"])]
    if asked:
        with ThreadPoolExecutor(max_workers=min(8, len(asked))) as pool:
            list(pool.map(lambda w: _weight_version(kube, w, ns, budget), asked))
    row["workers"] = workers
    return row


def _worker(listed: dict, dgd_name: str, pods: list[dict]) -> dict:
    url = listed.get("system_url") or None
    routes = [str(r) for r in listed.get("routes") or []]
    row = {"instance": None, "instance_id": listed.get("instance_id"), "system_url": url, "pod": None,
           "model": listed.get("model"), "routes": routes, "world_size": listed.get("world_size"),
           "weight_version": None, "error": None, "detail": None}
    if listed.get("error") or not url:
        row["error"] = f"not reachable by the frontend: {listed.get('error') or 'no system_url'}"
        return row
    found = _pod_at(pods, url)
    if found is None:
        row["error"] = f"system_url {url} is no pod of DGD {dgd_name}"
        return row
    row["pod"] = found["metadata"]["name"]
    if routes and WEIGHT_ROUTE not in routes:
        row["detail"] = f"no {WEIGHT_ROUTE} route"
    return row


def _weight_version(kube: Kube, row: dict, ns: str, budget: Budget) -> None:
    """``POST <system_url>/engine/get_weight_version`` through the worker pod's proxy."""
    parts = urlsplit(row["system_url"])
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = f"https:{row['pod']}" if parts.scheme == "https" else row["pod"]
    path = parts.path.rstrip("/") + f"/engine/{WEIGHT_ROUTE}"
    answer = _ask(kube, budget, "POST", target, port, path, ns, kind=pod.KIND, body={})
    if isinstance(answer, str):
        row["error"] = f"{row['system_url']} not reachable: {answer}"
        return
    code, data = answer
    if unreached := _unreached(code, data):
        row["error"] = f"{row['system_url']} not reachable: {unreached}"
        return
    doc = _json(data)
    if code == 200 and doc.get("status") == "ok" and "version" in doc:  # vLLM's worker: {status, version, ...}
        row["weight_version"] = doc["version"] if doc.get("version_declared", True) else "none declared"
        return
    said = doc.get("message") or doc.get("error") or doc.get("status") or data[:120].decode(errors="replace")
    row["detail"] = f"{WEIGHT_ROUTE}: HTTP {code}" + (f": {said}" if said else "")


def _frontend_pod(pods: list[dict]) -> dict | None:
    """A frontend pod with an address, a Ready one first."""
    fronts = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(COMPONENT_LABEL) == "frontend"
              and (p.get("status") or {}).get("podIP") and not p["metadata"].get("deletionTimestamp")]
    return max(fronts, key=pod.containers_ready, default=None)


def _env(p: dict) -> dict[str, str]:
    """The literal env values of the pod's containers (the first container naming a variable wins)."""
    env: dict[str, str] = {}
    for container in (p.get("spec") or {}).get("containers") or []:
        for var in container.get("env") or []:
            if "value" in var:
                env.setdefault(var["name"], str(var["value"]))
    return env


def _pod_at(pods: list[dict], url: str) -> dict | None:
    """The pod whose address (or name) is the host of ``url``."""
    host = urlsplit(url).hostname
    for p in pods:
        status = p.get("status") or {}
        addresses = {status.get("podIP"), *((a or {}).get("ip") for a in status.get("podIPs") or [])}
        if host and (host in addresses or host == p["metadata"]["name"]):
            return p
    return None


def _shorten(frontend_row: dict, fleet: dict) -> None:
    """Short instance ids for the fleet's workers and the frontend's ``rl_instances``, in place:
    ``_SHORT`` hex digits, more where two of them would read the same."""
    workers, listed = fleet["workers"], frontend_row["rl_instances"]
    ids = {i for i in [*listed, *(w["instance_id"] for w in workers)] if isinstance(i, int)}
    width = _SHORT
    while len({format(i, "x")[:width] for i in ids}) < len(ids):
        width += 1
    for worker in workers:
        iid = worker["instance_id"]
        worker["instance"] = format(iid, "x")[:width] if isinstance(iid, int) else str(iid)
    frontend_row["rl_instances"] = [format(i, "x")[:width] if isinstance(i, int) else str(i) for i in listed]
