"""Why a run's pods wait, for `status`: one line per waiting pod group.

A group is a RayCluster's head or worker group, a DGD component or a Deployment. Its pods that are
Pending and not bound to a node say why (``pod_reason``):

- the scheduler's verdict, the message of the pod's PodScheduled=False condition (its
  FailedScheduling event's text), summarised (``summarize``): ``0/10 nodes: 8 Insufficient
  nvidia.com/gpu, 2 untolerated taint {dedicated: team-a}``, without the ``preemption: ...`` tail;
- no PodScheduled condition and a ``schedulerName`` other than default-scheduler: no such
  scheduler has picked it up;
- scheduling gates that hold it.

A group's line is the reason most of its waiting pods give.

A RayJob or RayCluster that Kueue holds (suspended, with a ``kueue.x-k8s.io/queue-name`` label)
has no pods yet: its line (``held``) says which LocalQueue or ClusterQueue is missing, or in which
ClusterQueue it waits for quota, with what its pods ask and what of the quota is free (nominal
quota minus what workloads have reserved); else what Kueue's Workload for it says.

API calls: one list of Pending pods per namespace the run's pods are in; per object Kueue holds,
its LocalQueue, ClusterQueue and Workload.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nrl_k8s.errors import ApiError
from nrl_k8s.kinds import deployment, dgd, kueue, placement, pod
from nrl_k8s.kinds.placement import DEFAULT_SCHEDULER, show
from nrl_k8s.kinds.raycluster import KUEUE_QUEUE_LABEL
from nrl_k8s.kinds.readiness import condition
from nrl_k8s.kube.errors import KindNotServedError

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

_LONGEST = 200  # characters of a message that is no node count verdict
_VERDICT = re.compile(r"(\d+)/(\d+) nodes are available:?(.*)")
_PREEMPTION = re.compile(r"\bpreemption:.*", re.IGNORECASE)  # PostFilter's part: what preempting would do
_NEXT_REASON = re.compile(r",\s*(?=\d+ )")  # reasons are "COUNT TEXT", joined by ", "
_NODES = re.compile(r"^(\d+) node\(s\) (?:had |were |)")


KUBERAY_HEAD_GROUP = "headgroup"  # the ray.io/group KubeRay gives every head pod


@dataclass(frozen=True)
class Owner:
    """Whose pods a group's are: ``name`` (``RayCluster NAME``) in ``namespace``, the labels its pods
    carry, and the labels that name a pod's group within it (the first one set)."""

    name: str
    namespace: str
    labels: dict[str, str]
    part: tuple[str, ...] = ()

    def group(self, pod_labels: dict) -> str | None:
        """The pod's group (``RayCluster NAME: gpu``) when the pod is this owner's, else None."""
        if any(pod_labels.get(k) != v for k, v in self.labels.items()):
            return None
        part = next((pod_labels[k] for k in self.part if pod_labels.get(k)), None)
        part = "head" if part == KUBERAY_HEAD_GROUP else part
        return f"{self.name}: {part}" if part else self.name


def owners(infra: dict, clusters: list[str], dgds: list[tuple[str, str]]) -> list[Owner]:
    """The run's pod owners: its live RayClusters ``clusters``, DGDs ``dgds`` (name, namespace) and
    Deployments."""
    ns = infra["namespace"]
    found = [Owner(f"RayCluster {name}", ns, {"ray.io/cluster": name}, ("ray.io/group",)) for name in clusters]
    found += [Owner(f"DGD {name}", where, {dgd.POD_LABEL: name},
                    ("nvidia.com/dynamo-component", "nvidia.com/dynamo-component-type")) for name, where in dgds]
    for key in sorted(infra.get("deployments") or {}):
        manifest = deployment.render(infra, key)
        found.append(Owner(f"Deployment {manifest['metadata']['name']}", ns,
                           manifest["spec"]["selector"].get("matchLabels") or {}))
    return found


def summarize(message: str) -> str:
    """The scheduler's verdict in short: ``0/10 nodes: 8 Insufficient nvidia.com/gpu, 2 didn't match
    node affinity/selector`` (most nodes first; ``node(s) had``, ``Pod's`` dropped). Its first sentence
    after ``0/N nodes are available:`` is the nodes' reasons (or the one PreFilter gave); what
    follows, the PostFilter plugins' (DRA's deallocation, preemption), is dropped. A message of
    another shape is kept on one line, without a ``preemption:`` tail, cut to 200 characters."""
    text = _PREEMPTION.sub("", " ".join(message.split())).strip()
    verdict = _VERDICT.search(text)
    if verdict is None:
        text = text.rstrip(",. ")
        return text if len(text) <= _LONGEST else text[:_LONGEST - 3] + "..."
    first = (verdict.group(3) + " ").split(". ", 1)[0].strip(" .")
    reasons = [_NODES.sub(r"\1 ", reason).replace("Pod's ", "") for reason in _NEXT_REASON.split(first) if reason]
    reasons.sort(key=lambda r: -int(r.split(" ", 1)[0]) if r[:1].isdigit() else 0)
    return f"{verdict.group(1)}/{verdict.group(2)} nodes: {', '.join(reasons)}".rstrip(": ")


