"""The simulated Dynamo operator against a real `sandbox up`, driven with the official client."""

from __future__ import annotations

import json
from functools import partial

import httpx
import pytest
from kubernetes.client.exceptions import ApiException
from operator_helpers import condition, dgd, field, proxy
from sandbox_harness import History, eventually, observe, unique

NS = "default"
GROUP, VERSION, PLURAL = "nvidia.com", "v1alpha1", "dynamographdeployments"
BETA = "v1beta1"
LABEL = "nvidia.com/dynamo-graph-deployment-name"


@pytest.fixture(scope="module")
def dgds(custom):
    return partial(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL)


@pytest.fixture(scope="module")
def beta_dgds(custom):
    return partial(custom.list_namespaced_custom_object, GROUP, BETA, NS, PLURAL)


def state_is(name: str, *states: str):
    return lambda objects: field(objects.get(name), "status", "state") in states


def pods_of(core, name: str) -> list[dict]:
    return json.loads(core.list_namespaced_pod(NS, label_selector=f"{LABEL}={name}", _preload_content=False).data)["items"]


def by_component(core, name: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for pod in pods_of(core, name):
        found.setdefault(pod["metadata"]["labels"]["nvidia.com/dynamo-component"], set()).add(pod["metadata"]["name"])
    return found


def components_shape(name: str) -> dict:
    """A v1beta1 graph (``spec.components``) with a two-node worker."""
    return {
        "apiVersion": f"{GROUP}/{BETA}",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name},
        "spec": {
            "components": [
                {"name": "Frontend", "type": "frontend", "replicas": 1,
                 "podTemplate": {"spec": {"containers": [{"name": "main", "image": "dynamo", "args": ["--served-model-name", "m-beta"]}]}}},
                {"name": "Worker", "type": "worker", "replicas": 1, "multinode": {"nodeCount": 2},
                 "podTemplate": {"spec": {"containers": [{"name": "main", "image": "dynamo"}]}}},
            ]
        },
    }  # fmt: skip


def counts(name: str, replicas: dict[str, tuple[int, str]]) -> dict:
    return {part: {"componentKind": kind, "componentNames": [f"{name}-{part.lower()}"], "replicas": n,
                   "updatedReplicas": n, "readyReplicas": n, "availableReplicas": n}
            for part, (n, kind) in replicas.items()}


# manifest, the version it is created in, replicas per part (and how the operator runs it), pods, model
CASES = {
    "created-as-v1alpha1": (lambda name: dgd(name, worker_replicas=2), VERSION,
                            {"Frontend": (1, "Deployment"), "VllmDecodeWorker": (2, "Deployment")},
                            {"Frontend": 1, "VllmDecodeWorker": 2}, "Qwen/Qwen3-0.6B"),
    "created-as-v1beta1": (components_shape, BETA, {"Frontend": (1, "Deployment"), "Worker": (1, "LeaderWorkerSet")},
                           {"Frontend": 1, "Worker": 2}, "m-beta"),
}


