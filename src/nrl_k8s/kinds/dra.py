"""DRA objects a run's pods claim: per-owner ComputeDomain and RoCE ResourceClaimTemplate.

Pods consume DRA devices through ``spec.resourceClaims[{name, resourceClaimTemplateName}]``.
Two claim names are special; each gets an object of its owner's own (the RayCluster, or the
RayJob whose cluster is made later), so two clusters never share one:

- ``compute-domain-channel`` → ComputeDomain ``<owner>-cd`` (``resource.nvidia.com/v1beta1``)
  with ``channel.resourceClaimTemplate.name`` = ``<owner>-cd-channel`` (the NVIDIA DRA driver
  creates that template for the IMEX channels); the claim is rewritten to ``<owner>-cd-channel``.
  ``numNodes``: ``infra.dra.computeDomain.numNodes`` if set, else the pods that claim it. We
  follow the meaning of the NVIDIA DRA driver for GPUs v25.3.0 (the first release of the
  ``v1beta1`` ComputeDomain): the number of nodes the domain spans, the domain being Ready once
  that many IMEX daemons are. Upstream's GB300 examples set 0 (the domain does not wait for a
  node count), which ``infra.dra.computeDomain.numNodes: 0`` gives.
- ``roce-channel`` → ResourceClaimTemplate ``<owner>-roce`` (``resource.k8s.io/v1``) with one
  request ``roce`` for ``exactly{deviceClassName, count}``; the claim is rewritten to it.
  ``deviceClassName``: ``infra.dra.roce.deviceClassName`` (the DeviceClass your RoCE driver
  publishes; default ``roce.nvidia.com``; upstream's GB300 cluster: ``roce.networking.k8s.aws``).
  ``count``: ``infra.dra.roce.count`` (upstream: 8), else the most GPUs (``nvidia.com/gpu``) one
  claiming pod's containers ask for, at least 1 — one RoCE NIC per GPU, as on GB300 trays.

A template name the claim already gave is replaced (it names nothing nrl-k8s creates), and so
is a shared ResourceClaim (``resourceClaimName``). A DGD's pods claim the same names: they are
wired to the training cluster's objects (``wire_claims``), which the DGD then shares.
The objects carry the managed-by label and the infra labels; the run adds the ownerReference.
"""

from __future__ import annotations

from ..errors import ConfigError
from .base import MANAGED_BY, Kind, object_metadata
from .readiness import Pending, Readiness, Ready

COMPUTE_DOMAIN = Kind("resource.nvidia.com", "v1beta1", "computedomains", "ComputeDomain")
RESOURCE_CLAIM_TEMPLATE = Kind("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate")
KINDS = (COMPUTE_DOMAIN, RESOURCE_CLAIM_TEMPLATE)
DEVICE_CLASS = Kind("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False)

COMPUTE_DOMAIN_CLAIM = "compute-domain-channel"
ROCE_CLAIM = "roce-channel"
ROCE_REQUEST = "roce"
DEFAULT_ROCE_DEVICE_CLASS = "roce.nvidia.com"
GPU_RESOURCE = "nvidia.com/gpu"  # a container's GPUs (the NVIDIA device plugin's resource)


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
    cd_pods, roce_pods, roce_gpus = 0, 0, 1
    for pod in pod_specs:
        for claim in pod.get("resourceClaims") or []:
            if claim.get("name") in templates_of(owner_name):
                _rewrite(claim, templates_of(owner_name)[claim["name"]])
            if claim.get("name") == COMPUTE_DOMAIN_CLAIM:
                cd_pods += 1
            elif claim.get("name") == ROCE_CLAIM:
                roce_pods += 1
                roce_gpus = max(roce_gpus, _gpus(pod))
    settings = infra.get("dra") or {}
    objects = []
    if cd_pods:
        nodes = (settings.get("computeDomain") or {}).get("numNodes", cd_pods)
        spec = {"numNodes": nodes, "channel": {"resourceClaimTemplate": {"name": channel_template_name(owner_name)}}}
        objects.append(_object(COMPUTE_DOMAIN, compute_domain_name(owner_name), infra, spec))
    if roce_pods:
        roce = settings.get("roce") or {}
        device_class = roce.get("deviceClassName") or DEFAULT_ROCE_DEVICE_CLASS
        request = {
            "name": ROCE_REQUEST,
            "exactly": {"deviceClassName": device_class, "count": roce.get("count") or roce_gpus},
        }
        objects.append(_object(RESOURCE_CLAIM_TEMPLATE, roce_template_name(owner_name), infra,
                               {"spec": {"devices": {"requests": [request]}}}))
    return objects


def device_classes(manifests: list[dict]) -> list[str]:
    """The DeviceClasses the ResourceClaimTemplates among ``manifests`` ask for (``exactly`` and
    ``firstAvailable`` requests), each once."""
    names = []
    for manifest in manifests:
        if manifest.get("kind") == RESOURCE_CLAIM_TEMPLATE.kind:
            for request in ((manifest["spec"].get("spec") or {}).get("devices") or {}).get("requests") or []:
                names += [choice["deviceClassName"] for choice in [request.get("exactly") or {},
                                                                   *(request.get("firstAvailable") or [])]
                          if choice.get("deviceClassName")]
    return list(dict.fromkeys(names))


def templates_of(owner_name: str) -> dict[str, str]:
    """Claim name → the template ``owner_name``'s pods (and the DGDs wired to it) claim through it."""
    return {COMPUTE_DOMAIN_CLAIM: channel_template_name(owner_name), ROCE_CLAIM: roce_template_name(owner_name)}


def wire_claims(pod_specs: list[dict], objects: list[dict], owner_name: str, where: str) -> None:
    """Point the special claims of ``pod_specs`` (a DGD's pods) at ``owner_name``'s templates,
    which ``objects`` (the training cluster's DRA objects) must create; else a ConfigError."""
    made = {obj["metadata"]["name"] for obj in objects if obj["kind"] == RESOURCE_CLAIM_TEMPLATE.kind}
    made |= {
        obj["spec"]["channel"]["resourceClaimTemplate"]["name"] for obj in objects if obj["kind"] == COMPUTE_DOMAIN.kind
    }
    for pod in pod_specs:
        for claim in pod.get("resourceClaims") or []:
            template = templates_of(owner_name).get(claim.get("name"))
            if template is None:
                continue
            if template not in made:
                raise ConfigError(
                    f"{where}: a pod claims {claim['name']}, which the training cluster's workers do not claim",
                    hint=f"a DGD shares the training cluster's DRA objects: add the {claim['name']} claim to "
                         f"kuberay.training's workers, or remove it from the DGD")
            _rewrite(claim, template)


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
