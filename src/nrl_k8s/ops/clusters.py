"""`cluster up|down|list`: idempotent ensure/delete of declared targets, and the managed inventory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nrl_k8s.errors import ConfigError
from nrl_k8s.events import Became, Emit, Warning
from nrl_k8s.kinds import deployment, dgd, raycluster, rayjob, service
from nrl_k8s.kinds.base import MANAGED_BY_SELECTOR, OWNER_LABEL, maker
from nrl_k8s.kinds.index import kind_of
from nrl_k8s.kube import dgd_users as usage
from nrl_k8s.ops import targets

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

_WAIT_S = {"kuberay": 1800.0, "deployments": 600.0}


@dataclass(frozen=True)
class UpOptions:
    recreate: bool = False
    adopt: bool = False  # reuse a same-named object another user or a person made
    place_anyway: bool = False  # apply a pod group predicted never to fit
    wait: bool = True
    repo_root: str | None = None  # root of the daemons' rayUploadPaths


def objects(plan, target: targets.Target) -> list[dict]:
    """What bringing ``target`` up applies, from the long-lived plan (the same objects `run --raycluster` applies)."""
    if target.kind == "kuberay":
        role = target.key
        return [plan.clusters[role], *plan.dra.get(role, []), *filter(None, [plan.env_secrets.get(role)])]
    if target.kind == "dynamo":
        return [plan.dgds[target.key]]
    return plan.deployments[target.key]


def up(kube: Kube, plan, chosen: list[targets.Target], options: UpOptions, emit: Emit) -> None:
    """Ensure the chosen targets (reuse identical, warn on drift, ``recreate`` replaces) with the
    long-lived flow's steps; with ``wait``, await them and submit the chosen roles' daemons.
    Nothing is rolled back: what came up stays up, even on an error or Ctrl-C. Only a command
    killed outright leaves what it created unfinished (``unfinished``: gc removes it past its deadline)."""
    from nrl_k8s.flows.lifecycle import LiveOptions
    from nrl_k8s.flows.raycluster import LongLived

    flow = LiveOptions(recreate=options.recreate, repo_root=options.repo_root, adopt=options.adopt,
                       place_anyway=options.place_anyway)
    with LongLived(kube, plan, flow, emit) as run:
        try:
            _up(run, plan, chosen, options)
        finally:
            run.finish()


def _up(run, plan, chosen: list[targets.Target], options: UpOptions) -> None:
    """``up``'s steps over ``run`` (a ``LongLived``)."""
    keys = {kind: [t.key for t in chosen if t.kind == kind] for kind in targets.KINDS}
    run.steps.check_owners([m for target in chosen for m in objects(plan, target)])
    packages = run.stage_packages(roles=keys["kuberay"]) if options.wait else {}
    run.steps.deployments({k: plan.deployments[k] for k in keys["deployments"]},
                      {k: plan.health[k] for k in keys["deployments"] if k in plan.health},
                      recreate=options.recreate, wait=options.wait)
    for role in keys["kuberay"]:
        run.ensure_cluster(role)
    dgds = {}
    for key in keys["dynamo"]:  # awaited as they run: a drifted DGD kept as it is
        manifest = plan.dgds[key]
        dgds[key], _ = run.steps.ensure(dgd.kind_of(manifest), manifest, f"dynamo.{key}", recreate=options.recreate)
    if not options.wait:
        return
    run.wait_all(roles=keys["kuberay"], dgds=dgds)
    run.daemons(packages, roles=keys["kuberay"])


def down(kube: Kube, infra: dict, chosen: list[targets.Target], *, wait: bool, force: bool = False, emit: Emit) -> None:
    """Delete the chosen targets nrl-k8s created; ``kuberay.training`` also takes the run's RayJob.

    Refuses (before deleting anything) while a live RayJob uses what would be deleted, unless ``force``.
    """
    ns = infra["namespace"]
    found = []
    for target in chosen:
        manifest = targets.render(infra, target)
        name = manifest["metadata"]["name"]
        owner = manifest["metadata"]["labels"].get(OWNER_LABEL)
        found += [(target, kind, name, kube.find(kind, name, ns), owner) for kind in _kinds(target, manifest)]
    busy = [f"{target} ({kind.kind} {name}) is used by running RayJob {', '.join(runs)}"
            for target, kind, name, live, owner in found
            if live is not None and not maker(live, owner) and (runs := _live_users(kube, kind, live, ns))]
    if busy and not force:
        raise ConfigError("refusing to delete what a running job uses: " + "; ".join(busy),
                          hint="wait for the job to finish, or pass --force to delete it anyway (stops the job)")
    for target, kind, name, live, owner in found:
        who = maker(live, owner) if live is not None else None
        if who:
            emit(Warning(f"{target} ({kind.kind} {name}) was made by {who}; leaving it alone"))
            continue
        if live is None or not kube.delete(kind, name, ns):
            emit(Became(str(target), f"{kind.kind} {name} already gone"))
            continue
        if wait:
            kube.wait_gone(kind, name, ns, timeout_s=_WAIT_S.get(target.kind, 600.0))
        emit(Became(str(target), f"{kind.kind} {name} deleted"))


def _kinds(target: targets.Target, manifest: dict) -> list:
    """The run's RayJob (same name as the training RayCluster) goes first: GC then takes its cluster and DGDs."""
    if target == targets.Target("kuberay", "training"):
        return [rayjob.KIND, raycluster.KIND]
    if target.kind == "deployments":
        return [deployment.KIND, service.KIND]
    return [kind_of(manifest)]


def _live_users(kube: Kube, kind, obj: dict, ns: str) -> list[str]:
    """The live RayJobs that deleting ``obj`` would stop or strip of inference."""
    if kind == rayjob.KIND:
        # a suspended one runs nothing: at most its run's start lease holds it
        return [obj["metadata"]["name"]] if rayjob.live(obj) and not rayjob.suspended(obj) else []
    if kind in dgd.KINDS:
        return usage.live(kube, usage.users(kube, obj, ns), ns)
    return []


def inventory(kube: Kube, namespace: str) -> list[dict]:
    """Every nrl-k8s-managed RayJob, RayCluster and DGD in the namespace (one row each)."""
    rows = []
    for kind in (rayjob.KIND, raycluster.KIND, dgd.KIND):
        for obj in kube.list(kind, namespace, label_selector=MANAGED_BY_SELECTOR):
            status = obj.get("status") or {}
            state = status.get("jobDeploymentStatus") or status.get("state") or ""
            owners = ", ".join(o["name"] for o in obj["metadata"].get("ownerReferences") or [])
            rows.append({"kind": kind.kind, "name": obj["metadata"]["name"], "state": state, "owners": owners,
                         "created": obj["metadata"].get("creationTimestamp", "")})
    return rows
