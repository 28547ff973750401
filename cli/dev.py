"""`nrl-k8s dev connect|stop|setup-secrets`: your dev pod, its RBAC and your `<user>-secrets` Secret."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import CONTEXT, global_options, observed

app = typer.Typer(
    rich_markup_mode=None,
    context_settings=CONTEXT,
    help="Your dev pod (with its ServiceAccount, Role and RoleBinding) and your <user>-secrets Secret, in a namespace.",
)

NamespaceOpt = Annotated[str | None, typer.Option(
    "--namespace", "-n", help="Namespace (default: the infra's, else the kube context's).")]
DevInfraOpt = Annotated[Path | None, typer.Option(
    "--infra", "-i", help="An infra file (or a recipe with an `infra:` block): its namespace, and for connect its "
    "image, imagePullSecrets and storage.")]


def _target(ctx: typer.Context, namespace: str | None, infra_path: Path | None):
    """(loaded infra or None, Kube, Names) for the user in the chosen namespace."""
    import os

    from nrl_k8s.config.interpolate import user_name
    from nrl_k8s.errors import ConfigError
    from nrl_k8s.kube.client import Kube
    from nrl_k8s.ops import dev

    opts = global_options(ctx)
    if namespace and opts.namespace and namespace != opts.namespace:
        raise ConfigError(f"two namespaces given: -n {opts.namespace} before the command and -n {namespace} after it",
                          hint="give -n once")
    user = user_name(os.environ)
    cfg = _load_infra(infra_path, opts.context) if infra_path is not None else None
    chosen = namespace or opts.namespace or (cfg.infra["namespace"] if cfg is not None else None)
    if chosen is not None:
        dev.names_for(user, chosen)  # bad input is refused before connecting
    kube = observed(ctx, Kube.connect(context=opts.context, namespace=chosen))
    return cfg, kube, dev.names_for(user, kube.namespace)


def _load_infra(path: Path, context: str | None):
    """An infra file, or a recipe with its `infra:` block (a file whose body sits under `infra:` is
    either): loaded with the user defaults, interpolated and validated, like `run` loads it."""
    from nrl_k8s.config import load_config
    from nrl_k8s.config.files import file_layers

    bundled = any("infra" in data for _, data in file_layers(path))
    return load_config(path, context=context) if bundled else load_config(path, infra=path, context=context)


@app.command("setup-secrets", context_settings={"allow_extra_args": True})  # extra: refused below, unechoed
def setup_secrets(
    ctx: typer.Context,
    from_env: Annotated[list[str] | None, typer.Option(
        "--from-env", metavar="NAME", help="Store $NAME under key NAME (repeatable).")] = None,
    from_file: Annotated[list[str] | None, typer.Option(
        "--from-file", metavar="KEY=PATH", help="Store the file's text under KEY, one final newline dropped; "
        "KEY=/dev/stdin reads a pipe (repeatable).")] = None,
    ssh_key: Annotated[str | None, typer.Option(
        "--ssh-key", metavar="PATH", help="Store a private key as SSH_KEY_NAME/SSH_KEY_CONTENT; the dev pod "
        "installs it in ~/.ssh.")] = None,
    namespace: NamespaceOpt = None,
    infra: DevInfraOpt = None,
) -> None:
    """Create or update Secret <user>-secrets (read by DGDs through `envFromSecret: ${user:}-secrets` and by
    the dev pod through envFrom). Values come from environment variables and files, never from the command
    line (shell history, `ps`); only key names are printed. Keys given replace the Secret's; others are kept."""
    import os

    from nrl_k8s.errors import ConfigError
    from nrl_k8s.ops import dev

    if ctx.args:  # upstream's NAME=VALUE arguments: refused without echoing a value
        keys = [arg.partition("=")[0] for arg in ctx.args if "=" in arg]
        raise ConfigError(f"dev setup-secrets takes no arguments, got {len(ctx.args)}"
                          + (f" (values for {', '.join(keys)})" if keys else ""),
                          hint="values on a command line stay in shell history and show in `ps`: export NAME and pass "
                               "--from-env NAME, or pass --from-file NAME=PATH")
    values = dev.secret_values(from_env or [], from_file or [], ssh_key, os.environ)
    _, kube, names = _target(ctx, namespace, infra)
    with kube:
        stored = dev.setup_secrets(kube, names, values)
    typer.echo(f"{stored.action} Secret {names.secret} in namespace {names.namespace}: set {', '.join(stored.keys)}"
               f" (holds {', '.join(stored.all_keys)})")


@app.command("connect")
def connect(
    ctx: typer.Context,
    command: Annotated[list[str] | None, typer.Argument(
        metavar="[-- COMMAND...]", help="Run this in the dev pod instead of a shell; its exit code is ours.")] = None,
    image: Annotated[str | None, typer.Option(
        "--image", help="Image of a new dev pod (default: the infra's `image`).")] = None,
    namespace: NamespaceOpt = None,
    infra: DevInfraOpt = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=1, metavar="SECONDS", help="How long to wait for the dev pod to run.")] = 600.0,
) -> None:
    """Create (if absent) ServiceAccount, Role and RoleBinding <user>-dev and pod <user>-dev-pod (no GPU,
    envFrom <user>-secrets), wait until it runs, then `kubectl exec` a shell, or COMMAND, in it. The Role
    grants what nrl-k8s itself uses in the namespace, so nrl-k8s works inside the pod."""
    import os
    import shlex
    import shutil
    import sys

    from nrl_k8s.errors import NrlK8sError
    from nrl_k8s.ops import dev

    from ._console import err
    from ._progress import Progress

    dev.check_image(image)
    cfg, kube, names = _target(ctx, namespace, infra)
    if cfg is not None:
        with cfg.located():
            plan = dev.render_for_infra(names, image, cfg.infra)
    else:
        plan = dev.render(names, image)
    with kube, Progress() as progress:
        dev.connect(kube, plan, progress, timeout_s=timeout)
    kubectl = shutil.which("kubectl")
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    argv = dev.exec_argv(kubectl or "kubectl", names, command, tty=tty, context=global_options(ctx).context)
    if kubectl is None:
        shown = shlex.join(argv)
        if command:
            raise NrlK8sError(f"the dev pod {names.pod} runs, but kubectl is not on PATH to run the command in it",
                              hint=f"install kubectl, or run: {shown}")
        err.print(f"the dev pod {names.pod} runs; kubectl is not on PATH: install it, then run", markup=False)
        typer.echo(shown)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(kubectl, argv)


@app.command("stop")
def stop(
    ctx: typer.Context,
    everything: Annotated[bool, typer.Option(
        "--all", help="Also delete the RoleBinding, Role and ServiceAccount (the Secret is always kept).")] = False,
    namespace: NamespaceOpt = None,
    infra: DevInfraOpt = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=1, metavar="SECONDS", help="How long to wait for the dev pod to be gone.")] = 300.0,
) -> None:
    """Delete your dev pod (only one nrl-k8s created for you); its RBAC is kept for the next connect unless --all."""
    from nrl_k8s.ops import dev

    _, kube, names = _target(ctx, namespace, infra)
    with kube:
        stopped = dev.stop(kube, names, everything=everything, timeout_s=timeout)
    if not stopped.deleted:
        typer.echo(f"no dev pod {names.pod} in namespace {names.namespace}")
    for what in stopped.deleted:
        typer.echo(f"deleted: {what}")
    for what in stopped.kept:
        why = (
            "`nrl-k8s dev setup-secrets` data"
            if what.startswith("Secret ")
            else "reused by the next connect; --all deletes it"
        )
        typer.echo(f"kept: {what} ({why})")
