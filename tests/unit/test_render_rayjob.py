"""RayJob rendering and readiness."""

from __future__ import annotations

import copy

import pytest
import yaml

from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds import raycluster, rayjob
from nrl_k8s.kinds.readiness import Failed, Pending, Ready

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
    obj = rayjob.render(INFRA, "grpo-train-0123abcd")
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
    assert spec["entrypoint"] == INFRA["launch"]["entrypoint"]


SECRET_INFRA = {
    **INFRA,
    "launch": {
        "entrypoint": 'python run.py --config "$NRL_K8S_RECIPE"',
        "env": {"HF_TOKEN": "hf_s3cr3t", "wandbApiKey": "wb_k3y", "DATABASE_URL": "postgres://u:pw_x@h/db",
                "HF_HOME": "/cache", "PATH": "/opt/bin"},
    },
    "networking": {"extra_env": {"HF_HOME": "/from-networking"}},
}
SECRET_RECIPE = {"policy": {"model_name": "q"}, "logger": {"wandb": {"api_key": "recipe_k3y"}}}
VALUES = ("hf_s3cr3t", "wb_k3y", "pw_x", "/cache", "/opt/bin", "recipe_k3y")


def test_no_launch_env_value_or_recipe_in_the_rayjob():
    text = yaml.safe_dump(rayjob.render(SECRET_INFRA, "grpo-train-0123abcd"))
    assert not [v for v in VALUES if v in text]
    assert "model_name" not in text


def test_the_run_secret_holds_the_recipe_and_every_launch_env_value():
    obj = rayjob.render_secret(SECRET_INFRA, SECRET_RECIPE, "grpo-train-0123abcd")
    assert (obj["apiVersion"], obj["kind"], obj["type"]) == ("v1", "Secret", "Opaque")
    assert obj["metadata"] == {
        "name": "grpo-train-0123abcd",
        "namespace": "rl",
        "labels": {"app.kubernetes.io/managed-by": "nrl-k8s", "team": "rl", "nrl-k8s.io/run-id": "grpo-train-0123abcd"},
    }
    data = obj["stringData"]
    assert yaml.safe_load(data.pop("recipe.yaml")) == SECRET_RECIPE
    assert data == SECRET_INFRA["launch"]["env"]


def test_every_ray_container_reads_the_run_secret():
    spec = rayjob.render(SECRET_INFRA, "grpo-train-0123abcd")["spec"]["rayClusterSpec"]
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    assert len(groups) == 2
    for group in groups:
        pod = group["template"]["spec"]
        assert {
            "name": "nrl-k8s-run",
            "secret": {"secretName": "grpo-train-0123abcd", "items": [{"key": "recipe.yaml", "path": "recipe.yaml"}]},
        } in pod["volumes"]
        ray = pod["containers"][0]
        assert {"name": "nrl-k8s-run", "mountPath": "/etc/nrl-k8s/run", "readOnly": True} in ray["volumeMounts"]
        env = {e["name"]: e for e in ray["env"]}
        assert env["NRL_K8S_RUN_ID"] == {"name": "NRL_K8S_RUN_ID", "value": "grpo-train-0123abcd"}
        assert env["NRL_K8S_RECIPE"] == {"name": "NRL_K8S_RECIPE", "value": "/etc/nrl-k8s/run/recipe.yaml"}
        for name in SECRET_INFRA["launch"]["env"]:
            assert env[name] == {
                "name": name,
                "valueFrom": {"secretKeyRef": {"name": "grpo-train-0123abcd", "key": name}},
            }
        # launch.env replaces the entry networking.extra_env set, in place (no duplicate name)
        assert [e["name"] for e in ray["env"]].count("HF_HOME") == 1


def test_cluster_up_renders_no_reference_to_a_run_secret():
    text = yaml.safe_dump(raycluster.render(SECRET_INFRA, "training"))
    assert "secretKeyRef" not in text and "nrl-k8s-run" not in text and "NRL_K8S_RECIPE" not in text


def test_oversized_run_secret_is_refused():
    huge = {"data": "x" * (1024 * 1024)}
    with pytest.raises(ConfigError, match="more than Kubernetes allows") as info:
        rayjob.render_secret(INFRA, huge, "r-1")
    assert "make the recipe smaller" in info.value.hint


LIFETIME_CASES = [
    ("default shutdown with ttl", {}, {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 0}),
    ("custom ttl", {"ttl_seconds": 60}, {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 60}),
    ("no shutdown drops ttl", {"shutdown": False, "ttl_seconds": 60}, {"shutdownAfterJobFinishes": False}),
    (
        "active deadline",
        {"active_deadline_seconds": 7200},
        {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 0, "activeDeadlineSeconds": 7200},
    ),
]


