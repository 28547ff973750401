"""``sandbox up/down/status/fault``: the sandbox's lifecycle seen from the command line.

``up`` starts the daemon (``python -m nrl_k8s.sandbox serve``) detached in its own session,
logging to ``DIR/daemon.log``, and blocks on a pipe the daemon inherits: the daemon writes
``ready`` once the API server, the CRDs, the operators and the Ray head all answer; EOF means
it died during start-up. Files in DIR (created mode 0700): ``kubeconfig``, ``daemon.log``,
``ray-head.log`` (kept), ``daemon.pid``, ``ray-head.pid``, ``sandbox.json`` (removed by ``down``),
all mode 0600 like every file the sandbox writes. Stdlib only: the CLI imports this module for
every command.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from nrl_k8s.errors import ConfigError, SandboxError

from . import faults as fault_rules
from .controlplane import binaries
from .ray_head import temp_dir_for
from .pids import MARKER, group_members, marked, open_private, read_pid, recorded, start_time, terminate, write_pid

CONTEXT = "nrl-k8s-sandbox"
START_TIMEOUT_S = 300.0  # a loaded machine may need several Ray head starts (daemon._wait_ray)
DAEMON_STOP_S = 30.0
PROCESS_STOP_S = 5.0
COUNTED = {
    "pods": "/api/v1/pods",
    "services": "/api/v1/services",
    "rayclusters": "/apis/ray.io/v1/rayclusters",
    "rayjobs": "/apis/ray.io/v1/rayjobs",
    "dynamographdeployments": "/apis/nvidia.com/v1alpha1/dynamographdeployments",
}


def default_dir() -> Path:
    return Path.home() / ".cache" / "nrl-k8s" / "sandbox"


@dataclass(frozen=True)
class Paths:
    """Where one sandbox keeps its files."""

    dir: Path

    @classmethod
    def of(cls, sandbox_dir: Path | str | None) -> "Paths":
        return cls(Path(sandbox_dir or default_dir()).expanduser().resolve())

    kubeconfig = property(lambda self: self.dir / "kubeconfig")
    daemon_pid = property(lambda self: self.dir / "daemon.pid")
    ray_pid = property(lambda self: self.dir / "ray-head.pid")
    runtime = property(lambda self: self.dir / "sandbox.json")
    daemon_log = property(lambda self: self.dir / "daemon.log")
    ray_log = property(lambda self: self.dir / "ray-head.log")

    def owned_files(self) -> tuple[Path, ...]:
        """The files ``down`` removes (everything else in DIR is kept)."""
        return (self.daemon_pid, self.ray_pid, self.runtime)


def write_kubeconfig(path: Path, server: str, token: str, ca_pem: bytes | None = None, namespace: str = "default") -> None:
    """A kubeconfig with one context ``nrl-k8s-sandbox``: bearer token, and the CA for https."""
    cluster: dict = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}}],
        "current-context": CONTEXT,
        "preferences": {},
    }
    with open_private(path) as handle:
        handle.write(yaml.safe_dump(config, sort_keys=False))


def write_runtime(paths: Paths, info: dict) -> None:
    with open_private(paths.runtime) as handle:
        handle.write(json.dumps(info, indent=2))


def parse_faults(specs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``NAME[=VALUE]`` strings → {name: value}; ConfigError (exit 2) naming the valid faults."""
    parsed = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        try:
            parsed[name] = fault_rules.validate(name, value or None)
        except ValueError as err:
            raise ConfigError(str(err), hint=f"valid faults: {', '.join(fault_rules.Faults.KNOWN)}") from None
    return parsed


