"""What the sandbox runs beyond the real operators, on the session sandbox: the DRA kinds and
their garbage collection, the Dynamo frontend's faults, kubectl on DGDs and RayJobs."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from kubernetes import client
from operator_helpers import IMAGE, condition, dgd, field, listening, proxy, ray_cluster_spec, rayjob
from sandbox_harness import History, eventually, observe, unique

from nrl_k8s_sandbox.controlplane.stages import PLAYED_LABEL

CD = ("resource.nvidia.com", "v1beta1")
DGD = ("nvidia.com", "v1alpha1")
LABEL = "nvidia.com/dynamo-graph-deployment-name"
EXAMPLE_DGD = Path(__file__).resolve().parents[2] / "examples_dgd" / "qwen3_0.6b_kind.yaml"


def owned_by(name: str, owner: dict | None) -> dict:
    meta: dict = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]  # fmt: skip
    return meta


def compute_domain(name: str, channel: str, owner: dict | None = None) -> dict:
    return {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain", "metadata": owned_by(name, owner),
            "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": channel}}}}


def roce_template(name: str, owner: dict | None) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": owned_by(name, owner),
            "spec": {"spec": {"devices": {"requests": [
                {"name": "roce", "exactly": {"deviceClassName": "roce.networking.k8s.aws", "count": 8}}]}}}}


def test_deleting_the_owning_raycluster_collects_the_dra_objects(custom, sandbox_namespace):
    """The real garbage collector follows the ownerReferences nrl-k8s writes."""
    ns, name = sandbox_namespace, unique("owner")
    spec = ray_cluster_spec(workers=0)
    spec["headGroupSpec"]["template"]["metadata"] = {"labels": {PLAYED_LABEL: "true"}}  # only its ownership counts
    cluster = custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name}, "spec": spec})
    custom.create_namespaced_custom_object(
        *CD, ns, "computedomains", compute_domain(f"{name}-cd", f"{name}-channel", cluster)
    )
    custom.create_namespaced_custom_object(
        "resource.k8s.io", "v1", ns, "resourceclaimtemplates", roce_template(f"{name}-roce", cluster)
    )
    observe(custom.list_namespaced_custom_object, *CD, ns, "computedomains",
            until=lambda o: field(o.get(f"{name}-cd"), "status", "status") == "Ready")  # fmt: skip
    templates = custom.list_namespaced_custom_object("resource.k8s.io", "v1", ns, "resourceclaimtemplates")["items"]
    assert sorted(t["metadata"]["name"] for t in templates) == [f"{name}-channel", f"{name}-roce"]

    custom.delete_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", name)
    observe(custom.list_namespaced_custom_object, *CD, ns, "computedomains", until=lambda o: not o)
    observe(
        custom.list_namespaced_custom_object,
        "resource.k8s.io",
        "v1",
        ns,
        "resourceclaimtemplates",
        until=lambda o: not o,
    )


def test_kubectl_finds_the_dra_kinds(sandbox, sandbox_namespace, tmp_path):
    name = unique("kubectl-cd")
    path = tmp_path / "cd.yaml"
    path.write_text(yaml.safe_dump(compute_domain(name, f"{name}-channel")))
    ns = ["-n", sandbox_namespace]
    assert f"computedomain.resource.nvidia.com/{name} created" in sandbox.kubectl("apply", *ns, "-f", str(path)).stdout
    sandbox.kubectl("wait", *ns, "--for=jsonpath={.status.status}=Ready", f"computedomain/{name}", "--timeout=240s")
    listed = sandbox.kubectl("get", *ns, "resourceclaimtemplates", "-o", "name").stdout.split()
    assert listed == [f"resourceclaimtemplate.resource.k8s.io/{name}-channel"]
    sandbox.kubectl("delete", *ns, "-f", str(path), "--wait=true")


def test_frontend_unavailable_makes_the_frontend_answer_503(sandbox, api, custom, sandbox_namespace):
    ns, name = sandbox_namespace, unique("warmup")
    with sandbox.fault("frontend-unavailable", "3600"):
        custom.create_namespaced_custom_object(*DGD, ns, "dynamographdeployments", dgd(name))
        # the API server answers 503 itself (a Status) until the frontend's pod is an endpoint
        reply = eventually(lambda: (r := proxy(api, "GET", ns, f"{name}-frontend:8000", "v1/models"))[0] in (200, 503)
                           and json.loads(r[1]).get("kind") != "Status" and r, what="the frontend answering")
    code, body = reply
    assert (code, json.loads(body)["error"]["message"]) == (503, "frontend is starting (sandbox: not serving yet)")


def test_slow_holds_the_pods_back(separate_sandbox):
    """Set at start: a change at run time reaches kwok's Stages a moment later."""
    with separate_sandbox("slow=1000") as box, box.api_client() as api:
        _held_back(client.CoreV1Api(api), client.CustomObjectsApi(api))


