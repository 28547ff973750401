"""A secret on a command line (entrypoint, daemon, DGD argument, a role's pod template or a
Deployment's container command/args) is stored as written in the object it goes into: `check`,
`run` and `cluster up` warn, naming the key and the fix, and never print the value; the warning
says that a dry run's <redacted> stands for the real value, which is applied."""

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
        "dynamo.serving (a command or argument)",
    ),
    # issue 30: a role's pod template and a Deployment's container
    "head args --token X": (
        "++infra.kuberay.training.spec.headGroupSpec.template.spec.containers="
        "[{name: ray-head, args: [--token, tok_abc123]}]",
        "kuberay.training.spec.headGroupSpec.template.spec.containers.0.args",
    ),
    "worker command --token=X": (
        "++infra.kuberay.training.spec.workerGroupSpecs.0.template.spec.containers="
        "[{name: ray-worker, command: [sh, -c, 'python w.py --token=tok_abc123']}]",
        "kuberay.training.spec.workerGroupSpecs.0.template.spec.containers.0.command",
    ),
    "Deployment command --api-key X": (
        "++infra.deployments={web: {spec: {replicas: 1, template: {spec: {containers: "
        "[{name: web, command: [serve, --api-key, key_abc123]}]}}}}}",
        "deployments.web.spec.template.spec.containers.0.command",
    ),
}
COMMANDS = {"check": ["check"], "run --dry-run": ["run", "--dry-run"], "cluster up --dry-run": ["cluster", "up",
                                                                                               "--dry-run"]}


@pytest.mark.parametrize(("override", "key"), CASES.values(), ids=CASES)
@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS)
def test_a_secret_on_a_command_line_is_warned_about_and_never_printed(tmp_path, command, override, key):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NRL_K8S_USER": "t", "KUBECONFIG": str(tmp_path / "none")}
    done = subprocess.run([EXE, *command, *PAIR, override], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"warning: {key} passes a secret on its command line" in done.stderr, done.stderr
    assert "a dry run prints <redacted>; the real value is applied" in done.stderr
    assert "abc123" not in done.stdout + done.stderr


def test_a_reference_kubernetes_expands_is_no_secret_on_a_command_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NRL_K8S_USER": "t", "KUBECONFIG": str(tmp_path / "none")}
    override = ("++infra.kuberay.training.spec.headGroupSpec.template.spec.containers=[{name: ray-head, "
                "args: [--token, $(HF_TOKEN)]}]")
    done = subprocess.run([EXE, "check", *PAIR, override], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "secret on its command line" not in done.stderr, done.stderr
