"""`nrl-k8s run --rayjob | --raycluster`: inference first, then training.

Without either flag the infra's ``launch.mode`` picks the flow (bringup: --raycluster, else
--rayjob); a flag given wins.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ._common import (
    DashboardUrlOpt,
    InfraOpt,
    OverridesArg,
    PlaceAnywayOpt,
    RecipeArg,
    ShowSecretsOpt,
    connect,
    load,
    print_manifests,
)

# Flags that only one flow reads: refused by name in the other.
_RAYJOB_ONLY = ("driver_grace", "parallel", "shutdown", "ttl_seconds", "active_deadline", "rayjob_name")
_RAYCLUSTER_ONLY = ("run_id", "replace", "skip_daemons", "repo_root", "recreate", "mode", "submitter")


_RayjobOpt = Annotated[
    bool,
    typer.Option(
        "--rayjob", help="Ephemeral RayJob flow (the default unless the infra sets launch.mode: bringup)."
    ),
]
_RayclusterOpt = Annotated[
    bool,
    typer.Option(
        "--raycluster",
        help="Long-lived flow: keep the RayClusters and DGDs up, submit the driver to them "
        "(the default with launch.mode: bringup).",
    ),
]
_DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Print every object the run would apply; apply nothing.")
]
_WaitOpt = Annotated[
    bool,
    typer.Option("--wait/--no-wait", help="Stream the driver log until the job ends (exit 0 only on SUCCEEDED)."),
]
_TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        help="Stop following after this long once the driver is submitted: exit 1, the run keeps going.",
    ),
]
_DriverGraceOpt = Annotated[
    float,
    typer.Option(
        "--driver-grace", min=0, help="[rayjob] Seconds KubeRay gets to submit the driver before nrl-k8s does."
    ),
]
_ShutdownOpt = Annotated[
    bool,
    typer.Option(
        "--shutdown/--no-shutdown", help="[rayjob] Delete the RayCluster (and its DGDs) when the job ends."
    ),
]
_ParallelOpt = Annotated[
    bool,
    typer.Option(
        "--parallel",
        help="[rayjob] Bring the DGDs and the RayJob's cluster up at once (launch.bringUp: parallel); "
        "the driver starts once every DGD serves.",
    ),
]
_TtlSecondsOpt = Annotated[
    int | None,
    typer.Option(
        "--ttl-seconds",
        "--ttl",
        min=0,
        metavar="SECONDS",
        help="[rayjob] Keep the finished job's RayCluster (and the DGDs it owns) this long before KubeRay "
        "deletes it (ttlSecondsAfterFinished; --ttl is upstream's name; default 0: no GPU waits; with --wait, "
        "30, cut short by the run once the driver's log is in).",
    ),
]
_ActiveDeadlineOpt = Annotated[
    int | None, typer.Option("--active-deadline-seconds", min=1, help="[rayjob] Fail the job after this long.")
]
_RayjobNameOpt = Annotated[
    str | None,
    typer.Option(
        "--rayjob-name",
        metavar="NAME",
        help="[rayjob] Name the RayJob (and what is named after it) NAME instead of "
        "kuberay.training.name: a second run from the same infra.",
    ),
]
_RunIdOpt = Annotated[
    str | None, typer.Option("--run-id", help="[raycluster] Submission id of the driver (default: generated).")
]
_ReplaceOpt = Annotated[
    bool,
    typer.Option(
        "--replace",
        help="[raycluster] Stop running jobs (driver, failed daemons), reset the gym's "
        "endpoint registry (ConfigMap nemo-rl-endpoints-JOB_ID) and submit anew.",
    ),
]
_SkipDaemonsOpt = Annotated[
    bool, typer.Option("--skip-daemons", help="[raycluster] Do not submit the roles' daemons.")
]
_RepoRootOpt = Annotated[
    str | None,
    typer.Option("--repo-root", help="[raycluster] Root of launch.rayUploadPaths (default: the git top-level)."),
]
_RecreateOpt = Annotated[
    bool, typer.Option("--recreate", help="[raycluster] Replace live objects whose spec drifted.")
]
_AdoptOpt = Annotated[
    bool,
    typer.Option(
        "--adopt",
        help="Reuse a same-named object another user or a person made "
        "(refused without it, before anything is applied).",
    ),
]
_ModeOpt = Annotated[
    str | None,
    typer.Option(
        "--mode",
        metavar="interactive|batch",
        help="[raycluster] A preset (launch.runMode): interactive = --submitter "
        "dashboard --code-source upload --wait; batch = --submitter exec --code-source image --no-wait. "
        "Flags given and infra keys set win over it.",
    ),
]
_SubmitterOpt = Annotated[
    str | None,
    typer.Option(
        "--submitter",
        metavar="dashboard|exec",
        help="[raycluster] How the driver starts (submit.submitter): a Ray "
        "job through the dashboard, or a process on the head pod through pods/exec, its log kept there.",
    ),
]
_CodeSourceOpt = Annotated[
    str | None,
    typer.Option(
        "--code-source",
        metavar="upload|image|lustre",
        help="Where the driver's code is (launch.codeSource): upload "
        "packages launch.rayUploadPaths [raycluster]; image or lustre start the driver in --code-path.",
    ),
]
_CodePathOpt = Annotated[
    str | None,
    typer.Option(
        "--code-path",
        metavar="PATH",
        help="Where the driver starts with --code-source image or lustre (launch.codePath).",
    ),
]


def run(
    ctx: typer.Context,
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    rayjob: _RayjobOpt = False,
    raycluster: _RayclusterOpt = False,
    dry_run: _DryRunOpt = False,
    show_secrets: ShowSecretsOpt = False,
    wait: _WaitOpt = True,
    timeout: _TimeoutOpt = None,
    driver_grace: _DriverGraceOpt = 90.0,
    dashboard_url: DashboardUrlOpt = None,
    shutdown: _ShutdownOpt = True,
    parallel: _ParallelOpt = False,
    ttl_seconds: _TtlSecondsOpt = None,
    active_deadline: _ActiveDeadlineOpt = None,
    rayjob_name: _RayjobNameOpt = None,
    run_id: _RunIdOpt = None,
    replace: _ReplaceOpt = False,
    skip_daemons: _SkipDaemonsOpt = False,
    repo_root: _RepoRootOpt = None,
    recreate: _RecreateOpt = False,
    adopt: _AdoptOpt = False,
    place_anyway: PlaceAnywayOpt = False,
    mode: _ModeOpt = None,
    submitter: _SubmitterOpt = None,
    code_source: _CodeSourceOpt = None,
    code_path: _CodePathOpt = None,
) -> None:
    """Bring up every DGD (serving) and the training: a RayJob (default) or long-lived RayClusters."""
    from nrl_k8s.errors import ConfigError

    _refuse_clashes(ctx, rayjob=rayjob, raycluster=raycluster, wait=wait, timeout=timeout, shutdown=shutdown)
    chosen = rayjob or raycluster
    if chosen:
        _refuse_other_flow_flags(ctx, raycluster, implied=False)
    from nrl_k8s.config import workflow

    flags = workflow.flag_overrides(mode=mode, submitter=submitter, code_source=code_source, code_path=code_path)
    cfg = load(ctx, recipe, [*(overrides or []), *_rayjob_name_override(rayjob_name), *flags], infra)
    if not chosen:
        from nrl_k8s.flows.plan import default_flow

        raycluster = default_flow(cfg.infra) == "raycluster"
        _refuse_other_flow_flags(ctx, raycluster, implied=True)
    _refuse_unused_code_flags(cfg.infra, raycluster, code_source, code_path)
    _warn_unstaged_recipe(cfg.infra, "raycluster" if raycluster else "rayjob")
    if raycluster:
        wait = workflow.waits(cfg.infra, wait if _on_command_line(ctx, "wait") else None)
        if timeout is not None and not wait:
            raise ConfigError("--timeout cannot be used without waiting (launch.runMode batch does not wait)",
                              hint="pass --wait too, or drop --timeout")
        _run_raycluster(ctx, cfg, dry_run=dry_run, show_secrets=show_secrets, wait=wait, timeout=timeout,
                        dashboard_url=dashboard_url, run_id=run_id, replace=replace, skip_daemons=skip_daemons,
                        repo_root=repo_root, recreate=recreate, adopt=adopt, place_anyway=place_anyway)
        return

    _run_rayjob(ctx, cfg, dry_run=dry_run, show_secrets=show_secrets, wait=wait, timeout=timeout,
                dashboard_url=dashboard_url, adopt=adopt, place_anyway=place_anyway, driver_grace=driver_grace,
                shutdown=shutdown, ttl_seconds=ttl_seconds, active_deadline=active_deadline, parallel=parallel)


def _run_rayjob(ctx, cfg, *, dry_run, show_secrets, wait, timeout, dashboard_url, adopt, place_anyway, driver_grace,
                shutdown, ttl_seconds, active_deadline, parallel) -> None:
    from nrl_k8s.flows.plan import parallel_bringup, plan_run
    from nrl_k8s.flows.rayjob import options_for

    parallel = parallel_bringup(cfg.infra, parallel)
    run_options, frees_cluster = options_for(wait=wait, shutdown=shutdown, ttl_seconds=ttl_seconds,
                                             active_deadline_seconds=active_deadline, parallel=parallel)
    plan = plan_run(cfg, run_options)
    if dry_run:
        _print_dry_run(plan, show_secrets)
        return
    _print_notes(plan)

    from nrl_k8s.flows import parallel as parallel_flow
    from nrl_k8s.flows.lifecycle import LiveOptions
    from nrl_k8s.flows.rayjob import run_rayjob, serial

    from ._common import global_options
    from ._progress import Progress
    from ._render import render_run_result

    kube = connect(ctx, cfg.infra["namespace"])
    options = LiveOptions(wait=wait, driver_grace_s=driver_grace, dashboard_url=dashboard_url, job_timeout_s=timeout,
                          context=global_options(ctx).context, adopt=adopt, place_anyway=place_anyway,
                          frees_cluster=frees_cluster)
    with Progress() as progress:
        result = run_rayjob(kube, plan, options, progress, on_log=progress.log,
                            bring_up=parallel_flow.bring_up if parallel else serial)
    render_run_result(result)
    if wait and not result.succeeded:
        raise typer.Exit(1)


def _refuse_clashes(ctx: typer.Context, *, rayjob: bool, raycluster: bool, wait: bool, timeout: float | None,
                    shutdown: bool) -> None:
    """Flags that make no sense together, refused by name."""
    from nrl_k8s.errors import ConfigError

    if rayjob and raycluster:
        raise ConfigError("--rayjob and --raycluster are mutually exclusive", hint="pick one flow")
    if timeout is not None and not wait:
        raise ConfigError(
            "--timeout cannot be used with --no-wait", hint="--timeout bounds how long --wait follows the job"
        )
    if not shutdown and _on_command_line(ctx, "ttl_seconds"):
        raise ConfigError("--ttl-seconds/--ttl cannot be used with --no-shutdown",
                          hint="with --no-shutdown KubeRay keeps the RayCluster until you delete it; the TTL counts "
                               "only once it shuts the cluster down")
    if timeout is not None and not timeout > 0:
        raise ConfigError(f"--timeout {timeout:g} is not a number of seconds above 0", hint="e.g. --timeout 3600")


def _rayjob_name_override(name: str | None) -> list[str]:
    """``--rayjob-name NAME`` as the infra override it stands for (``kuberay.training.name``), checked first
    so a bad name is named by its flag: a DNS label KubeRay accepts for a RayJob (it adds 6 characters)."""
    if name is None:
        return []
    from nrl_k8s.kinds.names import MAX_RAYJOB_NAME_LEN, validate_name

    validate_name(name, what="RayJob name", where="--rayjob-name", max_len=MAX_RAYJOB_NAME_LEN)
    return [f"++infra.kuberay.training.name={name}"]


def _refuse_other_flow_flags(ctx: typer.Context, raycluster: bool, *, implied: bool) -> None:
    """Refuse the other flow's flags by name; ``implied``: the flow comes from launch.mode."""
    from nrl_k8s.errors import ConfigError

    wrong = _RAYJOB_ONLY if raycluster else _RAYCLUSTER_ONLY
    given = ["/".join(p.opts) for p in ctx.command.params if p.name in wrong
             and _on_command_line(ctx, p.name)]
    if given:
        flow = "--raycluster" if raycluster else "--rayjob"
        if implied:
            flow += " (chosen by launch.mode: bringup)" if raycluster else " (the default without launch.mode: bringup)"
        raise ConfigError(f"{', '.join(given)} cannot be used with {flow}",
                          hint="see `nrl-k8s run --help`: [rayjob] and [raycluster] mark each flow's flags; "
                          "a --rayjob or --raycluster flag overrides launch.mode")


