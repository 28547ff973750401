"""The Dynamo operator on the real control plane: DynamoGraphDeployments become Deployments.

It reconciles the storage version, ``nvidia.com/v1beta1`` (a DGD written in v1alpha1 reaches it
converted by the webhook). Per component, an ``apps/v1`` Deployment ``<dgd>-<component>`` (lower
case) with ``replicas × multinode.nodeCount`` pods from the component's ``podTemplate``, labelled
as the real operator labels its pods, the graph's ``env`` before the ``main`` container's own and
its ``labels``/``annotations`` under the template's, and what the real operator gives every
``main`` container where the manifest leaves it unset (``operator_defaults``): its env
(``DYN_NAMESPACE=<namespace>-<dgd>``, the component, the parent DGD, the pod's name, namespace and
uid, and for the other components the system server on port 9090 with its health gated on the
``generate`` endpoint), the ports (``http`` 8000 for a frontend, ``system`` 9090 otherwise) and a
readiness probe on ``/health`` of that port; a ``main`` container without a command runs the
component's Dynamo process (``python3 -m dynamo.frontend``, or ``dynamo.<backendFramework>``, vLLM
by default), as the image would. The frontend is behind the ClusterIP Service
``<dgd>-frontend`` (port 8000, ``http``). Every child is controller-owned by the DGD: the real
kube-controller-manager makes the ReplicaSets and pods and garbage-collects them, the scheduler
binds the pods, kwok (or the local kubelet) runs them.

Status through the status subresource, recomputed whenever the DGD or one of its Deployments
changes: ``state`` ``initializing`` → ``pending`` → ``successful``, the ``Ready`` condition
(``all_resources_are_ready``; ``pods_not_ready``, ``insufficient_capacity``, ``updating`` or
``mixed_not_ready_reasons`` while not), ``components.NAME`` counts from the Deployment's status
(pods ÷ nodeCount) and ``observedGeneration``, the generation whose Deployments are applied. A
new generation re-applies only the Deployments whose content changed (server-side apply; a hash
of what was applied is kept on each). Events as the operator's ``SyncResource`` records them.

Faults, read once per generation (a generation rolled out before the controller started keeps
what was decided then): ``dgd-failed`` (state failed, a Warning event, no Deployments) and
``dgd-stuck-pending`` (the pods get a nodeSelector no node has: the real scheduler leaves them
Pending with FailedScheduling). A child the API refuses (422) fails the DGD as ``dgd-failed`` does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import kubernetes
from kubernetes.client.exceptions import ApiException

from ..faults import Faults
from .controller import Controller, Resource, controller_ref, json_body, now
from .conversion import MAIN, _merge_env

DGD = Resource("nvidia.com", "v1beta1", "dynamographdeployments")
COMPONENT = "dynamographdeployment"  # the operator's event recorder
FRONTEND_PORT = 8000
SYSTEM_PORT = 9090
RL_PORT = 8001  # the frontend's RL listener unless DYN_RL_PORT says otherwise
LABEL_DGD = "nvidia.com/dynamo-graph-deployment-name"
LABEL_COMPONENT = "nvidia.com/dynamo-component"
LABEL_TYPE = "nvidia.com/dynamo-component-type"
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


def operator_defaults(dgd: dict, part: Component) -> tuple[list[dict], list[dict], dict]:
    """(env, ports, readiness probe) the real operator gives ``part``'s ``main`` container."""
    meta = dgd["metadata"]
    field = lambda name, path: {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}  # noqa: E731
    env = [{"name": "DYN_NAMESPACE", "value": f"{meta['namespace']}-{meta['name']}"},
           {"name": "DYN_COMPONENT", "value": part.type},
           {"name": "DYN_PARENT_DGD_K8S_NAME", "value": meta["name"]},
           {"name": "DYN_PARENT_DGD_K8S_NAMESPACE", "value": meta["namespace"]},
           field("POD_NAME", "metadata.name"), field("POD_NAMESPACE", "metadata.namespace"),
           field("POD_UID", "metadata.uid")]
    if part.type == "frontend":
        port = {"name": "http", "containerPort": FRONTEND_PORT, "protocol": "TCP"}
    else:
        port = {"name": "system", "containerPort": SYSTEM_PORT, "protocol": "TCP"}
        env += [{"name": "DYN_SYSTEM_ENABLED", "value": "true"},
                {"name": "DYN_SYSTEM_PORT", "value": str(SYSTEM_PORT)},
                {"name": "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS", "value": '["generate"]'}]
    probe = {"httpGet": {"path": "/health", "port": port["name"]}, "periodSeconds": 10, "timeoutSeconds": 3,
             "failureThreshold": 3}
    return env, [port], probe


