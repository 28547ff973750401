"""`nrl-k8s job list|logs|stop`: Ray jobs on a role's cluster, via its dashboard, and exec drivers on the
training head pod; `nrl-k8s logs`: the driver's or pods' logs."""

from __future__ import annotations

from typing import Annotated

import typer

from ._common import (
    CONTEXT,
    DashboardUrlOpt,
    InfraOpt,
    LatestRecipeArg,
    Output,
    OutputOpt,
    OverridesArg,
    RunOpt,
    load_or_latest,
    print_data,
)

app = typer.Typer(
    rich_markup_mode=None, context_settings=CONTEXT, help="Ray jobs on a role's cluster (through its dashboard)."
)

RoleOpt = Annotated[str, typer.Option("--role", "-r", help="kuberay role whose cluster to use.")]
FollowOpt = Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")]


def _print_logs(ctx, recipe, overrides, infra, role: str, job: str | None, follow: bool, url: str | None,
                cluster: str | None = None, run: str | None = None) -> None:
    """The job's output through the dashboard (an exec driver's from the head pod), secret values
    redacted; when the cluster or its dashboard is gone, the driver log `run --wait` saved with the
    run record, said so. ``cluster``: RayCluster CLUSTER's Ray job, no run config."""
    from nrl_k8s.ops import jobs

    if cluster is not None:
        def of_cluster():
            source, job_id = _cluster_source(ctx, cluster, (recipe, overrides, infra, run), job, url, for_log=True)
            with source:
                yield from source.follow_logs(job_id) if follow else [source.logs(job_id)]

        _echo_or_saved(of_cluster(), {}, job, saved=False)
        return
    infra_cfg, kube, record = load_or_latest(ctx, recipe, overrides, infra, run)
    recorded = record["job_id"] if record is not None and role == "training" else None

    def chunks():
        source, job_id = jobs.job_source(kube, infra_cfg, record, role, job, url, for_log=True)
        with source:
            yield from source.follow_logs(job_id) if follow else [source.logs(job_id)]

    _echo_or_saved(chunks(), infra_cfg, job or recorded, saved=role == "training")


ClusterOpt = Annotated[str | None, typer.Option(
    "--cluster", "-c", metavar="NAME", help="RayCluster NAME in the namespace (-n) instead of a run config's role; "
    "its Ray jobs only (not exec drivers).")]


def _cluster_source(ctx, cluster: str, config: tuple, job: str | None, url: str | None, *, for_log: bool = False):
    """(RayCluster ``cluster``'s dashboard, the job id: ``job``, else its newest job). ``for_log``: the
    secret values of the cluster's pods, and of the newest run recorded here on it, remembered for redaction."""
    from nrl_k8s.ops import jobs

    dash = _cluster_dashboard(ctx, cluster, config, url, for_log=for_log)
    try:
        return dash, job or jobs.current_job(dash, None)
    except BaseException:
        dash.close()
        raise


def _cluster_dashboard(ctx, cluster: str, config: tuple, url: str | None, *, for_log: bool = False):
    """RayCluster ``cluster``'s dashboard in the namespace (-n, else the context's); refused with a run config."""
    from nrl_k8s import redact
    from nrl_k8s.errors import ConfigError
    from nrl_k8s.flows import driver_log, records
    from nrl_k8s.kinds.names import validate_name
    from nrl_k8s.ray.dashboard import of_raycluster

    from ._common import connect

    given_role = getattr(ctx.get_parameter_source("role"), "name", None) not in (None, "DEFAULT")
    if any(config) or given_role:
        raise ConfigError("--cluster names the RayCluster: it cannot be used with RECIPE, overrides, --infra, --run "
                          "or --role", hint="pass either --cluster NAME (with -n NAMESPACE) or the run config")
    validate_name(cluster, what="RayCluster name", where="--cluster")
    kube = connect(ctx)
    if for_log:
        driver_log.remember_pod_secrets(kube, kube.namespace, f"{driver_log.CLUSTER_LABEL}={cluster}")
        redact.remember_digests((records.latest_record(kube.namespace, cluster) or {}).get("secrets"))
    return of_raycluster(kube, cluster, kube.namespace, url=url)


