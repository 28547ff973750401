"""DRA kinds on a real `sandbox up`: ComputeDomains (with the simulated driver) and ResourceClaimTemplates."""

from __future__ import annotations

import shutil

import pytest
from kubernetes import client
from operator_helpers import field, ray_cluster_spec
from sandbox_harness import History, observe, unique

CD = ("resource.nvidia.com", "v1beta1")


def owned_by(name: str, owner: dict | None) -> dict:
    meta: dict = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]  # fmt: skip
    return meta


def compute_domain(name: str, channel: str, owner: dict | None = None) -> dict:
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": owned_by(name, owner),
        "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": channel}}},
    }


def roce_template(name: str, owner: dict | None) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": owned_by(name, owner),
        "spec": {"spec": {"devices": {"requests": [{"name": "roce", "exactly": {"deviceClassName": "roce.networking.k8s.io"}}]}}},
    }


def test_discovery_lists_both_kinds_and_the_typed_client_serves_templates(api, sandbox_namespace):
    dra = client.ResourceV1Api(api)
    listed = {r.name: r for r in dra.get_api_resources().resources}
    assert (listed["resourceclaimtemplates"].kind, listed["resourceclaimtemplates"].namespaced) == ("ResourceClaimTemplate", True)
    groups = client.ApisApi(api).get_api_versions().groups
    assert {g.name: [v.version for v in g.versions] for g in groups}["resource.nvidia.com"] == ["v1beta1"]

    body = roce_template(unique("roce"), None)
    created = dra.create_namespaced_resource_claim_template(sandbox_namespace, body)
    assert dra.read_namespaced_resource_claim_template(created.metadata.name, sandbox_namespace).spec.spec.devices.requests[0].name == "roce"
    assert [t.metadata.name for t in dra.list_namespaced_resource_claim_template(sandbox_namespace).items] == [created.metadata.name]
    dra.delete_namespaced_resource_claim_template(created.metadata.name, sandbox_namespace)


def test_a_compute_domain_becomes_ready_with_its_channel_template(custom, sandbox_namespace):
    ns, name = sandbox_namespace, unique("cd")
    channel = f"{name}-channel"
    with History(custom.list_namespaced_custom_object, *CD, ns, "computedomains", field_selector=f"metadata.name={name}") as history:
        created = custom.create_namespaced_custom_object(*CD, ns, "computedomains", compute_domain(name, channel))
        history.wait(lambda h: field(h.objects().get(name), "status", "status") == "Ready", what="the ComputeDomain Ready")
    assert field(history.events(name)[0][1], "status", "status") != "Ready"
    template = custom.get_namespaced_custom_object("resource.k8s.io", "v1", ns, "resourceclaimtemplates", channel)
    owner = template["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("ComputeDomain", name, created["metadata"]["uid"], True)
    assert template["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]["domainID"] == created["metadata"]["uid"]

    custom.delete_namespaced_custom_object(*CD, ns, "computedomains", name)
    observe(custom.list_namespaced_custom_object, "resource.k8s.io", "v1", ns, "resourceclaimtemplates",
            field_selector=f"metadata.name={channel}", until=lambda o: not o)  # fmt: skip


def test_deleting_the_owning_raycluster_collects_the_dra_objects(custom, sandbox_namespace):
    ns, name = sandbox_namespace, unique("owner")
    cluster = custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name}, "spec": ray_cluster_spec(workers=0)})  # fmt: skip
    custom.create_namespaced_custom_object(*CD, ns, "computedomains", compute_domain(f"{name}-cd", f"{name}-channel", cluster))
    custom.create_namespaced_custom_object("resource.k8s.io", "v1", ns, "resourceclaimtemplates", roce_template(f"{name}-roce", cluster))
    observe(custom.list_namespaced_custom_object, *CD, ns, "computedomains",
            until=lambda o: field(o.get(f"{name}-cd"), "status", "status") == "Ready")  # fmt: skip
    templates = custom.list_namespaced_custom_object("resource.k8s.io", "v1", ns, "resourceclaimtemplates")["items"]
    assert sorted(t["metadata"]["name"] for t in templates) == [f"{name}-channel", f"{name}-roce"]

    custom.delete_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", name)
    observe(custom.list_namespaced_custom_object, *CD, ns, "computedomains", until=lambda o: not o)
    observe(custom.list_namespaced_custom_object, "resource.k8s.io", "v1", ns, "resourceclaimtemplates", until=lambda o: not o)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_finds_the_dra_kinds(sandbox, sandbox_namespace, tmp_path):
    import yaml

    name = unique("kubectl-cd")
    path = tmp_path / "cd.yaml"
    path.write_text(yaml.safe_dump(compute_domain(name, f"{name}-channel")))
    ns = ["-n", sandbox_namespace]
    assert f"computedomain.resource.nvidia.com/{name} created" in sandbox.kubectl("apply", *ns, "-f", str(path)).stdout
    sandbox.kubectl("wait", *ns, "--for=jsonpath={.status.status}=Ready", f"computedomain/{name}", "--timeout=240s")
    listed = sandbox.kubectl("get", *ns, "resourceclaimtemplates", "-o", "name").stdout.split()
    assert listed == [f"resourceclaimtemplate.resource.k8s.io/{name}-channel"]
    assert "resourceclaimtemplates" in sandbox.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout
    sandbox.kubectl("delete", *ns, "-f", str(path), "--wait=true")
