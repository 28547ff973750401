"""The cluster half of `check`: namespace, CRDs and RBAC, when a kubeconfig is usable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nrl_k8s.errors import ApiError, ForbiddenError, InfraError, UnauthorizedError
from nrl_k8s.kinds import core, crds, dra
from nrl_k8s.kube.errors import KindNotServedError

from . import fit

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube


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
    from nrl_k8s.kinds.index import kind_of

    kinds = list(dict.fromkeys(kind_of(m) for m in manifests))
    needed = [Permission(v, k.plural, k.group) for k in kinds for v in ("get", "list", "create", "patch", "delete")]
    needed += [Permission("list", "rayclusters", "ray.io"), Permission("list", "pods")]
    if proxy:
        needed += [Permission(v, "services/proxy") for v in ("get", "create", "update")]
    return list(dict.fromkeys(needed))


def missing_permissions(kube: Kube, needed: list[Permission], namespace: str) -> list[Permission]:
    """The permissions the cluster denies (ApiError when a review itself fails).

    One SelfSubjectRulesReview lists what the user's RBAC rules grant in the namespace; what one
    of them grants is allowed. The rest (all of them when the review is incomplete, i.e. an
    authorizer that cannot list rules such as a cloud's webhook takes part and may deny, or when
    it is refused) is asked with SelfSubjectAccessReviews, concurrently: the API server's decision.
    """
    rules = _granting_rules(kube, namespace)
    unsure = [p for p in needed if not any(grants(rule, p) for rule in rules)]
    if not unsure:
        return []
    from concurrent.futures import ThreadPoolExecutor

    def allowed(p: Permission) -> bool:
        return kube.can_i(p.verb, p.resource, group=p.group, namespace=namespace)

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(allowed, unsure))
    return [p for p, ok in zip(unsure, answers, strict=True) if not ok]


def grants(rule: dict, permission: Permission) -> bool:
    """Whether an RBAC rule (a SelfSubjectRulesReview ``resourceRule``) grants ``permission``, as
    RBAC matches it (kubernetes pkg/apis/rbac/v1/evaluation_helpers.go): the verb or ``*``, the
    API group or ``*``, the resource (``plural/sub`` for a subresource), ``*`` or ``*/sub``. A rule
    naming objects (``resourceNames``) grants only those: never a permission for any object."""
    if rule.get("resourceNames"):
        return False
    subresource = permission.resource.partition("/")[2]
    return (any(verb in ("*", permission.verb) for verb in rule.get("verbs") or [])
            and any(group in ("*", permission.group) for group in rule.get("apiGroups") or [])
            and any(resource in ("*", permission.resource) or (subresource and resource == f"*/{subresource}")
                    for resource in rule.get("resources") or []))


def _granting_rules(kube: Kube, namespace: str) -> list[dict]:
    """The rules of a complete SelfSubjectRulesReview; none when it is incomplete or refused."""
    try:
        status = kube.rules_review(namespace)
    except UnauthorizedError:
        raise
    except ApiError:
        return []
    return [] if status.get("incomplete") else list(status.get("resourceRules") or [])


@dataclass(frozen=True)
class Probe:
    """One row of ``check``'s CLUSTER section; a failed ``warn`` row does not fail the check."""

    name: str
    ok: bool
    detail: str = ""
    hint: str = ""
    warn: bool = False


def probe(kube: Kube, infra: dict, manifests: list[dict], placed: list[dict]) -> list[Probe]:
    """Namespace, CRDs, every permission a run applying ``manifests`` needs, and whether the pods of
    ``placed`` (the objects of the flow `run` takes) fit the cluster."""
    ns = infra["namespace"]
    try:
        results = [Probe(f"namespace {ns}", kube.find(core.NAMESPACE, ns) is not None,
                         hint=f"kubectl create namespace {ns}")]
    except ForbiddenError:  # a namespace-scoped user may not read namespaces; the RBAC rows still tell
        results = [Probe(f"namespace {ns} (not verified: no permission to get namespaces)", True)]
    for name, versions in crds.needed_versions(manifests).items():
        results += crd_probes(kube, name, versions)
    results += _device_class_probe(kube, manifests)
    results += fit_probes(kube, ns, placed)
    results.append(_leftovers_probe(kube, ns))
    needed = run_permissions(manifests, proxy=not kube.in_cluster)
    try:
        missing = missing_permissions(kube, needed, ns)
    except UnauthorizedError:
        raise
    except ApiError as err:
        return results + [Probe(f"RBAC {permission}", False, err.message, err.hint or "") for permission in needed]
    return results + [Probe(f"RBAC {permission}", permission not in missing, "denied",
                            f"ask your admin for a Role allowing {permission} in {ns}") for permission in needed]


def fit_probes(kube: Kube, ns: str, placed: list[dict]) -> list[Probe]:
    """One row per pod group: fits now (ok), fits once capacity frees (a warning), never (a failure)."""
    rows = []
    for v in fit.report(kube, ns, placed):
        if v.state in (fit.NOW, fit.UNKNOWN):
            rows.append(Probe(f"{v.group}: {v}", True))
        else:
            rows.append(Probe(v.group, False, str(v), _FIT_HINTS[v.state], warn=v.state == fit.ONCE))
    return rows


