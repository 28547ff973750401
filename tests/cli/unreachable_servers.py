"""API servers that fail the four ways a live command must survive in seconds, the commands, and
the contract they keep: exit 1, one error line naming the server and the failure, then a hint,
no traceback (``broken``).

``FAILURES[kind][0](directory)`` is a context manager giving a kubeconfig (in ``directory``), the
server's URL and the request lines it received: the server refuses the connection, accepts it and
never answers, never finishes the TLS handshake, or the exec credential plugin never returns.
``COMMANDS`` is every command that talks to the API server. Shared by
tests/cli/test_unreachable.py and bench/unreachable.py.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXE = shutil.which("nrl-k8s", path=str(Path(sys.executable).parent)) or "nrl-k8s"
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
RAYCLUSTER = ["--raycluster", "--no-wait", "--code-source", "image", "--skip-daemons", "--repo-root", str(ROOT)]
COMMANDS = {
    "check": ["check", *PAIR],
    "status": ["status", *PAIR],
    "cluster list": ["cluster", "list"],
    "cluster up": ["cluster", "up", *PAIR, "--no-wait"],
    "cluster down": ["cluster", "down", *PAIR],
    "cluster dashboard": ["cluster", "dashboard", "some-cluster", "--port", "0"],
    "gc": ["gc", *PAIR, "--dry-run"],
    "job list": ["job", "list", *PAIR],
    "job logs": ["job", "logs", *PAIR],
    "job stop": ["job", "stop", *PAIR, "--job", "j"],
    "logs": ["logs", *PAIR],
    "logs --source head": ["logs", *PAIR, "--source", "head"],
    "dashboard": ["dashboard", *PAIR, "--port", "0"],
    "dev setup-secrets": ["dev", "setup-secrets", "--from-env", "HOME"],
    "dev connect": ["dev", "connect", "--", "true"],
    "dev stop": ["dev", "stop"],
    "run --rayjob": ["run", "--rayjob", "--no-wait", *PAIR],
    "run --rayjob --parallel": ["run", "--rayjob", "--parallel", "--no-wait", *PAIR],
    "run --raycluster": ["run", *RAYCLUSTER, *PAIR],
}


def environment(home: Path, config: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "NRL_K8S_USER": "tester", "KUBECONFIG": str(config)}


def run(argv: list[str], config: Path, cwd: Path) -> subprocess.CompletedProcess:
    """The installed CLI with kubeconfig ``config`` and HOME ``cwd``."""
    return subprocess.run([EXE, *argv], capture_output=True, text=True, env=environment(cwd, config), timeout=300,
                          cwd=cwd)


def kubeconfig(directory: Path, server: str = "https://127.0.0.1:1", user: dict | None = None) -> Path:
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user or {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "team"}}]}))
    return path


Failure = Iterator[tuple[Path, str, list[bytes]]]


@contextlib.contextmanager
def _mute(scheme: str) -> Iterator[tuple[str, list[bytes]]]:
    """A port that accepts every connection and never sends a byte: ``scheme``://127.0.0.1:PORT, and
    (http) the request line each connection sent."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    held: list[socket.socket] = []
    received: list[bytes] = []

    def read(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            received.append(conn.recv(4096).split(b"\r\n")[0])

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(conn := listener.accept()[0])
                if scheme == "http":
                    threading.Thread(target=read, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"{scheme}://127.0.0.1:{listener.getsockname()[1]}", received
    finally:
        listener.close()
        for conn in held:
            conn.close()


@contextlib.contextmanager
def refused(directory: Path) -> Failure:
    with socket.socket() as held:  # bound and never listening: connecting is refused, and while
        held.bind(("127.0.0.1", 0))  # it is held no other process (another test's server) takes the port
        server = f"https://127.0.0.1:{held.getsockname()[1]}"
        yield kubeconfig(directory, server), server, []


@contextlib.contextmanager
def silent(directory: Path) -> Failure:
    with _mute("http") as (server, received):
        yield kubeconfig(directory, server), server, received


@contextlib.contextmanager
def handshake(directory: Path) -> Failure:
    with _mute("https") as (server, received):
        yield kubeconfig(directory, server), server, received


@contextlib.contextmanager
def plugin(directory: Path) -> Failure:
    hung = {"apiVersion": "client.authentication.k8s.io/v1", "command": "sleep", "args": ["600"],
            "interactiveMode": "Never"}
    with refused(directory) as (_, server, received):
        yield kubeconfig(directory, server, {"exec": hung}), server, received


#: kind -> (its context manager, what its one error line says after the server)
FAILURES = {
    "refused": (refused, "connection refused"),
    "silent": (silent, "no answer within "),
    "handshake": (handshake, "the TLS handshake did not finish within "),
    "plugin": (plugin, "its exec credential plugin `sleep 600` did not answer within "),
}


def broken(done: subprocess.CompletedProcess, server: str, what: str) -> str | None:
    """How ``done`` breaks the contract, or None: exit 1, no traceback, one ``error:`` line saying
    ``cannot reach the API server at SERVER: WHAT...`` then a ``hint:`` line (`check` prints them as
    the one FAIL row of its CLUSTER section)."""
    if done.returncode != 1:
        return f"exit {done.returncode}"
    if "Traceback" in done.stdout + done.stderr:
        return "a traceback"
    found = [(lines, i) for lines in (done.stderr.splitlines(), done.stdout.splitlines())
             for i, line in enumerate(lines) if line.lstrip().startswith(("error: ", "FAIL "))]
    if len(found) != 1:
        return f"{len(found)} error lines"
    lines, i = found[0]
    if f"cannot reach the API server at {server}: {what}" not in lines[i]:
        return f"the error line is {lines[i]!r}"
    return None if lines[i + 1:i + 2] and lines[i + 1].lstrip().startswith("hint: ") else "no hint after the error"
