"""`nrl-k8s status`: roles, the RayJob and the DYNAMO section for a run config (`-w`: kept up to date)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ._common import InfraOpt, LatestRecipeArg, Output, OutputOpt, OverridesArg, RunOpt, load_or_latest, print_data

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

WatchOpt = Annotated[bool, typer.Option("--watch", "-w", help="Show it again every --interval seconds until Ctrl-C "
                                        "(the table only).")]
IntervalOpt = Annotated[float | None, typer.Option(
    "--interval", min=0.1, help="Seconds between two views with --watch [default: 2].")]


def status(
    ctx: typer.Context,
    recipe: LatestRecipeArg = None,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    output: OutputOpt = Output.table,
    watch: WatchOpt = False,
    interval: IntervalOpt = None,
    run: RunOpt = None,
) -> None:
    """Show what is running for this run config."""
    from nrl_k8s.errors import ConfigError

    if watch and output is not Output.table:
        raise ConfigError(f"--watch shows a table; it cannot be used with -o {output.value}",
                          hint=f"drop --watch, or drop -o {output.value} to watch the table")
    if interval is not None and not watch:
        raise ConfigError("--interval is the refresh of --watch", hint="add --watch, or drop --interval")
    infra_cfg, kube, record = load_or_latest(ctx, recipe, overrides, infra, run)
    if watch:
        _watch(lambda: _collect(kube, infra_cfg, record), interval or 2.0)
        return
    data = _collect(kube, infra_cfg, record)
    from ._render import render_status

    print_data(data, output, lambda: render_status(data))


def _collect(kube: Kube, infra_cfg: dict, record: dict | None) -> dict:
    from nrl_k8s.ops.status import collect
    from nrl_k8s.redact import redact

    data = redact(collect(kube, infra_cfg, record))  # job messages can echo driver output
    if record is not None:
        data["run"] = {"run_id": record["run_id"], "job_id": record["job_id"], "created": record["created"]}
    return data


def _watch(collect, interval: float) -> None:
    """Render ``collect()`` every ``interval`` seconds until Ctrl-C (exit 0): in a terminal in place
    (rich ``Live``), through a pipe one view after another, each under a line with its time."""
    import threading
    import time

    from rich.live import Live
    from rich.text import Text

    from ._console import out
    from ._render import render_status

    def view() -> str:
        data = collect()
        with out.capture() as captured:
            out.print(f"status at {time.strftime('%H:%M:%S')} (every {interval:g} s; Ctrl-C stops)", markup=False)
            render_status(data)
        return captured.get()

    stop = threading.Event()  # never set: Ctrl-C ends the wait
    try:
        if out.is_terminal:
            with Live(Text.from_ansi(view()), console=out, auto_refresh=False) as live:
                while not stop.wait(interval):
                    live.update(Text.from_ansi(view()), refresh=True)
        else:
            while True:
                out.print(view(), end="", markup=False, highlight=False)
                out.file.flush()
                stop.wait(interval)
    except KeyboardInterrupt:
        pass