def _echo_or_saved(chunks, infra: dict, job_id: str | None, *, saved: bool) -> None:
    """Print ``chunks`` redacted; when they fail before any text because the cluster or its
    dashboard is gone, print the driver log `run --wait` saved instead (``saved``: the training role's).
    A followed job whose Ray head went away after its log was printed (KubeRay deleted the cluster
    as the job ended) ends the output with a warning, not an error."""
    from nrl_k8s.errors import DashboardError, JobGone, NotFoundError
    from nrl_k8s.redact import LineRedactor

    from ._console import print_warning

    redactor, printed = LineRedactor(), False

    def echo(text: str) -> None:
        if text:
            typer.echo(text, nl=False)

    try:
        for chunk in chunks:
            printed = printed or bool(chunk)
            echo(redactor.feed(chunk))
    except (NotFoundError, DashboardError) as err:
        if printed and isinstance(err, JobGone):
            echo(redactor.flush())
            print_warning(err.message, err.hint)
            return
        if printed or not saved or not _print_saved_log(infra, job_id, err):
            raise
    echo(redactor.flush())


def _print_saved_log(infra: dict, job_id: str | None, why) -> bool:
    """The saved driver log of ``job_id`` (else of the role's latest run) on stdout, a note on stderr; False: none."""
    import shutil
    import sys

    from nrl_k8s.flows import driver_log
    from nrl_k8s.kinds import raycluster

    from ._console import err

    found = driver_log.saved_log(infra["namespace"], job_id=job_id, name=raycluster.cluster_name(infra, "training"))
    if found is None:
        return False
    record, path = found
    log = record.get("log") or {}
    notes = [f"job {record.get('job_id')} {record.get('job_status') or 'status unknown'}",
             *(["the stream stopped before the job ended"] if not log.get("complete") else []),
             *([f"its first {log['cut_bytes']} bytes were cut"] if log.get("cut_bytes") else [])]
    err.print(f"note: {why.message}; this is the driver log `run --wait` saved, {path} ({'; '.join(notes)})",
              markup=False, highlight=False)
    with open(path, "rb") as saved:
        shutil.copyfileobj(saved, sys.stdout.buffer)
    sys.stdout.flush()
    return True


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    recipe: LatestRecipeArg = None,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    role: RoleOpt = "training",
    dashboard_url: DashboardUrlOpt = None,
    output: OutputOpt = Output.table,
    cluster: ClusterOpt = None,
    run: RunOpt = None,
) -> None:
    """Jobs on the role's cluster (training: and its exec drivers)."""
    from nrl_k8s.ops import jobs
    from nrl_k8s.redact import redact_text

    from ._render import render_rows

    if cluster is not None:
        with _cluster_dashboard(ctx, cluster, (recipe, overrides, infra, run), dashboard_url) as dash:
            found = dash.list_jobs()
    else:
        infra_cfg, kube, record = load_or_latest(ctx, recipe, overrides, infra, run)
        found = jobs.list_jobs(kube, infra_cfg, record, role, dashboard_url)
    rows = [{"submission id": j.submission_id or "", "status": j.status, "entrypoint": redact_text(j.entrypoint)[:60]}
            for j in found]
    print_data(rows, output, lambda: render_rows(rows, ("submission id", "status", "entrypoint"), empty="no jobs"))


JobOpt = Annotated[str | None, typer.Option("--job", "-j", help="Submission id (default: the role's current job).")]


@app.command("logs")
def job_logs(ctx: typer.Context, recipe: LatestRecipeArg = None, overrides: OverridesArg = None, infra: InfraOpt = None,
             job: JobOpt = None, role: RoleOpt = "training", follow: FollowOpt = False,
             dashboard_url: DashboardUrlOpt = None, cluster: ClusterOpt = None, run: RunOpt = None) -> None:
    """Logs of one job (`-f`: streamed until it ends); once its cluster is gone, the copy `run --wait` saved."""
    _print_logs(ctx, recipe, overrides, infra, role, job, follow, dashboard_url, cluster, run)


