"""Benchmark: `run --rayjob` to driver start, serial order vs `--parallel`, on a slow sandbox.

    .venv/bin/python bench/parallel_bringup.py [--runs N] [--dgd S] [--raycluster S]

Starts a sandbox with `--delay dgd=S --delay raycluster=S` (default 20 and 15 s: a DGD and a
cluster that take that long to become ready), then per run and mode times the installed
`nrl-k8s run --rayjob --no-wait` (a subprocess, as a user runs it) from its start until the
driver's Ray job is RUNNING on the sandbox's Ray head (polled every 20 ms) and until the command
returned (the driver submitted). Serial costs the DGD wait plus the cluster wait; parallel
should cost the longer of the two. Target: parallel <= max(dgd, raycluster) + 1.5 s. Prints
medians and the ratios; RUNNING adds Ray's own start of a submitted job (~1-1.5 s here).
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

import httpx

from nrl_k8s.kinds import rayjob
from nrl_k8s.kube import Kube

ROOT = Path(__file__).resolve().parent.parent
NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
MARGIN_S = 1.5


def driver_running(dashboard: str, job_id: str) -> bool:
    """Whether the shared Ray head runs the job (ids are stored scoped to their RayCluster)."""
    jobs = httpx.get(f"{dashboard}/api/jobs/", timeout=30).json()
    return any((j.get("submission_id") or "").endswith(f"--{job_id}") and j["status"] in ("RUNNING", "SUCCEEDED")
               for j in jobs)


def one(kube, dashboard: str, env: dict, *flags: str) -> tuple[float, float]:
    """(seconds to driver RUNNING, seconds until the command returned) of one run."""
    name = f"bench-{uuid.uuid4().hex[:6]}"
    overrides = [f"infra.kuberay.training.name={name}", f"infra.dynamo.serving.name={name}-dgd",
                 'infra.launch.entrypoint="sleep 5"']
    start = time.perf_counter()
    proc = subprocess.Popen([NRL_K8S, "run", "--rayjob", "--no-wait", *flags, *PAIR, *overrides], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    job_id, returned = None, None
    while True:
        now = time.perf_counter() - start
        if returned is None and proc.poll() is not None:
            if proc.returncode != 0:
                raise SystemExit(f"run {' '.join(flags)} failed:\n{proc.stderr.read()}")
            returned = now
        if job_id is None:
            job_id = ((kube.find(rayjob.KIND, name) or {}).get("status") or {}).get("jobId")
        if job_id and driver_running(dashboard, job_id):
            running = time.perf_counter() - start
            break
        time.sleep(0.02)
    proc.wait()
    return running, returned if returned is not None else time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--dgd", type=float, default=20.0)
    parser.add_argument("--raycluster", type=float, default=15.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nrlk8s-bench-") as tmp:
        sandbox = Path(tmp)
        subprocess.run([NRL_K8S, "sandbox", "up", "--dir", str(sandbox), "--delay", f"dgd={args.dgd:g}",
                        "--delay", f"raycluster={args.raycluster:g}"], check=True, capture_output=True)
        try:
            env = {**os.environ, "KUBECONFIG": str(sandbox / "kubeconfig"), "NRL_K8S_USER": "bench"}
            dashboard = json.loads((sandbox / "sandbox.json").read_text())["dashboard_url"]
            with Kube.connect(kubeconfig=str(sandbox / "kubeconfig")) as kube:
                serial = [one(kube, dashboard, env) for _ in range(args.runs)]
                parallel = [one(kube, dashboard, env, "--parallel") for _ in range(args.runs)]
        finally:
            subprocess.run([NRL_K8S, "sandbox", "down", "--dir", str(sandbox)], capture_output=True)
    target = max(args.dgd, args.raycluster) + MARGIN_S
    s_run, p_run = statistics.median(r for r, _ in serial), statistics.median(r for r, _ in parallel)
    print(f"runs per mode: {args.runs}; sandbox delays: dgd {args.dgd:g} s, raycluster {args.raycluster:g} s")
    s_sub, p_sub = statistics.median(c for _, c in serial), statistics.median(c for _, c in parallel)
    for mode, submitted, running in (("serial", s_sub, s_run), ("parallel", p_sub, p_run)):
        print(f"{mode:<9} run -> driver submitted (command returned) median {submitted:6.2f} s;"
              f" -> driver RUNNING (Ray started it) median {running:6.2f} s")
    print(f"parallel / serial ratio: submitted {p_sub / s_sub:.2f}, RUNNING {p_run / s_run:.2f}")
    for what, value in (("submitted", p_sub), ("RUNNING", p_run)):
        print(f"target parallel <= {target:.1f} s, driver {what}: ratio {value / target:.2f}x {'ok' if value <= target else 'OVER'}")
    print(json.dumps({"serial_submitted_s": s_sub, "serial_running_s": s_run, "parallel_submitted_s": p_sub,
                      "parallel_running_s": p_run, "target_s": target}))


if __name__ == "__main__":
    main()