def pod_reason(obj: dict) -> str | None:
    """Why the Pending pod ``obj`` is not on a node yet; None when it is bound (or not Pending)."""
    spec = obj.get("spec") or {}
    if (obj.get("status") or {}).get("phase") != "Pending" or spec.get("nodeName"):
        return None
    if spec.get("schedulingGates"):
        return "held by scheduling gates: " + ", ".join(g.get("name", "?") for g in spec["schedulingGates"])
    scheduled = condition(obj, "PodScheduled")
    if scheduled is None:
        scheduler = spec.get("schedulerName") or DEFAULT_SCHEDULER
        if scheduler != DEFAULT_SCHEDULER:
            return f"no scheduler {scheduler} has picked it up (is it installed?)"
        return f"{DEFAULT_SCHEDULER} has not considered it yet"
    if scheduled.get("status") != "False":
        return None
    return summarize(scheduled.get("message") or "") or scheduled.get("reason") or "not scheduled"


def waiting_groups(pods: list[dict], run_owners: list[Owner]) -> list[dict]:
    """``{group, pods, reason}`` per group of ``run_owners`` with waiting pods among ``pods`` (by
    group); ``reason``: the one most of its waiting pods give."""
    reasons: dict[str, Counter[str]] = {}
    for obj in pods:
        labels = obj["metadata"].get("labels") or {}
        group = next(filter(None, (owner.group(labels) for owner in run_owners)), None)
        reason = pod_reason(obj) if group else None
        if group and reason:
            reasons.setdefault(group, Counter())[reason] += 1
    return [{"group": group, "pods": sum(seen.values()), "reason": seen.most_common(1)[0][0]}
            for group, seen in sorted(reasons.items())]


def held(kube: Kube, obj: dict) -> dict | None:
    """The line of the RayJob or RayCluster ``obj`` when Kueue holds it, else None."""
    queue = (obj["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    if not queue or not (obj.get("spec") or {}).get("suspend"):
        return None
    (group,) = placement.pod_groups([obj])
    try:
        reason = _queued(kube, obj, queue, group.demand())
    except KindNotServedError:
        reason = f"suspended for Kueue LocalQueue {queue}, but no Kueue {kueue.WORKLOAD.api_version} is served here"
    except ApiError as err:
        reason = f"suspended for Kueue LocalQueue {queue} (cannot read why: {err.message})"
    return {"group": f"{obj['kind']} {obj['metadata']['name']}", "pods": group.count, "reason": reason}


def _queued(kube: Kube, obj: dict, queue: str, demand: dict[str, float]) -> str:
    ns = obj["metadata"]["namespace"]
    local = kube.find(kueue.LOCAL_QUEUE, queue, ns)
    name = ((local or {}).get("spec") or {}).get("clusterQueue")
    cluster_queue = kube.find(kueue.CLUSTER_QUEUE, name) if name else None
    workloads = kube.list(kueue.WORKLOAD, ns, label_selector=f"{kueue.JOB_UID_LABEL}={obj['metadata']['uid']}") \
        if cluster_queue else []
    return queue_reason(queue, ns, local, cluster_queue, workloads[0] if workloads else None, demand)


def queue_reason(queue: str, ns: str, local: dict | None, cluster_queue: dict | None, workload: dict | None,
                 demand: dict[str, float]) -> str:
    """Why Kueue holds a job of LocalQueue ``queue`` in ``ns`` whose pods ask ``demand``: ``local``
    (that LocalQueue), ``cluster_queue`` (the one it feeds), ``workload`` (the job's) as read, None
    when absent."""
    if local is None:
        return f"Kueue: LocalQueue {queue} does not exist in namespace {ns}"
    name = (local.get("spec") or {}).get("clusterQueue")
    if cluster_queue is None:
        return f"Kueue: LocalQueue {queue} feeds ClusterQueue {name}, which does not exist"
    if workload is None:
        return f"Kueue has made no Workload for it in LocalQueue {queue} (is Kueue running?)"
    reservation = condition(workload, "QuotaReserved") or {}
    if reservation.get("status") == "True":
        return f"quota reserved in ClusterQueue {name}; not admitted yet (its admission checks)"
    quota, used = kueue.quota(cluster_queue), kueue.reserved(cluster_queue)
    free = {r: max(quota[r] - used.get(r, 0), 0) for r in quota}
    short = [f"asks {show(r, demand[r])}, {_amount(r, free[r])} of its {_amount(r, quota[r])} free"
             for r in quota if demand.get(r, 0) > free[r]]  # in the order the ClusterQueue lists them
    if short:
        return f"waiting for quota in ClusterQueue {name}: {'; '.join(short)}"
    said = summarize(reservation.get("message") or "")
    return f"waiting in ClusterQueue {name}" + (f": {said}" if said else "")


def _amount(resource: str, amount: float) -> str:
    """``amount`` as ``show`` writes it, without the resource's name (``8``, ``16Gi``)."""
    return show(resource, amount).rsplit(" ", 1)[0]


def collect(kube: Kube, run_owners: list[Owner], live: list[dict]) -> list[dict]:
    """The waiting groups of ``run_owners``' pods (one list of Pending pods per namespace), then a
    line per object of ``live`` (the run's RayJob and RayClusters) that Kueue holds."""
    rows = []
    for ns in sorted({owner.namespace for owner in run_owners}):
        pending = kube.list(pod.KIND, ns, field_selector="status.phase=Pending")
        rows += waiting_groups(pending, [owner for owner in run_owners if owner.namespace == ns])
    return rows + [line for obj in live if (line := held(kube, obj))]
