"""The Events the simulated operators, scheduler and kubelet record, read as the API (and kubectl) serve them."""

from __future__ import annotations

import json
import shutil
from functools import partial

import pytest
from operator_helpers import dgd, field, rayjob
from sandbox_harness import Gate, observe, unique

NS = "default"


def events_of(core, kind: str, name: str):
    """A list call for the Events about one object (what ``kubectl describe`` asks for)."""
    return partial(core.list_namespaced_event, NS, field_selector=f"involvedObject.kind={kind},involvedObject.name={name}")


def by_reason(events: dict[str, dict]) -> dict[str, dict]:
    return {e["reason"]: e for e in events.values()}


def has(*reasons: str):
    return lambda events: set(reasons) <= set(by_reason(events))


def test_a_rayjobs_objects_carry_the_events_of_kuberay_the_scheduler_and_the_kubelet(sandbox, core, custom, tmp_path):
    name, gate = unique("evented"), Gate(tmp_path)
    job = custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", rayjob(name, gate.entrypoint()))
    running = observe(custom.list_namespaced_custom_object, "ray.io", "v1", NS, "rayjobs", field_selector=f"metadata.name={name}",
                      until=lambda o: field(o.get(name), "status", "jobStatus") == "RUNNING")[name]  # fmt: skip
    cluster_name = running["status"]["rayClusterName"]
    cluster = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", cluster_name)
    head = cluster["status"]["head"]["podName"]

    created = by_reason(observe(events_of(core, "RayJob", name), until=has("CreatedRayCluster")))["CreatedRayCluster"]
    assert (created["type"], created["message"]) == ("Normal", f"Created RayCluster {NS}/{cluster_name}")
    assert created["source"] == {"component": "rayjob-controller"} and created["reportingComponent"] == "rayjob-controller"
    assert created["involvedObject"]["uid"] == job["metadata"]["uid"] and created["involvedObject"]["resourceVersion"]
    assert created["count"] == 1 and created["firstTimestamp"] == created["lastTimestamp"]

    on_cluster = by_reason(observe(events_of(core, "RayCluster", cluster_name), until=has("CreatedHeadPod", "CreatedWorkerPod", "CreatedService")))
    assert on_cluster["CreatedHeadPod"]["message"] == f"Created head Pod {NS}/{head}"
    assert on_cluster["CreatedService"]["message"] == f"Created service {NS}/{cluster_name}-head-svc"
    assert {e["source"]["component"] for e in on_cluster.values()} == {"raycluster-controller"}

    on_head = by_reason(observe(events_of(core, "Pod", head), until=has("Scheduled", "Pulled", "Created", "Started")))
    assert on_head["Scheduled"]["message"] == f"Successfully assigned {NS}/{head} to sandbox"
    assert on_head["Scheduled"]["source"]["component"] == "default-scheduler"
    container = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["name"]
    assert on_head["Started"]["message"] == f"Started container {container}"
    assert on_head["Started"]["involvedObject"]["fieldPath"] == f"spec.containers{{{container}}}"
    assert on_head["Started"]["source"] == {"component": "kubelet", "host": "sandbox"}

    gate.open()
    deleted = by_reason(observe(events_of(core, "RayJob", name), until=has("DeletedRayCluster")))["DeletedRayCluster"]
    assert deleted["message"] == f"Deleted cluster {NS}/{cluster_name}"


def test_a_repeated_event_is_counted_on_one_event(custom, core):
    name = unique("invalid").ljust(48, "x")  # KubeRay re-validates on every reconcile: the same Warning again
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", rayjob(name, "true"))
    events = observe(events_of(core, "RayJob", name), until=lambda o: any(e.get("count", 0) >= 2 for e in o.values()))
    (event,) = events.values()
    assert (event["type"], event["reason"]) == ("Warning", "InvalidRayJobMetadata")
    assert event["message"] == f"{NS}/{name}: The RayJob metadata is invalid: RayJob name should be no more than 47 characters"
    assert event["firstTimestamp"] <= event["lastTimestamp"]
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", name)


