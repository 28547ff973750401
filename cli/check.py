"""`nrl-k8s check`: load and validate a run config, print a one-page summary."""

from __future__ import annotations

import json
import os
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
    from nrl_k8s.plan import plan_longlived, plan_run
    from nrl_k8s.summary import bundle, summarize

    from ._console import err, print_warning
    from ._render import render_summary

    if output is not None and (output.is_dir() or not output.parent.is_dir()):
        problem = "is a directory" if output.is_dir() else f"{output.parent} is not an existing directory"
        raise ConfigError(f"--output {output}: {problem}", hint="name a file in an existing directory")
    if output is not None and output.suffix not in (".yaml", ".yml", ".json"):
        raise ConfigError(f"--output {output}: unknown format {output.suffix!r}", hint="use a .yaml, .yml or .json file")
    cfg = load(ctx, recipe, overrides, infra)
    plan = plan_run(cfg)
    summary = summarize(cfg, plan, show_secrets=show_secrets)
    render_summary(summary)
    for warning in summary["warnings"]:
        print_warning(warning["message"], warning["hint"])
    _probe_cluster(ctx, cfg, plan.manifests() + plan_longlived(cfg).manifests())  # what either flow applies
    if output is not None:
        data = bundle(cfg, plan, show_secrets=show_secrets)
        text = json.dumps(data, indent=2) + "\n" if output.suffix == ".json" else dump_yaml_stream([data])
        _write_private(output, text)
        err.print(f"wrote {output}", markup=False)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by the owner only (0600), also over an existing file, before any byte is written."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(fd, 0o600)
            handle.write(text)
    except OSError as exc:
        raise ConfigError(f"--output {path}: cannot write it ({exc.strerror})", hint="choose a file you can write") from None


def _probe_cluster(ctx: typer.Context, cfg, manifests: list[dict]) -> None:
    """Namespace, CRDs and RBAC when a kubeconfig is usable; otherwise say the checks were skipped.

    Credentials the API server rejects fail the check (exit 1), and so does a failed row; a
    warning row (a RayJob field only ``--parallel`` needs) does not. An unreachable server skips it.
    """
    from nrl_k8s.config.kubeconfig import has_cluster_config

    from rich.markup import escape

    from ._common import global_options
    from ._console import out
    from ._render import render_probes

    if not has_cluster_config():
        out.print("\n[bold]CLUSTER[/]\n  skipped: no kubeconfig and not running in a pod")
        return
    from nrl_k8s.errors import ApiError, ForbiddenError, ServerError, UnauthorizedError
    from nrl_k8s.kube import Kube, NoClusterError, Tuning
    from nrl_k8s.probe import Probe, probe
    from nrl_k8s.redact import redact_text

    try:
        kube = Kube.connect(context=global_options(ctx).context, namespace=cfg.infra["namespace"],
                            tuning=Tuning(retry_budget_s=5, request_timeout_s=5))
        results = probe(kube, cfg.infra, manifests)
    except (NoClusterError, ServerError) as error:
        out.print(f"\n[bold]CLUSTER[/]\n  skipped: {escape(redact_text(error.message))}")
        return
    except (UnauthorizedError, ForbiddenError) as error:
        results = [Probe("credentials", False, error.message, error.hint or "")]
    except ApiError as error:
        results = [Probe("cluster", False, error.message, error.hint or "")]
    render_probes(results)
    if not all(r.ok or r.warn for r in results):
        raise typer.Exit(1)
