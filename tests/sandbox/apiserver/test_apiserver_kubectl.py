"""The real kubectl against the sandbox API server (over TLS, token auth); skipped without kubectl."""

from __future__ import annotations

import shutil
import subprocess
import threading

import pytest
import yaml
from sandbox_harness import DEADLINE_S

from nrl_k8s.sandbox.crds import DGD_CRD

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"mode": "fast"}}
DGD = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoGraphDeployment",
    "metadata": {"name": "demo"},
    "spec": {"backendFramework": "vllm", "services": {"Frontend": {"componentType": "frontend", "replicas": 1}}},
}


def test_get_namespaces(kubectl):
    lines = kubectl("get", "ns").splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "AGE"]
    assert [line.split()[:2] for line in lines[1:]] == [["default", "Active"], ["kube-system", "Active"]]


def test_apply_configmap_twice_then_change(kubectl, core):
    manifest = yaml.safe_dump(CONFIGMAP)
    assert kubectl("apply", "-f", "-", stdin=manifest).strip() == "configmap/settings created"
    assert kubectl("apply", "-f", "-", stdin=manifest).strip() == "configmap/settings unchanged"
    changed = yaml.safe_dump({**CONFIGMAP, "data": {"mode": "slow"}})
    assert kubectl("apply", "-f", "-", stdin=changed).strip() == "configmap/settings configured"
    assert core.read_namespaced_config_map("settings", "default").data == {"mode": "slow"}


def test_custom_resource_lifecycle(server, kubectl, custom):
    server.install_crd(DGD_CRD)
    manifest = yaml.safe_dump(DGD)
    assert kubectl("apply", "-f", "-", stdin=manifest).strip() == "dynamographdeployment.nvidia.com/demo created"
    assert kubectl("apply", "-f", "-", stdin=manifest).strip() == "dynamographdeployment.nvidia.com/demo unchanged"
    custom.patch_namespaced_custom_object_status(
        "nvidia.com", "v1alpha1", "default", "dynamographdeployments", "demo", {"status": {"state": "successful", "conditions": [{"type": "Ready", "status": "True"}]}}
    )
    table = kubectl("get", "dgd").splitlines()
    assert table[0].split() == ["NAME", "READY", "BACKEND", "AGE"]
    assert table[1].split()[:3] == ["demo", "True", "vllm"]
    described = kubectl("describe", "dgd", "demo")
    assert "Name:         demo" in described and "Backend Framework:  vllm" in described
    assert kubectl("get", "dgd", "demo", "-o", "jsonpath={.status.state}") == "successful"
    assert kubectl("delete", "-f", "-", stdin=manifest).strip() == 'dynamographdeployment.nvidia.com "demo" deleted'
    assert custom.list_namespaced_custom_object("nvidia.com", "v1alpha1", "default", "dynamographdeployments")["items"] == []


def test_describe_pod_lists_its_events(kubectl, core):
    pod = core.create_namespaced_pod("default", {"metadata": {"name": "worker"}, "spec": {"containers": [{"name": "c", "image": "img:1"}]}})
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "worker.1"},
            "involvedObject": {"kind": "Pod", "name": "worker", "namespace": "default", "apiVersion": "v1", "uid": pod.metadata.uid},
            "reason": "FailedScheduling",
            "message": "0/1 nodes are available: insufficient nvidia.com/gpu",
            "type": "Warning",
        },
    )
    described = kubectl("describe", "pod", "worker")
    assert "FailedScheduling" in described and "insufficient nvidia.com/gpu" in described


def test_delete_by_name(kubectl, core):
    core.create_namespaced_config_map("default", {"metadata": {"name": "gone"}})
    assert kubectl("delete", "configmap", "gone").strip() == 'configmap "gone" deleted'
    assert core.list_namespaced_config_map("default").items == []


def test_get_watch_streams_new_objects(kubectl, core):
    proc = subprocess.Popen(kubectl.base + ["get", "configmaps", "--watch", "-o", "name"], stdout=subprocess.PIPE, text=True)
    killer = threading.Timer(DEADLINE_S, proc.kill)
    killer.start()
    try:
        core.create_namespaced_config_map("default", {"metadata": {"name": "first"}})
        core.create_namespaced_config_map("default", {"metadata": {"name": "second"}})
        seen = {proc.stdout.readline().strip() for _ in range(2)}
    finally:
        proc.kill()
        proc.wait()
        killer.cancel()
    assert seen == {"configmap/first", "configmap/second"}
