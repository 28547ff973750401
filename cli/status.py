"""`nrl-k8s status`: roles, the RayJob and the DYNAMO section for a run config."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ._common import InfraOpt, LatestRecipeArg, OverridesArg, dump_yaml_stream, load_or_latest


def status(
    ctx: typer.Context,
    recipe: LatestRecipeArg = None,
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
    infra_cfg, kube, record = load_or_latest(ctx, recipe, overrides, infra)
    data = redact(collect(kube, infra_cfg, record))  # job messages can echo driver output
    if record is not None:
        data["run"] = {"run_id": record["run_id"], "job_id": record["job_id"], "created": record["created"]}
    if output == "json":
        typer.echo(json.dumps(data, indent=2))
    elif output == "yaml":
        typer.echo(dump_yaml_stream([data]), nl=False)
    else:
        from ._render import render_status

        render_status(data)
