"""API-level faults, RBAC denial, SelfSubjectAccessReview and SelfSubjectRulesReview, request counts and admin endpoints."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nrl_k8s.sandbox.faults import Faults


@pytest.mark.parametrize(
    "name, value, stored",
    [
        ("miss-driver-submission", None, ""),
        ("dgd-failed", "reconcile error", "reconcile error"),
        ("frontend-unavailable", "3", "3"),
        ("slow", "2.5", "2.5"),
        ("api-errors", "create:rayjobs:500:2;*:*:429:1", "create:rayjobs:500:2;*:*:429:1"),
        ("rbac-deny", "create:rayjobs", "create:rayjobs"),
    ],
    ids=["switch", "optional-message", "seconds", "factor", "api-errors", "rbac-deny"],
)
def test_fault_values_are_validated_and_stored(name, value, stored):
    faults = Faults()
    faults.set(name, value)
    assert faults.active() == {name: stored}
    faults.clear(name)
    assert faults.get(name) is None


@pytest.mark.parametrize(
    "name, value",
    [
        ("nope", None),
        ("proxy-forbidden", "x"),
        ("slow", "0"),
        ("frontend-unavailable", "soon"),
        ("api-errors", "create:rayjobs:500"),
        ("api-errors", "poke:rayjobs:500:1"),
        ("api-errors", "get:pods:200:1"),
        ("api-errors", "get:pods:500:0"),
        ("rbac-deny", None),
    ],
    ids=["unknown", "switch-with-value", "zero-factor", "bad-seconds", "short-entry", "bad-verb", "not-an-error-code", "zero-count", "missing-value"],
)
def test_bad_faults_are_refused(name, value):
    with pytest.raises(ValueError):
        Faults().set(name, value)


def test_api_errors_count_down_and_clear_themselves():
    faults = Faults()
    faults.set("api-errors", "get:pods:500:2")
    assert [faults.take_api_error("get", "pods") for _ in range(3)] == [500, 500, None]
    assert faults.get("api-errors") is None


@pytest.mark.parametrize(
    "value, call, code",
    [
        ("create:dynamographdeployments:500:1", lambda custom, core: custom.create_namespaced_custom_object("nvidia.com", "v1alpha1", "default", "dynamographdeployments", {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"}}), 500),
        ("list:pods:503:1", lambda custom, core: core.list_namespaced_pod("default"), 503),
        ("*:*:502:1", lambda custom, core: core.list_namespace(), 502),
    ],
    ids=["create-500", "list-503", "wildcard-502"],
)
def test_api_errors_fail_the_next_matching_call(faults, crds, custom, core, value, call, code):
    faults.set("api-errors", value)
    with pytest.raises(ApiException) as err:
        call(custom, core)
    body = json.loads(err.value.body)
    assert (err.value.status, body["code"], body["kind"]) == (code, code, "Status")
    call(custom, core)  # the next call succeeds


def test_api_error_429_sets_retry_after(faults, http):
    faults.set("api-errors", "get:namespaces:429:1")
    reply = http.get("/api/v1/namespaces/default")
    assert (reply.status_code, reply.json()["reason"], reply.headers["Retry-After"]) == (429, "TooManyRequests", "1")
    assert http.get("/api/v1/namespaces/default").status_code == 200


def test_operator_token_is_exempt_from_faults_and_counts(server, faults, client_for):
    faults.set("api-errors", "*:*:500:5")
    faults.set("rbac-deny", "*:*")
    client.CoreV1Api(client_for("operator")).list_namespace()
    assert server.request_counts() == {}
    assert faults.get("api-errors") == "*:*:500:5"


def test_rbac_deny_returns_forbidden_like_real_rbac(faults, crds, custom):
    faults.set("rbac-deny", "create:rayjobs")
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "x"}})
    body = json.loads(err.value.body)
    assert (err.value.status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == 'rayjobs.ray.io is forbidden: User "sandbox-user" cannot create resource "rayjobs" in API group "ray.io" in the namespace "default"'
    custom.list_namespaced_custom_object("ray.io", "v1", "default", "rayjobs")  # other verbs still allowed


def test_rbac_deny_message_names_the_object_for_get(faults, core):
    faults.set("rbac-deny", "get:configmaps")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("x", "default")
    assert json.loads(err.value.body)["message"].startswith('configmaps "x" is forbidden: User "sandbox-user" cannot get resource "configmaps" in API group ""')


@pytest.mark.parametrize(
    "deny, attributes, allowed",
    [
        (None, {"verb": "create", "group": "ray.io", "resource": "rayjobs", "namespace": "default"}, True),
        ("create:rayjobs", {"verb": "create", "group": "ray.io", "resource": "rayjobs", "namespace": "default"}, False),
        ("create:rayjobs", {"verb": "get", "group": "ray.io", "resource": "rayjobs", "namespace": "default"}, True),
        ("get:services/proxy", {"verb": "get", "resource": "services", "subresource": "proxy", "namespace": "default"}, False),
    ],
    ids=["no-fault", "denied", "other-verb", "subresource"],
)
def test_self_subject_access_review(api, faults, deny, attributes, allowed):
    if deny:
        faults.set("rbac-deny", deny)
    review = client.AuthorizationV1Api(api).create_self_subject_access_review({"spec": {"resourceAttributes": attributes}})
    assert review.status.allowed is allowed


@pytest.mark.parametrize(
    "faults_set, incomplete, granted, refused",
    [
        ({}, False, [("create", "ray.io", "rayjobs"), ("get", "", "services/proxy")], []),
        ({"rbac-deny": "create:rayjobs"}, False, [("get", "ray.io", "rayjobs")], [("create", "ray.io", "rayjobs")]),
        ({"rbac-deny": "*:pods;*:services/proxy"}, False, [("get", "", "services"), ("list", "ray.io", "rayclusters")],
         [("get", "", "pods"), ("get", "", "services/proxy")]),
        ({"rules-incomplete": None}, True, [("create", "authorization.k8s.io", "selfsubjectrulesreviews")],
         [("create", "ray.io", "rayjobs")]),
    ],
    ids=["no-fault", "denied-verb", "denied-resources", "incomplete"],
)
def test_self_subject_rules_review(api, crds, faults, faults_set, incomplete, granted, refused):
    """The rules an RBAC-only server would list for what the faults leave; as a kubectl user reads them."""
    for name, value in faults_set.items():
        faults.set(name, value)
    status = client.AuthorizationV1Api(api).create_self_subject_rules_review({"spec": {"namespace": "default"}}).status

    def listed(verb, group, resource):
        return any(set(r.verbs) & {"*", verb} and set(r.api_groups) & {"*", group} and set(r.resources) & {"*", resource}
                   for r in status.resource_rules)

    assert status.incomplete is incomplete
    assert all(listed(*p) for p in granted), status.resource_rules
    assert not any(listed(*p) for p in refused), status.resource_rules


def test_request_counts_are_per_verb_and_resource(server, core, crds, custom):
    core.list_namespaced_pod("default")
    core.list_namespaced_pod("default")
    custom.list_namespaced_custom_object("ray.io", "v1", "default", "rayjobs")
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("absent", "default")
    assert server.request_counts() == {"list pods": 2, "list rayjobs": 1, "get configmaps": 1}


def test_discovery_requests_are_counted(server, api):
    client.ApisApi(api).get_api_versions()
    client.CoreApi(api).get_api_versions()
    assert server.request_counts() == {"get discovery": 2}


def test_admin_endpoints(server, http, core, faults):
    core.list_namespace()
    assert http.get("/sandbox/stats").json() == {"list namespaces": 1}
    assert http.delete("/sandbox/stats").status_code == 200
    assert http.get("/sandbox/stats").json() == {}
    changed = http.put("/sandbox/faults", json={"set": {"slow": "2", "proxy-forbidden": None}})
    assert changed.json() == {"slow": "2", "proxy-forbidden": ""}
    assert http.put("/sandbox/faults", json={"clear": ["slow"]}).json() == {"proxy-forbidden": ""}
    assert faults.active() == {"proxy-forbidden": ""}
    assert http.get("/sandbox/faults").json() == {"proxy-forbidden": ""}
    refused = http.put("/sandbox/faults", json={"set": {"bogus": None}})
    assert (refused.status_code, refused.json()["reason"]) == (400, "BadRequest")


def test_admin_endpoints_need_a_token(server):
    import httpx

    assert httpx.get(server.url + "/sandbox/faults").status_code == 401
