"""The fit prediction (kinds.placement, ops.fit) on cluster snapshots given as data."""

from __future__ import annotations

from collections import Counter

import pytest

from nrl_k8s.kinds import placement
from nrl_k8s.kinds.placement import PodGroup, pod_groups, refusal, requests
from nrl_k8s.ops import fit
from nrl_k8s.ops.fit import Cluster, predict

GPU = "nvidia.com/gpu"


def node(name, gpus=4, labels=None, taints=None, unschedulable=False, cpu="144"):
    alloc = {"cpu": cpu, "memory": "960Gi", "pods": "250", **({GPU: str(gpus)} if gpus else {})}
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable}, "status": {"allocatable": alloc}}


def pod_on(node_name, gpus, ns="team-b", owner="hog"):
    return {"metadata": {"name": f"{owner}-x", "namespace": ns, "ownerReferences": [{"name": owner}]},
            "spec": {"nodeName": node_name, "containers": [{"resources": {"limits": {GPU: str(gpus)}}}]}}


def spec(gpus=0, cpu=None, **extra):
    res = {"limits": {GPU: str(gpus)}} if gpus else {}
    if cpu:
        res.setdefault("requests", {})["cpu"] = cpu
    return {"containers": [{"name": "c", "resources": res}], **extra}


def group(label="RayCluster t: head + 2 x gpu", pods=None, **kw):
    return PodGroup(label, tuple(pods or ((spec(), 1), (spec(4), 2))), **kw)


def one(g, cluster):
    return predict([g], cluster)[0]


# -- requests and node filters -------------------------------------------------------------------------

@pytest.mark.parametrize(("pod", "want"), [
    (spec(4), {GPU: 4, "pods": 1}),
    ({"containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                     {"resources": {"limits": {"cpu": "2"}}}]}, {"cpu": 2.5, "memory": 2**30, "pods": 1}),
    ({"containers": [{"resources": {"requests": {"cpu": "1"}}}],
      "initContainers": [{"resources": {"requests": {"cpu": "3"}}}]}, {"cpu": 3, "pods": 1}),
    ({"containers": [{"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "4"}}}]}, {"cpu": 1, "pods": 1}),
], ids=["gpu limit", "limit stands for request", "init container larger", "request wins over limit"])
def test_requests(pod, want):
    assert requests(pod) == want


TAINT = {"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}


def required(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize(("n", "pod", "why"), [
    (node("a", labels={"p": "x"}), spec(nodeSelector={"p": "x"}), None),
    (node("a", labels={"p": "y"}), spec(nodeSelector={"p": "x"}), "didn't match node selector p=x"),
    (node("a", taints=[TAINT]), spec(), "untolerated taint dedicated=team-a:NoSchedule"),
    (node("a", taints=[TAINT]), spec(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "team-a"}]), None),
    (node("a", taints=[TAINT]), spec(tolerations=[{"key": "dedicated", "operator": "Exists"}]), None),
    (node("a", taints=[TAINT]), spec(tolerations=[{"operator": "Exists"}]), None),
    (node("a", taints=[TAINT]), spec(tolerations=[{"key": "dedicated", "value": "b"}]),
     "untolerated taint dedicated=team-a:NoSchedule"),
    (node("a", taints=[{**TAINT, "effect": "PreferNoSchedule"}]), spec(), None),
    (node("a", unschedulable=True), spec(), "untolerated taint node.kubernetes.io/unschedulable:NoSchedule"),
    (node("a", labels={"zone": "1"}), spec(affinity=required(
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["2"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["0"]}]})), None),
    (node("a", labels={"zone": "1"}), spec(affinity=required(
        {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["1"]}]})), "didn't match node affinity"),
    (node("a"), spec(affinity=required(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]})), None),
], ids=["selector match", "selector miss", "taint", "toleration equal", "toleration exists", "tolerate all",
        "wrong value", "prefer no schedule", "cordoned", "affinity terms or", "affinity not in", "match fields"])
def test_node_filters(n, pod, why):
    assert refusal(n, pod) == why


# -- the pods of manifests -------------------------------------------------------------------------------