@pytest.mark.parametrize("manifest, version, replicas, pod_counts, model", CASES.values(), ids=CASES.keys())
def test_dgd_becomes_successful_with_labelled_pods_and_a_reachable_frontend(api, core, custom, beta_dgds, manifest,
                                                                            version, replicas, pod_counts, model):
    name = unique("dgd")
    created = custom.create_namespaced_custom_object(GROUP, version, NS, PLURAL, manifest(name))

    graph = observe(beta_dgds, field_selector=f"metadata.name={name}", until=state_is(name, "successful"))[name]
    ready = condition(graph, "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == ("True", "all_resources_are_ready", "All resources are ready")
    assert graph["status"]["observedGeneration"] == graph["metadata"]["generation"]
    assert graph["status"]["components"] == counts(name, replicas)
    # The same object read in the other version: the per-part counts are under status.services.
    alpha = custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
    assert alpha["status"]["services"] == counts(name, replicas) and "components" not in alpha["status"]
    pods = pods_of(core, name)
    assert {part: len(names) for part, names in by_component(core, name).items()} == pod_counts
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels["nvidia.com/dynamo-component-type"] in ("frontend", "worker")
        assert pod["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
        assert pod["status"]["phase"] == "Running" and all(c["ready"] for c in pod["status"]["containerStatuses"])
        assert [c["name"] for c in pod["spec"]["containers"]][0] == "main"

    service = core.read_namespaced_service(f"{name}-frontend", NS)
    assert [p.port for p in service.spec.ports] == [8000]
    code, body = proxy(api, "GET", NS, f"{name}-frontend:8000", "v1/models")
    assert (code, json.loads(body)["data"][0]["id"]) == (200, model)
    code, body = proxy(api, "GET", NS, f"{name}-frontend:8000", "health")
    assert (code, json.loads(body)["status"]) == (200, "healthy")
    assert proxy(api, "GET", NS, f"{name}-frontend:8000", "live")[0] == 200

    custom.delete_namespaced_custom_object(GROUP, version, NS, PLURAL, name)
    observe(core.list_namespaced_pod, NS, label_selector=f"{LABEL}={name}", until=lambda o: not o)
    observe(core.list_namespaced_service, NS, field_selector=f"metadata.name={name}-frontend", until=lambda o: not o)


def _settled(name: str, generation: int):
    return lambda o: state_is(name, "successful")(o) and field(o[name], "status", "observedGeneration") == generation


def test_a_replica_change_of_one_component_touches_only_its_pods(core, custom, dgds):
    name = unique("scale")
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, dgd(name))
    observe(dgds, field_selector=f"metadata.name={name}", until=state_is(name, "successful"))
    first = by_component(core, name)

    patch = {"spec": {"services": {"VllmDecodeWorker": {"replicas": 3}}}}
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, patch, _content_type="application/merge-patch+json")
    graph = observe(dgds, field_selector=f"metadata.name={name}", until=_settled(name, 2))[name]
    assert graph["status"]["services"]["VllmDecodeWorker"]["readyReplicas"] == 3
    now = by_component(core, name)
    assert now["Frontend"] == first["Frontend"]  # the other component kept its pod
    assert first["VllmDecodeWorker"] < now["VllmDecodeWorker"] and len(now["VllmDecodeWorker"]) == 3
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)


def test_a_template_change_of_one_component_replaces_only_its_pods(core, custom, beta_dgds):
    name = unique("tmpl")
    custom.create_namespaced_custom_object(GROUP, BETA, NS, PLURAL, components_shape(name))
    observe(beta_dgds, field_selector=f"metadata.name={name}", until=state_is(name, "successful"))
    first = by_component(core, name)

    graph = custom.get_namespaced_custom_object(GROUP, BETA, NS, PLURAL, name)
    graph["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]["args"] = ["--new"]
    custom.replace_namespaced_custom_object(GROUP, BETA, NS, PLURAL, name, graph)
    observe(beta_dgds, field_selector=f"metadata.name={name}", until=_settled(name, 2))
    now = by_component(core, name)
    assert now["Frontend"] == first["Frontend"]
    assert len(now["Worker"]) == 2 and not now["Worker"] & first["Worker"]
    custom.delete_namespaced_custom_object(GROUP, BETA, NS, PLURAL, name)


def test_fault_dgd_failed_reports_failed_with_a_message(sandbox, custom, dgds):
    name = unique("failed")
    with sandbox.fault("dgd-failed", "simulated: bad backendFramework"):
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, dgd(name))
        graph = observe(dgds, field_selector=f"metadata.name={name}", until=state_is(name, "failed", "successful"))[name]
    ready = condition(graph, "Ready")
    assert (graph["status"]["state"], ready["status"], ready["message"]) == ("failed", "False", "simulated: bad backendFramework")
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)


