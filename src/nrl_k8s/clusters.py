"""`cluster up|down|list`: idempotent ensure/delete of declared targets, and the managed inventory."""

from __future__ import annotations

from dataclasses import dataclass

from . import targets, usage
from .drift import spec_drift
from .errors import ConfigError
from .events import Applied, Became, Emit, Waiting, Warning
from .kinds import deployment, dgd, raycluster, rayjob
from .kinds.base import MANAGED_BY_SELECTOR, managed
from .serving import present, wait_serving

KINDS = {"kuberay": raycluster.KIND, "dynamo": dgd.KIND, "deployments": deployment.KIND}
_WAIT_S = {"kuberay": 1800.0, "deployments": 600.0}


@dataclass(frozen=True)
class UpOptions:
    recreate: bool = False
    wait: bool = True


def up(kube, infra: dict, chosen: list[targets.Target], options: UpOptions, emit: Emit) -> None:
    manifests = {t: targets.render(infra, t) for t in chosen}  # render everything before applying anything
    for target, manifest in manifests.items():
        kind, name = KINDS[target.kind], manifest["metadata"]["name"]
        ns = manifest["metadata"]["namespace"]
        live = kube.find(kind, name, ns)
        if live is not None:
            changed = spec_drift(manifest, live)
            if not changed:
                emit(Applied(str(target), name, "reused"))
            elif not options.recreate:
                emit(Warning(f"{target} ({name}) differs from the live object, keeping it (--recreate replaces it): "
                             + "; ".join(changed)))
                manifest = live  # wait for what is actually running
            elif not managed(live):
                raise ConfigError(f"{target} ({name}) exists but was not created by nrl-k8s; refusing to replace it",
                                  hint=f"delete it yourself: kubectl -n {ns} delete {kind.plural} {name}")
            else:
                kube.delete(kind, name, ns)
                kube.wait_gone(kind, name, ns, timeout_s=_WAIT_S.get(target.kind, 600.0))
                live = None
        if live is None:
            kube.create(kind, manifest)
            emit(Applied(str(target), name, "created" if not options.recreate else "recreated"))
        if options.wait:
            _wait_ready(kube, infra, target, manifest, emit)


def _wait_ready(kube, infra: dict, target: targets.Target, manifest: dict, emit: Emit) -> None:
    label, name, ns = str(target), manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    if target.kind == "dynamo":
        wait_serving(kube, label, manifest, float(infra["dynamo"][target.key]["readyTimeoutS"]), emit)
    else:
        readiness = raycluster.readiness if target.kind == "kuberay" else deployment.readiness
        kube.wait(KINDS[target.kind], present(readiness), name=name,
                  namespace=ns, timeout_s=_WAIT_S[target.kind], what=f"{label} ({name})",
                  on_progress=lambda reason: emit(Waiting(label, reason)))
    emit(Became(label, "ready"))


def down(kube, infra: dict, chosen: list[targets.Target], *, wait: bool, force: bool = False, emit: Emit) -> None:
    """Delete the chosen targets nrl-k8s created; ``kuberay.training`` also takes the run's RayJob.

    Refuses (before deleting anything) while a live RayJob uses what would be deleted, unless ``force``.
    """
    ns = infra["namespace"]
    found = []
    for target in chosen:
        name = targets.render(infra, target)["metadata"]["name"]
        found += [(target, kind, name, kube.find(kind, name, ns)) for kind in _kinds(target)]
    busy = [f"{target} ({kind.kind} {name}) is used by running RayJob {', '.join(runs)}"
            for target, kind, name, live in found
            if live is not None and managed(live) and (runs := _live_users(kube, kind, live, ns))]
    if busy and not force:
        raise ConfigError("refusing to delete what a running job uses: " + "; ".join(busy),
                          hint="wait for the job to finish, or pass --force to delete it anyway (stops the job)")
    for target, kind, name, live in found:
        if live is not None and not managed(live):
            emit(Warning(f"{target} ({kind.kind} {name}) was not created by nrl-k8s; leaving it alone"))
            continue
        if live is None or not kube.delete(kind, name, ns):
            emit(Became(str(target), f"{kind.kind} {name} already gone"))
            continue
        if wait:
            kube.wait_gone(kind, name, ns, timeout_s=_WAIT_S.get(target.kind, 600.0))
        emit(Became(str(target), f"{kind.kind} {name} deleted"))


def _kinds(target: targets.Target) -> list:
    """The run's RayJob (same name as the training RayCluster) goes first: GC then takes its cluster and DGDs."""
    if target == targets.Target("kuberay", "training"):
        return [rayjob.KIND, raycluster.KIND]
    return [KINDS[target.kind]]


def _live_users(kube, kind, obj: dict, ns: str) -> list[str]:
    """The live RayJobs that deleting ``obj`` would stop or strip of inference."""
    if kind == rayjob.KIND:
        return [obj["metadata"]["name"]] if rayjob.live(obj) else []
    if kind == dgd.KIND:
        return usage.live(kube, usage.users(kube, obj, ns), ns)
    return []


def inventory(kube, namespace: str) -> list[dict]:
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