def _with_defaults(container: dict, dgd: dict, part: Component) -> dict:
    """``container`` (the ``main`` one) with the operator's defaults under what it sets; the graph's
    ``env`` between the two."""
    env, ports, probe = operator_defaults(dgd, part)
    named = {p.get("name") for p in container.get("ports") or []}
    numbers = {p.get("containerPort") for p in container.get("ports") or []}
    extra = [p for p in ports if p["name"] not in named and p["containerPort"] not in numbers]
    graph_env = (dgd.get("spec") or {}).get("env") or []
    if not container.get("command"):  # the image's entrypoint: the component's Dynamo process
        module = "frontend" if part.type == "frontend" else (dgd.get("spec") or {}).get("backendFramework") or "vllm"
        container = {**container, "command": ["python3", "-m", f"dynamo.{module}"]}
    return {**container, "env": _merge_env(_merge_env(env, graph_env), container.get("env") or []),
            "ports": [*(container.get("ports") or []), *extra],
            "readinessProbe": container.get("readinessProbe") or probe}


def _ready_condition(status: str, reason: str, message: str) -> dict:
    return {"type": "Ready", "status": status, "reason": reason, "message": message, "lastTransitionTime": now()}


def _unscheduled(pod: dict) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or [])


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


DEPLOYMENT = Resource("apps", "v1", "deployments")
MANAGER = "dynamo-operator"  # the field manager of what it applies
APPLY = "application/apply-patch+yaml"
SPEC_HASH = "sandbox.nrl-k8s.io/applied-hash"
UNSCHEDULABLE = {"sandbox.nrl-k8s.io/unschedulable": "true"}
UPDATING, INITIALIZING, RECONCILE_FAILED = "updating", "initializing", "reconcile_failed"
DEFAULT_FAILURE = "sandbox fault dgd-failed: the operator failed to reconcile the graph"


@dataclass(frozen=True)
class Rollout:
    """How one generation of a DGD is rolled out, fixed when the controller first sees it."""

    generation: int
    failure: str | None  # dgd-failed: the message
    stuck: bool  # dgd-stuck-pending


def deployment(dgd: dict, part: Component, *, stuck: bool = False) -> dict:
    """The Deployment that runs ``part`` of ``dgd`` (its annotation ``SPEC_HASH`` hashes the rest)."""
    meta, spec = dgd["metadata"], dgd.get("spec") or {}
    own = {LABEL_DGD: meta["name"], LABEL_COMPONENT: part.name, LABEL_TYPE: part.type}
    template_meta = part.template.get("metadata") or {}
    labels = {**(spec.get("labels") or {}), **(template_meta.get("labels") or {}), **own}
    annotations = {**(spec.get("annotations") or {}), **(template_meta.get("annotations") or {})}
    pod_spec = dict(part.pod_spec)
    pod_spec["containers"] = [_with_defaults(c, dgd, part) if c.get("name") == MAIN else c
                              for c in pod_spec["containers"]]
    if stuck:
        pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **UNSCHEDULABLE}
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{meta['name']}-{part.name.lower()}", "namespace": meta["namespace"], "labels": own,
                     "ownerReferences": [controller_ref(dgd)]},
        "spec": {
            "replicas": part.pods,
            "selector": {"matchLabels": {LABEL_DGD: meta["name"], LABEL_COMPONENT: part.name}},
            "template": {"metadata": {"labels": labels, **({"annotations": annotations} if annotations else {})},
                         "spec": pod_spec},
        },
    }  # fmt: skip
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    body["metadata"]["annotations"] = {SPEC_HASH: digest}
    return body


