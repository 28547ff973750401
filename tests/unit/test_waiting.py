"""Why a pod waits (``ops.waiting``): the scheduler's verdict summarised, each pod's reason, and one
line per waiting group of the run. Scheduler messages are kube-scheduler v1.36's (FitError.Error()
with its PostFilter tail), as a pod's PodScheduled condition carries them."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrl_k8s.config.loader import load_config
from nrl_k8s.kinds import dgd, kueue
from nrl_k8s.ops import waiting

ROOT = Path(__file__).resolve().parents[2]
NOT_HELPFUL = " preemption: 0/10 nodes are available: 10 Preemption is not helpful for scheduling."


@pytest.mark.parametrize("message, summary", [
    pytest.param("0/10 nodes are available: 10 Insufficient nvidia.com/gpu." + NOT_HELPFUL,
                 "0/10 nodes: 10 Insufficient nvidia.com/gpu", id="resources"),
    pytest.param("0/10 nodes are available: 10 Insufficient nvidia.com/gpu. no new claims to deallocate," + NOT_HELPFUL,
                 "0/10 nodes: 10 Insufficient nvidia.com/gpu", id="dra-postfilter"),
    pytest.param("0/10 nodes are available: 2 node(s) had untolerated taint {dedicated: team-a}, 8 node(s) didn't "
                 "match Pod's node affinity/selector." + NOT_HELPFUL,
                 "0/10 nodes: 8 didn't match node affinity/selector, 2 untolerated taint {dedicated: team-a}",
                 id="most-nodes-first"),
    pytest.param("0/10 nodes are available: 10 Insufficient cpu, 2 Insufficient nvidia.com/gpu, 8 Insufficient "
                 "memory.", "0/10 nodes: 10 Insufficient cpu, 8 Insufficient memory, 2 Insufficient nvidia.com/gpu",
                 id="no-preemption-part"),
    pytest.param("0/10 nodes are available: 1 node(s) were unschedulable, 9 node(s) had untolerated taint "
                 "{node.kubernetes.io/not-ready: }. preemption: 0/10 nodes are available: 1 No preemption victims "
                 "found for incoming pod, 9 Preemption is not helpful for scheduling.",
                 "0/10 nodes: 9 untolerated taint {node.kubernetes.io/not-ready: }, 1 unschedulable",
                 id="dotted-taint-key"),
    pytest.param("0/10 nodes are available: pod has unbound immediate PersistentVolumeClaims." + NOT_HELPFUL,
                 "0/10 nodes: pod has unbound immediate PersistentVolumeClaims", id="prefilter"),
    pytest.param("0/8 nodes are available: 8 cannot allocate all claims.\npreemption: 0/8 nodes are available: 8 "
                 "Preemption is not helpful for scheduling.", "0/8 nodes: 8 cannot allocate all claims",
                 id="two-lines"),
    pytest.param("0/0 nodes are available.", "0/0 nodes", id="no-node"),
    pytest.param("no nodes available to schedule pods", "no nodes available to schedule pods", id="other-shape"),
    pytest.param("running PreBind plugin: x." + NOT_HELPFUL, "running PreBind plugin: x", id="other-shape-preempt"),
    pytest.param("x" * 300, "x" * 197 + "...", id="cut"),
])
def test_summarize(message, summary):
    assert waiting.summarize(message) == summary


def make_pod(labels: dict, *, phase: str = "Pending", scheduled: dict | None = None, **spec) -> dict:
    conditions = [{"type": "PodScheduled", **scheduled}] if scheduled else []
    return {"metadata": {"name": "p", "labels": labels}, "spec": {"containers": [{"name": "c"}], **spec},
            "status": {"phase": phase, "conditions": conditions}}


UNFIT = {"status": "False", "reason": "Unschedulable",
         "message": "0/10 nodes are available: 10 Insufficient nvidia.com/gpu." + NOT_HELPFUL}


@pytest.mark.parametrize("obj, reason", [
    pytest.param(make_pod({}, scheduled=UNFIT), "0/10 nodes: 10 Insufficient nvidia.com/gpu", id="unschedulable"),
    pytest.param(make_pod({}, schedulerName="kai-scheduler"),
                 "no scheduler kai-scheduler has picked it up (is it installed?)", id="missing-scheduler"),
    pytest.param(make_pod({}), "default-scheduler has not considered it yet", id="not-yet-considered"),
    pytest.param(make_pod({}, schedulingGates=[{"name": "kueue.x-k8s.io/admission"}],
                          scheduled={"status": "False", "reason": "SchedulingGated"}),
                 "held by scheduling gates: kueue.x-k8s.io/admission", id="gated"),
    pytest.param(make_pod({}, scheduled={"status": "False", "reason": "Unschedulable"}), "Unschedulable",
                 id="no-message"),
    pytest.param(make_pod({}, nodeName="gb300-0", scheduled={"status": "True"}), None, id="bound"),
    pytest.param(make_pod({}, scheduled={"status": "True"}), None, id="scheduled"),
    pytest.param(make_pod({}, phase="Running", scheduled={"status": "True"}), None, id="running"),
])
def test_pod_reason(obj, reason):
    assert waiting.pod_reason(obj) == reason


def test_owners_of_a_run(tmp_path):
    """A RayCluster's pods group by Ray group, a DGD's by component, a Deployment's as one; the
    Deployment's pods are those its selector takes."""
    env = {"NRL_K8S_USER": "tester", "HOME": str(tmp_path)}
    infra = load_config(ROOT / "examples/sandbox_longlived.yaml", infra=ROOT / "examples/sandbox_longlived.infra.yaml",
                        env=env).infra
    found = waiting.owners(infra, ["tester-ll-training"], [("tester-ll-dgd", "other")])
    assert [(o.name, o.namespace) for o in found] == [
        ("RayCluster tester-ll-training", "default"), ("DGD tester-ll-dgd", "other"),
        ("Deployment tester-ll-web", "default")]
    web = found[2]
    assert web.group({**web.labels, "extra": "x"}) == "Deployment tester-ll-web"
    assert web.group({}) is None


