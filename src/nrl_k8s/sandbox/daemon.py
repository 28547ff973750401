"""The long-running sandbox process: API server + CRDs + operators + the real Ray head.

Start-up order favours speed: the Ray head (the slow part) is launched first, the API server,
CRDs and kubeconfig are set up while it boots, then the operators start once its node is up
(a head whose start-up Ray aborts is started again). ``ready`` is written to the inherited pipe only when everything answers. SIGTERM or
SIGINT stops the operators, the stubs, the Ray head (its whole process group) and the API server
(saving ``--state`` if given), in that order. It runs with umask 077, so every file it, the Ray
head, Ray's workers and the job drivers create is private to the user.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import sys
import threading
import time
from pathlib import Path

from nrl_k8s.errors import SandboxError

from . import crds
from .apiserver import ApiServer
from .driver_env import DriverEnv
from .faults import Faults
from .operators.base import Controller, Timing, api_client
from .operators.deployments import Deployments
from .operators.dra import ComputeDomains
from .operators.dynamo import Dynamo
from .operators.kuberay import KubeRay
from .pids import MARKER, write_pid
from .pod_logs import PodLogs
from .process import Paths, write_kubeconfig, write_runtime
from .ray_head import RayHead, temp_dir_for

log = logging.getLogger("nrl_k8s.sandbox.daemon")
RAY_READY_S = 90.0
RAY_START_ATTEMPTS = 3


def ray_environment(sandbox_dir: Path) -> dict[str, str]:
    """The environment of ``sandbox up`` (this process inherited it), plus: no usage stats,
    the sandbox marker, and this interpreter's bin dir first on PATH so that ``python`` in
    a job entrypoint is the one that has Ray."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    path = env.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        env["PATH"] = os.pathsep.join([bin_dir, path]) if path else bin_dir
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env[MARKER] = str(sandbox_dir)
    return env


def serve(sandbox_dir: Path, ready_fd: int | None, faults: dict[str, str], speed: float, state_file: Path | None) -> int:
    os.umask(0o077)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    paths = Paths.of(sandbox_dir)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    started = time.monotonic()

    registry = Faults()
    for name, value in faults.items():
        registry.set(name, value)
    head = RayHead(temp_dir=temp_dir_for(paths.dir), log_path=paths.ray_log, env=ray_environment(paths.dir))
    user_token, operator_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    drivers = DriverEnv(paths.dir / "volumes")
    pod_logs = PodLogs(ray_log=paths.ray_log, driver_logs=head.temp_dir / "session_latest" / "logs")
    server = ApiServer(user_token=user_token, operator_token=operator_token, faults=registry, state_file=state_file,
                       drivers=drivers, pod_logs=pod_logs)
    operators: list[Controller] = []
    serving = False
    try:
        write_pid(paths.ray_pid, head.start())
        port = server.start()
        serving = True
        http_url, api_url = f"http://127.0.0.1:{port}", f"https://127.0.0.1:{port}"
        installed = [c for c in crds.ALL_CRDS if not (c is crds.DGD_CRD and registry.get("no-dgd-crd") is not None)]
        if registry.get("old-rayjob-crd") is not None:
            installed = [crds.RAYJOB_CRD_1_5 if c is crds.RAYJOB_CRD else c for c in installed]
        for crd in installed:
            server.install_crd(crd)
        write_kubeconfig(paths.kubeconfig, api_url, user_token, server.ca_pem)
        log.info("API server at %s (also plain HTTP); waiting for the Ray head", api_url)
        version = _wait_ray(head, paths)
        log.info("Ray %s dashboard at %s", version.get("ray_version"), head.dashboard_url)
        timing = Timing(registry, speed)
        operators.append(KubeRay(api_client(http_url, operator_token), timing, registry, head.dashboard_url, drivers,
                                 pre_running_deadline=registry.get("old-rayjob-crd") is None))
        if crds.DGD_CRD in installed:
            operators.append(Dynamo(api_client(http_url, operator_token), timing, registry, pod_logs))
        operators.append(Deployments(api_client(http_url, operator_token), timing, registry, pod_logs))
        operators.append(ComputeDomains(api_client(http_url, operator_token), timing, registry))
        for operator in operators:
            operator.start()
        write_runtime(paths, {
            "api_url": api_url,
            "api_http_url": http_url,
            "dashboard_url": head.dashboard_url,
            "ray_address": head.gcs_address,
            "ray_temp_dir": str(head.temp_dir),
            "daemon_pid": os.getpid(),
            "ray_pid": head.process.pid,
            "operator_token": operator_token,
            "kubeconfig": str(paths.kubeconfig),
            "speed": speed,
            "state_file": str(state_file) if state_file else None,
        })  # fmt: skip
        log.info("ready in %.1fs", time.monotonic() - started)
        if ready_fd is not None:
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)
        threading.Thread(target=_report_ray_exit, args=(head, stop), name="ray-head-monitor", daemon=True).start()
        stop.wait()
        log.info("stopping")
        return 0
    finally:
        for operator in operators:
            operator.stop()
        stopped = head.stop()
        log.info("stopped the Ray head (%d processes)", len(stopped))
        if serving:  # stop() saves --state: never over a file that failed to load
            server.stop()


def _wait_ray(head: RayHead, paths: Paths) -> dict:
    """Wait for the Ray head, starting it again when it exits during start-up: its raylet aborts
    when its agents take more than 15 s to come up (a loaded machine; Ray has no setting for it)."""
    attempt = 1
    while True:
        try:
            return head.wait_ready(RAY_READY_S)
        except SandboxError as err:
            if head.process.poll() is None or attempt == RAY_START_ATTEMPTS:
                raise
            log.warning("the Ray head exited during start-up (attempt %d of %d), starting it again: %s",
                        attempt, RAY_START_ATTEMPTS, err.message)
            head.stop()
            write_pid(paths.ray_pid, head.start())
            attempt += 1


def _report_ray_exit(head: RayHead, stopping: threading.Event) -> None:
    code = head.process.wait()
    if not stopping.is_set():
        log.error("the Ray head exited with code %s; RayJobs cannot run until the sandbox is restarted", code)
