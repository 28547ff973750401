"""The real-control-plane Dynamo controller's pure rules (no cluster): the Deployment and Service
each component gets, and the status the Deployments' own status gives."""

from __future__ import annotations

import pytest

from nrl_k8s_sandbox.controlplane.dynamo import (
    SPEC_HASH,
    UNSCHEDULABLE,
    components,
    deployment,
    frontend_service,
    rollout_status,
)
from nrl_k8s_sandbox.controlplane.kubelet import MODEL_ANNOTATION

DGD = {
    "apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment",
    "metadata": {"name": "g", "namespace": "ns", "uid": "uid-1", "generation": 3},
    "spec": {
        "env": [{"name": "DYN_LOG", "value": "info"}, {"name": "SHARED", "value": "graph"}],
        "labels": {"team": "rl"}, "annotations": {"note": "graph"},
        "components": [
            {"name": "Frontend", "type": "frontend", "replicas": 1, "podTemplate": {
                "metadata": {"labels": {"team": "frontend"}},
                "spec": {"containers": [{"name": "main", "image": "dynamo:1",
                                         "command": ["python3", "-m", "dynamo.frontend"],
                                         "env": [{"name": "SHARED", "value": "mine"}]},
                                        {"name": "sidecar", "image": "busybox"}]}}},
            {"name": "VllmWorker", "type": "worker", "replicas": 2, "multinode": {"nodeCount": 2}, "podTemplate": {
                "spec": {"containers": [{"name": "main", "image": "dynamo:1",
                                         "args": ["--model", "Qwen/Qwen3-0.6B"]}]}}},
        ],
    },
}  # fmt: skip
PARTS = components(DGD["spec"])
WANTED = {part.name: deployment(DGD, part, "Qwen/Qwen3-0.6B") for part in PARTS}


def test_a_deployment_per_component():
    front, worker = WANTED["Frontend"], WANTED["VllmWorker"]
    assert (front["metadata"]["name"], worker["metadata"]["name"]) == ("g-frontend", "g-vllmworker")
    assert (front["spec"]["replicas"], worker["spec"]["replicas"]) == (1, 4)  # replicas × nodeCount
    labels = {"nvidia.com/dynamo-graph-deployment-name": "g", "nvidia.com/dynamo-component": "VllmWorker",
              "nvidia.com/dynamo-component-type": "worker"}
    assert worker["metadata"]["labels"] == labels
    assert worker["spec"]["template"]["metadata"]["labels"] == {"team": "rl", **labels}
    assert worker["spec"]["selector"] == {"matchLabels": {k: labels[k] for k in list(labels)[:2]}}
    [owner] = worker["metadata"]["ownerReferences"]
    assert owner == {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "name": "g", "uid": "uid-1",
                     "controller": True, "blockOwnerDeletion": True}


def test_template_labels_env_and_the_frontends_model():
    template = WANTED["Frontend"]["spec"]["template"]
    assert template["metadata"]["labels"]["team"] == "frontend"  # the component's own over the graph's
    assert template["metadata"]["annotations"] == {"note": "graph", MODEL_ANNOTATION: "Qwen/Qwen3-0.6B"}
    main, sidecar = template["spec"]["containers"]
    assert main["env"] == [{"name": "DYN_LOG", "value": "info"}, {"name": "SHARED", "value": "mine"}]
    assert "env" not in sidecar
    assert MODEL_ANNOTATION not in WANTED["VllmWorker"]["spec"]["template"]["metadata"]["annotations"]


def test_stuck_pods_get_a_node_selector_nothing_matches_and_a_new_hash():
    stuck = deployment(DGD, PARTS[1], "m", stuck=True)
    assert stuck["spec"]["template"]["spec"]["nodeSelector"] == UNSCHEDULABLE
    assert stuck["metadata"]["annotations"][SPEC_HASH] != WANTED["VllmWorker"]["metadata"]["annotations"][SPEC_HASH]
    assert deployment(DGD, PARTS[1], "m") == deployment(DGD, PARTS[1], "m")


def test_frontend_service():
    service = frontend_service(DGD, PARTS[0])
    assert service["metadata"]["name"] == "g-frontend"
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == {"nvidia.com/dynamo-graph-deployment-name": "g",
                                           "nvidia.com/dynamo-component": "Frontend"}
    assert service["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": 8000, "protocol": "TCP"}]


def applied(name: str, *, replicas: int, updated: int, ready: int, generation: int = 2, observed: int = 2,
            stale: bool = False) -> dict:
    """The Deployment of component ``name`` as the API server would return it."""
    obj = {**WANTED[name], "metadata": {**WANTED[name]["metadata"], "generation": generation}}
    if stale:
        obj["metadata"] = {**obj["metadata"], "annotations": {SPEC_HASH: "an-older-one"}}
    obj["status"] = {"observedGeneration": observed, "replicas": replicas, "updatedReplicas": updated,
                     "readyReplicas": ready, "availableReplicas": ready}
    return obj


def pod(component: str, *, scheduled: bool) -> dict:
    return {"metadata": {"labels": {"nvidia.com/dynamo-component": component}},
            "status": {"conditions": [{"type": "PodScheduled", "status": "True" if scheduled else "False"}]}}


def test_all_rolled_out_is_successful():
    status = rollout_status(PARTS, WANTED, {"Frontend": applied("Frontend", replicas=1, updated=1, ready=1),
                                            "VllmWorker": applied("VllmWorker", replicas=4, updated=4, ready=4)}, [], 3)
    assert status["state"] == "successful" and status["observedGeneration"] == 3
    [ready] = status["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "all_resources_are_ready")
    assert status["components"]["VllmWorker"] == {
        "componentKind": "Deployment", "componentNames": ["g-vllmworker"], "replicas": 2,
        "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}  # pods ÷ nodeCount


@pytest.mark.parametrize("worker, pods, reason", [
    (None, [], "pods_not_ready"),  # not created yet
    (dict(replicas=4, updated=4, ready=3), [], "pods_not_ready"),
    (dict(replicas=4, updated=4, ready=4, generation=3, observed=2), [], "pods_not_ready"),  # not observed yet
    (dict(replicas=4, updated=4, ready=2), [pod("VllmWorker", scheduled=False)], "insufficient_capacity"),
    (dict(replicas=6, updated=2, ready=4), [], "updating"),  # pods of the earlier template still run
    (dict(replicas=4, updated=4, ready=4, stale=True), [], "pods_not_ready"),  # this generation not applied yet
])
def test_not_ready_reasons(worker, pods, reason):
    have = {"Frontend": applied("Frontend", replicas=1, updated=1, ready=1)}
    if worker is not None:
        have["VllmWorker"] = applied("VllmWorker", **worker)
    status = rollout_status(PARTS, WANTED, have, pods, 3)
    [ready] = status["conditions"]
    assert (status["state"], ready["status"], ready["reason"]) == ("pending", "False", reason)
    assert ready["message"].startswith("Resources not ready: VllmWorker: ")


def test_components_not_ready_for_different_reasons():
    have = {"Frontend": applied("Frontend", replicas=1, updated=1, ready=0),
            "VllmWorker": applied("VllmWorker", replicas=4, updated=4, ready=0)}
    status = rollout_status(PARTS, WANTED, have, [pod("VllmWorker", scheduled=False)], 3)
    assert status["conditions"][0]["reason"] == "mixed_not_ready_reasons"
    assert status["conditions"][0]["message"] == ("Resources not ready: Frontend: 0/1 replicas ready; "
                                                  "VllmWorker: 0/2 replicas ready")