def rl_port(dgd: dict, part: Component) -> int | None:
    """The frontend's RL listener (``DYN_RL_PORT``, 8001) when its env sets ``DYN_ENABLE_RL``."""
    main = next((c for c in part.pod_spec["containers"] if c.get("name") == MAIN), {})
    env = {e.get("name"): e.get("value") for e in _merge_env((dgd.get("spec") or {}).get("env") or [],
                                                            main.get("env") or [])}
    if str(env.get("DYN_ENABLE_RL") or "").strip().lower() not in ("1", "true", "yes", "on"):
        return None
    return int(env.get("DYN_RL_PORT") or RL_PORT)


def frontend_service(dgd: dict, part: Component) -> dict:
    """The ClusterIP Service in front of the frontend component ``part``: its HTTP port, and its
    RL listener when it has one (``rl``, so a trainer reaches ``GET /v1/rl/workers`` by the
    Service's name as it reaches the OpenAI API)."""
    meta = dgd["metadata"]
    selector = {LABEL_DGD: meta["name"], LABEL_COMPONENT: part.name}
    ports = [{"name": "http", "port": FRONTEND_PORT, "targetPort": FRONTEND_PORT, "protocol": "TCP"}]
    if (rl := rl_port(dgd, part)) is not None:
        ports.append({"name": "rl", "port": rl, "targetPort": rl, "protocol": "TCP"})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{meta['name']}-frontend", "namespace": meta["namespace"], "labels": selector,
                     "ownerReferences": [controller_ref(dgd)]},
        "spec": {"type": "ClusterIP", "selector": selector,
                 "ports": ports},
    }


def _ports(service: dict) -> list[int]:
    return [p["port"] for p in service["spec"].get("ports") or []]


def _hash(obj: dict | None) -> str | None:
    return (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(SPEC_HASH)


def _rolled_out(applied: dict | None, want: dict) -> bool:
    """Whether the Deployment ``applied`` runs exactly ``want``'s pods, all of them available."""
    if applied is None or _hash(applied) != _hash(want):
        return False
    status, pods = applied.get("status") or {}, want["spec"]["replicas"]
    return (status.get("observedGeneration") == applied["metadata"].get("generation")
            and status.get("updatedReplicas", 0) == pods and status.get("replicas", 0) == pods
            and status.get("availableReplicas", 0) >= pods)


def rollout_status(parts: list[Component], wanted: dict[str, dict], applied: dict[str, dict], pods: list[dict],
                   generation: int) -> dict:
    """The DGD status for ``parts``: ``wanted`` and ``applied`` are their Deployments by component
    name (what this generation asks for, what the API server has); ``pods`` the graph's pods."""
    counts, waiting = {}, {}
    for part in parts:
        want, have = wanted[part.name], applied.get(part.name)
        status = (have or {}).get("status") or {}
        current = _hash(have) == _hash(want)
        counts[part.name] = {
            "componentKind": "Deployment", "componentNames": [want["metadata"]["name"]], "replicas": part.replicas,
            "updatedReplicas": status.get("updatedReplicas", 0) // part.nodes if current else 0,
            "readyReplicas": status.get("readyReplicas", 0) // part.nodes,
            "availableReplicas": status.get("availableReplicas", 0) // part.nodes,
        }  # fmt: skip
        if _rolled_out(have, want):
            continue
        mine = [p for p in pods if (p["metadata"].get("labels") or {}).get(LABEL_COMPONENT) == part.name]
        if any(map(_unscheduled, mine)):
            reason = NO_CAPACITY
        elif status.get("replicas", 0) > status.get("updatedReplicas", 0):
            reason = UPDATING  # pods of an earlier template still run
        else:
            reason = PODS_NOT_READY
        ready = counts[part.name]["readyReplicas"]
        waiting[part.name] = (reason, f"{part.name}: {ready}/{part.replicas} replicas ready")
    return verdict(waiting, counts, generation)


def _same(field: str, old: object, new: object) -> bool:
    """Whether status ``field`` says the same in ``old`` and ``new`` (conditions: but for times)."""
    if field != "conditions":
        return old == new
    return _timeless(old) == _timeless(new)


def _timeless(conditions: object) -> list:
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions or []]


