"""Pod readiness helpers and the core descriptors."""

from __future__ import annotations

import pytest

from nrl_k8s.kinds import pod, service
from nrl_k8s.kinds.base import Kind
from nrl_k8s.kinds.readiness import Failed, Pending, Ready


def make_pod(containers=("main",), statuses=None, init_statuses=None, scheduled=None, phase="Pending") -> dict:
    status = {"phase": phase}
    if statuses is not None:
        status["containerStatuses"] = statuses
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    if scheduled is not None:
        status["conditions"] = [{"type": "PodScheduled", **scheduled}]
    return {"spec": {"containers": [{"name": n} for n in containers]}, "status": status}


def waiting(name, reason, message=None) -> dict:
    state = {"reason": reason, **({"message": message} if message else {})}
    return {"name": name, "ready": False, "state": {"waiting": state}}


RUNNING = {"name": "main", "ready": True, "state": {"running": {}}}

READY_CASES = [
    ("no statuses", make_pod(), False),
    ("all ready", make_pod(statuses=[RUNNING], phase="Running"), True),
    ("one of two ready", make_pod(("main", "side"), [RUNNING, {"name": "side", "ready": False}]), False),
    ("missing status for a container", make_pod(("main", "side"), [RUNNING]), False),
]


@pytest.mark.parametrize("obj, expected", [c[1:] for c in READY_CASES], ids=[c[0] for c in READY_CASES])
def test_containers_ready(obj, expected):
    assert pod.containers_ready(obj) is expected


REASON_CASES = [
    ("running", make_pod(statuses=[RUNNING], phase="Running"), None),
    (
        "image pull",
        make_pod(statuses=[waiting("main", "ImagePullBackOff", "Back-off pulling image x")]),
        "container main: ImagePullBackOff: Back-off pulling image x",
    ),
    ("crash loop", make_pod(statuses=[waiting("main", "CrashLoopBackOff")]), "container main: CrashLoopBackOff"),
    (
        "init container first",
        make_pod(statuses=[waiting("main", "PodInitializing")], init_statuses=[waiting("init", "ErrImagePull")]),
        "container init: ErrImagePull",
    ),
    (
        "unschedulable",
        make_pod(
            scheduled={
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: insufficient nvidia.com/gpu",
            }
        ),
        "Unschedulable: 0/3 nodes are available: insufficient nvidia.com/gpu",
    ),
    (
        "unschedulable is the root cause",
        make_pod(
            statuses=[waiting("main", "ContainerCreating")], scheduled={"status": "False", "reason": "Unschedulable"}
        ),
        "Unschedulable",
    ),
    ("scheduled", make_pod(scheduled={"status": "True"}), None),
]


@pytest.mark.parametrize("obj, expected", [c[1:] for c in REASON_CASES], ids=[c[0] for c in REASON_CASES])
def test_waiting_reason(obj, expected):
    assert pod.waiting_reason(obj) == expected


POD_READINESS = [
    ("ready", make_pod(statuses=[RUNNING], phase="Running"), Ready()),
    ("waiting", make_pod(statuses=[waiting("main", "CrashLoopBackOff")]), Pending("container main: CrashLoopBackOff")),
    ("just pending", make_pod(), Pending("phase Pending")),
    ("failed", make_pod(phase="Failed"), Failed("pod Failed, not serving")),
    ("succeeded", make_pod(phase="Succeeded"), Failed("pod Succeeded, not serving")),
]


@pytest.mark.parametrize("obj, expected", [c[1:] for c in POD_READINESS], ids=[c[0] for c in POD_READINESS])
def test_pod_readiness(obj, expected):
    assert pod.readiness(obj) == expected


@pytest.mark.parametrize(
    "kind, api_version",
    [(pod.KIND, "v1"), (service.KIND, "v1"), (Kind("ray.io", "v1", "rayclusters", "RayCluster"), "ray.io/v1")],
    ids=["pod", "service", "grouped"],
)
def test_api_version(kind, api_version):
    assert kind.api_version == api_version


def test_service_addresses():
    assert service.cluster_url("qwen-frontend", "rl", 8000) == "http://qwen-frontend.rl.svc:8000"
    assert service.proxy_path("qwen-frontend", "rl", 8000) == "/api/v1/namespaces/rl/services/qwen-frontend:8000/proxy"
