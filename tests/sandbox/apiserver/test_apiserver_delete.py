"""Delete, propagation policies, ownerReference garbage collection, finalizers, deletecollection."""

from __future__ import annotations

from functools import partial

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from sandbox_harness import observe


def _owner(obj) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": obj.metadata.name, "uid": obj.metadata.uid}


def _cm(core, name: str, *owners, finalizers=None):
    meta = {"name": name, "ownerReferences": [_owner(o) for o in owners]}
    if finalizers:
        meta["finalizers"] = finalizers
    return core.create_namespaced_config_map("default", {"metadata": meta})


def _names(core) -> set[str]:
    return {cm.metadata.name for cm in core.list_namespaced_config_map("default").items}


def test_delete_then_get_is_404(core):
    _cm(core, "a")
    core.delete_namespaced_config_map("a", "default")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("a", "default")
    assert err.value.status == 404


def test_delete_missing_is_404(core):
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map("a", "default")
    assert err.value.status == 404


def _refs(obj: dict | None) -> list[str]:
    return [ref["uid"] for ref in (obj or {}).get("metadata", {}).get("ownerReferences") or []]


def test_background_delete_cascades_through_owner_chain(core):
    root = _cm(core, "root")
    child = _cm(core, "child", root)
    _cm(core, "grandchild", child)
    _cm(core, "bystander")
    core.delete_namespaced_config_map("root", "default")
    observe(core.list_namespaced_config_map, "default", until=lambda o: set(o) == {"bystander"})


def test_cascade_across_kinds_to_custom_objects(core, crds, custom):
    cluster = custom.create_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": {}}
    )
    ref = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": cluster["metadata"]["uid"], "controller": False, "blockOwnerDeletion": False}
    dgd = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d", "ownerReferences": [ref]}, "spec": {}}
    custom.create_namespaced_custom_object("nvidia.com", "v1alpha1", "default", "dynamographdeployments", dgd)
    core.create_namespaced_pod("default", {"metadata": {"name": "head", "ownerReferences": [ref]}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    custom.delete_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", "rc")
    dgds = partial(custom.list_namespaced_custom_object, "nvidia.com", "v1alpha1", "default", "dynamographdeployments")
    observe(dgds, until=lambda o: not o)
    observe(core.list_namespaced_pod, "default", until=lambda o: not o)


def test_orphan_strips_owner_reference_and_keeps_dependent(core):
    root = _cm(core, "root")
    _cm(core, "child", root)
    core.delete_namespaced_config_map("root", "default", propagation_policy="Orphan")
    child = core.read_namespaced_config_map("child", "default")
    assert child.metadata.owner_references is None


def test_dependent_with_several_owners_survives_until_the_last_one_goes(core):
    first, second = _cm(core, "first"), _cm(core, "second")
    _cm(core, "shared", first, second)
    core.delete_namespaced_config_map("first", "default")
    observe(core.list_namespaced_config_map, "default", until=lambda o: _refs(o.get("shared")) == [second.metadata.uid])
    core.delete_namespaced_config_map("second", "default")
    observe(core.list_namespaced_config_map, "default", until=lambda o: not o)


def test_foreground_keeps_owner_until_dependents_are_gone(core, http):
    root = _cm(core, "root")
    _cm(core, "child", root, finalizers=["example.com/hold"])
    reply = http.request("DELETE", "/api/v1/namespaces/default/configmaps/root", json={"propagationPolicy": "Foreground"})
    assert reply.json()["metadata"]["finalizers"] == ["foregroundDeletion"]
    observe(core.list_namespaced_config_map, "default", until=lambda o: "deletionTimestamp" in o["child"]["metadata"])
    assert core.read_namespaced_config_map("root", "default").metadata.deletion_timestamp  # held by its dependent
    core.patch_namespaced_config_map("child", "default", [{"op": "remove", "path": "/metadata/finalizers"}])
    observe(core.list_namespaced_config_map, "default", until=lambda o: not o)


def test_finalizer_blocks_deletion_until_removed(core):
    _cm(core, "held", finalizers=["example.com/hold"])
    core.delete_namespaced_config_map("held", "default")
    held = core.read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", "default", [{"op": "remove", "path": "/metadata/finalizers"}])
    assert _names(core) == set()


def test_delete_preconditions(core):
    made = _cm(core, "a")
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map("a", "default", body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="other")))
    assert err.value.status == 409
    core.delete_namespaced_config_map("a", "default", body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=made.metadata.uid)))
    assert _names(core) == set()


def test_dry_run_delete_keeps_the_object(core):
    _cm(core, "a")
    core.delete_namespaced_config_map("a", "default", dry_run="All")
    assert _names(core) == {"a"}


def test_delete_collection_with_label_selector(core):
    for name, app in (("a", "x"), ("b", "x"), ("c", "y")):
        core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": {"app": app}}})
    core.delete_collection_namespaced_config_map("default", label_selector="app=x")
    assert _names(core) == {"c"}


def test_namespace_deletion_empties_it(core, http):
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map("team", {"metadata": {"name": "a"}})
    assert http.delete("/api/v1/namespaces/team").json()["status"]["phase"] == "Terminating"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("team", {"metadata": {"name": "b"}})
    assert err.value.status in (403, 404)  # 403 while terminating, 404 once gone
    observe(core.list_namespace, until=lambda o: "team" not in o)
    assert core.list_config_map_for_all_namespaces().items == []


def test_default_namespace_cannot_be_deleted(core):
    with pytest.raises(ApiException) as err:
        core.delete_namespace("default")
    assert err.value.status == 403