@app.command("stop")
def stop(ctx: typer.Context, recipe: LatestRecipeArg = None, overrides: OverridesArg = None, infra: InfraOpt = None,
         job: JobOpt = None, role: RoleOpt = "training", dashboard_url: DashboardUrlOpt = None,
         force: Annotated[bool, typer.Option(
             "--force", help="An exec driver: KILL its process group (default TERM).")] = False,
         cluster: ClusterOpt = None, run: RunOpt = None) -> None:
    """Stop one job (an exec driver: TERM to its process group, --force KILL)."""
    from nrl_k8s.errors import ConfigError
    from nrl_k8s.ops import jobs
    from nrl_k8s.ray.execdriver import ExecDrivers

    from ._console import err

    if cluster is not None:
        source, job_id = _cluster_source(ctx, cluster, (recipe, overrides, infra, run), job, dashboard_url)
    else:
        infra_cfg, kube, record = load_or_latest(ctx, recipe, overrides, infra, run)
        source, job_id = jobs.job_source(kube, infra_cfg, record, role, job, dashboard_url)
    exec_driver = isinstance(source, ExecDrivers)
    with source:
        if force and not exec_driver:
            raise ConfigError(f"--force applies to exec drivers; job {job_id} is a Ray job",
                              hint="drop --force: Ray's stop kills a job that does not exit after its grace period")
        stopped = source.stop(job_id, force=force) if exec_driver else source.stop(job_id)
    what = ("KILL sent to its process group" if force else "TERM sent to its process group") if exec_driver \
        else "stop requested"
    err.print(f"job {job_id}: {what if stopped else 'was not running'}", markup=False)


SourceOpt = Annotated[str, typer.Option(
    "--source", "-s", help="driver (the role's current job), daemon (the role's daemon job), auto (daemon when the "
    "role declares one, else driver), head, worker (the role's Ray pods) or dgd[:COMPONENT].")]
TailOpt = Annotated[int | None, typer.Option("--tail", help="Only the last N lines (then follow, with -f).")]
LogsFollowOpt = Annotated[
    bool, typer.Option("--follow", "-f", help="Keep printing until the job (a pod: its container) ends.")
]
LogsRoleOpt = Annotated[str | None, typer.Option(
    "--role", "-r", help="kuberay role whose cluster to use (default training; not with --source dgd).")]


def logs(ctx: typer.Context, recipe: LatestRecipeArg = None, overrides: OverridesArg = None, infra: InfraOpt = None,
         source: SourceOpt = "driver", role: LogsRoleOpt = None, tail: TailOpt = None, follow: LogsFollowOpt = False,
         dashboard_url: DashboardUrlOpt = None, run: RunOpt = None) -> None:
    """The driver's log (the RayJob's submitter, else the role's current job through its dashboard), the role's
    daemon's, or pod logs through the API server: the Ray head or workers, or the run's DGD pods. Secret values
    are redacted."""
    from nrl_k8s.ops import logs as podlogs

    from ._console import err

    request = podlogs.Request.parse(source, role=role, tail=tail, follow=follow, dashboard_url=dashboard_url)
    infra_cfg, kube, record = load_or_latest(ctx, recipe, overrides, infra, run)
    request = request.resolved(infra_cfg)

    def skip(target, why: str) -> None:
        err.print(f"note: {target}: no log: {why}", markup=False)

    def chunks():
        yield from podlogs.stream(kube, infra_cfg, request, record=record, dashboard_url=dashboard_url, skip=skip)

    recorded = record["job_id"] if record is not None else None
    _echo_or_saved(chunks(), infra_cfg, recorded, saved=request.source == "driver" and request.role == "training")
