"""The cluster half of `check`: namespace, CRDs and RBAC, when a kubeconfig is usable."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ApiError, ForbiddenError, UnauthorizedError
from .kinds import core

HELMFILE_HINT = "install the operators: helmfile -f helm/helmfile.yaml apply"
CRDS = {"RayJob": "rayjobs.ray.io", "RayCluster": "rayclusters.ray.io"}
DGD_CRD = "dynamographdeployments.nvidia.com"


@dataclass(frozen=True)
class Permission:
    verb: str
    resource: str  # plural, or plural/subresource
    group: str = ""

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}.{self.group}" if self.group else f"{self.verb} {self.resource}"


def run_permissions(manifests: list[dict], *, proxy: bool) -> list[Permission]:
    """Every verb a run that applies ``manifests`` uses in its namespace (verified before anything is created).

    Each applied kind: get/list (waits), create, patch (owners, DGD users), delete (rollback).
    ``watch`` is left out: every wait falls back to polling without it. The RayCluster a RayJob
    makes is followed and pods are listed for readiness. ``proxy``: the Ray dashboard, the DGD
    frontends and health URLs are reached through the API server's service proxy.
    """
    from .kinds.index import kind_of

    kinds = list(dict.fromkeys(kind_of(m) for m in manifests))
    needed = [Permission(v, k.plural, k.group) for k in kinds for v in ("get", "list", "create", "patch", "delete")]
    needed += [Permission("list", "rayclusters", "ray.io"), Permission("list", "pods")]
    if proxy:
        needed += [Permission(v, "services/proxy") for v in ("get", "create", "update")]
    return list(dict.fromkeys(needed))


def missing_permissions(kube, needed: list[Permission], namespace: str) -> list[Permission]:
    """The permissions a SelfSubjectAccessReview denies (ApiError when the review itself fails)."""
    return [p for p in needed if not kube.can_i(p.verb, p.resource, group=p.group, namespace=namespace)]


@dataclass(frozen=True)
class Probe:
    name: str
    ok: bool
    detail: str = ""
    hint: str = ""


def probe(kube, infra: dict, manifests: list[dict]) -> list[Probe]:
    """Namespace, CRDs, and every permission a run applying ``manifests`` needs."""
    ns = infra["namespace"]
    try:
        results = [Probe(f"namespace {ns}", kube.find(core.NAMESPACE, ns) is not None,
                         hint=f"kubectl create namespace {ns}")]
    except ForbiddenError:  # a namespace-scoped user may not read namespaces; the RBAC rows still tell
        results = [Probe(f"namespace {ns} (not verified: no permission to get namespaces)", True)]
    crds = dict(CRDS)
    if infra.get("dynamo"):
        crds["DynamoGraphDeployment"] = DGD_CRD
    for kind, crd in crds.items():
        results.append(Probe(f"CRD {crd}", kube.crd_installed(crd), f"{kind} not served", HELMFILE_HINT))
    for permission in run_permissions(manifests, proxy=not kube.in_cluster):
        try:
            allowed = not missing_permissions(kube, [permission], ns)
        except UnauthorizedError:
            raise
        except ApiError as err:
            results.append(Probe(f"RBAC {permission}", False, err.message, err.hint or ""))
            continue
        results.append(Probe(f"RBAC {permission}", allowed, "denied",
                             f"ask your admin for a Role allowing {permission} in {ns}"))
    return results
