"""`nrl-k8s sandbox ...`: a local real control plane to run nrl-k8s against (see nrl_k8s_sandbox)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    rich_markup_mode=None,
    help="Run a local Kubernetes control plane (kube-apiserver, the KubeRay operator, kwok GPU nodes, real Ray heads).",
    no_args_is_help=True,
)
fault_app = typer.Typer(
    rich_markup_mode=None, help="Turn faults on or off in the running sandbox.", no_args_is_help=True
)
app.add_typer(fault_app, name="fault")


@app.callback()
def _needs_the_extra() -> None:
    """Every sandbox command first checks that the ``sandbox`` extra is installed (one line if not)."""
    from nrl_k8s_sandbox import require_extra

    require_extra()


def _data(text: str) -> None:
    from ._console import out

    out.print(text, markup=False)


def _say(text: str) -> None:
    from ._console import err

    err.print(text, markup=False)


def _faults(active: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" if v else k for k, v in active.items()) or "none"


def _delay_fault(specs: list[str]) -> str:
    """``--delay KIND=SECONDS`` flags → the fault ``delay=KIND:SECONDS;...``; ConfigError when bad."""
    from nrl_k8s.errors import ConfigError
    from nrl_k8s_sandbox import faults

    entries = []
    for spec in specs:
        kind, sep, seconds = spec.partition("=")
        try:
            faults.delays(f"{kind}:{seconds}" if sep else "")
        except ValueError:
            raise ConfigError(f"--delay {spec}: expected KIND=SECONDS with KIND one of {', '.join(faults.DELAY_KINDS)} "
                              "and SECONDS a number >= 0", hint="e.g. --delay dgd=20 --delay raycluster=15") from None
        entries.append(f"{kind.strip()}:{seconds.strip()}")
    return "delay=" + ";".join(entries)


def _nodes_fault(specs: list[str]) -> str:
    """``--nodes POOL`` flags → the start option ``nodes=POOL;...``; ConfigError naming the bad POOL."""
    from nrl_k8s.errors import ConfigError
    from nrl_k8s_sandbox.controlplane import nodes

    try:
        nodes.parse(";".join(specs))
    except ValueError as err:
        raise ConfigError(f"--nodes {err}", hint=nodes.HINT) from None
    return "nodes=" + ";".join(specs)


def _pool(pool: dict) -> str:
    """One line of ``sandbox status``: a pool's nodes, what each holds, its labels and taints."""
    names = f"{pool['name']}-0" + (f"..{pool['count'] - 1}" if pool["count"] > 1 else "")
    gpus = f"{pool['gpus']} nvidia.com/gpu" + (f" {pool['product']}" if pool["product"] else "") + ", "
    text = f"{names}: {gpus if pool['gpus'] else ''}cpu {pool['cpu']}, memory {pool['memory']}, pods {pool['pods']}"
    if pool["labels"]:
        text += "; labels " + ", ".join(f"{k}={v}" for k, v in pool["labels"].items())
    if pool["taints"]:
        text += "; taints " + ", ".join(
            t["key"] + (f"={t['value']}" if "value" in t else "") + f":{t['effect']}" for t in pool["taints"])
    return text


DirOption = Annotated[
    Path | None, typer.Option("--dir", help="Sandbox directory (default ~/.cache/nrl-k8s/sandbox).")
]


@app.command()
def build(
    kueue: Annotated[
        bool, typer.Option("--kueue", help="Build Kueue too, which only `sandbox up --kueue` runs.")
    ] = False,
) -> None:
    """Build the real control plane's pinned binaries and Dynamo's runtime for DGD pods into the
    user cache, side by side (once per machine; needs Go and PyPI)."""
    from nrl_k8s_sandbox.build import build as build_all

    for line in build_all(_say, kueue=kueue):
        _say(line)


