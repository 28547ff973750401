"""The start lease of `run --rayjob`: a Kubernetes Job that owns the suspended RayJob until the run
has brought it up, so nothing outlives a launcher that dies first.

Why a Job: the serial run creates its RayJob suspended, and KubeRay checks neither
``activeDeadlineSeconds`` nor ``preRunningDeadlineSeconds`` while a RayJob is ``Suspended``
(ray-operator v1.6.1, ``rayjob_controller.go``: a suspended RayJob goes from ``Initializing`` to
``Suspending`` before either deadline is looked at, and ``Suspended`` is never requeued), so a
suspended RayJob whose launcher died would keep its DGDs serving forever. Kubernetes' own
controllers end the lease instead, with no person and no add-on involved:

- the Job has ``completions: 0`` and ``parallelism: 0``: it never makes a pod, and the Job
  controller marks it Complete at once (zero completions are reached, suspended or not);
- the TTL-after-finished controller deletes it ``ttlSecondsAfterFinished`` after that;
- garbage collection deletes what it owns, the RayJob, and with it everything the RayJob owns
  (its RayCluster, the run Secret, the DGDs and DRA objects not yet moved to the cluster).

Not ``activeDeadlineSeconds``: that clock stops while a Job is suspended, and Kueue with
``manageJobsWithoutQueueName: true`` suspends every Job without a queue label until it admits
it, which a lease with no queue never is. A finished Job's TTL runs whatever Kueue does.
The TTL is mutable: a live run extends its lease (``renewal``) before each wait, so the lease
bounds what a dead launcher leaves, never what a live one is still waiting for.

The run releases the lease (the RayJob loses this owner, the Job is deleted) once the DGDs and
DRA objects are owned by the RayJob's RayCluster; from then on KubeRay's own end of the job frees them.
"""

from __future__ import annotations

from .base import MANAGED_BY, Kind, object_metadata
from .rayjob import RUN_ID_LABEL

KIND = Kind("batch", "v1", "jobs", "Job")
SUFFIX = "-lease"  # KubeRay's submitter Job takes the RayJob's own name


def name_of(rayjob_name: str) -> str:
    return rayjob_name + SUFFIX


def render(infra: dict, rayjob: dict, seconds: int) -> dict:
    """The lease of ``rayjob`` (a rendered RayJob), ending ``seconds`` after it is created. Not the
    RayJob's scheduler labels: a Kueue queue label would make Kueue manage (suspend) the lease."""
    meta = rayjob["metadata"]
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    labels = [MANAGED_BY, infra.get("labels"), {RUN_ID_LABEL: meta["labels"][RUN_ID_LABEL]}]
    metadata = object_metadata(name_of(meta["name"]), meta["namespace"], labels, [], key=("kuberay", "training"))
    return {
        "apiVersion": KIND.api_version,
        "kind": KIND.kind,
        "metadata": metadata,
        "spec": {
            "completions": 0,  # Complete at once: its TTL is the deadline
            "parallelism": 0,  # never a pod: the Job is only a deadline
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": seconds,
            # never started (parallelism 0), but a Job must have a valid pod template
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "lease", "image": head["image"]}]}},
        },
    }


def renewal(seconds: int) -> dict:
    """The merge patch making a lease end ``seconds`` after it was created (it finished then)."""
    return {"spec": {"ttlSecondsAfterFinished": seconds}}


def ends(job: dict) -> str | None:
    """When the live lease ``job`` ends (RFC 3339, UTC), once the Job controller has finished it."""
    from datetime import datetime, timedelta

    status = job.get("status") or {}
    done = status.get("completionTime") or next(
        (c.get("lastTransitionTime") for c in status.get("conditions") or []
         if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"), None)
    if not done:
        return None
    when = datetime.strptime(done, "%Y-%m-%dT%H:%M:%SZ") + timedelta(seconds=job["spec"]["ttlSecondsAfterFinished"])
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")
