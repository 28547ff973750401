"""`run --rayjob`: the ordering that matters (SPEC "run --rayjob").

1. every DGD applied (or reused when an identical one already exists) and awaited in parallel;
2. the run Secret and the RayJob applied, the RayJob made the Secret's owner; 3. its RayCluster
followed and each DGD this run created back-patched with a non-controlling ownerReference to it
(GC then deletes the DGDs with the cluster);
4. the stalled-driver rescue; 5. optionally follow the job to its end.
Any failure or Ctrl-C before the driver is running deletes what this run created, nothing else.
"""

from __future__ import annotations

import queue
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

from .dashboard import Dashboard
from .drift import spec_drift
from .errors import ConfigError, ConflictError, NrlK8sError, ResourceFailed, SubmissionExists, WaitTimeout
from .events import Applied, Became, Emit, RolledBack, Waiting, Warning
from .kinds import dgd, raycluster, rayjob, secret
from .kinds.base import Pending, Ready
from .plan import RunPlan
from .serving import present, wait_serving

_CLUSTER_NAME_TIMEOUT_S = 300
_PROVISION_TIMEOUT_S = 1800


@dataclass(frozen=True)
class LiveOptions:
    wait: bool = True
    driver_grace_s: float = 90.0
    dashboard_url: str | None = None
    job_timeout_s: float | None = None  # --wait deadline; None = until the job ends


@dataclass
class RunResult:
    rayjob: str
    namespace: str
    raycluster: str | None = None
    job_id: str | None = None
    dgds: dict[str, str] = field(default_factory=dict)  # name -> "created" | "reused"
    owners: dict[str, list[str]] = field(default_factory=dict)  # dgd name -> owner names
    rescued: bool = False
    job_status: str | None = None
    succeeded: bool | None = None


class Interrupted(NrlK8sError):
    """Ctrl-C / SIGTERM during the bring-up."""

    exit_code = 130


