"""The Dynamo controller, the DGD conversion webhook and the ComputeDomain controller on the real
control plane (the session's sandbox): DGDs become Deployments that the real controller-manager,
scheduler and kwok (or the local kubelet, for the frontend) bring up; one object readable in both
versions; the status as the real operator writes it; garbage collection; the faults.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from sandbox_harness import eventually, observe, unique

GROUP, ALPHA, BETA, PLURAL = "nvidia.com", "v1alpha1", "v1beta1", "dynamographdeployments"
LABEL_DGD = "nvidia.com/dynamo-graph-deployment-name"
GOLDEN = Path(__file__).parent.parent / "golden"
MODEL = "Qwen/Qwen3-0.6B"


def graph(name: str) -> dict:
    """A v1beta1 DGD: a frontend and a two-node GPU worker serving ``MODEL``."""
    return {
        "apiVersion": f"{GROUP}/{BETA}", "kind": "DynamoGraphDeployment", "metadata": {"name": name},
        "spec": {"backendFramework": "vllm", "components": [
            {"name": "Frontend", "type": "frontend", "replicas": 1, "podTemplate": {"spec": {"containers": [
                {"name": "main", "image": "dynamo:1", "command": ["python3", "-m", "dynamo.frontend"]}]}}},
            {"name": "VllmWorker", "type": "worker", "replicas": 1, "multinode": {"nodeCount": 2},
             "podTemplate": {"spec": {"containers": [
                 {"name": "main", "image": "dynamo:1", "args": ["--model", MODEL],
                  "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}},
        ]},
    }  # fmt: skip


@pytest.fixture(scope="module")
def api(sandbox) -> Iterator[client.ApiClient]:
    with sandbox.api_client() as api:
        yield api


@pytest.fixture
def namespace(api) -> Iterator[str]:
    core = client.CoreV1Api(api)
    name = unique("dyn")
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def create(api, namespace: str, body: dict) -> dict:
    group, version = body["apiVersion"].split("/")
    return client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, namespace, PLURAL, body)


def served(obj: dict) -> bool:
    """The operator gate nrl-k8s waits on: successful, Ready, for the current generation."""
    status = obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
    return (status.get("state") == "successful" and ready.get("status") == "True"
            and status.get("observedGeneration") == obj["metadata"]["generation"])


def watch_dgd(api, namespace: str, name: str, until, version: str = BETA) -> dict:
    """List then watch the DGD (in ``version``) until ``until(dgd)`` holds; return it."""
    found = observe(client.CustomObjectsApi(api).list_namespaced_custom_object, GROUP, version, namespace, PLURAL,
                    field_selector=f"metadata.name={name}", until=lambda objs: name in objs and until(objs[name]))
    return found[name]


def deployments(api, namespace: str, name: str, until=lambda found: True) -> dict[str, dict]:
    return observe(client.AppsV1Api(api).list_namespaced_deployment, namespace, label_selector=f"{LABEL_DGD}={name}",
                   until=until)


def test_a_v1alpha1_dgd_is_stored_in_v1beta1_and_read_back_as_written(api, namespace):
    alpha = next(doc for doc in yaml.safe_load_all((GOLDEN / "dgd.qwen3_0.6b_kind.yaml").read_text()) if doc)
    alpha["metadata"]["namespace"] = namespace
    name = alpha["metadata"]["name"]
    create(api, namespace, copy.deepcopy(alpha))
    custom = client.CustomObjectsApi(api)
    beta = custom.get_namespaced_custom_object(GROUP, BETA, namespace, PLURAL, name)
    assert "services" not in beta["spec"]
    assert [c["name"] for c in beta["spec"]["components"]] == ["Frontend", "VllmDecodeWorker"]
    assert custom.get_namespaced_custom_object(GROUP, ALPHA, namespace, PLURAL, name)["spec"] == alpha["spec"]
    # the status the controller writes in v1beta1, watched in v1alpha1: converted on the way out
    seen = watch_dgd(api, namespace, name, served, version=ALPHA)
    assert seen["apiVersion"] == f"{GROUP}/{ALPHA}"
    assert seen["status"]["services"]["VllmDecodeWorker"]["readyReplicas"] == 1
    assert "components" not in seen["status"]


def test_a_dgd_runs_as_deployments_and_its_frontend_serves(api, namespace):
    name = unique("g")
    dgd = create(api, namespace, graph(name))
    assert dgd["apiVersion"] == f"{GROUP}/{BETA}"
    ready = watch_dgd(api, namespace, name, served)
    [condition] = ready["status"]["conditions"]
    assert condition["reason"] == "all_resources_are_ready"
    assert ready["status"]["components"]["VllmWorker"] == {
        "componentKind": "Deployment", "componentNames": [f"{name}-vllmworker"], "replicas": 1,
        "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}

    found = deployments(api, namespace, name)
    assert {n: d["spec"]["replicas"] for n, d in found.items()} == {f"{name}-frontend": 1, f"{name}-vllmworker": 2}
    for deployment in found.values():
        [owner] = deployment["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (
            "DynamoGraphDeployment",
            dgd["metadata"]["uid"],
            True,
        )

    core = client.CoreV1Api(api)
    pods = json.loads(core.list_namespaced_pod(namespace, label_selector=f"{LABEL_DGD}={name}",
                                               _preload_content=False).data)["items"]
    kinds = sorted(p["metadata"]["labels"]["nvidia.com/dynamo-component-type"] for p in pods)
    assert kinds == ["frontend", "worker", "worker"]
    assert all(p["status"]["phase"] == "Running" and p["spec"]["nodeName"] for p in pods)
    assert all(any(o["kind"] == "ReplicaSet" for o in p["metadata"]["ownerReferences"]) for p in pods)

    service = json.loads(core.read_namespaced_service(f"{name}-frontend", namespace, _preload_content=False).data)
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": 8000, "protocol": "TCP"}]
    models = eventually(lambda: _models(core, namespace, f"{name}-frontend"), what="the frontend's /v1/models")
    assert [m["id"] for m in models["data"]] == [MODEL]

    events = json.loads(core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}",
                                                   _preload_content=False).data)["items"]
    assert {e["reason"] for e in events} >= {"CreateDynamoComponentDeployment", "CreateService"}


def _models(core: client.CoreV1Api, namespace: str, service: str) -> dict | None:
    """GET /v1/models through the API server's service proxy; None until it lists a model (Dynamo's
    frontend lists none until a worker registered with it)."""
    try:
        models = json.loads(core.connect_get_namespaced_service_proxy_with_path(
            f"{service}:8000", namespace, "v1/models", _preload_content=False).data)
    except client.ApiException:
        return None
    return models if models.get("data") else None


def test_a_new_generation_updates_the_deployments(api, namespace):
    name = unique("g")
    create(api, namespace, graph(name))
    watch_dgd(api, namespace, name, served)
    patch = [{"op": "replace", "path": "/spec/components/1/replicas", "value": 2}]
    client.CustomObjectsApi(api).patch_namespaced_custom_object(GROUP, BETA, namespace, PLURAL, name, patch,
                                                                 _content_type="application/json-patch+json")
    updated = watch_dgd(api, namespace, name, lambda d: served(d) and d["metadata"]["generation"] == 2)
    assert updated["status"]["components"]["VllmWorker"]["readyReplicas"] == 2
    found = deployments(api, namespace, name)
    assert found[f"{name}-vllmworker"]["spec"]["replicas"] == 4


def test_deleting_a_dgd_collects_what_it_made(api, namespace):
    name = unique("g")
    create(api, namespace, graph(name))
    watch_dgd(api, namespace, name, served)
    client.CustomObjectsApi(api).delete_namespaced_custom_object(GROUP, BETA, namespace, PLURAL, name)
    deployments(api, namespace, name, until=lambda found: not found)  # the real garbage collector
    observe(client.CoreV1Api(api).list_namespaced_service, namespace, until=lambda services: not services)


def test_a_compute_domain_gets_its_channel_claim_template_and_becomes_ready(api, namespace):
    custom = client.CustomObjectsApi(api)
    domain = custom.create_namespaced_custom_object("resource.nvidia.com", "v1beta1", namespace, "computedomains", {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain", "metadata": {"name": "imex"},
        "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "imex-channel"}}}})
    observe(custom.list_namespaced_custom_object, "resource.nvidia.com", "v1beta1", namespace, "computedomains",
            until=lambda found: (found.get("imex", {}).get("status") or {}).get("status") == "Ready")
    template = custom.get_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaimtemplates",
                                                   "imex-channel")
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "compute-domain-default-channel.nvidia.com"
    [owner] = template["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("ComputeDomain", domain["metadata"]["uid"])


def test_dgd_stuck_pending_leaves_the_pods_unschedulable(sandbox, api, namespace):
    name = unique("g")
    with sandbox.fault("dgd-stuck-pending"):  # it applies to the DGD generations created meanwhile
        create(api, namespace, graph(name))
        stuck = watch_dgd(api, namespace, name, lambda d: (d.get("status") or {}).get("state") == "pending"
                          and d["status"]["conditions"][0]["reason"] == "insufficient_capacity")
    assert stuck["status"]["conditions"][0]["status"] == "False"
    core = client.CoreV1Api(api)
    events = observe(core.list_namespaced_event, namespace, field_selector="reason=FailedScheduling",
                     until=lambda found: len({e["involvedObject"]["name"] for e in found.values()}) == 3)
    assert {e["reportingComponent"] for e in events.values()} == {"default-scheduler"}  # the real scheduler
    pods = json.loads(core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    assert [p["status"]["phase"] for p in pods] == ["Pending"] * 3 and not any(p["spec"].get("nodeName") for p in pods)


def test_dgd_failed_fails_the_graph_with_a_warning(sandbox, api, namespace):
    name = unique("g")
    with sandbox.fault("dgd-failed"):
        create(api, namespace, graph(name))
        failed = watch_dgd(api, namespace, name, lambda d: (d.get("status") or {}).get("state") == "failed")
    [condition] = failed["status"]["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "reconcile_failed")
    assert not deployments(api, namespace, name)
    warnings = observe(client.CoreV1Api(api).list_namespaced_event, namespace,
                       field_selector=f"involvedObject.name={name},type=Warning", until=bool)
    assert [e["reason"] for e in warnings.values()] == ["CreateDynamoComponentDeployment"]
