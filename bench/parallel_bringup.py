"""Benchmark: `run --rayjob` to driver start, serial order vs `--parallel`, on a slow sandbox.

    .venv/bin/python bench/parallel_bringup.py [--runs N] [--dgd S] [--raycluster S]

Starts a sandbox with `--delay dgd=S --delay raycluster=S` (default 20 and 15 s: a DGD and a
cluster that take that long to become ready), then per run and mode times the installed
`nrl-k8s run --rayjob --no-wait` (a subprocess, as a user runs it) from its start until the
command returned (the driver submitted) and until the driver started: the driver's first act
prints the wall time, read afterwards from its log file on the disk of its Ray head (the RayJob's
``status.jobId`` names it; the file outlives the cluster, which KubeRay deletes once the job
ends), so measuring costs the machine nothing while Ray starts it. Serial costs the DGD wait plus
the cluster wait; parallel should cost the longer of the two. Target: parallel <=
max(dgd, raycluster) + 1.5 s. Prints medians and the ratios, and each run's split: nrl-k8s from
its start until the submission (Ray's own record of the job's start_time, which KubeRay copies to
``status.rayJobInfo.startTime``) and Ray alone from that submission until the driver started.
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
from datetime import datetime
from pathlib import Path

from nrl_k8s.kinds import rayjob
from nrl_k8s.kinds.readiness import Pending, Readiness, Ready
from nrl_k8s.kube.client import Kube

ROOT = Path(__file__).resolve().parent.parent
NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
MARGIN_S = 1.5


STAMP = "date +driver-started=%s.%N"  # the driver's first act: the wall time it started
STARTED = re.compile(r"driver-started=([0-9.]+)")
DEADLINE_S = 120.0


def ray_job(kube: Kube, name: str) -> dict:
    """The RayJob once KubeRay has named its Ray job (``status.jobId``) and recorded Ray's own
    submission time (``status.rayJobInfo.startTime``): KubeRay's submitter may do so after the
    command returned. A watch, not a poll; the RayJob outlives the cluster KubeRay deletes."""

    def recorded(job: dict | None) -> Readiness:
        status = (job or {}).get("status") or {}
        if status.get("jobId") and (status.get("rayJobInfo") or {}).get("startTime"):
            return Ready()
        return Pending(f"jobDeploymentStatus {status.get('jobDeploymentStatus') or 'unset'}")

    return kube.wait(rayjob.KIND, recorded, name=name, timeout_s=DEADLINE_S, what=f'RayJob "{name}"\'s Ray job')


def started_at(scratch: Path, job_id: str) -> float:
    """The wall time the job's driver started: the stamp it printed first, read from the driver's
    log file as its Ray head wrote it (``<scratch>/<pod>/ray/session_*/logs/``, kept on disk after
    KubeRay deleted the cluster). A file has no watch: read every 0.2 s; the stamp is exact
    whenever it is read."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for log in sorted(scratch.glob(f"*/ray/session_*/logs/job-driver-{job_id}.log")):
            found = STARTED.search(log.read_text(errors="replace"))
            if found:
                return float(found.group(1))
        time.sleep(0.2)
    raise SystemExit(f"Ray job {job_id} printed no start stamp in {scratch} within {DEADLINE_S:.0f} s")


def submitted_at(scratch: Path, job: dict) -> float:
    """Ray's own record of when it got the job (its start_time). KubeRay copies it to
    ``status.rayJobInfo.startTime`` in whole seconds; Ray's job manager logs the same moment to
    the millisecond ("Starting job with submission_id: ID", in the head's dashboard_agent.log on
    disk, local time), used when it lies within that second."""
    whole = datetime.fromisoformat(job["status"]["rayJobInfo"]["startTime"].replace("Z", "+00:00")).timestamp()
    logged = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}).*Starting job with submission_id: "
                        + re.escape(job["status"]["jobId"]) + "$", re.MULTILINE)
    for log in scratch.glob("*/ray/session_*/logs/dashboard_agent.log"):
        found = logged.search(log.read_text(errors="replace"))
        if found:
            fine = time.mktime(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S")) + int(found.group(2)) / 1000
            if whole <= fine < whole + 1:
                return fine
    return whole


def one(kube: Kube, scratch: Path, env: dict, *flags: str) -> tuple[float, float, float]:
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
    job = ray_job(kube, name)
    started = started_at(scratch, job["status"]["jobId"])
    return started - start, returned, started - submitted_at(scratch, job)


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
            scratch = Path(json.loads((sandbox / "sandbox.json").read_text())["scratch"])
            with Kube.connect(kubeconfig=str(sandbox / "kubeconfig")) as kube:
                serial = [one(kube, scratch, env) for _ in range(args.runs)]
                parallel = [one(kube, scratch, env, "--parallel") for _ in range(args.runs)]
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
        print(
            f"target parallel <= {target:.1f} s, driver {what}: ratio {value / target:.2f}x "
            f"{'ok' if value <= target else 'OVER'}"
        )
    print(json.dumps({"serial_submitted_s": s_sub, "serial_started_s": s_run, "parallel_submitted_s": p_sub,
                      "parallel_started_s": p_run, "target_s": target, "parallel_ray_submission_to_start_s": ray}))


if __name__ == "__main__":
    main()
