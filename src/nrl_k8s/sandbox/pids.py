"""Process bookkeeping for the sandbox: pid files, liveness, process groups, waiting for exit.

Every process the sandbox starts carries ``NRL_K8S_SANDBOX_DIR=<dir>`` in its environment,
and everything those processes spawn inherits it — including Ray job drivers, which Ray
starts in sessions of their own. ``marked(dir)`` finds them all through ``/proc`` (Linux),
so ``down`` can clean up even after the daemon was killed.
"""

from __future__ import annotations

import os
import select
import signal
import time
from pathlib import Path

MARKER = "NRL_K8S_SANDBOX_DIR"


def read_pid(path: Path) -> int | None:
    """The pid stored in ``path``, or None when the file is missing or garbled."""
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def write_pid(path: Path, pid: int) -> None:
    path.write_text(f"{pid}\n")


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rindex(")") + 2 :].split()


def alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def group_members(pgid: int) -> list[int]:
    """Live processes whose process group is ``pgid``."""
    members = []
    for pid in _all_pids():
        fields = _stat(pid)
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(pid)
    return members


def marked(sandbox_dir: Path) -> list[int]:
    """Live processes (other than this one) whose environment names ``sandbox_dir``."""
    needle = f"{MARKER}={sandbox_dir}".encode()
    found = []
    for pid in _all_pids():
        if pid == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if needle in environ.split(b"\0") and alive(pid):
            found.append(pid)
    return found


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait (pidfd events, no polling) until every pid has exited; return those still alive."""
    poller = select.poll()
    fds: dict[int, int] = {}
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        fds[fd] = pid
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout
    try:
        while fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for fd, _ in poller.poll(remaining * 1000):
                poller.unregister(fd)
                os.close(fd)
                del fds[fd]
    finally:
        for fd in fds:
            os.close(fd)
    return [pid for pid in pids if alive(pid)]


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def terminate(pids: list[int], grace: float) -> list[int]:
    """SIGTERM ``pids``, SIGKILL whatever outlives ``grace`` seconds; return the pids signalled."""
    pids = [pid for pid in pids if alive(pid)]
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    survivors = wait_gone(pids, grace)
    for pid in survivors:
        _signal(pid, signal.SIGKILL)
    wait_gone(survivors, 5.0)
    return pids
