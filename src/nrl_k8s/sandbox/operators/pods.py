"""Simulated pod lifecycles: the status and the Events a scheduler and a kubelet would write.

No container runs: a "Running" pod here is a status record on 127.0.0.1 (node ``sandbox``). Events:
the scheduler's ``Scheduled`` (or, unschedulable, the Warning ``FailedScheduling``), then per
container the kubelet's ``Pulled``, ``Created``, ``Started`` (``fieldPath spec.containers{NAME}``).
"""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from .base import NODE, Controller, json_body, now

SCHEDULER = "default-scheduler"
KUBELET = "kubelet"

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


def create(controller: Controller, pod: dict, *, schedulable: bool = True) -> dict | None:
    """Create ``pod`` as scheduled with its containers being created, and the default scheduler's
    ``Scheduled`` event — or, not ``schedulable``, Pending with its ``FailedScheduling`` Warning.
    The stored pod; None when one of that name exists."""
    namespace = pod["metadata"]["namespace"]
    try:
        created = json_body(controller.core.create_namespaced_pod(namespace, pod, _preload_content=False))
    except ApiException as err:
        if err.status != 409:
            raise
        return None
    name = created["metadata"]["name"]
    if schedulable:  # the event first, as the scheduler records it before the pod's status changes
        controller.record(created, "Normal", "Scheduled", f"Successfully assigned {namespace}/{name} to {NODE}",
                          component=SCHEDULER, action="Binding")  # fmt: skip
    else:
        controller.record(created, "Warning", "FailedScheduling", UNSCHEDULABLE, component=SCHEDULER, action="Scheduling")
    controller.patch_pod_status(namespace, name, creating(created) if schedulable else unschedulable())
    return created


def start(controller: Controller, pod: dict) -> None:
    """What the kubelet does next: each container's ``Pulled``, ``Created`` and ``Started`` events,
    then every container running and Ready."""
    for container in _containers(pod):
        name, where = container.get("name", ""), f"spec.containers{{{container.get('name', '')}}}"
        for reason, message in (("Pulled", f'Container image "{container.get("image", "")}" already present on machine'),
                                ("Created", f"Created container: {name}"), ("Started", f"Started container {name}")):
            controller.record(pod, "Normal", reason, message, component=KUBELET, field_path=where, host=NODE)
    controller.patch_pod_status(pod["metadata"]["namespace"], pod["metadata"]["name"], running(pod))