RAY = waiting.Owner("RayCluster c", "ns", {"ray.io/cluster": "c"}, ("ray.io/group",))
GRAPH = waiting.Owner("DGD g", "ns", {dgd.POD_LABEL: "g"}, ("nvidia.com/dynamo-component",))
OTHER = "0/10 nodes are available: 10 node(s) didn't match Pod's node affinity/selector."


@pytest.mark.parametrize("pods, rows", [
    pytest.param([make_pod({"ray.io/cluster": "c", "ray.io/group": "gpu"}, scheduled=UNFIT)] * 3
                 + [make_pod({"ray.io/cluster": "c", "ray.io/group": "headgroup"}, scheduled={"status": "True"})],
                 [{"group": "RayCluster c: gpu", "pods": 3, "reason": "0/10 nodes: 10 Insufficient nvidia.com/gpu"}],
                 id="one-group-waits"),
    pytest.param([make_pod({"ray.io/cluster": "c", "ray.io/group": "gpu"}, scheduled=UNFIT)] * 2
                 + [make_pod({"ray.io/cluster": "c", "ray.io/group": "gpu"},
                             scheduled={"status": "False", "message": OTHER})],
                 [{"group": "RayCluster c: gpu", "pods": 3, "reason": "0/10 nodes: 10 Insufficient nvidia.com/gpu"}],
                 id="most-pods-reason"),
    pytest.param([make_pod({dgd.POD_LABEL: "g", "nvidia.com/dynamo-component": "Frontend"}, schedulerName="kai"),
                  make_pod({dgd.POD_LABEL: "g", "nvidia.com/dynamo-component": "Worker"}, scheduled=UNFIT),
                  make_pod({"ray.io/cluster": "c", "ray.io/group": "headgroup"}, scheduled=UNFIT)],
                 [{"group": "DGD g: Frontend", "pods": 1,
                   "reason": "no scheduler kai has picked it up (is it installed?)"},
                  {"group": "DGD g: Worker", "pods": 1, "reason": "0/10 nodes: 10 Insufficient nvidia.com/gpu"},
                  {"group": "RayCluster c: head", "pods": 1,
                   "reason": "0/10 nodes: 10 Insufficient nvidia.com/gpu"}], id="groups-by-name"),
    pytest.param([make_pod({"ray.io/cluster": "someone-elses", "ray.io/group": "gpu"}, scheduled=UNFIT),
                  make_pod({}, scheduled=UNFIT)], [], id="not-the-runs"),
    pytest.param([make_pod({dgd.POD_LABEL: "g"}, scheduled=UNFIT)],
                 [{"group": "DGD g", "pods": 1, "reason": "0/10 nodes: 10 Insufficient nvidia.com/gpu"}],
                 id="no-part-label"),
])
def test_waiting_groups(pods, rows):
    assert waiting.waiting_groups(pods, [RAY, GRAPH]) == rows


