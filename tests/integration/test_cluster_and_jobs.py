"""`cluster up/down/list`, `job list/logs/stop` and `logs` against the sandbox, as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, Gate, observe

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]


@pytest.fixture
def cli(sandbox, sandbox_namespace):
    job = f"c-{uuid.uuid4().hex[:6]}"
    names = [f"infra.namespace={sandbox_namespace}", f"infra.kuberay.training.name={job}",
             f"infra.dynamo.serving.name={job}-dgd"]

    def invoke(*args: str, extra: tuple[str, ...] = (), config: bool = True) -> subprocess.CompletedProcess:
        env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": "it"}
        argv = [NRL_K8S, "-n", sandbox_namespace, *args] + ([*PAIR, *names, *extra] if config else [])
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=DEADLINE_S)

    invoke.job, invoke.ns = job, sandbox_namespace
    invoke.custom = client.CustomObjectsApi(sandbox.api_client())
    return invoke


def test_cluster_up_is_idempotent_warns_on_drift_and_recreates(cli):
    first = cli("cluster", "up", "-t", "dynamo.serving", "-t", "kuberay.training")
    assert first.returncode == 0, first.stderr
    assert "created" in first.stderr and "ok" in first.stderr
    uid = cli.custom.get_namespaced_custom_object("nvidia.com", "v1alpha1", cli.ns, "dynamographdeployments",
                                                  f"{cli.job}-dgd")["metadata"]["uid"]

    again = cli("cluster", "up", "-t", "dynamo.serving")
    assert again.returncode == 0 and "reused" in again.stderr

    drifted = ("+infra.dynamo.serving.overrides={services: {VllmDecodeWorker: {replicas: 2}}}",)
    warned = cli("cluster", "up", "-t", "dynamo.serving", extra=drifted)
    assert warned.returncode == 0 and "differs from the live object" in warned.stderr, warned.stderr
    assert "spec.services.VllmDecodeWorker.replicas" in warned.stderr

    recreated = cli("cluster", "up", "-t", "dynamo.serving", "--recreate", extra=drifted)
    assert recreated.returncode == 0, recreated.stderr
    live = cli.custom.get_namespaced_custom_object("nvidia.com", "v1alpha1", cli.ns, "dynamographdeployments",
                                                   f"{cli.job}-dgd")
    assert live["metadata"]["uid"] != uid and live["spec"]["services"]["VllmDecodeWorker"]["replicas"] == 2

    listed = cli("cluster", "list", "-o", "json", config=False)
    rows = json.loads(listed.stdout)
    assert {(r["kind"], r["name"]) for r in rows} >= {("DynamoGraphDeployment", f"{cli.job}-dgd"),
                                                      ("RayCluster", cli.job)}

    down = cli("cluster", "down")
    assert down.returncode == 0, down.stderr
    assert json.loads(cli("cluster", "list", "-o", "json", config=False).stdout) == []


def test_cluster_down_leaves_objects_it_did_not_create(cli):
    manifest = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
                "metadata": {"name": f"{cli.job}-dgd"}, "spec": {"services": {}}}
    cli.custom.create_namespaced_custom_object("nvidia.com", "v1alpha1", cli.ns, "dynamographdeployments", manifest)
    down = cli("cluster", "down", "-t", "dynamo.serving")
    assert down.returncode == 0 and "no nrl-k8s managed-by label" in down.stderr and "leaving it alone" in down.stderr
    cli.custom.get_namespaced_custom_object(
        "nvidia.com", "v1alpha1", cli.ns, "dynamographdeployments", f"{cli.job}-dgd"
    )


def test_job_stop(cli, tmp_path):
    run = cli("run", "--no-wait", extra=(Gate(tmp_path).override(),))  # never released: only a stop ends it
    assert run.returncode == 0, run.stderr
    stop = cli("job", "stop")
    assert stop.returncode == 0 and "stop requested" in stop.stderr
    ended = observe(
        cli.custom.list_namespaced_custom_object,
        "ray.io",
        "v1",
        cli.ns,
        "rayjobs",
        field_selector=f"metadata.name={cli.job}",
        until=lambda o: (o[cli.job].get("status") or {}).get("jobDeploymentStatus") in ("Complete", "Failed"),
    )
    assert ended[cli.job]["status"]["jobStatus"] == "STOPPED"


@pytest.mark.parametrize("flow", [("--rayjob", "--no-shutdown"), ("--raycluster",)], ids=["rayjob", "raycluster"])
def test_a_head_service_named_in_the_spec_is_how_the_dashboard_is_reached(cli, flow):
    """`headGroupSpec.headService.metadata.name` renames the head Service KubeRay makes: following
    the driver, `job list`, `logs` (also `-f`) and `job logs` all reach the dashboard through that
    Service, and find the finished driver."""
    service = f"{cli.job}-dash"
    named = (f"+infra.kuberay.training.spec.headGroupSpec.headService={{metadata: {{name: {service}}}}}",)
    run = cli("run", *flow, "--wait", extra=named)
    assert run.returncode == 0, run.stderr
    assert "step 3/3" in run.stdout
    clusters = cli.custom.list_namespaced_custom_object("ray.io", "v1", cli.ns, "rayclusters")["items"]
    [cluster] = [c for c in clusters if c["metadata"]["name"].startswith(cli.job)]
    assert cluster["status"]["head"]["serviceName"] == service
    client.CoreV1Api(cli.custom.api_client).read_namespaced_service(service, cli.ns)

    listed = cli("job", "list", extra=named)
    assert listed.returncode == 0 and "SUCCEEDED" in listed.stdout, listed.stderr
    job_id = next(line.split()[0] for line in listed.stdout.splitlines() if "SUCCEEDED" in line)
    for argv in (["logs", "--role", "training"], ["logs", "-f"], ["job", "logs", "--job", job_id]):
        logs = cli(*argv, extra=named)
        assert logs.returncode == 0, (argv, logs.stderr)
        assert f"dgd_name: {cli.job}-dgd" in logs.stdout and "step 3/3" in logs.stdout, argv
