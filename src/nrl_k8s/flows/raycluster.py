"""`run --raycluster`: the long-lived flow (SPEC "run --raycluster").

Everything is rendered first (``plan.plan_longlived``), then:

0. preflight, all at once: every permission the run needs, a live Service with a head Service name
   one of the RayClusters would get (``head_services``), DGD drift, the code package staged (too
   big: exit 2); meanwhile, and through the next steps, the training dashboard's client is made
   (its HTTP stack imported) and a package with new or changed files zipped, in the background;
1. Deployments (+ their Service), reused when identical, awaited Available and healthy;
2. every role's RayCluster ensured (reuse identical, warn on drift, ``recreate`` replaces), then
   its DRA objects and env Secret created owned by it;
3. every DGD created with the training RayCluster already in its ownerReferences (reused ones
   get it added, with a warning when they have other owners); RayClusters provisioned and DGDs
   serving awaited together;
4. with ``replace``, the gym's endpoint-registry ConfigMap (``plan.registry``) deleted, so the
   daemons started anew register afresh; each role's daemon submitted through that cluster's
   dashboard (skipped while it runs or after it succeeded; a failed one is an error unless
   ``replace``), then its health URL awaited;
5. the driver started on the training cluster (submission id = run id) by the plan's submitter:
   through the dashboard with the code package as its working_dir, or (``exec``) on the head pod
   through ``pods/exec`` (``execdriver``); then the run recorded (``runs``). Its reads (running
   jobs, the package on the cluster) start right after step 2 when the training cluster is up
   already, and are read again when the steps between took longer than ``_READ_AHEAD_S``.

Failure or Ctrl-C before the driver is submitted rolls back what this run created (the ledger),
never what it reused; from the submission on nothing is deleted, and the error says what runs and
how to stop it. A run killed outright (SIGKILL) cannot roll back: what it created without an owner
(Deployments, Services, RayClusters; the rest is owned by a RayCluster) carries its run id and stays
"unfinished" (``unfinished``) until the driver's submission has returned, so `gc` removes it once
``bringup_seconds`` have passed, and `status` lists it meanwhile.
"""

from __future__ import annotations

import functools
import posixpath
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nrl_k8s.config.recipe import RECIPE_ENV, recipe_text
from nrl_k8s.errors import ConfigError, NotFoundError, NrlK8sError, ResourceFailed, SubmissionExists
from nrl_k8s.events import Applied, Became, Emit, Waiting, Warning
from nrl_k8s.flows import driver_log, head_services, lifecycle, unfinished
from nrl_k8s.flows import records as runs
from nrl_k8s.flows.concurrency import Background, fan_out, gather
from nrl_k8s.flows.lifecycle import LiveOptions
from nrl_k8s.flows.steps import DEPLOYMENT_TIMEOUT_S, GONE_TIMEOUT_S, PROVISION_TIMEOUT_S, BringUp
from nrl_k8s.kinds import raycluster, rayjob
from nrl_k8s.kinds.base import Kind, owned, owner_reference
from nrl_k8s.kinds.core import CONFIGMAP
from nrl_k8s.kinds.index import kind_of
from nrl_k8s.kinds.raycluster import KIND_METADATA, RUN_METADATA
from nrl_k8s.kinds.readiness import Ready
from nrl_k8s.ops import gc
from nrl_k8s.ops.probe import Permission, run_permissions
from nrl_k8s.ray import package as package_mod
from nrl_k8s.ray.execdriver import STOP_TIMEOUT_S

from .plan import DRIVER_RECIPE, LongLivedPlan, Submission

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

if TYPE_CHECKING:
    from nrl_k8s.ray.dashboard import Dashboard, JobInfo
    from nrl_k8s.ray.execdriver import ExecDrivers

_BRINGUP_MARGIN_S = 600  # the calls between the waits (dashboards, the package upload, stopping jobs)
_READ_AHEAD_S = 2.0  # a job list read ahead is used while at most this old (else read again)


