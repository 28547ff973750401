"""Kueue's kinds (``kueue.x-k8s.io/v1beta2``, which Kueue v0.17.0 stores) and what nrl-k8s reads of
them: a ClusterQueue's nominal quota and what admitted or reserving workloads hold of it (summed over
its flavors), and the Workload Kueue makes for a job (labelled with the job's uid)."""

from __future__ import annotations

from .base import Kind
from .placement import quantity

LOCAL_QUEUE = Kind("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
CLUSTER_QUEUE = Kind("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
WORKLOAD = Kind("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # on a job's Workload: the job's uid


def quota(cluster_queue: dict) -> dict[str, float]:
    """Each covered resource's nominal quota, over all flavors."""
    flavors = [f for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []
               for f in group.get("flavors") or []]
    return _sum(flavors, "nominalQuota")


def reserved(cluster_queue: dict) -> dict[str, float]:
    """What the workloads with quota reserved in it hold (``status.flavorsReservation``)."""
    return _sum((cluster_queue.get("status") or {}).get("flavorsReservation") or [], "total")


def _sum(flavors: list[dict], field: str) -> dict[str, float]:
    total: dict[str, float] = {}
    for flavor in flavors:
        for res in flavor.get("resources") or []:
            total[res["name"]] = total.get(res["name"], 0) + quantity(res.get(field))
    return total
