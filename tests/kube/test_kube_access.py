"""Service proxy, SelfSubjectAccessReview, SelfSubjectRulesReview, permission checks and CRD discovery."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nrl_k8s import crds
from nrl_k8s.errors import ForbiddenError
from nrl_k8s.kinds.core import CRD
from nrl_k8s.kinds.service import KIND as SERVICE
from nrl_k8s.probe import Permission, missing_permissions
from nrl_k8s.sandbox.crds import DGD_CRD
from nrl_k8s.sandbox.proxy import ENDPOINTS_ANNOTATION


class _Upstream(BaseHTTPRequestHandler):
    """A loopback backend: fixed answers per path, POST /echo echoes the JSON body."""

    ANSWERS = {"/v1/models": (200, b'{"data": [{"id": "model"}]}'), "/teapot": (418, b"short and stout")}

    def do_GET(self) -> None:  # noqa: N802 - stdlib hook
        if self.path.startswith("/query"):
            self._reply(200, self.path.encode())
        elif self.path == "/upstream-forbidden":
            self._reply(403, b'{"error": "upstream says no"}')
        else:
            self._reply(*self.ANSWERS.get(self.path, (404, b"no such page")))

    def do_POST(self) -> None:  # noqa: N802 - stdlib hook
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._reply(201, json.dumps({"path": self.path, "got": json.loads(body)}).encode())

    def _reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


@pytest.fixture(scope="module")
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def frontend(kube, upstream) -> str:
    """A Service ``frontend`` whose port 8000 is backed by the loopback upstream."""
    kube.create(
        SERVICE,
        {
            "metadata": {"name": "frontend", "annotations": {ENDPOINTS_ANNOTATION: json.dumps({"8000": upstream})}},
            "spec": {"ports": [{"name": "http", "port": 8000}]},
        },
    )
    return "frontend"


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
    ids=["get-json", "relative-path", "query-string", "post-json", "upstream-404", "upstream-418", "upstream-403-returned"],
)
def test_proxy_returns_the_upstream_answer(kube, frontend, method, path, body, status, expected):
    code, data = kube.proxy(method, frontend, 8000, path, json=body)
    assert code == status
    assert (json.loads(data) if isinstance(expected, dict) else data) == expected


def test_proxy_to_a_service_without_endpoints_is_an_answer_not_an_error(kube):
    kube.create(SERVICE, {"metadata": {"name": "empty"}, "spec": {"ports": [{"port": 8000}]}})
    code, data = kube.proxy("GET", "empty", 8000, "/health")
    assert code == 503 and b"no endpoints available" in data


def test_proxy_forbidden_by_the_api_server_raises(kube, sandbox, frontend):
    sandbox.server.faults.set("proxy-forbidden")
    with pytest.raises(ForbiddenError) as caught:
        kube.proxy("GET", frontend, 8000, "/v1/models")
    assert caught.value.message == f'forbidden: cannot get services/proxy in namespace "{kube.namespace}"'
    assert f"kubectl auth can-i get services/proxy -n {kube.namespace}" in caught.value.hint
    assert sandbox.stats()["get services/proxy"] == 1


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
def test_can_i(kube, sandbox, deny, verb, resource, group, allowed):
    if deny:
        sandbox.server.faults.set("rbac-deny", deny)
    assert kube.can_i(verb, resource, group=group) is allowed


def test_rules_review_without_denials_grants_everything(kube, sandbox):
    status = kube.rules_review()
    assert status["incomplete"] is False
    assert {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]} in status["resourceRules"]
    assert sandbox.stats() == {"create selfsubjectrulesreviews": 1}


def test_rules_review_leaves_out_denied_verbs(kube, sandbox):
    sandbox.server.faults.set("rbac-deny", "create:rayjobs;get:services/proxy")
    rules = {(rule["apiGroups"][0], rule["resources"][0]): rule["verbs"] for rule in kube.rules_review()["resourceRules"]
             if len(rule["resources"]) == 1}
    assert "create" not in rules["ray.io", "rayjobs"] and "get" in rules["ray.io", "rayjobs"]
    assert "get" not in rules["", "services/proxy"] and "create" in rules["", "services/proxy"]
    assert "get" in rules["", "services"]


def test_rules_review_behind_a_webhook_authorizer_is_incomplete(kube, sandbox):
    sandbox.server.faults.set("rules-incomplete")
    status = kube.rules_review()
    assert status["incomplete"] is True
    assert "webhook authorizer" in status["evaluationError"]


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
        ({"rbac-deny": "create:selfsubjectrulesreviews;create:rayjobs"}, [Permission("create", "rayjobs", "ray.io")], len(RUN)),
    ],
    ids=["all-granted-by-rules", "denied-verb-confirmed", "denied-subresource-confirmed", "incomplete-asks-each",
         "incomplete-still-finds-denials", "rules-review-refused-asks-each"],
)
def test_missing_permissions(kube, sandbox, faults, missing, access_reviews):
    """One rules review decides what its rules grant; the rest is asked one access review each."""
    for name, value in faults.items():
        sandbox.server.faults.set(name, value)
    assert missing_permissions(kube, RUN, kube.namespace) == missing
    assert sandbox.stats().get("create selfsubjectaccessreviews", 0) == access_reviews
    assert sandbox.stats()["create selfsubjectrulesreviews"] == 1


@pytest.mark.parametrize(
    ("plural_group", "served"),
    [
        ("rayjobs.ray.io", ["v1"]),
        ("rayclusters.ray.io", ["v1"]),
        ("dynamographdeployments.nvidia.com", []),
        ("raypods.ray.io", []),
        ("deployments.apps", ["v1"]),
    ],
    ids=["rayjob", "raycluster", "dgd-missing", "unknown-plural-in-known-group", "built-in-group"],
)
def test_served_versions(kube, plural_group, served):
    assert kube.served_versions(plural_group) == served


def test_served_versions_follow_the_crd_lifecycle(kube):
    name = DGD_CRD["metadata"]["name"]
    kube.create(CRD, DGD_CRD)
    try:
        assert kube.served_versions(name) == crds.served_versions(DGD_CRD)
    finally:
        kube.delete(CRD, name)
    assert kube.served_versions(name) == []
