"""Options shared by every command: global flags and the run-config arguments."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube


@dataclass(frozen=True)
class GlobalOptions:
    context: str | None = None
    namespace: str | None = None
    verbose: bool = False


#: Every command and sub-app takes -h as well as --help.
CONTEXT = {"help_option_names": ["-h", "--help"]}


class Output(StrEnum):
    """What a data command prints on stdout: a table for people, JSON or YAML for scripts."""

    table = "table"
    json = "json"
    yaml = "yaml"


OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")]


def print_data(data, output: Output, table) -> None:
    """``data`` as JSON or YAML on stdout, else ``table()`` renders it."""
    if output is Output.json:
        import json

        typer.echo(json.dumps(data, indent=2, default=str))
    elif output is Output.yaml:
        typer.echo(dump_yaml_stream([data]), nl=False)
    else:
        table()


def global_options(ctx: typer.Context) -> GlobalOptions:
    return ctx.find_root().obj or GlobalOptions()


RecipeArg = Annotated[Path, typer.Argument(help="Recipe YAML (NeMo-RL config), optionally with an `infra:` block.")]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(help="Hydra-style overrides: a.b=v, +a.b=v, ++a.b=v, ~a.b; `infra.` prefix targets the infra."),
]
LatestRecipeArg = Annotated[Path | None, typer.Argument(
    help="Recipe YAML (NeMo-RL config); omitted: the latest run recorded by `run`.")]
InfraOpt = Annotated[Path | None, typer.Option("--infra", "-i", help="Infra YAML (omit when the recipe has `infra:`).")]
ShowSecretsOpt = Annotated[bool, typer.Option("--show-secrets", help="Print env values that look like secrets.")]
PlaceAnywayOpt = Annotated[bool, typer.Option(
    "--place-anyway", help="Apply even when a pod group never fits the cluster (`check` predicts it; refused "
                           "without it, before anything is applied).")]


def load(ctx: typer.Context, recipe: Path, overrides: list[str] | None, infra: Path | None):
    """Load the run config (`--namespace` is the highest-precedence infra override) and check
    that every declared object renders to what Kubernetes accepts."""
    from nrl_k8s.config import load_config
    from nrl_k8s.ops.targets import check_declared

    opts = global_options(ctx)
    tokens = list(overrides or [])
    if opts.namespace:
        tokens.append(f"++infra.namespace={opts.namespace}")
    cfg = load_config(recipe, tokens, infra, context=opts.context)
    check_declared(cfg)
    return cfg


DashboardUrlOpt = Annotated[
    str | None, typer.Option("--dashboard-url", help="Reach the Ray dashboard here instead of the API-server proxy.")
]


def connect(ctx: typer.Context, namespace: str | None = None):
    """A `Kube` for the selected context; the run config's namespace unless --namespace was given."""
    from nrl_k8s.kube.client import Kube

    opts = global_options(ctx)
    return observed(ctx, Kube.connect(context=opts.context, namespace=opts.namespace or namespace))


def observed(ctx: typer.Context, kube: Kube):
    """``kube``, printing each API request (method, path, status, milliseconds) on stderr under --verbose."""
    if global_options(ctx).verbose:
        from ._console import print_request

        kube.observer = print_request
    return kube


RunOpt = Annotated[str | None, typer.Option(
    "--run", metavar="RUN_ID", help="The run recorded by `run` under this id [default: the latest] (no RECIPE).")]


def load_or_latest(ctx: typer.Context, recipe: Path | None, overrides: list[str] | None, infra: Path | None,
                   run: str | None = None):
    """(infra, Kube, run record or None): the run config when given, else run ``run``'s record (default: the latest)."""
    from nrl_k8s.errors import ConfigError

    if recipe is not None:
        if run is not None:
            raise ConfigError("--run names a recorded run: it cannot be used with RECIPE",
                              hint="pass either the run config or --run RUN_ID")
        cfg = load(ctx, recipe, overrides, infra)
        return cfg.infra, connect(ctx, cfg.infra["namespace"]), None
    from nrl_k8s import redact
    from nrl_k8s.flows import records as runs
    from nrl_k8s.kube.client import Kube

    if overrides or infra:
        raise ConfigError("overrides and --infra need a RECIPE", hint="pass the recipe first")
    if run is not None:
        from nrl_k8s.config.recipe import checked_run_id

        checked_run_id(run, "--run")  # it names a file
    record = runs.load(run)
    redact.remember_digests(record.get("secrets"))  # its config's secret values, hidden in what is printed
    opts = global_options(ctx)
    kube = Kube.connect(context=opts.context or record.get("context"), namespace=opts.namespace or record["namespace"])
    return record["infra"], observed(ctx, kube), record


def dump_yaml_stream(docs: list[dict]) -> str:
    """YAML documents with multi-line strings (entrypoints) as readable literal blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def represent_str(dumper, value: str):
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, represent_str)
    return yaml.dump_all(docs, Dumper=Dumper, sort_keys=False, explicit_start=True, width=120)


def manifests_stream(docs: list[dict], *, show_secrets: bool) -> str:
    """The YAML stream of ``docs``, secret values redacted unless asked (a note on stderr says so)."""
    from nrl_k8s.redact import redact

    from ._console import err

    shown = docs if show_secrets else redact(docs)
    if shown != docs:
        err.print("note: secret values are redacted; pass --show-secrets to print them", markup=False)
    return dump_yaml_stream(shown)


def print_manifests(docs: list[dict], *, show_secrets: bool) -> None:
    """A dry run: the YAML stream on stdout, secrets redacted unless asked."""
    from ._console import out

    out.print(manifests_stream(docs, show_secrets=show_secrets), end="", markup=False, highlight=False)
