"""Simulated Dynamo operator: DynamoGraphDeployment reconciler with a stub frontend per DGD.

Like the real operator it reconciles the storage version, ``nvidia.com/v1beta1`` (a DGD created
in v1alpha1 arrives converted by the API server, see ``sandbox.conversion``): one pod per
component replica × ``multinode.nodeCount`` from the component's ``podTemplate``, labelled like
the real operator's, and — for a ``type: frontend`` component — a loopback ``FrontendStub``
behind the Service ``<dgd>-frontend`` (port 8000).

Each component's pods carry a hash of its pod template, type and node count: a new generation
replaces only the pods of components whose template changed, and a replica change adds or
removes pods of that component alone. New pods become Ready after a delay. Status as the real
operator writes it: ``state`` (``pending`` → ``successful``), condition ``Ready`` with reason
``all_resources_are_ready`` or, while not ready, ``pods_not_ready`` / ``insufficient_capacity``
(``mixed_not_ready_reasons`` when components differ), ``components.NAME`` replica counts and
``observedGeneration``. A deleted DGD (directly or by garbage collection) stops its stub; its
pods and Service go by garbage collection.

Events as the operator's ``SyncResource`` records them (source ``dynamographdeployment``): a new
component's ``CreateDynamoComponentDeployment`` and the frontend's ``CreateService`` ("Creating a
new …"/"Created …", naming the namespace); pods get the scheduler's and kubelet's (``pods``).
Faults: ``dgd-failed`` (state failed, Ready False with the fault's message, a Warning
``CreateDynamoComponentDeployment``), ``dgd-stuck-pending`` (pods unschedulable + a
``FailedScheduling`` Warning), ``frontend-unavailable=SECONDS`` (the stub
answers 503 that long after it starts). No model is loaded and nothing is inferred.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shlex
from dataclasses import dataclass

import kubernetes

from nrl_k8s.sandbox.faults import Faults
from nrl_k8s.sandbox.frontend_stub import FrontendStub
from nrl_k8s.sandbox.pod_logs import PodLogs

from . import pods
from .base import ENDPOINTS_ANNOTATION, Controller, Resource, Timing, controller_ref, now, suffix

log = logging.getLogger("nrl_k8s.sandbox.operators.dynamo")

DGD = Resource("nvidia.com", "v1beta1", "dynamographdeployments")
COMPONENT = "dynamographdeployment"  # the operator's event recorder
POD_READY_S = 0.5
FRONTEND_PORT = 8000
LABEL_DGD = "nvidia.com/dynamo-graph-deployment-name"
LABEL_COMPONENT = "nvidia.com/dynamo-component"
LABEL_TYPE = "nvidia.com/dynamo-component-type"
LABEL_HASH = "sandbox.nrl-k8s.io/template-hash"
MODEL_FLAGS = ("--served-model-name", "--model", "--model-path")
DEFAULT_IMAGE = "nvcr.io/nvidia/ai-dynamo/runtime"
READY, PODS_NOT_READY, NO_CAPACITY, MIXED = (
    "all_resources_are_ready", "pods_not_ready", "insufficient_capacity", "mixed_not_ready_reasons")


@dataclass(frozen=True)
class Component:
    name: str
    type: str
    replicas: int
    nodes: int
    template: dict  # the pod template: metadata and spec (containers always set)

    @property
    def pod_spec(self) -> dict:
        return self.template["spec"]

    @property
    def pods(self) -> int:
        return self.replicas * self.nodes

    @property
    def hash(self) -> str:
        """What makes this component's pods: a change replaces them (a replica change does not)."""
        identity = json.dumps([self.template, self.type, self.nodes], sort_keys=True)
        return hashlib.sha256(identity.encode()).hexdigest()[:10]


def components(spec: dict) -> list[Component]:
    """The graph's components, from a v1beta1 spec (``spec.components``)."""
    found = []
    for item in spec.get("components") or []:
        template = dict(item.get("podTemplate") or {})
        pod_spec = dict(template.get("spec") or {})
        pod_spec.setdefault("containers", [{"name": "main", "image": DEFAULT_IMAGE}])
        nodes = int((item.get("multinode") or {}).get("nodeCount") or 1)
        found.append(Component(item["name"], item.get("type") or "worker", int(item.get("replicas", 1)), nodes,
                               {**template, "spec": pod_spec}))
    return found


def model_id(dgd_name: str, parts: list[Component]) -> str:
    """The served model: ``--served-model-name``, ``--model`` or ``--model-path`` in any
    container's command/args, else the DGD name."""
    tokens: list[str] = []
    for part in parts:
        for container in part.pod_spec.get("containers") or []:
            for word in [*(container.get("command") or []), *(container.get("args") or [])]:
                tokens += shlex.split(str(word))
    for flag in MODEL_FLAGS:
        for i, token in enumerate(tokens):
            if token == flag and i + 1 < len(tokens):
                return tokens[i + 1]
            if token.startswith(flag + "="):
                return token.split("=", 1)[1]
    return dgd_name


def _ready_condition(status: str, reason: str, message: str) -> dict:
    return {"type": "Ready", "status": status, "reason": reason, "message": message, "lastTransitionTime": now()}


