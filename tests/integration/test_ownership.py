"""Objects of another user, or of a person, are never reused, driven or deleted (issue 19).

Alice and bob share a namespace and name their objects alike (the names are fixed by overrides);
a RayCluster made with kubectl stands for a person's. Each refusal is exit 2, one line naming the
object and its maker, and nothing applied.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from sandbox_harness import run_cli

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]


@pytest.fixture
def users(sandbox, sandbox_namespace):
    tag = uuid.uuid4().hex[:6]
    names = [f"infra.namespace={sandbox_namespace}", f"infra.kuberay.training.name=tr-{tag}",
             f"infra.dynamo.serving.name=dgd-{tag}"]

    def as_user(user: str, *args: str) -> object:
        env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": user}
        return run_cli([*args, *PAIR, *names], env=env)

    as_user.tag, as_user.ns = tag, sandbox_namespace
    as_user.custom = client.CustomObjectsApi(sandbox.api_client())
    return as_user


def refused(result, *words: str) -> None:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 2, result.stderr
    assert len(errors) == 1 and all(word in errors[0] for word in words), result.stderr
    assert "Traceback" not in result.stderr


def listed(users, plural: str, group: str = "ray.io", version: str = "v1") -> list[str]:
    items = users.custom.list_namespaced_custom_object(group, version, users.ns, plural)["items"]
    return [item["metadata"]["name"] for item in items]


def test_bobs_run_refuses_alices_dgd_and_applies_nothing(users):
    made = users("alice", "cluster", "up", "--no-wait", "-t", "dynamo.serving")
    assert made.returncode == 0, made.stderr
    dgd = users.custom.get_namespaced_custom_object("nvidia.com", "v1alpha1", users.ns, "dynamographdeployments",
                                                    f"dgd-{users.tag}")
    assert dgd["metadata"]["labels"]["nrl-k8s/owner"] == "alice"

    bobs = users("bob", "run", "--rayjob", "--no-wait")
    refused(bobs, f"DynamoGraphDeployment dgd-{users.tag}", "user 'alice'")
    assert "--adopt" in bobs.stderr
    assert listed(users, "rayjobs") == [] and listed(users, "rayclusters") == []  # nothing of bob's applied

    down = users("bob", "cluster", "down", "-t", "dynamo.serving")
    assert down.returncode == 0 and "made by user 'alice'; leaving it alone" in down.stderr, down.stderr
    assert listed(users, "dynamographdeployments", "nvidia.com", "v1alpha1") == [f"dgd-{users.tag}"]


def test_a_raycluster_made_with_kubectl_is_not_taken_over(users, sandbox):
    person = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": f"tr-{users.tag}"},
              "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                  {"name": "ray-head", "image": "rayproject/ray:2.49.0"}]}}}}}
    users.custom.create_namespaced_custom_object("ray.io", "v1", users.ns, "rayclusters", person)

    up = users("dl5", "cluster", "up", "--no-wait", "-t", "kuberay.training", "-t", "dynamo.serving")
    refused(up, f"RayCluster tr-{users.tag}", "no nrl-k8s managed-by label")
    assert listed(users, "dynamographdeployments", "nvidia.com", "v1alpha1") == []  # its DGD was not made either

    down = users("dl5", "cluster", "down", "-t", "kuberay.training")
    assert down.returncode == 0 and "leaving it alone" in down.stderr, down.stderr
    assert listed(users, "rayclusters") == [f"tr-{users.tag}"]


def test_run_raycluster_does_not_submit_into_a_raycluster_made_with_kubectl(sandbox, sandbox_namespace, tmp_path):
    """The issue's case: dl5's long-lived example run, and a person's RayCluster of its training name."""
    user = f"dl{uuid.uuid4().hex[:4]}"
    person = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": f"{user}-ll-train"},
              "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                  {"name": "ray-head", "image": "rayproject/ray:2.49.0"}]}}}}}
    custom = client.CustomObjectsApi(sandbox.api_client())
    custom.create_namespaced_custom_object("ray.io", "v1", sandbox_namespace, "rayclusters", person)
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": user, "XDG_CACHE_HOME": str(tmp_path)}
    pair = [
        str(ROOT / "examples/sandbox_longlived.yaml"),
        "--infra",
        str(ROOT / "examples/sandbox_longlived.infra.yaml"),
        f"infra.namespace={sandbox_namespace}",
    ]
    refused(run_cli(["run", "--raycluster", "--no-wait", *pair], env=env), f"RayCluster {user}-ll-train",
            "no nrl-k8s managed-by label")
    names = [item["metadata"]["name"] for item in
             custom.list_namespaced_custom_object("ray.io", "v1", sandbox_namespace, "rayclusters")["items"]]
    assert names == [f"{user}-ll-train"]  # neither the gym cluster nor anything else was made
    assert custom.list_namespaced_custom_object("nvidia.com", "v1alpha1", sandbox_namespace,
                                                "dynamographdeployments")["items"] == []


def test_adopt_takes_another_users_dgd_over_and_the_run_uses_it(users):
    """The deliberate case: bob passes --adopt, so his run reuses alice's DGD, lists itself among its
    users, and its driver reads that DGD's name; the run succeeds."""
    made = users("alice", "cluster", "up", "--no-wait", "-t", "dynamo.serving")
    assert made.returncode == 0, made.stderr

    bobs = users("bob", "run", "--rayjob", "--adopt")
    assert bobs.returncode == 0, bobs.stderr
    assert any(line.partition("]")[2].split()[:3] == ["dynamo.serving", "reused", f"dgd-{users.tag}"]
               for line in bobs.stderr.splitlines()), bobs.stderr
    assert f"dgd_name: dgd-{users.tag}" in bobs.stdout  # the driver read the adopted DGD's name
    dgd = users.custom.get_namespaced_custom_object("nvidia.com", "v1alpha1", users.ns, "dynamographdeployments",
                                                    f"dgd-{users.tag}")
    assert dgd["metadata"]["labels"]["nrl-k8s/owner"] == "alice"  # taken over for the run, not relabelled
    assert f"tr-{users.tag}" in dgd["metadata"]["annotations"]["nrl-k8s.io/users"]
