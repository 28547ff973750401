"""The sandbox's emulation of a head container for drivers on the shared Ray head (driver_env)."""

from __future__ import annotations

import base64
import json
import stat
import subprocess

import pytest
import yaml

from nrl_k8s.kinds import rayjob
from nrl_k8s.sandbox.driver_env import INJECTED_KEY, DriverEnv
from nrl_k8s.sandbox.head_proxy import CLUSTER_KEY, HeadDashboard, cluster_submission, job_cluster, shown

RUN = "train-0123abcd"
INFRA = {
    "namespace": "ns1",
    "image": "nvcr.io/nvidia/nemo-rl:v0.4.0",
    "launch": {
        # only shell builtins and a redirect: the user's PATH must not matter to the delivery
        "entrypoint": 'read -r first < "$NRL_K8S_RECIPE"; [ "$first" = "grpo:" ] && [ "$HF_TOKEN" = hf_s3cr3t ] '
                      '&& [ "$NRL_K8S_RUN_ID" = train-0123abcd ] && [ "$PATH" = /nowhere ]',
        "env": {"HF_TOKEN": "hf_s3cr3t", "PATH": "/nowhere", "MODEL": "qwen"},
    },
    "kuberay": {"training": {"name": "train", "spec": {"workerGroupSpecs": [{"groupName": "w", "replicas": 1}]}}},
}
RECIPE = {"grpo": {"max_num_steps": 1}, "logger": {"wandb": {"api_key": "k"}}}


def stored(obj: dict) -> dict:
    """A Secret as the API server returns it (stringData folded into base64 data)."""
    data = {k: base64.b64encode(v.encode()).decode() for k, v in obj["stringData"].items()}
    return {**{k: v for k, v in obj.items() if k != "stringData"}, "data": data}


@pytest.fixture
def cluster() -> dict:
    spec = rayjob.render(INFRA, RUN)["spec"]["rayClusterSpec"]
    return {"metadata": {"namespace": "ns1", "name": "train-abcde"}, "spec": spec}


@pytest.fixture
def secrets() -> dict:
    return {RUN: stored(rayjob.render_secret(INFRA, RECIPE, RUN))}