def cluster_queue(quota: dict[str, str], reserved: dict[str, str] | None = None) -> dict:
    """A ClusterQueue as Kueue v0.17.0 serves it: quota split over two flavors, what is reserved."""
    halves = [{"name": f"f{i}", "resources": [{"name": k, "nominalQuota": v} for k, v in quota.items()]}
              for i in (1, 2)]
    status = {"flavorsReservation": [{"name": "f1", "resources": [{"name": k, "total": v}
                                                                   for k, v in (reserved or {}).items()]}]}
    return {"spec": {"resourceGroups": [{"coveredResources": list(quota), "flavors": halves}]}, "status": status}


def test_cluster_queue_quota_and_reservation():
    queue = cluster_queue({"nvidia.com/gpu": "4", "memory": "1Gi"}, {"nvidia.com/gpu": "3", "memory": "512Mi"})
    assert kueue.quota(queue) == {"nvidia.com/gpu": 8, "memory": 2 * 2**30}
    assert kueue.reserved(queue) == {"nvidia.com/gpu": 3, "memory": 2**29}
    assert kueue.quota({}) == kueue.reserved({}) == {}


LOCAL = {"spec": {"clusterQueue": "team"}}
PENDING = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                      "message": "couldn't assign flavors to pod set gpu: insufficient quota"}]}}
RESERVED = {"status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]}}
GPU12 = {"nvidia.com/gpu": 12, "cpu": 4, "pods": 4}


@pytest.mark.parametrize("local, queue, workload, demand, reason", [
    pytest.param(None, None, None, GPU12, "Kueue: LocalQueue q does not exist in namespace ns", id="no-local-queue"),
    pytest.param(LOCAL, None, None, GPU12, "Kueue: LocalQueue q feeds ClusterQueue team, which does not exist",
                 id="no-cluster-queue"),
    pytest.param(LOCAL, cluster_queue({"nvidia.com/gpu": "4"}), None, GPU12,
                 "Kueue has made no Workload for it in LocalQueue q (is Kueue running?)", id="no-workload"),
    pytest.param(LOCAL, cluster_queue({"nvidia.com/gpu": "4", "cpu": "16"}), PENDING, GPU12,
                 "waiting for quota in ClusterQueue team: asks 12 nvidia.com/gpu, 8 of its 8 free",
                 id="more-than-the-quota"),
    pytest.param(LOCAL, cluster_queue({"nvidia.com/gpu": "4", "memory": "8Gi"}, {"nvidia.com/gpu": "6",
                                                                              "memory": "14Gi"}),
                 PENDING, {"nvidia.com/gpu": 4, "memory": 4 * 2**30},
                 "waiting for quota in ClusterQueue team: asks 4 nvidia.com/gpu, 2 of its 8 free; "
                 "asks 4Gi memory, 2Gi of its 16Gi free", id="quota-in-use"),
    pytest.param(LOCAL, cluster_queue({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "17"}), PENDING,
                 {"nvidia.com/gpu": 1}, "waiting for quota in ClusterQueue team: asks 1 nvidia.com/gpu, 0 of its 16 "
                 "free", id="borrowed-beyond-quota"),
    pytest.param(LOCAL, cluster_queue({"nvidia.com/gpu": "8"}), PENDING, GPU12,
                 "waiting in ClusterQueue team: couldn't assign flavors to pod set gpu: insufficient quota",
                 id="fits-the-numbers-kueue-says-why"),
    pytest.param(LOCAL, cluster_queue({"nvidia.com/gpu": "8"}), RESERVED, GPU12,
                 "quota reserved in ClusterQueue team; not admitted yet (its admission checks)", id="reserved"),
])
def test_queue_reason(local, queue, workload, demand, reason):
    assert waiting.queue_reason("q", "ns", local, queue, workload, demand) == reason