@app.command()
def up(
    dir: DirOption = None,  # noqa: A002 (the flag is --dir)
    fault: Annotated[
        list[str] | None, typer.Option("--fault", help="Start with a fault on: NAME or NAME=VALUE (repeatable).")
    ] = None,
    delay: Annotated[
        list[str] | None,
        typer.Option(
            "--delay",
            metavar="KIND=SECONDS",
            help="Make new objects of KIND (dgd, raycluster, deployment, rayjob) ready only after SECONDS "
            "(repeatable).",
        ),
    ] = None,
    kueue: Annotated[
        str | None,
        typer.Option(
            "--kueue",
            metavar="queued|all[,RESOURCE=QUANTITY...]",
            help="Run Kueue v0.17.0 too: managing jobs that name a queue, or all of them "
            "(manageJobsWithoutQueueName: true), with a ClusterQueue and a LocalQueue 'sandbox' "
            "(default: the sandbox's capacity as quota).",
        ),
    ] = None,
    nodes: Annotated[
        list[str] | None,
        typer.Option(
            "--nodes",
            metavar="POOL[:KEY=VALUE,...]",
            help="A pool of kwok nodes POOL-0.. (repeatable), instead of the default 8 GB300 nodes of 4 GPUs and "
            "2 CPU nodes. KEYs: count, gpus, product, label=K=V, taint=K[=V]:EFFECT, cpu, memory, pods; e.g. "
            "h100:count=2,gpus=8,product=NVIDIA-H100-80GB-HBM3,taint=dedicated=team-a:NoSchedule.",
        ),
    ] = None,
) -> None:
    """Start the sandbox in the background; print `export KUBECONFIG=...` once it is ready."""
    from nrl_k8s_sandbox import process

    faults = list(fault or [])
    if delay:
        faults.append(_delay_fault(delay))
    if kueue is not None:
        faults.append(f"kueue={kueue}")
    if nodes:
        faults.append(_nodes_fault(nodes))
    info = process.up(dir, faults)
    _say(f"sandbox ready: API {info['api_url']} (Kubernetes {info['versions']['kubernetes']}, "
         f"KubeRay {info['versions']['kuberay']})")
    _data(f"export KUBECONFIG={info['kubeconfig']}")


@app.command()
def down(dir: DirOption = None) -> None:  # noqa: A002
    """Stop every process the sandbox started (also after a crash)."""
    from nrl_k8s_sandbox import process

    stopped = process.down(dir)
    if not stopped.lines:
        _say(f"nothing was running in {stopped.dir}")
    for line in stopped.lines:
        _say(f"stopped {line}")


@app.command()
def status(
    dir: DirOption = None,  # noqa: A002
    output: Annotated[str, typer.Option("-o", "--output", help="text or json")] = "text",
) -> None:
    """Whether the sandbox runs, its URLs, pids, active faults, node pools and object counts."""
    from nrl_k8s.errors import ConfigError
    from nrl_k8s_sandbox import process

    if output not in ("text", "json"):
        raise ConfigError(f"--output must be text or json, got {output!r}")
    report = process.status(dir)
    if output == "json":
        _data(json.dumps(report, indent=2))
        return
    _data(f"dir:        {report['dir']}")
    _data(f"running:    {'yes' if report['running'] else 'no'}")
    if "leftover_pids" in report:
        _data(f"leftovers:  {report['leftover_pids']} (run `nrl-k8s sandbox down`)")
    if not report["running"]:
        return
    _data(f"api:        {report['api_url']}")
    _data("versions:   " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()))
    _data(f"kubeconfig: {report['kubeconfig']}")
    _data("pids:       " + ", ".join(f"{k} {v}" for k, v in report["pids"].items()))
    _data(f"faults:     {_faults(report['faults'])}")
    for index, pool in enumerate(report["pools"]):
        _data(f"{'nodes:' if index == 0 else '':<12}{_pool(pool)}")
    _data("objects:    " + ", ".join(f"{k} {v}" for k, v in report["objects"].items()))


@fault_app.command("set")
def fault_set(
    spec: Annotated[str, typer.Argument(metavar="NAME[=VALUE]", help="The fault to turn on.")],
    dir: DirOption = None,  # noqa: A002
) -> None:
    """Turn a fault on in the running sandbox."""
    from nrl_k8s_sandbox import process

    active = process.set_fault(dir, spec)
    _say(f"active faults: {_faults(active)}")


@fault_app.command("clear")
def fault_clear(
    name: Annotated[str, typer.Argument(help="The fault to turn off.")],
    dir: DirOption = None,  # noqa: A002
) -> None:
    """Turn a fault off in the running sandbox."""
    from nrl_k8s_sandbox import process

    active = process.clear_fault(dir, name)
    _say(f"active faults: {_faults(active)}")