def test_a_driver_sees_its_head_containers_env_and_recipe(tmp_path, cluster, secrets):
    body = DriverEnv(tmp_path / "volumes").submission({"entrypoint": "x", "submission_id": "j1"}, cluster, secrets.get)
    env = body["runtime_env"]["env_vars"]
    recipe_file = tmp_path / "volumes/ns1/train-abcde/nrl-k8s-run/recipe.yaml"
    assert env == {"NRL_K8S_RUN_ID": RUN, "NRL_K8S_RECIPE": str(recipe_file), "HF_TOKEN": "hf_s3cr3t",
                   "PATH": "/nowhere", "MODEL": "qwen"}
    assert yaml.safe_load(recipe_file.read_text()) == RECIPE
    assert stat.S_IMODE(recipe_file.stat().st_mode) == 0o600
    for directory in recipe_file.parents[:4]:  # the volume, cluster, namespace and root directories
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert body["metadata"] == {INJECTED_KEY: "NRL_K8S_RUN_ID,NRL_K8S_RECIPE,HF_TOKEN,PATH,MODEL"}
    assert (body["entrypoint"], body["submission_id"]) == ("x", "j1")

    # the RayJob's entrypoint, run as Ray runs it (a shell) with exactly that environment
    done = subprocess.run(["/bin/sh", "-c", rayjob.render(INFRA, RUN)["spec"]["entrypoint"]], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_submitters_own_env_vars_win_and_are_not_marked(tmp_path, cluster, secrets):
    body = {"entrypoint": "x", "runtime_env": {"env_vars": {"MODEL": "mine"}, "pip": ["a"]}, "metadata": {"k": "v"}}
    out = DriverEnv(tmp_path).submission(body, cluster, secrets.get)
    assert out["runtime_env"]["env_vars"]["MODEL"] == "mine" and out["runtime_env"]["pip"] == ["a"]
    assert out["metadata"]["k"] == "v" and "MODEL" not in out["metadata"][INJECTED_KEY].split(",")
    assert body == {"entrypoint": "x", "runtime_env": {"env_vars": {"MODEL": "mine"}, "pip": ["a"]}, "metadata": {"k": "v"}}


def test_a_missing_secret_leaves_its_values_out(tmp_path, cluster):
    env = DriverEnv(tmp_path).submission({"entrypoint": "x"}, cluster, lambda name: None)["runtime_env"]["env_vars"]
    assert set(env) == {"NRL_K8S_RUN_ID", "NRL_K8S_RECIPE"}
    assert not (tmp_path / "ns1/train-abcde/nrl-k8s-run/recipe.yaml").exists()


def test_item_paths_that_leave_the_volume_are_refused(tmp_path, cluster, secrets):
    pod = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    pod["volumes"][-1]["secret"]["items"] = [{"key": "recipe.yaml", "path": "../../escape.yaml"},
                                             {"key": "HF_TOKEN", "path": "sub/token"}]
    DriverEnv(tmp_path / "v").submission({"entrypoint": "x"}, cluster, secrets.get)
    assert not list(tmp_path.rglob("escape.yaml"))
    assert (tmp_path / "v/ns1/train-abcde/nrl-k8s-run/sub/token").read_text() == "hf_s3cr3t"


def test_forget_removes_the_clusters_files(tmp_path, cluster, secrets):
    drivers = DriverEnv(tmp_path)
    drivers.submission({"entrypoint": "x"}, cluster, secrets.get)
    drivers.forget("ns1", "train-abcde")
    assert not (tmp_path / "ns1/train-abcde").exists()


HEAD_SERVICE = {"metadata": {"name": "train-abcde-head-svc", "namespace": "ns1", "labels": {"ray.io/cluster": "train-abcde"}},
                "spec": {"ports": [{"name": "client", "port": 10001}, {"name": "dashboard", "port": 8265},
                                  {"name": "8000-port", "port": 8000}]}}


def test_a_submission_for_a_cluster_gets_its_head_containers_env_and_its_tag(tmp_path, cluster, secrets):
    cluster["metadata"]["uid"] = "uid-1"
    body = {"entrypoint": "x", "submission_id": "j1", "metadata": {"k": "v"}}
    out = cluster_submission(DriverEnv(tmp_path), body, cluster, secrets.get)
    assert out["runtime_env"]["env_vars"]["HF_TOKEN"] == "hf_s3cr3t"
    assert out["metadata"][CLUSTER_KEY] == "uid-1" and out["metadata"]["k"] == "v" and job_cluster(out) == "uid-1"
    assert body == {"entrypoint": "x", "submission_id": "j1", "metadata": {"k": "v"}}
    assert job_cluster({"metadata": None}) is None and job_cluster({}) is None


@pytest.mark.parametrize("target, expected", [("train-abcde-head-svc:8265", True), ("train-abcde-head-svc:dashboard", True),
                                              ("http:train-abcde-head-svc:8265", True), ("train-abcde-head-svc", False),
                                              ("train-abcde-head-svc:8000", False), ("train-abcde-head-svc:9999", False)])
def test_only_the_dashboard_port_of_a_head_service_is_isolated(target, expected):
    assert HeadDashboard.serves(HEAD_SERVICE, target) is expected
    assert HeadDashboard.serves({**HEAD_SERVICE, "metadata": {"name": "other", "namespace": "ns1"}}, target) is False


def test_job_details_through_the_proxy_hide_what_was_added():
    injected = {"submission_id": "j1", "runtime_env": {"env_vars": {"HF_TOKEN": "hf_s3cr3t", "MINE": "1"}},
                "metadata": {INJECTED_KEY: "HF_TOKEN", CLUSTER_KEY: "uid-1", "k": "v"}}
    only_ours = {"submission_id": "j2", "runtime_env": {"env_vars": {"HF_TOKEN": "hf_s3cr3t"}}, "metadata": {INJECTED_KEY: "HF_TOKEN"}}
    foreign = {"submission_id": "j3", "runtime_env": {"env_vars": {"A": "1"}}, "metadata": {}}
    assert [shown(job) for job in (injected, only_ours, foreign)] == [
        {"submission_id": "j1", "runtime_env": {"env_vars": {"MINE": "1"}}, "metadata": {"k": "v"}},
        {"submission_id": "j2", "runtime_env": {}, "metadata": {}},
        foreign,
    ]
    assert "hf_s3cr3t" in json.dumps(injected)  # the original is left alone