def _api_message(err: ApiException) -> str:
    try:
        return json.loads(err.body)["message"]
    except (TypeError, ValueError, KeyError):
        return str(err.reason)


class Dynamo(Controller):
    name = "dynamo"

    def __init__(self, api_client: kubernetes.client.ApiClient, faults: Faults):
        super().__init__(api_client, faults)
        self.apps = kubernetes.client.AppsV1Api(api_client)
        self._rollouts: dict[str, Rollout] = {}  # DGD uid -> this generation's decisions (worker thread only)

    def watches(self):
        return [(DGD, self._on_dgd), (DEPLOYMENT, self._on_deployment)]

    def _on_dgd(self, kind: str, obj: dict) -> None:
        meta = obj["metadata"]
        if kind == "DELETED":
            self.call(lambda: self._rollouts.pop(meta["uid"], None))
        else:
            self.enqueue("sync_dgd", meta["namespace"], meta["name"])

    def _on_deployment(self, kind: str, obj: dict) -> None:
        meta = obj["metadata"]
        graph = (meta.get("labels") or {}).get(LABEL_DGD)
        if graph:
            self.enqueue("sync_dgd", meta["namespace"], graph)

    # -- one reconcile -----------------------------------------------------------------------
    def sync_dgd(self, namespace: str, name: str) -> None:
        dgd = self.get(DGD, namespace, name)
        if dgd is None or dgd["metadata"].get("deletionTimestamp"):
            return
        generation = int(dgd["metadata"].get("generation", 1))
        listing = self.apps.list_namespaced_deployment(namespace, label_selector=f"{LABEL_DGD}={name}",
                                                       _preload_content=False)
        found = {d["metadata"]["name"]: d for d in json_body(listing)["items"] if self._owns(dgd, d)}
        rollout = self._rollout(dgd, generation, found)
        if rollout.failure is not None:
            return self._fail(dgd, rollout.failure)
        if not (dgd.get("status") or {}).get("state"):
            self._write_status(dgd, {"state": INITIALIZING})
        parts = components(dgd.get("spec") or {})
        wanted = {part.name: deployment(dgd, part, stuck=rollout.stuck) for part in parts}
        try:
            applied = self._apply(dgd, parts, wanted, found)
        except ApiException as err:
            if err.status != 422:
                raise
            return self._fail(dgd, _api_message(err))
        settled = all(_rolled_out(applied.get(n), w) for n, w in wanted.items())
        pods = [] if settled else self.list_pods(namespace, f"{LABEL_DGD}={name}")
        self._write_status(dgd, rollout_status(parts, wanted, applied, pods, generation))

    def _rollout(self, dgd: dict, generation: int, found: dict[str, dict]) -> Rollout:
        """This generation's fault decisions: the active faults when the generation is new; when
        an earlier run of the controller rolled it out already, what that run decided (its
        failure, or the unschedulable nodeSelector on the Deployments it applied)."""
        uid, status = dgd["metadata"]["uid"], dgd.get("status") or {}
        known = self._rollouts.get(uid)
        if known is not None and known.generation == generation:
            return known
        if known is None and status.get("observedGeneration") == generation:
            ready = next(iter(status.get("conditions") or []), {})
            failure = (ready.get("message") or DEFAULT_FAILURE) if status.get("state") == "failed" else None
            stuck = any(UNSCHEDULABLE.items() <= (d["spec"]["template"]["spec"].get("nodeSelector") or {}).items()
                        for d in found.values())
        else:
            failure = self.faults.get("dgd-failed")
            failure = None if failure is None else failure or DEFAULT_FAILURE
            stuck = self.faults.get("dgd-stuck-pending") is not None
        self._rollouts[uid] = Rollout(generation, failure, stuck)
        return self._rollouts[uid]

    def _apply(self, dgd: dict, parts: list[Component], wanted: dict[str, dict],
               found: dict[str, dict]) -> dict[str, dict]:
        """This generation's Deployments (applied where missing or changed) and Service; the
        Deployments ``found`` of components that are gone are deleted. Returns the Deployments by component."""
        meta, found = dgd["metadata"], dict(found)
        applied = {}
        for part in parts:
            want = wanted[part.name]
            have = found.pop(want["metadata"]["name"], None)
            if _hash(have) != _hash(want):
                apply = partial(self._server_side_apply, self.apps.patch_namespaced_deployment, want)
                have = apply() if have is not None else self._create(dgd, "DynamoComponentDeployment", apply)
            applied[part.name] = have
        for gone in found:
            self._delete(self.apps.delete_namespaced_deployment, meta["namespace"], gone)
        self._ensure_frontend(dgd, parts)
        return applied

    def _ensure_frontend(self, dgd: dict, parts: list[Component]) -> None:
        meta = dgd["metadata"]
        frontend = next((part for part in parts if part.type == "frontend"), None)
        name = f"{meta['name']}-frontend"
        existing = self.read_core(self.core.read_namespaced_service, meta["namespace"], name)
        if frontend is not None:
            want = frontend_service(dgd, frontend)
            apply = partial(self._server_side_apply, self.core.patch_namespaced_service, want)
            if existing is None:
                self._create(dgd, "Service", apply)
            elif existing["spec"].get("selector") != want["spec"]["selector"] or not self._owns(dgd, existing) \
                    or _ports(existing) != _ports(want):
                apply()
        elif existing is not None and self._owns(dgd, existing):
            self._delete(self.core.delete_namespaced_service, meta["namespace"], name)

    def _fail(self, dgd: dict, message: str) -> None:
        """State failed, once per message: a Warning event as the operator's when it changes."""
        status = {"state": "failed", "conditions": [_ready_condition("False", RECONCILE_FAILED, message)],
                  "observedGeneration": int(dgd["metadata"].get("generation", 1))}
        if self._write_status(dgd, status):
            namespace = dgd["metadata"]["namespace"]
            self.record(dgd, "Warning", "CreateDynamoComponentDeployment",
                        f"Failed to create DynamoComponentDeployment {namespace}: {message}", component=COMPONENT)

    # -- API helpers -------------------------------------------------------------------------
    def _write_status(self, dgd: dict, status: dict) -> bool:
        """Patch ``status`` in unless the DGD says so already (a condition keeps its transition
        time while its status holds; components no longer listed are removed). Whether it wrote."""
        old = dgd.get("status") or {}
        ready, before = (status.get("conditions") or [None])[0], (old.get("conditions") or [None])[0]
        if ready and before and before.get("status") == ready["status"] and before.get("lastTransitionTime"):
            status["conditions"] = [{**ready, "lastTransitionTime": before["lastTransitionTime"]}]
        if all(_same(k, old.get(k), v) for k, v in status.items()):
            return False
        patch = status
        if "components" in status:
            gone = set(old.get("components") or {}) - set(status["components"])
            # a merge patch: null removes a component's counts
            patch = {**status, "components": {**status["components"], **dict.fromkeys(gone)}}
        self.patch_status(DGD, dgd["metadata"]["namespace"], dgd["metadata"]["name"], patch)
        dgd["status"] = {**old, **status}
        return True

    def _server_side_apply(self, patch: Callable[..., object], body: dict) -> dict:
        meta = body["metadata"]
        response = patch(meta["name"], meta["namespace"], body, field_manager=MANAGER, force=True,
                         _content_type=APPLY, _preload_content=False)
        return json_body(response)

    def _delete(self, delete: Callable[..., object], namespace: str, name: str) -> None:
        try:
            delete(name, namespace, propagation_policy="Background")
        except ApiException as err:
            if err.status != 404:
                raise

    @staticmethod
    def _owns(dgd: dict, obj: dict) -> bool:
        return any(ref.get("controller") and ref.get("uid") == dgd["metadata"]["uid"]
                   for ref in obj["metadata"].get("ownerReferences") or [])

    def _create(self, dgd: dict, kind: str, create: Callable[[], dict]) -> dict:
        """``create()`` a child, with the events the operator's ``SyncResource`` records around it
        (naming the namespace, not the child)."""
        namespace = dgd["metadata"]["namespace"]
        self.record(dgd, "Normal", f"Create{kind}", f"Creating a new {kind} {namespace}", component=COMPONENT)
        created = create()
        self.record(dgd, "Normal", f"Create{kind}", f"Created {kind} {namespace}", component=COMPONENT)
        return created
