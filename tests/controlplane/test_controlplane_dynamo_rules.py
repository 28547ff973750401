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
WANTED = {part.name: deployment(DGD, part) for part in PARTS}


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


def _env(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_template_labels_and_env_over_the_operators_defaults():
    template = WANTED["Frontend"]["spec"]["template"]
    assert template["metadata"]["labels"]["team"] == "frontend"  # the component's own over the graph's
    assert template["metadata"]["annotations"] == {"note": "graph"}
    main, sidecar = template["spec"]["containers"]
    assert _env(main) == {
        "DYN_NAMESPACE": "ns-g", "DYN_COMPONENT": "frontend", "DYN_PARENT_DGD_K8S_NAME": "g",
        "DYN_PARENT_DGD_K8S_NAMESPACE": "ns", "POD_NAME": {"fieldRef": {"fieldPath": "metadata.name"}},
        "POD_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "POD_UID": {"fieldRef": {"fieldPath": "metadata.uid"}},
        "DYN_LOG": "info", "SHARED": "mine"}  # the container's own over the graph's over the operator's
    assert main["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert main["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert "env" not in sidecar and "ports" not in sidecar


def test_workers_get_the_system_server_on_9090():
    main = WANTED["VllmWorker"]["spec"]["template"]["spec"]["containers"][0]
    env = _env(main)
    assert (env["DYN_SYSTEM_ENABLED"], env["DYN_SYSTEM_PORT"], env["DYN_COMPONENT"]) == ("true", "9090", "worker")
    assert env["DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS"] == '["generate"]'
    assert main["ports"] == [{"name": "system", "containerPort": 9090, "protocol": "TCP"}]
    assert main["readinessProbe"]["httpGet"] == {"path": "/health", "port": "system"}


def test_what_the_manifest_sets_wins():
    spec = {"components": [{"name": "W", "type": "worker", "podTemplate": {"spec": {"containers": [{
        "name": "main", "env": [{"name": "DYN_SYSTEM_PORT", "value": "9345"}],
        "ports": [{"name": "system", "containerPort": 9345}], "readinessProbe": {"exec": {"command": ["true"]}}}]}}}]}
    graph = {**DGD, "spec": spec}
    main = deployment(graph, components(spec)[0])["spec"]["template"]["spec"]["containers"][0]
    assert _env(main)["DYN_SYSTEM_PORT"] == "9345"
    assert main["ports"] == [{"name": "system", "containerPort": 9345}]
    assert main["readinessProbe"] == {"exec": {"command": ["true"]}}


def test_stuck_pods_get_a_node_selector_nothing_matches_and_a_new_hash():
    stuck = deployment(DGD, PARTS[1], stuck=True)
    assert stuck["spec"]["template"]["spec"]["nodeSelector"] == UNSCHEDULABLE
    assert stuck["metadata"]["annotations"][SPEC_HASH] != WANTED["VllmWorker"]["metadata"]["annotations"][SPEC_HASH]
    assert deployment(DGD, PARTS[1]) == deployment(DGD, PARTS[1])


def test_frontend_service():
    service = frontend_service(DGD, PARTS[0])
    assert service["metadata"]["name"] == "g-frontend"
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == {"nvidia.com/dynamo-graph-deployment-name": "g",
                                           "nvidia.com/dynamo-component": "Frontend"}
    assert service["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": 8000, "protocol": "TCP"}]


def test_a_frontend_with_rl_gets_its_rl_port_on_the_service():
    spec = {"env": [{"name": "DYN_ENABLE_RL", "value": "true"}],
            "components": [{"name": "Frontend", "type": "frontend", "podTemplate": {"spec": {"containers": [
                {"name": "main", "env": [{"name": "DYN_RL_PORT", "value": "8111"}]}]}}}]}
    service = frontend_service({**DGD, "spec": spec}, components(spec)[0])
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("http", 8000), ("rl", 8111)]


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
