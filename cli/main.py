"""`nrl-k8s` entry point: builds the Typer app and maps errors to exit codes once."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from typer._click import exceptions as click  # typer vendors click: its UsageError is this one
from typer.core import TyperGroup

from nrl_k8s import __version__
from nrl_k8s.errors import NrlK8sError

from . import check, cluster, dashboard, dev, gc, job, run, sandbox, status
from ._common import CONTEXT, GlobalOptions


class _BadUsage(click.UsageError):
    """A usage error (unknown option, bad value) as one ``error:`` line and one ``hint:`` line, exit 2."""

    def show(self, file=None) -> None:
        from nrl_k8s.errors import ConfigError

        from ._console import print_error

        command = self.ctx.command_path if self.ctx is not None else "nrl-k8s"
        print_error(ConfigError(self.format_message(), hint=f"see `{command} -h`"))  # redacted, one line each


def _one_line(error: click.UsageError) -> click.UsageError:
    if isinstance(error, (_BadUsage, click.NoArgsIsHelpError)):  # the latter shows the help, as asked
        return error
    return _BadUsage(error.format_message(), error.ctx)


class _Group(TyperGroup):
    """Maps every expected error to one clear message and its exit code (never a traceback)."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as err:
            raise _one_line(err) from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except NrlK8sError as err:
            from ._console import print_error

            print_error(err)
            raise typer.Exit(err.exit_code) from None
        except click.UsageError as err:
            raise _one_line(err) from None


app = typer.Typer(
    cls=_Group,
    name="nrl-k8s",
    context_settings=CONTEXT,
    rich_markup_mode=None,  # plain click help: `--help` must not pay for importing rich
    help="Launch NeMo-RL runs on Kubernetes: Dynamo inference first, then KubeRay training.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command("check")(check.check)
app.command("validate", hidden=True)(check.validate)
app.command("run")(run.run)
app.command("status")(status.status)
app.command("logs")(job.logs)
app.command("gc")(gc.gc)
app.command("dashboard")(dashboard.dashboard)
app.add_typer(cluster.app, name="cluster")
app.add_typer(job.app, name="job")
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(dev.app, name="dev")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nrl-k8s {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    context: Annotated[str | None, typer.Option("--context", help="kubeconfig context to use.")] = None,
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", help="Override infra.namespace.")] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Print each API request (method, path, status, milliseconds) on stderr.")] = False,
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Launch NeMo-RL runs on Kubernetes: Dynamo inference first, then KubeRay training."""
    ctx.obj = GlobalOptions(context=context, namespace=namespace, verbose=verbose)


_GLOBAL_WITH_VALUE = ("--context", "--namespace", "-n")


def _invoked(args: list[str]) -> str | None:
    """The command name in ``args`` (after the global options), or None."""
    values = iter(args)
    for arg in values:
        if arg in _GLOBAL_WITH_VALUE:
            next(values, None)
        elif not arg.startswith("-"):
            return arg
    return None


def main() -> None:
    # Typer turns every registered command into a click command before parsing (~15 ms for all of
    # them): build only the one invoked; `--help`, no command or an unknown one get the whole app.
    name = _invoked(sys.argv[1:])
    commands = [c for c in app.registered_commands if c.name == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if commands or groups:
        app.registered_commands, app.registered_groups = commands, groups
    app()
