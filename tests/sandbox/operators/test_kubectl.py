"""kubectl against the sandbox: apply/wait/get on DGDs and RayJobs (skipped without kubectl)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from operator_helpers import rayjob
from sandbox_harness import unique

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

EXAMPLE_DGD = Path(__file__).resolve().parents[3] / "examples_dgd" / "qwen3_0.6b_kind.yaml"


def test_kubectl_apply_of_an_example_dgd_reaches_successful(sandbox, sandbox_namespace):
    name = yaml.safe_load(EXAMPLE_DGD.read_text())["metadata"]["name"]
    ns = ["-n", sandbox_namespace]
    applied = sandbox.kubectl("apply", *ns, "-f", str(EXAMPLE_DGD))
    assert f"dynamographdeployment.nvidia.com/{name} created" in applied.stdout

    sandbox.kubectl("wait", *ns, "--for=jsonpath={.status.state}=successful", f"dgd/{name}", "--timeout=240s")
    pods = sandbox.kubectl("get", *ns, "pods", "-l", f"nvidia.com/dynamo-graph-deployment-name={name}", "-o", "name")
    assert len(pods.stdout.split()) == 2
    assert sandbox.kubectl("get", *ns, "service", f"{name}-frontend", "-o", "jsonpath={.spec.ports[0].port}").stdout == "8000"
    sandbox.kubectl("delete", *ns, "-f", str(EXAMPLE_DGD), "--wait=true")


def test_kubectl_applied_rayjob_runs_on_the_real_ray_head_and_its_cluster_is_deleted(sandbox, sandbox_namespace, tmp_path):
    name = unique("kubectl")
    proof = tmp_path / "ran.txt"
    manifest = tmp_path / "rayjob.yaml"
    manifest.write_text(yaml.safe_dump(rayjob(name, f"echo applied-with-kubectl > {proof}")))
    ns = ["-n", sandbox_namespace]

    sandbox.kubectl("apply", *ns, "-f", str(manifest))
    sandbox.kubectl("wait", *ns, "--for=jsonpath={.status.jobDeploymentStatus}=Complete", f"rayjob/{name}", "--timeout=240s")
    cluster = sandbox.kubectl("get", *ns, "rayjob", name, "-o", "jsonpath={.status.rayClusterName}").stdout
    assert cluster.startswith(f"{name}-")
    sandbox.kubectl("wait", *ns, "--for=delete", f"raycluster/{cluster}", "--timeout=240s")
    assert proof.read_text() == "applied-with-kubectl\n"
    assert sandbox.kubectl("get", *ns, "rayjob", name, "-o", "jsonpath={.status.jobStatus}").stdout == "SUCCEEDED"
