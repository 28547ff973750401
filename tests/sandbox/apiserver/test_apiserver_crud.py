"""Create/get/update/status semantics through the official client."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

DGD = ("nvidia.com", "v1alpha1", "default", "dynamographdeployments")


def _dgd(name: str, replicas: int = 1) -> dict:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name},
        "spec": {"services": {"Frontend": {"componentType": "frontend", "replicas": replicas}}},
    }


def _status(err: ApiException) -> dict:
    return json.loads(err.body)


def test_create_sets_server_fields(core):
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    assert cm.metadata.uid and cm.metadata.creation_timestamp
    assert cm.metadata.generation == 1 and cm.metadata.namespace == "default"
    assert int(cm.metadata.resource_version) > 0
    again = core.read_namespaced_config_map("a", "default")
    assert again.metadata.resource_version == cm.metadata.resource_version


def test_resource_versions_come_from_one_global_counter(core):
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    second = core.create_namespace({"metadata": {"name": "other"}})
    assert int(second.metadata.resource_version) == int(first.metadata.resource_version) + 1


@pytest.mark.parametrize(
    "create, check",
    [
        (
            lambda core: core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
            lambda pod: pod.status.phase == "Pending" and pod.spec.restart_policy == "Always" and pod.spec.containers[0].image_pull_policy == "IfNotPresent",
        ),
        (
            lambda core: core.create_namespaced_service("default", {"metadata": {"name": "s"}, "spec": {"ports": [{"name": "http", "port": 80}]}}),
            lambda svc: svc.spec.cluster_ip.startswith("10.96.")
            and svc.spec.type == "ClusterIP"
            and (svc.spec.ports[0].protocol, svc.spec.ports[0].target_port) == ("TCP", 80),
        ),
        (lambda core: core.create_namespace({"metadata": {"name": "n"}}), lambda ns: ns.status.phase == "Active"),
        (lambda core: core.create_namespaced_secret("default", {"metadata": {"name": "s"}}), lambda secret: secret.type == "Opaque"),
        (
            lambda core: core.create_namespaced_secret(
                "default", {"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"b": "ü y", "a": "z"}}),
            lambda secret: secret.data == {"a": "eg==", "b": "w7wgeQ=="} and secret.string_data is None,
        ),
    ],
    ids=["pod", "service", "namespace", "secret", "secret stringData"],
)
def test_server_defaults(core, create, check):
    assert check(create(core))


def test_create_existing_is_409_already_exists(core):
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    body = _status(err.value)
    assert (err.value.status, body["reason"], body["message"]) == (409, "AlreadyExists", 'configmaps "a" already exists')
    assert body["details"] == {"name": "a", "group": "", "kind": "configmaps"}


def test_generate_name(core):
    made = [core.create_namespaced_config_map("default", {"metadata": {"generateName": "job-"}}) for _ in range(2)]
    names = {cm.metadata.name for cm in made}
    assert len(names) == 2 and all(n.startswith("job-") and len(n) == 9 for n in names)


@pytest.mark.parametrize(
    "body, code, reason",
    [
        ({"metadata": {}}, 422, "Invalid"),
        ({"metadata": {"name": "Bad_Name"}}, 422, "Invalid"),
        ({"metadata": {"name": "ok", "namespace": "elsewhere"}}, 400, "BadRequest"),
    ],
    ids=["missing-name", "invalid-name", "namespace-mismatch"],
)
def test_create_rejects_bad_objects(core, body, code, reason):
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("default", body)
    assert (err.value.status, _status(err.value)["reason"]) == (code, reason)


def test_create_in_missing_namespace_is_namespace_not_found(core):
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("nowhere", {"metadata": {"name": "a"}})
    body = _status(err.value)
    assert (err.value.status, body["message"], body["details"]["kind"]) == (404, 'namespaces "nowhere" not found', "namespaces")


def test_get_missing_is_404_with_group(crds, custom):
    with pytest.raises(ApiException) as err:
        custom.get_namespaced_custom_object(*DGD, "missing")
    body = _status(err.value)
    assert body["message"] == 'dynamographdeployments.nvidia.com "missing" not found'
    assert body["details"] == {"name": "missing", "group": "nvidia.com", "kind": "dynamographdeployments"}


def test_dry_run_create_persists_nothing(core):
    made = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}}, dry_run="All")
    assert made.metadata.uid
    assert core.list_namespaced_config_map("default").items == []


def test_update_with_stale_resource_version_is_409_conflict(core):
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    cm.data = {"k": "2"}
    updated = core.replace_namespaced_config_map("a", "default", cm)
    assert int(updated.metadata.resource_version) > int(cm.metadata.resource_version)
    cm.data = {"k": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("a", "default", cm)
    assert (err.value.status, _status(err.value)["reason"]) == (409, "Conflict")
    assert "the object has been modified" in _status(err.value)["message"]


def test_update_missing_is_404(core):
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("a", "default", {"metadata": {"name": "a"}})
    assert err.value.status == 404


@pytest.mark.parametrize(
    "change, bumped",
    [
        (lambda o: o["spec"]["services"]["Frontend"].update(replicas=3), True),
        (lambda o: o["metadata"].setdefault("labels", {}).update(team="a"), False),
    ],
    ids=["spec-change-bumps", "metadata-change-does-not"],
)
def test_generation(crds, custom, change, bumped):
    obj = custom.create_namespaced_custom_object(*DGD, _dgd("d"))
    change(obj)
    updated = custom.replace_namespaced_custom_object(*DGD, "d", obj)
    assert updated["metadata"]["generation"] == (2 if bumped else 1)


def test_status_subresource_is_separate_from_main_resource(crds, custom):
    obj = custom.create_namespaced_custom_object(*DGD, {**_dgd("d"), "status": {"state": "ignored-on-create"}})
    assert "status" not in obj
    obj["status"] = {"state": "successful"}
    obj["spec"]["services"]["Frontend"]["replicas"] = 5
    after_status = custom.replace_namespaced_custom_object_status(*DGD, "d", obj)
    assert after_status["status"] == {"state": "successful"}
    assert after_status["spec"]["services"]["Frontend"]["replicas"] == 1  # spec ignored on /status
    after_status["status"] = {"state": "failed"}
    after_main = custom.replace_namespaced_custom_object(*DGD, "d", after_status)
    assert after_main["status"] == {"state": "successful"}  # status ignored on the main resource
    patched = custom.patch_namespaced_custom_object_status(*DGD, "d", {"status": {"observedGeneration": 1}})
    assert patched["status"] == {"state": "successful", "observedGeneration": 1}


def test_pod_status_subresource(core):
    core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    pod = core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": True, "image": "i", "imageID": "", "restartCount": 0}]}})
    assert pod.status.phase == "Running" and pod.status.container_statuses[0].ready


def test_apps_deployment_storage(api):
    apps = client.AppsV1Api(api)
    body = {
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    apps.create_namespaced_deployment("default", body)
    apps.patch_namespaced_deployment_status("web", "default", {"status": {"readyReplicas": 1}})
    got = apps.read_namespaced_deployment("web", "default")
    assert (got.spec.replicas, got.status.ready_replicas) == (1, 1)


@pytest.mark.parametrize(
    "create",
    [
        lambda core: core.create_namespaced_event(
            "default",
            {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "FailedScheduling", "message": "0/1 nodes"},
        ),
        lambda core: core.create_namespaced_service_account("default", {"metadata": {"name": "sa"}}),
    ],
    ids=["event", "serviceaccount"],
)
def test_other_core_kinds_are_stored(core, create):
    assert create(core).metadata.uid
