"""A secret on a command line (entrypoint, daemon, DGD argument) is stored as written in the object
it goes into: `check` and `run` warn, naming the key and the fix, and never print the value."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXE = shutil.which("nrl-k8s", path=str(Path(sys.executable).parent))
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
CASES = {
    "entrypoint --hf-token X": ("infra.launch.entrypoint=python run.py --hf-token hf_abc123", "launch.entrypoint"),
    "entrypoint Bearer": (
        "infra.launch.entrypoint=\"curl -H 'Authorization: Bearer tok_abc123' h\"",
        "launch.entrypoint",
    ),
    "DGD --api-key X": (
        "++infra.dynamo.serving.overrides={services: {Frontend: {extraPodSpec: {mainContainer: "
        "{args: [--api-key, key_abc123]}}}}}",
        "dynamo.serving",
    ),
}


@pytest.mark.parametrize(("override", "key"), CASES.values(), ids=CASES)
@pytest.mark.parametrize("command", [["check"], ["run", "--dry-run"]], ids=["check", "run --dry-run"])
def test_a_secret_on_a_command_line_is_warned_about_and_never_printed(tmp_path, command, override, key):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NRL_K8S_USER": "t", "KUBECONFIG": str(tmp_path / "none")}
    done = subprocess.run([EXE, *command, *PAIR, override], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"warning: {key}" in done.stderr and "secret on its command line" in done.stderr
    assert "abc123" not in done.stdout + done.stderr
