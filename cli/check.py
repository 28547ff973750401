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
    _probe_cluster(ctx, cfg)
    if output is not None:
        data = bundle(cfg, plan, show_secrets=show_secrets)
        text = json.dumps(data, indent=2) + "\n" if output.suffix == ".json" else dump_yaml_stream([data])
        output.write_text(text)
        err.print(f"wrote {output}", markup=False)


def _probe_cluster(ctx: typer.Context, cfg) -> None:
    """Namespace, CRDs and RBAC when a kubeconfig is usable; otherwise say the checks were skipped.

    Credentials the API server rejects fail the check (exit 1); an unreachable server skips it.
    """
    from nrl_k8s.config.kubeconfig import has_cluster_config

    from ._common import global_options
    from rich.markup import escape

    from ._console import out
    from ._render import render_probes

    if not has_cluster_config():
        out.print("\n[bold]CLUSTER[/]\n  skipped: no kubeconfig and not running in a pod")
        return
    from nrl_k8s.errors import ApiError, ForbiddenError, ServerError, UnauthorizedError
    from nrl_k8s.kube import Kube, NoClusterError, Tuning
    from nrl_k8s.probe import Probe, probe

    try:
        kube = Kube.connect(context=global_options(ctx).context, namespace=cfg.infra["namespace"],
                            tuning=Tuning(retry_budget_s=5, request_timeout_s=5))
        results = probe(kube, cfg.infra)
    except (NoClusterError, ServerError) as error:
        out.print(f"\n[bold]CLUSTER[/]\n  skipped: {escape(error.message)}")
        return
    except (UnauthorizedError, ForbiddenError) as error:
        results = [Probe("credentials", False, error.message, error.hint or "")]
    except ApiError as error:
        results = [Probe("cluster", False, error.message, error.hint or "")]
    render_probes(results)
    if not all(r.ok for r in results):
        raise typer.Exit(1)