def _warn_unstaged_recipe(infra: dict, flow: str) -> None:
    from nrl_k8s.flows.plan import command_line_secrets, unstaged_recipe_reads

    from ._console import print_warning

    for message, fix in [*unstaged_recipe_reads(infra, flow), *command_line_secrets(infra)]:
        print_warning(message, fix)


def _on_command_line(ctx: typer.Context, name: str) -> bool:
    # By name: typer ships its own copy of click, whose ParameterSource is not click.core's.
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _refuse_unused_code_flags(infra: dict, raycluster: bool, code_source: str | None, code_path: str | None) -> None:
    """``--code-source upload`` with --rayjob (nothing is uploaded there) and ``--code-path`` with the
    code uploaded are refused by name: they would change nothing."""
    from nrl_k8s.config import workflow
    from nrl_k8s.errors import ConfigError

    if code_source == "upload" and not raycluster:
        raise ConfigError("--code-source upload cannot be used with --rayjob: that flow uploads no code",
                          hint="the RayJob's driver runs the image's code: use --code-source image with --code-path "
                          "DIR, or run --raycluster")
    if code_path is not None and workflow.code_source(infra) == "upload":
        raise ConfigError("--code-path has no effect with the code uploaded (launch.codeSource upload)",
                          hint="add --code-source image (or lustre): the driver then starts in --code-path")


