"""`nrl-k8s cluster up|down|list`: manage the declared RayClusters, DGDs and Deployments."""

from __future__ import annotations

from typing import Annotated

import typer

from ._common import (
    CONTEXT,
    InfraOpt,
    Output,
    OutputOpt,
    OverridesArg,
    PlaceAnywayOpt,
    RecipeArg,
    ShowSecretsOpt,
    connect,
    global_options,
    load,
    observed,
    print_data,
    print_manifests,
)
from .dashboard import OpenOpt, PortOpt

app = typer.Typer(
    rich_markup_mode=None,
    context_settings=CONTEXT,
    help="Bring declared targets (kuberay.ROLE, dynamo.KEY, deployments.KEY) up or down.",
)

TargetOpt = Annotated[
    list[str] | None, typer.Option("--target", "-t", help="KIND.KEY, repeatable; default: every declared target.")
]
WaitOpt = Annotated[bool, typer.Option("--wait/--no-wait", help="Wait until ready (up) or gone (down).")]


@app.command("up")
def up(
    ctx: typer.Context,
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    target: TargetOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the rendered manifests; apply nothing.")] = False,
    show_secrets: ShowSecretsOpt = False,
    recreate: Annotated[bool, typer.Option("--recreate", help="Replace a live object whose spec drifted.")] = False,
    adopt: Annotated[bool, typer.Option("--adopt", help="Reuse a same-named object another user or a person made "
                                         "(refused without it).")] = False,
    place_anyway: PlaceAnywayOpt = False,
    wait: WaitOpt = True,
    repo_root: Annotated[str | None, typer.Option(
        "--repo-root", help="Root of the daemons' rayUploadPaths (default: the git top-level).")] = None,
) -> None:
    """Ensure the chosen targets exist (reuse on match, warn on drift); kuberay.ROLE also submits the role's daemon."""
    from nrl_k8s.flows.plan import command_line_secrets, plan_longlived
    from nrl_k8s.ops import clusters, targets

    from ._console import print_warning

    cfg = load(ctx, recipe, overrides, infra)
    chosen = targets.parse(cfg.infra, target or [])
    plan = plan_longlived(cfg)
    for message, fix in command_line_secrets(cfg.infra):  # a dry run too: it prints them <redacted>
        print_warning(message, fix)
    if wait:  # the daemons' code, checked as the bring-up checks it, with or without --dry-run
        from nrl_k8s.ray.package import upload_sources

        with cfg.located():
            upload_sources(plan, repo_root, roles=[t.key for t in chosen if t.kind == "kuberay"])
    if dry_run:
        print_manifests([m for t in chosen for m in clusters.objects(plan, t)], show_secrets=show_secrets)
        return
    from ._progress import Progress

    kube = connect(ctx, cfg.infra["namespace"])
    options = clusters.UpOptions(recreate=recreate, adopt=adopt, place_anyway=place_anyway, wait=wait,
                                  repo_root=repo_root)
    with Progress() as progress:
        clusters.up(kube, plan, chosen, options, progress)


@app.command("down")
def down(
    ctx: typer.Context,
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    target: TargetOpt = None,
    wait: WaitOpt = True,
    force: Annotated[bool, typer.Option("--force", help="Delete even what a running RayJob uses.")] = False,
) -> None:
    """Delete the chosen targets (only objects nrl-k8s created) and wait until they are gone.

    kuberay.training also deletes the run's RayJob (with its cluster and the DGDs it owns).
    """
    from nrl_k8s.ops import clusters, targets

    from ._progress import Progress

    cfg = load(ctx, recipe, overrides, infra)
    chosen = targets.parse(cfg.infra, target or [])
    kube = connect(ctx, cfg.infra["namespace"])
    with Progress() as progress:
        clusters.down(kube, cfg.infra, chosen, wait=wait, force=force, emit=progress)


@app.command("list")
def list_(
    ctx: typer.Context,
    output: OutputOpt = Output.table,
) -> None:
    """RayJobs, RayClusters and DGDs managed by nrl-k8s in the namespace."""
    from nrl_k8s.ops import clusters

    from ._render import render_rows

    kube = connect(ctx)
    rows = clusters.inventory(kube, kube.namespace)
    print_data(rows, output, lambda: render_rows(
        rows, ("kind", "name", "state", "owners", "created"), empty=f"nothing managed by nrl-k8s in {kube.namespace}"))


@app.command("dashboard")
def dashboard(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="RayCluster name (see `nrl-k8s cluster list`).")],
    namespace: Annotated[str | None, typer.Option(
        "--namespace", "-n", help="Its namespace [default: the global --namespace, else the kube context's].")] = None,
    port: PortOpt = None,
    open_browser: OpenOpt = False,
) -> None:
    """Relay 127.0.0.1 to RayCluster NAME's Ray dashboard through the API server (no recipe, no kubectl); Ctrl-C stops.

    The printed URL carries this session's token; scripts send it as 'Authorization: token TOKEN'."""
    from nrl_k8s.kinds.names import validate_name
    from nrl_k8s.kube.client import Kube
    from nrl_k8s.relay import server as relay

    from .dashboard import serve

    validate_name(name, what="RayCluster name", where="NAME")
    if namespace is not None:
        validate_name(namespace, what="namespace", where="--namespace")
    opts = global_options(ctx)
    kube = observed(ctx, Kube.connect(context=opts.context, namespace=namespace or opts.namespace))
    serve(kube, relay.cluster_dashboard(kube, name, kube.namespace), port, open_browser)
