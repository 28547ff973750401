"""The dashboard client's protocol tests run against a real Ray head of their own: ``ray start
--head`` (``nrl_k8s_sandbox.ray_head.RayHead``, as the control plane's kubelet starts one per
RayCluster head pod), with its dashboard and real Job REST API on 127.0.0.1 and free ports. No
Kubernetes: the head starts the first time a module's test asks for ``ray_dashboard_url``, and is
stopped when that module ends (an idle head still costs ~5 % of a CPU)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_harness import DEADLINE_S, when_this_process_ends

from nrl_k8s.errors import SandboxError
from nrl_k8s_sandbox.ray_head import RayHead, temp_dir_for

START_ATTEMPTS = 3  # Ray aborts a head whose agents are slow to come up (a loaded machine): start it again
#: Stops the head's process group (argv: its id, the head's temp dir) should this test process die
#: first: only while that group's leader is still this head (a group id can be reused).
STOP_GROUP = """import os, signal, sys
try:
    if sys.argv[2].encode() in open(f"/proc/{sys.argv[1]}/cmdline", "rb").read():
        os.killpg(int(sys.argv[1]), signal.SIGTERM)
except OSError:
    pass
"""


def _environment() -> dict[str, str]:
    """This session's environment, with this interpreter's bin dir first on PATH: ``python3`` in a
    job's entrypoint is the one that has Ray."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}


@pytest.fixture(scope="module")
def ray_dashboard_url(tmp_path_factory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("ray-head")
    ray_dir = temp_dir_for(directory)
    temp = ray_dir.parent / "tmp"  # its processes' temp files go with it (the dashboard's pymp-*)
    temp.mkdir(mode=0o700, parents=True)
    head = RayHead(temp_dir=ray_dir, log_path=directory / "ray.log", env={**_environment(), "TMPDIR": str(temp)})
    try:
        for attempt in range(1, START_ATTEMPTS + 1):
            when_this_process_ends([sys.executable, "-c", STOP_GROUP, str(head.start()), str(head.temp_dir)])
            try:
                head.wait_ready(DEADLINE_S)
                break
            except SandboxError:
                if head.process.poll() is None or attempt == START_ATTEMPTS:
                    raise
                head.stop()
        yield head.dashboard_url
    finally:
        head.stop()
        shutil.rmtree(head.temp_dir.parent, ignore_errors=True)