def _print_notes(plan) -> None:
    """What the run did to the recipe and to the driver's command (e.g. each --config it rewrote), one line each,
    then what the recipe leaves open against its DGD (``plan.warnings``)."""
    from ._console import err, print_warning

    for note in plan.notes:
        err.print(f"recipe: {note}", markup=False, highlight=False)
    for message, fix in plan.warnings:
        print_warning(message, fix)


def _print_dry_run(plan, show_secrets: bool) -> None:
    print_manifests(plan.manifests(), show_secrets=show_secrets)
    _print_notes(plan)


def _run_raycluster(ctx, cfg, *, dry_run, show_secrets, wait, timeout, dashboard_url, run_id, replace, skip_daemons,
                    repo_root, recreate, adopt, place_anyway) -> None:
    from nrl_k8s.flows.plan import plan_longlived
    from nrl_k8s.ray.package import upload_sources

    plan = plan_longlived(cfg, run_id)
    with cfg.located():  # what the run uploads, checked before anything is applied, with or without --dry-run
        upload_sources(plan, repo_root)
    if dry_run:
        _print_dry_run(plan, show_secrets)
        return
    _print_notes(plan)

    from nrl_k8s.flows.lifecycle import LiveOptions
    from nrl_k8s.flows.raycluster import run_raycluster

    from ._common import global_options
    from ._progress import Progress
    from ._render import render_longlived_result

    kube = connect(ctx, cfg.infra["namespace"])
    options = LiveOptions(wait=wait, recreate=recreate, replace=replace, skip_daemons=skip_daemons,
                          repo_root=repo_root, dashboard_url=dashboard_url, context=global_options(ctx).context,
                          job_timeout_s=timeout, adopt=adopt, place_anyway=place_anyway)
    with Progress() as progress:
        result = run_raycluster(kube, plan, options, progress, on_log=progress.log)
    render_longlived_result(result)
    if wait and not result.succeeded:
        raise typer.Exit(1)
