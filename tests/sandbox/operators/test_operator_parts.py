"""Pieces of the operators that need no sandbox: spec reading, submission bodies, timing,
the controller's timers, and the frontend stub (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import threading

import httpx
import pytest

from nrl_k8s.crds import Gaps, parallel_gaps
from nrl_k8s.sandbox import crds
from nrl_k8s.sandbox.faults import Faults
from nrl_k8s.sandbox.frontend_stub import FrontendStub
from nrl_k8s.sandbox.operators.base import Controller, Timing, api_client
from nrl_k8s.sandbox.conversion import ALPHA, BETA, convert
from nrl_k8s.sandbox.operators.dynamo import LABEL_COMPONENT, LABEL_HASH, components, graph_status, model_id
from nrl_k8s.sandbox.operators.kuberay import submission_body

def _beta(spec: dict) -> dict:
    """A spec as the operator reads it: in v1beta1, converted by the API server when written in v1alpha1."""
    return convert({"apiVersion": ALPHA, "kind": "DynamoGraphDeployment", "metadata": {}, "spec": spec}, BETA)["spec"]


SPECS = {
    "alpha-replicas-and-nodes": (
        _beta({"services": {"W": {"componentType": "worker", "replicas": 2, "multinode": {"nodeCount": 4}}}}),
        [("W", "worker", 2, 8)],
    ),
    "alpha-default-replicas": (_beta({"services": {"F": {"componentType": "frontend"}}}), [("F", "frontend", 1, 1)]),
    "alpha-decode-worker": (_beta({"services": {"D": {"componentType": "worker", "subComponentType": "decode"}}}),
                            [("D", "decode", 1, 1)]),
    "beta-components": (
        {"components": [{"name": "F", "type": "frontend", "replicas": 1}, {"name": "D", "type": "decode", "replicas": 3}]},
        [("F", "frontend", 1, 1), ("D", "decode", 3, 3)],
    ),
}


@pytest.mark.parametrize("spec, expected", SPECS.values(), ids=SPECS.keys())
def test_components_of_a_spec(spec, expected):
    parts = components(spec)
    assert [(p.name, p.type, p.replicas, p.pods) for p in parts] == expected
    assert all(p.pod_spec["containers"] for p in parts)


def test_only_a_template_change_changes_a_components_hash():
    spec = {"components": [{"name": "W", "replicas": 1, "podTemplate": {"spec": {"containers": [{"name": "main", "image": "a"}]}}}]}
    scaled = {"components": [{**spec["components"][0], "replicas": 5}]}
    changed = {"components": [{**spec["components"][0], "podTemplate": {"spec": {"containers": [{"name": "main", "image": "b"}]}}}]}
    (first,), (second,), (third,) = components(spec), components(scaled), components(changed)
    assert first.hash == second.hash != third.hash


def _service(args: list[str], command: list[str] | None = None) -> dict:
    return _beta({"services": {"W": {"extraPodSpec": {"mainContainer": {"command": command or [], "args": args}}}}})


MODELS = {
    "model-flag": (_service(["--model", "Qwen/Qwen3-0.6B"]), "Qwen/Qwen3-0.6B"),
    "served-name-wins": (_service(["--model", "/ckpt", "--served-model-name", "pretty"]), "pretty"),
    "equals-form": (_service(["--model-path=/models/x"]), "/models/x"),
    "shell-string": (_service([], ["sh", "-c", "python -m dynamo.vllm --model m1 --tp 2"]), "m1"),
    "no-flag": (_service(["--http-port", "8000"]), "my-dgd"),
}


@pytest.mark.parametrize("spec, expected", MODELS.values(), ids=MODELS.keys())
def test_model_id_comes_from_container_args_or_the_dgd_name(spec, expected):
    assert model_id("my-dgd", components(spec)) == expected


PARTS = components({"components": [{"name": "F", "type": "frontend"}, {"name": "W", "multinode": {"nodeCount": 2}}]})
F, W = PARTS


def _pod(part, state: str, hash_: str | None = None) -> dict:
    labels = {LABEL_COMPONENT: part.name, LABEL_HASH: hash_ or part.hash}
    status = {"ready": {"phase": "Running", "containerStatuses": [{"ready": True}]},
              "creating": {"phase": "Pending", "containerStatuses": [{"ready": False}]},
              "unschedulable": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}}[state]
    return {"metadata": {"labels": labels}, "status": status}


# name, pods, state, Ready (status, reason), ready replicas per component
GRAPH_STATUS = [
    ("all ready", [_pod(F, "ready"), _pod(W, "ready"), _pod(W, "ready")], "successful", ("True", "all_resources_are_ready"),
     {"F": 1, "W": 1}),
    ("pods still starting", [_pod(F, "creating"), _pod(W, "ready"), _pod(W, "creating")], "pending",
     ("False", "pods_not_ready"), {"F": 0, "W": 0}),
    ("no room for the pods", [_pod(F, "unschedulable"), _pod(W, "unschedulable"), _pod(W, "unschedulable")], "pending",
     ("False", "insufficient_capacity"), {"F": 0, "W": 0}),
    ("components wait for different things", [_pod(F, "creating"), _pod(W, "unschedulable"), _pod(W, "ready")], "pending",
     ("False", "mixed_not_ready_reasons"), {"F": 0, "W": 0}),
    ("pods of an older template do not count", [_pod(F, "ready", "old"), _pod(W, "ready"), _pod(W, "ready")], "pending",
     ("False", "pods_not_ready"), {"F": 0, "W": 1}),
]


@pytest.mark.parametrize("found, state, ready, replicas", [c[1:] for c in GRAPH_STATUS], ids=[c[0] for c in GRAPH_STATUS])
def test_graph_status(found, state, ready, replicas):
    status = graph_status("g", PARTS, found, 3)
    condition = status["conditions"][0]
    assert (status["state"], (condition["status"], condition["reason"]), status["observedGeneration"]) == (state, ready, 3)
    assert {name: counts["readyReplicas"] for name, counts in status["components"].items()} == replicas
    assert status["components"]["W"]["componentKind"] == "LeaderWorkerSet"
    assert status["components"]["F"]["componentNames"] == ["g-f"]


BODIES = {
    "minimal": ({"entrypoint": "python x.py"}, {"entrypoint": "python x.py", "submission_id": "j-1"}),
    "everything": (
        {
            "entrypoint": "e",
            "runtimeEnvYAML": "env_vars:\n  A: '1'\nworking_dir: /w\n",
            "metadata": {"run": 7},
            "entrypointNumCpus": 1,
            "entrypointNumGpus": 0.5,
            "entrypointResources": '{"custom": 2}',
        },
        {
            "entrypoint": "e",
            "submission_id": "j-1",
            "runtime_env": {"env_vars": {"A": "1"}, "working_dir": "/w"},
            "metadata": {"run": "7"},
            "entrypoint_num_cpus": 1,
            "entrypoint_num_gpus": 0.5,
            "entrypoint_resources": {"custom": 2},
        },
    ),
}


@pytest.mark.parametrize("spec, expected", BODIES.values(), ids=BODIES.keys())
def test_submission_body_maps_the_rayjob_spec_like_kuberay(spec, expected):
    assert submission_body(spec, "j-1") == expected


TIMINGS = {
    "default": (1.0, None, 0.5),
    "faster": (5.0, None, 0.1),
    "slow-fault": (1.0, "4", 2.0),
    "both": (2.0, "3", 0.75),
}


@pytest.mark.parametrize("speed, slow, expected", TIMINGS.values(), ids=TIMINGS.keys())
def test_timing_divides_by_speed_and_multiplies_by_the_slow_fault(speed, slow, expected):
    faults = Faults()
    if slow:
        faults.set("slow", slow)
    assert Timing(faults, speed).delay(0.5) == pytest.approx(expected)


class _Recorder(Controller):
    name = "recorder"

    def __init__(self):
        super().__init__(api_client("http://127.0.0.1:9", "unused"), Timing(Faults()), Faults())
        self.calls: list[str] = []
        self.done = threading.Event()

    def watches(self):
        return []

    def record(self, label: str) -> None:
        self.calls.append(label)
        if label == "last":
            self.done.set()


def test_controller_timers_fire_in_order_and_a_pending_key_is_not_doubled():
    recorder = _Recorder()
    recorder.start()
    try:
        recorder.later(0.2, "record", "b")
        recorder.later(0.1, "record", "a")
        recorder.later(0.15, "record", "a")  # already due earlier: dropped
        recorder.later(0.3, "record", "last")
        assert recorder.done.wait(10)
    finally:
        recorder.stop()
    assert recorder.calls == ["a", "b", "last"]


STUB_ROUTES = {
    "models": ("/v1/models", 0, 200),
    "health": ("/health", 0, 200),
    "live": ("/live", 0, 200),
    "unknown": ("/v1/nothing", 0, 404),
    "warming-up": ("/v1/models", 3600, 503),
    "warming-up-health": ("/health", 3600, 503),
}


@pytest.mark.parametrize("path, unavailable_for, code", STUB_ROUTES.values(), ids=STUB_ROUTES.keys())
def test_frontend_stub_routes(path, unavailable_for, code):
    stub = FrontendStub("Qwen/Qwen3-0.6B", unavailable_for)
    try:
        response = httpx.get(stub.url + path, trust_env=False)
    finally:
        stub.stop()
    assert response.status_code == code
    if code == 200 and path == "/v1/models":
        assert [m["id"] for m in response.json()["data"]] == ["Qwen/Qwen3-0.6B"]
    if code == 200 and path == "/health":
        assert response.json()["status"] == "healthy"


def test_the_old_rayjob_crd_lacks_what_run_parallel_needs_and_the_current_one_has_it():
    assert parallel_gaps(crds.RAYJOB_CRD) == Gaps()
    assert parallel_gaps(crds.RAYJOB_CRD_1_5) == Gaps(missing=("spec.preRunningDeadlineSeconds",))


DELAYS = {
    "none": (None, "raycluster", 0.25),
    "its-own": ("raycluster:15;dgd:20", "raycluster", 15.0),
    "another-kinds": ("dgd:20", "raycluster", 0.25),
    "zero": ("rayjob:0", "rayjob", 0.0),
}


@pytest.mark.parametrize("value, kind, expected", DELAYS.values(), ids=DELAYS.keys())
def test_timing_ready_takes_the_delay_of_the_kind_unscaled_else_the_scaled_base(value, kind, expected):
    faults = Faults()
    if value:
        faults.set("delay", value)
    assert Timing(faults, speed=2.0).ready(kind, 0.5) == pytest.approx(expected)
