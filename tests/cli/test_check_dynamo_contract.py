"""The installed CLI against NeMo-RL's Dynamo contract (``config.dynamo_contract``): an error is one
``error:`` line naming the DGD file and the recipe key, exit 2, before any request reaches the API
server (check, run, cluster up alike); a warning is a ``warning:`` line and the check passes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_api import FakeApi

DATA = Path(__file__).parent / "data" / "dynamo_contract"
PAIR = [str(DATA / "recipe.yaml"), "--infra", str(DATA / "infra.yaml")]
DGD = str((DATA / "rl.dgd.yaml").resolve())
EXE = shutil.which("nrl-k8s", path=str(Path(sys.executable).parent))
COMMANDS = {"check": ["check"], "run": ["run"], "run --raycluster": ["run", "--raycluster"],
            "cluster up": ["cluster", "up"]}


@pytest.fixture
def fake():
    api = FakeApi()
    yield api
    api.close()


def nrl_k8s(argv: list[str], tmp_path: Path, kubeconfig: Path | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NRL_K8S_USER": "tester",
           "KUBECONFIG": str(kubeconfig or tmp_path / "none")}
    return subprocess.run([EXE, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS)
def test_an_engine_world_size_the_worker_does_not_run_is_refused_before_anything_is_applied(command, fake, tmp_path):
    result = nrl_k8s([*command, *PAIR, "policy.generation.dynamo_cfg.engine_world_size=4"], tmp_path,
                     fake.kubeconfig(tmp_path / "kubeconfig"))
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 2 and lines[1].startswith("hint: set it to 2"), lines
    assert lines[0] == (f"error: {DGD}: policy.generation.dynamo_cfg.engine_world_size is 4, but worker "
                        "VllmDecodeWorker runs 2 ranks per endpoint (--tensor-parallel-size 2 x "
                        "--pipeline-parallel-size 1 (the default))")
    assert result.stdout == ""
    assert fake.requests == []  # refused before connecting: nothing applied


def test_a_recipe_without_engine_world_size_is_checked_with_a_warning(tmp_path):
    result = nrl_k8s(["check", *PAIR, "~policy.generation.dynamo_cfg.engine_world_size"], tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [f"warning: {DGD}: policy.generation.dynamo_cfg.engine_world_size is not set while "
                        "policy.generation.colocated.enabled is false: NeMo-RL's NCCL refit (pull request 2990) "
                        "requires it; NeMo-RL before it did no refit through Dynamo"], result.stderr


def test_the_pair_that_keeps_the_contract_checks_clean(tmp_path):
    result = nrl_k8s(["check", *PAIR], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warning:" not in result.stderr and "error:" not in result.stderr, result.stderr
