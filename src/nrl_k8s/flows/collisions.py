"""Names two declared objects would share, refused before anything is applied.

What the infra declares — each ``kuberay`` role's RayCluster and its DRA objects, each
``dynamo`` DGD, each ``deployments`` Deployment and its Service — and the Services an operator
makes from them under a name known in advance: a RayCluster's head Service (``<cluster>-head-svc``
or the one its spec sets, ``head_services.claims``) and a DGD's frontend Service
``<dgd>-frontend``. Two of one kind and name in one namespace are one object: the second would
patch, take over or replace the first (a Service's selector rewritten to other pods). A RayJob's
own cluster is ``<rayjob>-<5 random>``: its Service names cannot be foreseen, nor collide.
"""

from __future__ import annotations

from dataclasses import dataclass

from nrl_k8s.errors import InfraError, dotted
from nrl_k8s.kinds import dgd, raycluster, service

from . import head_services

_LABELS = {dgd.KIND.kind: "DGD"}


@dataclass(frozen=True)
class _Use:
    target: tuple  # the infra entry that declares it: ("kuberay", ROLE), ("dynamo", KEY), ("deployments", KEY)
    key: tuple  # the infra key that sets the name
    what: str  # "" for the object the entry renders itself, else "RayCluster x's head Service" ...
    note: str = ""


def check(declared: list[tuple[tuple, list[dict]]]) -> None:
    """InfraError at the later entry's key when two (kind, name) pairs coincide; ``declared``:
    (entry, its rendered objects, its own first), in the order entries are blamed last."""
    seen: dict[tuple[str, str], _Use] = {}
    for target, objects in declared:
        for kind, name, use in _uses(target, objects):
            other = seen.setdefault((kind, name), use)
            if other.target != target:
                raise InfraError(use.key, _problem(kind, name, use, other), hint=_hint(use))


def _uses(target: tuple, objects: list[dict]):
    """(kind, name, use) of each object ``target`` renders and of each Service an operator makes for it."""
    kind = target[0]
    name_key = (*target, "name") if kind != "dynamo" else target
    for obj in objects:
        yield obj["kind"], obj["metadata"]["name"], _Use(target, name_key, "")
    own = objects[0]
    if kind == "kuberay":
        custom = raycluster.custom_head_service(own["spec"])
        key = (*target, "spec", "headGroupSpec", "headService", "metadata", "name") if custom else name_key
        for claim in head_services.claims(own):
            yield service.KIND.kind, claim.name, _Use(target, key, f"{claim.owner}'s head Service", claim.note)
    elif kind == "dynamo":
        yield (service.KIND.kind, f"{own['metadata']['name']}-frontend",
               _Use(target, name_key, f"DGD {own['metadata']['name']}'s frontend Service"))


def _problem(kind: str, name: str, use: _Use, other: _Use) -> str:
    label = _LABELS.get(kind, kind)
    where = f"infra.{dotted(other.target)}"
    if not use.what and not other.what:
        return f"names the {label} {name!r}, as {where} does"
    mine = use.what or f"its {label}"
    theirs = f"{other.what} ({where})" if other.what else f"the {label} of {where}"
    return f"{mine} {name!r} would also be {theirs}{use.note or other.note}"


def _hint(use: _Use) -> str:
    kind, key = use.target[0], use.target[1]
    if kind == "kuberay":
        if "headService" in use.key:
            return f"set another name in kuberay.{key}.spec.headGroupSpec.headService.metadata.name"
        return f"give kuberay.{key} a RayCluster name of its own (kuberay.{key}.name)"
    if kind == "dynamo":
        return f"give one of them another name (infra.dynamo.{key}.name)"
    return f"name the Deployment differently (deployments.{key}.name)"
