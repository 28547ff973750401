"""Watch through kubernetes.watch.Watch: event types, resume, 410 Gone, selectors, custom objects."""

from __future__ import annotations

import threading

import pytest
from kubernetes import watch
from kubernetes.client.rest import ApiException
from sandbox_harness import DEADLINE_S

DGD = ("nvidia.com", "v1alpha1", "default", "dynamographdeployments")


def _collect(stream, count: int) -> list[tuple[str, str]]:
    events = []
    for event in stream:
        obj = event["object"]
        name = obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name
        events.append((event["type"], name))
        if len(events) == count:
            break
    return events


def test_added_modified_deleted(core):
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    core.delete_namespaced_config_map("a", "default")
    stream = watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=int(DEADLINE_S))
    assert _collect(stream, 3) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_watch_without_resource_version_starts_with_existing_objects_then_follows(core):
    core.create_namespaced_config_map("default", {"metadata": {"name": "old"}})
    created = threading.Event()

    def writer():
        created.wait(DEADLINE_S)
        core.create_namespaced_config_map("default", {"metadata": {"name": "new"}})

    thread = threading.Thread(target=writer)
    thread.start()
    events = []
    for event in watch.Watch().stream(core.list_namespaced_config_map, "default", timeout_seconds=int(DEADLINE_S)):
        events.append((event["type"], event["object"].metadata.name))
        created.set()
        if len(events) == 2:
            break
    thread.join()
    assert events == [("ADDED", "old"), ("ADDED", "new")]


def test_resume_from_resource_version_replays_only_newer_events(core):
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    stream = watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=first.metadata.resource_version, timeout_seconds=int(DEADLINE_S))
    assert _collect(stream, 1) == [("ADDED", "b")]


def test_too_old_resource_version_raises_410(core):
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    for i in range(60):  # the fixture keeps 50 events of history
        core.patch_namespaced_config_map("a", "default", {"data": {"i": str(i)}})
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=first.metadata.resource_version, timeout_seconds=int(DEADLINE_S)):
            pass
    assert err.value.status == 410


def test_field_selector_watches_one_object(core):
    start = core.list_namespaced_config_map("default").metadata.resource_version
    for name in ("a", "b"):
        core.create_namespaced_config_map("default", {"metadata": {"name": name}})
    stream = watch.Watch().stream(
        core.list_namespaced_config_map, "default", field_selector="metadata.name=b", resource_version=start, timeout_seconds=int(DEADLINE_S)
    )
    assert _collect(stream, 1) == [("ADDED", "b")]


def test_label_selector_turns_relabel_into_added_and_deleted(core):
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"app": "x"}}})
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"app": "y"}}})
    stream = watch.Watch().stream(core.list_namespaced_config_map, "default", label_selector="app=x", resource_version=start, timeout_seconds=int(DEADLINE_S))
    assert _collect(stream, 2) == [("ADDED", "a"), ("DELETED", "a")]


def test_all_namespaces_watch(core):
    core.create_namespace({"metadata": {"name": "team"}})
    start = core.list_pod_for_all_namespaces().metadata.resource_version
    for ns in ("team", "default"):
        core.create_namespaced_pod(ns, {"metadata": {"name": f"p-{ns}"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    stream = watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=start, timeout_seconds=int(DEADLINE_S))
    assert _collect(stream, 2) == [("ADDED", "p-team"), ("ADDED", "p-default")]


def test_timeout_ends_an_idle_watch(core):
    assert list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version="1", timeout_seconds=1)) == []


def test_custom_object_watch_sees_status_updates(crds, custom):
    start = custom.list_namespaced_custom_object(*DGD)["metadata"]["resourceVersion"]
    custom.create_namespaced_custom_object(*DGD, {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"}, "spec": {}})
    custom.patch_namespaced_custom_object_status(*DGD, "d", {"status": {"state": "successful"}})
    stream = watch.Watch().stream(custom.list_namespaced_custom_object, *DGD, resource_version=start, timeout_seconds=int(DEADLINE_S))
    events = []
    for event in stream:
        events.append((event["type"], event["object"].get("status", {}).get("state")))
        if len(events) == 2:
            break
    assert events == [("ADDED", None), ("MODIFIED", "successful")]


def test_server_stop_ends_open_watches(server, core):
    opened = threading.Event()
    result = []

    def watcher():
        stream = watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version="1", timeout_seconds=int(DEADLINE_S))
        opened.set()
        result.extend(stream)
        result.append("ended")

    thread = threading.Thread(target=watcher)
    thread.start()
    opened.wait(DEADLINE_S)
    server.store.close()
    thread.join(DEADLINE_S)
    assert result == ["ended"]
