"""DRA on the real control plane: the devices the NVIDIA drivers would publish, and ComputeDomains.

The real kube-scheduler allocates a pod's ResourceClaims from ResourceSlices. ``devices()`` is
what the drivers would publish on each GPU node (our kwok nodes): a DeviceClass per driver, and
per node a ResourceSlice of RoCE NICs (``roce.nvidia.com``, 8 per node, as upstream's GB300 nodes
have) and of IMEX channels (``compute-domain.nvidia.com``). So claims are really allocated, and a
pod whose claims cannot be satisfied stays Pending with the scheduler's reason, as on a cluster.

``ComputeDomains`` is the simulator's controller (``operators.dra``) through the real API server:
a ComputeDomain gets the channel ResourceClaimTemplate its ``spec.channel.resourceClaimTemplate.name``
names (controller-owned by it, so the real garbage collector deletes it with it), then ``Ready``.
No IMEX daemon runs.
"""

from __future__ import annotations

import kubernetes

from ..faults import Faults
from ..operators import dra
from ..operators.base import Timing

#: DeviceClass name -> (driver, devices per GPU node).
DRIVERS = {
    "roce.nvidia.com": ("roce.nvidia.com", 8),
    dra.CHANNEL_CLASS: ("compute-domain.nvidia.com", 8),
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


class ComputeDomains(dra.ComputeDomains):
    def __init__(self, api_client: kubernetes.client.ApiClient, faults: Faults):
        super().__init__(api_client, Timing(faults), faults)
