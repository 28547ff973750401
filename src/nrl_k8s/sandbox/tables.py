"""Server-side printing: ``meta.k8s.io/v1`` ``Table`` responses, as kubectl requests for ``get``.

Columns for custom resources come from the CRD's ``additionalPrinterColumns`` (JSONPath
subset: ``.a.b``, ``.a[0]``, ``.a[?(@.k=="v")].b``); built-in kinds get the familiar kubectl
columns for pods, services, namespaces, configmaps and secrets, the server's own for events (Last
Seen first, no Name column unless wide), others Name + Age.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Callable

from nrl_k8s.sandbox.discovery import ResourceType

_STEP_RE = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\?\(@\.([^=!]+)==[\"']?([^\"')]*)[\"']?\)\]")


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def json_path(obj: object, path: str) -> object:
    """Evaluate the JSONPath subset above; None when a step is missing."""
    current = obj
    for m in _STEP_RE.finditer(path):
        key, index, filter_key, filter_value = m.groups()
        if key is not None:
            current = current.get(key) if isinstance(current, dict) else None
        elif index is not None:
            current = current[int(index)] if isinstance(current, list) and int(index) < len(current) else None
        else:
            current = next(
                (i for i in current or [] if isinstance(i, dict) and str(i.get(filter_key)) == filter_value), None
            ) if isinstance(current, list) else None
        if current is None:
            return None
    return current


def age(timestamp: str | None) -> str:
    """kubectl-style age (``45s``, ``12m``, ``3h``, ``2d``) of an RFC 3339 timestamp."""
    if not timestamp:
        return "<unknown>"
    then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    seconds = max(0, int((datetime.now(timezone.utc) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _pod_cells(pod: dict) -> list:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    containers = (pod.get("spec") or {}).get("containers") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    waiting = next((s["state"]["waiting"].get("reason") for s in statuses if (s.get("state") or {}).get("waiting")), None)
    phase = waiting or (pod.get("status") or {}).get("reason") or (pod.get("status") or {}).get("phase", "")
    if pod["metadata"].get("deletionTimestamp"):
        phase = "Terminating"
    return [f"{ready}/{len(containers)}", phase, restarts]


def _service_cells(svc: dict) -> list:
    spec = svc.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []) or "<none>"
    return [spec.get("type", "ClusterIP"), spec.get("clusterIP", "<none>"), "<none>", ports]


_BUILTIN_COLUMNS = {
    "Pod": (["Ready", "Status", "Restarts"], _pod_cells),
    "Service": (["Type", "Cluster-IP", "External-IP", "Port(s)"], _service_cells),
    "Namespace": (["Status"], lambda o: [(o.get("status") or {}).get("phase", "")]),
    "ConfigMap": (["Data"], lambda o: [len(o.get("data") or {}) + len(o.get("binaryData") or {})]),
    "Secret": (["Type", "Data"], lambda o: [o.get("type", ""), len(o.get("data") or {})]),
}


def _event_row(event: dict) -> list:
    """The real server's Event columns: Last Seen, Type, Reason, Object, Subobject, Source,
    Message, First Seen, Count, Name (those after Object but Message only with ``-o wide``)."""
    involved, source = event.get("involvedObject") or {}, event.get("source") or {}
    last = event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
    first = event.get("firstTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
    origin = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return [age(_seconds(last)), event.get("type", ""), event.get("reason", ""),
            f"{involved.get('kind', '').lower()}/{involved.get('name', '')}", involved.get("fieldPath", ""),
            f"{origin}, {host}" if host else origin, event.get("message", ""),
            age(_seconds(first)), event.get("count") or 1, event["metadata"]["name"]]


def _seconds(stamp: str | None) -> str | None:
    """An RFC 3339 time cut to seconds (``eventTime`` has microseconds), as ``age`` reads it."""
    return stamp[:19] + "Z" if stamp else None


_EVENT_COLUMNS = [("Last Seen", 0), ("Type", 0), ("Reason", 0), ("Object", 0), ("Subobject", 1), ("Source", 1),
                  ("Message", 0), ("First Seen", 1), ("Count", 1), ("Name", 1)]


def _columns(rtype: ResourceType) -> tuple[list[dict], Callable[[dict], list]]:
    def column(name: str, type_: str = "string", priority: int = 0) -> dict:
        return {"name": name, "type": type_, "format": "name" if name == "Name" else "", "description": name, "priority": priority}

    if rtype.kind == "Event" and not rtype.group:
        return [column(n, "integer" if n == "Count" else "string", p) for n, p in _EVENT_COLUMNS], _event_row
    if rtype.printer_columns:
        cols = [column("Name")] + [column(c["name"], c.get("type", "string"), c.get("priority", 0)) for c in rtype.printer_columns]

        def cells(obj: dict) -> list:
            values = []
            for c in rtype.printer_columns:
                value = json_path(obj, c["jsonPath"])
                values.append(age(value) if c.get("type") == "date" and value else value)
            return values

        return cols, cells
    names, cells = _BUILTIN_COLUMNS.get(rtype.kind, ([], lambda o: []))
    cols = [column("Name")] + [column(n) for n in names]
    if not rtype.printer_columns:
        cols.append(column("Age"))
        inner = cells
        cells = lambda o: inner(o) + [age(o["metadata"].get("creationTimestamp"))]  # noqa: E731
    return cols, cells


def table(rtype: ResourceType, objects: list[dict], resource_version: str) -> dict:
    columns, cells = _columns(rtype)
    named = columns[0]["name"] == "Name"  # every kind's first column but the Event's
    rows = [
        {
            "cells": ([obj["metadata"]["name"]] if named else []) + cells(obj),
            "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]},
        }
        for obj in objects
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    }
