"""Patch types and server-side apply through the official client (and raw HTTP where it cannot)."""

from __future__ import annotations

import json

import httpx
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nrl_k8s.sandbox.patch import PatchError, json_patch, merge_patch, strategic_merge

DGD = ("nvidia.com", "v1alpha1", "default", "dynamographdeployments")
POD = {
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
    "spec": {"containers": [{"name": "main", "image": "img:1", "env": [{"name": "X", "value": "1"}]}, {"name": "side", "image": "s:1"}]},
}


def _patch(http: httpx.Client, path: str, body: object, content_type: str, **params) -> httpx.Response:
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return http.patch(path, content=data, headers={"Content-Type": content_type}, params=params)


def test_merge_patch(core):
    core.create_namespaced_pod("default", POD)
    api = core.api_client
    pod = core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": None, "c": "3"}}})  # default: strategic
    assert pod.metadata.labels == {"b": "2", "c": "3"}
    api.set_default_header("Content-Type", "application/merge-patch+json")
    pod = core.patch_namespaced_pod("p", "default", {"spec": {"containers": [{"name": "only", "image": "x"}]}})
    assert [c.name for c in pod.spec.containers] == ["only"]  # merge patch replaces lists


def test_json_patch(core):
    core.create_namespaced_pod("default", POD)
    ops = [
        {"op": "replace", "path": "/spec/containers/0/image", "value": "img:2"},
        {"op": "add", "path": "/metadata/labels/new", "value": "yes"},
        {"op": "remove", "path": "/metadata/labels/a"},
    ]
    pod = core.patch_namespaced_pod("p", "default", ops)
    assert pod.spec.containers[0].image == "img:2"
    assert pod.metadata.labels == {"b": "2", "new": "yes"}


def test_json_patch_failing_test_op_is_422(core):
    core.create_namespaced_pod("default", POD)
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p", "default", [{"op": "test", "path": "/metadata/name", "value": "other"}])
    assert err.value.status == 422


def test_strategic_merge_merges_containers_by_name(core):
    core.create_namespaced_pod("default", POD)
    patch = {"spec": {"containers": [{"name": "main", "image": "img:3", "env": [{"name": "Y", "value": "2"}]}]}}
    pod = core.patch_namespaced_pod("p", "default", patch)
    main = pod.spec.containers[0]
    assert [c.name for c in pod.spec.containers] == ["main", "side"]
    assert main.image == "img:3" and [e.name for e in main.env] == ["X", "Y"]


