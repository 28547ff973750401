"""Simulated Dynamo operator: DynamoGraphDeployment reconciler with a stub frontend per DGD.

A new DGD generation → ``state: pending``, pods of older generations deleted, one pod per
service replica (× ``multinode.nodeCount``) labelled like the real operator's, and — when a
service has ``componentType: frontend`` — a loopback ``FrontendStub`` behind the Service
``<dgd>-frontend`` (port 8000). Pods become Ready after a delay → ``state: successful``,
``Ready`` True, ``status.services`` counts, ``observedGeneration``. A deleted DGD (directly or
by garbage collection) stops its stub; its pods and Service go by garbage collection.
Both spec shapes are read: v1alpha1 ``services{NAME: ...}`` and v1beta1 ``components[]``.

Faults: ``dgd-failed`` (state failed, Ready False with the fault's message), ``dgd-stuck-pending``
(pods unschedulable + a ``FailedScheduling`` event), ``frontend-unavailable=SECONDS`` (the stub
answers 503 that long after it starts). No model is loaded and nothing is inferred.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass

import kubernetes

from nrl_k8s.sandbox.faults import Faults
from nrl_k8s.sandbox.frontend_stub import FrontendStub

from . import pods
from .base import ENDPOINTS_ANNOTATION, Controller, Resource, Timing, controller_ref, now, suffix

log = logging.getLogger("nrl_k8s.sandbox.operators.dynamo")

DGD = Resource("nvidia.com", "v1alpha1", "dynamographdeployments")
POD_READY_S = 0.5
FRONTEND_PORT = 8000
LABEL_DGD = "nvidia.com/dynamo-graph-deployment-name"
LABEL_COMPONENT = "nvidia.com/dynamo-component"
LABEL_TYPE = "nvidia.com/dynamo-component-type"
LABEL_GENERATION = "sandbox.nrl-k8s.io/generation"
MODEL_FLAGS = ("--served-model-name", "--model", "--model-path")
DEFAULT_IMAGE = "nvcr.io/nvidia/ai-dynamo/runtime"


@dataclass(frozen=True)
class Component:
    name: str
    type: str
    replicas: int
    pod_spec: dict


def _alpha_pod_spec(service: dict) -> dict:
    extra = dict(service.get("extraPodSpec") or {})
    main = dict(extra.pop("mainContainer", None) or {})
    main.setdefault("name", "main")
    main.setdefault("image", DEFAULT_IMAGE)
    gpus = ((service.get("resources") or {}).get("limits") or {}).get("gpu")
    if gpus:
        main.setdefault("resources", {"limits": {"nvidia.com/gpu": str(gpus)}})
    extra["containers"] = [main, *(extra.get("containers") or [])]
    return extra


def components(spec: dict) -> list[Component]:
    """The DGD's services, from either ``spec.services`` (v1alpha1) or ``spec.components`` (v1beta1)."""
    found = []
    for name, service in (spec.get("services") or {}).items():
        nodes = int(((service.get("multinode") or {}).get("nodeCount")) or 1)
        replicas = int(service.get("replicas", 1)) * nodes
        found.append(Component(name, service.get("componentType", "worker"), replicas, _alpha_pod_spec(service)))
    for item in spec.get("components") or []:
        nodes = int(((item.get("multinode") or {}).get("nodeCount")) or 1)
        pod_spec = dict((item.get("podTemplate") or {}).get("spec") or {})
        pod_spec.setdefault("containers", [{"name": "main", "image": DEFAULT_IMAGE}])
        kind = item.get("type") or item.get("componentType") or "worker"
        found.append(Component(item["name"], kind, int(item.get("replicas", 1)) * nodes, pod_spec))
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


