"""`run --rayjob --parallel`: the DGDs and the RayJob's cluster come up at once, never unowned.

The shared steps and `run --rayjob`'s own (``rayjob.RayJobRun``), in another order (``bring_up``):

0. preflight as in the serial flow, and the RayJob CRD must know ``InteractiveMode`` and
   ``preRunningDeadlineSeconds`` (without them nothing would end a RayJob whose launcher died);
1. the Deployments, as in the serial flow;
2. the RayJob (InteractiveMode, no ``spec.jobId``, ``preRunningDeadlineSeconds`` = the longest DGD
   readyTimeoutS + a margin), checked to have kept both fields, then the run Secret created with
   the RayJob as its owner;
3. as soon as KubeRay has created the cluster: the DRA objects and every DGD created with that
   cluster already as owner (no window without one; a reused DGD is linked to it);
4. every DGD (three gates) and the cluster (provisioned) awaited at once;
5. the driver submitted through the dashboard with submission id = the run id, **then** the
   RayJob's ``spec.jobId`` set to it, so KubeRay tracks it (a crash between the two leaves a
   RayJob the deadline fails, never one waiting for a job that will not come).

If nrl-k8s dies at any point, KubeRay fails the RayJob at the pre-running deadline and deletes
its cluster, and GC deletes the DGDs and DRA objects with it. Failure or Ctrl-C before step 5
ends rolls back what the run created, as in the serial flow.
"""

from __future__ import annotations

import importlib
from typing import overload

from nrl_k8s.errors import ConfigError, ForbiddenError, NrlK8sError, ResourceFailed, SubmissionExists
from nrl_k8s.events import Applied, Warning
from nrl_k8s.kinds import core, crds, raycluster, rayjob, secret
from nrl_k8s.kinds.index import kind_of
from nrl_k8s.kinds.readiness import Failed

from .concurrency import Background, fan_out
from .rayjob import RayJobRun


def check_crd(run: RayJobRun) -> None:
    """Refuse when the RayJob CRD lacks what a parallel bring-up relies on."""
    try:
        crd = run.kube.find(core.CRD, crds.RAYJOB)
    except ForbiddenError:
        run.emit(Warning("cannot read the RayJob CRD to check it supports --parallel; "
                          "the created RayJob is checked instead"))
        return
    missing = (crds.parallel_gaps(crd).missing if crd is not None
               else ("the RayJob CRD (rayjobs.ray.io is not installed)",))
    if missing:
        raise ConfigError(f"--parallel needs {', '.join(missing)}, which this cluster's KubeRay lacks; "
                          "nothing was created",
                          hint=f"{crds.HELMFILE_HINT}; {crds.UPGRADE[crds.RAYJOB]}; or run without --parallel")

def apply_rayjob(run: RayJobRun) -> None:
    job = run.steps.create(rayjob.KIND, run.plan.rayjob, "rayjob")
    run.emit(Applied("rayjob", run.result.rayjob, "created (InteractiveMode, pre-running deadline "
                                                    f"{job['spec'].get('preRunningDeadlineSeconds')}s)"))
    if not rayjob.interactive(job) or job["spec"].get("preRunningDeadlineSeconds") is None:
        # a CRD that prunes unknown fields drops them silently: nothing would end the RayJob
        raise ConfigError("the API server dropped spec.preRunningDeadlineSeconds or submissionMode "
                          "InteractiveMode from the RayJob: its KubeRay predates --parallel",
                          hint=f"{crds.HELMFILE_HINT}; {crds.UPGRADE[crds.RAYJOB]}; or run without --parallel")
    run.steps.create_owned(secret.KIND, run.plan.secret, job, "secret")

def apply_owned(run: RayJobRun, cluster: dict | None, existing: dict[str, dict | None]) -> None:
    """The DRA objects and the DGDs, created with ``cluster`` as their owner."""
    if cluster is None:
        raise job_failure(run, "its RayCluster was gone before the DGDs could be created")
    for obj in run.plan.dra:
        run.steps.create_owned(kind_of(obj), obj, cluster, "dra")
    run.steps.apply_dgds(run.plan.dgds, existing, owner=cluster)

def wait_all(run: RayJobRun) -> None:
    """Every DGD serving and the cluster provisioned, awaited at once (meanwhile the dashboard
    client's modules are imported, off the path to the driver's submission)."""
    deadline = float(run.plan.rayjob["spec"]["preRunningDeadlineSeconds"])
    cluster = run.result.raycluster
    assert cluster is not None  # cluster_named named it
    Background(lambda: importlib.import_module("nrl_k8s.ray.dashboard"), "dashboard-import")

    def provisioned(emit) -> None:
        run.steps.wait_ready(raycluster.KIND, lambda obj: Failed("it was deleted") if obj is None
                        else raycluster.readiness(obj), cluster, "raycluster", deadline, emit)

    try:
        fan_out({"dynamo": lambda emit: run.steps.wait_dgds(run.plan.dgds, run.plan.ready_timeouts),
                  "raycluster": provisioned}, run.emit, lambda label: None)
    except NrlK8sError as err:
        raise job_failure(run, None) or err from None

@overload
def job_failure(run: RayJobRun, otherwise: str) -> ResourceFailed: ...
@overload
def job_failure(run: RayJobRun, otherwise: None) -> ResourceFailed | None: ...
def job_failure(run: RayJobRun, otherwise: str | None) -> ResourceFailed | None:
    """The RayJob's own reason when it has ended (the pre-running deadline, a validation failure)."""
    job = run.kube.find(rayjob.KIND, run.result.rayjob, run.ns)
    if job is not None and rayjob.terminal(job):
        return ResourceFailed(f"RayJob {run.result.rayjob} ended before its driver was submitted: "
                              f"{rayjob.readiness(job).reason}")
    if otherwise is None:
        return None
    return ResourceFailed(f"RayJob {run.result.rayjob}: {otherwise}" if job is not None
                          else f"RayJob {run.result.rayjob} was deleted")

def submit_driver(run: RayJobRun) -> None:
    """Submit the driver, then point the RayJob at it."""
    job_id = run.plan.run_id
    with run.dashboard() as dash:
        try:
            dash.submit(run.plan.rayjob["spec"]["entrypoint"], submission_id=job_id)
        except SubmissionExists:
            pass  # a retried request that had reached the dashboard
    # the driver exists: from here nothing is rolled back, a failed jobId patch included (it
    # once deleted the DGDs, the Secret and the RayJob of a job that then SUCCEEDED)
    run.submitted, run.result.job_id = True, job_id
    run.kube.patch(rayjob.KIND, run.result.rayjob, {"spec": {"jobId": job_id}}, namespace=run.ns)
    run.mark_submitted(f"submitted by nrl-k8s as job {job_id} once every DGD served")


def bring_up(run: RayJobRun) -> None:
    """Everything up to the driver's submission, in the parallel order."""
    check_crd(run)
    existing = run.preflight()
    run.steps.deployments(run.plan.deployments, run.plan.health)
    apply_rayjob(run)
    apply_owned(run, run.follow_cluster(), existing)
    wait_all(run)
    submit_driver(run)
