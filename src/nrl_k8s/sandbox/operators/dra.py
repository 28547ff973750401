"""Simulated NVIDIA DRA driver controller: ComputeDomains become Ready.

A ComputeDomain (``resource.nvidia.com/v1beta1``) → ``status.status: NotReady``, the channel
ResourceClaimTemplate its ``spec.channel.resourceClaimTemplate.name`` names (in its namespace,
``resource.k8s.io/v1``, controller-owned by the ComputeDomain, so garbage collection takes it
with it; the real driver creates it too), then after a delay ``status.status: Ready``. No IMEX
daemon, node, GPU or channel exists: ``status.nodes`` stays empty, and claims are never allocated.
"""

from __future__ import annotations

import logging

from .base import Controller, Resource, controller_ref

log = logging.getLogger("nrl_k8s.sandbox.operators.dra")

COMPUTEDOMAIN = Resource("resource.nvidia.com", "v1beta1", "computedomains")
RESOURCECLAIMTEMPLATE = Resource("resource.k8s.io", "v1", "resourceclaimtemplates")
READY_S = 0.5
DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"


def channel_template(domain: dict) -> dict | None:
    """The channel ResourceClaimTemplate the driver creates for ``domain`` (None: none named)."""
    meta, channel = domain["metadata"], (domain.get("spec") or {}).get("channel") or {}
    name = (channel.get("resourceClaimTemplate") or {}).get("name")
    if not name:
        return None
    parameters = {
        "apiVersion": COMPUTEDOMAIN.group + "/" + COMPUTEDOMAIN.version,
        "kind": "ComputeDomainChannelConfig",
        "domainID": meta["uid"],
        "allocationMode": channel.get("allocationMode", "Single"),
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {"resource.nvidia.com/computeDomain": meta["uid"]},
            "ownerReferences": [controller_ref(domain)],
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}}],
                    "config": [{"requests": ["channel"], "opaque": {"driver": DRIVER, "parameters": parameters}}],
                }
            }
        },
    }


class ComputeDomains(Controller):
    name = "dra"

    def watches(self):
        return [(COMPUTEDOMAIN, self._on_domain)]

    def _on_domain(self, kind: str, obj: dict) -> None:
        if kind != "DELETED" and (obj.get("status") or {}).get("status") != "Ready":
            self.enqueue("sync_domain", obj["metadata"]["namespace"], obj["metadata"]["name"])

    def sync_domain(self, namespace: str, name: str) -> None:
        domain = self.get(COMPUTEDOMAIN, namespace, name)
        if domain is None or (domain.get("status") or {}).get("status") == "Ready":
            return
        template = channel_template(domain)
        if template is not None:
            self.create_core(
                lambda ns, body: self.custom.create_namespaced_custom_object(
                    RESOURCECLAIMTEMPLATE.group, RESOURCECLAIMTEMPLATE.version, ns, RESOURCECLAIMTEMPLATE.plural, body
                ),
                namespace,
                template,
            )
        if not domain.get("status"):
            self.patch_status(COMPUTEDOMAIN, namespace, name, {"status": "NotReady", "nodes": []})
        self.later(self.timing.delay(READY_S), "ready_domain", namespace, name)

    def ready_domain(self, namespace: str, name: str) -> None:
        if self.get(COMPUTEDOMAIN, namespace, name) is not None:
            self.patch_status(COMPUTEDOMAIN, namespace, name, {"status": "Ready", "nodes": []})
