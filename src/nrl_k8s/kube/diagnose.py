"""Why an object's pods are not ready, for the message of a wait that failed or timed out.

``report`` reads the pods of the object (a label selector) and, for each one that is not Ready,
gives the scheduler's reason or every container's waiting / terminated reason (with the last
exit of a restarting one), then its most recent Warning Events (core/v1 events, field selector
``involvedObject.name``); the object's own Warning Events come first. At most ``MAX_PODS``
pods and ``MAX_EVENTS`` events each, so the message stays readable. A report that cannot be
read (forbidden, API down) says so in one line: it never hides the wait's own error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nrl_k8s.errors import ApiError
from nrl_k8s.kinds import dgd, pod, raycluster
from nrl_k8s.kinds.base import Kind
from nrl_k8s.kinds.core import EVENT
from nrl_k8s.kinds.readiness import condition

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

MAX_PODS = 5
MAX_EVENTS = 3


def pod_selector(kind: Kind, name: str) -> str | None:
    """The label selector of the pods a RayCluster or DGD ``name`` runs (None for other kinds)."""
    if kind == raycluster.KIND:
        return raycluster.pod_selector(name)
    if kind.plural == dgd.KIND.plural and kind.group == dgd.KIND.group:
        return dgd.pod_selector(name)
    return None


def report(kube: Kube, namespace: str, selector: str, owner: tuple[Kind, str] | None = None) -> str:
    """Indented lines on the owner's Warning Events and on each pod matching ``selector`` that is not Ready."""
    try:
        lines = [f"  {kind.kind} {name}: {event}" for kind, name in filter(None, [owner])
                 for event in warnings(kube, namespace, name, kind.kind)]
        pods = sorted(kube.list(pod.KIND, namespace, label_selector=selector), key=lambda p: p["metadata"]["name"])
        failing = [p for p in pods if not pod.containers_ready(p)]
        for item in failing[:MAX_PODS]:
            name = item["metadata"]["name"]
            lines.append(f"  pod {name}: {'; '.join(reasons(item))}")
            lines += [f"    {event}" for event in warnings(kube, namespace, name, "Pod")]
        if len(failing) > MAX_PODS:
            lines.append(f"  ... and {len(failing) - MAX_PODS} more pods not ready")
        if not pods:
            lines.append(f"  no pods yet ({selector})")
    except ApiError as err:
        return f"\n  (could not read its pods and events: {err.message})"
    return "\n" + "\n".join(lines) if lines else ""


def reasons(item: dict) -> list[str]:
    """Why one pod is not ready: unscheduled (the root cause), else each container's state."""
    scheduled = condition(item, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        return [": ".join(str(scheduled[k]) for k in ("reason", "message") if scheduled.get(k)) or "not scheduled"]
    status = item.get("status") or {}
    found = []
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        if container.get("ready"):
            continue
        state, last = container.get("state") or {}, (container.get("lastState") or {}).get("terminated")
        text = f"container {container.get('name')}: " + (
            _detail(state["waiting"]) if state.get("waiting") else
            "terminated " + _exit(state["terminated"]) if state.get("terminated") else "running, not ready")
        if last and container.get("restartCount"):
            text += f" (restarted {container['restartCount']}x, last exit {_exit(last)})"
        found.append(text)
    return found or [f"phase {status.get('phase') or 'Unknown'}"]


def warnings(kube: Kube, namespace: str, name: str, kind: str) -> list[str]:
    """The most recent Warning Events about the object ``kind``/``name``, oldest first; Events of
    the same reason and message (a scheduler retrying writes a new one) are one line, their counts summed."""
    events = [e for e in kube.list(EVENT, namespace, field_selector=f"involvedObject.name={name}")
              if e.get("type") == "Warning" and (e.get("involvedObject") or {}).get("kind") in (kind, None)]
    events.sort(
        key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or e["metadata"].get("creationTimestamp") or ""
    )
    counts: dict[tuple[str, str], int] = {}
    for event in events:  # popped and put back: the order is that of each one's latest Event
        key = (event.get("reason") or "?", (event.get("message") or "").strip())
        counts[key] = counts.pop(key, 0) + (event.get("count") or 1)
    return [f"Warning {reason}{f' (x{count})' if count > 1 else ''}: {message}"
            for (reason, message), count in list(counts.items())[-MAX_EVENTS:]]


def _detail(state: dict) -> str:
    return ": ".join(str(state[k]) for k in ("reason", "message") if state.get(k)) or "waiting"


def _exit(terminated: dict) -> str:
    text = f"{terminated.get('reason') or 'exited'} (exit code {terminated.get('exitCode', '?')})"
    return f"{text}: {terminated['message'].strip()}" if terminated.get("message") else text
