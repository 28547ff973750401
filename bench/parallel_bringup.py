"""Benchmark: `run --rayjob` to driver start, serial order vs `--parallel`, on a slow sandbox.

    .venv/bin/python bench/parallel_bringup.py [--runs N] [--dgd S] [--raycluster S]

Starts a sandbox with `--delay dgd=S --delay raycluster=S` (default 20 and 15 s: a DGD and a
cluster that take that long to become ready), then per run and mode times the installed
`nrl-k8s run --rayjob --no-wait` (a subprocess, as a user runs it) from its start until the
command returned (the driver submitted) and until the driver started: the driver's first act
prints the wall time, read from its log afterwards (Ray marks a job RUNNING right before it starts
the entrypoint), so measuring costs the machine nothing while Ray starts it. Serial costs the DGD
wait plus the cluster wait; parallel should cost the longer of the two. Target: parallel <=
max(dgd, raycluster) + 1.5 s. Prints medians and the ratios, and each run's split: nrl-k8s from
its start until the submission (Ray's own record of the job's start_time) and Ray alone from
that submission until the driver started.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


STAMP = "date +driver-started=%s.%N"  # the driver's first act: the wall time it started
STARTED = re.compile(r"driver-started=([0-9.]+)")


def started_at(dashboard: httpx.Client, submission_id: str) -> float:
    """The wall time the job's driver started, read from its log once it is there (every 0.5 s:
    the stamp is exact whenever it is read)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        response = dashboard.get(f"/api/jobs/{submission_id}/logs")
        found = STARTED.search(response.json().get("logs", "")) if response.status_code == 200 else None
        if found:
            return float(found.group(1))
        time.sleep(0.5)
    raise SystemExit(f"job {submission_id} printed no start stamp within 120 s")


def submission_of(dashboard: httpx.Client, kube, name: str) -> str:
    """The shared head's submission id of the RayJob's driver (stored scoped to its cluster), once
    the RayJob names it (KubeRay's submitter may do so after the command returned)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = kube.find(rayjob.KIND, name) or {}
        job_id = (job.get("status") or {}).get("jobId") or job.get("spec", {}).get("jobId")
        for ray_job in dashboard.get("/api/jobs/").json() if job_id else []:
            if (ray_job.get("submission_id") or "").endswith(f"--{job_id}"):
                return ray_job["submission_id"]
        time.sleep(0.5)
    raise SystemExit(f"RayJob {name}'s driver never showed on the Ray head")


def one(kube, dashboard: httpx.Client, env: dict, *flags: str) -> tuple[float, float, float]:
    """(seconds to the driver's start, seconds until the command returned, seconds Ray took from
    the submission to the driver's start) of one run."""
    name = f"bench-{uuid.uuid4().hex[:6]}"
    overrides = [f"infra.kuberay.training.name={name}", f"infra.dynamo.serving.name={name}-dgd",
                 f'infra.launch.entrypoint="{STAMP} && sleep 2"']
    start = time.time()
    done = subprocess.run([NRL_K8S, "run", "--rayjob", "--no-wait", *flags, *PAIR, *overrides], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    returned = time.time() - start
    if done.returncode != 0:
        raise SystemExit(f"run {' '.join(flags)} failed:\n{done.stderr}")
    submission_id = submission_of(dashboard, kube, name)
    started = started_at(dashboard, submission_id)
    submitted = dashboard.get(f"/api/jobs/{submission_id}").json()["start_time"] / 1000  # set when Ray got it
    return started - start, returned, started - submitted


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
            url = json.loads((sandbox / "sandbox.json").read_text())["dashboard_url"]
            with Kube.connect(kubeconfig=str(sandbox / "kubeconfig")) as kube, \
                    httpx.Client(base_url=url, timeout=30) as dashboard:
                serial = [one(kube, dashboard, env) for _ in range(args.runs)]
                parallel = [one(kube, dashboard, env, "--parallel") for _ in range(args.runs)]
        finally:
            subprocess.run([NRL_K8S, "sandbox", "down", "--dir", str(sandbox)], capture_output=True)
    target = max(args.dgd, args.raycluster) + MARGIN_S
    (s_run, s_sub, _), (p_run, p_sub, ray) = ([statistics.median(run[i] for run in runs) for i in range(3)]
                                              for runs in (serial, parallel))
    print(f"runs per mode: {args.runs}; sandbox delays: dgd {args.dgd:g} s, raycluster {args.raycluster:g} s")
    for mode, submitted, running in (("serial", s_sub, s_run), ("parallel", p_sub, p_run)):
        print(f"{mode:<9} run -> driver submitted (command returned) median {submitted:6.2f} s;"
              f" -> driver started median {running:6.2f} s")
    print(f"parallel / serial ratio: submitted {p_sub / s_sub:.2f}, started {p_run / s_run:.2f}")
    print(f"parallel, split: nrl-k8s from its start to the submission median {p_run - ray:6.2f} s; Ray alone from "
          f"the submission to the driver's start median {ray:.2f} s (of the {MARGIN_S} s margin)")
    for what, value in (("submitted", p_sub), ("started", p_run)):
        print(f"target parallel <= {target:.1f} s, driver {what}: ratio {value / target:.2f}x {'ok' if value <= target else 'OVER'}")
    print(json.dumps({"serial_submitted_s": s_sub, "serial_started_s": s_run, "parallel_submitted_s": p_sub,
                      "parallel_started_s": p_run, "target_s": target, "parallel_ray_submission_to_start_s": ray}))


if __name__ == "__main__":
    main()
