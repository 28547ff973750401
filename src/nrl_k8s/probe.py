"""The cluster half of `check`: namespace, CRDs and RBAC, when a kubeconfig is usable."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ApiError
from .kinds import core

HELMFILE_HINT = "install the operators: helmfile -f helm/helmfile.yaml apply"
CRDS = {"RayJob": "rayjobs.ray.io", "RayCluster": "rayclusters.ray.io"}
DGD_CRD = "dynamographdeployments.nvidia.com"
# (verb, resource, group) a `run --rayjob` needs.
RUN_VERBS = (
    ("create", "rayjobs", "ray.io"), ("get", "rayjobs", "ray.io"), ("watch", "rayjobs", "ray.io"),
    ("delete", "rayjobs", "ray.io"), ("get", "rayclusters", "ray.io"), ("watch", "rayclusters", "ray.io"),
    ("create", "secrets", ""), ("patch", "secrets", ""), ("list", "pods", ""), ("get", "services/proxy", ""),
)
DGD_VERBS = (
    ("create", "dynamographdeployments", "nvidia.com"), ("patch", "dynamographdeployments", "nvidia.com"),
    ("delete", "dynamographdeployments", "nvidia.com"), ("watch", "dynamographdeployments", "nvidia.com"),
)


@dataclass(frozen=True)
class Probe:
    name: str
    ok: bool
    detail: str = ""
    hint: str = ""


def probe(kube, infra: dict) -> list[Probe]:
    ns = infra["namespace"]
    results = [Probe(f"namespace {ns}", kube.find(core.NAMESPACE, ns) is not None,
                     hint=f"kubectl create namespace {ns}")]
    crds = dict(CRDS)
    if infra.get("dynamo"):
        crds["DynamoGraphDeployment"] = DGD_CRD
    for kind, crd in crds.items():
        results.append(Probe(f"CRD {crd}", kube.crd_installed(crd), f"{kind} not served", HELMFILE_HINT))
    for verb, resource, group in RUN_VERBS + (DGD_VERBS if infra.get("dynamo") else ()):
        what = f"{resource}.{group}" if group else resource
        try:
            allowed = kube.can_i(verb, resource, group=group, namespace=ns)
        except ApiError as err:
            results.append(Probe(f"RBAC {verb} {what}", False, err.message, err.hint or ""))
            continue
        results.append(Probe(f"RBAC {verb} {what}", allowed, "denied",
                             f"ask your admin for a Role allowing {verb} on {what} in {ns}"))
    return results
