"""The recipe copy a run executes: Dynamo injection, run id, entrypoint, launch env and recipe text."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from nrl_k8s.config import recipe as recipe_mod
from nrl_k8s.errors import ConfigError

INFRA = {
    "namespace": "rl",
    "kuberay": {"training": {"name": "grpo-train", "spec": {}}},
    "launch": {"entrypoint": "python run.py", "env": {}},
}

INJECT_CASES = [
    (
        "no DGD",
        {"policy": {"generation": {"backend": "vllm"}}},
        [],
        {"policy": {"generation": {"backend": "vllm"}}},
        [],
    ),
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


@pytest.mark.parametrize(
    "recipe, names, expected, notes", [c[1:] for c in INJECT_CASES], ids=[c[0] for c in INJECT_CASES]
)
def test_inject_dynamo(recipe, names, expected, notes):
    before = copy.deepcopy(recipe)
    out, got_notes = recipe_mod.inject_dynamo(recipe, names)
    assert out == expected
    assert recipe == before
    assert len(got_notes) == len(notes)
    for note, fragment in zip(got_notes, notes, strict=True):
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


def test_driver_entrypoint_is_the_users_command_verbatim():
    infra = copy.deepcopy(INFRA)
    infra["launch"]["entrypoint"] = 'cd /opt && python run.py --config "$NRL_K8S_RECIPE"\n'
    infra["launch"]["env"] = {"HF_TOKEN": "hf_s3cr3t", "PATH": "/nowhere"}
    assert recipe_mod.driver_entrypoint(infra) == infra["launch"]["entrypoint"]


def test_launch_env_as_strings_in_order():
    infra = copy.deepcopy(INFRA)
    infra["launch"]["env"] = {"B": "2", "A": 1, "FLAG": True, "PATH": "/x"}
    assert list(recipe_mod.launch_env(infra).items()) == [("B", "2"), ("A", "1"), ("FLAG", "true"), ("PATH", "/x")]
    assert recipe_mod.launch_env({"launch": {}}) == {}


def test_recipe_text_keeps_order_unicode_and_interpolations():
    recipe = {"z": 1, "policy": {"model_name": "${oc.env:MODEL,Qwen/Qwen3-0.6B}"}, "logger": {"name": "ünïcode run"}}
    text = recipe_mod.recipe_text(recipe)
    assert yaml.safe_load(text) == recipe
    assert list(yaml.safe_load(text)) == ["z", "policy", "logger"]
    assert "${oc.env:MODEL,Qwen/Qwen3-0.6B}" in text and "ünïcode" in text


ENV_ERRORS = [
    ("bad env name", {"env": {"MY-VAR": "x"}}, recipe_mod.launch_env, "not a valid environment variable name"),
    (
        "reserved recipe name",
        {"env": {"NRL_K8S_RECIPE": "/x"}},
        recipe_mod.launch_env,
        "NRL_K8S_RECIPE is set by nrl-k8s",
    ),
    (
        "reserved run id name",
        {"env": {"NRL_K8S_RUN_ID": "x"}},
        recipe_mod.launch_env,
        "NRL_K8S_RUN_ID is set by nrl-k8s",
    ),
    ("no entrypoint", {"entrypoint": None}, recipe_mod.driver_entrypoint, "infra.launch.entrypoint is not set"),
]


@pytest.mark.parametrize("launch, fn, message", [c[1:] for c in ENV_ERRORS], ids=[c[0] for c in ENV_ERRORS])
def test_launch_errors(launch, fn, message):
    infra = copy.deepcopy(INFRA)
    infra["launch"].update(launch)
    with pytest.raises(ConfigError, match=message):
        fn(infra)
