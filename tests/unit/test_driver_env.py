"""The sandbox's emulation of a head container for drivers on the shared Ray head (driver_env)."""

from __future__ import annotations

import base64
import stat
import subprocess

import pytest
import yaml

from nrl_k8s.kinds import rayjob
from nrl_k8s_sandbox.driver_env import DriverEnv

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


def head(cluster: dict) -> dict:
    return cluster["spec"]["headGroupSpec"]["template"]["spec"]


def test_a_driver_sees_its_head_containers_env_and_recipe(tmp_path, cluster, secrets):
    env = DriverEnv(tmp_path / "volumes").container_env(cluster["metadata"], head(cluster), secrets.get)
    recipe_file = tmp_path / "volumes/ns1/train-abcde/nrl-k8s-run/recipe.yaml"
    assert env == {"NRL_K8S_RUN_ID": RUN, "NRL_K8S_RECIPE": str(recipe_file), "HF_TOKEN": "hf_s3cr3t",
                   "PATH": "/nowhere", "MODEL": "qwen"}
    assert yaml.safe_load(recipe_file.read_text()) == RECIPE
    assert stat.S_IMODE(recipe_file.stat().st_mode) == 0o600
    for directory in recipe_file.parents[:4]:  # the volume, cluster, namespace and root directories
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory

    # the RayJob's entrypoint, run as Ray runs it (a shell) with exactly that environment
    done = subprocess.run(["/bin/sh", "-c", rayjob.render(INFRA, RUN)["spec"]["entrypoint"]], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_missing_secret_leaves_its_values_out(tmp_path, cluster):
    env = DriverEnv(tmp_path).container_env(cluster["metadata"], head(cluster), lambda name: None)
    assert set(env) == {"NRL_K8S_RUN_ID", "NRL_K8S_RECIPE"}
    assert not (tmp_path / "ns1/train-abcde/nrl-k8s-run/recipe.yaml").exists()


def test_item_paths_that_leave_the_volume_are_refused(tmp_path, cluster, secrets):
    pod = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    pod["volumes"][-1]["secret"]["items"] = [{"key": "recipe.yaml", "path": "../../escape.yaml"},
                                             {"key": "HF_TOKEN", "path": "sub/token"}]
    DriverEnv(tmp_path / "v").container_env(cluster["metadata"], head(cluster), secrets.get)
    assert not list(tmp_path.rglob("escape.yaml"))
    assert (tmp_path / "v/ns1/train-abcde/nrl-k8s-run/sub/token").read_text() == "hf_s3cr3t"


def test_forget_removes_the_clusters_files(tmp_path, cluster, secrets):
    drivers = DriverEnv(tmp_path)
    drivers.container_env(cluster["metadata"], head(cluster), secrets.get)
    drivers.forget("ns1", "train-abcde")
    assert not (tmp_path / "ns1/train-abcde").exists()
