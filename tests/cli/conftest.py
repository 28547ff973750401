from __future__ import annotations

import pytest
from typer.testing import CliRunner

from nrl_k8s_cli.main import app


@pytest.fixture(autouse=True)
def offline_env(monkeypatch, tmp_path):
    """No kubeconfig, no user defaults, a fixed user name."""
    monkeypatch.setenv("NRL_K8S_USER", "tester")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("NRL_K8S_DEFAULTS", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, list(args), catch_exceptions=False)

    return invoke
