"""Where a run's pods can go: the pods its manifests make, and kube-scheduler's node filters, as data.

Pure: no cluster here; ``ops.fit`` weighs these pods against a cluster's nodes.

Modelled as kube-scheduler filters a node (its default plugins): resource requests
(NodeResourcesFit: the sum of the containers' requests, a limit standing for a missing request, an
init container's when larger; one ``pods`` slot each), ``nodeSelector`` and required node affinity
(NodeAffinity), taints with effect NoSchedule or NoExecute against tolerations (TaintToleration),
``spec.unschedulable`` (NodeUnschedulable), and each DRA claim's device count by DeviceClass.
Not modelled: inter-pod (anti-)affinity, topology spread, volumes, host ports, preemption.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .dra import GPU_RESOURCE
from .raycluster import KUEUE_QUEUE_LABEL

_SUFFIX = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?")
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
DEFAULT_SCHEDULER = "default-scheduler"
CLASS = "DeviceClass "  # a DRA DeviceClass's devices, counted as a resource of the node


def quantity(value: object) -> float:
    """A Kubernetes quantity (``500m``, ``1Gi``, ``4``, ``1e3``) as a number; 0 when it is none."""
    match = _QUANTITY.fullmatch(str(value).strip())
    return float(match.group(1)) * _SUFFIX[match.group(2) or ""] if match else 0.0


def show(resource: str, amount: float) -> str:
    """``amount`` of ``resource`` as a person reads it: ``4 nvidia.com/gpu``, ``2.5 cpu``, ``12Gi memory``."""
    if resource.startswith(CLASS):
        return f"{amount:g} devices of {resource}"
    if resource in ("memory", "ephemeral-storage"):
        return f"{amount / 2**30:g}Gi {resource}"
    return f"{amount:g} {resource}"


@dataclass(frozen=True)
class PodGroup:
    """The pods of one owner (a RayCluster, a DGD component, a Deployment), placed all at once."""

    label: str  # RayCluster NAME: head + 2 x gpu, DGD NAME: VllmDecodeWorker, Deployment NAME
    pods: tuple[tuple[dict, int], ...]  # (pod spec, how many)
    claims: dict[str, dict[str, int]] = field(default_factory=dict)  # claim template -> DeviceClass -> count
    queue: str | None = None  # the Kueue LocalQueue the owner names (kueue.x-k8s.io/queue-name)
    held: bool = False  # a RayJob's: its cluster's pods come once the run hands it over, after the DGDs serve

    @property
    def count(self) -> int:
        return sum(n for _, n in self.pods)

    @property
    def scheduler(self) -> str:
        return str(next((s["schedulerName"] for s, _ in self.pods if s.get("schedulerName")), DEFAULT_SCHEDULER))

    @property
    def device_classes(self) -> set[str]:
        return {cls for counts in self.claims.values() for cls in counts}

    def needs(self, spec: dict) -> dict[str, float]:
        """What one pod of ``spec`` needs of a node: its requests, and per DeviceClass (as ``DeviceClass
        NAME``) the devices its claims ask for."""
        need = requests(spec)
        for claim in spec.get("resourceClaims") or []:
            for cls, count in self.claims.get(claim.get("resourceClaimTemplateName") or "", {}).items():
                need[CLASS + cls] = need.get(CLASS + cls, 0) + count
        return need

    def demand(self) -> dict[str, float]:
        """What all its pods request together (Kueue counts a workload's whole)."""
        total: dict[str, float] = {}
        for spec, n in self.pods:
            for resource, amount in requests(spec).items():
                total[resource] = total.get(resource, 0) + amount * n
        return total


def requests(spec: dict) -> dict[str, float]:
    """What one pod of ``spec`` requests, as NodeResourcesFit counts it (``pods``: 1)."""
    def of(container: dict) -> dict[str, float]:
        res = container.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: quantity(v) for k, v in merged.items()}

    total: dict[str, float] = {"pods": 1}
    for container in spec.get("containers") or []:
        for k, v in of(container).items():
            total[k] = total.get(k, 0) + v
    for container in spec.get("initContainers") or []:
        for k, v in of(container).items():
            total[k] = max(total.get(k, 0), v)
    return {k: v for k, v in total.items() if v}


def gpus(spec: dict) -> int:
    return int(requests(spec).get(GPU_RESOURCE, 0))


# -- the pods a run's manifests make ---------------------------------------------------------------

