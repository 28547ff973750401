"""The sandbox's Kueue option (``controlplane.kueue``), offline: its settings, its webhooks, its queues.
The live tests are tests/integration/test_kueue.py."""

from __future__ import annotations

import pytest

from nrl_k8s.errors import ConfigError
from nrl_k8s_sandbox.controlplane import kueue
from nrl_k8s_sandbox.process import parse_faults

SETTINGS = {
    "queued": ("queued", False, kueue.QUOTA),
    "all jobs": ("all", True, kueue.QUOTA),
    "a GPU quota": ("all,nvidia.com/gpu=8", True, {**kueue.QUOTA, "nvidia.com/gpu": "8"}),
    "a quota of another resource": ("queued, example.com/nic = 4", False, {**kueue.QUOTA, "example.com/nic": "4"}),
}


@pytest.mark.parametrize("value,all_jobs,quota", SETTINGS.values(), ids=SETTINGS.keys())
def test_settings(value, all_jobs, quota):
    settings = kueue.parse(value)
    assert (settings.all_jobs, settings.quota) == (all_jobs, quota)
    assert kueue.configuration(settings, port=1, probe=2, cert_dir="d")["manageJobsWithoutQueueName"] is all_jobs


@pytest.mark.parametrize("value", ["", "on", "all,gpu", "all,=8", "queued,nvidia.com/gpu="])
def test_bad_settings_are_refused_at_sandbox_up(value):
    with pytest.raises(ConfigError, match="kueue"):
        parse_faults([f"kueue={value}"])


def test_webhooks_call_loopback_only_for_what_this_kueue_serves():
    def hook(group: str, resource: str) -> dict:
        return {"name": f"m{resource}.kb.io", "rules": [{"apiGroups": [group], "resources": [resource]}],
                "clientConfig": {"service": {"name": "webhook-service", "namespace": "system",
                                             "path": f"/mutate-{resource}"}}}

    docs = [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
             "metadata": {"name": "mutating-webhook-configuration"},
             "webhooks": [hook("batch", "jobs"), hook("", "pods"), hook("kueue.x-k8s.io", "workloads"),
                          hook("ray.io", "rayjobs"), hook("apps", "deployments")]}]
    [doc] = kueue.webhooks(docs, "https://127.0.0.1:9", b"CA")
    assert doc["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    assert [h["clientConfig"]["url"] for h in doc["webhooks"]] == [
        "https://127.0.0.1:9/mutate-jobs", "https://127.0.0.1:9/mutate-workloads", "https://127.0.0.1:9/mutate-rayjobs"]
    assert all(h["clientConfig"]["caBundle"] == "Q0E=" for h in doc["webhooks"])


def test_the_cluster_queue_covers_its_quota_for_every_namespace():
    flavor, cluster_queue, local = kueue.queues(kueue.parse("queued,nvidia.com/gpu=8"))
    assert (flavor["kind"], cluster_queue["kind"], local["kind"]) == ("ResourceFlavor", "ClusterQueue", "LocalQueue")
    assert cluster_queue["spec"]["namespaceSelector"] == {}
    [group] = cluster_queue["spec"]["resourceGroups"]
    assert {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}["nvidia.com/gpu"] == "8"
    assert set(group["coveredResources"]) == set(kueue.QUOTA)
    assert local["metadata"]["namespace"] == "default" and local["spec"]["clusterQueue"] == kueue.QUEUE
