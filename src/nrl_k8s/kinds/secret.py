"""Core v1 Secret: descriptor and pure rendering, plus the pod-side references to one.

Rendered with ``stringData`` (readable in a dry run with ``--show-secrets``); the API server
stores it base64-encoded in ``data``. Kubernetes refuses a Secret with more than 1 MiB of data.
"""

from __future__ import annotations

from ..errors import ConfigError
from .base import Kind, object_metadata

KIND = Kind("", "v1", "secrets", "Secret")
MAX_DATA_BYTES = 1024 * 1024


def render(name: str, namespace: str, labels: list[dict | None], data: dict[str, str], *, hint: str) -> dict:
    """An Opaque Secret holding ``data``; ConfigError (with ``hint``) when it is too big for Kubernetes."""
    size = sum(len(value.encode()) for value in data.values())
    if size > MAX_DATA_BYTES:
        raise ConfigError(
            f"Secret {name} would hold {size} bytes of data, more than Kubernetes allows ({MAX_DATA_BYTES})", hint=hint
        )
    metadata = object_metadata(name, namespace, labels, [], key=("launch",))
    return {"apiVersion": KIND.api_version, "kind": KIND.kind, "metadata": metadata, "type": "Opaque",
            "stringData": dict(data)}


def user_secret(user: str) -> str:
    """A user's own Secret, ``<user>-secrets``: ``dev setup-secrets`` writes it, upstream's DGDs read it
    (``envFromSecret: ${user:}-secrets``)."""
    return f"{user}-secrets"


def env_ref(env_name: str, secret_name: str, key: str) -> dict:
    """A container env entry read from ``key`` of the Secret."""
    return {"name": env_name, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": key}}}


def volume(volume_name: str, secret_name: str, keys: list[str]) -> dict:
    """A pod volume holding only ``keys`` of the Secret, each as a file of that name."""
    return {"name": volume_name, "secret": {"secretName": secret_name, "items": [{"key": k, "path": k} for k in keys]}}
