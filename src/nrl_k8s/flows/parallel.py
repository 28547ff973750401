"""`run --rayjob --parallel`: the DGDs and the RayJob's cluster come up at once, never unowned.

The steps are `run --rayjob`'s (``orchestrate.RayJobRun``) in another order:

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
from collections.abc import Callable

from nrl_k8s.kinds import crds
from nrl_k8s.flows.steps import Background, parallel
from nrl_k8s.errors import ConfigError, ForbiddenError, NrlK8sError, ResourceFailed, SubmissionExists
from nrl_k8s.events import Applied, Emit, Warning
from nrl_k8s.kinds import core, raycluster, rayjob, secret
from nrl_k8s.kinds.base import Failed
from nrl_k8s.kinds.index import kind_of
from nrl_k8s.flows.rayjob import LiveOptions, RayJobRun, RunResult, execute
from .plan import RunPlan


class ParallelRun(RayJobRun):
    def preflight(self) -> dict[str, dict | None]:
        self.check_crd()
        return super().preflight()

    def check_crd(self) -> None:
        """Refuse when the RayJob CRD lacks what a parallel bring-up relies on."""
        try:
            crd = self.kube.find(core.CRD, crds.RAYJOB)
        except ForbiddenError:
            self.emit(Warning("cannot read the RayJob CRD to check it supports --parallel; "
                              "the created RayJob is checked instead"))
            return
        missing = (crds.parallel_gaps(crd).missing if crd is not None
                   else ("the RayJob CRD (rayjobs.ray.io is not installed)",))
        if missing:
            raise ConfigError(f"--parallel needs {', '.join(missing)}, which this cluster's KubeRay lacks; "
                              "nothing was created",
                              hint=f"{crds.HELMFILE_HINT}; {crds.UPGRADE[crds.RAYJOB]}; or run without --parallel")

    def apply_rayjob(self) -> None:
        job = self.create(rayjob.KIND, self.plan.rayjob, "rayjob")
        self.emit(Applied("rayjob", self.result.rayjob, "created (InteractiveMode, pre-running deadline "
                                                        f"{job['spec'].get('preRunningDeadlineSeconds')}s)"))
        if not rayjob.interactive(job) or job["spec"].get("preRunningDeadlineSeconds") is None:
            # a CRD that prunes unknown fields drops them silently: nothing would end the RayJob
            raise ConfigError("the API server dropped spec.preRunningDeadlineSeconds or submissionMode "
                              "InteractiveMode from the RayJob: its KubeRay predates --parallel",
                              hint=f"{crds.HELMFILE_HINT}; {crds.UPGRADE[crds.RAYJOB]}; or run without --parallel")
        self.create_owned(secret.KIND, self.plan.secret, job, "secret")

    def apply_owned(self, cluster: dict | None, existing: dict[str, dict | None]) -> None:
        """The DRA objects and the DGDs, created with ``cluster`` as their owner."""
        if cluster is None:
            raise self.job_failure("its RayCluster was gone before the DGDs could be created")
        for obj in self.plan.dra:
            self.create_owned(kind_of(obj), obj, cluster, "dra")
        self.apply_dgds(self.plan.dgds, existing, owner=cluster)

    def wait_all(self) -> None:
        """Every DGD serving and the cluster provisioned, awaited at once (meanwhile the dashboard
        client's modules are imported, off the path to the driver's submission)."""
        deadline = float(self.plan.rayjob["spec"]["preRunningDeadlineSeconds"])
        Background(lambda: importlib.import_module("nrl_k8s.ray.dashboard"), "dashboard-import")

        def provisioned(emit) -> None:
            self.wait_ready(raycluster.KIND, lambda obj: Failed("it was deleted") if obj is None
                            else raycluster.readiness(obj), self.result.raycluster, "raycluster", deadline, emit)

        try:
            parallel({"dynamo": lambda emit: self.wait_dgds(self.plan.dgds, self.plan.ready_timeouts),
                      "raycluster": provisioned}, self.emit, lambda label: None)
        except NrlK8sError as err:
            raise self.job_failure(None) or err from None

    def job_failure(self, otherwise: str | None) -> ResourceFailed | None:
        """The RayJob's own reason when it has ended (the pre-running deadline, a validation failure)."""
        job = self.kube.find(rayjob.KIND, self.result.rayjob, self.ns)
        if job is not None and rayjob.terminal(job):
            return ResourceFailed(f"RayJob {self.result.rayjob} ended before its driver was submitted: "
                                  f"{rayjob.readiness(job).reason}")
        if otherwise is None:
            return None
        return ResourceFailed(f"RayJob {self.result.rayjob}: {otherwise}" if job is not None
                              else f"RayJob {self.result.rayjob} was deleted")

    def submit_driver(self) -> None:
        """Submit the driver, then point the RayJob at it."""
        job_id = self.plan.run_id
        with self._dashboard() as dash:
            try:
                dash.submit(self.plan.rayjob["spec"]["entrypoint"], submission_id=job_id)
            except SubmissionExists:
                pass  # a retried request that had reached the dashboard
        # the driver exists: from here nothing is rolled back, a failed jobId patch included (it
        # once deleted the DGDs, the Secret and the RayJob of a job that then SUCCEEDED)
        self.submitted, self.result.job_id = True, job_id
        self.kube.patch(rayjob.KIND, self.result.rayjob, {"spec": {"jobId": job_id}}, namespace=self.ns)
        self._submitted(f"submitted by nrl-k8s as job {job_id} once every DGD served")


    def bring_up(self) -> None:
        existing = self.preflight()
        self.deployments(self.plan.deployments, self.plan.health)
        self.apply_rayjob()
        self.apply_owned(self.follow_cluster(), existing)
        self.wait_all()
        self.submit_driver()


def run_parallel(kube, plan: RunPlan, options: LiveOptions, emit: Emit,
                 on_log: Callable[[str], None] | None = None) -> RunResult:
    return execute(ParallelRun(kube, plan, options, emit), on_log)