def test_dynamo_and_deployment_controllers_record_their_events(sandbox, api, core, custom, sandbox_namespace):
    from kubernetes import client

    graph = unique("evdgd")
    custom.create_namespaced_custom_object("nvidia.com", "v1alpha1", NS, "dynamographdeployments", dgd(graph))
    expected = {("CreateService", f"Creating a new Service {NS}"), ("CreateService", f"Created Service {NS}"),
                ("CreateDynamoComponentDeployment", f"Created DynamoComponentDeployment {NS}")}
    on_dgd = observe(events_of(core, "DynamoGraphDeployment", graph),
                     until=lambda o: expected <= {(e["reason"], e["message"]) for e in o.values()})  # fmt: skip
    assert {e["source"]["component"] for e in on_dgd.values()} == {"dynamographdeployment"}
    custom.delete_namespaced_custom_object("nvidia.com", "v1alpha1", "default", "dynamographdeployments", graph)

    name = unique("evdep")
    labels = {"app": name}
    client.AppsV1Api(api).create_namespaced_deployment(sandbox_namespace, {
        "metadata": {"name": name}, "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "example/c:1"}]}}},
    })  # fmt: skip
    scaled = observe(partial(core.list_namespaced_event, sandbox_namespace, field_selector=f"involvedObject.name={name}"),
                     until=has("ScalingReplicaSet"))  # fmt: skip
    event = by_reason(scaled)["ScalingReplicaSet"]
    assert event["source"]["component"] == "deployment-controller"
    assert event["message"].startswith(f"Scaled up replica set {name}-") and event["message"].endswith(" from 0 to 2")


def test_an_unschedulable_pod_gets_a_failed_scheduling_warning(sandbox, core, custom):
    graph = unique("evstuck")
    with sandbox.fault("dgd-stuck-pending"):
        custom.create_namespaced_custom_object("nvidia.com", "v1alpha1", NS, "dynamographdeployments", dgd(graph))
        pods = observe(core.list_namespaced_pod, NS, label_selector=f"nvidia.com/dynamo-graph-deployment-name={graph}",
                       until=lambda o: len(o) == 2)  # fmt: skip
    for pod in pods:
        warning = by_reason(observe(events_of(core, "Pod", pod), until=has("FailedScheduling")))["FailedScheduling"]
        assert warning["type"] == "Warning" and "Insufficient nvidia.com/gpu" in warning["message"]
        assert warning["source"]["component"] == "default-scheduler"
    custom.delete_namespaced_custom_object("nvidia.com", "v1alpha1", NS, "dynamographdeployments", graph)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_get_events_and_describe_show_them(sandbox, core, custom):
    name = unique("kdescribe")
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", rayjob(name, "true", shutdownAfterJobFinishes=False))
    done = observe(custom.list_namespaced_custom_object, "ray.io", "v1", NS, "rayjobs", field_selector=f"metadata.name={name}",
                   until=lambda o: field(o.get(name), "status", "jobDeploymentStatus") == "Complete")[name]  # fmt: skip
    observe(events_of(core, "RayJob", name), until=has("CreatedRayCluster"))
    cluster = done["status"]["rayClusterName"]
    head = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", cluster)["status"]["head"]["podName"]
    observe(events_of(core, "Pod", head), until=has("Started"))

    listed = sandbox.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}")
    assert listed.stdout.splitlines()[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]  # the server's columns
    assert "CreatedRayCluster" in listed.stdout and f"Created RayCluster {NS}/{cluster}" in listed.stdout
    described = sandbox.kubectl("describe", "rayjob", name, "-n", NS).stdout
    events = described[described.index("Events:"):]
    assert "CreatedRayCluster" in events and "rayjob-controller" in events
    pod = sandbox.kubectl("describe", "pod", head, "-n", NS).stdout
    assert all(reason in pod[pod.index("Events:"):] for reason in ("Scheduled", "Pulled", "Created", "Started"))
    as_json = json.loads(sandbox.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={head}", "-o", "json").stdout)
    assert {e["reason"] for e in as_json["items"]} >= {"Scheduled", "Started"}
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", name)
