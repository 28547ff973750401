"""The NVIDIA DRA driver's ComputeDomain controller on the real control plane.

What the simulator's does (``operators.dra``), through the real API server: a ComputeDomain gets
the channel ResourceClaimTemplate its ``spec.channel.resourceClaimTemplate.name`` names
(``resource.k8s.io/v1``, device class ``compute-domain-default-channel.nvidia.com``, controller-owned
by the ComputeDomain, so the real garbage collector deletes it with it), ``status.status:
NotReady``, then ``Ready``. No IMEX daemon runs and no claim is ever allocated.
"""

from __future__ import annotations

import kubernetes

from ..faults import Faults
from ..operators import dra
from ..operators.base import Timing


class ComputeDomains(dra.ComputeDomains):
    def __init__(self, api_client: kubernetes.client.ApiClient, faults: Faults):
        super().__init__(api_client, Timing(faults), faults)
