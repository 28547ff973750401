"""What a long-lived bring-up (`run --raycluster`, `cluster up`) leaves when it is killed midway.

The long-lived flow's RayClusters, Deployments and their Services (and the DGDs of `cluster up`)
have no owner: they outlive a run on purpose, and a warm re-run reuses them. Everything else the
flow creates is owned by a RayCluster from its creation, so GC removes it with that cluster. To
tell a finished bring-up's objects from those of one killed before it finished, each unowned
object is created with

- the run-id label (``nrl-k8s.io/run-id``) of the run that created it, as every object it creates;
- the label ``nrl-k8s.io/bringup: unfinished`` and the deadline annotation (``gc.DEADLINE_ANNOTATION``):
  the time by which a live bring-up has finished (``longlived.bringup_seconds``: the bounds of its waits).

The bring-up finishes once the driver is submitted (`cluster up`: once it is done) by removing
that label and annotation (``FINISHED``): the objects are then long-lived clusters, which `gc`
never touches. Until the submission has returned they stay marked, so a run killed while it
submits (or just before) leaves objects `status` lists and `gc` removes past their deadline. A
run that reuses an unfinished object takes it over first (its own run id and deadline,
``takeover``), so a re-run of a killed bring-up finishes it. `gc` judges the marks
(``gc.judge_unfinished``); this module only writes them, so gc imports no flow.
"""

from __future__ import annotations

from nrl_k8s.kinds import rayjob
from nrl_k8s.kinds.base import labelled
from nrl_k8s.ops import gc

LABEL, UNFINISHED, FINISHED = gc.BRINGUP_LABEL, gc.UNFINISHED, gc.FINISHED


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
