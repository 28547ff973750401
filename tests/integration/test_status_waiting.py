"""`status` says why a pod group waits (issue 31, item 2), against the sandbox's real kube-scheduler:
a worker group asking more nvidia.com/gpu than any node has, a DGD component whose nodeSelector no
node matches, and a RayCluster whose schedulerName (kai-scheduler) no scheduler serves. Objects
are made with `cluster up --no-wait --place-anyway` (the fit check would refuse them), from the
usual pair; status is asked once the scheduler has given its verdict (the pods' PodScheduled
condition), which for these never changes. What it says of a job Kueue holds is tested on the
Kueue sandbox of tests/integration/test_fit_matrix.py.

The scheduler's words are Kubernetes'; the assertions hold to what the summary itself shapes: the
group, its pod count, ``0/N nodes: N ...`` with N the sandbox's nodes, and the resource's name.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from kubernetes import client
from sandbox_harness import observe, played, run_cli, unique

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
WORKER = "++infra.kuberay.training.spec.workerGroupSpecs.0"


def worker_gpus(count: int) -> str:
    return f"{WORKER}.template.spec.containers.0.resources={{limits: {{nvidia.com/gpu: {count}}}}}"


GPU5 = worker_gpus(5)  # the sandbox's largest node has 4
NO_SUCH_GPU = ("+infra.dynamo.serving.overrides.services.VllmDecodeWorker.extraPodSpec.nodeSelector="
               "{nvidia.com/gpu.product: NVIDIA-H100}")
KAI = ["++infra.scheduler.kind=kai", "++infra.scheduler.queue=research"]
#: The fit run's head and DGD frontend need only be placed: kwok plays them (no Ray head, no frontend runs).
FIT = [GPU5, NO_SUCH_GPU, *played(heads=("training",), services=("Frontend",))]


@pytest.fixture
def nrl(sandbox, sandbox_namespace):
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": "wt"}

    def cli(*command: str, name: str, overrides=()) -> tuple[list[str], object]:
        argv = [*PAIR, f"infra.namespace={sandbox_namespace}", f"infra.kuberay.training.name={name}",
                f"infra.dynamo.serving.name={name}-dgd", *overrides]
        return run_cli([*command, *argv], env=env, cwd=ROOT)

    return cli


def _scheduled(pods: dict[str, dict], prefix: str, status: str) -> bool:
    """A pod named ``prefix...`` has the scheduler's verdict: PodScheduled ``status`` (either stays)."""
    return any(name.startswith(prefix) and any(c["type"] == "PodScheduled" and c["status"] == status
                                               for c in (p.get("status") or {}).get("conditions") or [])
               for name, p in pods.items())


def test_status_says_why_each_group_waits(nrl, sandbox, sandbox_namespace):
    fit, kai = unique("fit"), unique("kai")
    up = nrl("cluster", "up", "--no-wait", "--place-anyway", name=fit, overrides=FIT)
    assert up.returncode == 0, up.stderr
    up = nrl("cluster", "up", "--no-wait", "--place-anyway", "-t", "kuberay.training", name=kai, overrides=KAI)
    assert up.returncode == 0, up.stderr
    with sandbox.api_client() as api:
        core = client.CoreV1Api(api)
        nodes = len(core.list_node().items)
        observe(core.list_namespaced_pod, sandbox_namespace,
                until=lambda pods: _scheduled(pods, f"{fit}-gpu-worker-", "False")
                and _scheduled(pods, f"{fit}-dgd-vllmdecodeworker-", "False")
                and _scheduled(pods, f"{fit}-head-", "True") and _scheduled(pods, f"{fit}-dgd-frontend-", "True")
                and sum(name.startswith(f"{kai}-") for name in pods) == 2)

    status = nrl("status", "-o", "json", name=fit, overrides=FIT)
    assert status.returncode == 0, status.stderr
    rows = {row["group"]: row for row in json.loads(status.stdout)["waiting"]}
    # the head and the DGD's frontend are placed: not listed; nor is the other cluster's
    assert sorted(rows) == [f"DGD {fit}-dgd: VllmDecodeWorker", f"RayCluster {fit}: gpu"], rows
    verdict = re.compile(rf"0/{nodes} nodes: {nodes} \S.*")
    gpu, selector = rows[f"RayCluster {fit}: gpu"], rows[f"DGD {fit}-dgd: VllmDecodeWorker"]
    assert gpu["pods"] == 1 and verdict.fullmatch(gpu["reason"]) and "nvidia.com/gpu" in gpu["reason"], gpu
    assert selector["pods"] == 1 and verdict.fullmatch(selector["reason"]), selector
    assert "preemption" not in gpu["reason"] + selector["reason"]
    table = nrl("status", name=fit, overrides=FIT).stdout
    assert f"  RayCluster {fit}: gpu (1 pod): {gpu['reason']}" in table.splitlines(), table

    status = nrl("status", "-o", "json", name=kai, overrides=KAI)
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)["waiting"]
    missing = "no scheduler kai-scheduler has picked it up (is it installed?)"
    assert [(row["pods"], row["reason"]) for row in rows] == [(1, missing)] * 2, rows  # the head, the worker
    assert f"RayCluster {kai}: gpu" in {row["group"] for row in rows}, rows