def _pod_ready(pod: dict) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and all(c.get("ready") for c in status.get("containerStatuses") or [])


def _unscheduled(pod: dict) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or [])


def graph_status(name: str, parts: list[Component], found: list[dict], generation: int) -> dict:
    """The status the operator reports for ``parts`` given the graph's pods ``found``."""
    counts, waiting = {}, {}
    for part in parts:
        mine = [p for p in found if p["metadata"]["labels"].get(LABEL_COMPONENT) == part.name
                and p["metadata"]["labels"].get(LABEL_HASH) == part.hash]
        ready = sum(map(_pod_ready, mine)) // part.nodes
        counts[part.name] = {
            "componentKind": "Deployment" if part.nodes == 1 else "LeaderWorkerSet",
            "componentNames": [f"{name}-{part.name.lower()}"],
            "replicas": part.replicas, "updatedReplicas": min(len(mine) // part.nodes, part.replicas),
            "readyReplicas": ready, "availableReplicas": ready,
        }  # fmt: skip
        if ready < part.replicas:
            waiting[part.name] = (NO_CAPACITY if any(map(_unscheduled, mine)) else PODS_NOT_READY,
                                  f"{part.name}: {ready}/{part.replicas} replicas ready")
    return verdict(waiting, counts, generation)


def verdict(waiting: dict[str, tuple[str, str]], counts: dict, generation: int) -> dict:
    """The DGD status from the components still waiting (name -> (reason, message))."""
    if not waiting:
        condition = _ready_condition("True", READY, "All resources are ready")
    else:
        reasons = {reason for reason, _ in waiting.values()}
        condition = _ready_condition("False", reasons.pop() if len(reasons) == 1 else MIXED,
                                     "Resources not ready: " + "; ".join(message for _, message in waiting.values()))
    return {"state": "pending" if waiting else "successful", "conditions": [condition], "components": counts,
            "observedGeneration": generation}


class Dynamo(Controller):
    name = "dynamo"

    def __init__(self, api: kubernetes.client.ApiClient, timing: Timing, faults: Faults, pod_logs: PodLogs | None = None):
        super().__init__(api, timing, faults)
        self.pod_logs = pod_logs or PodLogs()
        self._stubs: dict[str, FrontendStub] = {}
        self._reconciled: dict[str, int] = {}

    def watches(self):
        return [(DGD, self._on_dgd)]

    def stop(self) -> None:
        super().stop()
        for stub in self._stubs.values():
            stub.stop()
        self._stubs.clear()

    def _on_dgd(self, kind: str, obj: dict) -> None:
        meta = obj["metadata"]
        if kind == "DELETED":
            self.call(lambda: self._deleted(meta["uid"]))
        else:
            self.enqueue("sync_dgd", meta["namespace"], meta["name"])

    def _deleted(self, uid: str) -> None:
        self._reconciled.pop(uid, None)
        self.pod_logs.forget(uid)
        stub = self._stubs.pop(uid, None)
        if stub is not None:
            stub.stop()

    def sync_dgd(self, namespace: str, name: str) -> None:
        dgd = self.get(DGD, namespace, name)
        if dgd is None:
            return
        meta = dgd["metadata"]
        generation = int(meta.get("generation", 1))
        status = dgd.get("status") or {}
        parts = components(dgd.get("spec") or {})
        done = status.get("observedGeneration") == generation and status.get("state") in ("successful", "failed")
        if done and status["state"] == "successful" and meta["uid"] not in self._stubs and _has_frontend(parts):
            self._ensure_frontend(dgd, parts)  # restored from --state: a stub for this process
        if done or self._reconciled.get(meta["uid"]) == generation:
            return
        failure = self.faults.get("dgd-failed")
        if failure is not None:
            message = failure or "sandbox fault dgd-failed: the operator failed to reconcile the graph"
            self.record(dgd, "Warning", "CreateDynamoComponentDeployment",
                        f"Failed to create DynamoComponentDeployment {namespace}: {message}", component=COMPONENT)  # fmt: skip
            self.patch_status(DGD, namespace, name, {
                "state": "failed",
                "conditions": [_ready_condition("False", "reconcile_failed", message)],
                "observedGeneration": generation,
            })  # fmt: skip
        else:
            self._roll_out(dgd, parts, generation)
        self._reconciled[meta["uid"]] = generation

    def _roll_out(self, dgd: dict, parts: list[Component], generation: int) -> None:
        """This generation's pods and frontend, the status they give, then readiness after a delay."""
        namespace, name = dgd["metadata"]["namespace"], dgd["metadata"]["name"]
        stuck = self.faults.get("dgd-stuck-pending") is not None
        self._reconcile_pods(dgd, parts, schedulable=not stuck)
        if _has_frontend(parts):
            self._ensure_frontend(dgd, parts)
        if not stuck:
            self.later(self.timing.ready("dgd", POD_READY_S), "ready_dgd", namespace, name, str(generation))
        self._report(dgd, parts, generation)

    def _reconcile_pods(self, dgd: dict, parts: list[Component], *, schedulable: bool) -> None:
        """Per component: keep its pods of the current template (at most replicas × nodes), delete
        the others, create what is missing; pods of removed components go. A component seen for the
        first time gets the events of its DynamoComponentDeployment's creation, as the operator's."""
        meta = dgd["metadata"]
        namespace = meta["namespace"]
        found: dict[str, list[dict]] = {}
        for pod in sorted(self.list_pods(namespace, f"{LABEL_DGD}={meta['name']}"), key=lambda p: p["metadata"]["name"]):
            found.setdefault(pod["metadata"]["labels"].get(LABEL_COMPONENT, ""), []).append(pod)
        for part in parts:
            mine = found.pop(part.name, [])
            if not mine:
                self._created(dgd, "DynamoComponentDeployment")
            keep = [p for p in mine if p["metadata"]["labels"].get(LABEL_HASH) == part.hash][: part.pods]
            for pod in mine:
                if pod not in keep:
                    self.delete_pod(namespace, pod["metadata"]["name"])
            for _ in range(part.pods - len(keep)):
                self._create_pod(dgd, part, schedulable)
        for gone in found.values():
            for pod in gone:
                self.delete_pod(namespace, pod["metadata"]["name"])

    def _created(self, dgd: dict, kind: str) -> None:
        """The two events the operator's ``SyncResource`` records for a child it creates (they name
        the namespace, not the child)."""
        namespace = dgd["metadata"]["namespace"]
        for message in (f"Creating a new {kind} {namespace}", f"Created {kind} {namespace}"):
            self.record(dgd, "Normal", f"Create{kind}", message, component=COMPONENT)

    def _create_pod(self, dgd: dict, part: Component, schedulable: bool) -> None:
        meta = dgd["metadata"]
        template = part.template.get("metadata") or {}
        labels = {LABEL_DGD: meta["name"], LABEL_COMPONENT: part.name, LABEL_TYPE: part.type, LABEL_HASH: part.hash}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{meta['name']}-{part.name.lower()}-{suffix()}",
                "namespace": meta["namespace"],
                "labels": {**(template.get("labels") or {}), **labels},
                **({"annotations": template["annotations"]} if template.get("annotations") else {}),
                "ownerReferences": [controller_ref(dgd)],
            },
            "spec": part.pod_spec,
        }
        pods.create(self, pod, schedulable=schedulable)

    def _report(self, dgd: dict, parts: list[Component], generation: int) -> None:
        namespace, name = dgd["metadata"]["namespace"], dgd["metadata"]["name"]
        status = graph_status(name, parts, self.list_pods(namespace, f"{LABEL_DGD}={name}"), generation)
        gone = set((dgd.get("status") or {}).get("components") or {}) - set(status["components"])
        status["components"].update(dict.fromkeys(gone))  # merge patch: null removes a component's counts
        self.patch_status(DGD, namespace, name, status)

    def _ensure_frontend(self, dgd: dict, parts: list[Component]) -> None:
        meta = dgd["metadata"]
        stub = self._stubs.get(meta["uid"])
        if stub is None:
            # Not serving before the graph is ready (``delay`` fault), nor while frontend-unavailable lasts.
            unavailable = max(float(self.faults.get("frontend-unavailable") or 0), self.timing.ready("dgd", 0.0))
            output = self.pod_logs.stub_output(meta["uid"], {LABEL_TYPE: "frontend"})  # the frontend pods' log
            stub = self._stubs[meta["uid"]] = FrontendStub(model_id(meta["name"], parts), unavailable, output)
            log.info("frontend stub for %s/%s at %s", meta["namespace"], meta["name"], stub.url)
        frontend = next(p.name for p in parts if p.type == "frontend")
        annotations = {ENDPOINTS_ANNOTATION: json.dumps({str(FRONTEND_PORT): stub.url, "http": stub.url})}
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": f"{meta['name']}-frontend",
                "namespace": meta["namespace"],
                "labels": {LABEL_DGD: meta["name"], LABEL_COMPONENT: frontend},
                "annotations": annotations,
                "ownerReferences": [controller_ref(dgd)],
            },
            "spec": {
                "type": "ClusterIP",
                "selector": {LABEL_DGD: meta["name"], LABEL_COMPONENT: frontend},
                "ports": [{"name": "http", "port": FRONTEND_PORT, "targetPort": FRONTEND_PORT, "protocol": "TCP"}],
            },
        }
        if self.ensure_service(service):
            self._created(dgd, "Service")

    def ready_dgd(self, namespace: str, name: str, generation: str) -> None:
        """The pods of ``generation`` (still current) are up: Running and Ready, and reported."""
        dgd = self.get(DGD, namespace, name)
        if dgd is None or str(dgd["metadata"].get("generation", 1)) != generation:
            return
        for pod in self.list_pods(namespace, f"{LABEL_DGD}={name}"):
            if not _pod_ready(pod):
                pods.start(self, pod)
        self._report(dgd, components(dgd.get("spec") or {}), int(generation))


def _has_frontend(parts: list[Component]) -> bool:
    return any(part.type == "frontend" for part in parts)
