"""Per-kind readiness delays (the ``delay`` fault, ``sandbox up --delay KIND=SECONDS``) on a real sandbox.

Only lower bounds are asserted: an object is never ready before its delay, however fast or slow
the machine; the timestamps compared are the API server's own (second precision, so a gap of
at least ``DELAY_S`` seconds shows as at least ``DELAY_S``).
"""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client
from operator_helpers import condition, dgd, field, proxy, ray_cluster_spec, rayjob
from sandbox_harness import eventually, nrl_k8s, observe, unique

from nrl_k8s.sandbox.operators.base import parse_time

NS = "default"
DELAY_S = 3


def _since_creation(obj: dict, stamp: str) -> float:
    return parse_time(stamp) - parse_time(obj["metadata"]["creationTimestamp"])


def test_each_kind_becomes_ready_only_after_its_delay(sandbox, api, core, custom, sandbox_namespace):
    apps = client.AppsV1Api(api)
    names = {kind: unique(f"slow{kind}") for kind in ("rc", "dgd", "job", "dep")}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": names["dep"]},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": names["dep"]}}, "template": {
            "metadata": {"labels": {"app": names["dep"]}}, "spec": {"containers": [{"name": "c", "image": "example/c:1"}]}}},
    }  # fmt: skip
    delays = ";".join(f"{kind}:{DELAY_S}" for kind in ("raycluster", "dgd", "rayjob", "deployment"))
    with sandbox.fault("delay", delays):
        before = time.time()
        custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", {
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": names["rc"]}, "spec": ray_cluster_spec()})  # fmt: skip
        custom.create_namespaced_custom_object("nvidia.com", "v1alpha1", NS, "dynamographdeployments", dgd(names["dgd"]))
        custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", rayjob(names["job"], "true"))
        apps.create_namespaced_deployment(sandbox_namespace, deployment)
        served = eventually(lambda: proxy(api, "GET", NS, f"{names['dgd']}-frontend:8000", "v1/models")[0] == 200 and time.time(),
                            what="the DGD's frontend serving")  # fmt: skip
        cluster = observe(custom.list_namespaced_custom_object, "ray.io", "v1", NS, "rayclusters",
                          field_selector=f"metadata.name={names['rc']}",
                          until=lambda o: field(o.get(names["rc"]), "status", "state") == "ready")[names["rc"]]
        graph = observe(custom.list_namespaced_custom_object, "nvidia.com", "v1alpha1", NS, "dynamographdeployments",
                        field_selector=f"metadata.name={names['dgd']}",
                        until=lambda o: field(o.get(names["dgd"]), "status", "state") == "successful")[names["dgd"]]
        job = observe(custom.list_namespaced_custom_object, "ray.io", "v1", NS, "rayjobs",
                      field_selector=f"metadata.name={names['job']}",
                      until=lambda o: bool(field(o.get(names["job"]), "status", "startTime")))[names["job"]]
        ready = observe(apps.list_namespaced_deployment, sandbox_namespace, field_selector=f"metadata.name={names['dep']}",
                        until=lambda o: condition(o.get(names["dep"]) or {}, "Available").get("status") == "True")[names["dep"]]
    assert served - before >= DELAY_S
    assert _since_creation(cluster, condition(cluster, "RayClusterProvisioned")["lastTransitionTime"]) >= DELAY_S
    assert _since_creation(graph, condition(graph, "Ready")["lastTransitionTime"]) >= DELAY_S
    assert _since_creation(job, job["status"]["startTime"]) >= DELAY_S  # KubeRay first reconciles it after the delay
    assert _since_creation(ready, condition(ready, "Available")["lastTransitionTime"]) >= DELAY_S
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", names["rc"])
    custom.delete_namespaced_custom_object("nvidia.com", "v1alpha1", NS, "dynamographdeployments", names["dgd"])
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", names["job"])


BAD_DELAYS = {"unknown-kind": "pod=3", "not-a-number": "dgd=soon", "negative": "raycluster=-1", "no-seconds": "dgd"}


@pytest.mark.parametrize("spec", BAD_DELAYS.values(), ids=BAD_DELAYS.keys())
def test_a_bad_delay_exits_2_with_one_line_and_starts_nothing(tmp_path, spec):
    result = nrl_k8s("sandbox", "up", "--dir", str(tmp_path), "--delay", "dgd=1", "--delay", spec, check=False)
    assert result.returncode == 2, result.stderr
    error, hint = result.stderr.splitlines()
    assert error == (f"error: --delay {spec}: expected KIND=SECONDS with KIND one of dgd, raycluster, deployment, rayjob "
                     "and SECONDS a number >= 0")
    assert hint == "hint: e.g. --delay dgd=20 --delay raycluster=15"
    assert result.stdout == "" and not (tmp_path / "daemon.pid").exists()


def test_sandbox_up_delay_flags_reach_the_running_sandbox(tmp_path):
    directory = tmp_path / "delayed"
    nrl_k8s("sandbox", "up", "--dir", str(directory), "--delay", "dgd=20", "--delay", "raycluster=1.5")
    try:
        report = json.loads(nrl_k8s("sandbox", "status", "--dir", str(directory), "-o", "json").stdout)
    finally:
        nrl_k8s("sandbox", "down", "--dir", str(directory))
    assert report["faults"] == {"delay": "dgd:20;raycluster:1.5"}
