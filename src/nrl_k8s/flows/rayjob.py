"""`run --rayjob`: the ordering that matters (SPEC "run --rayjob").

0. preflight: every permission the run needs, a live Service with a head Service name the
   RayJob would get (``head_services``), objects another user or a person made, DGD drift, a
   RayJob of the same name (a finished one nrl-k8s created is replaced, a live one refused) —
   before anything is created;
1. the Deployments (+ Services) ensured and awaited Available and healthy;
2. the start lease (``kinds.lease``), then the RayJob suspended (KubeRay makes nothing yet) and
   owned by the lease, then the run Secret, the DRA objects and every DGD created with the RayJob
   as their owner (a DGD reused as identical is linked to it and lists this run among its users);
   KubeRay refuses to suspend a RayJob that keeps its cluster (``--no-shutdown``): then the lease
   owns them, and the RayJob is created (owned by the lease, taking the Secret) in step 4;
3. every DGD awaited serving, in parallel; no training GPU is held meanwhile;
4. the RayJob resumed; its RayCluster followed, and the DRA objects and DGDs moved from the
   RayJob to it (GC deletes them with the cluster, which KubeRay deletes when the job ends); the
   lease released (the RayJob's owner removed, the Job deleted);
5. the stalled-driver rescue, then the run recorded (``runs``); 6. optionally follow the job to
   its end: its driver log streamed (and kept with the record) until Ray reports it over, then
   the RayJob until KubeRay does, within ``job_timeout_s``.

Nothing is ever unowned. If this command dies before step 4 ends, the lease ends at its deadline
and GC deletes the RayJob and all it owns, with no one involved. The deadline is first the longest
DGD readyTimeoutS + ``plan.START_MARGIN_S``; the run moves it (``renew_lease``) to cover the DGD
waits once the creates are done, and the steps after once the DGDs serve, and bounds every wait by
the time the lease has left. `run --parallel` (``parallel``) uses KubeRay's pre-running deadline instead.

Any failure or Ctrl-C before the driver is submitted rolls back what the run's ledger holds
(see ``rollback``). Once the driver is submitted nothing is rolled back: the error says the
RayJob keeps running and how to stop it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nrl_k8s.errors import (
    ApiError,
    ConfigError,
    DashboardError,
    NotFoundError,
    ResourceFailed,
    SubmissionExists,
    WaitTimeout,
)
from nrl_k8s.events import Applied, Became, Emit, Waiting, Warning
from nrl_k8s.flows import driver_log, head_services, lifecycle
from nrl_k8s.flows import records as runs
from nrl_k8s.flows.lifecycle import LiveOptions
from nrl_k8s.flows.steps import GONE_TIMEOUT_S, PROVISION_TIMEOUT_S, BringUp
from nrl_k8s.kinds import dgd, lease, raycluster, rayjob, secret
from nrl_k8s.kinds.base import delete_command, managed, owned, owners_patch
from nrl_k8s.kinds.index import kind_of
from nrl_k8s.kinds.readiness import Failed, Pending, Ready
from nrl_k8s.ops.probe import run_permissions

from .plan import RunOptions, RunPlan

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

if TYPE_CHECKING:
    from nrl_k8s.ray.dashboard import Dashboard

_CLUSTER_NAME_TIMEOUT_S = 300
_STATUS_GRACE_S = 60  # for KubeRay to mark a RayJob over once Ray reported its job over
_FOREVER_S = 10 * 365 * 86400
_LEASE_SAFETY_S = 30  # a wait before the release gives up this long before the lease would end under the run
# The lease is extended before the DGD waits to cover them and the extension after them
# (_RENEW_MARGIN_S: one patch, with its retries), and once they serve to cover the steps after
# (_AFTER_SERVING_S: the resume, the RayCluster named and created, the owners moved, the release).
_RENEW_MARGIN_S = 60
_AFTER_SERVING_S = _CLUSTER_NAME_TIMEOUT_S + 60


def options_for(*, wait: bool, shutdown: bool = True, ttl_seconds: int | None = None,
                active_deadline_seconds: int | None = None, parallel: bool = False) -> tuple[RunOptions, bool]:
    """What a `run --rayjob` (serial or ``--parallel``) renders, and whether it deletes the ended job's
    RayCluster itself (``LiveOptions.frees_cluster``): with ``wait`` and no TTL given, it does, once
    the driver's log is in, and ``rayjob.LOG_GRACE_S`` counts only if the run dies first; otherwise
    KubeRay deletes it after the TTL given, else ``rayjob.DEFAULT_TTL_SECONDS``."""
    frees = wait and shutdown and ttl_seconds is None
    ttl = rayjob.LOG_GRACE_S if frees else rayjob.DEFAULT_TTL_SECONDS if ttl_seconds is None else ttl_seconds
    return RunOptions(shutdown=shutdown, ttl_seconds=ttl, active_deadline_seconds=active_deadline_seconds,
                      parallel=parallel), frees


@dataclass(kw_only=True)
class RunResult(lifecycle.Outcome):
    rayjob: str
    raycluster: str | None = None
    job_id: str | None = None
    rescued: bool = False


class RayJobRun:
    """One `run --rayjob` (serial or ``--parallel``): its plan, the shared steps and its own."""

    def __init__(self, kube: Kube, plan: RunPlan, options: LiveOptions, emit: Emit):
        name, ns = plan.rayjob["metadata"]["name"], plan.rayjob["metadata"]["namespace"]
        self.kube, self.ns, self.emit = kube, ns, emit
        self.steps = BringUp(kube, ns, name, emit, adopt=options.adopt, place_anyway=options.place_anyway)
        self.plan, self.options = plan, options
        self.result = RunResult(rayjob=name, namespace=ns, dgds=self.steps.dgd_actions, owners=self.steps.dgd_owners)
        self.submitted = False  # the driver exists: from now on nothing is rolled back
        self.lease_ends = math.inf  # monotonic time the start lease ends (serial run, until released)
        self.lease_start = math.inf  # monotonic time just before the lease was created (its TTL counts from then on)
        self.lease: dict | None = None  # the start lease and the RayJob, as created
        self.job: dict | None = None
        self.holder: dict | None = None  # what owns the run's objects until its RayCluster does

    # -- preflight -------------------------------------------------------------------------
    def preflight(self) -> dict[str, dict | None]:
        """Refuse before creating anything: missing permissions, a taken name we cannot reuse."""
        proxy = not self.kube.in_cluster and not self.options.dashboard_url
        self.steps.check_permissions(run_permissions(self.plan.manifests(), proxy=proxy), dashboard_url_helps=proxy)
        self.steps.check_owners(self.plan.manifests())
        head_services.check_live(self.kube, self.ns, [self.plan.rayjob], self.emit)
        existing = self.steps.check_dgds(self.plan.dgds)
        job = self.kube.find(rayjob.KIND, self.result.rayjob, self.ns)
        if job is not None:
            self.replace_finished(job)
            existing = self.steps.check_dgds(self.plan.dgds)  # GC may have taken DGDs the finished job's cluster owned
        self.check_secret()
        return existing

    def check_secret(self) -> None:
        name = self.plan.secret["metadata"]["name"]
        found = self.kube.find(secret.KIND, name, self.ns)
        if found is not None:
            owned = found["metadata"].get("ownerReferences")
            raise ConfigError(
                f"Secret {name} (this run's recipe and launch.env) already exists in namespace {self.ns}",
                hint="its RayJob was deleted and garbage collection has not removed it yet: retry in a moment" if owned
                else f"an interrupted start of this same run left it: {delete_command(secret.KIND, name, self.ns)}",
            )

    def replace_finished(self, job: dict) -> None:
        """A finished RayJob nrl-k8s created is deleted (with its cluster and the DGDs only it owned)."""
        name = self.result.rayjob
        if not rayjob.terminal(job) or not managed(job):
            held = any(o.get("kind") == lease.KIND.kind for o in job["metadata"].get("ownerReferences") or [])
            state = ("is held suspended by the start lease of a run that may have died: the lease deletes it "
                     "with all it owns at its deadline" if held
                     else "is still running" if not rayjob.terminal(job) else "was not created by nrl-k8s")
            raise ConfigError(
                f"RayJob {name} already exists in namespace {self.ns} and {state}",
                hint=f"wait for it to finish, or delete it: kubectl -n {self.ns} delete rayjob {name}",
            )
        status = job.get("status") or {}
        self.emit(Warning(f"RayJob {name} from an earlier run has finished ({status.get('jobDeploymentStatus')}, "
                          f"job {status.get('jobStatus') or 'never ran'}); deleting it to start this run"))
        created = rayjob.cluster_name(job)
        cluster = created and self.kube.find(raycluster.KIND, created, self.ns)
        old_secret = self.kube.find(secret.KIND, self.plan.secret["metadata"]["name"], self.ns)
        self.kube.delete(rayjob.KIND, name, self.ns)
        self.kube.wait_gone(rayjob.KIND, name, self.ns, timeout_s=GONE_TIMEOUT_S)
        job_uid = job["metadata"].get("uid")
        if old_secret and any(o.get("uid") == job_uid for o in old_secret["metadata"].get("ownerReferences") or []):
            # the same config makes the same Secret name: GC must have taken the old one first
            self.kube.wait_gone(secret.KIND, old_secret["metadata"]["name"], self.ns, timeout_s=GONE_TIMEOUT_S)
        if cluster:
            uid = cluster["metadata"]["uid"]
            self.kube.wait_gone(raycluster.KIND, cluster["metadata"]["name"], self.ns, timeout_s=GONE_TIMEOUT_S)
            for manifest in self.plan.dgds.values():  # GC takes the DGDs that cluster alone owned
                kind, name = dgd.kind_of(manifest), manifest["metadata"]["name"]
                live = self.kube.find(kind, name, self.ns)
                owners = (live or {}).get("metadata", {}).get("ownerReferences") or []
                if owners and all(o.get("uid") == uid for o in owners):
                    self.kube.wait_gone(kind, name, self.ns, timeout_s=GONE_TIMEOUT_S)
        self.emit(Became("rayjob", f"finished {name} deleted"))

    # -- bring-up --------------------------------------------------------------------------
    def apply_held(self) -> dict:
        """The lease, then the RayJob suspended and owned by it, then the run Secret and the DRA
        objects created with the RayJob as their owner (``apply_dgds`` does the DGDs): none is ever
        unowned. KubeRay refuses to suspend a RayJob that keeps its cluster (``--no-shutdown``):
        then the lease itself owns them until ``resume`` creates the RayJob. Their owner."""
        assert self.plan.lease is not None  # a serial run's plan has its start lease
        self.lease_start = time.monotonic()
        self.lease = held_by = self.steps.create(lease.KIND, self.plan.lease, "lease")
        seconds = self.plan.lease["spec"]["ttlSecondsAfterFinished"]
        self.lease_ends = self.lease_start + seconds
        self.emit(Applied("lease", held_by["metadata"]["name"], f"created (Job; deletes the run's objects in "
                                                                   f"{seconds}s unless released)"))
        if self.plan.rayjob["spec"].get("suspend"):
            self.job = self.steps.create(rayjob.KIND, owned(rayjob.held(self.plan.rayjob), held_by), "rayjob")
            self.emit(Applied("rayjob", self.result.rayjob, "created suspended, owned by the lease"))
        self.holder = holder = self.job or held_by
        self.steps.create_owned(secret.KIND, self.plan.secret, holder, "secret")
        for obj in self.plan.dra:
            self.steps.create_owned(kind_of(obj), obj, holder, "dra")
        return holder

    def resume(self) -> None:
        """Every DGD serves: the suspended RayJob resumed (once KubeRay has suspended it, so the
        cluster name read next is the new cluster's), or the RayJob created, owned by the lease."""
        assert self.lease is not None  # apply_held made it
        if self.job is None:
            self.job = self.steps.create(rayjob.KIND, owned(self.plan.rayjob, self.lease), "rayjob")
            self.emit(Applied("rayjob", self.result.rayjob, "created, owned by the lease"))
            self.steps.add_owner(secret.KIND, self.plan.secret["metadata"]["name"], self.job,
                           replacing=self.lease["metadata"]["uid"])
            return

        def suspended(obj):
            if obj is None:
                return Failed("the RayJob was deleted")
            if rayjob.terminal(obj):
                return Failed(f"it ended before it was resumed: {rayjob.readiness(obj).reason}")
            return Ready() if rayjob.suspended(obj) else Pending("waiting for KubeRay to suspend it")

        self.kube.wait(rayjob.KIND, suspended, name=self.result.rayjob, namespace=self.ns,
                       timeout_s=self.lease_left(), what=f"RayJob {self.result.rayjob}")
        self.kube.patch(rayjob.KIND, self.result.rayjob, rayjob.resume_patch(self.plan.rayjob), namespace=self.ns)
        self.emit(Became("rayjob", "resumed: KubeRay makes its cluster"))

    def lease_left(self, reserve: float = 0.0) -> float:
        """How long a wait before the release may take, ``reserve`` seconds kept for what follows it:
        the lease must not end under a live run."""
        return max(self.lease_ends - time.monotonic() - _LEASE_SAFETY_S - reserve, 1.0)

    def renew_lease(self, seconds: float) -> None:
        """The lease extended so that ``lease_left()`` is ``seconds`` from now (its TTL, counted from
        its creation, patched; it never shrinks)."""
        ttl = math.ceil(time.monotonic() - self.lease_start + seconds + _LEASE_SAFETY_S)
        if self.lease_start + ttl <= self.lease_ends:
            return
        assert self.lease is not None  # apply_held made it
        self.kube.patch(lease.KIND, self.lease["metadata"]["name"], lease.renewal(ttl), namespace=self.ns)
        self.lease_ends = self.lease_start + ttl

    def wait_dgds(self) -> None:
        """Every DGD serving, each within its readyTimeoutS. The lease is extended first to cover those
        waits (however long the creates took), each wait is bounded by what it has left, and once
        every DGD serves it is extended for the steps after: none is left a second."""
        timeouts = self.plan.ready_timeouts
        self.renew_lease(max(timeouts.values(), default=0.0) + _RENEW_MARGIN_S)
        left = self.lease_left(reserve=_RENEW_MARGIN_S)
        self.steps.wait_dgds(self.plan.dgds, {key: min(seconds, left) for key, seconds in timeouts.items()})
        self.renew_lease(_AFTER_SERVING_S)

    def release(self) -> None:
        """The run's objects hang off the RayCluster now: the RayJob loses the lease as its owner and
        the lease is deleted."""
        assert self.lease is not None  # apply_held made it
        name, uid = self.lease["metadata"]["name"], self.lease["metadata"]["uid"]
        try:
            self.kube.modify(rayjob.KIND, self.result.rayjob, lambda live: owners_patch(live, remove=uid), self.ns)
        except NotFoundError:
            pass  # the job came and went: nothing left to hold
        self.kube.delete(lease.KIND, name, self.ns)
        self.steps.ledger.created = [entry for entry in self.steps.ledger.created if entry.kind != lease.KIND]
        self.lease_ends = math.inf
        self.emit(Became("lease", "released"))

    def _job_over(self) -> bool:
        job = self.kube.find(rayjob.KIND, self.result.rayjob, self.ns)
        return job is None or rayjob.terminal(job)

    def follow_cluster(self) -> dict | None:
        """The RayCluster KubeRay made for the job; None when it is already gone with its finished job."""
        def named(obj):
            if obj is None:
                return Failed("the RayJob was deleted")
            if rayjob.cluster_name(obj) or rayjob.terminal(obj):
                return Ready()
            return Pending("waiting for KubeRay to name the RayCluster")

        job = self.kube.wait(rayjob.KIND, named, name=self.result.rayjob, namespace=self.ns,
                             timeout_s=min(_CLUSTER_NAME_TIMEOUT_S, self.lease_left()),
                             on_progress=lambda r: self.emit(Waiting("rayjob", r)), what=f"RayJob {self.result.rayjob}")
        assert job is not None  # named(): never Ready while absent
        self.result.raycluster = self.steps.cluster = rayjob.cluster_name(job)
        if self.result.raycluster is None:
            raise ResourceFailed(f"RayJob {self.result.rayjob} ended before KubeRay created its RayCluster: "
                                 f"{rayjob.readiness(job).reason}")

        # KubeRay names the cluster in the RayJob status before it creates it. Absent while the
        # job is over means it came and went unseen (a wait that polls can miss it).
        def exists(obj):
            if obj is not None:
                return Ready()
            return Ready("gone") if self._job_over() else Pending("not created yet")

        return self.kube.wait(raycluster.KIND, exists, name=self.result.raycluster, namespace=self.ns,
                              timeout_s=min(_CLUSTER_NAME_TIMEOUT_S, self.lease_left()),
                              what=f"RayCluster {self.result.raycluster}")

    def link_owners(self, cluster: dict | None) -> None:
        """The DRA objects and the DGDs moved from their holder (the RayJob, or the lease) to ``cluster``."""
        if cluster is None:  # came and went with its finished job
            self.steps.report_unlinked()
            return
        assert self.holder is not None  # apply_held made it
        uid = self.holder["metadata"]["uid"]
        for obj in self.plan.dra:
            self.steps.add_owner(kind_of(obj), obj["metadata"]["name"], cluster, replacing=uid)
        for name in self.steps.dgd_actions:
            self.steps.link_owner(name, cluster, replacing=uid)

    # -- stalled-driver rescue -------------------------------------------------------------
    def rescue_driver(self) -> None:
        cluster = self.result.raycluster
        assert cluster is not None  # cluster_named named it

        def provisioned(obj):  # gone: the job is over or someone deleted it; the RayJob tells which
            return Ready("gone") if obj is None else raycluster.readiness(obj)

        if self.kube.wait(raycluster.KIND, provisioned, name=cluster, namespace=self.ns,
                          timeout_s=PROVISION_TIMEOUT_S, on_progress=lambda r: self.emit(Waiting("raycluster", r)),
                          what=f"RayCluster {cluster}", pods=raycluster.pod_selector(cluster)) is not None:
            self.emit(Became("raycluster", "provisioned"))

        def submitted(obj):
            if obj is None:
                return Failed("the RayJob was deleted")
            if rayjob.driver_submitted(obj):
                return Ready()
            if rayjob.terminal(obj):
                return Failed(f"it ended before the driver was submitted: {rayjob.readiness(obj).reason}")
            return Pending("waiting for KubeRay to submit the driver")

        self.result.job_id = rayjob.job_id(self.kube.get(rayjob.KIND, self.result.rayjob, self.ns))
        try:
            # KubeRay only fills jobStatus from the dashboard's record of the job: once it is set,
            # the driver exists and there is nothing to rescue.
            self.kube.wait(rayjob.KIND, submitted, name=self.result.rayjob, namespace=self.ns,
                           timeout_s=self.options.driver_grace_s,
                           on_progress=lambda r: self.emit(Waiting("rayjob", r)), what=f"RayJob {self.result.rayjob}")
            self.mark_submitted(f"submitted by KubeRay (job {self.result.job_id})")
            return
        except WaitTimeout:
            pass
        with self.dashboard() as dash:
            job_id = self.result.job_id
            if any(j.submission_id == job_id for j in dash.list_jobs()):
                self.mark_submitted(f"submitted by KubeRay (job {job_id})")
                return
            try:
                dash.submit(self.plan.rayjob["spec"]["entrypoint"], submission_id=job_id)
                self.result.rescued = True
                self.submitted = True
                self.emit(Became("rayjob", "driver submitted by nrl-k8s"))
                self.emit(Warning(f"KubeRay did not submit the driver within {self.options.driver_grace_s:g}s; "
                                  f"nrl-k8s submitted it as job {job_id}"))
            except SubmissionExists:
                self.mark_submitted(f"submitted by KubeRay (job {job_id})")

    def mark_submitted(self, how: str) -> None:
        self.submitted = True
        self.emit(Became("rayjob", "driver submitted"))  # its wait for the submission is over
        self.emit(Became("driver", how))

    def dashboard(self) -> Dashboard:
        # httpx: only a run that reaches the dashboard imports it
        from nrl_k8s.ray.dashboard import RUN_RETRIES, of_raycluster

        assert self.result.raycluster is not None  # cluster_named named it
        cluster = {
            "metadata": {"name": self.result.raycluster},
            "spec": self.plan.rayjob["spec"].get("rayClusterSpec") or {},
        }
        return of_raycluster(self.kube, cluster, self.ns, url=self.options.dashboard_url, retries=RUN_RETRIES)

    def record(self) -> None:
        self.record_data = runs.rayjob_record(self.plan, self.result, context=self.options.context)
        self.result.recorded(self.record_data)

    # -- follow ----------------------------------------------------------------------------
    def follow_job(self, on_log: Callable[[str], None]) -> None:
        """The driver log (``driver_log.follow``) until Ray reports the job over, then the RayJob
        until KubeRay does. Without the dashboard (no permission to proxy, the cluster already
        deleted) only the RayJob is followed, with a warning."""
        deadline = None if self.options.job_timeout_s is None else time.monotonic() + self.options.job_timeout_s
        logged = False
        try:
            with self.dashboard() as dash:
                # the RayJob tells when the job is over: its dashboard may go with its cluster
                chunks = dash.follow_logs(self.record_data["job_id"], deadline_s=self.options.job_timeout_s,
                                          over=self._job_over)
                driver_log.follow(chunks, self.record_data, on_log, self.kube)
                logged = True
        except DashboardError as err:
            self.emit(Warning(f"the driver log cannot be streamed ({err.message}); "
                              f"following RayJob {self.result.rayjob} only"
                              + ("" if not self._job_over() else " (it has ended: the saved copy may lack its end)")))

        def terminal(obj):
            if obj is None:
                return Ready("RayJob deleted")
            status = obj.get("status") or {}
            if rayjob.terminal(obj):
                return Ready()
            return Pending(f"{status.get('jobDeploymentStatus') or 'New'}  job {status.get('jobStatus') or 'PENDING'}")

        left = _FOREVER_S if deadline is None else deadline - time.monotonic()
        job = self.kube.wait(rayjob.KIND, terminal, name=self.result.rayjob, namespace=self.ns,
                             timeout_s=max(left, _STATUS_GRACE_S) if logged else left,
                             on_progress=lambda r: self.emit(Waiting("rayjob", r)), what=f"RayJob {self.result.rayjob}")
        self.result.ended(((job or {}).get("status") or {}).get("jobStatus"), self.record_data)
        if self.options.frees_cluster and job is not None:
            self.free_cluster(job)

    def free_cluster(self, job: dict) -> None:
        """The job is over and its log followed: its cluster (with the DGDs and DRA objects it owns)
        deleted now rather than at its TTL (``rayjob.LOG_GRACE_S``), if KubeRay made it for this job."""
        name = self.result.raycluster
        cluster = self.kube.find(raycluster.KIND, name, self.ns) if name else None
        owners = (cluster or {}).get("metadata", {}).get("ownerReferences") or []
        if name is None or job["metadata"]["uid"] not in {o.get("uid") for o in owners}:
            return
        try:
            self.kube.delete(raycluster.KIND, name, self.ns)
        except ApiError as err:
            self.emit(Warning(f"could not delete RayCluster {name} ({err.message}): KubeRay deletes it "
                              f"{rayjob.LOG_GRACE_S}s after its job ended"))
            return
        self.emit(Became("raycluster", "deleted: the job is over and its log kept"))

    def running_hint(self) -> str:
        job = self.result.rayjob
        what = ", ".join(filter(None, [self.result.raycluster and f"RayCluster {self.result.raycluster}",
                                       self.result.job_id and f"Ray job {self.result.job_id}"]))
        return (
            f"RayJob {job} keeps running{f' ({what})' if what else ''}; nothing was deleted: "
            f"follow it with `nrl-k8s logs -f --run {self.plan.run_id}` "
            f"(or `kubectl -n {self.ns} get rayjob {job} -w`); "
            f"stop it with `nrl-k8s job stop --run {self.plan.run_id}`, or remove it with its cluster and DGDs: "
            f"`{delete_command(rayjob.KIND, job, self.ns)}`"
        )

    # -- failure ---------------------------------------------------------------------------
    def keep(self) -> None:
        """A failure after the driver started must not leave the lease to delete the running job."""
        if self.lease_ends != math.inf:
            try:
                self.release()
            except ApiError as err:
                name = lease.name_of(self.result.rayjob)
                self.emit(Warning(f"could not release the start lease ({err.message}): at its deadline it deletes the "
                                  f"running RayJob {self.result.rayjob}; release it: "
                                  f"kubectl -n {self.ns} delete job {name} --cascade=orphan"))

    def driver_started(self) -> bool | None:
        """Whether the driver is submitted: True, False, or None when the API cannot tell."""
        if self.submitted or not any(entry.kind == rayjob.KIND for entry in self.steps.ledger.created):
            return self.submitted
        try:
            job = self.kube.find(rayjob.KIND, self.result.rayjob, self.ns)
        except ApiError:
            return None
        return job is not None and rayjob.driver_submitted(job)

    def unsure_hint(self) -> str:
        """When it could not tell whether the driver started (nothing is then deleted): how to find out,
        and how to stop it with all the run made."""
        job, ns = self.result.rayjob, self.ns
        look = f"`kubectl -n {ns} get rayjob {job}` (its JOB STATUS)"
        if self.result.raycluster:
            look += f" or `nrl-k8s -n {ns} job list --cluster {self.result.raycluster}`"
        held = (f"; its start lease still holds it and deletes it at its deadline: to keep a driver that runs, "
                f"`kubectl -n {ns} delete job {lease.name_of(job)} --cascade=orphan`"
                if self.lease_ends != math.inf else "")
        return (f"RayJob {job} may be running its driver; nothing was deleted: see whether it runs with {look}; "
                f"stop it with its cluster and DGDs: `{delete_command(rayjob.KIND, job, ns)}`{held}")

def serial(run: RayJobRun) -> None:
    """Everything up to the driver's submission, in the serial order."""
    existing = run.preflight()
    run.steps.deployments(run.plan.deployments, run.plan.health)
    run.steps.apply_dgds(run.plan.dgds, existing, owner=run.apply_held())
    run.wait_dgds()
    run.resume()
    run.link_owners(run.follow_cluster())
    run.release()
    run.rescue_driver()


def run_rayjob(kube: Kube, plan: RunPlan, options: LiveOptions, emit: Emit, on_log: Callable[[str], None] | None = None,
               *, bring_up: Callable[[RayJobRun], None] = serial) -> RunResult:
    """``bring_up`` (``serial``, or ``parallel.bring_up``) over a new run, rolled back on failure or
    Ctrl-C until its driver is submitted; with ``options.wait`` followed to its end, its driver log
    (redacted) going to ``on_log``."""
    run = RayJobRun(kube, plan, options, emit)
    follow = (lambda: run.follow_job(on_log or (lambda text: None))) if options.wait else None
    lifecycle.execute(run, lambda: bring_up(run), follow)
    return run.result
