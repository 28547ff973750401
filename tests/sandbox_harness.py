"""The sandbox test harness: start/stop a real ``nrl-k8s sandbox`` through the installed CLI.

Fixtures built on it live in ``tests/conftest.py``; test modules may import from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))
#: Set in the environment of every sandbox the fixtures start: tests read it back from Ray
#: job drivers to prove that they inherit the environment of ``sandbox up``.
INHERITED_ENV = ("NRL_K8S_TEST_INHERITED", "from-sandbox-up")


def nrl_k8s(*args: str, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run the installed ``nrl-k8s`` CLI; fail the test with its output when ``check`` fails."""
    env = {**os.environ, INHERITED_ENV[0]: INHERITED_ENV[1]}
    result = subprocess.run([NRL_K8S, *args], capture_output=True, text=True, timeout=timeout, env=env)
    if check and result.returncode != 0:
        pytest.fail(f"nrl-k8s {' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@dataclass
class Sandbox:
    """A running sandbox started by ``nrl-k8s sandbox up``."""

    dir: Path
    kubeconfig: Path
    info: dict = field(repr=False)

    @property
    def api_url(self) -> str:
        """The kubeconfig's server (https, self-signed CA in the kubeconfig)."""
        return self.info["api_url"]

    @property
    def dashboard_url(self) -> str:
        """The real Ray dashboard every simulated RayCluster shares."""
        return self.info["dashboard_url"]

    def api_client(self):
        """A fresh official-client ApiClient built from the sandbox's kubeconfig."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def set_fault(self, name: str, value: str | None = None) -> dict[str, str]:
        from nrl_k8s.sandbox import process

        return process.set_fault(self.dir, f"{name}={value}" if value is not None else name)

    def clear_fault(self, name: str) -> dict[str, str]:
        from nrl_k8s.sandbox import process

        return process.clear_fault(self.dir, name)

    @contextlib.contextmanager
    def fault(self, name: str, value: str | None = None) -> Iterator[None]:
        """Turn a fault on for the duration of a ``with`` block."""
        self.set_fault(name, value)
        try:
            yield
        finally:
            self.clear_fault(name)

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        result = subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=timeout)
        if check and result.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
        return result


def start_sandbox(directory: Path, *faults: str, state: Path | None = None) -> Sandbox:
    args = ["sandbox", "up", "--dir", str(directory)]
    for fault in faults:
        args += ["--fault", fault]
    if state is not None:
        args += ["--state", str(state)]
    result = nrl_k8s(*args)
    assert result.stdout.strip() == f"export KUBECONFIG={directory / 'kubeconfig'}", result.stdout
    info = json.loads((directory / "sandbox.json").read_text())
    return Sandbox(directory, directory / "kubeconfig", info)


def stop_sandbox(box: Sandbox) -> subprocess.CompletedProcess:
    return nrl_k8s("sandbox", "down", "--dir", str(box.dir))


@contextlib.contextmanager
def separate_sandbox(directory: Path, *faults: str, state: Path | None = None) -> Iterator[Sandbox]:
    """Start a sandbox of its own in ``directory`` (with ``faults``, ``--state``) and always stop it."""
    box = start_sandbox(directory, *faults, state=state)
    try:
        yield box
    finally:
        stop_sandbox(box)
