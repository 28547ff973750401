"""`nrl-k8s gc`: what runs that died left behind, found and (unless a dry run) removed.

Every object a run creates carries its run id (label ``nrl-k8s.io/run-id``). In the serial
`run --rayjob` order the DGDs, the DRA objects and the run Secret exist for a while without an
owner (until the RayJob, and then its RayCluster, exist); each is created with the time by which
a live run will have given it one (annotation ``nrl-k8s.io/owner-deadline``). A run killed in
that window (`kill -9`, a closed laptop) leaves them unowned. For each such object:

- it has an owner, or no run label: not ours to judge (GC, or its user, decides) — never listed;
- a DGD another live run uses (its users annotation): ``kept``;
- its run's RayJob is live: ``linked`` to it (the Secret) or to its RayCluster (DGDs, DRA
  objects), as the run itself does, so GC removes them when the job ends;
- its run's RayJob ended: ``deleted``;
- no RayJob: ``kept`` until the deadline (the run may still be waiting for its DGDs), then ``deleted``.

Objects created with an owner (``run --parallel``, ``run --raycluster``) never need this: GC
deletes them with their owner. Deployments outlive runs by design and are never touched, but for
those of a long-lived bring-up that never finished: the unowned objects of `run --raycluster` and
`cluster up` carry the label ``nrl-k8s.io/bringup`` (``flows.unfinished``) and are judged here by
``judge_unfinished``: only this user's, past their deadline, are deleted, unless the run's driver
(Ray job = its run id) is on one of its RayClusters: a run killed between submitting it and clearing
the marks left a finished bring-up, which gc then ``finish``es (the marks come off).

``$NRL_K8S_NOW`` (seconds since the epoch, or ``+SECONDS`` from now) judges deadlines as of that
time: what gc will do then (with ``--dry-run``), or a test's clock.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from nrl_k8s.config.interpolate import user_name
from nrl_k8s.errors import ConfigError, ConflictError, NotFoundError
from nrl_k8s.kinds import deployment, dgd, dra, raycluster, rayjob, secret, service
from nrl_k8s.kinds.base import MANAGED_BY_SELECTOR, Kind, delete_command, maker, owner_reference, owners_patch
from nrl_k8s.kube import dgd_users as usage
from nrl_k8s.kube.errors import KindNotServedError

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

DEADLINE_ANNOTATION = "nrl-k8s.io/owner-deadline"
# Past the DGDs' readiness the run creates its RayJob at once; the margin covers the calls between.
MARGIN_S = 60
BRINGUP_LABEL = "nrl-k8s.io/bringup"  # an unfinished long-lived bring-up's object (``flows.unfinished`` marks it)
UNFINISHED = "unfinished"  # its value
SELECTOR = f"{MANAGED_BY_SELECTOR},{rayjob.RUN_ID_LABEL},!{BRINGUP_LABEL}"
UNFINISHED_SELECTOR = f"{MANAGED_BY_SELECTOR},{BRINGUP_LABEL}={UNFINISHED}"
# The merge patch that finishes a bring-up's object: no marker left for gc.
FINISHED = {"metadata": {"labels": {BRINGUP_LABEL: None}, "annotations": {DEADLINE_ANNOTATION: None}}}
NOW_ENV = "NRL_K8S_NOW"


def current_time() -> float:
    """Now, or the time ``$NRL_K8S_NOW`` names (seconds since the epoch, or ``+SECONDS`` from now)."""
    value = os.environ.get(NOW_ENV, "").strip()
    if not value:
        return time.time()
    try:
        return time.time() + float(value[1:]) if value.startswith("+") else float(value)
    except ValueError:
        raise ConfigError(
            f"${NOW_ENV} is {value!r}", hint="give seconds since the epoch, or +SECONDS from now"
        ) from None


def with_deadline(manifest: dict, seconds: float, now: float | None = None) -> dict:
    """A copy of ``manifest`` saying it gets an owner within ``seconds`` of now, or its run died."""
    when = datetime.fromtimestamp((time.time() if now is None else now) + seconds, UTC)
    metadata = manifest["metadata"]
    annotations = {**(metadata.get("annotations") or {}), DEADLINE_ANNOTATION: when.strftime("%Y-%m-%dT%H:%M:%SZ")}
    return {**manifest, "metadata": {**metadata, "annotations": annotations}}


def deadline(obj: dict) -> float | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(DEADLINE_ANNOTATION)
    if not isinstance(value, str):
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class Leftover:
    kind: Kind
    name: str
    run_id: str
    verdict: str  # delete | link | finish | keep
    reason: str
    obj: dict


def find(kube: Kube, namespace: str, now: float | None = None) -> list[Leftover]:
    """Every unowned object a run created in ``namespace``, with what gc does to it."""
    now = current_time() if now is None else now
    jobs: dict[str, dict | None] = {}
    found = []
    for kind, obj in unowned(kube, namespace, (dgd.KINDS, *((kind,) for kind in dra.KINDS), (secret.KIND,)), SELECTOR):
        run_id = obj["metadata"]["labels"][rayjob.RUN_ID_LABEL]
        if run_id not in jobs:
            jobs[run_id] = _latest(kube.list(rayjob.KIND, namespace, label_selector=f"{rayjob.RUN_ID_LABEL}={run_id}"))
        verdict, reason = _judge(kube, kind, obj, jobs[run_id], namespace, now)
        found.append(Leftover(kind, obj["metadata"]["name"], run_id, verdict, reason, obj))
    return found + find_unfinished(kube, namespace, now)


def find_unfinished(kube: Kube, namespace: str, now: float | None = None, user: str | None = None, *,
                    drivers: bool = True) -> list[Leftover]:
    """Every unfinished long-lived bring-up's object in ``namespace``, judged for ``user`` (default: this
    user, as ``${user:}``); ``drivers``: ask the RayClusters of a run past its deadline for its driver."""
    now = current_time() if now is None else now
    user = user or user_name(os.environ)
    groups = ((raycluster.KIND,), (deployment.KIND,), (service.KIND,), dgd.KINDS)
    found = [Leftover(kind, obj["metadata"]["name"], obj["metadata"]["labels"].get(rayjob.RUN_ID_LABEL, "?"),
                      *judge_unfinished(obj, user, now), obj)
             for kind, obj in unowned(kube, namespace, groups, UNFINISHED_SELECTOR)]
    doomed = {item.run_id for item in found if item.verdict == "delete" and drivers}
    running = {run_id for run_id in doomed if _driver_runs(kube, namespace, run_id, found)}
    return [replace(item, verdict="finish", reason="its driver was submitted: the run was killed just after, "
                    "before it marked its bring-up finished") if item.verdict == "delete" and item.run_id in running
            else item for item in found]


def _driver_runs(kube: Kube, namespace: str, run_id: str, found: list[Leftover]) -> bool:
    """Whether one of run ``run_id``'s RayClusters has its driver (Ray job ``run_id``): a run killed
    between the driver's submission and clearing its marks left a finished bring-up."""
    from nrl_k8s.errors import NrlK8sError
    from nrl_k8s.ray.dashboard import of_raycluster

    for item in found:
        if item.run_id == run_id and item.kind == raycluster.KIND:
            try:
                with of_raycluster(kube, item.obj, namespace, retries=1) as dash:
                    if dash.get_job(run_id) is not None:
                        return True
            except NrlK8sError:
                continue  # no head, no dashboard: no driver to keep
    return False