@contextmanager
def _interrupts_raise():
    """Turn SIGTERM into KeyboardInterrupt so both roll back the same way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Run:
    def __init__(self, kube, plan: RunPlan, options: LiveOptions, emit: Emit):
        self.kube, self.plan, self.options, self.emit = kube, plan, options, emit
        self.ns = plan.rayjob["metadata"]["namespace"]
        self.result = RunResult(rayjob=plan.rayjob["metadata"]["name"], namespace=self.ns)
        self.created: list[tuple] = []  # (kind, name, label) in creation order

    # -- bring-up --------------------------------------------------------------------------
    def preflight(self) -> dict[str, dict | None]:
        """Refuse before applying anything when a name is taken by something we cannot reuse."""
        existing = {}
        for key, manifest in self.plan.dgds.items():
            name = manifest["metadata"]["name"]
            found = self.kube.find(dgd.KIND, name, self.ns)
            changed = spec_drift(manifest, found) if found is not None else []
            if changed:
                raise ConfigError(
                    f"DGD {name} (infra.dynamo.{key}) already exists in namespace {self.ns} with a different spec "
                    f"({'; '.join(changed[:3])})",
                    hint=f"delete it (kubectl -n {self.ns} delete dgd {name}) or use "
                    f"`nrl-k8s cluster up --target dynamo.{key} --recreate`",
                )
            existing[key] = found
        if self.kube.find(rayjob.KIND, self.result.rayjob, self.ns) is not None:
            raise ConfigError(
                f"RayJob {self.result.rayjob} already exists in namespace {self.ns}",
                hint=f"delete it first: kubectl -n {self.ns} delete rayjob {self.result.rayjob}",
            )
        run_secret = self.plan.secret["metadata"]["name"]
        found = self.kube.find(secret.KIND, run_secret, self.ns)
        if found is not None:
            owned = found["metadata"].get("ownerReferences")
            raise ConfigError(
                f"Secret {run_secret} (this run's recipe and launch.env) already exists in namespace {self.ns}",
                hint="its RayJob was deleted and garbage collection has not removed it yet: retry in a moment" if owned
                else f"an interrupted start of this same run left it: kubectl -n {self.ns} delete secret {run_secret}",
            )
        return existing

    def _create(self, kind, manifest: dict, label: str) -> dict:
        """Create and remember it for rollback; remembered first, so Ctrl-C mid-request still rolls it back."""
        entry = (kind, manifest["metadata"]["name"], label)
        self.created.append(entry)
        try:
            return self.kube.create(kind, manifest)
        except ConflictError as err:
            self.created.remove(entry)  # someone else's object: never ours to delete
            raise ResourceFailed(f"{kind.kind} {entry[1]} appeared while this run was starting", hint=err.hint) from None

    def apply_dgds(self, existing: dict[str, dict | None]) -> None:
        for key, manifest in self.plan.dgds.items():
            name, label = manifest["metadata"]["name"], f"dynamo.{key}"
            if existing[key] is not None:
                self.result.dgds[name] = "reused"
                self.emit(Applied(label, name, "reused"))
                continue
            self._create(dgd.KIND, manifest, label)
            self.result.dgds[name] = "created"
            self.emit(Applied(label, name, "created"))

    def wait_dgds(self) -> None:
        """Wait for every DGD in parallel; the first failure wins (daemon threads, so Ctrl-C is immediate)."""
        results: queue.Queue = queue.Queue()
        stopped = threading.Event()

        def emit(event) -> None:
            if not stopped.is_set():
                self.emit(event)

        def wait_one(key: str, manifest: dict) -> None:
            try:
                wait_serving(self.kube, f"dynamo.{key}", manifest, self.plan.ready_timeouts[key], emit)
                results.put((key, None))
            except NrlK8sError as err:
                results.put((key, err))

        for key, manifest in self.plan.dgds.items():
            threading.Thread(target=wait_one, args=(key, manifest), daemon=True, name=f"wait-{key}").start()
        try:
            for _ in self.plan.dgds:
                key, error = results.get()
                if error is not None:
                    raise error
                self.emit(Became(f"dynamo.{key}", "serving"))
        finally:
            stopped.set()

    def apply_rayjob(self) -> None:
        """The run Secret, then the RayJob, then the RayJob made the Secret's owner (GC deletes it with the run)."""
        name = self.plan.secret["metadata"]["name"]
        self._create(secret.KIND, self.plan.secret, "secret")
        self.emit(Applied("secret", name, "created"))
        job = self._create(rayjob.KIND, self.plan.rayjob, "rayjob")
        self.emit(Applied("rayjob", self.result.rayjob, "created"))
        self.kube.patch(secret.KIND, name, {"metadata": {"ownerReferences": [dgd.owner_reference(job)]}}, namespace=self.ns)

    def follow_cluster(self) -> dict:
        def named(obj):
            if obj is None:
                return Pending("not found")
            return Ready() if rayjob.cluster_name(obj) else Pending("waiting for KubeRay to name the RayCluster")

        job = self.kube.wait(rayjob.KIND, named, name=self.result.rayjob, namespace=self.ns,
                             timeout_s=_CLUSTER_NAME_TIMEOUT_S, on_progress=lambda r: self.emit(Waiting("rayjob", r)),
                             what=f"RayJob {self.result.rayjob}")
        self.result.raycluster = rayjob.cluster_name(job)
        # KubeRay names the cluster in the RayJob status before it creates it.
        return self.kube.wait(raycluster.KIND, lambda o: Pending("not created yet") if o is None else Ready(),
                              name=self.result.raycluster, namespace=self.ns, timeout_s=_CLUSTER_NAME_TIMEOUT_S,
                              what=f"RayCluster {self.result.raycluster}")

    def link_owners(self, cluster: dict) -> None:
        ref = dgd.owner_reference(cluster)
        for name, action in self.result.dgds.items():
            current = self.kube.get(dgd.KIND, name, self.ns)
            owners = current["metadata"].get("ownerReferences") or []
            names = [o.get("name") for o in owners]
            if action == "reused" and not owners:
                self.emit(Warning(f"DGD {name} existed before this run and has no owner: it is not linked to "
                                  f"{cluster['metadata']['name']} and will keep running after the job"))
                self.result.owners[name] = []
                continue
            if any(o.get("uid") == ref["uid"] for o in owners):
                self.result.owners[name] = names
                continue
            if owners:
                self.emit(Warning(f"DGD {name} already has owner(s) {', '.join(names)}; adding "
                                  f"{ref['name']} as a second owner (GC deletes it once every owner is gone)"))
            patch = {"metadata": {"ownerReferences": [*owners, ref],
                                  "resourceVersion": current["metadata"]["resourceVersion"]}}
            self.kube.patch(dgd.KIND, name, patch, namespace=self.ns)
            self.result.owners[name] = [*names, ref["name"]]
            self.emit(Became(f"dgd {name}", f"owned by RayCluster {ref['name']}"))

    # -- stalled-driver rescue -------------------------------------------------------------
    def rescue_driver(self) -> None:
        cluster = self.result.raycluster
        self.kube.wait(raycluster.KIND, present(raycluster.readiness), name=cluster, namespace=self.ns,
                       timeout_s=_PROVISION_TIMEOUT_S, on_progress=lambda r: self.emit(Waiting("raycluster", r)),
                       what=f"RayCluster {cluster}")
        self.emit(Became("raycluster", "provisioned"))

        def submitted(obj):
            if obj is None:
                return Pending("RayJob deleted")
            if (obj.get("status") or {}).get("jobStatus"):
                return Ready()
            return Pending("waiting for KubeRay to submit the driver")

        job = self.kube.get(rayjob.KIND, self.result.rayjob, self.ns)
        self.result.job_id = rayjob.job_id(job)
        try:
            # KubeRay only fills jobStatus from the dashboard's record of the job: once it is set,
            # the driver exists and there is nothing to rescue.
            self.kube.wait(rayjob.KIND, submitted, name=self.result.rayjob, namespace=self.ns,
                           timeout_s=self.options.driver_grace_s,
                           on_progress=lambda r: self.emit(Waiting("rayjob", r)), what="driver submission")
            self.emit(Became("driver", f"submitted by KubeRay (job {self.result.job_id})"))
            return
        except WaitTimeout:
            pass
        with self._dashboard() as dash:
            job_id = self.result.job_id
            if any(j.submission_id == job_id for j in dash.list_jobs()):
                self.emit(Became("driver", f"submitted by KubeRay (job {job_id})"))
                return
            try:
                dash.submit(self.plan.rayjob["spec"]["entrypoint"], submission_id=job_id)
                self.result.rescued = True
                self.emit(Warning(f"KubeRay did not submit the driver within {self.options.driver_grace_s:g}s; "
                                  f"nrl-k8s submitted it as job {job_id}"))
            except SubmissionExists:
                self.emit(Became("driver", f"submitted by KubeRay (job {job_id})"))

    def _dashboard(self) -> Dashboard:
        return Dashboard.for_cluster(cluster_name=self.result.raycluster, namespace=self.ns,
                                     configuration=self.kube.configuration, in_cluster=self.kube.in_cluster,
                                     url=self.options.dashboard_url)

    # -- follow ----------------------------------------------------------------------------
    def follow_job(self) -> None:
        def terminal(obj):
            if obj is None:
                return Ready("RayJob deleted")
            status = obj.get("status") or {}
            if status.get("jobDeploymentStatus") in rayjob.TERMINAL_DEPLOYMENT_STATUSES:
                return Ready()
            return Pending(f"{status.get('jobDeploymentStatus') or 'New'}  job {status.get('jobStatus') or 'PENDING'}")

        job = self.kube.wait(rayjob.KIND, terminal, name=self.result.rayjob, namespace=self.ns,
                             timeout_s=self.options.job_timeout_s or 10 * 365 * 86400,
                             on_progress=lambda r: self.emit(Waiting("rayjob", r)), what=f"RayJob {self.result.rayjob}")
        status = (job or {}).get("status") or {}
        self.result.job_status = status.get("jobStatus")
        self.result.succeeded = status.get("jobStatus") == "SUCCEEDED"

    # -- rollback --------------------------------------------------------------------------
    def rollback(self) -> None:
        deleted = []
        # Creation order: the DGDs go before the RayJob, whose deletion would let GC take them
        # (and leave the report unsure whether they were deleted).
        for kind, name, label in self.created:
            if self.kube.delete(kind, name, self.ns):
                deleted.append(f"{kind.kind} {name}")
        kept = tuple(f"DynamoGraphDeployment {n} (existed before this run)"
                     for n, action in self.result.dgds.items() if action == "reused")
        self.created.clear()
        self.emit(RolledBack(tuple(deleted), kept))


def run_rayjob(kube, plan: RunPlan, options: LiveOptions, emit: Emit) -> RunResult:
    run = _Run(kube, plan, options, emit)
    with _interrupts_raise():
        try:
            existing = run.preflight()
            run.apply_dgds(existing)
            run.wait_dgds()
            run.apply_rayjob()
            run.link_owners(run.follow_cluster())
            run.rescue_driver()
        except KeyboardInterrupt:
            run.rollback()
            raise Interrupted("interrupted during bring-up; rolled back what this run created") from None
        except NrlK8sError:
            run.rollback()
            raise
    if options.wait:
        run.follow_job()
    return run.result
