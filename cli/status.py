"""`nrl-k8s status`: roles, the RayJob and the DYNAMO section for a run config."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ._common import InfraOpt, OverridesArg, RecipeArg, connect, dump_yaml_stream, load


def status(
    ctx: typer.Context,
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    output: Annotated[str, typer.Option("--output", "-o", help="table, json or yaml.")] = "table",
) -> None:
    """Show what is running for this run config."""
    from nrl_k8s.errors import ConfigError
    from nrl_k8s.redact import redact
    from nrl_k8s.status import collect

    if output not in ("table", "json", "yaml"):
        raise ConfigError(f"--output {output!r} is not supported", hint="use table, json or yaml")
    cfg = load(ctx, recipe, overrides, infra)
    data = redact(collect(connect(ctx, cfg.infra["namespace"]), cfg.infra))  # job messages can echo driver output
    if output == "json":
        typer.echo(json.dumps(data, indent=2))
    elif output == "yaml":
        typer.echo(dump_yaml_stream([data]), nl=False)
    else:
        from ._render import render_status

        render_status(data)