def test_fault_dgd_stuck_pending_leaves_pods_unschedulable_with_an_event(sandbox, core, custom, dgds):
    name = unique("stuck")
    with sandbox.fault("dgd-stuck-pending"):
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, dgd(name))
        pods = observe(
            core.list_namespaced_pod, NS, label_selector=f"{LABEL}={name}",
            until=lambda o: len(o) == 2 and all(condition(p, "PodScheduled").get("status") == "False" for p in o.values()),
        )  # fmt: skip
    for pod in pods.values():
        scheduled = condition(pod, "PodScheduled")
        assert (pod["status"]["phase"], scheduled["reason"]) == ("Pending", "Unschedulable")
        assert "Insufficient nvidia.com/gpu" in scheduled["message"]
    events = json.loads(core.list_namespaced_event(NS, _preload_content=False).data)["items"]
    failed = [e for e in events if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] in pods]
    assert {e["involvedObject"]["name"] for e in failed} == set(pods)
    assert all(e["type"] == "Warning" and e["involvedObject"]["kind"] == "Pod" for e in failed)
    # the operator reports the pods' state on the graph after it sees them
    graph = observe(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL, field_selector=f"metadata.name={name}",
                    until=lambda o: (o.get(name) or {}).get("status", {}).get("state") == "pending")[name]
    ready = condition(graph, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "insufficient_capacity")
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)


def test_fault_frontend_unavailable_answers_503_then_200(sandbox, api, core, custom, dgds):
    name = unique("warmup")
    with sandbox.fault("frontend-unavailable", "10"):
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, dgd(name))
        observe(core.list_namespaced_service, NS, field_selector=f"metadata.name={name}-frontend", until=bool)
    # The stub answers 503 for 10 s after it starts, and its Service is created right after it:
    # this first request lands within that window on any machine (it takes milliseconds here).
    code, body = proxy(api, "GET", NS, f"{name}-frontend:8000", "v1/models")
    assert (code, json.loads(body)["error"]["message"]) == (503, "frontend is starting (sandbox: not serving yet)")
    eventually(lambda: proxy(api, "GET", NS, f"{name}-frontend:8000", "v1/models")[0] == 200, what="frontend 200")
    observe(dgds, field_selector=f"metadata.name={name}", until=state_is(name, "successful"))
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)


def test_fault_slow_holds_pods_back(sandbox, core, custom, dgds):
    name = unique("slow")
    with sandbox.fault("slow", "1000"), History(dgds, field_selector=f"metadata.name={name}") as history:
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, dgd(name))
        history.wait(lambda h: state_is(name, "pending")(h.objects()), what="state pending")
        observe(core.list_namespaced_pod, NS, label_selector=f"{LABEL}={name}", until=lambda o: len(o) == 2)
        history.holds(state_is(name, "pending"), seconds=3)
    assert all(p["status"]["phase"] == "Pending" for p in pods_of(core, name))
    ready = condition(custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name), "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "pods_not_ready")
    assert ready["message"] == "Resources not ready: Frontend: 0/1 replicas ready; VllmDecodeWorker: 0/1 replicas ready"
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)


def test_deleted_dgd_stops_its_stub(api, core, custom, dgds):
    name = unique("gone")
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, dgd(name))
    observe(dgds, field_selector=f"metadata.name={name}", until=state_is(name, "successful"))
    endpoints = json.loads(core.read_namespaced_service(f"{name}-frontend", NS).metadata.annotations["sandbox.nrl-k8s.io/endpoints"])
    stub = endpoints["8000"]

    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
    observe(dgds, field_selector=f"metadata.name={name}", until=lambda o: not o)

    def refused() -> bool:
        try:
            httpx.get(f"{stub}/live", trust_env=False, timeout=2)
        except httpx.TransportError:
            return True
        return False

    eventually(refused, what="stub stopped")
    with pytest.raises(ApiException) as gone:
        custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
    assert gone.value.status == 404
