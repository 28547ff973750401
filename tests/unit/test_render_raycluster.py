"""RayCluster rendering: every infra field's effect on the head and worker pod templates."""

from __future__ import annotations

import copy

import pytest
import yaml

from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds import raycluster
from nrl_k8s.kinds.readiness import Failed, Pending, Ready

SPEC = {
    "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head"}]}}},
    "workerGroupSpecs": [
        {
            "groupName": "gpu",
            "replicas": 2,
            "minReplicas": 2,
            "maxReplicas": 2,
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-worker"}, {"name": "sidecar", "image": "side:1"}]}},
        }
    ],
}



def _node_affinity(key: str, value: str) -> dict:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


GPU_NODES = _node_affinity("pool", "gpu")
ZONE_A = _node_affinity("zone", "a")


def make_infra(**fields) -> dict:
    infra = {
        "namespace": "ns",
        "image": "img:0",
        "kuberay": {"training": {"name": "train", "spec": copy.deepcopy(SPEC)}},
    }
    infra.update(copy.deepcopy(fields))
    return infra


def pods(spec: dict) -> list[dict]:
    """Pod specs of the head then every worker group."""
    return [spec["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in spec["workerGroupSpecs"]]


def env_of(container: dict) -> dict:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def each_container(spec: dict, fn) -> list:
    return [[fn(c) for c in pod["containers"]] for pod in pods(spec)]


FIELD_CASES = [
    (
        "image fills containers without one",
        {"image": "nemo-rl:1"},
        lambda s: each_container(s, lambda c: c["image"]),
        [["nemo-rl:1"], ["nemo-rl:1", "side:1"]],
    ),
    (
        "imagePullSecrets as names",
        {"imagePullSecrets": ["ngc", "ghcr"]},
        lambda s: [p["imagePullSecrets"] for p in pods(s)],
        [[{"name": "ngc"}, {"name": "ghcr"}]] * 2,
    ),
    (
        "serviceAccount becomes serviceAccountName",
        {"serviceAccount": "trainer"},
        lambda s: [p["serviceAccountName"] for p in pods(s)],
        ["trainer", "trainer"],
    ),
    ("rayVersion where unset", {"rayVersion": "2.49.0"}, lambda s: s["rayVersion"], "2.49.0"),
    (
        "placement nodeSelector",
        {"placement": {"nodeSelector": {"pool": "gpu"}}},
        lambda s: [p["nodeSelector"] for p in pods(s)],
        [{"pool": "gpu"}] * 2,
    ),
    (
        "placement tolerations",
        {"placement": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}},
        lambda s: [p["tolerations"] for p in pods(s)],
        [[{"key": "nvidia.com/gpu", "operator": "Exists"}]] * 2,
    ),
    (
        "placement affinity",
        {"placement": {"affinity": GPU_NODES}},
        lambda s: [p["affinity"] for p in pods(s)],
        [GPU_NODES] * 2,
    ),
    (
        "kai scheduler: pod queue label and schedulerName",
        {"scheduler": {"kind": "kai", "queue": "research"}},
        lambda s: [
            (t["metadata"]["labels"]["kai.scheduler/queue"], t["spec"]["schedulerName"])
            for t in [s["headGroupSpec"]["template"]] + [g["template"] for g in s["workerGroupSpecs"]]
        ],
        [("research", "kai-scheduler")] * 2,
    ),
    (
        "kueue scheduler: no schedulerName or queue label on pods (Kueue would admit each pod)",
        {"scheduler": {"kind": "kueue", "queue": "lq"}},
        lambda s: [
            ("schedulerName" in p, "kueue.x-k8s.io/queue-name" in t["metadata"]["labels"])
            for p, t in zip(pods(s), [s["headGroupSpec"]["template"]], strict=False)
        ],
        [(False, False)],
    ),
    (
        "infra and role labels on every pod template; the template's own label wins",
        {
            "labels": {"team": "rl", "nrl-k8s/owner": "alice", "tier": "infra"},
            "kuberay": {
                "training": {
                    "labels": {"disagg.nemo-rl/run": "r1"},
                    "spec": {
                        "headGroupSpec": {
                            "template": {
                                "metadata": {"labels": {"tier": "head"}},
                                "spec": {"containers": [{"name": "ray"}]},
                            }
                        },
                        "workerGroupSpecs": [
                            {"groupName": "g", "replicas": 1, "template": {"spec": {"containers": [{"name": "ray"}]}}}
                        ],
                    },
                }
            },
        },
        lambda s: [
            t["metadata"]["labels"] for t in [s["headGroupSpec"]["template"], s["workerGroupSpecs"][0]["template"]]
        ],
        [
            {
                "app.kubernetes.io/managed-by": "nrl-k8s",
                "team": "rl",
                "nrl-k8s/owner": "alice",
                "tier": "head",
                "disagg.nemo-rl/run": "r1",
                "nrl-k8s.io/role": "training",
            },
            {
                "app.kubernetes.io/managed-by": "nrl-k8s",
                "team": "rl",
                "nrl-k8s/owner": "alice",
                "tier": "infra",
                "disagg.nemo-rl/run": "r1",
                "nrl-k8s.io/role": "training",
            },
        ],
    ),
    (
        "hostNetwork with its dnsPolicy",
        {"networking": {"hostNetwork": True}},
        lambda s: [(p["hostNetwork"], p["dnsPolicy"]) for p in pods(s)],
        [(True, "ClusterFirstWithHostNet")] * 2,
    ),
    (
        "network env on every container",
        {
            "networking": {
                "gloo_socket_ifname": "eth0",
                "nccl_socket_ifname": "eth1",
                "nccl_ib_disable": True,
                "nccl_net": "Socket",
                "extra_env": {"NCCL_DEBUG": "INFO"},
            }
        },
        lambda s: each_container(s, env_of),
        [
            [
                {
                    "GLOO_SOCKET_IFNAME": "eth0",
                    "NCCL_SOCKET_IFNAME": "eth1",
                    "NCCL_IB_DISABLE": "1",
                    "NCCL_NET": "Socket",
                    "NCCL_DEBUG": "INFO",
                }
            ]
        ]
        + [
            [
                {
                    "GLOO_SOCKET_IFNAME": "eth0",
                    "NCCL_SOCKET_IFNAME": "eth1",
                    "NCCL_IB_DISABLE": "1",
                    "NCCL_NET": "Socket",
                    "NCCL_DEBUG": "INFO",
                }
            ]
            * 2
        ],
    ),
    (
        "nccl_ib_disable integer kept",
        {"networking": {"nccl_ib_disable": 0}},
        lambda s: env_of(pods(s)[0]["containers"][0]),
        {"NCCL_IB_DISABLE": "0"},
    ),
    (
        "head and worker sizing on the Ray container only",
        {"resources": {"training": {"head": {"cpu": 4, "memory": "16Gi"}, "worker": {"cpu": "8", "gpu": 4}}}},
        lambda s: each_container(s, lambda c: c.get("resources")),
        [
            [{"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"cpu": "4", "memory": "16Gi"}}],
            [{"requests": {"cpu": "8", "nvidia.com/gpu": "4"}, "limits": {"cpu": "8", "nvidia.com/gpu": "4"}}, None],
        ],
    ),
    (
        "sizing of another role is ignored",
        {"resources": {"generation": {"head": {"cpu": 4}}}},
        lambda s: each_container(s, lambda c: c.get("resources")),
        [[None], [None, None]],
    ),
    (
        "workspace pvc mounted everywhere",
        {"workspace": {"kind": "pvc", "pvcName": "ws", "mountPath": "/workspace"}},
        lambda s: (pods(s)[1]["volumes"], each_container(s, lambda c: c["volumeMounts"])),
        (
            [{"name": "workspace", "persistentVolumeClaim": {"claimName": "ws"}}],
            [
                [[{"name": "workspace", "mountPath": "/workspace"}]],
                [[{"name": "workspace", "mountPath": "/workspace"}]] * 2,
            ],
        ),
    ),
    (
        "workspace hostPath",
        {"workspace": {"kind": "hostPath", "hostPath": "/data/ws", "mountPath": "/workspace"}},
        lambda s: pods(s)[0]["volumes"],
        [{"name": "workspace", "hostPath": {"path": "/data/ws", "type": "DirectoryOrCreate"}}],
    ),
    (
        "workspace emptyDir with size",
        {"workspace": {"kind": "emptyDir", "size": "50Gi", "mountPath": "/workspace"}},
        lambda s: pods(s)[0]["volumes"],
        [{"name": "workspace", "emptyDir": {"sizeLimit": "50Gi"}}],
    ),
    (
        "hf_cache mounts and sets HF_HOME",
        {"hf_cache": {"kind": "pvc", "pvcName": "hf", "mountPath": "/hf"}},
        lambda s: (pods(s)[0]["volumes"], each_container(s, lambda c: (c["volumeMounts"], env_of(c)))),
        (
            [{"name": "hf-cache", "persistentVolumeClaim": {"claimName": "hf"}}],
            [[([{"name": "hf-cache", "mountPath": "/hf"}], {"HF_HOME": "/hf"})]]
            + [[([{"name": "hf-cache", "mountPath": "/hf"}], {"HF_HOME": "/hf"})] * 2],
        ),
    ),
    (
        "checkpoints emptyDir",
        {"checkpoints": {"kind": "emptyDir", "mountPath": "/ckpt"}},
        lambda s: (pods(s)[0]["volumes"], pods(s)[0]["containers"][0]["volumeMounts"]),
        ([{"name": "checkpoints", "emptyDir": {}}], [{"name": "checkpoints", "mountPath": "/ckpt"}]),
    ),
    # The earlier launcher's kinds: lustre is a (Lustre-backed) PVC; none, rayUpload and auto mount nothing.
    *(
        (
            f"{field} lustre is its PVC",
            {field: {"kind": "lustre", "pvcName": "fsx", "mountPath": "/mnt"}},
            lambda s, name=name: (pods(s)[0]["volumes"], pods(s)[0]["containers"][0]["volumeMounts"]),
            ([{"name": name, "persistentVolumeClaim": {"claimName": "fsx"}}], [{"name": name, "mountPath": "/mnt"}]),
        )
        for field, name in (("workspace", "workspace"), ("hf_cache", "hf-cache"), ("checkpoints", "checkpoints"))
    ),
    *(
        (
            f"{field} {kind} mounts nothing",
            {field: {"kind": kind, "pvcName": "fsx", "mountPath": "/mnt"}},
            lambda s: [p.get("volumes") for p in pods(s)],
            [None, None],
        )
        for field, kind in (
            ("workspace", "rayUpload"),
            ("workspace", "auto"),
            ("hf_cache", "none"),
            ("checkpoints", "none"),
        )
    ),
]


@pytest.mark.parametrize("patch, extract, expected", [c[1:] for c in FIELD_CASES], ids=[c[0] for c in FIELD_CASES])
def test_infra_field_effect(patch, extract, expected):
    assert extract(raycluster.render_spec(make_infra(**patch), "training")) == expected


def with_pod(patch: dict) -> dict:
    """An infra whose head and worker pod specs start from ``patch``."""
    infra = make_infra()
    spec = infra["kuberay"]["training"]["spec"]
    for template in [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]:
        template["spec"].update(copy.deepcopy(patch))
    return infra


EXPLICIT_CASES = [
    (
        "explicit image kept",
        {"containers": [{"name": "ray", "image": "mine:1"}]},
        {"image": "infra:1"},
        lambda p: p["containers"][0]["image"],
        "mine:1",
    ),
    (
        "explicit serviceAccountName kept",
        {"serviceAccountName": "mine"},
        {"serviceAccount": "infra"},
        lambda p: p["serviceAccountName"],
        "mine",
    ),
    (
        "pull secrets appended without duplicates",
        {"imagePullSecrets": [{"name": "ngc"}]},
        {"imagePullSecrets": ["ngc", "extra"]},
        lambda p: p["imagePullSecrets"],
        [{"name": "ngc"}, {"name": "extra"}],
    ),
    (
        "nodeSelector merged, pod keys win",
        {"nodeSelector": {"pool": "mine", "zone": "a"}},
        {"placement": {"nodeSelector": {"pool": "infra", "arch": "arm64"}}},
        lambda p: p["nodeSelector"],
        {"pool": "mine", "arch": "arm64", "zone": "a"},
    ),
    (
        "tolerations appended without duplicates",
        {"tolerations": [{"key": "a", "operator": "Exists"}]},
        {"placement": {"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}},
        lambda p: p["tolerations"],
        [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
    ),
    (
        "explicit affinity kept",
        {"affinity": ZONE_A},
        {"placement": {"affinity": GPU_NODES}},
        lambda p: p["affinity"],
        ZONE_A,
    ),
    (
        "explicit schedulerName kept",
        {"schedulerName": "volcano"},
        {"scheduler": {"kind": "kai", "queue": "q"}},
        lambda p: p["schedulerName"],
        "volcano",
    ),
    (
        "env already set is not duplicated",
        {"containers": [{"name": "ray", "env": [{"name": "NCCL_NET", "value": "IB"}]}]},
        {"networking": {"nccl_net": "Socket"}, "hf_cache": {"kind": "pvc", "pvcName": "hf", "mountPath": "/hf"}},
        lambda p: p["containers"][0]["env"],
        [{"name": "NCCL_NET", "value": "IB"}, {"name": "HF_HOME", "value": "/hf"}],
    ),
    (
        "explicit dnsPolicy kept",
        {"dnsPolicy": "Default"},
        {"networking": {"hostNetwork": True}},
        lambda p: (p["hostNetwork"], p["dnsPolicy"]),
        (True, "Default"),
    ),
    (
        "mount at the same path not duplicated",
        {"containers": [{"name": "ray", "volumeMounts": [{"name": "own", "mountPath": "/workspace"}]}]},
        {"workspace": {"kind": "pvc", "pvcName": "ws", "mountPath": "/workspace"}},
        lambda p: p["containers"][0]["volumeMounts"],
        [{"name": "own", "mountPath": "/workspace"}],
    ),
    (
        "sizing overrides the spec's quantities",
        {"containers": [{"name": "ray", "resources": {"limits": {"cpu": "1", "ephemeral-storage": "1Gi"}}}]},
        {"resources": {"training": {"head": {"cpu": 2}, "worker": {"cpu": 2}}}},
        lambda p: p["containers"][0]["resources"],
        {"limits": {"cpu": "2", "ephemeral-storage": "1Gi"}, "requests": {"cpu": "2"}},
    ),
]


@pytest.mark.parametrize(
    "pod_patch, infra_patch, extract, expected", [c[1:] for c in EXPLICIT_CASES], ids=[c[0] for c in EXPLICIT_CASES]
)
def test_explicit_pod_values(pod_patch, infra_patch, extract, expected):
    infra = with_pod(pod_patch)
    infra.update(infra_patch)
    for pod in pods(raycluster.render_spec(infra, "training")):
        assert extract(pod) == expected


def test_explicit_ray_version_kept():
    infra = make_infra(rayVersion="2.49.0")
    infra["kuberay"]["training"]["spec"]["rayVersion"] = "2.40.0"
    assert raycluster.render_spec(infra, "training")["rayVersion"] == "2.40.0"


def test_minimal_spec_gets_a_head():
    infra = {"namespace": "ns", "image": "img", "kuberay": {"gym": {"name": "gym", "spec": {}}}}
    assert raycluster.render_spec(infra, "gym") == {
        "headGroupSpec": {"rayStartParams": {}, "template": {
            "metadata": {"labels": {"app.kubernetes.io/managed-by": "nrl-k8s", "nrl-k8s.io/role": "gym"}},
            "spec": {"containers": [{"name": "ray-head", "image": "img"}]}}}
    }


@pytest.mark.parametrize(("declared", "expected"), [
    (None, None),  # none declared: KubeRay's own defaults serve the dashboard
    ([{"name": "gym", "containerPort": 11000}],
     [{"name": "gym", "containerPort": 11000}, {"name": "gcs-server", "containerPort": 6379},
      {"name": "dashboard", "containerPort": 8265}, {"name": "client", "containerPort": 10001}]),
    ([{"name": "dash", "containerPort": 8265}, {"name": "client", "containerPort": 20001}],
     [{"name": "dash", "containerPort": 8265}, {"name": "client", "containerPort": 20001},
      {"name": "gcs-server", "containerPort": 6379}]),
])
def test_declared_head_ports_keep_the_ray_ports(declared, expected):
    """KubeRay's head Service drops its default ports (the dashboard) once the head declares any."""
    infra = {"namespace": "ns", "image": "img", "kuberay": {"gym": {"name": "gym", "spec": {"headGroupSpec": {
        "template": {"spec": {"containers": [{"name": "ray-head", **({"ports": declared} if declared else {})}]}}}}}}}
    head = raycluster.render_spec(infra, "gym")["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head.get("ports") == expected


def test_input_not_mutated():
    infra = make_infra(image="img", networking={"nccl_net": "Socket"}, placement={"tolerations": [{"key": "a"}]})
    before = copy.deepcopy(infra)
    raycluster.render(infra, "training")
    assert infra == before


SEGMENT_CASES = [
    ("no segmentSize", 10, None, [("gpu", 10, 2, 2, None)]),
    ("replicas within size", 4, 4, [("gpu", 4, 2, 4, None)]),
    (
        "uneven split",
        10,
        4,
        [("gpu-seg0", 4, 2, 4, "0"), ("gpu-seg1", 4, 2, 4, "1"), ("gpu-seg2", 2, 2, 2, "2")],
    ),
    ("even split", 8, 4, [("gpu-seg0", 4, 2, 4, "0"), ("gpu-seg1", 4, 2, 4, "1")]),
    ("size one", 2, 1, [("gpu-seg0", 1, 1, 1, "0"), ("gpu-seg1", 1, 1, 1, "1")]),
]


@pytest.mark.parametrize("replicas, size, expected", [c[1:] for c in SEGMENT_CASES], ids=[c[0] for c in SEGMENT_CASES])
def test_segment_split(replicas, size, expected):
    infra = make_infra(image="img")
    entry = infra["kuberay"]["training"]
    group = entry["spec"]["workerGroupSpecs"][0]
    group["replicas"] = replicas
    group["maxReplicas"] = max(replicas, 4)
    if size is not None:
        entry["segmentSize"] = size
    groups = raycluster.render_spec(infra, "training")["workerGroupSpecs"]
    got = [
        (
            g["groupName"],
            g["replicas"],
            g["minReplicas"],
            g["maxReplicas"],
            g["template"].get("metadata", {}).get("labels", {}).get("nrl-k8s.io/segment"),
        )
        for g in groups
    ]
    if size is None or replicas <= size:
        expected = [(n, r, mn, max(replicas, 4), seg) for n, r, mn, _, seg in expected]
    assert got == expected
    assert all(g["template"]["spec"]["containers"][0]["image"] == "img" for g in groups)


def test_segments_keep_other_groups_in_order():
    infra = make_infra()
    spec = infra["kuberay"]["training"]["spec"]
    spec["workerGroupSpecs"].append(
        {"groupName": "cpu", "replicas": 1, "template": {"spec": {"containers": [{"name": "w"}]}}}
    )
    spec["workerGroupSpecs"][0]["replicas"] = 3
    infra["kuberay"]["training"]["segmentSize"] = 2
    names = [g["groupName"] for g in raycluster.render_spec(infra, "training")["workerGroupSpecs"]]
    assert names == ["gpu-seg0", "gpu-seg1", "cpu"]


def test_render_object():
    infra = make_infra(
        labels={"team": "rl", "nrl-k8s.io/role": "spoofed"},
        annotations={"a": "infra", "b": "infra"},
        scheduler={"kind": "kueue", "queue": "lq"},
    )
    infra["kuberay"]["training"]["labels"] = {"team": "role"}
    infra["kuberay"]["training"]["annotations"] = {"b": "role"}
    obj = raycluster.render(infra, "training")
    assert obj["apiVersion"] == "ray.io/v1" and obj["kind"] == "RayCluster"
    assert obj["metadata"] == {
        "name": "train",
        "namespace": "ns",
        "labels": {
            "app.kubernetes.io/managed-by": "nrl-k8s",
            "team": "role",
            "nrl-k8s.io/role": "training",
            "kueue.x-k8s.io/queue-name": "lq",
        },
        "annotations": {"a": "infra", "b": "role"},
    }
    assert obj["spec"] == raycluster.render_spec(infra, "training")


ERROR_CASES = [
    ("role not declared", lambda i: i["kuberay"].pop("training"), "infra.kuberay.training: is not set"),
    ("name too long", lambda i: i["kuberay"]["training"].update(name="x" * 54), "infra.kuberay.training.name"),
    ("name invalid", lambda i: i["kuberay"]["training"].update(name="Train_1"), "not a valid Kubernetes name"),
    ("name missing", lambda i: i["kuberay"]["training"].pop("name"), "infra.kuberay.training.name"),
    (
        "pvc without mountPath",
        lambda i: i.update(workspace={"kind": "pvc", "pvcName": "x"}),
        "infra.workspace.mountPath",
    ),
    ("kai without queue", lambda i: i.update(scheduler={"kind": "kai"}), "infra.scheduler.queue"),
    (
        "a nameless worker group (KubeRay's CRD requires the name)",
        lambda i: i["kuberay"]["training"]["spec"]["workerGroupSpecs"][0].pop("groupName"),
        "workerGroupSpecs.0.groupName: is missing",
    ),
    (
        "two worker groups of one name",
        lambda i: i["kuberay"]["training"]["spec"]["workerGroupSpecs"].append(
            copy.deepcopy(i["kuberay"]["training"]["spec"]["workerGroupSpecs"][0])
        ),
        "workerGroupSpecs.1.groupName: 'gpu' names another worker group too",
    ),
    (
        "minReplicas above maxReplicas",
        lambda i: i["kuberay"]["training"]["spec"]["workerGroupSpecs"][0].update(minReplicas=3, maxReplicas=2),
        "workerGroupSpecs.0.minReplicas: 3 is more than maxReplicas 2",
    ),
    (
        "two containers of one name",
        lambda i: i["kuberay"]["training"]["spec"]["headGroupSpec"]["template"]["spec"]["containers"].append(
            {"name": "ray-head"}
        ),
        "headGroupSpec.template.spec.containers.1.name: 'ray-head' is the name of another container",
    ),
    (
        "a probe port name that is no port name",
        lambda i: i["kuberay"]["training"]["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0].update(
            readinessProbe={"httpGet": {"port": "Dashboard_Port", "path": "/"}}
        ),
        "headGroupSpec.template.spec.containers.0.readinessProbe.httpGet.port: "
        "string 'Dashboard_Port' is not a valid port name",
    ),
]


@pytest.mark.parametrize("breaker, message", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_render_errors(breaker, message):
    infra = make_infra()
    breaker(infra)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        raycluster.render(infra, "training")


def test_name_at_limit_accepted():
    infra = make_infra()
    infra["kuberay"]["training"]["name"] = "x" * 53
    assert raycluster.render(infra, "training")["metadata"]["name"] == "x" * 53


def test_deterministic_yaml():
    infra = make_infra(
        image="img",
        imagePullSecrets=["ngc"],
        networking={"hostNetwork": True, "extra_env": {"B": "2", "A": "1"}},
        placement={"nodeSelector": {"z": "1", "a": "2"}},
        hf_cache={"kind": "pvc", "pvcName": "hf", "mountPath": "/hf"},
        kuberay={"training": {"name": "train", "spec": copy.deepcopy(SPEC), "segmentSize": 1}},
    )
    first = yaml.safe_dump(raycluster.render(infra, "training"), sort_keys=False)
    second = yaml.safe_dump(raycluster.render(copy.deepcopy(infra), "training"), sort_keys=False)
    assert first == second


def cluster(state=None, conditions=(), reason=None) -> dict:
    status = {"conditions": list(conditions)}
    if state:
        status["state"] = state
    if reason:
        status["reason"] = reason
    return {"status": status}


PROVISIONED = {"type": "RayClusterProvisioned", "status": "True"}
READINESS_CASES = [
    ("no status", {}, Pending("state=unknown")),
    ("provisioned condition", cluster(conditions=[PROVISIONED]), Ready()),
    ("legacy state ready", cluster(state="ready"), Ready()),
    (
        "replica failure",
        cluster(
            conditions=[{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreatePod", "message": "quota"}]
        ),
        Failed("ReplicaFailure=True (FailedCreatePod: quota)"),
    ),
    (
        "head not ready",
        cluster(conditions=[{"type": "HeadPodReady", "status": "False", "reason": "HeadPodNotReady"}]),
        Pending("state=unknown; HeadPodReady=False (HeadPodNotReady)"),
    ),
    ("suspended with reason", cluster(state="suspended", reason="paused"), Pending("state=suspended; paused")),
    (
        "provisioned wins over a later replica failure",
        cluster(conditions=[PROVISIONED, {"type": "ReplicaFailure", "status": "True"}]),
        Ready(),
    ),
]


@pytest.mark.parametrize("obj, expected", [c[1:] for c in READINESS_CASES], ids=[c[0] for c in READINESS_CASES])
def test_readiness(obj, expected):
    assert raycluster.readiness(obj) == expected


@pytest.mark.parametrize(
    "obj, expected",
    [(cluster(conditions=[PROVISIONED]), True), (cluster(state="ready"), False), ({}, False)],
    ids=["condition", "state only", "empty"],
)
def test_provisioned(obj, expected):
    assert raycluster.provisioned(obj) is expected