_FIT_HINTS = {fit.ONCE: "its pods wait in Pending until then; run goes ahead",
              fit.NEVER: "give its pods what a node has; run refuses it (--place-anyway applies it regardless)"}


def missing_device_classes(kube: Kube, manifests: list[dict]) -> InfraError | None:
    """What is wrong when the claim templates among ``manifests`` name a DeviceClass the cluster
    lacks (their pods would wait in Pending forever); None when none does, or when the cluster
    cannot tell (no DRA API, or no permission to list DeviceClasses)."""
    wanted = dra.device_classes(manifests)
    return _device_class_error(wanted, _device_classes(kube) if wanted else [])


def _device_classes(kube: Kube) -> list[str] | None:
    try:
        return sorted(c["metadata"]["name"] for c in kube.list(dra.DEVICE_CLASS))
    except (ForbiddenError, KindNotServedError):
        return None


def _device_class_error(wanted: list[str], have: list[str] | None) -> InfraError | None:
    missing = [name for name in wanted if have is not None and name not in have]
    if not missing:
        return None
    default = " (nrl-k8s's default)" if missing == [dra.DEFAULT_ROCE_DEVICE_CLASS] else ""
    return InfraError(("dra", "roce", "deviceClassName"),
                      f"the cluster has no DeviceClass {', '.join(map(repr, missing))}{default} (it has: "
                      f"{', '.join(have or []) or 'none'}): pods claiming it would wait in Pending forever",
                      hint="set infra.dra.roce.deviceClassName to the DeviceClass your RoCE driver publishes "
                           "(kubectl get deviceclasses)")


def _device_class_probe(kube: Kube, manifests: list[dict]) -> list[Probe]:
    wanted = dra.device_classes(manifests)
    if not wanted:
        return []
    label, have = f"DeviceClass {', '.join(wanted)}", _device_classes(kube)
    if have is None:
        return [Probe(f"{label} (not verified: no permission to list DeviceClasses, or no DRA API)", True)]
    problem = _device_class_error(wanted, have)
    return [Probe(label, problem is None, problem.problem if problem else "", problem.hint or "" if problem else "")]


def crd_probes(kube: Kube, name: str, versions: set[str]) -> list[Probe]:
    """Whether CRD ``name`` is installed and serves ``versions``; for the RayJob also the fields
    ``--parallel`` needs (a warning). A user who may not read CRDs gets discovery's answer, with
    the fields not verified: never a failure that is not one."""
    label = f"CRD {name} ({', '.join(sorted(versions))})"
    try:
        crd = kube.find(core.CRD, name)
        served = crds.served_versions(crd) if crd is not None else []
    except ForbiddenError:
        crd, discovered = None, kube.served_versions(name)
        if discovered is None:
            return [Probe(f"{label} (not verified: no permission to read CRDs or discovery)", True)]
        served = discovered
        label += " (served versions from discovery; fields not verified: no permission to read CRDs)"
    missing = sorted(versions - set(served))
    if not served:
        return [Probe(label, False, "not installed" if crd is None else "serves no version", crds.HELMFILE_HINT)]
    rows = [Probe(label, not missing, f"does not serve {', '.join(missing)} (serves {', '.join(served)})",
                  f"{crds.HELMFILE_HINT}; {crds.UPGRADE[name]}")]
    if name == crds.RAYJOB:
        rows.append(_parallel_probe(crd))
    return rows


def _leftovers_probe(kube: Kube, ns: str) -> Probe:
    """A warning when runs that died left objects `nrl-k8s gc` would remove."""
    from . import gc

    try:
        found = [item for item in gc.find(kube, ns) if item.verdict != "keep"]
    except ForbiddenError:
        return Probe("leftovers of dead runs (not verified: no permission to list them)", True)
    return Probe(
        "no leftovers of dead runs",
        not found,
        f"{len(found)} object(s) without an owner: "
        + ", ".join(f"{item.kind.kind} {item.name}" for item in found[:5])
        + (", ..." if len(found) > 5 else ""),
        f"nrl-k8s -n {ns} gc (--dry-run first to see what it does)",
        warn=True,
    )


def _parallel_probe(rayjob_crd: dict | None) -> Probe:
    label = "RayJob fields needed for --parallel"
    if rayjob_crd is None:
        return Probe(f"{label} (not verified: no permission to read CRDs)", True)
    gaps = crds.parallel_gaps(rayjob_crd)
    if gaps.missing:
        return Probe(label, False, f"the installed RayJob CRD lacks {', '.join(gaps.missing)}",
                     f"{crds.HELMFILE_HINT}; {crds.UPGRADE[crds.RAYJOB]}", warn=True)
    if gaps.unverified:
        return Probe(f"{label} (not verified: the CRD schema does not list {', '.join(gaps.unverified)})", True)
    return Probe(f"{label} (spec.preRunningDeadlineSeconds, submissionMode {crds.PARALLEL_MODE})", True)