def test_pod_groups_of_every_kind():
    ray = {"kind": "RayJob", "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"rayClusterSpec": {"headGroupSpec": {"template": {"spec": spec()}},
                                       "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "numOfHosts": 2,
                                                             "template": {"spec": spec(4)}}]}}}
    dep = {"kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3, "template": {"spec": spec()}}}
    v1a = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"},
           "spec": {"services": {"W": {"replicas": 2, "multinode": {"nodeCount": 2},
                                       "resources": {"limits": {"gpu": "4"}},
                                       "extraPodSpec": {"nodeSelector": {"p": "x"}, "mainContainer": {"image": "i"}}}}}}
    v1b = {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "e"},
           "spec": {"components": [{"name": "F", "replicas": 1, "podTemplate": {"spec": spec(2)}}]}}
    groups = pod_groups([dep, ray, v1a, v1b])
    assert [(g.label, g.count, g.queue, g.held) for g in groups] == [
        ("Deployment web", 3, None, False), ("RayJob j: head + 4 x gpu", 5, "q", True),
        ("DGD d: W", 4, None, False), ("DGD e: F", 1, None, False)]
    (w_spec, _), = groups[2].pods
    assert requests(w_spec)[GPU] == 4 and w_spec["nodeSelector"] == {"p": "x"}
    assert groups[1].demand()[GPU] == 16


def test_dra_claims_count_devices_by_class():
    template = {"kind": "ResourceClaimTemplate", "metadata": {"name": "t-roce"},
                "spec": {"spec": {"devices": {"requests": [{"name": "roce", "exactly": {
                    "deviceClassName": "roce.nvidia.com", "count": 8}}]}}}}
    cluster = {"kind": "RayCluster", "metadata": {"name": "t"}, "spec": {"headGroupSpec": {"template": {"spec": {
        **spec(4), "resourceClaims": [{"name": "roce-channel", "resourceClaimTemplateName": "t-roce"}]}}}}}
    (g,) = pod_groups([cluster, template])
    assert g.claims == {"t-roce": {"roce.nvidia.com": 8}}
    assert g.needs(g.pods[0][0]) == {GPU: 4, "pods": 1, "DeviceClass roce.nvidia.com": 8}


# -- verdicts ------------------------------------------------------------------------------------------

NODES = [node(f"g{i}", labels={"nvidia.com/gpu.product": "NVIDIA-GB300"}) for i in range(4)] + [node("c0", gpus=0)]


def test_fits_now():
    assert one(group(), Cluster(NODES, [])).state == fit.NOW


def test_fits_once_names_who_holds_the_gpus():
    held = [pod_on(f"g{i}", 4) for i in range(3)]
    v = one(group(), Cluster(NODES, held))
    assert v.state == fit.ONCE
    assert str(v) == "fits once 4 nvidia.com/gpu free (held by team-b/hog: 12)"