def bringup_seconds(plan: LongLivedPlan) -> float:
    """How long a live bring-up of ``plan`` may take: its Deployments' waits, then its clusters' and
    DGDs' (at once), then its daemons' health checks, and a margin for the calls between."""
    deployments = max((DEPLOYMENT_TIMEOUT_S + plan.health.get(key, ("", 0.0))[1] for key in plan.deployments),
                      default=0.0)
    clusters = max([PROVISION_TIMEOUT_S, *plan.ready_timeouts.values()])
    daemons = sum(daemon.health[1] for daemon in plan.daemons.values() if daemon.health)
    return deployments + clusters + daemons + _BRINGUP_MARGIN_S


@dataclass(kw_only=True)
class LongLivedResult(lifecycle.Outcome):
    run_id: str
    clusters: dict[str, str] = field(default_factory=dict)  # role -> RayCluster name
    actions: dict[str, str] = field(default_factory=dict)  # "kuberay.ROLE" / "deployments.KEY" -> created|reused
    daemons: dict[str, str] = field(default_factory=dict)  # role -> "submitted ID" | "running ID" | ...
    package: str | None = None  # gcs:// URI of the driver's working_dir
    uploaded_bytes: int = 0
    exec: dict[str, str] | None = None  # the exec submitter's driver: {"pod", "dir"}


