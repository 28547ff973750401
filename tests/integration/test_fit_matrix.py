"""The fit prediction against what the real kube-scheduler (and Kueue) does (issue 31).

A sandbox of this module's own is shaped with ``sandbox up --nodes``: two GB300 nodes of 4 GPUs,
two H100 nodes of 8 GPUs tainted ``dedicated=team-a:NoSchedule``, a CPU node, and Kueue with a
ClusterQueue of 8 GPUs; another tenant's pod holds 4 GPUs on ``gb300-0``. Each case is predicted
by the installed CLI's ``check`` (its CLUSTER section, one verdict per pod group) and then applied
for real (``check --manifests-only``'s long-lived objects, applied with kubectl one by one: what
the pods read first, then their owners in the stream's order, which is the order the prediction
places them, each group's pods decided before the next owner is applied, so that a later group's
room is what the earlier ones left): every group
predicted to fit now has every pod bound to a node; every other group has a pod the scheduler
marked Unschedulable, or (no scheduler of its name, a queue out of quota) none bound at all.
Only placement matters here, so every pod is labelled for kwok to play (no Ray head or Dynamo
process starts).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, eventually
from sandbox_harness import separate_sandbox as own_sandbox

from nrl_k8s_sandbox.controlplane import kueue, stages

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
NODES = ("--nodes", "gb300:count=2,gpus=4,product=NVIDIA-GB300",
         "--nodes", "h100:count=2,gpus=8,product=NVIDIA-H100-80GB-HBM3,taint=dedicated=team-a:NoSchedule",
         "--nodes", "cpu:count=1")
NOW, ONCE, NEVER = "fits now", "fits once", "never fits"
GB300 = {"nvidia.com/gpu.product": "NVIDIA-GB300"}
TOLERATE = [{"key": "dedicated", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}]
ROCE = {"resourceClaims": [{"name": "roce-channel"}]}
NO_DGD = "~infra.dynamo"


def workers(count: int, gpus: int, *, selector: dict | None = None, tolerations: list | None = None,
            **pod: object) -> str:
    """An override giving the training cluster one worker group of ``count`` pods of ``gpus`` GPUs."""
    spec = {"containers": [{"name": "ray-worker", "resources": {"limits": {"nvidia.com/gpu": gpus}}}], **pod,
            **({"nodeSelector": selector} if selector else {}), **({"tolerations": tolerations} if tolerations else {})}
    group = {"groupName": "gpu", "replicas": count, "rayStartParams": {}, "template": {"spec": spec}}
    return f"++infra.kuberay.training.spec.workerGroupSpecs={json.dumps([group])}"


def dgd_worker(gpus: int, *, selector: dict | None = None) -> list[str]:
    """Overrides giving the DGD's decode worker ``gpus`` GPUs (and a nodeSelector)."""
    key = "+infra.dynamo.serving.overrides.services.VllmDecodeWorker"
    out = [f"{key}.resources={json.dumps({'requests': {'gpu': str(gpus)}, 'limits': {'gpu': str(gpus)}})}"]
    if selector:
        out.append(f"{key}.extraPodSpec.nodeSelector={json.dumps(selector)}")
    return out


