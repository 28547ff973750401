"""Per-kind readiness delays (the ``delay`` fault, ``sandbox up --delay KIND=SECONDS``) on a real sandbox.

Only lower bounds are asserted: an object is never ready before its delay, however fast or slow
the machine; the timestamps compared are the API server's own (second precision, so a gap of
at least ``DELAY_S`` seconds shows as at least ``DELAY_S``).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from kubernetes import client
from operator_helpers import condition, dgd, field, ray_cluster_spec, rayjob
from sandbox_harness import History, nrl_k8s, observe, unique

DELAY_S = 3


def _stamp(value: str) -> float:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _since_creation(obj: dict, stamp: str) -> float:
    return _stamp(stamp) - _stamp(obj["metadata"]["creationTimestamp"])


#: ``sandbox up --delay KIND=SECONDS`` for every kind (one fractional, as a user may give it).
DELAYS = {"raycluster": f"{DELAY_S}", "dgd": f"{DELAY_S}", "rayjob": f"{DELAY_S}", "deployment": f"{DELAY_S}.5"}


def test_each_kind_becomes_ready_only_after_its_delay(separate_sandbox):
    """The ``--delay`` flags of ``sandbox up`` reach the running sandbox as the ``delay`` fault.
    kwok holds the pods it plays (a RayCluster's workers, a DGD's workers, a Deployment's pods)
    and the local kubelet the ones it runs (a Ray head, a DGD frontend, KubeRay's submitter).
    The delays are set at start: a change at run time reaches kwok's Stages a moment later."""
    flags = tuple(arg for kind, seconds in DELAYS.items() for arg in ("--delay", f"{kind}={seconds}"))
    with separate_sandbox(flags=flags) as box, box.api_client() as api:
        report = json.loads(nrl_k8s("sandbox", "status", "--dir", str(box.dir), "-o", "json").stdout)
        assert report["faults"] == {"delay": ";".join(f"{kind}:{seconds}" for kind, seconds in DELAYS.items())}
        _each_kind_waits(api, client.CoreV1Api(api), client.CustomObjectsApi(api))


def _each_kind_waits(api, core, custom) -> None:
    ns, apps = "default", client.AppsV1Api(api)
    names = {kind: unique(f"slow{kind}") for kind in ("rc", "dgd", "job", "dep")}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": names["dep"]},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": names["dep"]}}, "template": {
            "metadata": {"labels": {"app": names["dep"]}},
            "spec": {"containers": [{"name": "c", "image": "example/c:1"}]}}},
    }  # fmt: skip
    job = rayjob(names["job"], "true", submissionMode="K8sJobMode")
    submitter = History(core.list_namespaced_pod, ns, label_selector=f"batch.kubernetes.io/job-name={names['job']}")
    with submitter:
        custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", {
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": names["rc"]},
            "spec": ray_cluster_spec()})  # fmt: skip
        custom.create_namespaced_custom_object(
            "nvidia.com", "v1alpha1", ns, "dynamographdeployments", dgd(names["dgd"])
        )
        custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayjobs", job)
        apps.create_namespaced_deployment(ns, deployment)
        cluster = observe(
            custom.list_namespaced_custom_object,
            "ray.io",
            "v1",
            ns,
            "rayclusters",
            field_selector=f"metadata.name={names['rc']}",
            until=lambda o: condition(o.get(names["rc"]) or {}, "RayClusterProvisioned").get("status") == "True",
        )[names["rc"]]
        graph = observe(custom.list_namespaced_custom_object, "nvidia.com", "v1alpha1", ns, "dynamographdeployments",
                        field_selector=f"metadata.name={names['dgd']}",
                        until=lambda o: field(o.get(names["dgd"]), "status", "state") == "successful")[names["dgd"]]
        ready = observe(
            apps.list_namespaced_deployment,
            ns,
            field_selector=f"metadata.name={names['dep']}",
            until=lambda o: condition(o.get(names["dep"]) or {}, "Available").get("status") == "True",
        )[names["dep"]]
        started = submitter.wait(lambda h: any(field(o, "status", "startTime") for _, o in h.events()),
                                 what="KubeRay's submitter pod started")
        pod = next(o for _, o in started.events() if field(o, "status", "startTime"))
    assert _since_creation(cluster, condition(cluster, "RayClusterProvisioned")["lastTransitionTime"]) >= DELAY_S
    assert _since_creation(graph, condition(graph, "Ready")["lastTransitionTime"]) >= DELAY_S
    assert _since_creation(ready, condition(ready, "Available")["lastTransitionTime"]) >= DELAY_S
    assert _since_creation(pod, pod["status"]["startTime"]) >= DELAY_S


BAD_DELAYS = {"unknown-kind": "pod=3", "not-a-number": "dgd=soon", "negative": "raycluster=-1", "no-seconds": "dgd"}


@pytest.mark.parametrize("spec", BAD_DELAYS.values(), ids=BAD_DELAYS.keys())
def test_a_bad_delay_exits_2_with_one_line_and_starts_nothing(tmp_path, spec):
    result = nrl_k8s("sandbox", "up", "--dir", str(tmp_path), "--delay", "dgd=1", "--delay", spec, check=False)
    assert result.returncode == 2, result.stderr
    error, hint = result.stderr.splitlines()
    assert error == (
        f"error: --delay {spec}: expected KIND=SECONDS with KIND one of dgd, raycluster, deployment, rayjob "
        "and SECONDS a number >= 0"
    )
    assert hint == "hint: e.g. --delay dgd=20 --delay raycluster=15"
    assert result.stdout == "" and not (tmp_path / "daemon.pid").exists()
