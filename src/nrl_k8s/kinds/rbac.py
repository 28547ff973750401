"""RBAC in one namespace: Role and RoleBinding descriptors and the pure rendering of a
ServiceAccount, the Role that grants it rules and the RoleBinding between them."""

from __future__ import annotations

from .base import Kind
from .core import SERVICE_ACCOUNT

GROUP = "rbac.authorization.k8s.io"
ROLE = Kind(GROUP, "v1", "roles", "Role")
ROLE_BINDING = Kind(GROUP, "v1", "rolebindings", "RoleBinding")


def service_account_subject(name: str, namespace: str) -> str:
    """The user name a ServiceAccount's requests carry (``kubectl --as`` takes it)."""
    return f"system:serviceaccount:{namespace}:{name}"


def render_service_account(name: str, namespace: str, labels: dict) -> dict:
    return {"apiVersion": SERVICE_ACCOUNT.api_version, "kind": SERVICE_ACCOUNT.kind,
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)}}


def render_role(name: str, namespace: str, labels: dict, rules: list[dict]) -> dict:
    return {"apiVersion": ROLE.api_version, "kind": ROLE.kind,
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)}, "rules": rules}


def render_role_binding(name: str, namespace: str, labels: dict, role: str, service_account: str) -> dict:
    """Binds the Role ``role`` to the ServiceAccount ``service_account``, both in ``namespace``."""
    return {"apiVersion": ROLE_BINDING.api_version, "kind": ROLE_BINDING.kind,
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "roleRef": {"apiGroup": GROUP, "kind": ROLE.kind, "name": role},
            "subjects": [{"kind": SERVICE_ACCOUNT.kind, "name": service_account, "namespace": namespace}]}
