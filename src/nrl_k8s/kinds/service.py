"""Core v1 Service: descriptor, the ClusterIP Service of a Deployment, and the two ways to reach
a Service's HTTP port."""

from __future__ import annotations

import copy
from urllib.parse import quote

from .base import Kind

KIND = Kind("", "v1", "services", "Service")


def render_for_deployment(deployment: dict) -> dict | None:
    """The ClusterIP Service named like ``deployment`` for its pod template's container ports.

    Same namespace and labels; the selector is the Deployment's ``matchLabels`` (its pod
    template labels when it selects by expressions only). One port per distinct container port
    and protocol: ``port`` and ``targetPort`` are the container port, the name is the port's
    own or ``port-<n>``, the protocol defaults to TCP. None when no container declares a port.
    """
    spec = deployment["spec"]
    ports: list[dict] = []
    seen: set[tuple] = set()
    for container in spec["template"]["spec"].get("containers") or []:
        for entry in container.get("ports") or []:
            number, protocol = entry["containerPort"], entry.get("protocol") or "TCP"
            if (number, protocol) in seen:
                continue
            seen.add((number, protocol))
            ports.append({"name": entry.get("name") or f"port-{number}", "port": number, "targetPort": number,
                          "protocol": protocol})
    if not ports:
        return None
    metadata = deployment["metadata"]
    selector = spec["selector"].get("matchLabels") or spec["template"]["metadata"]["labels"]
    return {
        "apiVersion": KIND.api_version,
        "kind": KIND.kind,
        "metadata": {"name": metadata["name"], "namespace": metadata["namespace"],
                     "labels": copy.deepcopy(metadata["labels"])},
        "spec": {"type": "ClusterIP", "selector": dict(selector), "ports": ports},
    }


def cluster_address(name: str, namespace: str, port: int) -> str:
    """``NAME.NS.svc:PORT``: the Service's port by its cluster DNS name (resolvable only inside a pod)."""
    return f"{name}.{namespace}.svc:{port}"


def cluster_url(name: str, namespace: str, port: int) -> str:
    """Base URL of the Service from inside the cluster (``cluster_address``, plain HTTP)."""
    return f"http://{cluster_address(name, namespace, port)}"


def proxy_path(name: str, namespace: str, port: int | str) -> str:
    """API server path that proxies to the Service's port, a number or a name (append the request path)."""
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/services/{quote(f'{name}:{port}', safe=':')}/proxy"
