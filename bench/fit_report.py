"""Benchmark: what the fit report costs `check` on a 500-node cluster.

    .venv/bin/python bench/fit_report.py [--nodes N] [--pods-per-node P] [--runs R]

Starts a sandbox of its own (``sandbox up --nodes big:count=N,gpus=8``, kwok nodes) in a temporary
folder and always stops it; fills it with another tenant's pods (P per node, 1 GPU each, bound by
the real scheduler and held Running by kwok), then times, R times each, in this process against
the sandbox's API server:

- ``check`` without the fit: ``ops.probe.probe`` with no objects to place (namespace, CRDs,
  leftovers, every RBAC permission of the run);
- the fit report alone: ``ops.fit.report`` for the example run's objects (nodes, every namespace's
  pods, the verdicts);

and prints the medians and the ratio of `check` with the fit to `check` without it (the baseline,
measured in the same run). Also the installed CLI's whole ``check`` once, for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods-per-node", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nrl-fit-bench-") as tmp:
        box = Path(tmp) / "sandbox"
        started = time.monotonic()
        up = subprocess.run([NRL_K8S, "sandbox", "up", "--dir", str(box), "--nodes",
                             f"big:count={args.nodes},gpus=8"], capture_output=True, text=True)
        if up.returncode != 0:
            raise SystemExit(up.stderr)
        print(f"sandbox up with {args.nodes} nodes: {time.monotonic() - started:.1f} s")
        try:
            os.environ["KUBECONFIG"] = str(box / "kubeconfig")
            measure(args)
        finally:
            subprocess.run([NRL_K8S, "sandbox", "down", "--dir", str(box)], capture_output=True)


def measure(args) -> None:
    from nrl_k8s.config import load_config
    from nrl_k8s.flows.plan import plan_run
    from nrl_k8s.kinds import pod
    from nrl_k8s.kube.client import Kube
    from nrl_k8s.ops import fit
    from nrl_k8s.ops.probe import probe

    kube = Kube.connect(namespace="default")
    started = time.monotonic()
    fill(kube, args.nodes * args.pods_per_node)
    bound = lambda: sum(1 for p in kube.list(pod.KIND, "tenant") if (p.get("spec") or {}).get("nodeName"))  # noqa: E731
    while bound() < args.nodes * args.pods_per_node:
        time.sleep(1)  # a bench, not a test: the scheduler binds them at its own pace
    print(f"{args.nodes * args.pods_per_node} tenant pods bound: {time.monotonic() - started:.1f} s")
    cfg = load_config(PAIR[0], infra=PAIR[2])
    manifests = plan_run(cfg).manifests()
    without, report = [], []
    for _ in range(args.runs):
        t0 = time.monotonic()
        probe(kube, cfg.infra, manifests, [])
        t1 = time.monotonic()
        verdicts = fit.report(kube, "default", manifests)
        t2 = time.monotonic()
        without.append(t1 - t0)
        report.append(t2 - t1)
    base, extra = statistics.median(without), statistics.median(report)
    print("verdicts: " + "; ".join(f"{v.group}: {v}" for v in verdicts))
    print(f"check without the fit (baseline): {base:.3f} s median of {args.runs}")
    print(f"the fit report alone:             {extra:.3f} s")
    print(f"check with the fit / without:     {(base + extra) / base:.2f}")
    t0 = time.monotonic()
    subprocess.run([NRL_K8S, "check", *PAIR], capture_output=True, text=True)
    print(f"the CLI's whole check, once:      {time.monotonic() - t0:.2f} s")


def fill(kube, count: int) -> None:
    from nrl_k8s.kinds import core, pod

    kube.create(core.NAMESPACE, {"metadata": {"name": "tenant"}})
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda i: kube.create(pod.KIND, {"metadata": {"name": f"t-{i}", "namespace": "tenant"},
                                                       "spec": spec}), range(count)))


if __name__ == "__main__":
    main()
