"""What a long-lived bring-up (`run --raycluster`, `cluster up`) leaves when it is killed midway.

The long-lived flow's RayClusters, Deployments and their Services (and the DGDs of `cluster up`)
have no owner: they outlive a run on purpose, and a warm re-run reuses them. Everything else the
flow creates is owned by a RayCluster from its creation, so GC removes it with that cluster. To
tell a finished bring-up's objects from those of one killed before it finished, each unowned
object is created with

- the run-id label (``nrl-k8s.io/run-id``) of the run that created it, as every object it creates;
- the label ``nrl-k8s.io/bringup: unfinished`` and the deadline annotation (``gc.DEADLINE_ANNOTATION``):
  the time by which a live bring-up has finished (``longlived.bringup_seconds``: the bounds of its waits).

The bring-up finishes just before the driver is submitted (`cluster up`: once it is done) by
removing that label and annotation (``FINISHED``): the objects are then long-lived clusters, which
`gc` never touches. A run that reuses an unfinished object takes it over first (its own run id and
deadline, ``takeover``), so a re-run of a killed bring-up finishes it. For each unfinished object:

- made by another user, or by a person: ``keep`` (never ours to delete);
- its deadline has not passed: ``keep`` (a live run may still be bringing it up; `status` lists it);
- else ``delete``: its bring-up was killed (deleting a RayCluster lets GC take what it owns).

A run killed between the finishing patch and the driver's submission leaves warm clusters that a
re-run reuses, not leftovers.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from nrl_k8s.config.interpolate import user_name
from nrl_k8s.kinds import deployment, dgd, raycluster, rayjob, service
from nrl_k8s.kinds.base import MANAGED_BY_SELECTOR, delete_command, labelled, maker
from nrl_k8s.ops import gc

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

LABEL = gc.BRINGUP_LABEL
UNFINISHED = "unfinished"
SELECTOR = f"{MANAGED_BY_SELECTOR},{LABEL}={UNFINISHED}"
# The merge patch that finishes a bring-up's object: no marker left for gc.
FINISHED = {"metadata": {"labels": {LABEL: None}, "annotations": {gc.DEADLINE_ANNOTATION: None}}}


def stamp(manifest: dict, run_id: str, seconds: float) -> dict:
    """``manifest`` as a bring-up creates it: its run id and, with no owner, unfinished until ``seconds`` from now."""
    manifest = labelled(manifest, rayjob.RUN_ID_LABEL, run_id)
    if manifest["metadata"].get("ownerReferences"):
        return manifest
    return gc.with_deadline(labelled(manifest, LABEL, UNFINISHED), seconds)


def unfinished(obj: dict | None) -> bool:
    return ((obj or {}).get("metadata") or {}).get("labels", {}).get(LABEL) == UNFINISHED


def takeover(run_id: str, seconds: float) -> dict:
    """The merge patch by which a live run makes a killed bring-up's object its own unfinished one."""
    stamped = stamp({"metadata": {}}, run_id, seconds)["metadata"]
    return {"metadata": {"labels": stamped["labels"], "annotations": stamped["annotations"]}}


def find(kube: Kube, namespace: str, now: float | None = None, user: str | None = None) -> list[gc.Leftover]:
    """Every unfinished object in ``namespace``, judged for ``user`` (default: this user, as ``${user:}``)."""
    now = gc.current_time() if now is None else now
    user = user or user_name(os.environ)
    found = []
    for kind, obj in gc.unowned(kube, namespace, ((raycluster.KIND,), (deployment.KIND,), (service.KIND,), dgd.KINDS),
                                SELECTOR):
        verdict, reason = judge(obj, user, now)
        found.append(gc.Leftover(kind, obj["metadata"]["name"], obj["metadata"]["labels"].get(rayjob.RUN_ID_LABEL, "?"),
                                 verdict, reason, obj))
    return found


def judge(obj: dict, user: str, now: float) -> tuple[str, str]:
    """(verdict, reason) for one unfinished object: ``delete`` only this user's, past its deadline."""
    who = maker(obj, user)
    if who:
        return "keep", f"an unfinished bring-up's, made by {who}: not this user's to delete"
    due = gc.deadline(obj)
    if due is None:
        return "keep", f"no {gc.DEADLINE_ANNOTATION} annotation: no deadline to judge it by"
    when = _utc(due)
    if now < due:
        return "keep", (f"its bring-up has not finished; a live `nrl-k8s run` or `cluster up` finishes it by {when}, "
                        "else gc deletes it then")
    return "delete", f"its bring-up did not finish by {when}: the run or `cluster up` was killed before it finished"


def status_rows(kube: Kube, namespace: str, user: str) -> list[dict]:
    """``user``'s unfinished objects whose deadline has not passed, as LEFT BEHIND rows (past it,
    ``status.gc_rows`` lists them with `nrl-k8s gc`)."""
    return [
        {
            "what": f"{item.kind.kind} {item.name}",
            "reason": f"run {item.run_id}: {item.reason}",
            "remove": f"if that run is gone: {delete_command(item.kind, item.name, namespace)}   (or after "
            f"{_utc(deadline)}: nrl-k8s -n {namespace} gc; a re-run finishes it instead)",
        }
        for item in find(kube, namespace, user=user)
        if item.verdict == "keep" and (deadline := gc.deadline(item.obj)) is not None and maker(item.obj, user) is None
    ]


def _utc(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
