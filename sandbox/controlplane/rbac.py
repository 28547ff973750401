"""The sandbox user's permissions, as real RBAC: all of them, or all but what a fault denies.

Without ``rbac-deny`` or ``proxy-forbidden`` the user's group is bound to ``cluster-admin``.
With them, it is bound instead to a ClusterRole listing, for every resource discovery serves,
every verb except the denied ones (RBAC only grants, so a denial is the absence of a grant).
The change is in force once a SelfSubjectAccessReview made as the user says so.
"""

from __future__ import annotations

import time

import kubernetes

from ..faults import Faults

BINDING = "nrl-k8s-sandbox-users"
ROLE = "nrl-k8s-sandbox-user-restricted"
_VERBS = {"deletecollection": "delete"}  # discovery's verb -> the fault's


def _served(api: kubernetes.client.ApiClient) -> dict[tuple[str, str], list[str]]:
    """(API group, resource) -> verbs, for every resource and subresource discovery lists."""
    lists = [("", kubernetes.client.CoreV1Api(api).get_api_resources())]
    custom = kubernetes.client.CustomObjectsApi(api)
    for group in kubernetes.client.ApisApi(api).get_api_versions().groups:
        lists += [(group.name, custom.get_api_resources(group.name, v.version)) for v in group.versions]
    served: dict[tuple[str, str], list[str]] = {}
    for group, listing in lists:
        for resource in listing.resources:
            served.setdefault((group, resource.name), list(resource.verbs or []))
    return served


def apply(admin: kubernetes.client.ApiClient, user: kubernetes.client.ApiClient, faults: Faults, group: str,
          deadline_s: float = 60.0) -> None:
    """Bind ``group`` to what the faults leave it, and wait until the user's reviews agree."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(admin)
    served = _served(admin)
    proxy_forbidden = faults.get("proxy-forbidden") is not None
    denied = [(group, name, verb) for (group, name), verbs in served.items() for verb in verbs
              if faults.denied(_VERBS.get(verb, verb), name) or (proxy_forbidden and name == "services/proxy")]
    role = "cluster-admin"
    if denied:
        role = ROLE
        rules = [{"apiGroups": [group], "resources": [name], "verbs": allowed}
                 for (group, name), verbs in served.items()
                 if (allowed := [v for v in verbs if (group, name, v) not in denied])]
        body = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": ROLE},
                "rules": rules + [{"nonResourceURLs": ["*"], "verbs": ["*"]}]}
        try:
            rbac.replace_cluster_role(ROLE, body)
        except kubernetes.client.ApiException as err:
            if err.status != 404:
                raise
            rbac.create_cluster_role(body)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": BINDING},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
    }
    try:
        current = rbac.read_cluster_role_binding(BINDING)
        if current.role_ref.name != role:  # roleRef is immutable: replace the binding
            rbac.delete_cluster_role_binding(BINDING)
            rbac.create_cluster_role_binding(binding)
    except kubernetes.client.ApiException as err:
        if err.status != 404:
            raise
        rbac.create_cluster_role_binding(binding)
    group_, resource, verb = denied[0] if denied else ("", "namespaces", "get")
    _await(user, group_, resource, verb, expect_allowed=not denied, deadline_s=deadline_s)


def _await(user: kubernetes.client.ApiClient, group: str, resource: str, verb: str, *, expect_allowed: bool,
           deadline_s: float) -> None:
    auth = kubernetes.client.AuthorizationV1Api(user)
    name, _, sub = resource.partition("/")
    attributes = {"verb": verb, "resource": name, "subresource": sub or None, "group": group}
    deadline = time.monotonic() + deadline_s
    while True:
        review = auth.create_self_subject_access_review({"spec": {"resourceAttributes": attributes}})
        if review.status.allowed == expect_allowed or time.monotonic() > deadline:
            return
        time.sleep(0.05)
