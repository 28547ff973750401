"""Golden files: every example renders to exactly the checked-in manifests.

Regenerate after an intended change with `UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_golden.py`
and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from nrl_k8s.config import load_config
from nrl_k8s.flows.plan import plan_run
from nrl_k8s.kinds import dgd
from nrl_k8s.ops import targets
from nrl_k8s_cli._common import dump_yaml_stream

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests/golden"
EXAMPLES, SHAPES = "examples", "tests/upstream_shapes"  # the project's examples; upstream-shaped pairs
PAIRS = {
    "qwen3_0.6b_dynamo": (EXAMPLES, "qwen3_0.6b_dynamo.yaml", "qwen3_0.6b_dynamo.kind.infra.yaml"),
    "grpo_qwen3_30b_dynamo": (EXAMPLES, "grpo_qwen3_30b_dynamo.yaml", "grpo_qwen3_30b_dynamo.gb300.infra.yaml"),
    "grpo_two_dgds": (EXAMPLES, "grpo_two_dgds.yaml", "grpo_two_dgds.kind.infra.yaml"),
    "bundled_qwen3_0.6b": (EXAMPLES, "bundled_qwen3_0.6b.yaml", None),
    "sandbox": (EXAMPLES, "sandbox.yaml", "sandbox.infra.yaml"),
    "sandbox_longlived": (EXAMPLES, "sandbox_longlived.yaml", "sandbox_longlived.infra.yaml"),
    **{
        f"upstream.{shape}": (SHAPES, "recipe.yaml", f"{shape}.infra.yaml")
        for shape in ("dgd_file", "inline_spec", "segments")
    },
}
PARENTS = {"grpo_base.yaml"}  # recipes only used through `defaults:`
DGDS = sorted(p.name for p in (ROOT / "examples_dgd").glob("*.yaml"))


@pytest.fixture(autouse=True)
def fixed_env(monkeypatch):
    for name in ("HF_TOKEN", "WANDB_API_KEY", "NRL_K8S_DEFAULTS", "NRL_SHAPES_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NRL_K8S_USER", "golden")
    monkeypatch.setenv("HOME", "/nonexistent")


def _compare(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from its golden file; run with UPDATE_GOLDEN=1 and review"


def _load(folder: str, recipe: str, infra: str | None):
    return load_config(ROOT / folder / recipe, (), infra and ROOT / folder / infra)


@pytest.mark.parametrize("name", PAIRS, ids=PAIRS)
def test_run_dry_run_matches_golden(name):
    _compare(f"{name}.run.yaml", dump_yaml_stream(plan_run(_load(*PAIRS[name])).manifests()))


@pytest.mark.parametrize("name", PAIRS, ids=PAIRS)
def test_cluster_up_targets_match_golden(name):
    cfg = _load(*PAIRS[name])
    docs = [doc for t in targets.available(cfg.infra) for doc in targets.render_all(cfg.infra, t)]
    _compare(f"{name}.cluster.yaml", dump_yaml_stream(docs))


@pytest.mark.parametrize("manifest", DGDS, ids=DGDS)
def test_every_dgd_manifest_renders_to_golden(manifest):
    infra = {
        "namespace": "golden",
        "image": "example.com/nemo-rl:golden",
        "imagePullSecrets": ["regcred"],
        "labels": {"team": "golden"},
        "dynamo": {"key": {"manifest": str(ROOT / "examples_dgd" / manifest), "readyTimeoutS": 600}},
    }
    _compare(f"dgd.{Path(manifest).stem}.yaml", dump_yaml_stream([dgd.render(infra, "key")]))


@pytest.mark.parametrize("twin", sorted(p.name for p in (ROOT / "examples_dgd").glob("*_v1beta1.yaml")))
def test_v1beta1_examples_are_their_v1alpha1_twins_converted(twin):
    """Each ``*_v1beta1.yaml`` is what the Dynamo operator's conversion makes of its v1alpha1 twin
    (the sandbox's webhook), so both versions of an example describe the same graph."""
    from nrl_k8s_sandbox.controlplane.conversion import BETA, convert

    alpha = yaml.safe_load((ROOT / "examples_dgd" / twin.replace("_v1beta1", "")).read_text())
    assert convert(alpha, BETA) == yaml.safe_load((ROOT / "examples_dgd" / twin).read_text())


def test_every_example_file_is_covered():
    for folder in (EXAMPLES, SHAPES):
        covered = {f for where, *pair in PAIRS.values() if where == folder for f in pair if f}
        covered |= PARENTS if folder == EXAMPLES else {p.name for p in (ROOT / SHAPES).glob("*.dgd.yaml")}
        assert {p.name for p in (ROOT / folder).glob("*.yaml")} == covered


def test_rendering_does_not_depend_on_the_checkout_location(tmp_path):
    import shutil

    for folder in ("examples", "examples_dgd"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    _, recipe, infra = PAIRS["qwen3_0.6b_dynamo"]
    here = plan_run(_load(EXAMPLES, recipe, infra)).manifests()
    there = plan_run(load_config(tmp_path / "examples" / recipe, (), tmp_path / "examples" / infra)).manifests()
    assert there == here