def judge_unfinished(obj: dict, user: str, now: float) -> tuple[str, str]:
    """(verdict, reason) for one unfinished object: ``delete`` only this user's, past its deadline."""
    who = maker(obj, user)
    if who:
        return "keep", f"an unfinished bring-up's, made by {who}: not this user's to delete"
    due = deadline(obj)
    if due is None:
        return "keep", f"no {DEADLINE_ANNOTATION} annotation: no deadline to judge it by"
    when = _utc(due)
    if now < due:
        return "keep", (f"its bring-up has not finished; a live `nrl-k8s run` or `cluster up` finishes it by {when}, "
                        "else gc deletes it then")
    return "delete", f"its bring-up did not finish by {when}: the run or `cluster up` was killed before it finished"


def unfinished_rows(kube: Kube, namespace: str, user: str) -> list[dict]:
    """``user``'s unfinished objects whose deadline has not passed, as `status`'s LEFT BEHIND rows (past
    it, `status` lists them with what `nrl-k8s gc` does)."""
    return [
        {
            "what": f"{item.kind.kind} {item.name}",
            "reason": f"run {item.run_id}: {item.reason}",
            "remove": f"if that run is gone: {delete_command(item.kind, item.name, namespace)}   (or after "
            f"{_utc(due)}: nrl-k8s -n {namespace} gc; a re-run finishes it instead)",
        }
        for item in find_unfinished(kube, namespace, user=user, drivers=False)
        if item.verdict == "keep" and (due := deadline(item.obj)) is not None and maker(item.obj, user) is None
    ]


