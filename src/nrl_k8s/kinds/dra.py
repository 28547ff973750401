"""DRA objects a run's pods claim: per-owner ComputeDomain and RoCE ResourceClaimTemplate.

Pods consume DRA devices through ``spec.resourceClaims[{name, resourceClaimTemplateName}]``.
Two claim names are special; each gets an object of its owner's own (the RayCluster, or the
RayJob whose cluster is made later), so two clusters never share one:

- ``compute-domain-channel`` → ComputeDomain ``<owner>-cd`` (``resource.nvidia.com/v1beta1``)
  with ``numNodes`` = the pods that claim it and ``channel.resourceClaimTemplate.name`` =
  ``<owner>-cd-channel`` (the NVIDIA DRA driver creates that template for the IMEX channels);
  the claim is rewritten to ``<owner>-cd-channel``.
- ``roce-channel`` → ResourceClaimTemplate ``<owner>-roce`` (``resource.k8s.io/v1``) with one
  request ``roce`` for ``exactly{deviceClassName, count}``; the claim is rewritten to it.
  ``deviceClassName``: the template name the infra's claim gave (name there the DeviceClass
  your RoCE driver publishes), else ``roce.nvidia.com``. ``count``: the most GPUs
  (``nvidia.com/gpu``) one claiming pod's containers ask for, at least 1 — one RoCE NIC per
  GPU, as on GB300 compute trays.

A claim that named a shared ResourceClaim (``resourceClaimName``) is rewritten the same way.
The objects carry the managed-by label and the infra labels; the run adds the ownerReference.
"""

from __future__ import annotations

from ..errors import ConfigError
from .base import MANAGED_BY, Kind, Pending, Readiness, Ready, object_metadata

COMPUTE_DOMAIN = Kind("resource.nvidia.com", "v1beta1", "computedomains", "ComputeDomain")
RESOURCE_CLAIM_TEMPLATE = Kind("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate")
KINDS = (COMPUTE_DOMAIN, RESOURCE_CLAIM_TEMPLATE)

COMPUTE_DOMAIN_CLAIM = "compute-domain-channel"
ROCE_CLAIM = "roce-channel"
ROCE_REQUEST = "roce"
DEFAULT_ROCE_DEVICE_CLASS = "roce.nvidia.com"
GPU_RESOURCE = "nvidia.com/gpu"


def compute_domain_name(owner: str) -> str:
    return f"{owner}-cd"


def channel_template_name(owner: str) -> str:
    """The ResourceClaimTemplate the NVIDIA DRA driver creates for ComputeDomain ``<owner>-cd``."""
    return f"{owner}-cd-channel"


def roce_template_name(owner: str) -> str:
    return f"{owner}-roce"


def render_for_pods(pod_specs: list[dict], owner_name: str, infra: dict) -> list[dict]:
    """The DRA objects of ``owner_name`` that ``pod_specs`` claim, rewriting the claims in place.

    ``pod_specs`` holds one entry per pod (a worker group's spec once per replica; repeats of
    one dict are fine). [] when no pod makes a special claim.
    """
    cd_pods, roce_pods, roce_gpus, roce_classes = 0, 0, 1, set()
    for pod in pod_specs:
        for claim in pod.get("resourceClaims") or []:
            if claim.get("name") == COMPUTE_DOMAIN_CLAIM:
                _rewrite(claim, channel_template_name(owner_name))
                cd_pods += 1
            elif claim.get("name") == ROCE_CLAIM:
                named = claim.get("resourceClaimTemplateName")
                if named and named != roce_template_name(owner_name):
                    roce_classes.add(named)
                _rewrite(claim, roce_template_name(owner_name))
                roce_pods += 1
                roce_gpus = max(roce_gpus, _gpus(pod))
    if len(roce_classes) > 1:
        raise ConfigError(
            f"the {ROCE_CLAIM} claims of {owner_name} name different templates ({', '.join(sorted(roce_classes))})",
            hint=f"{owner_name} gets one RoCE ResourceClaimTemplate: name the same DeviceClass in every {ROCE_CLAIM} claim",
        )
    objects = []
    if cd_pods:
        spec = {"numNodes": cd_pods, "channel": {"resourceClaimTemplate": {"name": channel_template_name(owner_name)}}}
        objects.append(_object(COMPUTE_DOMAIN, compute_domain_name(owner_name), infra, spec))
    if roce_pods:
        device_class = next(iter(roce_classes), DEFAULT_ROCE_DEVICE_CLASS)
        request = {"name": ROCE_REQUEST, "exactly": {"deviceClassName": device_class, "count": roce_gpus}}
        objects.append(_object(RESOURCE_CLAIM_TEMPLATE, roce_template_name(owner_name), infra,
                               {"spec": {"devices": {"requests": [request]}}}))
    return objects


def _rewrite(claim: dict, template: str) -> None:
    claim.pop("resourceClaimName", None)
    claim["resourceClaimTemplateName"] = template


def _gpus(pod: dict) -> int:
    """The most GPUs one container of the pod asks for (limits, else requests)."""
    counts = [0]
    for container in pod.get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(GPU_RESOURCE, (resources.get("requests") or {}).get(GPU_RESOURCE))
        counts.append(int(value or 0))
    return max(counts)


def _object(kind: Kind, name: str, infra: dict, spec: dict) -> dict:
    metadata = object_metadata(name, infra["namespace"], [MANAGED_BY, infra.get("labels")], [], key=())
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata, "spec": spec}


def readiness(obj: dict) -> Readiness:
    """A ComputeDomain is ready when the driver reports ``status.status: Ready``; a
    ResourceClaimTemplate as soon as it exists."""
    if obj.get("kind") != COMPUTE_DOMAIN.kind:
        return Ready()
    status = obj.get("status") or {}
    if status.get("status") == "Ready":
        return Ready()
    nodes = status.get("nodes") or []
    ready = sum(1 for node in nodes if node.get("status") == "Ready")
    wanted = (obj.get("spec") or {}).get("numNodes")
    detail = f"; {ready}/{wanted if wanted is not None else len(nodes)} nodes ready" if nodes else ""
    return Pending(f"ComputeDomain status {status.get('status') or 'not reported yet'}{detail}")
