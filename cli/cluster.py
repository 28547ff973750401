"""`nrl-k8s cluster up|down|list`: manage the declared RayClusters, DGDs and Deployments."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ._common import InfraOpt, OverridesArg, RecipeArg, ShowSecretsOpt, load, print_manifests

app = typer.Typer(rich_markup_mode=None, help="Bring declared targets (kuberay.ROLE, dynamo.KEY, deployments.KEY) up or down.")

TargetOpt = Annotated[
    Optional[list[str]], typer.Option("--target", "-t", help="KIND.KEY, repeatable; default: every declared target.")
]


@app.command("up")
def up(
    ctx: typer.Context,
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    target: TargetOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the rendered manifests; apply nothing.")] = False,
    show_secrets: ShowSecretsOpt = False,
) -> None:
    """Ensure the chosen targets exist (reuse on match)."""
    from nrl_k8s import targets

    cfg = load(ctx, recipe, overrides, infra)
    chosen = targets.parse(cfg.infra, target or [])
    manifests = [targets.render(cfg.infra, t) for t in chosen]
    if dry_run:
        print_manifests(manifests, show_secrets=show_secrets)
        return
    raise typer.BadParameter("live cluster up is not available yet; use --dry-run", param_hint="--dry-run")