class LongLived:
    """One long-lived bring-up: its plan, the shared steps and its own (``cluster up`` runs a subset)."""

    def __init__(self, kube: Kube, plan: LongLivedPlan, options: LiveOptions, emit: Emit):
        self.kube, self.ns, self.emit = kube, plan.namespace, emit
        self.steps = BringUp(kube, plan.namespace, plan.driver.cluster, emit, adopt=options.adopt,
                             place_anyway=options.place_anyway, stamp=self._stamp, reused=self._take_over)
        self.plan, self.options = plan, options
        self.steps.cluster = plan.driver.cluster
        self.result = LongLivedResult(run_id=plan.run_id, namespace=plan.namespace, dgds=self.steps.dgd_actions,
                                      owners=self.steps.dgd_owners)
        self.live: dict[str, dict] = {}  # role -> live RayCluster
        self._dashboards: dict[str, Dashboard] = {}  # role -> its client, one per run (connections reused)
        self._dashboards_lock = threading.RLock()
        self._exec: ExecDrivers | None = None
        self._closed = False
        self._ahead: Background | None = None  # the driver step's reads, started early (read_ahead)
        self.submitted = False
        self.submitting = False  # a driver POST was sent: the job may exist even if it failed
        self.unfinished: list[tuple[Kind, str]] = []  # what this bring-up created unowned or took over
        self._unfinished_s = bringup_seconds(plan)
        self._unsure = False  # driver_started could not tell (the API failed): fail says how to check

    # -- preflight -------------------------------------------------------------------------
    def preflight(self) -> tuple[dict, dict[str, package_mod.Package]]:
        """The checks, concurrently (their errors in this order); the training dashboard's client is
        made in the background meanwhile (an error there is raised where the client is used)."""
        Background(self._prepare_dashboard, "dashboard-client")
        proxy = not self.kube.in_cluster
        needed = run_permissions(self.plan.manifests(), proxy=proxy)
        if self.plan.submitter == "exec":
            needed.append(Permission("create", "pods/exec"))
        if self.options.replace and self.plan.registry and not self.options.skip_daemons:
            needed.append(Permission("delete", "configmaps"))
        _, _, _, existing, packages = gather(
            lambda: self.steps.check_permissions(needed),
            lambda: head_services.check_live(self.kube, self.ns, list(self.plan.clusters.values()), self.emit),
            lambda: self.steps.check_owners(self.plan.manifests()),
            lambda: self.steps.check_dgds(self.plan.dgds),
            self.stage_packages,
        )
        for package in packages.values():
            if package.hashed:  # new or changed files: the cluster likely lacks it, so zip it meanwhile
                Background(package.zip_bytes, "zip")
        return existing, packages

    def _prepare_dashboard(self) -> None:
        with self._dashboards_lock:
            if self._closed:  # the run ended before this thread started
                return
            try:
                self.dashboard("training")
            except NrlK8sError:
                pass  # raised again by the step that uses it

    def stage_packages(self, roles=None) -> dict[str, package_mod.Package]:
        """The working_dir of the driver (always: it carries the recipe) and of each daemon of
        ``roles`` (default: all) with upload paths, keyed by "driver" / role. Too big: exit 2
        before anything is applied."""
        root, sources = package_mod.upload_sources(self.plan, self.options.repo_root, roles)
        text = recipe_text(self.plan.recipe)
        return {name: package_mod.stage(root, paths, text) for name, paths in sources.items()}

    # -- bring-up --------------------------------------------------------------------------
    def _stamp(self, kind: Kind, manifest: dict) -> dict:
        """What this bring-up creates carries the run id; with no owner, it is unfinished until
        :meth:`finish` (``unfinished``)."""
        manifest = unfinished.stamp(manifest, self.plan.run_id, self._unfinished_s)
        if unfinished.unfinished(manifest):
            self.unfinished.append((kind, manifest["metadata"]["name"]))
        return manifest

    def _take_over(self, kind: Kind, live: dict, label: str) -> dict:
        """A reused object of a bring-up that did not finish is taken over (this run's id and
        deadline), so gc leaves it to this run, which finishes it."""
        if not unfinished.unfinished(live):
            return live
        name = live["metadata"]["name"]
        before = live["metadata"]["labels"].get(rayjob.RUN_ID_LABEL, "?")
        self.unfinished.append((kind, name))
        live = self.kube.patch(kind, name, unfinished.takeover(self.plan.run_id, self._unfinished_s), namespace=self.ns)
        self.emit(Became(label, f"{kind.kind} {name} taken over from run {before}, whose bring-up did not finish"))
        return live

    def finish(self) -> None:
        """The bring-up is done (its driver submitted; `cluster up`: its targets up): what it created or
        took over is no longer unfinished (gc leaves it). Not before the submission has returned: a run
        killed while it submits leaves its objects marked, for `status` to list and `gc` to remove."""
        failed = []
        for kind, name in self.unfinished:
            try:
                self.kube.patch(kind, name, unfinished.FINISHED, namespace=self.ns)
            except NotFoundError:
                continue
            except NrlK8sError as err:
                failed.append(f"{kind.kind} {name} ({err.message})")
        self.unfinished = []
        if failed:
            self.emit(Warning(f"could not mark {', '.join(failed)} as brought up: once the deadline in its "
                              f"{gc.DEADLINE_ANNOTATION} annotation passes, `nrl-k8s gc` takes it for a "
                              "killed bring-up's; run again (a warm re-run marks it) before then"))

    def ensure_cluster(self, role: str) -> None:
        """A role's RayCluster ensured, then its DRA objects and env Secret, owned by it."""
        manifest, label = self.plan.clusters[role], f"kuberay.{role}"
        live, action = self.steps.ensure(raycluster.KIND, manifest, label, recreate=self.options.recreate)
        self.live[role] = live
        self.result.clusters[role] = manifest["metadata"]["name"]
        self.result.actions[label] = action
        ref = owner_reference(live)
        for obj in [*self.plan.dra.get(role, []), *filter(None, [self.plan.env_secrets.get(role)])]:
            kind, name = kind_of(obj), obj["metadata"]["name"]
            found = self.steps.read(kind, name)
            if found is not None and ref["uid"] not in {
                o.get("uid") for o in found["metadata"].get("ownerReferences") or []
            }:
                self.kube.wait_gone(kind, name, self.ns, timeout_s=GONE_TIMEOUT_S)  # GC takes a replaced cluster's
                found = None
            self.steps.ensure(kind, owned(obj, live), label, recreate=self.options.recreate, live=found)

    def wait_all(self, roles=None, dgds=None) -> None:
        """RayClusters (of ``roles``, default all) provisioned and DGDs (default all) serving, all at once."""
        roles = self.plan.clusters if roles is None else roles
        dgds = self.plan.dgds if dgds is None else dgds
        jobs: dict[str, Callable[[Emit], object]] = {
            f"kuberay.{role}": functools.partial(self.steps.wait_ready, raycluster.KIND, raycluster.readiness,
                                                 self.result.clusters[role], f"kuberay.{role}", PROVISION_TIMEOUT_S)
            for role in roles}
        if dgds:
            jobs["dynamo"] = lambda emit: self.steps.wait_dgds(dgds, self.plan.ready_timeouts)
        fan_out(jobs, self.emit, lambda label: None)

    # -- Ray jobs --------------------------------------------------------------------------
    def dashboard(self, role: str) -> Dashboard:
        """The dashboard of ``role``'s RayCluster, one client per run (closed by :meth:`close`)."""
        with self._dashboards_lock:
            if role not in self._dashboards:
                # httpx: imported off the main thread by preflight
                from nrl_k8s.ray.dashboard import RUN_RETRIES, of_raycluster

                url = self.options.dashboard_url if role == "training" else None
                cluster = self.live.get(role) or self.plan.clusters[role]
                self._dashboards[role] = of_raycluster(self.kube, cluster, self.ns, url=url, retries=RUN_RETRIES)
            return self._dashboards[role]

    def exec_drivers(self) -> ExecDrivers:
        """The training cluster's exec drivers (in this run's tmp dir), one client per run."""
        if self._exec is None:
            from nrl_k8s.ray.execdriver import ExecDrivers

            assert self.plan.exec_dir is not None  # planned for the exec submitter
            self._exec = ExecDrivers(self.kube, self.ns, self.plan.driver.cluster,
                                     [posixpath.dirname(self.plan.exec_dir)])
        return self._exec

    def driver_source(self):
        """Where the driver's status and log are read: its exec drivers or the training dashboard."""
        return self.exec_drivers() if self.plan.submitter == "exec" else self.dashboard("training")

    def close(self) -> None:
        with self._dashboards_lock:
            for dash in self._dashboards.values():
                dash.close()
            self._dashboards.clear()
            if self._exec is not None:
                self._exec.close()
            self._closed = True

    def __enter__(self) -> LongLived:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def reset_registry(self) -> None:
        """``replace``: delete the gym's endpoint-registry ConfigMap (``nemo-rl-endpoints-<job id>``), if it
        exists, so the daemons started anew register afresh instead of finding the old run's endpoints."""
        name = self.plan.registry
        if not self.options.replace or name is None:
            return
        if self.options.skip_daemons:
            self.emit(Warning(f"ConfigMap {name} (the gym's endpoint registry) is not reset: --skip-daemons keeps "
                              "the gym daemon that registered in it"))
            return
        deleted = self.kube.delete(CONFIGMAP, name, self.ns)
        self.emit(Became(f"configmap {name}", "deleted: --replace resets the gym's endpoint registry" if deleted
                         else "not there: no endpoint registry to reset"))

    def daemons(self, packages: dict, roles=None) -> None:
        """Each daemon (of ``roles``, default all) submitted unless it runs, then its health URL awaited."""
        for role, daemon in self.plan.daemons.items():
            if roles is not None and role not in roles:
                continue
            dash = self.dashboard(role)
            done = self.result.daemons[role] = submit_daemon(dash, daemon, packages.get(role), namespace=self.ns,
                                                             replace=self.options.replace, emit=self.emit)
            self.steps.wait_healthy(f"daemon {role}", daemon.health,
                                    failed=lambda dash=dash, done=done, daemon=daemon:
                                    _ended(dash, done.split()[-1], self.ns, daemon.cluster))

    def read_ahead(self, package: package_mod.Package) -> None:
        """When the training cluster is up already, start the driver step's reads (its job list and
        whether it has ``package``) now, overlapping the DGD and readiness steps."""
        if isinstance(raycluster.readiness(self.live["training"]), Ready):
            self._ahead = Background(lambda: (*self._driver_reads(package), time.monotonic()), "read-ahead")

    def _driver_reads(self, package: package_mod.Package) -> tuple[list[JobInfo], bool]:
        dash = self.dashboard("training")
        if self.plan.submitter == "exec":  # no package: the code is in the image
            return dash.list_jobs(), True
        jobs, present = gather(dash.list_jobs, lambda: dash.has_package(package.name))
        return jobs, present

    def driver(self, package: package_mod.Package) -> None:
        driver = self.plan.driver
        dash = self.dashboard("training")
        ahead, self._ahead = self._ahead, None
        read = ahead.result() if ahead else None
        if read is None or time.monotonic() - read[2] > _READ_AHEAD_S:  # the waits took a while: read again
            jobs, present = self._driver_reads(package)
        else:
            jobs, present, _ = read
        running = [j for j in jobs if not j.terminal and (j.metadata or {}).get(KIND_METADATA) != "daemon"]
        exec_mode = self.plan.submitter == "exec"
        running_exec = [j for j in self.exec_drivers().list_jobs() if not j.terminal] if exec_mode else []
        if (running or running_exec) and not self.options.replace:
            ids = ", ".join(j.submission_id or j.job_id or "?" for j in running + running_exec)
            raise ConfigError(f"RayCluster {driver.cluster} is still running job(s) {ids}",
                              hint=f"pass --replace to stop them first, or wait: "
                                   f"`nrl-k8s -n {self.ns} job list --cluster {driver.cluster}`")
        stop_jobs(dash, running, self.emit, namespace=self.ns, cluster=driver.cluster)
        if running_exec:
            self.exec_drivers().stop_all(running_exec, self.emit)
        if exec_mode:
            self._start_exec()
            return
        self.result.package = package.uri
        if not present:
            dash.upload_package(package)
            self.result.uploaded_bytes = len(package.zip_bytes())
        self.emit(Became("code", f"{package.uri} ({_size(self.result.uploaded_bytes)} uploaded)"
                         if self.result.uploaded_bytes else f"{package.uri} (already on the cluster)"))
        entrypoint = driver.entrypoint
        if driver.code.source != "upload":  # the recipe is the package; the code is in the image (cd codePath)
            entrypoint = f'export {RECIPE_ENV}="$PWD/{DRIVER_RECIPE}" && {entrypoint}'
        self.submitting = True
        dash.submit(entrypoint, submission_id=driver.submission_id,
                    runtime_env={"working_dir": package.uri, "env_vars": driver.env},
                    metadata={KIND_METADATA: "driver", RUN_METADATA: self.plan.run_id})
        self.submitted = True
        self.finish()
        self.emit(Became("driver", f"submitted as job {driver.submission_id} on {driver.cluster}"))

    def _start_exec(self) -> None:
        """The driver started detached on the head pod (``execdriver``): its env and the recipe as files."""
        from nrl_k8s.ray.execdriver import LOG_NAME, driver_script

        driver, directory, drivers = self.plan.driver, self.plan.exec_dir, self.exec_drivers()
        assert directory is not None  # planned for the exec submitter
        pod = drivers.prepare(directory, driver_script(driver.entrypoint, driver.env), recipe_text(self.plan.recipe))
        self.submitting = True
        drivers.start(directory)
        self.submitted = True
        self.finish()
        self.result.exec = {"pod": pod, "dir": directory}
        self.emit(Became("driver", f"started as {driver.submission_id} on head pod {pod} through exec "
                         f"(its log: {directory}/{LOG_NAME})"))

    def record(self) -> None:
        self.record_data = runs.record_of(self.plan, self.result, context=self.options.context, infra=self.plan.infra)
        self.result.recorded(self.record_data)

    def follow(self, on_text) -> None:
        """The driver log (``driver_log.follow``: redacted, kept with the record) until the job ends."""
        source = self.driver_source()
        chunks = source.follow_logs(self.record_data["job_id"], deadline_s=self.options.job_timeout_s)
        driver_log.follow(chunks, self.record_data, on_text, self.kube)
        job = source.get_job(self.plan.run_id)
        self.result.ended(job.status if job else None, self.record_data)

    # -- failure ---------------------------------------------------------------------------
    def driver_started(self) -> bool | None:
        if self.submitted or not self.submitting:
            return self.submitted
        try:
            return self.driver_source().get_job(self.plan.driver.submission_id) is not None
        except NrlK8sError:
            self._unsure = True
            return None

    def keep(self) -> None:
        """The driver started: its bring-up is finished (gc must never take its clusters)."""
        self.finish()

    def unsure_hint(self) -> str:
        """When it could not tell whether the driver started (nothing is then deleted): how to find out
        and how to stop it."""
        if not self._unsure:
            return ""
        run_id, cluster = self.plan.run_id, self.plan.driver.cluster
        stop = (f"`nrl-k8s job stop --job {run_id}` with this run config (--force: KILL)"
                if self.plan.submitter == "exec" else f"`{job_command('stop', self.ns, cluster, run_id)}`")
        return (f"driver {run_id} may be running on RayCluster {cluster}; nothing was deleted: "
                f"stop it with {stop}; its clusters stay marked unfinished: `nrl-k8s -n {self.ns} gc --dry-run` "
                "lists them, and gc removes them past their deadline unless a re-run finishes them")

    def running_hint(self) -> str:
        from nrl_k8s.ray.execdriver import LOG_NAME

        if self.result.exec:
            return (f"driver {self.plan.run_id} keeps running on head pod {self.result.exec['pod']} of RayCluster "
                    f"{self.plan.driver.cluster} (exec; its log: {self.result.exec['dir']}/{LOG_NAME}); "
                    "nothing was deleted: "
                    f"follow it with `nrl-k8s logs -f --run {self.plan.run_id}`, stop it with "
                    f"`nrl-k8s job stop --run {self.plan.run_id}` (--force: KILL)")
        cluster = self.plan.driver.cluster
        return (f"job {self.plan.run_id} keeps running on RayCluster {cluster}; nothing was deleted: "
                f"follow it with `{job_command('logs', self.ns, cluster, self.plan.run_id)} -f`, "
                f"stop it with `{job_command('stop', self.ns, cluster, self.plan.run_id)}`")


