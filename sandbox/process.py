"""``sandbox up/down/status/fault``: the sandbox's lifecycle seen from the command line.

``up`` starts the daemon (``python -m nrl_k8s_sandbox serve``, ``controlplane/serve.py``)
detached in its own session, logging to ``DIR/daemon.log``, and blocks on a pipe the daemon
inherits: the daemon writes ``ready`` once the API server, the CRDs and the operators all answer;
EOF means it died during start-up. Files in DIR (created mode 0700): ``kubeconfig``,
``daemon.log`` and ``logs/`` (kept), ``daemon.pid`` and ``sandbox.json`` (removed by ``down``),
all mode 0600 like every file the sandbox writes. Every process the sandbox starts carries its
marker in its environment (``pids.MARKER``), so ``down`` finds them all, even after a crash.
Stdlib only: the CLI imports this module for every command.
"""

from __future__ import annotations

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

from nrl_k8s.errors import ConfigError, SandboxError

from . import faults as fault_rules
from .controlplane import binaries
from .pids import MARKER, log_tail, marked, open_private, read_pid, terminate, write_pid
from .ray_head import temp_dir_for

CONTEXT = "nrl-k8s-sandbox"
START_TIMEOUT_S = 720.0  # the daemon's own start deadline (controlplane.serve.START_S), and some
DAEMON_STOP_S = 30.0
#: How long the daemon's admin API may take to answer: a fault change is answered once it is in
#: place (the user's RBAC, waiting up to 60 s for the reviews to agree, and kwok's Stages, through
#: an API server a loaded machine makes slow: 10 s was too short at half the CPU).
ADMIN_TIMEOUT_S = 180.0
PROCESS_STOP_S = 5.0


def default_dir() -> Path:
    return Path.home() / ".cache" / "nrl-k8s" / "sandbox"


@dataclass(frozen=True)
class Paths:
    """Where one sandbox keeps its files."""

    dir: Path

    @classmethod
    def of(cls, sandbox_dir: Path | str | None) -> Paths:
        return cls(Path(sandbox_dir or default_dir()).expanduser().resolve())

    kubeconfig = property(lambda self: self.dir / "kubeconfig")
    daemon_pid = property(lambda self: self.dir / "daemon.pid")
    runtime = property(lambda self: self.dir / "sandbox.json")
    daemon_log = property(lambda self: self.dir / "daemon.log")

    def owned_files(self) -> tuple[Path, ...]:
        """The files ``down`` removes (everything else in DIR is kept)."""
        return (self.daemon_pid, self.runtime)


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


def _running_daemon(paths: Paths) -> int | None:
    return read_pid(paths.daemon_pid)


def _leftovers(paths: Paths) -> list[int]:
    return sorted(marked(paths.dir))


# -- up ------------------------------------------------------------------------------------
def up(
    sandbox_dir: Path | str | None = None,
    faults: list[str] | tuple[str, ...] = (),
    timeout: float = START_TIMEOUT_S,
) -> dict:
    """Start the sandbox in the background and return its runtime info once it is ready."""
    paths = Paths.of(sandbox_dir)
    chosen = parse_faults(faults)
    binaries.find(kueue="kueue" in chosen)  # built, or one line saying how
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
    command = [sys.executable, "-m", "nrl_k8s_sandbox", "serve", "--dir", str(paths.dir), "--ready-fd", str(write_end)]
    for name, value in chosen.items():
        command += ["--fault", f"{name}={value}" if value else name]
    env = {**os.environ, MARKER: str(paths.dir)}
    try:
        with open_private(paths.daemon_log, "ab") as log:
            log.write(f"\n=== sandbox up {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            log.flush()
            daemon = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(write_end,), start_new_session=True, env=env,
                # every file it and its children (Ray heads: unpacked packages, the recipe) write is private
                umask=0o077,
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
            raise SandboxError(
                f"the sandbox was not ready within {timeout:.0f}s; stopped it", hint=log_tail(paths.daemon_log)
            )
        chunk = os.read(fd, 256)
        if not chunk:
            try:
                code = daemon.wait(timeout=DAEMON_STOP_S)
            except subprocess.TimeoutExpired:
                code = None
            _cleanup(paths)
            raise SandboxError(
                f"the sandbox daemon exited during start-up (code {code})", hint=log_tail(paths.daemon_log)
            )
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
    rest = marked(paths.dir)
    if rest:
        terminate(rest, PROCESS_STOP_S)
        lines.append(f"{len(rest)} other processes started by the sandbox (control plane, Ray heads, drivers): {rest}")
    for path in paths.owned_files():
        path.unlink(missing_ok=True)
    # Ray's logs and the drivers' Secret volumes hold secret values: nothing of them outlives the sandbox.
    for tree in (temp_dir_for(paths.dir).parent, paths.dir / "volumes"):
        shutil.rmtree(tree, ignore_errors=True)
    return lines


# -- status and faults ---------------------------------------------------------------------
def _admin(paths: Paths, method: str, path: str, body: dict | None = None) -> object:
    if _running_daemon(paths) is None or not paths.runtime.exists():
        raise SandboxError(
            f"no sandbox is running in {paths.dir}", hint=f"start one: nrl-k8s sandbox up --dir {paths.dir}"
        )
    info = json.loads(paths.runtime.read_text())
    base = info["admin_url"]
    context = ssl.create_default_context(cafile=info["ca_file"])
    request = urllib.request.Request(
        base + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {info['operator_token']}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=ADMIN_TIMEOUT_S, context=context) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise SandboxError(f"the sandbox API answered {method} {path} with {err.code}: {err.read()[:300]!r}") from None
    except urllib.error.URLError as err:
        raise SandboxError(f"the sandbox API at {base} did not answer: {err.reason}") from None
    except TimeoutError:
        raise SandboxError(f"the sandbox API at {base} did not answer {method} {path} within {ADMIN_TIMEOUT_S:g}s",
                           hint=f"see {paths.dir / 'logs'}") from None


def status(sandbox_dir: Path | str | None = None) -> dict:
    """Running or not, URLs, pids, active faults, the node pools and object counts."""
    paths = Paths.of(sandbox_dir)
    daemon = _running_daemon(paths)
    report: dict = {"dir": str(paths.dir), "running": daemon is not None, "kubeconfig": str(paths.kubeconfig)}
    if daemon is None or not paths.runtime.exists():
        leftovers = _leftovers(paths)
        if leftovers:
            report["leftover_pids"] = leftovers
        return report
    info = json.loads(paths.runtime.read_text())
    report.update(api_url=info["api_url"], versions=info["versions"],
                  pids={"daemon": daemon, **info["pids"]}, faults=_admin(paths, "GET", "/sandbox/faults"),
                  pools=info.get("pools", []), objects=_admin(paths, "GET", "/sandbox/objects"))
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
