"""`nrl-k8s check` against a sandbox whose operators are older than a run needs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kubernetes import client
from sandbox_harness import DEADLINE_S, run_cli

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]


def check(box) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": str(box.kubeconfig), "NRL_K8S_USER": "it"}
    return run_cli(["check", *PAIR], env=env, timeout=DEADLINE_S)


def test_check_warns_that_kuberay_1_5_lacks_what_parallel_needs(fault_sandbox):
    box = fault_sandbox("old-rayjob-crd")
    result = check(box)
    assert result.returncode == 0, result.stdout + result.stderr  # a warning: run --rayjob still works
    lines = result.stdout.splitlines()
    assert "  ok   CRD rayjobs.ray.io (v1)" in lines
    assert ("  WARN RayJob fields needed for --parallel  "
            "the installed RayJob CRD lacks spec.preRunningDeadlineSeconds") in lines
    hint = lines[lines.index("  WARN RayJob fields needed for --parallel  "
                             "the installed RayJob CRD lacks spec.preRunningDeadlineSeconds") + 1]
    assert hint == (
        "         hint: install or upgrade the operators: helmfile -f helm/helmfile.yaml.gotmpl -e prod apply "
        "(-e kind on kind); KubeRay >= 1.6"
    )
    assert "FAIL" not in result.stdout


def test_check_passes_the_parallel_fields_on_the_current_sandbox(sandbox):
    result = check(sandbox)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "  ok   RayJob fields needed for --parallel (spec.preRunningDeadlineSeconds, submissionMode InteractiveMode)"
        in result.stdout.splitlines()
    )


def test_run_refuses_a_dgd_version_the_cluster_does_not_serve_before_creating_anything(fault_sandbox):
    box = fault_sandbox("no-dgd-crd")
    env = {**os.environ, "KUBECONFIG": str(box.kubeconfig), "NRL_K8S_USER": "it"}
    result = run_cli(["run", "--rayjob", "--no-wait", *PAIR], env=env, timeout=DEADLINE_S)
    with box.api_client() as api:
        jobs = client.CustomObjectsApi(api).list_namespaced_custom_object("ray.io", "v1", "default", "rayjobs")
        secrets = client.CoreV1Api(api).list_namespaced_secret("default")
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("error: the API server does not serve DynamoGraphDeployment nvidia.com/v1alpha1 (its CRD is not "
            "installed); nothing was created") in result.stderr
    assert "hint: install or upgrade the operators: helmfile -f helm/helmfile.yaml.gotmpl" in result.stderr
    assert jobs["items"] == [] and secrets.items == []
