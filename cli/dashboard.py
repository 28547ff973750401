"""`nrl-k8s dashboard`: a local port relaying to a role's Ray dashboard or a DGD's OpenAI frontend."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ._common import InfraOpt, LatestRecipeArg, OverridesArg, RunOpt, load_or_latest

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

RoleOpt = Annotated[str | None, typer.Option(
    "--role", "-r", help="kuberay role whose Ray dashboard to relay [default: training].")]
TargetOpt = Annotated[str | None, typer.Option(
    "--target", "-t", help="dynamo.KEY: relay to that DGD's OpenAI frontend instead.")]
PortOpt = Annotated[int | None, typer.Option(
    "--port", "-p", min=0, max=65535,
    help="Local port on 127.0.0.1 [default: the Service's own (8265 dashboard, 8000 frontend) when free, "
         "else any free one; 0: any free one].")]
OpenOpt = Annotated[bool, typer.Option("--open/--no-open", help="Open the URL in a web browser.")]


def dashboard(
    ctx: typer.Context,
    recipe: LatestRecipeArg = None,
    overrides: OverridesArg = None,
    infra: InfraOpt = None,
    role: RoleOpt = None,
    target: TargetOpt = None,
    port: PortOpt = None,
    open_browser: OpenOpt = False,
    run: RunOpt = None,
) -> None:
    """Relay 127.0.0.1 to a Ray dashboard or a DGD frontend through the API server (no kubectl); Ctrl-C stops.

    The printed URL carries this session's token; scripts send it as 'Authorization: token TOKEN'."""
    from nrl_k8s.errors import ConfigError
    from nrl_k8s.ops.targets import available
    from nrl_k8s.relay import server as relay

    if role is not None and target is not None:
        raise ConfigError(
            "--role and --target cannot be used together",
            hint="--role ROLE relays to that role's Ray dashboard, --target dynamo.KEY to a DGD's frontend",
        )
    infra_cfg, kube, _ = load_or_latest(ctx, recipe, overrides, infra, run)
    if target is None:
        upstream = relay.ray_dashboard(kube, infra_cfg, role or "training")
    else:
        frontends = [str(t) for t in available(infra_cfg) if t.kind == "dynamo"]
        if target not in frontends:
            raise ConfigError(f"unknown --target {target!r}: dashboard relays to a DGD frontend (dynamo.KEY)",
                              hint=f"valid targets: {', '.join(frontends) or '(no infra.dynamo declared)'}; "
                                   f"--role ROLE relays to a Ray dashboard")
        upstream = relay.frontend(kube, infra_cfg, target.partition(".")[2])
    serve(kube, upstream, port, open_browser)


def serve(kube: Kube, upstream, port: int | None, open_browser: bool) -> None:
    """Relay 127.0.0.1:``port`` to ``upstream`` until Ctrl-C: the URL with the session's token on stdout
    (the only place the token is shown), what it relays to and how scripts pass the token on stderr."""
    from nrl_k8s.relay import server as relay

    from ._console import err

    server = relay.Relay(kube.connection, upstream, port)
    typer.echo(server.token_url)  # the one line on stdout, for scripts
    if port is None and server.port != upstream.port:
        err.print(f"note: 127.0.0.1:{upstream.port} is in use; listening on {server.port} instead", markup=False)
    err.print(f"relaying to {upstream.what} (namespace {upstream.namespace}) through the API server at "
              f"{kube.connection.host}; Ctrl-C stops", markup=False)
    err.print(f"open the URL above (its token logs the browser in); scripts send the token as 'Authorization: token "
              f"TOKEN', e.g. ray job list --address {server.url.rstrip('/')} "
              f"--headers '{{\"Authorization\": \"token TOKEN\"}}'", markup=False)
    if open_browser:
        import webbrowser

        webbrowser.open(server.open_url())  # its token logs in once: the browser's command line is public
    server.run()
    err.print("stopped", markup=False)
