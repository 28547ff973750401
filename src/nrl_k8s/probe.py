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


def run_permissions(*, dynamo: bool, proxy: bool) -> list[Permission]:
    """Every verb `run --rayjob` uses in its namespace (``run`` verifies them before creating anything).

    ``watch`` is left out: every wait falls back to polling without it. ``proxy``: the Ray
    dashboard and the DGD frontends are reached through the API server's service proxy.
    """
    needed = [Permission(v, "rayjobs", "ray.io") for v in ("get", "list", "create", "delete")]
    needed.append(Permission("list", "rayclusters", "ray.io"))
    # The run's Secret (recipe and secret env values), owned by the RayJob.
    needed += [Permission(v, "secrets") for v in ("get", "create", "patch", "delete")]
    if dynamo:
        needed += [Permission(v, "dynamographdeployments", "nvidia.com") for v in ("get", "list", "create", "patch", "delete")]
        needed.append(Permission("list", "pods"))
    if proxy:
        needed += [Permission("get", "services/proxy"), Permission("create", "services/proxy")]
    return needed


def longlived_permissions(plan, *, proxy: bool) -> list[Permission]:
    """Every verb `run --raycluster` uses for ``plan`` (a ``plan.LongLivedPlan``)."""
    needed = [Permission(v, "rayclusters", "ray.io") for v in ("get", "list", "create", "delete")]
    needed += [Permission("list", "pods")]
    if plan.deployments:
        needed += [Permission(v, "deployments", "apps") for v in ("get", "create", "delete")]
        needed += [Permission(v, "services") for v in ("get", "create", "delete")]
    groups = {(m["apiVersion"].split("/")[0], m["kind"].lower() + "s") for objs in plan.dra.values() for m in objs}
    for group, plural in sorted(groups):
        needed += [Permission(v, plural, group) for v in ("get", "create", "delete")]
    if plan.env_secrets:
        needed += [Permission(v, "secrets") for v in ("get", "create", "delete")]
    if plan.dgds:
        needed += [Permission(v, "dynamographdeployments", "nvidia.com") for v in ("get", "list", "create", "patch", "delete")]
    if proxy:
        needed += [Permission("get", "services/proxy"), Permission("create", "services/proxy"),
                   Permission("update", "services/proxy")]
    return needed


def missing_permissions(kube, needed: list[Permission], namespace: str) -> list[Permission]:
    """The permissions a SelfSubjectAccessReview denies (ApiError when the review itself fails)."""
    return [p for p in needed if not kube.can_i(p.verb, p.resource, group=p.group, namespace=namespace)]


@dataclass(frozen=True)
class Probe:
    name: str
    ok: bool
    detail: str = ""
    hint: str = ""


def probe(kube, infra: dict) -> list[Probe]:
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
    for permission in run_permissions(dynamo=bool(infra.get("dynamo")), proxy=not kube.in_cluster):
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
