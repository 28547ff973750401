"""A real local Ray head (dashboard on 127.0.0.1) for the dashboard client's protocol tests.

It is the sandbox's own ``RayHead`` (``ray start --head --block`` in its own process group,
every port chosen free, a short temp dir), started alone; teardown stops that group only
(other heads on the machine live on). Tests using it are skipped, with the head's log tail as
the reason, only when Ray cannot start.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from sandbox_harness import DEADLINE_S

from nrl_k8s.errors import SandboxError
from nrl_k8s.sandbox.ray_head import RayHead


@pytest.fixture(scope="module")
def ray_dashboard_url():
    """The base URL of a fresh Ray head's dashboard, torn down after the module."""
    temp_dir = Path(tempfile.mkdtemp(prefix="nrldash-", dir="/tmp"))
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    head = RayHead(temp_dir=temp_dir / "ray", log_path=temp_dir / "head.log", env=env, num_cpus=2)
    try:
        head.start()
        try:
            head.wait_ready(DEADLINE_S)
        except SandboxError as err:
            pytest.skip(f"a local Ray head could not start: {err.message}\n{err.hint}")
        yield head.dashboard_url
    finally:
        head.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)
