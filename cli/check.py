"""`nrl-k8s check`: load and validate a run config, print a one-page summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from nrl_k8s.errors import ConfigError

from ._common import InfraOpt, OverridesArg, RecipeArg, ShowSecretsOpt, dump_yaml_stream, load

OutputOpt = Annotated[
    Optional[Path], typer.Option("--output", "-o", help="Write resolved infra, recipe and manifests (.yaml/.yml/.json).")
]


def check(
    ctx: typer.Context,
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    output: OutputOpt = None,
    show_secrets: ShowSecretsOpt = False,
) -> None:
    """Validate a recipe/infra pair and summarise what would run (no cluster needed)."""
    from nrl_k8s.plan import plan_run
    from nrl_k8s.summary import bundle, summarize

    from ._console import err
    from ._render import render_summary

    if output is not None and output.suffix not in (".yaml", ".yml", ".json"):
        raise ConfigError(f"--output {output}: unknown format {output.suffix!r}", hint="use a .yaml, .yml or .json file")
    cfg = load(ctx, recipe, overrides, infra)
    plan = plan_run(cfg)
    render_summary(summarize(cfg, plan, show_secrets=show_secrets))
    if output is not None:
        data = bundle(cfg, plan, show_secrets=show_secrets)
        text = json.dumps(data, indent=2) + "\n" if output.suffix == ".json" else dump_yaml_stream([data])
        output.write_text(text)
        err.print(f"wrote {output}", markup=False)
