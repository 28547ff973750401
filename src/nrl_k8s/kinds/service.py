"""Core v1 Service: descriptor and the two ways to reach a Service's HTTP port."""

from __future__ import annotations

from .base import Kind

KIND = Kind("", "v1", "services", "Service")


def cluster_url(name: str, namespace: str, port: int) -> str:
    """Base URL of the Service from inside the cluster (cluster DNS)."""
    return f"http://{name}.{namespace}.svc:{port}"


def proxy_path(name: str, namespace: str, port: int) -> str:
    """API server path that proxies to the Service's port (append the request path)."""
    return f"/api/v1/namespaces/{namespace}/services/{name}:{port}/proxy"
