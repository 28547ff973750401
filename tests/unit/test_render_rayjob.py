"""RayJob rendering and readiness."""

from __future__ import annotations

import copy

import pytest
import yaml

from nrl_k8s import recipe as recipe_mod
from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds import raycluster, rayjob
from nrl_k8s.kinds.base import Failed, Pending, Ready

INFRA = {
    "namespace": "rl",
    "image": "nemo-rl:1",
    "labels": {"team": "rl"},
    "annotations": {"owner": "me"},
    "launch": {"entrypoint": "python run.py --config \"$NRL_K8S_RECIPE\"", "env": {"HF_TOKEN": "abc"}},
    "kuberay": {
        "training": {
            "name": "grpo-train",
            "labels": {"exp": "a"},
            "spec": {"workerGroupSpecs": [{"groupName": "gpu", "replicas": 1}]},
        }
    },
}
RECIPE = {"grpo": {"max_num_steps": 5}, "policy": {"model_name": "${oc.env:MODEL}"}}


def test_render_shape():
    obj = rayjob.render(INFRA, RECIPE, "grpo-train-0123abcd")
    assert obj["apiVersion"] == "ray.io/v1" and obj["kind"] == "RayJob"
    assert obj["metadata"] == {
        "name": "grpo-train",
        "namespace": "rl",
        "labels": {
            "app.kubernetes.io/managed-by": "nrl-k8s",
            "team": "rl",
            "exp": "a",
            "nrl-k8s.io/role": "training",
            "nrl-k8s.io/run-id": "grpo-train-0123abcd",
        },
        "annotations": {"owner": "me"},
    }
    spec = obj["spec"]
    assert spec["submissionMode"] == "HTTPMode"
    assert spec["rayClusterSpec"] == raycluster.render_spec(INFRA, "training")
    assert spec["entrypoint"] == recipe_mod.driver_entrypoint(INFRA, RECIPE, "grpo-train-0123abcd")
    assert recipe_mod.decode_recipe(spec["entrypoint"]) == RECIPE


LIFETIME_CASES = [
    ("default shutdown with ttl", {}, {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 3600}),
    ("custom ttl", {"ttl_seconds": 60}, {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 60}),
    ("no shutdown drops ttl", {"shutdown": False, "ttl_seconds": 60}, {"shutdownAfterJobFinishes": False}),
    (
        "active deadline",
        {"active_deadline_seconds": 7200},
        {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 3600, "activeDeadlineSeconds": 7200},
    ),
]


@pytest.mark.parametrize("kwargs, expected", [c[1:] for c in LIFETIME_CASES], ids=[c[0] for c in LIFETIME_CASES])
def test_lifetime_fields(kwargs, expected):
    spec = rayjob.render(INFRA, RECIPE, "r-1", **kwargs)["spec"]
    got = {k: spec[k] for k in ("shutdownAfterJobFinishes", "ttlSecondsAfterFinished", "activeDeadlineSeconds") if k in spec}
    assert got == expected


def test_kueue_label_on_rayjob():
    infra = {**copy.deepcopy(INFRA), "scheduler": {"kind": "kueue", "queue": "lq"}}
    assert rayjob.render(infra, RECIPE, "r-1")["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"


ERROR_CASES = [
    ("no training role", lambda i: i.pop("kuberay"), "infra.kuberay.training: is not set", "declare"),
    ("no entrypoint", lambda i: i["launch"].pop("entrypoint"), "infra.launch.entrypoint is not set", "NRL_K8S_RECIPE"),
    ("blank entrypoint", lambda i: i["launch"].update(entrypoint="  \n"), "infra.launch.entrypoint is not set", "training command"),
    ("name over 47", lambda i: i["kuberay"]["training"].update(name="a" * 48), "more than 47", "at most 47"),
]


@pytest.mark.parametrize("breaker, message, hint", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_errors(breaker, message, hint):
    infra = copy.deepcopy(INFRA)
    breaker(infra)
    with pytest.raises(ConfigError) as info:
        rayjob.render(infra, RECIPE, "r-1")
    assert message in info.value.message
    assert hint in info.value.hint


def test_deterministic_yaml():
    first = yaml.safe_dump(rayjob.render(INFRA, RECIPE, "r-1"), sort_keys=False)
    assert yaml.safe_dump(rayjob.render(copy.deepcopy(INFRA), copy.deepcopy(RECIPE), "r-1"), sort_keys=False) == first


def job(deployment=None, job_status=None, **extra) -> dict:
    status = {k: v for k, v in {"jobDeploymentStatus": deployment, "jobStatus": job_status, **extra}.items() if v}
    return {"status": status}


READINESS_CASES = [
    ("new", {}, Pending("RayJob New, job not submitted")),
    ("initializing", job("Initializing"), Pending("RayJob Initializing, job not submitted")),
    ("running", job("Running", "RUNNING"), Pending("RayJob Running, job RUNNING")),
    ("succeeded", job("Complete", "SUCCEEDED"), Ready("job SUCCEEDED")),
    ("complete but failed", job("Complete", "FAILED", message="exit 1"), Failed("RayJob Complete, job FAILED (exit 1)")),
    (
        "deadline exceeded",
        job("Failed", "RUNNING", reason="DeadlineExceeded", message="too slow"),
        Failed("RayJob Failed, job RUNNING (DeadlineExceeded: too slow)"),
    ),
    ("validation failed", job("ValidationFailed", reason="ValidationFailed"), Failed("RayJob ValidationFailed, job unknown (ValidationFailed)")),
    ("retrying is not terminal", job("Retrying", "FAILED"), Pending("RayJob Retrying, job FAILED")),
]


@pytest.mark.parametrize("obj, expected", [c[1:] for c in READINESS_CASES], ids=[c[0] for c in READINESS_CASES])
def test_readiness(obj, expected):
    assert rayjob.readiness(obj) == expected


def test_terminal_statuses():
    assert rayjob.TERMINAL_DEPLOYMENT_STATUSES == {"Complete", "Failed", "ValidationFailed"}


@pytest.mark.parametrize(
    "obj, cluster, job_id",
    [({}, None, None), ({"status": {"rayClusterName": "grpo-train-ab12c", "jobId": "grpo-train-x1"}}, "grpo-train-ab12c", "grpo-train-x1")],
    ids=["no status", "status set"],
)
def test_status_accessors(obj, cluster, job_id):
    assert rayjob.cluster_name(obj) == cluster
    assert rayjob.job_id(obj) == job_id
