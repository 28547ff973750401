"""Benchmark: orchestration overhead of `run --rayjob --wait` on the sandbox, and API requests per run.

    .venv/bin/python bench/run_overhead.py [--runs N]

Starts a sandbox, then per run:
- end to end: the installed `nrl-k8s run --rayjob --wait` on examples/sandbox (a subprocess, as a
  user runs it), its wall time and the number of API requests it made (the sandbox counts them);
- overhead: the same orchestration in-process, with wall time minus the time spent blocked on the
  cluster (every `Kube.wait` and frontend probe sleep: the sandbox's configured operator delays,
  KubeRay's submission/status polling and the job's own run time). What is left is nrl-k8s's own
  work: config loading, rendering, API round trips, owner back-patch, dashboard checks.
Target: overhead <= 1 s. Prints medians and ratios to the target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
TARGET_S = 1.0


def _admin(sandbox: Path, method: str, path: str):
    from nrl_k8s_sandbox import process

    return process._admin(process.Paths.of(sandbox), method, path)


def _requests(sandbox: Path) -> int:
    return sum(_admin(sandbox, "GET", "/sandbox/stats").values())


def end_to_end(sandbox: Path, env: dict) -> tuple[float, int]:
    _admin(sandbox, "DELETE", "/sandbox/stats")
    name = f"bench-{uuid.uuid4().hex[:6]}"
    start = time.perf_counter()
    done = subprocess.run([NRL_K8S, "run", "--rayjob", "--wait", *PAIR, f"infra.kuberay.training.name={name}",
                           f"infra.dynamo.serving.name={name}-dgd"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"run --rayjob --wait failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - start, _requests(sandbox)


def overhead(kubeconfig: Path) -> tuple[float, float]:
    """(wall, wall minus time blocked on the cluster) of one in-process run."""
    from nrl_k8s.config import load_config
    from nrl_k8s.events import discard
    from nrl_k8s.flows import serving
    from nrl_k8s.flows.lifecycle import LiveOptions
    from nrl_k8s.flows.plan import plan_run
    from nrl_k8s.flows.rayjob import run_rayjob
    from nrl_k8s.kube.client import Kube

    blocked = 0.0

    def timed(fn):
        def wrapper(*args, **kwargs):
            nonlocal blocked
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                blocked += time.perf_counter() - start
        return wrapper

    name = f"bench-{uuid.uuid4().hex[:6]}"
    start = time.perf_counter()
    cfg = load_config(
        PAIR[0], [f"infra.kuberay.training.name={name}", f"infra.dynamo.serving.name={name}-dgd"], PAIR[2]
    )
    kube = Kube.connect(kubeconfig=str(kubeconfig))
    kube.wait = timed(kube.wait)
    real_sleep = serving.time.sleep
    serving.time.sleep = timed(real_sleep)
    try:
        result = run_rayjob(kube, plan_run(cfg), LiveOptions(wait=True), discard)
    finally:
        serving.time.sleep = real_sleep
    wall = time.perf_counter() - start
    assert result.succeeded, result
    return wall, wall - blocked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nrlk8s-bench-") as tmp:
        sandbox = Path(tmp)
        subprocess.run([NRL_K8S, "sandbox", "up", "--dir", str(sandbox)], check=True, capture_output=True)
        try:
            env = {**os.environ, "KUBECONFIG": str(sandbox / "kubeconfig"), "NRL_K8S_USER": "bench"}
            e2e = [end_to_end(sandbox, env) for _ in range(args.runs)]
            own = [overhead(sandbox / "kubeconfig") for _ in range(args.runs)]
        finally:
            subprocess.run([NRL_K8S, "sandbox", "down", "--dir", str(sandbox)], capture_output=True)
    wall = statistics.median(w for w, _ in e2e)
    requests = statistics.median(r for _, r in e2e)
    ovh = statistics.median(o for _, o in own)
    print(f"runs: {args.runs}")
    print(f"end-to-end wall (subprocess)      median {wall:6.2f} s")
    print(f"API requests per run               median {requests:6.0f}")
    print(f"in-process wall                    median {statistics.median(w for w, _ in own):6.2f} s")
    print(
        f"orchestration overhead             median {ovh:6.3f} s   target {TARGET_S:.1f} s   "
        f"ratio {ovh / TARGET_S:.2f}x"
        f"  {'ok' if ovh <= TARGET_S else 'OVER'}"
    )
    print(json.dumps({"wall_s": wall, "requests": requests, "overhead_s": ovh}))


if __name__ == "__main__":
    main()
