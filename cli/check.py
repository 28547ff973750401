"""`nrl-k8s check`: load and validate a run config, print a one-page summary."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Annotated

import typer

from nrl_k8s.errors import ConfigError

from ._common import (
    InfraOpt,
    OverridesArg,
    RecipeArg,
    ShowSecretsOpt,
    dump_yaml_stream,
    load,
    manifests_stream,
    print_manifests,
)

OutputOpt = Annotated[Path | None, typer.Option(
    "--output", "-o", help="Write resolved infra, recipe and manifests (format: --format, else the extension: "
                           ".yaml/.yml/.json); with --manifests-only, the manifest stream.")]
FormatOpt = Annotated[str | None, typer.Option(
    "--format", metavar="yaml|json", help="Format of the -o bundle whatever the file's extension; without -o, "
                                          "the bundle on stdout instead of the summary.")]
ManifestsOnlyOpt = Annotated[bool, typer.Option(
    "--manifests-only", help="Only every object `run` would apply, as a YAML stream (for kubectl apply -f -): "
                             "on stdout, or in -o FILE.")]
FORMATS = ("yaml", "json")
SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}


def check(
    ctx: typer.Context,
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    output: OutputOpt = None,
    output_format: FormatOpt = None,
    manifests_only: ManifestsOnlyOpt = False,
    show_secrets: ShowSecretsOpt = False,
) -> None:
    """Validate a recipe/infra pair and summarise what would run (no cluster needed)."""
    from nrl_k8s.flows.plan import default_flow, plan_longlived, plan_run
    from nrl_k8s.ops.summary import bundle, summarize

    from ._console import err, print_warning
    from ._render import render_summary

    fmt = _bundle_format(output, output_format, manifests_only)
    cfg = load(ctx, recipe, overrides, infra)
    if manifests_only:
        _manifests(cfg, output, show_secrets)
        return
    plan = plan_run(cfg)
    if output is None and fmt is not None:  # data only: the bundle on stdout, no summary, no cluster probe
        typer.echo(_bundle_text(bundle(cfg, plan, show_secrets=show_secrets), fmt), nl=False)
        return
    summary = summarize(cfg, plan, show_secrets=show_secrets)
    render_summary(summary)
    for warning in summary["warnings"]:
        print_warning(warning["message"], warning["hint"])
    longlived = plan_longlived(cfg)
    placed = longlived.manifests() if default_flow(cfg.infra) == "raycluster" else plan.manifests()
    _probe_cluster(ctx, cfg, plan.manifests() + longlived.manifests(), placed)  # permissions: either flow's
    if output is not None:
        _write_private(output, _bundle_text(bundle(cfg, plan, show_secrets=show_secrets), fmt))
        err.print(f"wrote {output}", markup=False)


@functools.wraps(check)
def validate(*args, **kwargs) -> None:
    from ._console import err

    err.print("note: `validate` is deprecated: use `nrl-k8s check` (same arguments)", markup=False)
    check(*args, **kwargs)


validate.__doc__ = "Deprecated alias of `check`."


def _bundle_format(output: Path | None, fmt: str | None, manifests_only: bool) -> str | None:
    """The bundle's format: --format, else -o's extension; None without either (the summary only).
    Checked before anything is loaded."""
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected yaml or json",
                          hint="e.g. --format json; without --format, -o takes the format from the file's extension")
    if manifests_only and fmt == "json":
        raise ConfigError("--format json cannot be used with --manifests-only",
                          hint="the manifest stream is YAML (kubectl apply -f -); without --manifests-only, "
                               "--format json gives the whole bundle")
    if output is not None:
        _writable_target(output)
    if output is None or fmt is not None or manifests_only:
        return fmt
    if output.suffix not in SUFFIXES:
        raise ConfigError(f"--output {output}: unknown format {output.suffix!r}",
                          hint="use a .yaml, .yml or .json file, or say the format with --format yaml|json")
    return SUFFIXES[output.suffix]


def _writable_target(output: Path) -> None:
    """``output`` is a regular file or a new name in an existing directory: writing to a FIFO would
    block until something reads it, and a device or a socket is no file to keep."""
    from nrl_k8s.config.safe_yaml import file_kind

    try:
        kind = file_kind(output.stat().st_mode)
    except FileNotFoundError:
        kind = None if output.parent.is_dir() else ""
    except OSError as exc:
        raise ConfigError(
            f"--output {output}: cannot use it ({exc.strerror})", hint="name a file you can write"
        ) from None
    if kind is not None:
        problem = f"is {kind}, not a regular file" if kind else f"{output.parent} is not an existing directory"
        raise ConfigError(f"--output {output}: {problem}", hint="name a regular file in an existing directory")


def _bundle_text(data: dict, fmt: str) -> str:
    return json.dumps(data, indent=2) + "\n" if fmt == "json" else dump_yaml_stream([data])


def _manifests(cfg, output: Path | None, show_secrets: bool) -> None:
    """The stream `kubectl apply -f -` makes the run `run` (no flag) takes of (``plan.kubectl_stream``):
    on stdout, or in ``output``. Refused when it would carry ``<redacted>`` and ``show_secrets`` is off:
    kubectl would apply that text."""
    from nrl_k8s.flows.plan import kubectl_stream
    from nrl_k8s.redact import redact

    from ._console import err

    docs = kubectl_stream(cfg)
    hidden = [f"{doc['kind']} {doc['metadata']['name']}" for doc in docs if not show_secrets and redact(doc) != doc]
    if hidden:
        raise ConfigError(f"--manifests-only: the stream would hold <redacted> in place of the secret values of "
                          f"{', '.join(hidden)}, and kubectl would apply that text",
                          hint="add --show-secrets: kubectl apply -f - needs them in the stream (in clear then: "
                               "pipe it, or write it with -o FILE, 0600); run --dry-run shows the objects redacted")
    if output is None:
        print_manifests(docs, show_secrets=show_secrets)
        return
    _write_private(output, manifests_stream(docs, show_secrets=show_secrets))
    err.print(f"wrote {len(docs)} manifest(s) to {output}", markup=False)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by the owner only (0600), also over an existing file, before any byte is written."""
    from nrl_k8s.config.safe_yaml import file_kind

    try:
        # O_NONBLOCK: a FIFO put there since the check fails to open (or opens at once) instead of
        # blocking; O_TRUNC only once the file is known to be regular
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            kind = file_kind(os.fstat(fd).st_mode)
            if kind is not None:
                raise ConfigError(f"--output {path}: is {kind}, not a regular file",
                                  hint="name a regular file in an existing directory")
            os.ftruncate(fd, 0)
            os.fchmod(fd, 0o600)
            handle.write(text)
    except OSError as exc:
        raise ConfigError(
            f"--output {path}: cannot write it ({exc.strerror})", hint="choose a file you can write"
        ) from None


