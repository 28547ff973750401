"""The head Services KubeRay will create for a run's RayClusters and RayJob, and collisions of
their names — among the run's own objects, or with a live Service — refused before anything
is applied.

What KubeRay names (``ray-operator/controllers/ray/utils``): a RayCluster's head Service is
``<cluster>-head-svc`` (``GenerateHeadServiceName``), or ``headGroupSpec.headService.metadata.name``
when that is set. Before KubeRay 1.4 a generated name longer than 50 characters lost its FIRST
characters to keep the last 50 (``CheckName``; a leading digit or punctuation then becomes
``r``), so two long names that end alike collide. Since KubeRay 1.5 a RayJob also gets a
Service ``<rayjob>-head-svc`` pointing at its current cluster; a Service of that name that
already exists is taken over (its selector rewritten). A RayJob's cluster is ``<rayjob>-<5
random>``: its generated Service name cannot be foreseen, nor collide with another by design.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nrl_k8s.errors import ConfigError, ForbiddenError
from nrl_k8s.events import Emit, Warning
from nrl_k8s.kinds import raycluster, rayjob, service

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

CLUSTER_LABEL = "ray.io/cluster"
ORIGIN_LABEL = "ray.io/originated-from-cr-name"  # on the Service KubeRay 1.5+ makes for a RayJob
_LEGACY_MAX = 50


@dataclass(frozen=True)
class Claim:
    """A head Service name an object will get; ``mine(live)``: a live Service of that name is already its own."""

    name: str
    owner: str  # "RayCluster NAME" | "RayJob NAME"
    mine: Callable[[dict], bool]
    note: str = ""  # which KubeRay versions give this name, when not all


def legacy_name(name: str) -> str:
    """``name`` as KubeRay before 1.4 shortened a generated Service name (``utils.CheckName``)."""
    if len(name) > _LEGACY_MAX:
        name = name[len(name) - _LEGACY_MAX:]
    if name[0].isdigit() or not name[0].isalnum():
        name = "r" + name[1:]
    return name


def _labels(live: dict) -> dict:
    return (live.get("metadata") or {}).get("labels") or {}


_LEGACY_NOTE = " (as KubeRay before 1.4 shortens it: a Service name over 50 characters loses its first characters)"
_RAYJOB_NOTE = " (KubeRay 1.5+ gives a RayJob a head Service of its own name, and takes over one that exists)"


def _generated(name: str, owner: str, mine: Callable[[dict], bool], note: str = "") -> list[Claim]:
    claims = [Claim(name, owner, mine, note)]
    if legacy_name(name) != name:
        claims.append(Claim(legacy_name(name), owner, mine, _LEGACY_NOTE))
    return claims


def claims(manifest: dict) -> list[Claim]:
    """The head Service names a RayCluster or RayJob manifest will get (none for other kinds)."""
    name, kind = manifest["metadata"]["name"], manifest.get("kind")
    if kind == raycluster.KIND.kind:
        owner, mine = f"RayCluster {name}", (lambda live: _labels(live).get(CLUSTER_LABEL) == name)
        custom = raycluster.custom_head_service(manifest["spec"])
        return [Claim(custom, owner, mine)] if custom else _generated(raycluster.head_service(name), owner, mine)
    if kind == rayjob.KIND.kind:
        owner = f"RayJob {name}"
        found = _generated(raycluster.head_service(name), owner, lambda live: _labels(live).get(ORIGIN_LABEL) == name,
                           _RAYJOB_NOTE)
        custom = raycluster.custom_head_service(manifest["spec"].get("rayClusterSpec") or {})
        if custom:  # every cluster of the RayJob (<rayjob>-<5 random>) takes that name
            found.append(
                Claim(custom, owner, lambda live: str(_labels(live).get(CLUSTER_LABEL, "")).startswith(f"{name}-"))
            )
        return found
    return []


def _rename(claim: Claim) -> str:
    if claim.owner.startswith("RayJob"):
        return "name the RayJob differently: `run --rayjob-name NAME` (or kuberay.training.name)"
    return "rename the RayCluster (kuberay.ROLE.name) or set its headGroupSpec.headService.metadata.name"


def check_planned(manifests: list[dict]) -> None:
    """ConfigError when two of the objects would get the same head Service name."""
    seen: dict[str, Claim] = {}
    for manifest in manifests:
        for claim in claims(manifest):
            other = seen.setdefault(claim.name, claim)
            if other.owner != claim.owner:
                raise ConfigError(f"{other.owner} and {claim.owner} would both get the head Service {claim.name}"
                                  f"{claim.note or other.note}", hint=_rename(claim))


def check_live(kube: Kube, namespace: str, manifests: list[dict], emit: Emit) -> None:
    """ConfigError when a live Service already has a head Service name of the objects and is not
    theirs; without permission to read Services, a warning."""
    for manifest in manifests:
        for claim in claims(manifest):
            try:
                live = kube.find(service.KIND, claim.name, namespace)
            except ForbiddenError:
                emit(
                    Warning(
                        f"head Service names not checked for collisions: no permission to get services in {namespace}"
                    )
                )
                return
            if live is None or claim.mine(live):
                continue
            holder = _labels(live).get(CLUSTER_LABEL) or _labels(live).get(ORIGIN_LABEL)
            raise ConfigError(
                f"{claim.owner} would get the head Service {claim.name}{claim.note}, but Service {claim.name} already "
                f"exists in namespace {namespace}" + (f" for Ray cluster {holder}" if holder else ""),
                hint=_rename(claim) + ("" if holder else f"; or delete that Service if nothing uses it: "
                                       f"kubectl -n {namespace} delete service {claim.name}"))
