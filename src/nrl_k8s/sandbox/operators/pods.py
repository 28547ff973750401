"""Simulated pod lifecycles: the status a kubelet/scheduler would write, and scheduler events.

No container runs: a "Running" pod here is a status record on 127.0.0.1.
"""

from __future__ import annotations

from .base import now, suffix

POD_CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")
UNSCHEDULABLE = (
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
    "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
)


def _containers(pod: dict) -> list[dict]:
    return pod.get("spec", {}).get("containers") or []


def creating(pod: dict) -> dict:
    """Scheduled, containers still being created."""
    stamp = now()
    return {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp}],
        "containerStatuses": [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
            for c in _containers(pod)
        ],
    }


def running(pod: dict) -> dict:
    """Running with every container Ready, on the loopback "node"."""
    stamp = now()
    return {
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": stamp,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": stamp} for t in POD_CONDITIONS],
        "containerStatuses": [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": stamp}},
            }
            for c in _containers(pod)
        ],
    }


def unschedulable() -> dict:
    return {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": UNSCHEDULABLE,
                "lastTransitionTime": now(),
            }
        ],
    }


def failed_scheduling_event(pod: dict) -> dict:
    """The Warning event the default scheduler records for an unschedulable pod."""
    meta = pod["metadata"]
    stamp = now()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{suffix(16)}", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
        },
        "reason": "FailedScheduling",
        "message": UNSCHEDULABLE,
        "type": "Warning",
        "source": {"component": "default-scheduler"},
        "reportingComponent": "default-scheduler",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
