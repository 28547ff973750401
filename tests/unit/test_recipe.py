"""The recipe copy a run executes: Dynamo injection, run id and the driver entrypoint."""

from __future__ import annotations

import copy
import os
import re
import subprocess

import pytest
import yaml

from nrl_k8s import recipe as recipe_mod
from nrl_k8s.errors import ConfigError

INFRA = {
    "namespace": "rl",
    "kuberay": {"training": {"name": "grpo-train", "spec": {}}},
    "launch": {"entrypoint": "python run.py", "env": {}},
}

INJECT_CASES = [
    ("no DGD", {"policy": {"generation": {"backend": "vllm"}}}, [], {"policy": {"generation": {"backend": "vllm"}}}, []),
    (
        "one DGD",
        {"policy": {"generation": {"backend": "vllm", "max_new_tokens": 8}}},
        ["qwen"],
        {"policy": {"generation": {"backend": "dynamo", "max_new_tokens": 8, "dynamo_cfg": {"dgd_name": "qwen"}}}},
        [],
    ),
    (
        "one DGD into an empty recipe",
        {},
        ["qwen"],
        {"policy": {"generation": {"backend": "dynamo", "dynamo_cfg": {"dgd_name": "qwen"}}}},
        [],
    ),
    (
        "null generation block",
        {"policy": {"generation": None}},
        ["qwen"],
        {"policy": {"generation": {"backend": "dynamo", "dynamo_cfg": {"dgd_name": "qwen"}}}},
        [],
    ),
    (
        "frontend_url left alone",
        {"policy": {"generation": {"backend": "dynamo", "dynamo_cfg": {"frontend_url": "http://x:8000"}}}},
        ["qwen"],
        {"policy": {"generation": {"backend": "dynamo", "dynamo_cfg": {"frontend_url": "http://x:8000"}}}},
        ["frontend_url"],
    ),
    (
        "several DGDs left alone",
        {"policy": {"generation": {"backend": "vllm"}}},
        ["a", "b"],
        {"policy": {"generation": {"backend": "vllm"}}},
        ["2 DGDs declared (a, b)"],
    ),
    (
        "different dgd_name replaced with a note",
        {"policy": {"generation": {"dynamo_cfg": {"dgd_name": "old", "namespace": "x"}}}},
        ["qwen"],
        {"policy": {"generation": {"dynamo_cfg": {"dgd_name": "qwen", "namespace": "x"}, "backend": "dynamo"}}},
        ["'old' replaced"],
    ),
    (
        "same dgd_name is silent",
        {"policy": {"generation": {"backend": "dynamo", "dynamo_cfg": {"dgd_name": "qwen"}}}},
        ["qwen"],
        {"policy": {"generation": {"backend": "dynamo", "dynamo_cfg": {"dgd_name": "qwen"}}}},
        [],
    ),
]


@pytest.mark.parametrize("recipe, names, expected, notes", [c[1:] for c in INJECT_CASES], ids=[c[0] for c in INJECT_CASES])
def test_inject_dynamo(recipe, names, expected, notes):
    before = copy.deepcopy(recipe)
    out, got_notes = recipe_mod.inject_dynamo(recipe, names)
    assert out == expected
    assert recipe == before
    assert len(got_notes) == len(notes)
    for note, fragment in zip(got_notes, notes):
        assert fragment in note


def test_inject_into_non_mapping_is_refused():
    with pytest.raises(ConfigError, match=r"policy\.generation is not a mapping"):
        recipe_mod.inject_dynamo({"policy": {"generation": "${defaults.gen}"}}, ["qwen"])


def test_run_id_format_and_determinism():
    recipe = {"a": 1, "b": {"c": [1, 2]}}
    rid = recipe_mod.run_id(INFRA, recipe)
    assert re.fullmatch(r"grpo-train-[0-9a-f]{8}", rid)
    assert recipe_mod.run_id(copy.deepcopy(INFRA), {"b": {"c": [1, 2]}, "a": 1}) == rid


@pytest.mark.parametrize(
    "change",
    [lambda i, r: r.update(a=2), lambda i, r: i["launch"].update(entrypoint="other"), lambda i, r: i.update(image="x")],
    ids=["recipe changed", "entrypoint changed", "image changed"],
)
def test_run_id_changes_with_inputs(change):
    infra, recipe = copy.deepcopy(INFRA), {"a": 1}
    base = recipe_mod.run_id(infra, recipe)
    change(infra, recipe)
    assert recipe_mod.run_id(infra, recipe) != base


@pytest.fixture
def recipe_dir(tmp_path, monkeypatch):
    """Write recipes under tmp_path instead of /tmp/nrl-k8s."""
    monkeypatch.setattr(recipe_mod, "RECIPE_DIR", str(tmp_path / "recipes"))
    return tmp_path / "recipes"


