"""get/find/list/create/patch/delete for core, cluster-scoped and custom kinds, with typed errors.

Against the real kube-apiserver: every namespace also holds the cluster's ``kube-root-ca.crt``
ConfigMap (published by kube-controller-manager), which ``names`` leaves out.
"""

from __future__ import annotations

import pytest
from conftest import delete_namespace, make_namespace
from interrupts import at_every_point, in_thread
from sandbox_harness import DEADLINE_S

from nrl_k8s.errors import ConflictError, NotFoundError
from nrl_k8s.kinds import rayjob
from nrl_k8s.kinds.base import Kind
from nrl_k8s.kinds.core import CONFIGMAP, NAMESPACE
from nrl_k8s.kube import client as kube_module
from nrl_k8s.kube.client import KindNotServedError

ROOT_CA = "kube-root-ca.crt"  # in every namespace of a real cluster
#: A kind no CRD of the sandbox defines.
WIDGET = Kind("example.com", "v1", "widgets", "Widget")
#: KubeRay leaves a RayJob managed by MultiKueue alone: its status is the test's to write.
NOT_KUBERAYS = "kueue.x-k8s.io/multikueue"


def configmap(name: str, labels: dict | None = None, namespace: str | None = None, **data: str) -> dict:
    meta = {"name": name, "labels": labels or {}}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def names(objects: list[dict]) -> list[str]:
    return sorted(obj["metadata"]["name"] for obj in objects if obj["metadata"]["name"] != ROOT_CA)


@pytest.fixture
def other_namespace(sandbox):
    name = make_namespace(sandbox)
    yield name
    delete_namespace(sandbox, name)


def test_create_get_find(kube):
    created = kube.create(CONFIGMAP, configmap("settings", key="value"))
    assert created["metadata"]["namespace"] == kube.namespace and created["metadata"]["uid"]
    fetched = kube.get(CONFIGMAP, "settings")
    assert fetched["data"] == {"key": "value"} and fetched["metadata"]["uid"] == created["metadata"]["uid"]
    assert kube.find(CONFIGMAP, "settings")["data"] == {"key": "value"}
    assert kube.find(CONFIGMAP, "absent") is None
    with pytest.raises(NotFoundError) as caught:
        kube.get(CONFIGMAP, "absent")
    assert not isinstance(caught.value, KindNotServedError)
    assert caught.value.message == f'configmaps "absent" not found in namespace "{kube.namespace}"'


def test_create_in_the_manifest_namespace(kube, other_namespace):
    other = other_namespace
    kube.create(CONFIGMAP, configmap("elsewhere", namespace=other))
    assert kube.find(CONFIGMAP, "elsewhere") is None
    assert kube.get(CONFIGMAP, "elsewhere", namespace=other)["metadata"]["namespace"] == other


def test_create_in_a_missing_namespace_is_not_found(kube):
    with pytest.raises(NotFoundError) as caught:
        kube.create(CONFIGMAP, configmap("orphan", namespace="no-such-namespace"))
    assert not isinstance(caught.value, KindNotServedError)
    assert caught.value.message == 'namespaces "no-such-namespace" not found'


def test_create_twice_conflicts(kube):
    kube.create(CONFIGMAP, configmap("once"))
    with pytest.raises(ConflictError, match='configmaps "once" already exists') as caught:
        kube.create(CONFIGMAP, configmap("once"))
    assert caught.value.status == 409


@pytest.mark.parametrize(
    ("label_selector", "field_selector", "expected"),
    [
        (None, None, ["a-db", "a-web", "b-web"]),
        ("app=a", None, ["a-db", "a-web"]),
        ("app=a,tier!=db", None, ["a-web"]),
        ("tier in (web)", None, ["a-web", "b-web"]),
        ("app notin (a)", None, ["b-web"]),
        ("!tier", None, []),
        (None, "metadata.name=b-web", ["b-web"]),
        ("app=a", "metadata.name=b-web", []),
    ],
    ids=["everything", "equality", "and-inequality", "set-in", "set-notin", "not-exists", "field", "label-and-field"],
)
def test_list_with_selectors(kube, label_selector, field_selector, expected):
    for name in ("a-web", "a-db", "b-web"):
        app, tier = name.split("-")
        kube.create(CONFIGMAP, configmap(name, {"app": app, "tier": tier}))
    found = kube.list(CONFIGMAP, label_selector=label_selector, field_selector=field_selector)
    assert names(found) == expected
    assert all((obj["apiVersion"], obj["kind"]) == ("v1", "ConfigMap") for obj in found)


def test_list_all_namespaces(kube, other_namespace):
    other = other_namespace
    marker = {"run": other}
    kube.create(CONFIGMAP, configmap("here", marker))
    kube.create(CONFIGMAP, configmap("there", marker, namespace=other))
    selector = f"run={marker['run']}"
    assert names(kube.list(CONFIGMAP, label_selector=selector)) == ["here"]
    assert names(kube.list(CONFIGMAP, label_selector=selector, all_namespaces=True)) == ["here", "there"]


