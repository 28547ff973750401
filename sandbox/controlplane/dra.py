"""DRA on the real control plane: the devices the NVIDIA drivers would publish, and ComputeDomains.

The real kube-scheduler allocates a pod's ResourceClaims from ResourceSlices. ``devices()`` is
what the drivers would publish on each GPU node (our kwok nodes): a DeviceClass per driver, and
per node a ResourceSlice of RoCE NICs (``roce.nvidia.com``, 8 per node, as upstream's GB300 nodes
have) and of IMEX channels (``compute-domain.nvidia.com``). So claims are really allocated, and a
pod whose claims cannot be satisfied stays Pending with the scheduler's reason, as on a cluster.

``ComputeDomains`` stands in for the NVIDIA DRA driver's controller: a ComputeDomain
(``resource.nvidia.com/v1beta1``) gets ``status.status: NotReady``, the channel
ResourceClaimTemplate its ``spec.channel.resourceClaimTemplate.name`` names (controller-owned by
it, so the real garbage collector deletes it with it), then ``Ready``. No IMEX daemon runs, and
``status.nodes`` stays empty.
"""

from __future__ import annotations

from .controller import Controller, Resource, controller_ref

COMPUTEDOMAIN = Resource("resource.nvidia.com", "v1beta1", "computedomains")
RESOURCECLAIMTEMPLATE = Resource("resource.k8s.io", "v1", "resourceclaimtemplates")
DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"

#: DeviceClass name -> (driver, devices per GPU node).
DRIVERS = {
    "roce.nvidia.com": ("roce.nvidia.com", 8),
    CHANNEL_CLASS: (DRIVER, 8),
}


def devices(nodes: list[str]) -> list[dict]:
    """The DeviceClasses, and one ResourceSlice per node and driver."""
    objects: list[dict] = []
    for device_class, (driver, count) in DRIVERS.items():
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": device_class},
                        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}})
        for node in nodes:
            objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                            "metadata": {"name": f"{node}-{driver.replace('.', '-')}"},
                            "spec": {"driver": driver, "nodeName": node,
                                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                                     "devices": [{"name": f"dev-{i}"} for i in range(count)]}})
    return objects


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
        self.enqueue("ready_domain", namespace, name)

    def ready_domain(self, namespace: str, name: str) -> None:
        if self.get(COMPUTEDOMAIN, namespace, name) is not None:
            self.patch_status(COMPUTEDOMAIN, namespace, name, {"status": "Ready", "nodes": []})
