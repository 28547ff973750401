"""The fit prediction against what the real kube-scheduler (and Kueue) does (issue 31).

A sandbox of this module's own is shaped with ``sandbox up --nodes``: two GB300 nodes of 4 GPUs,
two H100 nodes of 8 GPUs (96 CPUs, 1 TiB, label ``zone=a``) tainted ``dedicated=team-a:NoSchedule``,
a CPU node, and Kueue with a ClusterQueue of 8 GPUs (``--kueue queued,nvidia.com/gpu=8``); another
tenant's pod holds 4 GPUs on ``gb300-0``. Every test of such a sandbox is here, so that it is
started once: first what `status` says of a job Kueue holds, last the pools themselves (the nodes'
labels, taints and devices, and the scheduler honouring them). Each case is predicted
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
from sandbox_harness import DEADLINE_S, NRL_K8S, History, eventually, observe
from sandbox_harness import separate_sandbox as own_sandbox

from nrl_k8s_sandbox.controlplane import kueue, stages

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
NODES = ("--nodes", "gb300:count=2,gpus=4,product=NVIDIA-GB300",
         "--nodes", "h100:count=2,gpus=8,product=NVIDIA-H100-80GB-HBM3,label=zone=a,"
                    "taint=dedicated=team-a:NoSchedule,cpu=96,memory=1Ti",
         "--nodes", "cpu:count=1")
NOW, ONCE, NEVER = "fits now", "fits once", "never fits"
GB300 = {"nvidia.com/gpu.product": "NVIDIA-GB300"}
TEAM_A = {"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}
TOLERATE = [{**TEAM_A, "operator": "Equal"}]
ROCE = {"resourceClaims": [{"name": "roce-channel"}]}
NO_DGD = "~infra.dynamo"
WORKER = "++infra.kuberay.training.spec.workerGroupSpecs.0"
WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")


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


def test_status_says_what_kueue_holds_a_job_for(box):
    """First (nothing holds quota yet): a RayJob asking more GPUs than the ClusterQueue's quota, and a
    RayCluster naming a LocalQueue that does not exist; `status` is asked once Kueue has decided."""
    custom, ns = client.CustomObjectsApi(box.core.api_client), f"kq-{uuid.uuid4().hex[:6]}"
    job, lost = f"rj{uuid.uuid4().hex[:6]}", f"nq{uuid.uuid4().hex[:6]}"
    box.core.create_namespace({"metadata": {"name": ns}})
    try:
        custom.create_namespaced_custom_object(*WORKLOADS[:2], ns, "localqueues", kueue.local_queue(ns))
        base = [*PAIR, f"infra.namespace={ns}", "++infra.scheduler.kind=kueue"]
        # a head and 3 workers of 4 GPUs: 12 of a quota of 8; no DGD (a kubectl stream cannot own one)
        queued = [*base, f"infra.kuberay.training.name={job}", NO_DGD, f"++infra.scheduler.queue={kueue.QUEUE}",
                  f"{WORKER}.template.spec.containers.0.resources={{limits: {{nvidia.com/gpu: 4}}}}",
                  f"{WORKER}.replicas=3"]
        stream = cli(box, "check", "--manifests-only", "--show-secrets", *queued)
        assert stream.returncode == 0, stream.stderr
        box.kubectl("apply", "-f", "-", stdin=stream.stdout)
        nowhere = [*base, f"infra.kuberay.training.name={lost}", "++infra.scheduler.queue=nope"]
        up = cli(box, "cluster", "up", "--no-wait", "--place-anyway", "-t", "kuberay.training", *nowhere)
        assert up.returncode == 0, up.stderr
        observe(custom.list_namespaced_custom_object, *WORKLOADS[:2], ns, WORKLOADS[2],
                until=lambda found: {w["spec"].get("queueName") for w in found.values()} == {kueue.QUEUE, "nope"}
                and any(c["type"] == "QuotaReserved" and c["status"] == "False"
                        for w in found.values() if w["spec"].get("queueName") == kueue.QUEUE
                        for c in (w.get("status") or {}).get("conditions") or []))

        status = cli(box, "status", "-o", "json", *queued)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["waiting"] == [{
            "group": f"RayJob {job}", "pods": 4,
            "reason": f"waiting for quota in ClusterQueue {kueue.QUEUE}: asks 12 nvidia.com/gpu, 8 of its 8 free"}]
        status = cli(box, "status", *nowhere)
        assert status.returncode == 0, status.stderr
        line = f"  RayCluster {lost} (2 pods): Kueue: LocalQueue nope does not exist in namespace {ns}"
        assert line in status.stdout.splitlines(), status.stdout
    finally:
        box.core.delete_namespace(ns)


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
                _observe(box, group, name, want[group], _pod_count(doc, group))
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


def _pod_count(doc: dict, group: str) -> int:
    """How many pods ``group`` of ``doc`` makes: a RayCluster's head and workers, a DGD component's replicas."""
    spec = doc["spec"]
    if doc["kind"] == "RayCluster":
        return 1 + sum(g.get("replicas", 1) for g in spec.get("workerGroupSpecs") or [])
    component = group.rpartition(": ")[2]
    part = (spec.get("services") or {}).get(component) or next(
        (c for c in spec.get("components") or [] if c["name"] == component), {})
    return part.get("replicas", 1) * ((part.get("multinode") or {}).get("nodeCount") or 1)


def _observe(box, group: str, name: str, state: str, count: int) -> None:
    """Wait for the real outcome of ``group``'s ``count`` pods (its operator makes them one by one: a
    verdict on fewer would be on a state not yet complete) and check it agrees with ``state``."""
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
        eventually(lambda: len(pods := _pods(box, selector)) == count and all(p.spec.node_name for p in pods),
                   what=f"every pod of {group} bound")
        return
    # Every pod first: read before its operator made them, a scheduler name is not there to see.
    made = eventually(lambda: len(found := _pods(box, selector)) == count and found, what=f"every pod of {group}")
    if {p.spec.scheduler_name for p in made} == {"kai-scheduler"}:  # nothing ever picks them up
        assert not any(p.spec.node_name for p in made)
        return
    pods = eventually(lambda: len(found := _pods(box, selector)) == count and all(map(_decided, found)) and found,
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


def _h100_pod(name: str, gpus: int, tolerations: list[dict] | None = None) -> dict:
    return {"metadata": {"name": name}, "spec": {
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "tolerations": tolerations or [],
        "containers": [{"name": "c", "image": "example/c:1", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def _scheduled(pod: dict | None) -> dict:
    return next((c for c in ((pod or {}).get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"),
                {})


def test_pools_shape_the_nodes_and_the_scheduler_honours_them(box):
    """Last: the nodes carry their pool's labels, taints, GPUs and DRA devices; the real scheduler binds
    a pod tolerating the H100 taint and marks one that does not Unschedulable; `sandbox status`
    lists the pools. The SPEC parser's tests are tests/controlplane/test_controlplane_nodes.py."""
    core = box.core
    listed = json.loads(core.list_node(_preload_content=False).data)["items"]
    nodes = {node["metadata"]["name"]: node for node in listed}
    assert sorted(nodes) == ["cpu-0", "gb300-0", "gb300-1", "h100-0", "h100-1"]  # the default pools are gone
    for name in ("h100-0", "h100-1"):
        labels, spec, status = nodes[name]["metadata"]["labels"], nodes[name]["spec"], nodes[name]["status"]
        assert {k: labels.get(k) for k in ("nvidia.com/gpu.product", "nvidia.com/gpu.present", "nvidia.com/gpu.count",
                                           "zone", "kubernetes.io/hostname")} == {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.count": "8", "zone": "a", "kubernetes.io/hostname": name}
        assert spec["taints"] == [TEAM_A]  # the lifecycle controller's not-ready taints are gone, the pool's stays
        assert {k: status["allocatable"][k] for k in ("nvidia.com/gpu", "cpu", "memory")} == {
            "nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti"}
    assert "taints" not in nodes["cpu-0"]["spec"] and "nvidia.com/gpu" not in nodes["cpu-0"]["status"]["capacity"]
    slices = client.ResourceV1Api(box.core.api_client).list_resource_slice().items
    assert sorted({s.spec.node_name for s in slices}) == ["gb300-0", "gb300-1", "h100-0", "h100-1"]  # GPU nodes' DRA

    tolerant, intolerant = f"tolerant-{uuid.uuid4().hex[:6]}", f"intolerant-{uuid.uuid4().hex[:6]}"
    try:
        with History(core.list_namespaced_pod, box.ns) as pods:
            core.create_namespaced_pod(box.ns, _h100_pod(tolerant, 8, TOLERATE))
            core.create_namespaced_pod(box.ns, _h100_pod(intolerant, 1))
            pods.wait(lambda h: (h.objects().get(tolerant, {}).get("spec", {}).get("nodeName")
                                 and _scheduled(h.objects().get(intolerant)).get("reason") == "Unschedulable"),
                      what="the tolerating pod bound and the other marked Unschedulable")
    finally:
        for name in (tolerant, intolerant):
            core.delete_namespaced_pod(name, box.ns)
    assert pods.objects()[tolerant]["spec"]["nodeName"] in ("h100-0", "h100-1")
    waiting = pods.objects()[intolerant]
    assert waiting["status"]["phase"] == "Pending" and not waiting["spec"].get("nodeName")
    assert "untolerated taint" in _scheduled(waiting)["message"], _scheduled(waiting)

    report = json.loads(cli(box, "sandbox", "status", "--dir", str(box.dir), "-o", "json").stdout)
    assert [(p["name"], p["count"], p["gpus"], p["taints"]) for p in report["pools"]] == [
        ("gb300", 2, 4, []), ("h100", 2, 8, [TEAM_A]), ("cpu", 1, 0, [])]
    text = cli(box, "sandbox", "status", "--dir", str(box.dir)).stdout
    assert ("\n            h100-0..1: 8 nvidia.com/gpu NVIDIA-H100-80GB-HBM3, cpu 96, memory 1Ti, pods 250; "
            "labels zone=a; taints dedicated=team-a:NoSchedule\n            cpu-0: cpu 144, memory 960Gi, pods 250"
            ) in text, text