def job_command(verb: str, namespace: str, cluster: str, job_id: str) -> str:
    """`nrl-k8s job VERB` for Ray job ``job_id`` of RayCluster ``cluster``: works pasted, whatever run was last."""
    return f"nrl-k8s -n {namespace} job {verb} --cluster {cluster} --job {job_id}"


def submit_daemon(dash: Dashboard, daemon: Submission, package, *, namespace: str, replace: bool, emit: Emit) -> str:
    """Submit ``daemon`` unless its latest job runs or succeeded; what was done, as a short text.

    A failed or stopped one is an error unless ``replace``, which stops the cluster's running jobs
    and submits under a fresh suffixed id (Ray never reuses one).
    """
    label = f"daemon {daemon.role}"
    jobs = dash.list_jobs()
    latest = latest_daemon_job(jobs, daemon.submission_id)
    if latest is not None and not replace:
        if latest.status in ("RUNNING", "PENDING", "SUCCEEDED"):
            emit(Applied(label, latest.id, f"reused ({latest.status})"))
            return f"{latest.status.lower()} {latest.id}"
        raise ResourceFailed(
            f"daemon {latest.id} on RayCluster {daemon.cluster} is {latest.status}"
            f"{': ' + latest.message if latest.message else ''}",
            hint=f"read its logs (`{job_command('logs', namespace, daemon.cluster, latest.id)}`)"
            ", then pass --replace to start it again",
        )
    submission_id = daemon.submission_id
    if latest is not None:
        stop_jobs(dash, [j for j in jobs if not j.terminal], emit, namespace=namespace, cluster=daemon.cluster)
        submission_id = f"{daemon.submission_id}-{int(time.time())}"
    runtime_env: dict = {"env_vars": daemon.env} if daemon.env else {}
    if package is not None:
        dash.ensure_package(package)
        runtime_env["working_dir"] = package.uri
    try:
        dash.submit(daemon.entrypoint, submission_id=submission_id, runtime_env=runtime_env or None,
                    metadata={KIND_METADATA: "daemon"})
    except SubmissionExists:  # a concurrent start of the same config submitted it first
        pass
    emit(Applied(label, submission_id, "submitted"))
    return f"submitted {submission_id}"


