"""A real local Ray head (dashboard on 127.0.0.1) for the dashboard client's protocol tests.

The head runs as ``ray start --head --block`` in its own process group, with every port chosen
free and a short temp dir; teardown kills that group only (other heads on the machine live on).
Tests using it are skipped, with the head's log tail as the reason, only when Ray cannot start.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

START_DEADLINE_S = 120
STOP_DEADLINE_S = 30


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _ray() -> str:
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.exists() else "ray"


def _wait_for_dashboard(url: str, process: subprocess.Popen) -> str | None:
    """None once ``GET /api/version`` answers; otherwise why it never did."""
    deadline = time.monotonic() + START_DEADLINE_S
    with httpx.Client(timeout=2) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return f"`ray start` exited with code {process.returncode}"
            try:
                if client.get(f"{url}/api/version").status_code == 200:
                    return None
            except httpx.TransportError:
                pass
            time.sleep(0.2)  # poll interval of a deadline-bounded readiness probe
    return f"the dashboard did not answer within {START_DEADLINE_S}s"


def _kill_group(process: subprocess.Popen) -> None:
    """SIGTERM the head's process group, then SIGKILL whatever is left of it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def ray_dashboard_url():
    """The base URL of a fresh Ray head's dashboard, torn down after the module."""
    temp_dir = Path(tempfile.mkdtemp(prefix="nrldash-", dir="/tmp"))
    gcs, dashboard, client, agent, agent_grpc, metrics, runtime_env = _free_ports(7)
    command = [
        _ray(), "start", "--head", "--block",
        "--node-ip-address=127.0.0.1", f"--port={gcs}",
        "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
        f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent}",
        f"--dashboard-agent-grpc-port={agent_grpc}", f"--metrics-export-port={metrics}",
        f"--runtime-env-agent-port={runtime_env}",
        "--num-cpus=2", "--num-gpus=0", f"--temp-dir={temp_dir / 'ray'}", "--disable-usage-stats",
    ]  # fmt: skip
    log_path = temp_dir / "head.log"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   start_new_session=True)
    url = f"http://127.0.0.1:{dashboard}"
    try:
        failure = _wait_for_dashboard(url, process)
        if failure:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
            pytest.skip(f"a local Ray head could not start: {failure}\n{tail}")
        yield url
    finally:
        _kill_group(process)
        shutil.rmtree(temp_dir, ignore_errors=True)
