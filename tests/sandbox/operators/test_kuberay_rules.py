"""KubeRay's validation rules (``kuberay_rules``), with its messages; no sandbox needed."""

from __future__ import annotations

import pytest
from operator_helpers import ray_cluster_spec

from nrl_k8s.sandbox.operators.kuberay_rules import dns1035_errors, raycluster_problem, rayjob_problem

SPEC = "InvalidRayJobSpec"
INVALID = "The RayJob spec is invalid: "


def job(name: str = "train", mode: str = "K8sJobMode", status: dict | None = None, **spec) -> dict:
    body = {"shutdownAfterJobFinishes": True, "rayClusterSpec": ray_cluster_spec(), **spec}
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {k: v for k, v in body.items() if v is not None},
            "status": status or {}}


def worker(**group) -> dict:
    spec = ray_cluster_spec()
    spec["workerGroupSpecs"][0].update(group)
    return spec


RAYJOBS = {
    "valid": (job(), "K8sJobMode", None),
    "valid-47": (job("j" * 47), "K8sJobMode", None),
    "valid-interactive-waiting": (job(status={"jobDeploymentStatus": "Waiting"}), "InteractiveMode", None),
    "name-48": (job("j" * 48), "K8sJobMode",
                ("InvalidRayJobMetadata", "The RayJob metadata is invalid: RayJob name should be no more than 47 characters")),
    "name-dot": (job("train.v2"), "K8sJobMode",
                 ("InvalidRayJobMetadata", "The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: "
                  "[a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
                  "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
                  "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')]")),
    "suspend-without-shutdown": (job(suspend=True, shutdownAfterJobFinishes=False), "K8sJobMode",
                                 (SPEC, INVALID + "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended")),
    "ttl-without-shutdown": (job(ttlSecondsAfterFinished=60, shutdownAfterJobFinishes=False), "K8sJobMode",
                             (SPEC, INVALID + "a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished")),
    "negative-ttl": (job(ttlSecondsAfterFinished=-1), "K8sJobMode", (SPEC, INVALID + "TTLSecondsAfterFinished must be a non-negative integer")),
    "rules-and-shutdown": (job(deletionStrategy={"deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED"}}]}),
                           "K8sJobMode", (SPEC, INVALID + "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive")),
    "no-cluster": (job(rayClusterSpec=None), "K8sJobMode", (SPEC, INVALID + "one of RayClusterSpec or ClusterSelector must be set")),
    "selector-suspend": (job(clusterSelector={"ray.io/cluster": "c"}, suspend=True), "K8sJobMode",
                         (SPEC, INVALID + "the ClusterSelector mode doesn't support the suspend operation")),
    "selector-empty-name": (job(clusterSelector={"app": "c"}), "K8sJobMode", (SPEC, "cluster name in ClusterSelector should not be empty")),
    "interactive-backoff": (job(backoffLimit=1), "InteractiveMode", (SPEC, INVALID + "BackoffLimit is incompatible with InteractiveMode")),
    "sidecar-template": (job(submitterPodTemplate={}), "SidecarMode", (SPEC, "Currently, SidecarMode doesn't support SubmitterPodTemplate")),
    "no-head-container": (job(rayClusterSpec={"headGroupSpec": {"template": {"spec": {}}}}), "K8sJobMode",
                          (SPEC, INVALID + "headGroupSpec should have at least one container")),
    "min-over-max": (job(rayClusterSpec=worker(minReplicas=3, maxReplicas=2)), "K8sJobMode",
                     (SPEC, INVALID + "worker group workers has minReplicas 3 greater than maxReplicas 2")),
    "bad-runtime-env": (job(runtimeEnvYAML="- a list"), "K8sJobMode",
                        (SPEC, "failed to unmarshal RuntimeEnvYAML: - a list: cannot unmarshal list into a map")),
    "zero-active-deadline": (job(activeDeadlineSeconds=0), "K8sJobMode", (SPEC, INVALID + "activeDeadlineSeconds must be a positive integer")),
    "zero-pre-running": (job(preRunningDeadlineSeconds=0), "InteractiveMode", (SPEC, INVALID + "preRunningDeadlineSeconds must be a positive integer")),
    "negative-backoff": (job(backoffLimit=-1), "K8sJobMode", (SPEC, INVALID + "backoffLimit must be a positive integer")),
    "waiting-not-interactive": (job(status={"jobDeploymentStatus": "Waiting"}), "HTTPMode",
                                ("InvalidRayJobStatus", "The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` "
                                 "when SubmissionMode is not InteractiveMode")),
}


@pytest.mark.parametrize("obj, mode, expected", RAYJOBS.values(), ids=RAYJOBS.keys())
def test_rayjob_rules(obj, mode, expected):
    assert rayjob_problem(obj, mode) == expected


def test_kuberay_1_5_knows_no_pre_running_deadline():
    assert rayjob_problem(job(preRunningDeadlineSeconds=0), "K8sJobMode", pre_running_deadline=False) is None


def test_raycluster_rules():
    def cluster(name: str, spec: dict) -> dict:
        return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec}

    assert raycluster_problem(cluster("c" * 53, ray_cluster_spec())) is None
    assert raycluster_problem(cluster("c" * 54, ray_cluster_spec())) == (
        "InvalidRayClusterMetadata", "The RayCluster metadata is invalid ns/" + "c" * 54 + ": RayCluster name should be no more than 53 characters")
    assert raycluster_problem(cluster("c", worker(minReplicas=-1))) == (
        "InvalidRayClusterSpec", "The RayCluster spec is invalid ns/c: worker group workers has negative minReplicas -1")


def test_dns1035():
    assert dns1035_errors("a-1") == []
    assert [len(dns1035_errors(n)) for n in ("1a", "a-", "a" * 64, "A")] == [1, 1, 1, 1]
    assert dns1035_errors("a" * 64)[0] == "must be no more than 63 characters"