def _check_state_file(path: Path) -> None:
    """An existing ``--state`` file must be one the sandbox wrote (a JSON object)."""
    if not path.exists():
        return
    try:
        valid = isinstance(json.loads(path.read_text()), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        valid = False
    if not valid:
        raise ConfigError(f"--state {path} is not a sandbox state file", hint="pass a new path, or the file an earlier sandbox wrote")


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"(no log at {path})"
    return f"last lines of {path}:\n" + "\n".join(text.splitlines()[-lines:])


def _running_daemon(paths: Paths) -> int | None:
    return read_pid(paths.daemon_pid)


def _ray_group(paths: Paths) -> list[int]:
    """Live members of the recorded Ray head's process group (none if the group id was recycled)."""
    ray = recorded(paths.ray_pid)
    if ray is None:
        return []
    pgid, started = ray
    return group_members(pgid, started_after=started) if start_time(pgid) in (None, started) else []


def _leftovers(paths: Paths) -> list[int]:
    return sorted(set(marked(paths.dir)) | set(_ray_group(paths)))


# -- up ------------------------------------------------------------------------------------
def up(
    sandbox_dir: Path | str | None = None,
    faults: list[str] | tuple[str, ...] = (),
    speed: float = 1.0,
    state: Path | str | None = None,
    timeout: float = START_TIMEOUT_S,
    control_plane: str = "real",
) -> dict:
    """Start the sandbox in the background and return its runtime info once it is ready."""
    paths = Paths.of(sandbox_dir)
    chosen = parse_faults(faults)
    if control_plane == "real":
        if state is not None or speed != 1.0:
            raise ConfigError("--state and --speed are the simulator's: the real control plane keeps its objects "
                              "in etcd under --dir, and its delays are --delay",
                              hint="add --control-plane simulated, or drop them")
        binaries.find()  # built, or one line saying how
    if speed <= 0:
        raise ConfigError(f"--speed must be > 0, got {speed}")
    if state is not None:
        state = Path(state).expanduser().resolve()
        _check_state_file(state)
    paths.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    running = _running_daemon(paths)
    if running is not None:
        raise SandboxError(
            f"a sandbox is already running in {paths.dir} (daemon pid {running})",
            hint=f"use it (export KUBECONFIG={paths.kubeconfig}) or stop it: nrl-k8s sandbox down --dir {paths.dir}",
        )
    leftovers = _leftovers(paths)
    if leftovers:
        raise SandboxError(
            f"processes of an earlier sandbox in {paths.dir} are still running (pids {leftovers})",
            hint=f"clean up first: nrl-k8s sandbox down --dir {paths.dir}",
        )
    read_end, write_end = os.pipe()
    command = [sys.executable, "-m", "nrl_k8s.sandbox", "serve", "--dir", str(paths.dir),
               "--ready-fd", str(write_end), "--speed", str(speed), "--control-plane", control_plane]  # fmt: skip
    for name, value in chosen.items():
        command += ["--fault", f"{name}={value}" if value else name]
    if state is not None:
        command += ["--state", str(state)]
    env = {**os.environ, MARKER: str(paths.dir)}
    try:
        with open_private(paths.daemon_log, "ab") as log:
            log.write(f"\n=== sandbox up {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            log.flush()
            daemon = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(write_end,), start_new_session=True, env=env,
            )  # fmt: skip
    finally:
        os.close(write_end)
    write_pid(paths.daemon_pid, daemon.pid)
    try:
        _wait_ready(read_end, daemon, paths, timeout)
    finally:
        os.close(read_end)
    return json.loads(paths.runtime.read_text())


def _wait_ready(fd: int, daemon: subprocess.Popen, paths: Paths, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    received = b""
    while b"ready" not in received:
        remaining = deadline - time.monotonic()
        readable = select.select([fd], [], [], max(remaining, 0))[0] if remaining > 0 else []
        if not readable:
            _cleanup(paths)
            raise SandboxError(f"the sandbox was not ready within {timeout:.0f}s; stopped it", hint=_log_tail(paths.daemon_log))
        chunk = os.read(fd, 256)
        if not chunk:
            try:
                code = daemon.wait(timeout=DAEMON_STOP_S)
            except subprocess.TimeoutExpired:
                code = None
            _cleanup(paths)
            raise SandboxError(f"the sandbox daemon exited during start-up (code {code})", hint=_log_tail(paths.daemon_log))
        received += chunk


# -- down ----------------------------------------------------------------------------------
@dataclass
class Stopped:
    """What ``down`` stopped, as human-readable lines."""

    dir: Path
    lines: list[str] = field(default_factory=list)


def down(sandbox_dir: Path | str | None = None) -> Stopped:
    """Stop every process this sandbox started (even after a crash); remove its pid/ready files."""
    paths = Paths.of(sandbox_dir)
    return Stopped(paths.dir, _cleanup(paths))


def _cleanup(paths: Paths) -> list[str]:
    lines = []
    daemon = _running_daemon(paths)
    if daemon is not None:
        terminate([daemon], DAEMON_STOP_S)
        lines.append(f"sandbox daemon (pid {daemon})")
    group = _ray_group(paths)
    if group:
        terminate(group, PROCESS_STOP_S)
        lines.append(f"Ray head process group {recorded(paths.ray_pid)[0]} ({len(group)} processes)")
    rest = marked(paths.dir)
    if rest:
        terminate(rest, PROCESS_STOP_S)
        lines.append(f"{len(rest)} other processes started by the sandbox (Ray workers, job drivers): {rest}")
    for path in paths.owned_files():
        path.unlink(missing_ok=True)
    # Ray's logs and the drivers' Secret volumes hold secret values: nothing of them outlives the sandbox.
    for tree in (temp_dir_for(paths.dir).parent, paths.dir / "volumes"):
        shutil.rmtree(tree, ignore_errors=True)
    return lines


# -- status and faults ---------------------------------------------------------------------
def _admin(paths: Paths, method: str, path: str, body: dict | None = None) -> object:
    if _running_daemon(paths) is None or not paths.runtime.exists():
        raise SandboxError(f"no sandbox is running in {paths.dir}", hint=f"start one: nrl-k8s sandbox up --dir {paths.dir}")
    info = json.loads(paths.runtime.read_text())
    base = info.get("admin_url") or info["api_http_url"]
    context = ssl.create_default_context(cafile=info["ca_file"]) if "ca_file" in info else None
    request = urllib.request.Request(
        base + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {info['operator_token']}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise SandboxError(f"the sandbox API answered {method} {path} with {err.code}: {err.read()[:300]!r}") from None
    except urllib.error.URLError as err:
        raise SandboxError(f"the sandbox API at {base} did not answer: {err.reason}") from None


def status(sandbox_dir: Path | str | None = None) -> dict:
    """Running or not, URLs, pids, active faults and object counts."""
    paths = Paths.of(sandbox_dir)
    daemon = _running_daemon(paths)
    report: dict = {"dir": str(paths.dir), "running": daemon is not None, "kubeconfig": str(paths.kubeconfig)}
    if daemon is None or not paths.runtime.exists():
        leftovers = _leftovers(paths)
        if leftovers:
            report["leftover_pids"] = leftovers
        return report
    info = json.loads(paths.runtime.read_text())
    if info.get("control_plane") == "real":
        report.update(api_url=info["api_url"], control_plane="real", versions=info["versions"],
                      pids={"daemon": daemon, **info["pids"]}, faults=_admin(paths, "GET", "/sandbox/faults"))
        return report
    ray_pid = read_pid(paths.ray_pid)
    report.update(
        api_url=info["api_url"],
        dashboard_url=info["dashboard_url"],
        pids={"daemon": daemon, "ray_head": info["ray_pid"]},
        ray_head_running=ray_pid is not None,
        speed=info["speed"],
        faults=_admin(paths, "GET", "/sandbox/faults"),
        objects={},
    )
    for name, path in COUNTED.items():
        listing = _admin(paths, "GET", path)
        if listing is not None:
            report["objects"][name] = len(listing["items"])
    return report


def set_fault(sandbox_dir: Path | str | None, spec: str) -> dict[str, str]:
    """Turn on ``NAME[=VALUE]`` in the running sandbox; return the active faults."""
    chosen = parse_faults([spec])
    return _admin(Paths.of(sandbox_dir), "PUT", "/sandbox/faults", {"set": chosen})


def clear_fault(sandbox_dir: Path | str | None, name: str) -> dict[str, str]:
    """Turn off fault ``name`` in the running sandbox; return the active faults."""
    if name not in fault_rules.Faults.KNOWN:
        raise ConfigError(f"unknown fault {name!r}", hint=f"valid faults: {', '.join(fault_rules.Faults.KNOWN)}")
    return _admin(Paths.of(sandbox_dir), "PUT", "/sandbox/faults", {"clear": [name]})
