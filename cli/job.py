"""`nrl-k8s job list|logs|stop`: Ray jobs on a role's cluster, via its dashboard; `nrl-k8s logs`: the driver's or pods' logs."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ._common import DashboardUrlOpt, InfraOpt, LatestRecipeArg, OverridesArg, load_or_latest

app = typer.Typer(rich_markup_mode=None, help="Ray jobs on a role's cluster (through its dashboard).")

RoleOpt = Annotated[str, typer.Option("--role", "-r", help="kuberay role whose cluster to use.")]
FollowOpt = Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")]


def _dashboard(ctx, recipe, overrides, infra, role, url):
    """(dashboard, RayJob or None, the job the latest run record names for ``role`` or None)."""
    from nrl_k8s import jobs

    infra_cfg, kube, record = load_or_latest(ctx, recipe, overrides, infra)
    dash, rayjob = jobs.dashboard(kube, infra_cfg, role, url)
    recorded = record["job_id"] if record is not None and role == "training" else None
    return dash, rayjob, recorded


def _print_logs(dash, job_id: str, follow: bool) -> None:
    """The driver's output, secret values redacted."""
    from nrl_k8s.redact import redact_lines

    chunks = dash.follow_logs(job_id) if follow else [dash.logs(job_id)]
    for chunk in redact_lines(chunks):
        typer.echo(chunk, nl=False)


@app.command("list")
def list_jobs(ctx: typer.Context, recipe: LatestRecipeArg = None, overrides: OverridesArg = None, infra: InfraOpt = None,
              role: RoleOpt = "training", dashboard_url: DashboardUrlOpt = None) -> None:
    """Jobs on the role's cluster."""
    from nrl_k8s.redact import redact_text

    from ._render import render_rows

    dash, _, _ = _dashboard(ctx, recipe, overrides, infra, role, dashboard_url)
    with dash:
        rows = [{"submission id": j.submission_id or "", "status": j.status, "entrypoint": redact_text(j.entrypoint)[:60]}
                for j in dash.list_jobs()]
    render_rows(rows, ("submission id", "status", "entrypoint"), empty="no jobs")


JobOpt = Annotated[Optional[str], typer.Option("--job", "-j", help="Submission id (default: the role's current job).")]


@app.command("logs")
def job_logs(ctx: typer.Context, recipe: LatestRecipeArg = None, overrides: OverridesArg = None, infra: InfraOpt = None,
             job: JobOpt = None, role: RoleOpt = "training", follow: FollowOpt = False,
             dashboard_url: DashboardUrlOpt = None) -> None:
    """Logs of one job."""
    from nrl_k8s.jobs import current_job

    dash, rayjob, recorded = _dashboard(ctx, recipe, overrides, infra, role, dashboard_url)
    with dash:
        _print_logs(dash, job or recorded or current_job(dash, rayjob), follow)


@app.command("stop")
def stop(ctx: typer.Context, recipe: LatestRecipeArg = None, overrides: OverridesArg = None, infra: InfraOpt = None,
         job: JobOpt = None, role: RoleOpt = "training", dashboard_url: DashboardUrlOpt = None) -> None:
    """Stop one job."""
    from nrl_k8s.jobs import current_job

    from ._console import err

    dash, rayjob, recorded = _dashboard(ctx, recipe, overrides, infra, role, dashboard_url)
    with dash:
        job_id = job or recorded or current_job(dash, rayjob)
        stopped = dash.stop(job_id)
    err.print(f"job {job_id}: {'stop requested' if stopped else 'was not running'}", markup=False)


SourceOpt = Annotated[str, typer.Option(
    "--source", "-s", help="driver (the role's current job), head, worker (the role's Ray pods) or dgd[:COMPONENT].")]
TailOpt = Annotated[Optional[int], typer.Option("--tail", help="Only the last N lines (then follow, with -f).")]
LogsFollowOpt = Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job (a pod: its container) ends.")]
LogsRoleOpt = Annotated[Optional[str], typer.Option(
    "--role", "-r", help="kuberay role whose cluster to use (default training; not with --source dgd).")]


def logs(ctx: typer.Context, recipe: LatestRecipeArg = None, overrides: OverridesArg = None, infra: InfraOpt = None,
         source: SourceOpt = "driver", role: LogsRoleOpt = None, tail: TailOpt = None, follow: LogsFollowOpt = False,
         dashboard_url: DashboardUrlOpt = None) -> None:
    """The driver's log (the RayJob's submitter, else the role's current job through its dashboard), or
    pod logs through the API server: the Ray head or workers, or the run's DGD pods. Secret values are redacted."""
    from nrl_k8s import podlogs
    from nrl_k8s.redact import redact_lines

    from ._console import err

    request = podlogs.Request.parse(source, role=role, tail=tail, follow=follow, dashboard_url=dashboard_url)
    infra_cfg, kube, record = load_or_latest(ctx, recipe, overrides, infra)

    def skip(target, why: str) -> None:
        err.print(f"note: {target}: no log: {why}", markup=False)

    chunks = podlogs.stream(kube, infra_cfg, request, record=record, dashboard_url=dashboard_url, skip=skip)
    for chunk in redact_lines(chunks):
        typer.echo(chunk, nl=False)