def _held_back(core, custom) -> None:
    ns, name = "default", unique("slow")
    dgds = History(
        custom.list_namespaced_custom_object, *DGD, ns, "dynamographdeployments", field_selector=f"metadata.name={name}"
    )
    with dgds:
        custom.create_namespaced_custom_object(*DGD, ns, "dynamographdeployments", dgd(name))
        dgds.wait(lambda h: condition(h.objects().get(name) or {}, "Ready").get("reason") == "pods_not_ready",
                  what="the DGD waiting for its pods")
        observe(core.list_namespaced_pod, ns, label_selector=f"{LABEL}={name}", until=lambda o: len(o) == 2)
        dgds.holds(lambda o: field(o.get(name), "status", "state") != "successful", seconds=3)
        pods = core.list_namespaced_pod(ns, label_selector=f"{LABEL}={name}").items
    assert [p.status.phase for p in pods] == ["Pending", "Pending"]



def test_a_deleted_dgd_stops_its_frontend_process(api, core, custom, sandbox_namespace):
    ns, name = sandbox_namespace, unique("gone")
    custom.create_namespaced_custom_object(*DGD, ns, "dynamographdeployments", dgd(name))
    observe(
        custom.list_namespaced_custom_object,
        *DGD,
        ns,
        "dynamographdeployments",
        field_selector=f"metadata.name={name}",
        until=lambda o: field(o.get(name), "status", "state") == "successful",
    )
    frontend = core.list_namespaced_pod(
        ns, label_selector=f"{LABEL}={name},nvidia.com/dynamo-component-type=frontend"
    ).items[0]
    forward = custom.get_namespaced_custom_object(
        "kwok.x-k8s.io", "v1alpha1", ns, "portforwards", frontend.metadata.name
    )
    port = forward["spec"]["forwards"][0]["target"]["port"]
    assert listening(port)

    custom.delete_namespaced_custom_object(*DGD, ns, "dynamographdeployments", name)
    eventually(lambda: not listening(port), what="the frontend's process stopped")


def test_kubectl_apply_of_an_example_dgd_reaches_successful(sandbox, sandbox_namespace, tmp_path):
    """The example as nrl-k8s renders it, which fills in the image its main containers leave unset
    (the operator requires one); applied with kubectl."""
    example = yaml.safe_load(EXAMPLE_DGD.read_text())
    for service in example["spec"]["services"].values():
        service["extraPodSpec"]["mainContainer"].setdefault("image", IMAGE)
    manifest = tmp_path / "dgd.yaml"
    manifest.write_text(yaml.safe_dump(example))
    name = example["metadata"]["name"]
    ns = ["-n", sandbox_namespace]
    applied = sandbox.kubectl("apply", *ns, "-f", str(manifest))
    assert f"dynamographdeployment.nvidia.com/{name} created" in applied.stdout
    sandbox.kubectl("wait", *ns, "--for=jsonpath={.status.state}=successful", f"dgd/{name}", "--timeout=240s")
    pods = sandbox.kubectl("get", *ns, "pods", "-l", f"{LABEL}={name}", "-o", "name")
    assert len(pods.stdout.split()) == 2
    assert (
        sandbox.kubectl("get", *ns, "service", f"{name}-frontend", "-o", "jsonpath={.spec.ports[0].port}").stdout
        == "8000"
    )
    sandbox.kubectl("delete", *ns, "-f", str(manifest), "--wait=true")


def test_a_kubectl_applied_rayjob_runs_on_a_real_ray_head_and_its_cluster_is_deleted(
    sandbox, sandbox_namespace, tmp_path
):
    """Real KubeRay, K8sJobMode (its default): its submitter Job's pod runs `ray job submit`."""
    name, proof = unique("kubectl"), tmp_path / "ran.txt"
    manifest = tmp_path / "rayjob.yaml"
    script = tmp_path / "ran.sh"  # KubeRay puts the entrypoint into its submitter's shell command line, unquoted
    script.write_text(f"echo applied-with-kubectl > {proof}\n")
    body = rayjob(name, f"sh {script}")
    del body["spec"]["submissionMode"]
    manifest.write_text(yaml.safe_dump(body))
    ns = ["-n", sandbox_namespace]
    sandbox.kubectl("apply", *ns, "-f", str(manifest))
    sandbox.kubectl(
        "wait", *ns, "--for=jsonpath={.status.jobDeploymentStatus}=Complete", f"rayjob/{name}", "--timeout=240s"
    )
    cluster = sandbox.kubectl("get", *ns, "rayjob", name, "-o", "jsonpath={.status.rayClusterName}").stdout
    assert cluster.startswith(f"{name}-")
    sandbox.kubectl("wait", *ns, "--for=delete", f"raycluster/{cluster}", "--timeout=240s")
    assert proof.read_text() == "applied-with-kubectl\n"
    assert sandbox.kubectl("get", *ns, "rayjob", name, "-o", "jsonpath={.status.jobStatus}").stdout == "SUCCEEDED"


def test_the_old_rayjob_crd_lacks_what_run_parallel_needs_and_the_built_one_has_it():
    """The two RayJob CRDs `sandbox build` fetched (KubeRay's pinned one, and 1.5.1's for the
    ``old-rayjob-crd`` fault), read as `check` reads the installed CRD."""
    from nrl_k8s.kinds.crds import Gaps, parallel_gaps
    from nrl_k8s_sandbox.controlplane import binaries

    crds = binaries.find().crds
    current, old = (yaml.safe_load((folder / "ray.io_rayjobs.yaml").read_text()) for folder in (crds, crds / "old"))
    assert parallel_gaps(current) == Gaps()
    assert parallel_gaps(old) == Gaps(missing=("spec.preRunningDeadlineSeconds",))