def test_never_when_no_node_is_large_enough():
    v = one(group(pods=((spec(8, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-GB300"}), 1),)), Cluster(NODES, []))
    assert v.state == fit.NEVER
    assert v.reason == ("no node has 8 nvidia.com/gpu with nvidia.com/gpu.product=NVIDIA-GB300 "
                        "(the most one has: 4 nvidia.com/gpu); 1 of 5 nodes: 1 didn't match node selector "
                        "nvidia.com/gpu.product=NVIDIA-GB300")


def test_never_when_the_gang_is_larger_than_its_nodes_together():
    v = one(group(pods=((spec(), 1), (spec(4), 5))), Cluster(NODES, []))
    assert v.state == fit.NEVER and "need 20 nvidia.com/gpu at once" in v.reason and "have 16" in v.reason


def test_a_gang_that_fits_only_together_is_not_split():
    """Two groups of one run: the RayJob's sees the room the DGD takes (it comes up first)."""
    dgd = group("DGD d: W", ((spec(4), 2),))
    ray = group("RayJob t: head + 2 x gpu", ((spec(), 1), (spec(4), 2)), held=True)
    verdicts = predict([ray, dgd], Cluster(NODES, []))
    assert [v.state for v in verdicts] == [fit.NOW, fit.NOW]
    ray3 = group("RayJob t: head + 3 x gpu", ((spec(), 1), (spec(4), 3)), held=True)
    v_ray, v_dgd = predict([ray3, dgd], Cluster(NODES, []))
    assert v_dgd.state == fit.NOW and v_ray.state == fit.NEVER and "beside this run's other pods" in v_ray.reason


@pytest.mark.parametrize(("pod", "reason"), [
    (spec(4, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100"}),
     "no node takes its pods: 5 of 5 nodes: 5 didn't match node selector nvidia.com/gpu.product=NVIDIA-H100"),
    (spec(4, schedulerName="kai-scheduler"), "no scheduler kai-scheduler runs on the cluster"),
], ids=["selector", "scheduler"])
def test_never_static(pod, reason):
    cluster = Cluster(NODES, [], schedulers={"kai-scheduler": False})
    v = one(group(pods=((pod, 1),)), cluster)
    assert v.state == fit.NEVER and v.reason.startswith(reason)


def test_taints_count_per_node():
    nodes = [node("g0", taints=[TAINT]), node("g1", taints=[TAINT]), node("c0", gpus=0)]
    v = one(group(pods=((spec(4), 1),)), Cluster(nodes, []))
    assert v.state == fit.NEVER
    assert v.reason == ("no node has 4 nvidia.com/gpu (the most one has: 0 nvidia.com/gpu); 2 of 3 nodes: "
                        "2 untolerated taint dedicated=team-a:NoSchedule")


def claiming(count: int, gpus: int, cls: str, devices: int) -> PodGroup:
    """``count`` pods of ``gpus`` GPUs, each claiming ``devices`` devices of DeviceClass ``cls``."""
    pod = {**spec(gpus), "resourceClaims": [{"name": "roce-channel", "resourceClaimTemplateName": "t"}]}
    return group(pods=((spec(), 1), (pod, count)), claims={"t": {cls: devices}})


def test_devices():
    """Only the workers claim; each node publishes 8 RoCE devices."""
    classes = {"roce.nvidia.com": "roce.nvidia.com"}
    devices = Counter({(f"g{i}", "roce.nvidia.com"): 8 for i in range(4)})
    g = claiming(2, 4, "roce.nvidia.com", 8)
    assert one(g, Cluster(NODES, [], classes, devices)).state == fit.NOW
    missing = one(claiming(1, 4, "x.example.com", 1), Cluster(NODES, [], classes, devices))
    assert missing.state == fit.NEVER and missing.reason == "the cluster has no DeviceClass x.example.com"
    claimed = Cluster(NODES, [], classes, devices, claimed=Counter({("g0", "roce.nvidia.com"): 8,
                                                                  ("g1", "roce.nvidia.com"): 8,
                                                                  ("g2", "roce.nvidia.com"): 8}))
    v = one(g, claimed)
    assert v.state == fit.ONCE and "devices of DeviceClass roce.nvidia.com" in v.reason


def queue_cluster(quota, used=0):
    flavors = [{"name": "f", "resources": [{"name": GPU, "nominalQuota": quota}]}]
    cq = {"spec": {"resourceGroups": [{"flavors": flavors}]},
          "status": {"flavorsReservation": [{"name": "f", "resources": [{"name": GPU, "total": str(used)}]}]}}
    return Cluster(NODES, [], local_queues={"q": "cq"}, cluster_queues={"cq": cq})


@pytest.mark.parametrize(("quota", "used", "state", "words"), [
    ("16", 0, fit.NOW, ""),
    ("4", 0, fit.NEVER, "it asks 8 nvidia.com/gpu of ClusterQueue cq, whose quota is 4 nvidia.com/gpu"),
    ("16", 12, fit.ONCE, "4 nvidia.com/gpu free in ClusterQueue cq (quota 16 nvidia.com/gpu, in use 12"),
])
def test_kueue_quota(quota, used, state, words):
    v = one(group(queue="q"), queue_cluster(quota, used))
    assert v.state == state and words in v.reason


def test_a_missing_local_queue_never_admits():
    v = one(group(queue="nope"), queue_cluster("16"))
    assert v.state == fit.NEVER and "no Kueue LocalQueue nope" in v.reason


def test_what_cannot_be_read_is_not_verified():
    assert one(group(), Cluster(None)).state == fit.UNKNOWN
    assert one(group(), Cluster(NODES, None)).state == fit.UNKNOWN


def test_quantities():
    assert [placement.quantity(q) for q in ("500m", "1Gi", "4", "1e3", "1.5k", "")] == [0.5, 2**30, 4, 1000, 1500, 0]