def test_list_follows_continue_tokens(kube, sandbox, monkeypatch):
    monkeypatch.setattr(kube_module, "_PAGE_SIZE", 2)
    for index in range(5):
        kube.create(CONFIGMAP, configmap(f"page-{index}"))
    sandbox.request_counts(reset=True)
    assert names(kube.list(CONFIGMAP)) == [f"page-{index}" for index in range(5)]
    assert sandbox.request_counts()["list configmaps"] == 3  # 5 or 6 (with kube-root-ca.crt) in pages of 2


def test_cluster_scoped_kind(kube):
    assert kube.namespace in names(kube.list(NAMESPACE))
    assert kube.get(NAMESPACE, kube.namespace)["kind"] == "Namespace"


@pytest.mark.parametrize(
    ("patch_type", "patch", "expected"),
    [
        ("merge", {"data": {"b": "2", "a": None}}, {"b": "2", "keep": "k"}),
        (
            "json",
            [{"op": "replace", "path": "/data/a", "value": "9"}, {"op": "remove", "path": "/data/keep"}],
            {"a": "9"},
        ),
        ("strategic", {"data": {"c": "3"}}, {"a": "1", "keep": "k", "c": "3"}),
        ("apply", configmap("patched", a="1", keep="k", d="4"), {"a": "1", "keep": "k", "d": "4"}),
    ],
    ids=["merge", "json", "strategic", "server-side-apply"],
)
def test_patch_types(kube, patch_type, patch, expected):
    kube.create(CONFIGMAP, configmap("patched", a="1", keep="k"))
    returned = kube.patch(CONFIGMAP, "patched", patch, patch_type=patch_type)
    assert returned["data"] == expected
    assert kube.get(CONFIGMAP, "patched")["data"] == expected


def test_apply_creates_when_absent(kube):
    applied = kube.patch(CONFIGMAP, "fresh", configmap("fresh", x="1"), patch_type="apply")
    assert applied["data"] == {"x": "1"}
    assert any(f.get("manager") == kube_module.FIELD_MANAGER for f in applied["metadata"]["managedFields"])


def test_unknown_patch_type_is_refused(kube):
    with pytest.raises(ValueError, match="patch_type"):
        kube.patch(CONFIGMAP, "any", {}, patch_type="replace")


def test_patch_status_of_a_custom_resource(kube):
    job = {"apiVersion": rayjob.KIND.api_version, "kind": "RayJob", "metadata": {"name": "job"},
           "spec": {"entrypoint": "true", "managedBy": NOT_KUBERAYS}}
    kube.create(rayjob.KIND, job)
    kube.patch_status(rayjob.KIND, "job", {"status": {"jobDeploymentStatus": "Running"}})
    assert kube.get(rayjob.KIND, "job")["status"]["jobDeploymentStatus"] == "Running"


def test_delete_cascades_to_dependents(kube):
    owner = kube.create(CONFIGMAP, configmap("owner"))
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    dependent = configmap("dependent")
    dependent["metadata"]["ownerReferences"] = [reference]
    kube.create(CONFIGMAP, dependent)
    assert kube.delete(CONFIGMAP, "owner") is True
    kube.wait_gone(CONFIGMAP, "dependent", timeout_s=DEADLINE_S)
    assert kube.find(CONFIGMAP, "owner") is None
    assert kube.delete(CONFIGMAP, "owner") is False


@pytest.mark.parametrize(
    "call",
    [
        lambda kube: kube.get(WIDGET, "graph"),
        lambda kube: kube.find(WIDGET, "graph"),
        lambda kube: kube.list(WIDGET),
        lambda kube: kube.delete(WIDGET, "graph"),
    ],
    ids=["get", "find", "list", "delete"],
)
def test_missing_crd_is_not_an_absent_object(kube, call):
    with pytest.raises(KindNotServedError) as caught:
        call(kube)
    assert "widgets.example.com" in caught.value.message
    assert "kubectl get crd widgets.example.com" in caught.value.hint




def test_a_ctrl_c_anywhere_in_a_request_leaves_the_client_usable_from_every_thread(kube):
    """A Ctrl-C that landed inside urllib3's connection queue once left its lock held, and the
    rollback's next request waited on it forever. Here a Ctrl-C lands at every point of a request
    in turn; after each, requests from this thread and from another still answer."""
    kube.create(CONFIGMAP, configmap("before"))
    files = ("/queue.py", "/threading.py") + tuple(f"/urllib3/{name}" for name in (
        "poolmanager.py", "connectionpool.py", "_collections.py", "response.py", "connection.py"))
    points = 0
    for points in at_every_point(lambda: kube.find(CONFIGMAP, "before"), files):
        in_thread(lambda: kube.find(CONFIGMAP, "before")["metadata"], f"a request after a Ctrl-C at point {points}")
        assert kube.find(CONFIGMAP, "before")["metadata"]["name"] == "before"
    assert points > 100  # the trace saw the HTTP stack
