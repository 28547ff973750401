"""`nrl-k8s` entry point: builds the Typer app and maps errors to exit codes once."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from nrl_k8s import __version__
from nrl_k8s.errors import NrlK8sError

from . import sandbox

app = typer.Typer(
    name="nrl-k8s",
    help="Launch NeMo-RL runs on Kubernetes: Dynamo inference first, then KubeRay training.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(sandbox.app, name="sandbox")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nrl-k8s {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Launch NeMo-RL runs on Kubernetes: Dynamo inference first, then KubeRay training."""


def main() -> None:
    try:
        app()
    except NrlK8sError as err:
        from ._console import print_error

        print_error(err)
        sys.exit(err.exit_code)