@pytest.mark.parametrize("kwargs, expected", [c[1:] for c in LIFETIME_CASES], ids=[c[0] for c in LIFETIME_CASES])
def test_lifetime_fields(kwargs, expected):
    spec = rayjob.render(INFRA, "r-1", **kwargs)["spec"]
    got = {
        k: spec[k]
        for k in ("shutdownAfterJobFinishes", "ttlSecondsAfterFinished", "activeDeadlineSeconds")
        if k in spec
    }
    assert got == expected


def test_kueue_label_on_rayjob():
    infra = {**copy.deepcopy(INFRA), "scheduler": {"kind": "kueue", "queue": "lq"}}
    assert rayjob.render(infra, "r-1")["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"


ERROR_CASES = [
    ("no training role", lambda i: i.pop("kuberay"), "infra.kuberay.training: is not set", "declare"),
    ("no entrypoint", lambda i: i["launch"].pop("entrypoint"), "infra.launch.entrypoint is not set", "NRL_K8S_RECIPE"),
    (
        "blank entrypoint",
        lambda i: i["launch"].update(entrypoint="  \n"),
        "infra.launch.entrypoint is not set",
        "training command",
    ),
    ("name over 47", lambda i: i["kuberay"]["training"].update(name="a" * 48), "more than 47", "at most 47"),
]


@pytest.mark.parametrize("breaker, message, hint", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_errors(breaker, message, hint):
    infra = copy.deepcopy(INFRA)
    breaker(infra)
    with pytest.raises(ConfigError) as info:
        rayjob.render(infra, "r-1")
    assert message in info.value.message
    assert hint in info.value.hint


def test_deterministic_yaml():
    first = yaml.safe_dump([rayjob.render(INFRA, "r-1"), rayjob.render_secret(INFRA, RECIPE, "r-1")], sort_keys=False)
    again = [
        rayjob.render(copy.deepcopy(INFRA), "r-1"),
        rayjob.render_secret(copy.deepcopy(INFRA), copy.deepcopy(RECIPE), "r-1"),
    ]
    assert yaml.safe_dump(again, sort_keys=False) == first


def job(deployment=None, job_status=None, **extra) -> dict:
    status = {k: v for k, v in {"jobDeploymentStatus": deployment, "jobStatus": job_status, **extra}.items() if v}
    return {"status": status}


READINESS_CASES = [
    ("new", {}, Pending("RayJob New, job not submitted")),
    ("initializing", job("Initializing"), Pending("RayJob Initializing, job not submitted")),
    ("running", job("Running", "RUNNING"), Pending("RayJob Running, job RUNNING")),
    ("succeeded", job("Complete", "SUCCEEDED"), Ready("job SUCCEEDED")),
    (
        "complete but failed",
        job("Complete", "FAILED", message="exit 1"),
        Failed("RayJob Complete, job FAILED (exit 1)"),
    ),
    (
        "deadline exceeded",
        job("Failed", "RUNNING", reason="DeadlineExceeded", message="too slow"),
        Failed("RayJob Failed, job RUNNING (DeadlineExceeded: too slow)"),
    ),
    (
        "validation failed",
        job("ValidationFailed", reason="ValidationFailed"),
        Failed("RayJob ValidationFailed, job unknown (ValidationFailed)"),
    ),
    ("retrying is not terminal", job("Retrying", "FAILED"), Pending("RayJob Retrying, job FAILED")),
]


@pytest.mark.parametrize("obj, expected", [c[1:] for c in READINESS_CASES], ids=[c[0] for c in READINESS_CASES])
def test_readiness(obj, expected):
    assert rayjob.readiness(obj) == expected


def test_terminal_statuses():
    assert rayjob.TERMINAL_DEPLOYMENT_STATUSES == {"Complete", "Failed", "ValidationFailed"}


@pytest.mark.parametrize(
    "obj, cluster, job_id",
    [
        ({}, None, None),
        (
            {"status": {"rayClusterName": "grpo-train-ab12c", "jobId": "grpo-train-x1"}},
            "grpo-train-ab12c",
            "grpo-train-x1",
        ),
    ],
    ids=["no status", "status set"],
)
def test_status_accessors(obj, cluster, job_id):
    assert rayjob.cluster_name(obj) == cluster
    assert rayjob.job_id(obj) == job_id
