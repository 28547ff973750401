"""A DGD written in ``nvidia.com/v1beta1`` through `run --rayjob`, `status` and `cluster`, against the sandbox.

The sandbox pair with its DGD manifest swapped for the v1beta1 twin: nrl-k8s creates, reads,
patches and waits on the DGD in v1beta1, and the same object stays readable in v1alpha1.
Deterministic as ``test_run_rayjob``: the driver waits for the test's ``Gate``; GC is asserted
on watch histories.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sandbox_harness import status_is
from test_run_rayjob import EXAMPLE_ENTRYPOINT, PAIR, RAY, Run

ROOT = Path(__file__).resolve().parents[2]
BETA, ALPHA = ("nvidia.com", "v1beta1"), ("nvidia.com", "v1alpha1")
V1BETA1_DGD = f"infra.dynamo.serving.manifest={ROOT / 'examples_dgd/qwen3_0.6b_kind_v1beta1.yaml'}"
DGDS = "dynamographdeployments"


class BetaRun(Run):
    def overrides(self, *extra: str) -> list[str]:
        return super().overrides(V1BETA1_DGD, *extra)


@pytest.fixture
def run(sandbox, sandbox_namespace):
    r = BetaRun(sandbox, sandbox_namespace)
    yield r
    r.api.close()


def _deleted(history, name: str) -> bool:
    return any(kind == "DELETED" for kind, _ in history.events(name))


def test_run_rayjob_with_a_v1beta1_dgd_links_it_and_status_shows_it(run, tmp_path):
    from sandbox_harness import Gate

    gate = Gate(tmp_path)
    extra = (gate.override(EXAMPLE_ENTRYPOINT),)
    with run.history(RAY, "rayclusters") as clusters, run.history(BETA, DGDS) as dgds:
        result = run.run("--no-wait", "--driver-grace", "30", extra=extra)
        assert result.returncode == 0, result.stderr

        cluster = run.get(RAY, "rayjobs", run.job)["status"]["rayClusterName"]
        cluster_uid = run.get(RAY, "rayclusters", cluster)["metadata"]["uid"]
        live = run.get(BETA, DGDS, run.dgd)
        assert [c["name"] for c in live["spec"]["components"]] == ["Frontend", "VllmDecodeWorker"]
        assert [(o["kind"], o["uid"]) for o in live["metadata"]["ownerReferences"]] == [("RayCluster", cluster_uid)]
        assert live["metadata"]["annotations"]["nrl-k8s.io/users"] == run.job
        assert live["status"]["components"]["VllmDecodeWorker"]["readyReplicas"] == 1
        # The same object through the served v1alpha1: converted, same identity and owner.
        alpha = run.get(ALPHA, DGDS, run.dgd)
        assert alpha["metadata"]["uid"] == live["metadata"]["uid"]
        assert alpha["spec"]["services"]["VllmDecodeWorker"]["resources"]["limits"] == {"gpu": "1"}
        assert alpha["metadata"]["ownerReferences"] == live["metadata"]["ownerReferences"]

        status = run.cli("status", *PAIR, *run.overrides(*extra), "-o", "json")
        assert status.returncode == 0, status.stderr
        data = json.loads(status.stdout)
        (dyn,) = data["dynamo"]
        assert (dyn["name"], dyn["state"], dyn["ready"]) == (run.dgd, "successful", True)
        assert dyn["owners"] == [f"RayCluster {cluster}"] and dyn["users"] == [run.job]
        assert [(s["name"], s["type"], s["desired"], s["ready"]) for s in dyn["services"]] == [
            ("Frontend", "frontend", 1, 1), ("VllmDecodeWorker", "worker", 1, 1)]
        assert dyn["frontend"]["reachable"] is True
        table = run.cli("status", *PAIR, *run.overrides(*extra))
        assert (
            "DYNAMO" in table.stdout and "VllmDecodeWorker" in table.stdout and "owner     RayCluster" in table.stdout
        )

        gate.open()
        done = run.wait_for(
            RAY, "rayjobs", run.job, status_is("jobDeploymentStatus", "Complete")
        )
        assert done["status"]["jobStatus"] == "SUCCEEDED"
        assert f"dgd_name: {run.dgd}" in run.driver_logs(done["status"]["jobId"])
        clusters.wait(lambda h: _deleted(h, cluster), what=f"RayCluster {cluster} deleted")
        dgds.wait(lambda h: _deleted(h, run.dgd), what=f"DGD {run.dgd} deleted")

    # Created in v1beta1 owned by the suspended RayJob, then moved to the cluster (the events, read in v1beta1).
    events = dgds.events(run.dgd)
    assert events[0][0] == "ADDED" and events[0][1]["apiVersion"] == "nvidia.com/v1beta1"
    assert [o["kind"] for o in events[0][1]["metadata"]["ownerReferences"]] == ["RayJob"]


def test_cluster_up_with_a_component_override_then_reuses_it_without_drift(run):
    scaled = "+infra.dynamo.serving.overrides.components.VllmDecodeWorker.replicas=2"
    up = run.cli("cluster", "up", "--target", "dynamo.serving", *PAIR, *run.overrides(scaled))
    assert up.returncode == 0, up.stderr
    live = run.get(BETA, DGDS, run.dgd)
    worker = next(c for c in live["spec"]["components"] if c["name"] == "VllmDecodeWorker")
    assert worker["replicas"] == 2 and worker["podTemplate"]["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "1"}

    again = run.cli("cluster", "up", "--target", "dynamo.serving", *PAIR, *run.overrides(scaled))
    assert again.returncode == 0, again.stderr
    assert "reused" in again.stderr and "differs from the live object" not in again.stderr
    status = json.loads(run.cli("status", *PAIR, *run.overrides(scaled), "-o", "json").stdout)
    assert [(s["name"], s["desired"], s["ready"]) for s in status["dynamo"][0]["services"]] == [
        ("Frontend", 1, 1), ("VllmDecodeWorker", 2, 2)]

    drifted = run.cli("cluster", "up", "--target", "dynamo.serving", *PAIR, *run.overrides())
    assert drifted.returncode == 0, drifted.stderr
    assert "differs from the live object" in drifted.stderr
    assert "spec.components.VllmDecodeWorker.replicas: live 2 != desired 1" in drifted.stderr

    down = run.cli("cluster", "down", "--target", "dynamo.serving", *PAIR, *run.overrides(scaled))
    assert down.returncode == 0, down.stderr
    assert run.get(BETA, DGDS, run.dgd) is None
