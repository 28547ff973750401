"""Service proxy, SelfSubjectAccessReview, SelfSubjectRulesReview, permission checks and CRD discovery.

The service proxy reaches the session's ``backend`` pod (``conftest.Backend``); denials are real
RBAC (``rbac-deny``, ``proxy-forbidden``); ``rules-incomplete`` is the front proxy marking the API
server's rules review incomplete, as a cluster with a webhook authorizer answers it; a refused
rules review is the front proxy's 403 (``api-errors``: RBAC grants every user rules reviews).
"""

from __future__ import annotations

import json

import pytest
from sandbox_harness import DEADLINE_S, eventually, unique

from nrl_k8s.errors import ForbiddenError
from nrl_k8s.kinds import crds
from nrl_k8s.kinds.base import Kind
from nrl_k8s.kinds.core import CRD
from nrl_k8s.kinds.readiness import Pending, Ready
from nrl_k8s.kinds.service import KIND as SERVICE
from nrl_k8s.ops.probe import Permission, missing_permissions

ENDPOINTS = Kind("", "v1", "endpoints", "Endpoints")


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "expected"),
    [
        ("GET", "/v1/models", None, 200, {"data": [{"id": "model"}]}),
        ("GET", "v1/models", None, 200, {"data": [{"id": "model"}]}),
        ("GET", "/query?x=1&y=two", None, 200, b"/query?x=1&y=two"),
        ("POST", "/echo", {"a": 1}, 201, {"path": "/echo", "got": {"a": 1}}),
        ("GET", "/missing", None, 404, b"no such page"),
        ("GET", "/teapot", None, 418, b"short and stout"),
        ("GET", "/upstream-forbidden", None, 403, {"error": "upstream says no"}),
    ],
    ids=[
        "get-json",
        "relative-path",
        "query-string",
        "post-json",
        "upstream-404",
        "upstream-418",
        "upstream-403-returned",
    ],
)
def test_proxy_returns_the_upstream_answer(kube, sandbox, backend, method, path, body, status, expected):
    code, data = kube.proxy(method, backend.service, backend.port, path, namespace=backend.namespace, json=body,
                            timeout_s=DEADLINE_S)
    assert code == status
    assert (json.loads(data) if isinstance(expected, dict) else data) == expected
    assert sandbox.request_counts() == {f"{'create' if method == 'POST' else 'get'} services/proxy": 1}  # not retried


def test_proxy_to_a_service_without_endpoints_is_an_answer_not_an_error(kube):
    """A Service selecting no pod: the API server's own 503 Status, returned as the answer."""
    kube.create(
        SERVICE, {"metadata": {"name": "empty"}, "spec": {"selector": {"app": "none"}, "ports": [{"port": 8000}]}}
    )
    kube.wait(
        ENDPOINTS, lambda obj: Ready() if obj else Pending("no Endpoints yet"), name="empty", timeout_s=DEADLINE_S
    )
    code, data = kube.proxy("GET", "empty", 8000, "/health")
    assert code == 503
    assert (json.loads(data)["kind"], json.loads(data)["code"]) == ("Status", 503)


def test_proxy_forbidden_by_the_api_server_raises(kube, sandbox, fault, backend):
    fault("proxy-forbidden")
    sandbox.request_counts(reset=True)
    with pytest.raises(ForbiddenError) as caught:
        kube.proxy("GET", backend.service, backend.port, "/v1/models", namespace=backend.namespace)
    assert caught.value.message == f'forbidden: cannot get services/proxy in namespace "{backend.namespace}"'
    assert f"kubectl auth can-i get services/proxy -n {backend.namespace}" in caught.value.hint
    assert sandbox.request_counts() == {"get services/proxy": 1}


@pytest.mark.parametrize(
    ("deny", "verb", "resource", "group", "allowed"),
    [
        (None, "create", "rayjobs", "ray.io", True),
        ("create:rayjobs", "create", "rayjobs", "ray.io", False),
        ("create:rayjobs", "get", "rayjobs", "ray.io", True),
        ("get:services/proxy", "get", "services/proxy", "", False),
        ("get:services/proxy", "get", "services", "", True),
    ],
    ids=["allowed", "denied", "other-verb-allowed", "subresource-denied", "parent-resource-allowed"],
)
def test_can_i(kube, fault, deny, verb, resource, group, allowed):
    if deny:
        fault("rbac-deny", deny)
    assert kube.can_i(verb, resource, group=group) is allowed


