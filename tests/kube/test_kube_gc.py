"""`nrl-k8s gc` over real HTTP: what a dead run left is deleted, a live run's is linked or kept,
and nothing without our run label (or with an owner) is ever touched.

The sandbox's controllers act on what the tests create: the Dynamo controller writes each DGD's
status once (``settled`` waits for it, so a delete guarded by the version gc judged is not refused
for that); the RayJobs and RayClusters are managed by MultiKueue (``spec.managedBy``), which
KubeRay leaves alone, so their status is the test's to write and no Ray pod starts.
"""

from __future__ import annotations

import time

import pytest
from sandbox_harness import DEADLINE_S

from nrl_k8s.kinds import dgd, raycluster, rayjob, secret
from nrl_k8s.kinds.base import MANAGED_BY, owned
from nrl_k8s.kinds.readiness import Pending, Ready
from nrl_k8s.ops import gc

RUN = "train-0a1b2c3d"
PAST, FUTURE = -3600, 3600
NOT_KUBERAYS = "kueue.x-k8s.io/multikueue"
HEAD = {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}


def labels(run_id: str | None = RUN) -> dict:
    return {**MANAGED_BY, **({rayjob.RUN_ID_LABEL: run_id} if run_id else {})}


def make_dgd(kube, name: str, *, run_id: str | None = RUN, due: float | None = PAST, users: str = "train", owner=None):
    manifest = {"apiVersion": dgd.KIND.api_version, "kind": "DynamoGraphDeployment",
                "metadata": {"name": name, "labels": labels(run_id), "annotations": {dgd.USERS_ANNOTATION: users}},
                "spec": {"services": {}}}
    if due is not None:
        manifest = gc.with_deadline(manifest, due)
    kube.create(dgd.KIND, owned(manifest, owner) if owner else manifest)
    return kube.wait(dgd.KIND, settled, name=name, timeout_s=DEADLINE_S)


def settled(obj: dict | None):
    """The Dynamo controller has written the status of this generation (a DGD without components: successful)."""
    status = (obj or {}).get("status") or {}
    done = status.get("state") == "successful" and status.get("observedGeneration") == obj["metadata"]["generation"]
    return Ready() if done else Pending(f"state {status.get('state')}")


def make_cluster(kube, name: str) -> dict:
    return kube.create(raycluster.KIND, {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
                                         "spec": {"headGroupSpec": HEAD, "managedBy": NOT_KUBERAYS}})


def make_secret(kube, name: str, *, due: float = PAST):
    return kube.create(secret.KIND, gc.with_deadline(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "labels": labels()}, "data": {}}, due))


def make_rayjob(kube, name: str, *, run_id: str = RUN, status: dict | None = None):
    job = kube.create(rayjob.KIND, {"apiVersion": "ray.io/v1", "kind": "RayJob",
                                    "metadata": {"name": name, "labels": labels(run_id)},
                                    "spec": {"entrypoint": "python x.py", "managedBy": NOT_KUBERAYS}})
    if status:
        job = kube.patch_status(rayjob.KIND, name, {"status": status})
    return job


def verdicts(kube) -> dict[str, str]:
    return {item.name: item.verdict for item in gc.find(kube, kube.namespace)}


def test_a_dead_runs_unowned_objects_are_deleted_and_nothing_else(kube):
    make_dgd(kube, "left-dgd")  # its run never made a RayJob, deadline passed
    make_secret(kube, RUN)
    make_dgd(kube, "starting-dgd", due=FUTURE)  # its run may still be starting
    make_dgd(kube, "users-dgd", run_id=None)  # no run label: not ours (cluster up, or the user's)
    make_dgd(kube, "no-deadline-dgd", due=None)  # labelled but never created unowned by a run
    make_dgd(kube, "owned-dgd", owner=make_cluster(kube, "c1"))  # GC's business

    assert verdicts(kube) == {"left-dgd": "delete", RUN: "delete", "starting-dgd": "keep", "no-deadline-dgd": "keep"}
    done = {item.name: action for item, action in gc.collect(kube, kube.namespace, gc.find(kube, kube.namespace))}
    assert done == {"left-dgd": "deleted", RUN: "deleted", "starting-dgd": "kept", "no-deadline-dgd": "kept"}
    remaining = {o["metadata"]["name"] for o in kube.list(dgd.KIND)}
    assert remaining == {"starting-dgd", "users-dgd", "no-deadline-dgd", "owned-dgd"}
    assert kube.find(secret.KIND, RUN) is None


def test_a_dgd_another_live_run_uses_is_kept(kube):
    make_dgd(kube, "shared", users="train,other")
    make_rayjob(kube, "other", run_id="other-11111111", status={"jobDeploymentStatus": "Running"})
    item = gc.find(kube, kube.namespace)[0]
    assert (item.verdict, item.reason) == ("keep", "run other uses it")


def test_objects_of_a_run_whose_rayjob_ended_are_deleted(kube):
    make_rayjob(kube, "train", status={"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"})
    make_dgd(kube, "d1")
    [item] = gc.find(kube, kube.namespace)
    assert item.verdict == "delete" and "ended without it getting an owner" in item.reason


def test_a_live_runs_unowned_objects_are_linked_to_its_rayjob_and_cluster(kube):
    job = make_rayjob(kube, "train", status={"jobDeploymentStatus": "Running", "rayClusterName": "train-bcd42"})
    cluster = make_cluster(kube, "train-bcd42")
    make_dgd(kube, "d1")
    make_secret(kube, RUN)
    assert verdicts(kube) == {"d1": "link", RUN: "link"}
    done = {item.name: action for item, action in gc.collect(kube, kube.namespace, gc.find(kube, kube.namespace))}
    assert done == {"d1": "linked to RayCluster train-bcd42", RUN: "linked to RayJob train"}
    assert [o["uid"] for o in kube.get(dgd.KIND, "d1")["metadata"]["ownerReferences"]] == [cluster["metadata"]["uid"]]
    assert [o["uid"] for o in kube.get(secret.KIND, RUN)["metadata"]["ownerReferences"]] == [job["metadata"]["uid"]]
    assert gc.find(kube, kube.namespace) == []  # owned now: nothing left for gc


def test_a_delete_is_guarded_by_the_version_judged(kube):
    make_dgd(kube, "d1")
    found = gc.find(kube, kube.namespace)
    kube.patch(dgd.KIND, "d1", {"metadata": {"annotations": {dgd.USERS_ANNOTATION: "train,newcomer"}}})
    assert [action for _, action in gc.collect(kube, kube.namespace, found)] == [
        "kept (it changed while gc ran: run gc again)"]
    assert kube.find(dgd.KIND, "d1") is not None


def test_deadline_annotation_round_trips():
    now = time.time()
    manifest = gc.with_deadline({"metadata": {"name": "x"}}, 90, now=now)
    assert gc.deadline(manifest) == pytest.approx(now + 90, abs=1)
    assert gc.deadline({"metadata": {"annotations": {gc.DEADLINE_ANNOTATION: "garbage"}}}) is None