def _utc(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def collect(kube: Kube, namespace: str, leftovers: list[Leftover]) -> list[tuple[Leftover, str]]:
    """Act on ``find``'s verdicts: (leftover, what was done)."""
    done = []
    for item in leftovers:
        if item.verdict == "delete":
            done.append((item, _delete(kube, item, namespace)))
        elif item.verdict == "link":
            done.append((item, _link(kube, item, namespace)))
        elif item.verdict == "finish":
            done.append((item, _finish(kube, item, namespace)))
        else:
            done.append((item, "kept"))
    return done


def unowned(kube: Kube, namespace: str, groups, selector: str):
    """(kind, object) of every unowned object ``selector`` selects, per group of kinds (the versions
    of one kind list the same objects: the first one served is read); kinds the cluster lacks are skipped."""
    for kinds in groups:
        for kind in kinds:
            try:
                objects = kube.list(kind, namespace, label_selector=selector)
            except KindNotServedError:
                continue
            yield from ((kind, obj) for obj in objects if not obj["metadata"].get("ownerReferences"))
            break


def _latest(jobs: list[dict]) -> dict | None:
    return max(jobs, key=lambda j: j["metadata"].get("creationTimestamp") or "", default=None)


def _judge(kube: Kube, kind: Kind, obj: dict, job: dict | None, namespace: str, now: float) -> tuple[str, str]:
    if kind in dgd.KINDS:
        # its first user is the run that created it; a run that reused it may still be starting
        live = usage.live(kube, dgd.users(obj)[1:], namespace, starting_is_live=True)
        if live:
            return "keep", f"run {', '.join(live)} uses it"
    if rayjob.live(job):  # linking is what the run does itself: harmless even if it is still alive
        name = job["metadata"]["name"]
        if kind == secret.KIND:
            return "link", f"its RayJob {name} is running"
        if rayjob.cluster_name(job):
            return "link", f"its RayJob {name} is running on RayCluster {rayjob.cluster_name(job)}"
        return "keep", f"its RayJob {name} is starting"
    if job is not None:
        return "delete", f"its run's RayJob {job['metadata']['name']} ended without it getting an owner"
    due = deadline(obj)
    if due is None:
        return "keep", f"no {DEADLINE_ANNOTATION} annotation: not created unowned by a run"
    if now < due:
        return (
            "keep",
            f"its run may still be starting (owner due by {obj['metadata']['annotations'][DEADLINE_ANNOTATION]})",
        )
    return "delete", "its run died before creating its RayJob"


def _owner(kube: Kube, item: Leftover, namespace: str) -> dict | None:
    job = _latest(kube.list(rayjob.KIND, namespace, label_selector=f"{rayjob.RUN_ID_LABEL}={item.run_id}"))
    if job is None or item.kind == secret.KIND:
        return job
    return kube.find(raycluster.KIND, cluster, namespace) if (cluster := rayjob.cluster_name(job)) else None


def _link(kube: Kube, item: Leftover, namespace: str) -> str:
    owner = _owner(kube, item, namespace)
    if owner is None:
        return "kept (its owner is gone)"
    ref = owner_reference(owner)

    def change(live: dict) -> dict | None:
        return None if live["metadata"].get("ownerReferences") else owners_patch(live, add=ref)

    try:
        kube.modify(item.kind, item.name, change, namespace)
    except NotFoundError:
        return "already gone"
    return f"linked to {owner['kind']} {owner['metadata']['name']}"


def _finish(kube: Kube, item: Leftover, namespace: str) -> str:
    try:
        kube.patch(item.kind, item.name, FINISHED, namespace=namespace)
    except NotFoundError:
        return "already gone"
    return "finished (a long-lived cluster now: gc leaves it)"


def _delete(kube: Kube, item: Leftover, namespace: str) -> str:
    """Delete guarded by the version judged: changed since (a new user, an owner, a run taking it
    over) means judge again next time; a change of its status only (an operator's) is deleted still."""
    judged = item.obj
    for _ in range(3):
        try:
            gone = kube.delete(item.kind, item.name, namespace, resource_version=judged["metadata"]["resourceVersion"])
        except ConflictError:
            live = kube.find(item.kind, item.name, namespace)
            if live is None:
                return "already gone"
            if any(
                live["metadata"].get(k) != judged["metadata"].get(k)
                for k in ("labels", "annotations", "ownerReferences")
            ):
                return "kept (it changed while gc ran: run gc again)"
            judged = live
            continue
        return "deleted" if gone else "already gone"
    return "kept (it changed while gc ran: run gc again)"
