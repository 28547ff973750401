"""`nrl-k8s check` and `run` against a sandbox whose operators are older than a run needs: KubeRay's
RayJob CRD of 1.5 (``old-rayjob-crd``) or no DGD CRD (``no-dgd-crd``). Every test of such a sandbox
is here, so that each is started once, in one worker, for this module only; they create nothing in it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, Sandbox, run_cli, separate_sandbox

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]


@pytest.fixture(scope="module")
def fault_sandbox(tmp_path_factory, private_user_cache) -> Iterator[Callable[[str], Sandbox]]:
    """``fault_sandbox(fault)``: a sandbox started with that start-time fault, on first use."""
    with contextlib.ExitStack() as stack:
        started: dict[str, Sandbox] = {}

        def get(fault: str) -> Sandbox:
            if fault not in started:
                started[fault] = stack.enter_context(separate_sandbox(tmp_path_factory.mktemp("faulty"), fault))
            return started[fault]

        yield get


def cli(box, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": str(box.kubeconfig), "NRL_K8S_USER": "it"}
    return run_cli([*args, *PAIR], env=env, timeout=DEADLINE_S)


def check(box) -> subprocess.CompletedProcess:
    return cli(box, "check")


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
    result = cli(box, "run", "--rayjob", "--no-wait")
    with box.api_client() as api:
        jobs = client.CustomObjectsApi(api).list_namespaced_custom_object("ray.io", "v1", "default", "rayjobs")
        secrets = client.CoreV1Api(api).list_namespaced_secret("default")
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("error: the API server does not serve DynamoGraphDeployment nvidia.com/v1alpha1 (its CRD is not "
            "installed); nothing was created") in result.stderr
    assert "hint: install or upgrade the operators: helmfile -f helm/helmfile.yaml.gotmpl" in result.stderr
    assert jobs["items"] == [] and secrets.items == []


def test_check_reports_missing_dgd_crd(fault_sandbox):
    box = fault_sandbox("no-dgd-crd")
    result = check(box)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL CRD dynamographdeployments.nvidia.com" in result.stdout
    assert "helmfile -f helm/helmfile.yaml.gotmpl -e prod apply" in result.stdout


def test_parallel_is_refused_when_kuberay_lacks_interactive_mode(fault_sandbox):
    box = fault_sandbox("old-rayjob-crd")
    result = cli(box, "run", "--parallel")
    assert result.returncode == 2, result.stderr
    assert "--parallel needs spec.preRunningDeadlineSeconds" in result.stderr and "nothing was created" in result.stderr
    assert "Traceback" not in result.stderr
    custom = client.CustomObjectsApi(box.api_client())
    assert (
        custom.list_namespaced_custom_object("nvidia.com", "v1alpha1", "default", "dynamographdeployments")["items"]
        == []
    )
