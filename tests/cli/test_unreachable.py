"""A server that is not there, or a credential plugin that fails: one error line, exit 1.

Until the API server has answered once, nrl-k8s does not retry a refused connection for a minute
(`Tuning.first_contact_s`); ``bench/unreachable.py`` measures how long these take.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXE = shutil.which("nrl-k8s", path=str(Path(sys.executable).parent))
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
COMMANDS = {
    "status": ["status", *PAIR],
    "run --rayjob": ["run", "--rayjob", "--no-wait", *PAIR],
    "cluster list": ["cluster", "list"],
    "gc": ["gc", *PAIR, "--dry-run"],
}


def kubeconfig(tmp_path: Path, user: dict) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "team"}}]}))
    return path


def run(argv: list[str], config: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NRL_K8S_USER": "tester", "KUBECONFIG": str(config)}
    return subprocess.run([EXE, *argv], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


def one_error(result: subprocess.CompletedProcess, *words: str) -> None:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and len(errors) == 1, result.stderr
    assert all(word in errors[0] for word in words), errors


@pytest.mark.parametrize("argv", COMMANDS.values(), ids=COMMANDS)
def test_an_unreachable_api_server_is_one_error(tmp_path, argv):
    one_error(run(argv, kubeconfig(tmp_path, {"token": "t"}), tmp_path), "127.0.0.1:1")


def test_a_failing_credential_plugin_is_one_error(tmp_path):
    plugin = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "false", "interactiveMode": "Never"}}
    one_error(run(COMMANDS["status"], kubeconfig(tmp_path, plugin), tmp_path), "exec plugin `false` failed")
