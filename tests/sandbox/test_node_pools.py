"""Node pools on a real sandbox (``sandbox up --nodes SPEC``): the nodes carry the pool's labels,
taints and GPUs, and the real kube-scheduler honours them. The SPEC parser's tests are
tests/controlplane/test_controlplane_nodes.py."""

from __future__ import annotations

import json

from kubernetes import client
from sandbox_harness import History, nrl_k8s, unique

H100 = ("h100:count=2,gpus=8,product=NVIDIA-H100-80GB-HBM3,label=zone=a,taint=dedicated=team-a:NoSchedule,"
        "cpu=96,memory=1Ti")
TEAM_A = {"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}


def _pod(name: str, gpus: int, tolerations: list[dict] | None = None) -> dict:
    return {"metadata": {"name": name}, "spec": {
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "tolerations": tolerations or [],
        "containers": [{"name": "c", "image": "example/c:1", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def _scheduled(pod: dict | None) -> dict:
    return next((c for c in ((pod or {}).get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"),
                {})


def test_pools_shape_the_nodes_and_the_scheduler_honours_them(separate_sandbox):
    with separate_sandbox(flags=("--nodes", H100, "--nodes", "cpu:count=1")) as box, box.api_client() as api:
        core = client.CoreV1Api(api)
        listed = json.loads(core.list_node(_preload_content=False).data)["items"]
        nodes = {node["metadata"]["name"]: node for node in listed}
        assert sorted(nodes) == ["cpu-0", "h100-0", "h100-1"]  # the default pools are gone
        for name in ("h100-0", "h100-1"):
            labels, spec, status = nodes[name]["metadata"]["labels"], nodes[name]["spec"], nodes[name]["status"]
            assert {k: labels.get(k) for k in ("nvidia.com/gpu.product", "nvidia.com/gpu.present",
                                                "nvidia.com/gpu.count", "zone", "kubernetes.io/hostname")} == {
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": "8", "zone": "a", "kubernetes.io/hostname": name}
            assert spec["taints"] == [TEAM_A]  # the lifecycle controller's not-ready taints are gone, the pool's stays
            assert {k: status["allocatable"][k] for k in ("nvidia.com/gpu", "cpu", "memory")} == {
                "nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti"}
        assert "taints" not in nodes["cpu-0"]["spec"] and "nvidia.com/gpu" not in nodes["cpu-0"]["status"]["capacity"]
        slices = client.ResourceV1Api(api).list_resource_slice().items
        assert sorted({s.spec.node_name for s in slices}) == ["h100-0", "h100-1"]  # GPU nodes' DRA devices

        tolerant, intolerant = unique("tolerant"), unique("intolerant")
        with History(core.list_namespaced_pod, "default") as pods:
            core.create_namespaced_pod("default", _pod(tolerant, 8, [{**TEAM_A, "operator": "Equal"}]))
            core.create_namespaced_pod("default", _pod(intolerant, 1))
            pods.wait(lambda h: (h.objects().get(tolerant, {}).get("spec", {}).get("nodeName")
                                 and _scheduled(h.objects().get(intolerant)).get("reason") == "Unschedulable"),
                      what="the tolerating pod bound and the other marked Unschedulable")
        assert pods.objects()[tolerant]["spec"]["nodeName"] in ("h100-0", "h100-1")
        waiting = pods.objects()[intolerant]
        assert waiting["status"]["phase"] == "Pending" and not waiting["spec"].get("nodeName")
        assert "untolerated taint" in _scheduled(waiting)["message"], _scheduled(waiting)

        report = json.loads(nrl_k8s("sandbox", "status", "--dir", str(box.dir), "-o", "json").stdout)
        assert [(p["name"], p["count"], p["gpus"], p["taints"]) for p in report["pools"]] == [
            ("h100", 2, 8, [TEAM_A]), ("cpu", 1, 0, [])]
        text = nrl_k8s("sandbox", "status", "--dir", str(box.dir)).stdout
        assert ("nodes:      h100-0..1: 8 nvidia.com/gpu NVIDIA-H100-80GB-HBM3, cpu 96, memory 1Ti, pods 250; "
                "labels zone=a; taints dedicated=team-a:NoSchedule\n            cpu-0: cpu 144, memory 960Gi, pods 250"
                ) in text, text
