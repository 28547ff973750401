"""`--target KIND.KEY` parsing and rendering for `cluster up/down`.

KIND is `kuberay` (a role of `infra.kuberay`), `dynamo` (a key of `infra.dynamo`) or
`deployments` (a key of `infra.deployments`).
"""

from __future__ import annotations

from dataclasses import dataclass

from nrl_k8s.config import LoadedConfig
from nrl_k8s.errors import ConfigError
from nrl_k8s.flows import collisions
from nrl_k8s.kinds import deployment, dgd, raycluster
from nrl_k8s.ray import package

KINDS = ("kuberay", "dynamo", "deployments")


@dataclass(frozen=True)
class Target:
    """One `--target` value: a KIND of ``KINDS`` and a KEY under it."""

    kind: str
    key: str

    def __str__(self) -> str:
        return f"{self.kind}.{self.key}"


def available(infra: dict) -> list[Target]:
    """Every target the infra declares, in a stable order."""
    return [Target(kind, key) for kind in KINDS for key in sorted(infra.get(kind) or {})]


def parse(infra: dict, specs: list[str]) -> list[Target]:
    """Resolve `--target` values; none given means every declared target."""
    valid = available(infra)
    if not specs:
        return valid
    chosen: list[Target] = []
    for spec in specs:
        kind, _, key = spec.partition(".")
        target = Target(kind, key)
        if target not in valid:
            listing = ", ".join(map(str, valid)) or "(none declared)"
            raise ConfigError(
                f"unknown --target {spec!r}",
                hint=f"valid targets for this infra: {listing}",
            )
        if target not in chosen:
            chosen.append(target)
    return chosen


def check_declared(cfg: LoadedConfig) -> None:
    """Render every declared target, so each is checked against Kubernetes before any command acts,
    refuse two that would make one object (``collisions``) and an upload path no checkout can hold.

    Problems name the file (or override) that set the bad key.
    """
    with cfg.located():
        declared = [((t.kind, t.key), render_all(cfg.infra, t)) for t in sorted(available(cfg.infra), key=_blame_order)]
        collisions.check(declared)
        package.check_declared_paths(cfg.infra)


def _blame_order(target: Target) -> tuple:
    """Collisions name the later entry: roles after training (in ``raycluster.ROLES`` order), DGDs,
    then Deployments (what is most easily renamed last)."""
    rank = raycluster.ROLES.index(target.key) if target.kind == "kuberay" and target.key in raycluster.ROLES else 0
    return KINDS.index(target.kind), rank, target.key


def render(infra: dict, target: Target) -> dict:
    """The target's own object: the RayCluster (DRA claims rewritten), the DGD or the Deployment."""
    return render_all(infra, target)[0]


def render_all(infra: dict, target: Target) -> list[dict]:
    """Every object bringing ``target`` up applies, its own first: ``kuberay.ROLE`` → the
    RayCluster and its DRA objects; ``deployments.KEY`` → the Deployment and its Service."""
    if target.kind == "kuberay":
        cluster, dra = raycluster.render_with_dra(infra, target.key)
        return [cluster, *dra]
    if target.kind == "dynamo":
        training = raycluster.render_with_dra(infra, "training") if "training" in (infra.get("kuberay") or {}) else None
        owner, objects = (training[0]["metadata"]["name"], training[1]) if training else ("", [])
        return [dgd.wire_claims(dgd.render(infra, target.key), target.key, objects, owner)]
    return deployment.render_with_service(infra, target.key)
