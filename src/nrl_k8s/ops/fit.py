"""Whether every pod of a run can be placed, before anything is applied: one verdict per pod group.

A group (``placement.pod_groups``: a RayCluster's pods, a DGD component's, a Deployment's) is
weighed against the nodes' allocatable minus what bound, non-terminated pods already request, the
run's earlier groups included (placed first, as the run brings them up), all its pods at once (a gang):

- ``fits now``;
- ``fits once N nvidia.com/gpu free (held by ...)``: it fits the nodes it may use, not what is free
  on them now; or its Kueue ClusterQueue's quota, not what is free of it;
- ``never fits: ...``: no node passes the pod's selector, affinity or taints, none is large enough,
  the gang is larger than every node it may use together, its DeviceClass, LocalQueue or scheduler
  is missing, or it asks more than its ClusterQueue's quota;
- ``not verified``: what the user may not read (nodes, other namespaces' pods).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from nrl_k8s.errors import ForbiddenError
from nrl_k8s.kinds import dra, kueue, pod
from nrl_k8s.kinds.base import Kind
from nrl_k8s.kinds.placement import (
    CLASS,
    DEFAULT_SCHEDULER,
    Free,
    PodGroup,
    pod_groups,
    quantity,
    refusal,
    requests,
    show,
    wanted_labels,
)
from nrl_k8s.kube.errors import KindNotServedError

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

NODE = Kind("", "v1", "nodes", "Node", namespaced=False)
LEASE = Kind("coordination.k8s.io", "v1", "leases", "Lease")
RESOURCE_SLICE = Kind("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False)
RESOURCE_CLAIM = Kind("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim")
_DRIVER_RULE = re.compile(r'\s*device\.driver\s*==\s*"([^"]+)"\s*')
NOW, ONCE, NEVER, UNKNOWN = "fits now", "fits once", "never fits", "not verified"


@dataclass(frozen=True)
class Verdict:
    group: str
    state: str  # NOW, ONCE, NEVER or UNKNOWN
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.state} {self.reason}" if self.state == ONCE else \
            f"{self.state}: {self.reason}" if self.reason else self.state


@dataclass
class Cluster:
    """What a prediction reads of the cluster; None where the user may not read it."""

    nodes: list[dict] | None
    pods: list[dict] | None = None  # bound, non-terminated pods of every namespace
    device_classes: dict[str, str | None] | None = None  # name -> the driver its selector names (None: other)
    devices: Counter = field(default_factory=Counter)  # (node, driver) -> devices its ResourceSlices publish
    claimed: Counter = field(default_factory=Counter)  # (node, driver) -> of them, allocated to a claim
    local_queues: dict[str, str] | None = None  # LocalQueue -> its ClusterQueue, in the run's namespace
    cluster_queues: dict[str, dict] = field(default_factory=dict)
    schedulers: dict[str, bool | None] = field(default_factory=dict)  # non-default scheduler -> runs here


def read(kube: Kube, namespace: str, groups: list[PodGroup]) -> Cluster:
    """The nodes, bound pods, DRA devices, Kueue queues and schedulers ``groups`` depend on."""
    cluster = Cluster(_readable(lambda: kube.list(NODE)))
    if cluster.nodes is None:
        return cluster
    cluster.pods = _readable(lambda: [p for p in kube.list(pod.KIND, all_namespaces=True,
                                                          field_selector="status.phase!=Succeeded,status.phase!=Failed")
                                      if (p.get("spec") or {}).get("nodeName")])
    if any(g.claims for g in groups):
        _read_devices(kube, cluster)
    if any(g.queue for g in groups):
        _read_queues(kube, namespace, cluster)
    for name in {g.scheduler for g in groups} - {DEFAULT_SCHEDULER}:
        cluster.schedulers[name] = _scheduler_runs(kube, name, cluster.pods)
    return cluster


def _readable(read_it):
    try:
        return read_it()
    except (ForbiddenError, KindNotServedError):
        return None


def _read_devices(kube: Kube, cluster: Cluster) -> None:
    classes = _readable(lambda: kube.list(dra.DEVICE_CLASS))
    if classes is None:
        return
    cluster.device_classes = {c["metadata"]["name"]: _driver(c) for c in classes}
    slices = _readable(lambda: kube.list(RESOURCE_SLICE)) or []
    where: dict[tuple, tuple[str, str]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        for device in spec.get("devices") or []:
            key = (spec.get("nodeName") or "", spec.get("driver") or "")
            cluster.devices[key] += 1
            where[(spec.get("driver"), (spec.get("pool") or {}).get("name"), device.get("name"))] = key
    for claim in _readable(lambda: kube.list(RESOURCE_CLAIM, all_namespaces=True)) or []:
        for result in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            if found := where.get((result.get("driver"), result.get("pool"), result.get("device"))):
                cluster.claimed[found] += 1


def _driver(device_class: dict) -> str | None:
    """The driver a DeviceClass selects (its one selector ``device.driver == "X"``); None for any other."""
    selectors = (device_class.get("spec") or {}).get("selectors") or []
    found = [_DRIVER_RULE.fullmatch(((s.get("cel") or {}).get("expression")) or "") for s in selectors]
    return found[0].group(1) if len(found) == 1 and found[0] else None


def _read_queues(kube: Kube, namespace: str, cluster: Cluster) -> None:
    local = _readable(lambda: kube.list(kueue.LOCAL_QUEUE, namespace))
    if local is None:
        return
    cluster.local_queues = {q["metadata"]["name"]: str((q.get("spec") or {}).get("clusterQueue")) for q in local}
    for name in set(cluster.local_queues.values()):
        if (found := _readable(lambda name=name: kube.find(kueue.CLUSTER_QUEUE, name))) is not None:
            cluster.cluster_queues[name] = found


def _scheduler_runs(kube: Kube, name: str, pods: list[dict] | None) -> bool | None:
    """Whether a scheduler ``name`` runs: one of the bound ``pods`` (already read) or a leader-election
    Lease named after it, in any namespace (KAI's is ``kai-scheduler-default``); None when neither
    may be listed."""
    if pods is not None and any(p["metadata"]["name"].startswith(name) for p in pods):
        return True
    leases = _readable(lambda: kube.list(LEASE, all_namespaces=True))
    if leases is not None:
        return any(lease["metadata"]["name"].startswith(name) for lease in leases)
    return None if pods is None else False


def report(kube: Kube, namespace: str, manifests: list[dict]) -> list[Verdict]:
    """The verdicts for every pod ``manifests`` would make, from what the cluster holds now."""
    groups = pod_groups(manifests)
    return predict(groups, read(kube, namespace, groups)) if groups else []


# -- the prediction ------------------------------------------------------------------------------------

def predict(groups: list[PodGroup], cluster: Cluster) -> list[Verdict]:
    """One verdict per group, in order; each group that fits now takes its room from the later ones."""
    if cluster.nodes is None:
        return [Verdict(g.label, UNKNOWN, "no permission to list nodes") for g in groups]
    rooms = Rooms(_room(cluster, in_use=True), _room(cluster, in_use=False), _room(cluster, in_use=False),
                  _holders(cluster))
    in_order = sorted(groups, key=lambda g: g.held)  # as they come up: a RayJob's cluster after the DGDs
    verdicts = {id(g): _static(g, cluster) or _verdict(g, cluster, rooms) for g in in_order}
    return [verdicts[id(g)] for g in groups]


@dataclass
class Rooms:
    """Per node: what is free now, what it has, what it has beside this run's pods placed so far, and
    who holds what (``namespace/owner`` or ``this run's ...``: requests)."""

    free: dict[str, Free]
    total: dict[str, Free]
    own: dict[str, Free]
    holders: dict[str, list[tuple[str, dict]]]


def _room(cluster: Cluster, *, in_use: bool) -> dict[str, Free]:
    """Per node: its allocatable and DRA devices, less (``in_use``) what bound pods and claims hold."""
    room = {n["metadata"]["name"]: Free(n["metadata"]["name"], {k: quantity(v) for k, v in (
        (n.get("status") or {}).get("allocatable") or {}).items()}) for n in cluster.nodes or []}
    for p in cluster.pods or [] if in_use else []:
        if node := room.get(p["spec"]["nodeName"]):
            node.take(requests(p["spec"]))
    for (node, driver), count in cluster.devices.items():
        for cls, cls_driver in (cluster.device_classes or {}).items():
            if node in room and cls_driver == driver:
                room[node].room[CLASS + cls] = count - (cluster.claimed.get((node, driver), 0) if in_use else 0)
    return room


def _holders(cluster: Cluster) -> dict[str, list[tuple[str, dict]]]:
    """Per node: (who, requests) of each bound pod, who being ``namespace/owner``."""
    out: dict[str, list[tuple[str, dict]]] = {}
    for p in cluster.pods or []:
        meta = p["metadata"]
        owner = ((meta.get("ownerReferences") or [{}])[0]).get("name") or meta["name"]
        template = (meta.get("labels") or {}).get("pod-template-hash")
        owner = owner.removesuffix(f"-{template}") if template else owner  # a Deployment's ReplicaSet: the Deployment
        out.setdefault(p["spec"]["nodeName"], []).append((f"{meta.get('namespace')}/{owner}", requests(p["spec"])))
    return out


def _static(group: PodGroup, cluster: Cluster) -> Verdict | None:
    """What never fits whatever is free: a missing scheduler, DeviceClass or LocalQueue."""
    runs = cluster.schedulers.get(group.scheduler, True)
    if runs is False:
        return Verdict(group.label, NEVER, f"no scheduler {group.scheduler} runs on the cluster (no pod or Lease "
                                           "of that name): nothing would ever bind its pods")
    for cls in sorted(group.device_classes):
        if cluster.device_classes is not None and cls not in cluster.device_classes:
            return Verdict(group.label, NEVER, f"the cluster has no DeviceClass {cls}")
    if group.queue and cluster.local_queues is not None and group.queue not in cluster.local_queues:
        return Verdict(group.label, NEVER, f"no Kueue LocalQueue {group.queue} in its namespace: Kueue never "
                                           "admits it")
    return None


class Short(NamedTuple):
    """What a group lacks: a resource (or ``DeviceClass NAME``), what all its pods ask of it, what their
    nodes had of it."""

    resource: str
    asked: float
    had: float


def _verdict(group: PodGroup, cluster: Cluster, rooms: Rooms) -> Verdict:
    nodes = cluster.nodes or []
    pods = [(spec, group.needs(spec)) for spec, n in group.pods for _ in range(n)]
    eligible: dict[int, list[str]] = {}
    for spec, _ in group.pods:  # each distinct pod once, not once per replica
        eligible[id(spec)] = [n["metadata"]["name"] for n in nodes if refusal(n, spec) is None]
        if not eligible[id(spec)]:
            return Verdict(group.label, NEVER, _why_no_node(spec, nodes))
        if too_large := _too_large(spec, group.needs(spec), [rooms.total[n] for n in eligible[id(spec)]], nodes):
            return Verdict(group.label, NEVER, too_large)
    if (short := _place(pods, eligible, _copy(rooms.own))) is not None:
        beside = "" if _place(pods, eligible, _copy(rooms.total)) else " beside this run's other pods"
        return Verdict(group.label, NEVER, f"its {group.count} pods need {show(short.resource, short.asked)} at once "
                                           f"on the nodes they may use, which have {show(short.resource, short.had)}"
                                           f"{beside}")
    if (quota := _quota(group, cluster)) is not None:
        return quota
    if cluster.pods is None:
        return Verdict(group.label, UNKNOWN, "fits the nodes; what is free not known (no permission to list pods "
                                             "in every namespace)")
    trial, placed = _copy(rooms.free), list[tuple[str, dict[str, float]]]()
    if (short := _place(pods, eligible, trial, placed)) is None:
        rooms.free.update(trial)
        for node, need in placed:
            rooms.own[node].take(need)
            rooms.holders.setdefault(node, []).append((f"this run's {group.label.partition(':')[0]}", need))
        return Verdict(group.label, NOW)
    held: dict[str, float] = {}
    for node in {n for names in eligible.values() for n in names}:
        for who, asks in rooms.holders.get(node, []):
            held[who] = held.get(who, 0) + asks.get(short.resource, 0)
    by = ", ".join(f"{who}: {amount:g}" for who, amount in sorted(held.items(), key=lambda kv: -kv[1])[:3] if amount)
    return Verdict(group.label, ONCE, f"{show(short.resource, max(short.asked - short.had, 1))} free"
                                      + (f" (held by {by})" if by else ""))


def _too_large(spec: dict, need: dict[str, float], room: list[Free], nodes: list[dict]) -> str | None:
    """Why no node a pod of ``spec`` may use could take even that one pod, empty; None when one could."""
    shorts = [free.takes(need) for free in room]
    if not all(shorts):
        return None
    resource = str(shorts[0])
    largest = max(free.room.get(resource, 0) for free in room)
    what, most = show(resource, need[resource]), f" (the most one has: {show(resource, largest)})"
    refused = _refusals(spec, nodes)
    return f"no node has {what}{wanted_labels(spec)}{most}" + (f"; {refused}" if refused else "")


def _copy(room: dict[str, Free]) -> dict[str, Free]:
    return {k: Free(v.name, dict(v.room)) for k, v in room.items()}


def _why_no_node(spec: dict, nodes: list[dict]) -> str:
    return f"no node takes its pods: {_refusals(spec, nodes)}" if nodes else "the cluster has no nodes"


def _refusals(spec: dict, nodes: list[dict]) -> str:
    """How many nodes refuse a pod of ``spec``, and why (as kube-scheduler sums it up), '' when none does."""
    reasons = Counter(why for n in nodes if (why := refusal(n, spec)))
    refused = sum(reasons.values())
    return f"{refused} of {len(nodes)} nodes: " + ", ".join(
        f"{count} {why}" for why, count in reasons.most_common()) if refused else ""


def _place(pods: list[tuple[dict, dict[str, float]]], eligible: dict[int, list[str]], room: dict[str, Free],
           placed: list[tuple[str, dict[str, float]]] | None = None) -> Short | None:
    """Place every pod in ``room`` (largest first, each on the node it leaves least room on), taking
    what each uses (and listing (node, requests) in ``placed``); None when all are placed, else what
    is short."""
    had = _copy(room)
    order = sorted(range(len(pods)), key=lambda i: sorted(pods[i][1].items()), reverse=True)
    order.sort(key=lambda i: -pods[i][1].get(dra.GPU_RESOURCE, 0))
    for i in order:
        spec, need = pods[i]
        shorts = {n: room[n].takes(need) for n in eligible[id(spec)]}
        fits = [room[n] for n, short in shorts.items() if short is None]
        if not fits:
            resource = str(Counter(shorts.values()).most_common(1)[0][0])  # what most of its nodes lack
            asked = sum(n.get(resource, 0) for _, n in pods)
            return Short(resource, asked, sum(max(had[n].room.get(resource, 0), 0) for n in eligible[id(spec)]))
        best = min(fits, key=lambda f: (f.room.get(dra.GPU_RESOURCE, 0), f.room.get("cpu", 0), f.name))
        best.take(need)
        if placed is not None:
            placed.append((best.name, need))
    return None


def _quota(group: PodGroup, cluster: Cluster) -> Verdict | None:
    """Kueue's view: the group's whole demand against its ClusterQueue's nominal quota and usage."""
    if not group.queue or cluster.local_queues is None:
        return None
    name = cluster.local_queues[group.queue]
    queue = cluster.cluster_queues.get(name)
    if queue is None:
        return Verdict(group.label, NEVER, f"LocalQueue {group.queue} feeds ClusterQueue {name}, which does not exist")
    quota, used = kueue.quota(queue), kueue.reserved(queue)
    demand = group.demand()
    for resource in quota:
        asked = demand.get(resource, 0)
        if asked > quota[resource]:
            return Verdict(group.label, NEVER, f"it asks {show(resource, asked)} of ClusterQueue {name}, whose quota "
                                               f"is {show(resource, quota[resource])}")
        if asked > quota[resource] - used.get(resource, 0):
            return Verdict(group.label, ONCE, f"{show(resource, asked - quota[resource] + used.get(resource, 0))} "
                                              f"free in ClusterQueue {name} (quota {show(resource, quota[resource])},"
                                              f" in use {show(resource, used.get(resource, 0))})")
    return None
