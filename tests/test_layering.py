"""Offline commands never import cluster clients (what imports what is lint-imports' contracts, in make lint)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("kubernetes", "ray", "httpx")


OFFLINE = {
    "help": ["--help"],
    "check": [
        "check",
        "examples/grpo_qwen3_30b_dynamo.yaml",
        "--infra",
        "examples/grpo_qwen3_30b_dynamo.gb300.infra.yaml",
    ],
    "check-manifests-only": [
        "check",
        "--manifests-only",
        "--show-secrets",
        "examples/qwen3_0.6b_dynamo.yaml",
        "--infra",
        "examples/qwen3_0.6b_dynamo.kind.infra.yaml",
        "~infra.dynamo",
    ],
    "check-format": [
        "check",
        "--format",
        "json",
        "examples/qwen3_0.6b_dynamo.yaml",
        "--infra",
        "examples/qwen3_0.6b_dynamo.kind.infra.yaml",
    ],
    "validate": [
        "validate",
        "examples/qwen3_0.6b_dynamo.yaml",
        "--infra",
        "examples/qwen3_0.6b_dynamo.kind.infra.yaml",
    ],
    "run-dry-run": [
        "run",
        "--rayjob",
        "--dry-run",
        "examples/qwen3_0.6b_dynamo.yaml",
        "--infra",
        "examples/qwen3_0.6b_dynamo.kind.infra.yaml",
    ],
    "cluster-up-dry-run": [
        "cluster",
        "up",
        "--dry-run",
        "--target",
        "dynamo.serving",
        "examples/qwen3_0.6b_dynamo.yaml",
        "--infra",
        "examples/qwen3_0.6b_dynamo.kind.infra.yaml",
    ],
}

PROBE = """
import sys
sys.argv = ["nrl-k8s", *{argv!r}]
from nrl_k8s_cli.main import app
try:
    app()
except SystemExit as exc:
    code = exc.code
heavy = sorted({{m.split('.')[0] for m in sys.modules}} & {heavy!r})
print("HEAVY=" + ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("argv", OFFLINE.values(), ids=OFFLINE.keys())
def test_offline_commands_do_not_import_cluster_clients(argv):
    code = PROBE.format(argv=argv, heavy=set(HEAVY))
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env={"NRL_K8S_USER": "probe", "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
    assert result.returncode == 0, result.stderr
    assert "HEAVY=\n" in result.stderr, result.stderr


def _heavy_after(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"NRL_K8S_USER": "probe", "PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **env})


def test_live_modules_do_not_import_the_kubernetes_client_nor_httpx_command_line_tool():
    """httpx's own CLI pulls click and pygments (~0.1 s); ours uses httpx without it."""
    code = ("import sys, nrl_k8s.kube.client, nrl_k8s.ray.dashboard, nrl_k8s.flows.serving, nrl_k8s.relay.server\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'kubernetes', 'click', 'pygments'}))")
    result = _heavy_after(code, {})
    assert result.stdout.strip() == "[]", result.stderr


def test_httpx_command_line_tool_still_loads_when_called():
    code = ("import sys\nfrom nrl_k8s.kube._httpx import httpx\n"
            "try:\n    httpx.main(['--help'])\nexcept SystemExit as done:\n    print('exit', done.code)")
    result = _heavy_after(code, {})
    assert result.stdout.strip().endswith("exit 0") and "Usage: httpx" in result.stdout, result.stdout + result.stderr


def test_live_status_does_not_import_the_kubernetes_client(sandbox):
    """``nrl-k8s status`` talks to the sandbox's API server over HTTPS, without the official client."""
    argv = ["status", "examples/sandbox.yaml", "--infra", "examples/sandbox.infra.yaml", "-o", "json"]
    result = _heavy_after(PROBE.format(argv=argv, heavy={"kubernetes"}), {"KUBECONFIG": str(sandbox.kubeconfig)})
    assert result.returncode == 0, result.stderr
    assert "HEAVY=\n" in result.stderr, result.stderr
    assert json.loads(result.stdout)["roles"][0]["state"] == "not found"  # it asked the API server
    assert sandbox.api_url.startswith("https://")
