"""Simulated Deployment and endpoints controllers: Deployment pods, and Services that reach them.

Deployment (apps/v1) → ``spec.replicas`` pods from its template (labels + ``pod-template-hash``,
a controller ownerReference to the Deployment; no ReplicaSet is simulated), Ready after a
delay; then the status the real controller writes: ``replicas``, ``readyReplicas``,
``availableReplicas``, ``updatedReplicas`` (zero counts omitted, as the real server does),
``observedGeneration`` and the conditions ``Available`` (``MinimumReplicasAvailable`` once at
least ``replicas - 25%`` pods are available) and ``Progressing`` (``NewReplicaSetAvailable`` once
the rollout is done). A template change rolls: new pods are created, the old ones stay until
the new ones are Ready, then they are deleted. Scaling adds or deletes pods; a pod deleted by
someone else is replaced.

No container runs: for every container port of a Deployment's pods an ``HttpStub`` listens on
127.0.0.1 (one server per port, shared by the Deployment's pods, 200 on any GET path). The
stubs stop when the Deployment is deleted and when the sandbox stops.

Endpoints: a Service with a selector that matches Ready pods of a Deployment gets the endpoints
annotation the service proxy reads (``proxy.ENDPOINTS_ANNOTATION``): each Service port's
``targetPort`` (number or container port name) → that pod's stub. It is written before the
Deployment is reported Available, and removed again when no such pod is left. Services whose
pods belong to no Deployment (the operators' own Services) are left alone.

Events: ``ScalingReplicaSet`` ("Scaled up replica set <deployment>-<hash> from 0 to N", source
``deployment-controller``) as a template's pods are added or removed; pods get the scheduler's
and kubelet's (``pods``).

Not simulated: ReplicaSets and revision history, ``maxSurge``/``maxUnavailable`` other than the
defaults, ``minReadySeconds``, ``paused``, ``progressDeadlineSeconds`` (never exceeded),
readiness probes, ``matchExpressions`` selectors (``matchLabels`` only).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter

import kubernetes

from nrl_k8s.sandbox.faults import Faults
from nrl_k8s.sandbox.frontend_stub import HttpStub
from nrl_k8s.sandbox.pod_logs import PodLogs

from . import pods
from .base import ENDPOINTS_ANNOTATION, MERGE_PATCH, Controller, Resource, Timing, controller_ref, json_body, now, suffix

log = logging.getLogger("nrl_k8s.sandbox.operators.deployments")

DEPLOYMENT = Resource("apps", "v1", "deployments")
SERVICE = Resource("", "v1", "services")
POD = Resource("", "v1", "pods")
POD_READY_S = 0.5
HASH_LABEL = "pod-template-hash"


def template_hash(template: dict) -> str:
    """A stable label value for one pod template (the real controller hashes it too)."""
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def container_ports(pod_spec: dict) -> list[dict]:
    return [port for c in pod_spec.get("containers") or [] for port in c.get("ports") or [] if port.get("containerPort")]


def is_ready(pod: dict) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def _owner_uid(pod: dict) -> str | None:
    return next((r.get("uid") for r in pod["metadata"].get("ownerReferences") or [] if r.get("kind") == "Deployment"), None)


def _selector(labels: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _condition(kind: str, status: str, reason: str, message: str, old: list[dict]) -> dict:
    """A condition; the one in ``old`` unchanged when it says the same (so a resync writes nothing)."""
    before = next((c for c in old if c.get("type") == kind), {})
    if (before.get("status"), before.get("reason"), before.get("message")) == (status, reason, message):
        return before
    stamp = now()
    since = before.get("lastTransitionTime", stamp) if before.get("status") == status else stamp
    return {"type": kind, "status": status, "lastUpdateTime": stamp, "lastTransitionTime": since, "reason": reason, "message": message}


def deployment_status(deployment: dict, owned: list[dict]) -> dict:
    """The status the real controller reports for ``deployment`` with these (live) pods."""
    desired = int((deployment.get("spec") or {}).get("replicas", 1))
    current = template_hash((deployment.get("spec") or {}).get("template") or {})
    updated = [p for p in owned if p["metadata"].get("labels", {}).get(HASH_LABEL) == current]
    available = sum(1 for p in owned if is_ready(p))
    done = len(updated) == desired == len(owned) and all(is_ready(p) for p in updated)
    old = (deployment.get("status") or {}).get("conditions") or []
    name = deployment["metadata"]["name"]
    if available >= desired - desired // 4:
        available_condition = _condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.", old)
    else:
        available_condition = _condition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.", old)
    replica_set = f"{name}-{current}"
    if done:
        progressing = _condition("Progressing", "True", "NewReplicaSetAvailable", f'ReplicaSet "{replica_set}" has successfully progressed.', old)
    else:
        progressing = _condition("Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{replica_set}" is progressing.', old)
    counts = {
        "replicas": len(owned),
        "updatedReplicas": len(updated),
        "readyReplicas": available,
        "availableReplicas": available,
        "unavailableReplicas": max(desired - available, 0),
    }
    return {
        "observedGeneration": deployment["metadata"].get("generation", 1),
        **{key: value or None for key, value in counts.items()},  # zero: omitted (None removes it in a merge patch)
        "conditions": [available_condition, progressing],
    }


class Deployments(Controller):
    name = "deployments"

    def __init__(self, api: kubernetes.client.ApiClient, timing: Timing, faults: Faults, pod_logs: PodLogs | None = None):
        super().__init__(api, timing, faults)
        self.pod_logs = pod_logs or PodLogs()
        self._stubs: dict[str, dict[int, HttpStub]] = {}  # Deployment uid -> containerPort -> stub
        self._filled: set[str] = set()  # uids of Services whose endpoints this controller wrote

    def watches(self):
        return [(DEPLOYMENT, self._on_deployment), (SERVICE, self._on_service), (POD, self._on_pod)]

    def stop(self) -> None:
        super().stop()
        for stubs in self._stubs.values():
            for stub in stubs.values():
                stub.stop()
        self._stubs.clear()

    # -- events ----------------------------------------------------------------------------
    def _on_deployment(self, kind: str, obj: dict) -> None:
        meta = obj["metadata"]
        if kind == "DELETED":
            self.call(lambda: self._stop_stubs(meta["uid"], keep=()))
        else:
            self.enqueue("sync_deployment", meta["namespace"], meta["name"])

    def _on_service(self, kind: str, obj: dict) -> None:
        meta = obj["metadata"]
        if kind == "DELETED":
            self.call(lambda: self._filled.discard(meta["uid"]))
        else:
            self.enqueue("sync_service", meta["namespace"], meta["name"])

    def _on_pod(self, kind: str, obj: dict) -> None:
        owner = next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") == "Deployment"), None)
        if owner is None:
            return
        self.enqueue("sync_services", obj["metadata"]["namespace"])
        if kind == "DELETED":  # a pod deleted by someone else is replaced
            self.enqueue("sync_deployment", obj["metadata"]["namespace"], owner["name"])

    # -- Deployments -----------------------------------------------------------------------
    def _owned(self, deployment: dict) -> list[dict]:
        meta = deployment["metadata"]
        labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return [
            pod for pod in self.list_pods(meta["namespace"], _selector(labels))
            if _owner_uid(pod) == meta["uid"] and not pod["metadata"].get("deletionTimestamp")
        ]  # fmt: skip

    def sync_deployment(self, namespace: str, name: str) -> None:
        deployment = self.get(DEPLOYMENT, namespace, name)
        if deployment is None:
            return
        spec = deployment.get("spec") or {}
        template = spec.get("template") or {}
        current = template_hash(template)
        desired = int(spec.get("replicas", 1))
        self._start_stubs(deployment)
        updated = [p for p in self._owned(deployment) if p["metadata"]["labels"].get(HASH_LABEL) == current]
        if len(updated) != desired:
            self._scaled(deployment, current, len(updated), desired)
        for _ in range(desired - len(updated)):
            self._create_pod(deployment, template, current)
        for pod in updated[desired:]:
            self.delete_pod(namespace, pod["metadata"]["name"])
        owned = self._owned(deployment)
        if any(not is_ready(p) for p in owned if p["metadata"]["labels"].get(HASH_LABEL) == current):
            self.later(self.timing.ready("deployment", POD_READY_S), "ready_deployment", namespace, name, current)
        elif len(owned) != desired:  # only old pods are left to go
            self.ready_deployment(namespace, name, current)
            return
        self.sync_services(namespace)
        self._write_status(deployment, owned)

    def ready_deployment(self, namespace: str, name: str, current: str) -> None:
        """This template's pods become Ready, the older ones go, the Services follow, then the status."""
        deployment = self.get(DEPLOYMENT, namespace, name)
        if deployment is None or template_hash((deployment.get("spec") or {}).get("template") or {}) != current:
            return
        owned = self._owned(deployment)
        for pod in owned:
            if pod["metadata"]["labels"].get(HASH_LABEL) == current and not is_ready(pod):
                pods.start(self, pod)
        outdated = [pod for pod in owned if pod["metadata"]["labels"].get(HASH_LABEL) != current]
        for pod in outdated:
            self.delete_pod(namespace, pod["metadata"]["name"])
        for template_id, count in Counter(pod["metadata"]["labels"].get(HASH_LABEL, "") for pod in outdated).items():
            self._scaled(deployment, template_id, count, 0)
        ports = {p["containerPort"] for p in container_ports((deployment["spec"].get("template") or {}).get("spec") or {})}
        self._stop_stubs(deployment["metadata"]["uid"], keep=ports)
        self.sync_services(namespace)
        self._write_status(deployment, self._owned(deployment))

    def _write_status(self, deployment: dict, owned: list[dict]) -> None:
        meta = deployment["metadata"]
        self.patch_status(DEPLOYMENT, meta["namespace"], meta["name"], deployment_status(deployment, owned))

    def _create_pod(self, deployment: dict, template: dict, current: str) -> None:
        meta = deployment["metadata"]
        template_meta = template.get("metadata") or {}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{meta['name']}-{current}-{suffix()}",
                "namespace": meta["namespace"],
                "labels": {**(template_meta.get("labels") or {}), HASH_LABEL: current},
                "annotations": template_meta.get("annotations") or {},
                "ownerReferences": [controller_ref(deployment)],
            },
            "spec": template.get("spec") or {},
        }
        pods.create(self, pod)

    def _scaled(self, deployment: dict, template_id: str, before: int, after: int) -> None:
        """The deployment controller's event for scaling the ReplicaSet of one template (not simulated
        as an object: its name is ``<deployment>-<pod-template-hash>``, as its pods' prefix)."""
        way = "up" if after > before else "down"
        self.record(deployment, "Normal", "ScalingReplicaSet",
                    f"Scaled {way} replica set {deployment['metadata']['name']}-{template_id} from {before} to {after}",
                    component="deployment-controller")  # fmt: skip

    # -- stubs -----------------------------------------------------------------------------
    def _start_stubs(self, deployment: dict) -> None:
        meta = deployment["metadata"]
        stubs = self._stubs.setdefault(meta["uid"], {})
        for port in container_ports(((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}):
            number = int(port["containerPort"])
            if number not in stubs:
                output = self.pod_logs.stub_output(meta["uid"])  # every stub of the Deployment: its pods' log
                stubs[number] = HttpStub(f"{meta['namespace']}/{meta['name']}:{number}", output)
                log.info("stub for Deployment %s/%s port %d at %s", meta["namespace"], meta["name"], number, stubs[number].url)

    def _stop_stubs(self, uid: str, keep) -> None:
        stubs = self._stubs.get(uid, {})
        for number in [n for n in stubs if n not in keep]:
            stubs.pop(number).stop()
        if not stubs:
            self._stubs.pop(uid, None)
        if not keep:
            self.pod_logs.forget(uid)

    # -- endpoints -------------------------------------------------------------------------
    def sync_services(self, namespace: str) -> None:
        listing = json_body(self.core.list_namespaced_service(namespace, _preload_content=False))
        for service in listing["items"]:
            self._sync_endpoints(service)

    def sync_service(self, namespace: str, name: str) -> None:
        service = self.read_core(self.core.read_namespaced_service, namespace, name)
        if service is not None:
            self._sync_endpoints(service)

    def _sync_endpoints(self, service: dict) -> None:
        meta, spec = service["metadata"], service.get("spec") or {}
        if not spec.get("selector"):
            return
        endpoints = self.endpoints(service, self.list_pods(meta["namespace"], _selector(spec["selector"])))
        current = (meta.get("annotations") or {}).get(ENDPOINTS_ANNOTATION)
        if endpoints:
            value = json.dumps(endpoints, sort_keys=True)
            self._filled.add(meta["uid"])
        elif meta["uid"] in self._filled:
            value = None
            self._filled.discard(meta["uid"])
        else:
            return
        if value != current:
            patch = {"metadata": {"annotations": {ENDPOINTS_ANNOTATION: value}}}
            self.core.patch_namespaced_service(meta["name"], meta["namespace"], patch, _content_type=MERGE_PATCH)

    def endpoints(self, service: dict, selected: list[dict]) -> dict[str, str]:
        """Service port (number and name) → the stub of the first Ready Deployment pod serving it."""
        found: dict[str, str] = {}
        for port in (service.get("spec") or {}).get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            for pod in selected:
                stubs = self._stubs.get(_owner_uid(pod) or "")
                if not stubs or not is_ready(pod):
                    continue
                number = next(
                    (int(p["containerPort"]) for p in container_ports(pod.get("spec") or {})
                     if target in (p["containerPort"], str(p["containerPort"]), p.get("name"))),
                    None,
                )  # fmt: skip
                if number in stubs:
                    found[str(port.get("port"))] = stubs[number].url
                    if port.get("name"):
                        found[port["name"]] = stubs[number].url
                    break
        return found
