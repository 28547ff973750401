"""Core v1 Pod: descriptor and readiness helpers used by the DGD and RayCluster waits."""

from __future__ import annotations

from .base import Kind
from .readiness import Failed, Pending, Readiness, Ready, condition

KIND = Kind("", "v1", "pods", "Pod")


def containers_ready(pod: dict) -> bool:
    """True when every container of the pod reports Ready."""
    declared = len((pod.get("spec") or {}).get("containers") or [])
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and len(statuses) >= declared and all(s.get("ready") for s in statuses)


def waiting_reason(pod: dict) -> str | None:
    """Why the pod is not running: unscheduled first (the root cause), else a container's waiting reason."""
    scheduled = condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        detail = ": ".join(str(scheduled[k]) for k in ("reason", "message") if scheduled.get(k))
        return detail or "not scheduled"
    status = pod.get("status") or {}
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            message = f": {waiting['message']}" if waiting.get("message") else ""
            return f"container {container.get('name')}: {waiting['reason']}{message}"
    return None


def readiness(pod: dict) -> Readiness:
    phase = (pod.get("status") or {}).get("phase") or "Unknown"
    if phase in ("Failed", "Succeeded"):
        return Failed(f"pod {phase}, not serving")
    if containers_ready(pod):
        return Ready()
    return Pending(waiting_reason(pod) or f"phase {phase}")