def _probe_cluster(ctx: typer.Context, cfg, manifests: list[dict], placed: list[dict]) -> None:
    """Namespace, CRDs and RBAC when a kubeconfig is usable; otherwise say the checks were skipped.

    With no cluster configured the checks are skipped. A configured one that cannot be reached
    (refused, no answer, TLS, a credential plugin that fails or hangs) or rejects the credentials
    is a failed row, and any failed row fails the check (exit 1); a warning row (a RayJob field
    only ``--parallel`` needs) does not.
    """
    from rich.markup import escape

    from nrl_k8s.config.kubeconfig import has_cluster_config

    from ._common import global_options, observed
    from ._console import out
    from ._render import render_probes

    if not has_cluster_config():
        out.print("\n[bold]CLUSTER[/]\n  skipped: no kubeconfig and not running in a pod")
        return
    from nrl_k8s.errors import ApiError, CredentialError, ForbiddenError, UnauthorizedError, UnreachableError
    from nrl_k8s.kube.client import Kube, NoClusterError, Tuning
    from nrl_k8s.ops.probe import Probe, probe
    from nrl_k8s.redact import redact_text

    try:
        kube = observed(ctx, Kube.connect(context=global_options(ctx).context, namespace=cfg.infra["namespace"],
                                          tuning=Tuning(retry_budget_s=5)))
        results = probe(kube, cfg.infra, manifests, placed)
    except NoClusterError as error:
        out.print(f"\n[bold]CLUSTER[/]\n  skipped: {escape(redact_text(error.message))}")
        return
    except (UnauthorizedError, ForbiddenError, CredentialError) as error:
        results = [Probe("credentials", False, error.message, error.hint or "")]
    except (ApiError, UnreachableError) as error:
        results = [Probe("cluster", False, error.message, error.hint or "")]
    render_probes(results)
    if not all(r.ok or r.warn for r in results):
        raise typer.Exit(1)