def run_sh(entrypoint: str, cwd) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent"}
    return subprocess.run(["sh", "-c", entrypoint], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_entrypoint_runs_in_sh(recipe_dir, tmp_path):
    recipe = {
        "policy": {"model_name": "${oc.env:MODEL,Qwen/Qwen3-0.6B}", "generation": {"backend": "dynamo"}},
        "logger": {"name": "ünïcode run"},
        "grpo": {"max_num_steps": 5},
    }
    infra = copy.deepcopy(INFRA)
    infra["launch"]["env"] = {"HF_TOKEN": "s3cr3t", "TRICKY": "it's \"quoted\" $HOME `x`", "N": 3}
    infra["launch"]["entrypoint"] = 'cat "$NRL_K8S_RECIPE"\necho "run=$NRL_K8S_RUN_ID|$HF_TOKEN|$TRICKY|$N"\nexit 3\n'
    ep = recipe_mod.driver_entrypoint(infra, recipe, "grpo-train-0123abcd")

    done = run_sh(ep, tmp_path)

    assert done.returncode == 3, done.stderr
    written = recipe_dir / "grpo-train-0123abcd" / "recipe.yaml"
    assert yaml.safe_load(written.read_text()) == recipe
    assert done.stdout == written.read_text() + "run=grpo-train-0123abcd|s3cr3t|it's \"quoted\" $HOME `x`|3\n"
    assert "${oc.env:MODEL,Qwen/Qwen3-0.6B}" in written.read_text()
    assert list(recipe) == list(yaml.safe_load(written.read_text()))  # key order kept


@pytest.mark.parametrize(
    "user, code",
    [("true", 0), ("false", 1), ("sh -c 'exit 7'", 7), ("set -e\nfalse\necho unreachable", 1), ("exit 0\nexit 9", 0)],
    ids=["success", "last command fails", "child exit code", "set -e", "early exit"],
)
def test_entrypoint_exit_code_is_the_users(recipe_dir, tmp_path, user, code):
    infra = copy.deepcopy(INFRA)
    infra["launch"]["entrypoint"] = user
    done = run_sh(recipe_mod.driver_entrypoint(infra, {"a": 1}, "rid"), tmp_path)
    assert done.returncode == code
    assert "unreachable" not in done.stdout


def test_recipe_write_failure_stops_before_user_command(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(recipe_mod, "RECIPE_DIR", str(blocker))
    infra = copy.deepcopy(INFRA)
    infra["launch"]["entrypoint"] = "echo user-ran"
    done = run_sh(recipe_mod.driver_entrypoint(infra, {"a": 1}, "rid"), tmp_path)
    assert done.returncode != 0
    assert "user-ran" not in done.stdout


def test_entrypoint_is_deterministic_and_decodes():
    infra = copy.deepcopy(INFRA)
    infra["launch"]["env"] = {"B": "2", "A": "1"}
    recipe = {"z": 1, "a": {"b": "${x.y}"}}
    ep = recipe_mod.driver_entrypoint(infra, recipe, "rid")
    assert ep == recipe_mod.driver_entrypoint(copy.deepcopy(infra), copy.deepcopy(recipe), "rid")
    assert recipe_mod.decode_recipe(ep) == recipe
    assert ep.splitlines()[:4] == [
        "export NRL_K8S_RUN_ID=rid",
        "export NRL_K8S_RECIPE=/tmp/nrl-k8s/rid/recipe.yaml",
        "export B=2",
        "export A=1",
    ]
    assert ep.endswith("\npython run.py")


def test_decode_recipe_of_foreign_entrypoint():
    assert recipe_mod.decode_recipe("python train.py") is None


ENTRYPOINT_ERRORS = [
    ("bad env name", {"env": {"MY-VAR": "x"}}, "not a valid environment variable name"),
    ("reserved env name", {"env": {"NRL_K8S_RECIPE": "/x"}}, "NRL_K8S_RECIPE is set by nrl-k8s"),
    ("no entrypoint", {"entrypoint": None}, "infra.launch.entrypoint is not set"),
]


@pytest.mark.parametrize("launch, message", [c[1:] for c in ENTRYPOINT_ERRORS], ids=[c[0] for c in ENTRYPOINT_ERRORS])
def test_entrypoint_errors(launch, message):
    infra = copy.deepcopy(INFRA)
    infra["launch"].update(launch)
    with pytest.raises(ConfigError, match=message):
        recipe_mod.driver_entrypoint(infra, {}, "rid")


def test_oversized_recipe_refused():
    huge = {"data": ["x" * 100 for _ in range(1200)]}
    with pytest.raises(ConfigError, match="more than"):
        recipe_mod.driver_entrypoint(INFRA, huge, "rid")


def test_largest_accepted_entrypoint_still_runs(recipe_dir, tmp_path):
    infra = copy.deepcopy(INFRA)
    infra["launch"]["entrypoint"] = 'test -s "$NRL_K8S_RECIPE"'
    overhead = len(recipe_mod.driver_entrypoint(infra, {"data": ""}, "rid"))
    recipe = {"data": "x" * ((recipe_mod.MAX_ENTRYPOINT_BYTES - overhead - 100) * 3 // 4)}
    assert len(recipe_mod.driver_entrypoint(infra, recipe, "rid")) > recipe_mod.MAX_ENTRYPOINT_BYTES - 200
    done = run_sh(recipe_mod.driver_entrypoint(infra, recipe, "rid"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load((recipe_dir / "rid" / "recipe.yaml").read_text()) == recipe