class Dynamo(Controller):
    name = "dynamo"

    def __init__(self, api: kubernetes.client.ApiClient, timing: Timing, faults: Faults):
        super().__init__(api, timing, faults)
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
            self.patch_status(DGD, namespace, name, {
                "state": "failed",
                "conditions": [_ready_condition("False", "ReconcileFailed", message)],
                "observedGeneration": generation,
            })  # fmt: skip
        else:
            self._roll_out(dgd, parts, generation)
        self._reconciled[meta["uid"]] = generation

    def _roll_out(self, dgd: dict, parts: list[Component], generation: int) -> None:
        """This generation's pods and frontend, ``pending``, then readiness after a delay."""
        namespace, name = dgd["metadata"]["namespace"], dgd["metadata"]["name"]
        created = self._replace_pods(dgd, parts, generation)
        if _has_frontend(parts):
            self._ensure_frontend(dgd, parts)
        self.patch_status(DGD, namespace, name, {
            "state": "pending",
            "conditions": [_ready_condition("False", "PodsNotReady", "waiting for the graph's pods to become ready")],
            "services": {p.name: _counts(p.replicas, 0) for p in parts},
            "observedGeneration": generation,
        })  # fmt: skip
        if self.faults.get("dgd-stuck-pending") is not None:
            for pod in created:
                self.patch_pod_status(namespace, pod["metadata"]["name"], pods.unschedulable())
                self.create_core(self.core.create_namespaced_event, namespace, pods.failed_scheduling_event(pod))
            return
        self.later(self.timing.delay(POD_READY_S), "ready_dgd", namespace, name, str(generation))

    def _replace_pods(self, dgd: dict, parts: list[Component], generation: int) -> list[dict]:
        """Delete the pods of other generations, create this generation's; return the new pods."""
        meta = dgd["metadata"]
        namespace = meta["namespace"]
        current: dict[str, int] = {}
        for pod in self.list_pods(namespace, f"{LABEL_DGD}={meta['name']}"):
            labels = pod["metadata"].get("labels") or {}
            if labels.get(LABEL_GENERATION) == str(generation):
                current[labels.get(LABEL_COMPONENT, "")] = current.get(labels.get(LABEL_COMPONENT, ""), 0) + 1
            else:
                self.delete_pod(namespace, pod["metadata"]["name"])
        created = []
        for part in parts:
            for _ in range(part.replicas - current.get(part.name, 0)):
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{meta['name']}-{part.name.lower()}-{suffix()}",
                        "namespace": namespace,
                        "labels": {
                            LABEL_DGD: meta["name"],
                            LABEL_COMPONENT: part.name,
                            LABEL_TYPE: part.type,
                            LABEL_GENERATION: str(generation),
                        },
                        "ownerReferences": [controller_ref(dgd)],
                    },
                    "spec": part.pod_spec,
                }
                self.create_core(self.core.create_namespaced_pod, namespace, pod)
                self.patch_pod_status(namespace, pod["metadata"]["name"], pods.creating(pod))
                created.append(pod)
        return created

    def _ensure_frontend(self, dgd: dict, parts: list[Component]) -> None:
        meta = dgd["metadata"]
        stub = self._stubs.get(meta["uid"])
        if stub is None:
            unavailable = float(self.faults.get("frontend-unavailable") or 0)
            stub = self._stubs[meta["uid"]] = FrontendStub(model_id(meta["name"], parts), unavailable)
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
        self.ensure_service(service)

    def ready_dgd(self, namespace: str, name: str, generation: str) -> None:
        dgd = self.get(DGD, namespace, name)
        if dgd is None or str(dgd["metadata"].get("generation", 1)) != generation:
            return
        for pod in self.list_pods(namespace, f"{LABEL_DGD}={name},{LABEL_GENERATION}={generation}"):
            self.patch_pod_status(namespace, pod["metadata"]["name"], pods.running(pod))
        parts = components(dgd.get("spec") or {})
        self.patch_status(DGD, namespace, name, {
            "state": "successful",
            "conditions": [_ready_condition("True", "AllResourcesReady", "all graph resources are ready")],
            "services": {p.name: _counts(p.replicas, p.replicas) for p in parts},
            "observedGeneration": int(generation),
        })  # fmt: skip


def _has_frontend(parts: list[Component]) -> bool:
    return any(part.type == "frontend" for part in parts)


def _counts(replicas: int, ready: int) -> dict:
    return {"replicas": replicas, "readyReplicas": ready, "updatedReplicas": replicas, "availableReplicas": ready}