def pod_groups(manifests: list[dict]) -> list[PodGroup]:
    """One group per RayCluster (a RayJob's too), DGD component and Deployment, in ``manifests``' order
    (the order a run applies them, but for a RayJob's: held until its DGDs serve)."""
    from . import dgd

    templates = {m["metadata"]["name"]: m for m in manifests if m.get("kind") == "ResourceClaimTemplate"}
    groups = []
    for manifest in manifests:
        kind, name = manifest.get("kind"), manifest["metadata"]["name"]
        spec = manifest.get("spec") or {}
        queue = (manifest["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        if kind in ("RayCluster", "RayJob"):
            cluster = spec.get("rayClusterSpec") or {} if kind == "RayJob" else spec
            pods = [(cluster["headGroupSpec"]["template"]["spec"], 1, "head")]
            pods += [(g["template"]["spec"], int(g.get("replicas", 1)) * int(g.get("numOfHosts", 1)),
                      g.get("groupName", "workers")) for g in cluster.get("workerGroupSpecs") or []]
            label = f"{kind} {name}: " + " + ".join(f"{n} x {what}" if what != "head" else "head"
                                                     for _, n, what in pods if n)
            groups.append(_group(label, [(s, n) for s, n, _ in pods if n], templates, queue, kind == "RayJob"))
        elif kind == "Deployment":
            groups.append(_group(f"Deployment {name}", [(spec["template"]["spec"], int(spec.get("replicas", 1)))],
                                 templates, queue))
        elif kind == "DynamoGraphDeployment":
            for part, pod_spec, count in dgd.component_pods(manifest):
                groups.append(_group(f"DGD {name}: {part}", [(pod_spec, count)], templates, queue))
    return groups


def _group(label: str, pods: list[tuple[dict, int]], templates: dict[str, dict], queue: str | None,
           held: bool = False) -> PodGroup:
    claims: dict[str, dict[str, int]] = {}
    for spec, _ in pods:
        for claim in spec.get("resourceClaims") or []:
            name = claim.get("resourceClaimTemplateName") or ""
            template = ((templates.get(name) or {}).get("spec") or {}).get("spec") or {}
            for request in (template.get("devices") or {}).get("requests") or []:
                exactly = request.get("exactly") or request  # resource.k8s.io v1, else v1beta1's flat request
                if cls := exactly.get("deviceClassName"):
                    counts = claims.setdefault(name, {})
                    counts[cls] = counts.get(cls, 0) + int(exactly.get("count") or 1)
    return PodGroup(label, tuple(pods), claims, queue, held)


# -- kube-scheduler's node filters -------------------------------------------------------------------

def refusal(node: dict, spec: dict) -> str | None:
    """Why kube-scheduler filters ``node`` out for a pod of ``spec``, resources aside (the words of its
    own summary: node selector, affinity, untolerated taint, unschedulable); None when it does not."""
    labels = node["metadata"].get("labels") or {}
    wanted = spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in wanted.items()):
        return "didn't match node selector " + ", ".join(f"{k}={v}" for k, v in wanted.items() if labels.get(k) != v)
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if terms and not any(_term_matches(term, node) for term in terms):
        return "didn't match node affinity"
    taints = list((node.get("spec") or {}).get("taints") or [])
    if (node.get("spec") or {}).get("unschedulable"):
        taints.append(UNSCHEDULABLE_TAINT)
    for taint in taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                tolerates(t, taint) for t in spec.get("tolerations") or []):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"untolerated taint {taint['key']}{value}:{taint['effect']}"
    return None


def tolerates(toleration: dict, taint: dict) -> bool:
    """Whether ``toleration`` tolerates ``taint`` (k8s.io/api core/v1 Toleration.ToleratesTaint)."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return bool(toleration.get("key")) and (toleration.get("value") or "") == (taint.get("value") or "")


def _term_matches(term: dict, node: dict) -> bool:
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    exprs = [(e, labels) for e in term.get("matchExpressions") or []]
    exprs += [(e, fields) for e in term.get("matchFields") or []]
    return bool(exprs) and all(_expr_matches(e, values) for e, values in exprs)


def _expr_matches(expr: dict, labels: dict) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    present, value = key in labels, labels.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            left, right = int(str(value)), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def wanted_labels(spec: dict) -> str:
    """What a pod of ``spec`` asks of a node's labels, for a verdict (``with nvidia.com/gpu.product=X``)."""
    parts = [f"{k}={v}" for k, v in (spec.get("nodeSelector") or {}).items()]
    return f" with {', '.join(parts)}" if parts else ""


@dataclass
class Free:
    """One node's room: allocatable (and DRA devices, as ``DeviceClass NAME``) less what is held."""

    name: str
    room: dict[str, float]

    def takes(self, need: dict[str, float]) -> str | None:
        """The first resource short for a pod needing ``need``; None: it fits."""
        return next((r for r, amount in need.items() if amount > self.room.get(r, 0) + 1e-9), None)

    def take(self, need: dict[str, float]) -> None:
        for resource, amount in need.items():
            self.room[resource] = self.room.get(resource, 0) - amount