def latest_daemon_job(jobs: list[JobInfo], submission_id: str) -> JobInfo | None:
    """The newest job of a daemon: its id, or its id with a --replace suffix."""
    mine = [j for j in jobs if j.submission_id and (j.submission_id == submission_id
                                                      or j.submission_id.startswith(submission_id + "-"))]
    return max(mine, key=lambda j: j.start_time or 0, default=None)


def stop_jobs(dash: Dashboard, jobs: list[JobInfo], emit: Emit, *, namespace: str, cluster: str) -> None:
    """Stop ``jobs`` and wait until Ray reports each terminal."""
    for job in jobs:
        dash.stop(job.id)
        emit(Waiting(f"job {job.id}", "stopping"))
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for job in jobs:
        while not _stopped(dash, job.id):
            if time.monotonic() >= deadline:
                raise ResourceFailed(
                    f"job {job.id} did not stop within {STOP_TIMEOUT_S}s",
                    hint=f"stop it yourself: {job_command('stop', namespace, cluster, job.id)}",
                )
            time.sleep(0.2)
        emit(Became(f"job {job.id}", "stopped"))


def _stopped(dash: Dashboard, submission_id: str) -> bool:
    job = dash.get_job(submission_id)
    return job is None or job.terminal


def _ended(dash: Dashboard, submission_id: str, namespace: str, cluster: str) -> str | None:
    """Why job ``submission_id`` will not serve any more (None while it runs)."""
    job = dash.get_job(submission_id)
    if job is None or not job.terminal:
        return None
    return f"job {submission_id} is {job.status}" + (f": {job.message}" if job.message else "") + \
        f" (its log: {job_command('logs', namespace, cluster, submission_id)})"


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n} B"


def bring_up(run: LongLived) -> None:
    """Everything up to the driver's submission, in the long-lived order."""
    plan, options = run.plan, run.options
    existing, packages = run.preflight()
    run.steps.deployments(plan.deployments, plan.health, recreate=options.recreate)
    for role in plan.clusters:
        run.ensure_cluster(role)
    run.read_ahead(packages["driver"])
    run.steps.apply_dgds(plan.dgds, existing, owner=run.live["training"])
    run.wait_all()
    run.reset_registry()
    if not options.skip_daemons:
        run.daemons(packages)
    run.driver(packages["driver"])


def run_raycluster(kube: Kube, plan: LongLivedPlan, options: LiveOptions, emit: Emit, on_log=None) -> LongLivedResult:
    with LongLived(kube, plan, options, emit) as run:
        lifecycle.execute(run, lambda: bring_up(run),
                          (lambda: run.follow(on_log or (lambda text: None))) if options.wait else None)
    return run.result
