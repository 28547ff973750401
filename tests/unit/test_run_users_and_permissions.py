"""Pure pieces of run safety: a DGD's users, RayJob states, and the permissions a run needs."""

from __future__ import annotations

import pytest

from nrl_k8s.kinds import dgd, rayjob
from nrl_k8s.kinds.base import managed
from nrl_k8s.ops.probe import Permission, grants, run_permissions


def with_users(value: str | None) -> dict:
    annotations = {} if value is None else {dgd.USERS_ANNOTATION: value}
    return {"metadata": {"name": "d", "annotations": annotations}}


@pytest.mark.parametrize(
    "value, expected",
    [(None, []), ("", []), ("a", ["a"]), ("a,b", ["a", "b"]), (" a , ,b ", ["a", "b"])],
    ids=["absent", "empty", "one", "two", "spaces-and-blanks"],
)
def test_users_are_read_from_the_annotation(value, expected):
    assert dgd.users(with_users(value)) == expected


def test_with_user_names_the_run_and_keeps_other_annotations():
    manifest = {"metadata": {"name": "d", "annotations": {"keep": "me"}}, "spec": {}}
    marked = dgd.with_user(manifest, "job-a")
    assert marked["metadata"]["annotations"] == {"keep": "me", dgd.USERS_ANNOTATION: "job-a"}
    assert manifest["metadata"]["annotations"] == {"keep": "me"}  # the input is not changed


@pytest.mark.parametrize(
    "value, change, patch",
    [
        ("a", {"add": "b"}, "a,b"),
        (None, {"add": "b"}, "b"),
        ("a,b", {"add": "b"}, None),
        ("a,b", {"remove": "a"}, "b"),
        ("a", {"remove": "a"}, "delete"),
        ("a", {"remove": "z"}, None),
    ],
    ids=["add", "add-first", "add-present", "remove", "remove-last", "remove-absent"],
)
def test_users_patch(value, change, patch):
    result = dgd.users_patch(with_users(value), **change)
    if patch is None:
        assert result is None
    else:
        expected = None if patch == "delete" else patch
        assert result == {"metadata": {"annotations": {dgd.USERS_ANNOTATION: expected}}}


@pytest.mark.parametrize(
    "status, terminal, live, submitted",
    [
        ({}, False, True, False),
        ({"jobDeploymentStatus": "Initializing", "jobStatus": ""}, False, True, False),
        ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, False, True, True),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, True, False, True),
        ({"jobDeploymentStatus": "ValidationFailed"}, True, False, False),
    ],
    ids=["new", "initializing", "running", "complete", "never-submitted"],
)
def test_rayjob_states(status, terminal, live, submitted):
    job = {"metadata": {"name": "j"}, "status": status}
    assert (rayjob.terminal(job), rayjob.live(job), rayjob.driver_submitted(job)) == (terminal, live, submitted)


def test_a_missing_rayjob_is_not_live():
    assert rayjob.live(None) is False


def test_managed_needs_the_label():
    assert managed({"metadata": {"labels": {"app.kubernetes.io/managed-by": "nrl-k8s"}}})
    assert not managed({"metadata": {"labels": {"app.kubernetes.io/managed-by": "helm"}}})
    assert not managed({"metadata": {}})


def _manifest(api_version: str, kind: str) -> dict:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}


RAYJOB_RUN = [_manifest("nvidia.com/v1alpha1", "DynamoGraphDeployment"), _manifest("v1", "Secret"),
              _manifest("ray.io/v1", "RayJob")]


def test_run_permissions_cover_every_verb_the_run_uses():
    needed = {str(p) for p in run_permissions(RAYJOB_RUN, proxy=True)}
    assert {"create rayjobs.ray.io", "delete rayjobs.ray.io", "list rayclusters.ray.io", "create secrets",
            "patch secrets", "patch dynamographdeployments.nvidia.com", "delete dynamographdeployments.nvidia.com",
            "list pods", "get services/proxy", "create services/proxy"} <= needed
    assert not any(p.startswith("watch ") for p in needed)  # waits poll without it


@pytest.mark.parametrize("api_version, kind, expected", [
    ("apps/v1", "Deployment", "create deployments.apps"),
    ("v1", "Service", "delete services"),
    ("resource.nvidia.com/v1beta1", "ComputeDomain", "patch computedomains.resource.nvidia.com"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate", "create resourceclaimtemplates.resource.k8s.io"),
    ("ray.io/v1", "RayCluster", "create rayclusters.ray.io"),
])
def test_run_permissions_follow_the_applied_kinds(api_version, kind, expected):
    assert expected in {str(p) for p in run_permissions([_manifest(api_version, kind)], proxy=False)}


def test_run_permissions_depend_on_the_objects_and_the_proxy():
    plain = run_permissions([_manifest("ray.io/v1", "RayJob")], proxy=False)
    assert not any(p.group == "nvidia.com" or p.resource == "services/proxy" for p in plain)
    assert Permission("create", "rayjobs", "ray.io") in plain
    assert len(plain) == len(set(plain))


def test_permission_names_read_like_kubectl():
    assert str(Permission("get", "services/proxy")) == "get services/proxy"
    assert str(Permission("create", "rayjobs", "ray.io")) == "create rayjobs.ray.io"


def _rule(verbs, groups, resources, names=None) -> dict:
    return {"verbs": verbs, "apiGroups": groups, "resources": resources, **({"resourceNames": names} if names else {})}


@pytest.mark.parametrize("rule, permission, granted", [
    (_rule(["*"], ["*"], ["*"]), Permission("create", "services/proxy"), True),
    (_rule(["get", "create"], ["ray.io"], ["rayjobs"]), Permission("create", "rayjobs", "ray.io"), True),
    (_rule(["get"], ["ray.io"], ["rayjobs"]), Permission("create", "rayjobs", "ray.io"), False),
    (_rule(["*"], [""], ["rayjobs"]), Permission("create", "rayjobs", "ray.io"), False),
    (_rule(["*"], ["*"], ["rayclusters"]), Permission("create", "rayjobs", "ray.io"), False),
    (_rule(["get"], [""], ["services"]), Permission("get", "services/proxy"), False),
    (_rule(["get"], [""], ["services/proxy"]), Permission("get", "services"), False),
    (_rule(["get"], [""], ["*/proxy"]), Permission("get", "services/proxy"), True),
    (_rule(["get"], [""], ["*/proxy"]), Permission("get", "services"), False),
    (_rule(["get"], [""], ["services/*"]), Permission("get", "services/proxy"), False),
    (_rule(["*"], ["*"], ["*"], names=["only-this"]), Permission("get", "pods"), False),
], ids=["wildcards", "exact", "other-verb", "other-group", "other-resource", "parent-not-subresource",
        "subresource-not-parent", "any-parent-subresource", "star-slash-needs-a-subresource", "no-resource-slash-star",
        "named-objects-only"])
def test_rbac_rules_grant_as_rbac_matches(rule, permission, granted):
    assert grants(rule, permission) is granted
