"""`nrl-k8s gc`: remove what runs that died left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import InfraOpt, OverridesArg, connect, load

RecipeOptArg = Annotated[
    Path | None, typer.Argument(help="Recipe YAML: its infra's namespace (default: -n, else the context's).")
]


def gc(
    ctx: typer.Context,
    recipe: RecipeOptArg = None,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be done; change nothing.")] = False,
) -> None:
    """Delete the objects of runs that died before giving them an owner (only objects with an
    nrl-k8s run label, never a live run's), in the recipe's namespace, else -n or the context's."""
    from nrl_k8s.ops import gc as gc_mod

    kube = connect(ctx, load(ctx, recipe, overrides, infra).infra["namespace"]) if recipe is not None else connect(ctx)
    found = gc_mod.find(kube, kube.namespace)
    if dry_run:
        done = [(item, "kept" if item.verdict == "keep" else f"would {item.verdict}") for item in found]
    else:
        done = gc_mod.collect(kube, kube.namespace, found)
    if not done:
        typer.echo(f"nothing left behind by dead runs in namespace {kube.namespace}")
    for item, action in done:  # one line per object, for people and for grep
        typer.echo(f"{action}: {item.kind.kind} {item.name} (run {item.run_id}: {item.reason})")