def product(operator: str, value: str) -> dict:
    """A required node affinity on the GPU product."""
    term = {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": operator, "values": [value]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


# (id, overrides, {group label prefix: expected verdict}); "R" is the RayCluster, "D:<component>" a DGD part
CASES = [
    ("head only", [NO_DGD, "~infra.kuberay.training.spec.workerGroupSpecs"], {"R": NOW}),
    ("one 4-GPU worker on GB300", [NO_DGD, workers(1, 4, selector=GB300)], {"R": NOW}),
    ("two 4-GPU workers on GB300: the tenant holds 4", [NO_DGD, workers(2, 4, selector=GB300)], {"R": ONCE}),
    ("an 8-GPU worker on GB300", [NO_DGD, workers(1, 8, selector=GB300)], {"R": NEVER}),
    ("a GPU product no node has", [NO_DGD, workers(1, 1, selector={"nvidia.com/gpu.product": "NVIDIA-GB200"})],
     {"R": NEVER}),
    ("8 GPUs without the H100 taint's toleration", [NO_DGD, workers(1, 8)], {"R": NEVER}),
    ("8 GPUs tolerating the H100 taint", [NO_DGD, workers(1, 8, tolerations=TOLERATE)], {"R": NOW}),
    ("a gang of two 8-GPU workers: only both H100 nodes together", [NO_DGD, workers(2, 8, tolerations=TOLERATE)],
     {"R": NOW}),
    ("a gang of three 8-GPU workers: larger than the nodes together", [NO_DGD, workers(3, 8, tolerations=TOLERATE)],
     {"R": NEVER}),
    ("a gang of five 4-GPU workers over both pools", [NO_DGD, workers(5, 4, tolerations=TOLERATE)], {"R": NOW}),
    ("a gang of six 4-GPU workers: once the tenant's 4 free", [NO_DGD, workers(6, 4, tolerations=TOLERATE)],
     {"R": ONCE}),
    ("affinity NotIn GB300, tolerating H100", [NO_DGD, workers(1, 8, tolerations=TOLERATE,
                                                               affinity=product("NotIn", "NVIDIA-GB300"))],
     {"R": NOW}),
    ("affinity In a product no node has", [NO_DGD, workers(1, 1, affinity=product("In", "NVIDIA-B200"))],
     {"R": NEVER}),
    ("a scheduler the cluster lacks (KAI)", [NO_DGD, "infra.scheduler.kind=kai", "+infra.scheduler.queue=q"],
     {"R": NEVER}),
    ("RoCE devices by DRA, 4 per worker", [NO_DGD, workers(1, 4, selector=GB300, **ROCE),
                                           "+infra.dra.roce.deviceClassName=roce.nvidia.com"], {"R": NOW}),
    ("a DeviceClass the cluster lacks", [NO_DGD, workers(1, 4, selector=GB300, **ROCE),
                                         "+infra.dra.roce.deviceClassName=roce.networking.k8s.aws"], {"R": NEVER}),
    ("a Kueue queue within its quota", [NO_DGD, workers(1, 4, selector=GB300), "infra.scheduler.kind=kueue",
                                        "+infra.scheduler.queue=sandbox"], {"R": NOW}),
    ("a Kueue queue out of quota", [NO_DGD, workers(3, 4, tolerations=TOLERATE), "infra.scheduler.kind=kueue",
                                    "+infra.scheduler.queue=sandbox"], {"R": NEVER}),
    ("a Kueue queue that does not exist", [NO_DGD, workers(1, 4, selector=GB300), "infra.scheduler.kind=kueue",
                                           "+infra.scheduler.queue=nope"], {"R": NEVER}),
    ("a DGD worker of 4 GPUs beside the training", ["~infra.kuberay.training.spec.workerGroupSpecs",
                                                    *dgd_worker(4, selector=GB300)],
     {"R": NOW, "D:Frontend": NOW, "D:VllmDecodeWorker": NOW}),
    ("a DGD worker of 8 GPUs on GB300", ["~infra.kuberay.training.spec.workerGroupSpecs",
                                         *dgd_worker(8, selector=GB300)],
     {"R": NOW, "D:Frontend": NOW, "D:VllmDecodeWorker": NEVER}),
    ("the training takes the GB300 GPUs the DGD then waits for", [workers(1, 4, selector=GB300),
                                                                  *dgd_worker(4, selector=GB300)],
     {"R": NOW, "D:Frontend": NOW, "D:VllmDecodeWorker": ONCE}),
]


@pytest.fixture(scope="module")
def box(tmp_path_factory, private_user_cache):
    with own_sandbox(tmp_path_factory.mktemp("fit"), flags=(*NODES, "--kueue", "queued,nvidia.com/gpu=8")) as started:
        api = started.api_client(admin=True)
        core = client.CoreV1Api(api)
        ns = f"fit-{uuid.uuid4().hex[:6]}"
        for name in (ns, "tenant"):
            core.create_namespace({"metadata": {"name": name}})
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", ns, "localqueues", kueue.local_queue(ns))
        core.create_namespaced_pod("tenant", {"metadata": {"name": "hog"}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "gb300-0"},
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}})
        eventually(lambda: core.read_namespaced_pod("hog", "tenant").spec.node_name, what="the tenant's pod bound")
        started.ns, started.core = ns, core
        yield started
        api.close()