def test_rules_review_without_denials_grants_everything(kube, sandbox):
    status = kube.rules_review()
    assert status["incomplete"] is False
    assert {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]} in status["resourceRules"]
    assert sandbox.request_counts() == {"create selfsubjectrulesreviews": 1}


def test_rules_review_leaves_out_denied_verbs(kube, fault):
    fault("rbac-deny", "create:rayjobs;get:services/proxy")
    rules = {
        (rule["apiGroups"][0], rule["resources"][0]): rule["verbs"]
        for rule in kube.rules_review()["resourceRules"]
        if len(rule["resources"]) == 1
    }
    assert "create" not in rules["ray.io", "rayjobs"] and "get" in rules["ray.io", "rayjobs"]
    assert "get" not in rules["", "services/proxy"] and "create" in rules["", "services/proxy"]
    assert "get" in rules["", "services"]


def test_rules_review_behind_a_webhook_authorizer_is_incomplete(kube, fault):
    fault("rules-incomplete")
    status = kube.rules_review()
    assert status["incomplete"] is True
    assert "webhook authorizer" in status["evaluationError"]
    assert {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]} in status["resourceRules"]  # RBAC's, still listed


RUN = [Permission("create", "rayjobs", "ray.io"), Permission("get", "rayjobs", "ray.io"),
       Permission("create", "services/proxy"), Permission("get", "pods")]


@pytest.mark.parametrize(
    ("faults", "missing", "access_reviews"),
    [
        ({}, [], 0),
        ({"rbac-deny": "create:rayjobs"}, [Permission("create", "rayjobs", "ray.io")], 1),
        ({"rbac-deny": "create:services/proxy"}, [Permission("create", "services/proxy")], 1),
        ({"rules-incomplete": None}, [], len(RUN)),
        ({"rules-incomplete": None, "rbac-deny": "get:pods"}, [Permission("get", "pods")], len(RUN)),
        ({"rbac-deny": "create:rayjobs", "api-errors": "create:selfsubjectrulesreviews:403:1"},
         [Permission("create", "rayjobs", "ray.io")], len(RUN)),
    ],
    ids=["all-granted-by-rules", "denied-verb-confirmed", "denied-subresource-confirmed", "incomplete-asks-each",
         "incomplete-still-finds-denials", "rules-review-refused-asks-each"],
)
def test_missing_permissions(kube, sandbox, fault, faults, missing, access_reviews):
    """One rules review decides what its rules grant; the rest is asked one access review each."""
    for name, value in faults.items():
        fault(name, value)
    sandbox.request_counts(reset=True)
    assert missing_permissions(kube, RUN, kube.namespace) == missing
    counts = sandbox.request_counts()
    assert counts.get("create selfsubjectaccessreviews", 0) == access_reviews
    assert counts["create selfsubjectrulesreviews"] == 1


@pytest.mark.parametrize(
    ("plural_group", "served"),
    [
        ("rayjobs.ray.io", ["v1", "v1alpha1"]),  # KubeRay's CRDs serve both, discovery lists v1 first
        ("rayclusters.ray.io", ["v1", "v1alpha1"]),
        ("dynamographdeployments.nvidia.com", ["v1beta1", "v1alpha1"]),
        ("widgets.example.com", []),
        ("raypods.ray.io", []),
        ("deployments.apps", ["v1"]),
    ],
    ids=["rayjob", "raycluster", "dgd-by-priority", "no-such-group", "unknown-plural-in-known-group", "built-in-group"],
)
def test_served_versions(kube, plural_group, served):
    assert kube.served_versions(plural_group) == served


def test_served_versions_follow_the_crd_lifecycle(kube):
    group = f"{unique('t')}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": v == "v1",
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
                for v in ("v1", "v1beta1")
            ],
        },
    }
    name = crd["metadata"]["name"]
    assert kube.served_versions(name) == []
    kube.create(CRD, crd)
    try:
        assert crds.served_versions(kube.get(CRD, name)) == ["v1", "v1beta1"]
        eventually(lambda: kube.served_versions(name) == ["v1", "v1beta1"], what=f"discovery serving {name}")
    finally:
        kube.delete(CRD, name)
    eventually(lambda: kube.served_versions(name) == [], what=f"discovery forgetting {name}")
