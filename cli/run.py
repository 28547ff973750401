"""`nrl-k8s run --rayjob`: inference first, then the training RayJob."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ._common import DashboardUrlOpt, InfraOpt, OverridesArg, RecipeArg, ShowSecretsOpt, connect, load, print_manifests


def run(
    ctx: typer.Context,
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    rayjob: Annotated[bool, typer.Option("--rayjob", help="Ephemeral RayJob flow (the default).")] = True,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the RayJob and every DGD; apply nothing.")] = False,
    show_secrets: ShowSecretsOpt = False,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Follow the job until it ends (exit 0 only on SUCCEEDED).")] = True,
    driver_grace: Annotated[
        float, typer.Option("--driver-grace", min=0, help="Seconds KubeRay gets to submit the driver before nrl-k8s does.")
    ] = 90.0,
    dashboard_url: DashboardUrlOpt = None,
    shutdown: Annotated[
        bool, typer.Option("--shutdown/--no-shutdown", help="Delete the RayCluster (and its DGDs) when the job ends.")
    ] = True,
    ttl_seconds: Annotated[int, typer.Option("--ttl-seconds", min=0, help="Keep the finished cluster this long.")] = 0,
    active_deadline: Annotated[
        Optional[int], typer.Option("--active-deadline-seconds", min=1, help="Fail the job after this long.")
    ] = None,
) -> None:
    """Bring up every DGD, wait until it serves, then run the training RayJob."""
    from nrl_k8s.plan import RunOptions, plan_run

    cfg = load(ctx, recipe, overrides, infra)
    plan = plan_run(cfg, RunOptions(shutdown=shutdown, ttl_seconds=ttl_seconds, active_deadline_seconds=active_deadline))
    if dry_run:
        print_manifests(plan.manifests(), show_secrets=show_secrets)
        from ._console import err

        for note in plan.notes:
            err.print(f"recipe: {note}", markup=False)
        return

    from nrl_k8s.orchestrate import LiveOptions, run_rayjob

    from ._progress import Progress
    from ._render import render_run_result

    kube = connect(ctx, cfg.infra["namespace"])
    options = LiveOptions(wait=wait, driver_grace_s=driver_grace, dashboard_url=dashboard_url)
    with Progress() as progress:
        result = run_rayjob(kube, plan, options, progress)
    render_run_result(result)
    if wait and not result.succeeded:
        raise typer.Exit(1)