def cli(box, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": str(box.kubeconfig), "NRL_K8S_USER": "fit"}
    return subprocess.run([NRL_K8S, *args], capture_output=True, text=True, env=env, timeout=DEADLINE_S, input=stdin)


ROW = re.compile(r"^  (?:ok  |WARN|FAIL) (?P<group>(?:RayCluster|DGD|Deployment) .+?):? +"
                 r"(?P<verdict>fits now|fits once|never fits)")


def verdicts(stdout: str) -> dict[str, str]:
    """``check``'s fit rows: group label -> fits now | fits once | never fits."""
    return {m["group"]: m["verdict"] for line in stdout.splitlines() if (m := ROW.match(line))}


@pytest.mark.parametrize(("overrides", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_prediction_is_what_the_scheduler_does(box, overrides, expected):
    name = f"f{uuid.uuid4().hex[:6]}"
    argv = [*PAIR, "+infra.launch.mode=bringup", f"infra.namespace={box.ns}", f"infra.kuberay.training.name={name}",
            f"infra.dynamo.serving.name={name}-dgd", *overrides]
    checked = cli(box, "check", *argv)
    got = verdicts(checked.stdout)
    want = {(f"RayCluster {name}" if key == "R" else f"DGD {name}-dgd: {key[2:]}"): state
            for key, state in expected.items()}
    assert {g.partition(":")[0] if g.startswith("RayCluster") else g: v for g, v in got.items()} == want, \
        checked.stdout + checked.stderr
    stream = cli(box, "check", *argv, "--manifests-only", "--show-secrets")
    assert stream.returncode == 0, stream.stderr
    try:
        docs = list(yaml.safe_load_all(stream.stdout))
        # what the pods read (DRA templates, Secrets) first; then the pods' owners in the stream's order
        for doc in sorted(docs, key=lambda d: _kind(d) in ("RayCluster", "DGD", "Deployment")):
            box.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(_played(doc)))
            for group in [g for g in want if g.startswith(f"{_kind(doc)} {doc['metadata']['name']}")]:
                _observe(box, group, name, want[group])
    finally:
        box.kubectl("delete", "-f", "-", "--wait=false", stdin=stream.stdout, check=False)
        eventually(lambda: not _pods(box, f"ray.io/cluster={name}") and not _pods(
            box, f"nvidia.com/dynamo-graph-deployment-name={name}-dgd"), what=f"the pods of {name} gone")


def _played(doc: dict) -> dict:
    """``doc`` with every pod it makes labelled for kwok to play."""
    spec = doc.get("spec") or {}
    if doc["kind"] == "RayCluster":
        metas = [g["template"].setdefault("metadata", {})
                 for g in [spec["headGroupSpec"], *(spec.get("workerGroupSpecs") or [])]]
    elif doc["kind"] == "DynamoGraphDeployment":  # v1alpha1's services, or v1beta1's components
        metas = [*(part.setdefault("extraPodMetadata", {}) for part in (spec.get("services") or {}).values()),
                 *(part.setdefault("podTemplate", {}).setdefault("metadata", {})
                   for part in spec.get("components") or [])]
    else:
        metas = []
    for meta in metas:
        meta.setdefault("labels", {})[stages.PLAYED_LABEL] = "true"
    return doc


def _kind(doc: dict) -> str:
    return "DGD" if doc["kind"] == "DynamoGraphDeployment" else doc["kind"]


def _pods(box, selector: str) -> list:
    return box.core.list_namespaced_pod(box.ns, label_selector=selector).items


def _decided(pod) -> bool:
    """The scheduler has bound the pod, or marked it unschedulable."""
    return bool(pod.spec.node_name) or any(c.type == "PodScheduled" and c.status == "False"
                                           for c in pod.status.conditions or [])


def _observe(box, group: str, name: str, state: str) -> None:
    """Wait for the real outcome of ``group`` and check it agrees with ``state``."""
    if group.startswith("RayCluster"):
        selector, cluster = f"ray.io/cluster={name}", box.kubectl("get", "raycluster", name, "-n", box.ns, "-o",
                                                                    "jsonpath={.spec.suspend}").stdout
        if state != NOW and cluster == "true":  # Kueue holds it: no pod is made until it is admitted
            workload = eventually(lambda: _workload(box, name), what=f"Kueue's Workload for {name}")
            assert not any(c["type"] == "QuotaReserved" and c["status"] == "True"
                           for c in workload.get("status", {}).get("conditions") or []), workload
            return
    else:
        component = group.rpartition(": ")[2]
        selector = f"nvidia.com/dynamo-graph-deployment-name={name}-dgd,nvidia.com/dynamo-component={component}"
    if state == NOW:
        eventually(lambda: (pods := _pods(box, selector)) and all(p.spec.node_name for p in pods),
                   what=f"every pod of {group} bound")
        return
    scheduler = box.kubectl("get", "pods", "-n", box.ns, "-l", selector, "-o",
                            "jsonpath={.items[*].spec.schedulerName}").stdout.split()
    if scheduler and set(scheduler) == {"kai-scheduler"}:  # nothing ever picks them up
        pods = eventually(lambda: _pods(box, selector), what=f"the pods of {group}")
        assert not any(p.spec.node_name for p in pods)
        return
    pods = eventually(lambda: (found := _pods(box, selector)) and all(map(_decided, found)) and found,
                      what=f"the scheduler decided on every pod of {group}")
    waiting = [p for p in pods if not p.spec.node_name]
    assert waiting, f"{group}: predicted {state}, but every pod was bound"
    assert all(c.reason == "Unschedulable" for p in waiting for c in p.status.conditions if c.type == "PodScheduled")


def _workload(box, owner: str) -> dict | None:
    custom = client.CustomObjectsApi(box.core.api_client)
    items = custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", box.ns, "workloads")["items"]
    return next((w for w in items if any(o.get("name") == owner for o in w["metadata"].get("ownerReferences") or [])),
                None)


@pytest.mark.parametrize("command", [["run", "--rayjob"], ["run", "--raycluster"], ["cluster", "up"]],
                         ids=["run --rayjob", "run --raycluster", "cluster up"])
def test_a_run_that_never_fits_is_refused_before_anything_is_applied(box, command):
    """Exit 2, one error line naming the group and why, a hint naming --place-anyway; nothing created."""
    name = f"n{uuid.uuid4().hex[:6]}"
    argv = [*PAIR, f"infra.namespace={box.ns}", f"infra.kuberay.training.name={name}",
            f"infra.dynamo.serving.name={name}-dgd", workers(1, 8, selector=GB300)]
    result = cli(box, *command, *argv)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith(("error:", "hint:"))]
    assert lines[0].startswith("error: ") and f"{name}: head + 1 x gpu" in lines[0] and "never fits" in lines[0]
    assert "8 nvidia.com/gpu with nvidia.com/gpu.product=NVIDIA-GB300" in lines[0]
    assert "--place-anyway" in lines[1] and "Traceback" not in result.stderr
    for kind in ("rayjobs.ray.io", "rayclusters.ray.io", "dynamographdeployments.nvidia.com", "secrets", "jobs"):
        listed = box.kubectl("get", kind, "-n", box.ns, "-o", "name").stdout
        assert name not in listed, (kind, listed)
