"""Authentication, discovery and CRD registration through the official client."""

from __future__ import annotations

import httpx
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nrl_k8s.sandbox.crds import DGD_CRD


@pytest.mark.parametrize("token", [None, "wrong"], ids=["no-token", "wrong-token"])
def test_unauthenticated_requests_get_401_status(client_for, token):
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(client_for(token)).list_namespace()
    assert err.value.status == 401
    assert '"reason": "Unauthorized"' in err.value.body


@pytest.mark.parametrize("token", ["user", "operator"], ids=["user", "operator"])
def test_both_tokens_are_accepted(client_for, token):
    names = [ns.metadata.name for ns in client.CoreV1Api(client_for(token)).list_namespace().items]
    assert names == ["default", "kube-system"]


@pytest.mark.parametrize("path", ["/version", "/healthz", "/readyz", "/livez"], ids=["version", "healthz", "readyz", "livez"])
def test_public_endpoints_need_no_token(server, path):
    assert httpx.get(server.url + path).status_code == 200


def test_version_through_client(api):
    info = client.VersionApi(api).get_code()
    assert (info.major, info.minor) == ("1", "32")


def test_core_resource_list_has_subresources_and_short_names(api):
    resources = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    assert {"pods/status", "services/proxy", "namespaces/status"} <= resources.keys()
    assert resources["pods"].short_names == ["po"]
    assert resources["namespaces"].namespaced is False
    assert "watch" in resources["configmaps"].verbs


def test_crd_group_appears_in_discovery_once_installed(server, api, http):
    groups = lambda: {g.name for g in client.ApisApi(api).get_api_versions().groups}  # noqa: E731
    assert "nvidia.com" not in groups()
    server.install_crd(DGD_CRD)
    assert {"nvidia.com", "apps", "apiextensions.k8s.io", "authorization.k8s.io"} <= groups()
    listing = http.get("/apis/nvidia.com/v1alpha1").json()
    entries = {r["name"]: r for r in listing["resources"]}
    assert entries["dynamographdeployments"]["shortNames"] == ["dgd"]
    assert "dynamographdeployments/status" in entries


def test_custom_resource_path_is_404_until_crd_exists_and_after_deletion(server, api):
    custom = client.CustomObjectsApi(api)
    args = ("nvidia.com", "v1alpha1", "default", "dynamographdeployments")
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object(*args)
    assert err.value.status == 404
    crd = client.ApiextensionsV1Api(api).create_custom_resource_definition(DGD_CRD)
    assert {c.type: c.status for c in crd.status.conditions} == {"NamesAccepted": "True", "Established": "True"}
    custom.create_namespaced_custom_object(*args, {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"}})
    assert [o["metadata"]["name"] for o in custom.list_namespaced_custom_object(*args)["items"]] == ["d"]
    client.ApiextensionsV1Api(api).delete_custom_resource_definition(DGD_CRD["metadata"]["name"])
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object(*args)
    assert err.value.status == 404


def test_openapi_v3_lists_every_group_version(http, crds):
    index = http.get("/openapi/v3").json()["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/ray.io/v1", "apis/nvidia.com/v1alpha1"} <= index.keys()
    doc = http.get(index["apis/ray.io/v1"]["serverRelativeURL"]).json()
    kinds = {op["patch"]["x-kubernetes-group-version-kind"]["kind"] for op in doc["paths"].values()}
    assert kinds == {"RayJob", "RayCluster"}