def test_strategic_merge_on_custom_resource_is_415(http, crds, custom):
    custom.create_namespaced_custom_object(*DGD, {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"}, "spec": {}})
    reply = _patch(http, "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeployments/d", {"spec": {"x": 1}}, "application/strategic-merge-patch+json")
    assert (reply.status_code, reply.json()["reason"]) == (415, "UnsupportedMediaType")


def test_custom_objects_api_patch_uses_merge_patch(crds, custom):
    custom.create_namespaced_custom_object(*DGD, {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"}, "spec": {"a": 1}})
    patched = custom.patch_namespaced_custom_object(*DGD, "d", {"metadata": {"ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "u1"}]}, "spec": {"b": 2}})
    assert patched["spec"] == {"a": 1, "b": 2}
    assert patched["metadata"]["ownerReferences"][0]["uid"] == "u1"


# ---------------------------------------------------------------- server-side apply
def _apply(http, body: dict, **params) -> httpx.Response:
    return _patch(http, "/api/v1/namespaces/default/configmaps/cfg", body, "application/apply-patch+yaml", **params)


def _cfg(**data) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": data}


def test_apply_requires_field_manager(http):
    reply = _apply(http, _cfg(a="1"))
    assert (reply.status_code, reply.json()["reason"]) == (422, "Invalid")
    assert "fieldManager" in reply.json()["message"]


def test_apply_creates_then_merges_and_tracks_managers(http, core):
    created = _apply(http, _cfg(a="1"), fieldManager="alice")
    assert created.status_code == 201
    _apply(http, _cfg(b="2"), fieldManager="bob")
    cm = core.read_namespaced_config_map("cfg", "default")
    assert cm.data == {"a": "1", "b": "2"}
    owners = {e.manager: set(e.fields_v1["f:data"]) for e in cm.metadata.managed_fields}
    assert owners == {"alice": {"f:a"}, "bob": {"f:b"}}


def test_apply_removes_fields_the_manager_no_longer_sets(http, core):
    _apply(http, _cfg(a="1", b="2"), fieldManager="alice")
    _apply(http, _cfg(a="1"), fieldManager="alice")
    assert core.read_namespaced_config_map("cfg", "default").data == {"a": "1"}


def test_apply_conflict_and_force(http, core):
    _apply(http, _cfg(a="1"), fieldManager="alice")
    conflict = _apply(http, _cfg(a="2"), fieldManager="bob")
    assert (conflict.status_code, conflict.json()["reason"]) == (409, "Conflict")
    assert 'conflict with "alice": .data.a' in conflict.json()["message"]
    same_value = _apply(http, _cfg(a="1"), fieldManager="bob")
    assert same_value.status_code == 200  # co-ownership of an equal value is no conflict
    forced = _apply(http, _cfg(a="2"), fieldManager="bob", force="true")
    assert forced.status_code == 200 and forced.json()["data"] == {"a": "2"}


def test_apply_conflicts_with_an_update_manager(http, core):
    core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}, "data": {"a": "1"}}, field_manager="editor")
    conflict = _apply(http, _cfg(a="9"), fieldManager="applier")
    assert conflict.status_code == 409 and '"editor"' in conflict.json()["message"]


def test_apply_custom_resource_create(http, crds, custom):
    body = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"}, "spec": {"services": {}}}
    reply = _patch(http, "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeployments/d", body, "application/apply-patch+yaml", fieldManager="nrl-k8s")
    assert reply.status_code == 201
    assert custom.get_namespaced_custom_object(*DGD, "d")["spec"] == {"services": {}}


def test_apply_through_dynamic_client(api):
    from kubernetes.dynamic import DynamicClient

    configmaps = DynamicClient(api).resources.get(api_version="v1", kind="ConfigMap")
    configmaps.server_side_apply(body=_cfg(a="1"), namespace="default", field_manager="dyn")
    got = configmaps.server_side_apply(body=_cfg(a="1", b="2"), namespace="default", field_manager="dyn")
    assert got.data.to_dict() == {"a": "1", "b": "2"}


# ---------------------------------------------------------------- algorithms
@pytest.mark.parametrize(
    "live, patch, expected",
    [
        ({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}, {"a": {"c": 2, "d": 3}}),
        ({"l": [1, 2]}, {"l": [3]}, {"l": [3]}),
    ],
    ids=["nested-null-deletes", "lists-replace"],
)
def test_merge_patch_algorithm(live, patch, expected):
    assert merge_patch(live, patch) == expected


@pytest.mark.parametrize(
    "live, patch, expected",
    [
        ({"ports": [{"containerPort": 80, "name": "a"}]}, {"ports": [{"containerPort": 80, "name": "b"}, {"containerPort": 81}]}, {"ports": [{"containerPort": 80, "name": "b"}, {"containerPort": 81}]}),
        ({"volumes": [{"name": "v"}, {"name": "w"}]}, {"volumes": [{"name": "v", "$patch": "delete"}]}, {"volumes": [{"name": "w"}]}),
        ({"finalizers": ["a"]}, {"finalizers": ["b", "a"]}, {"finalizers": ["a", "b"]}),
        ({"finalizers": ["a", "b"]}, {"$deleteFromPrimitiveList/finalizers": ["a"]}, {"finalizers": ["b"]}),
        ({"tolerations": [{"key": "x"}]}, {"tolerations": [{"key": "y"}]}, {"tolerations": [{"key": "y"}]}),
        ({"m": {"a": 1}}, {"m": {"$patch": "replace", "b": 2}}, {"m": {"b": 2}}),
        ({"containers": [{"name": "c"}]}, {"$setElementOrder/containers": [{"name": "c"}], "containers": [{"name": "c", "image": "i"}]}, {"containers": [{"name": "c", "image": "i"}]}),
    ],
    ids=["ports-by-containerPort", "delete-directive", "finalizers-union", "delete-from-primitive-list", "atomic-list", "replace-map", "set-element-order-ignored"],
)
def test_strategic_merge_algorithm(live, patch, expected):
    assert strategic_merge(live, patch) == expected


@pytest.mark.parametrize(
    "ops, expected",
    [
        ([{"op": "add", "path": "/l/-", "value": 3}], {"l": [1, 2, 3], "m": {"a/b": 1}}),
        ([{"op": "move", "from": "/m/a~1b", "path": "/n"}], {"l": [1, 2], "m": {}, "n": 1}),
        ([{"op": "copy", "from": "/l/0", "path": "/l/0"}], {"l": [1, 1, 2], "m": {"a/b": 1}}),
    ],
    ids=["append", "move-escaped", "copy"],
)
def test_json_patch_algorithm(ops, expected):
    assert json_patch({"l": [1, 2], "m": {"a/b": 1}}, ops) == expected


@pytest.mark.parametrize(
    "ops",
    [[{"op": "remove", "path": "/missing"}], [{"op": "replace", "path": "/l/9", "value": 1}], [{"op": "bogus", "path": "/l"}], {"op": "add"}],
    ids=["remove-missing", "index-out-of-range", "unknown-op", "not-a-list"],
)
def test_json_patch_errors(ops):
    with pytest.raises(PatchError):
        json_patch({"l": [1]}, ops)


def test_generation_not_bumped_by_label_patch(crds, custom, api):
    custom.create_namespaced_custom_object(*DGD, {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"}, "spec": {"a": 1}})
    labelled = custom.patch_namespaced_custom_object(*DGD, "d", {"metadata": {"labels": {"x": "y"}}})
    spec_changed = custom.patch_namespaced_custom_object(*DGD, "d", {"spec": {"a": 2}})
    assert (labelled["metadata"]["generation"], spec_changed["metadata"]["generation"]) == (1, 2)
    assert client.CustomObjectsApi(api).get_namespaced_custom_object(*DGD, "d")["spec"] == {"a": 2}
