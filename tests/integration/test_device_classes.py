"""Claims naming a DeviceClass the cluster lacks, against the sandbox (which publishes
``roce.nvidia.com`` and the ComputeDomain channel class): `check` reports it in its CLUSTER
section, and `run` (both flows) and `cluster up` refuse it before anything is applied, instead of
leaving pods Pending forever (upstream's GB300 cluster names ``roce.networking.k8s.aws``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_harness import run_cli

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox_longlived.yaml"), "--infra", str(ROOT / "examples/sandbox_longlived.infra.yaml")]
AWS = "++infra.dra.roce.deviceClassName=roce.networking.k8s.aws"
MISSING = ("infra.dra.roce.deviceClassName: the cluster has no DeviceClass 'roce.networking.k8s.aws' (it has: "
           "compute-domain-default-channel.nvidia.com, roce.nvidia.com): pods claiming it would wait in Pending "
           "forever")
APPLIED = "rayclusters,rayjobs,jobs,deployments,services,dgd,resourceclaimtemplates,computedomains,secrets"


@pytest.fixture
def nrl(sandbox, sandbox_namespace):
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": "it"}
    return lambda *command, override=None: run_cli(
        [*command, *PAIR, f"infra.namespace={sandbox_namespace}", *filter(None, [override])], env=env)


def test_check_reports_the_device_class_a_claim_names(nrl):
    lines = nrl("check").stdout.splitlines()
    assert "  ok   DeviceClass roce.nvidia.com" in lines
    missing = nrl("check", override=AWS)
    assert missing.returncode == 1, missing.stdout + missing.stderr
    row = f"  FAIL DeviceClass roce.networking.k8s.aws  {MISSING.split(': ', 1)[1]}"
    lines = missing.stdout.splitlines()
    assert row in lines, missing.stdout
    assert lines[lines.index(row) + 1].strip().startswith("hint: set infra.dra.roce.deviceClassName")


@pytest.mark.parametrize("command", [["run", "--raycluster", "--no-wait"], ["run", "--rayjob", "--no-wait"],
                                     ["cluster", "up"]], ids=["run --raycluster", "run --rayjob", "cluster up"])
def test_run_and_cluster_up_refuse_it_before_applying_anything(nrl, sandbox, sandbox_namespace, command):
    result = nrl(*command, override=AWS)
    said = [line for line in result.stderr.splitlines() if line.startswith(("error:", "hint:"))]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert said == [f"error: {MISSING}", "hint: set infra.dra.roce.deviceClassName to the DeviceClass your RoCE "
                                         "driver publishes (kubectl get deviceclasses)"], result.stderr
    assert sandbox.kubectl("get", APPLIED, "-n", sandbox_namespace, "-o", "name").stdout == ""
