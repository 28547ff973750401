"""Process bookkeeping for the sandbox: pid files, liveness, process groups, waiting for exit,
and ``open_private`` for every file the sandbox writes.

Pid files hold ``PID STARTTIME`` so that a recycled pid is never taken for ours. Every
process the sandbox starts carries ``NRL_K8S_SANDBOX_DIR=<dir>`` in its environment, and
everything those processes spawn inherits it — including Ray job drivers, which Ray starts in
sessions of their own; ``marked(dir)`` finds them through ``/proc`` (Linux). Some Ray
processes overwrite their environment area with a process title, so ``marked`` also takes the
members of the process groups marked processes lead (a Ray head's). Together ``down`` can clean
up after a killed daemon.
"""

from __future__ import annotations

import os
import select
import signal
import time
from pathlib import Path
from typing import IO

MARKER = "NRL_K8S_SANDBOX_DIR"

#: How much nicer than the daemon everything the sandbox runs is, but a Ray head while it starts:
#: Ray gives a head's raylet 30 s to register (``node.py``) and aborts it after, the only deadline
#: here that nobody can lengthen, so on a loaded machine a starting head takes the CPU first and,
#: once ready, goes to the background with the control plane, the pods' processes and its jobs.
BACKGROUND_NICE = 10


def background_niceness() -> int:
    return min(19, os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICE)


def to_background(pgid: int) -> None:
    """Every thread of every process in group ``pgid`` (and what they start later) at the background
    niceness; a group already gone is left alone."""
    try:
        os.setpriority(os.PRIO_PGRP, pgid, background_niceness())
    except ProcessLookupError:
        pass


def read_pid(path: Path) -> int | None:
    """The pid stored in ``path`` if that very process (same start time) still runs, else None."""
    try:
        pid, started = (int(word) for word in path.read_text().split())
    except (FileNotFoundError, ValueError):
        return None
    return pid if start_time(pid) == started else None


def recorded(path: Path) -> tuple[int, int] | None:
    """(pid, start time) as written by ``write_pid``, whether or not it still runs."""
    try:
        pid, started = (int(word) for word in path.read_text().split())
    except (FileNotFoundError, ValueError):
        return None
    return pid, started


def open_private(path: Path, mode: str = "w") -> IO:
    """``open(path, mode)`` (``w``, ``a``, ``wb``, ``ab``) for a file only its owner may read or
    write — also one that already existed with a wider mode."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, mode)


def write_pid(path: Path, pid: int) -> None:
    """Record ``pid`` with its start time, so a recycled pid is never mistaken for it."""
    with open_private(path) as handle:
        handle.write(f"{pid} {start_time(pid)}\n")


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rindex(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), None if it is gone."""
    fields = _stat(pid)
    return int(fields[19]) if fields is not None else None


def alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def group_members(pgid: int, started_after: int = 0) -> list[int]:
    """Live processes of process group ``pgid`` that started at or after ``started_after``."""
    members = []
    for pid in _all_pids():
        fields = _stat(pid)
        if (
            fields is not None
            and fields[0] not in ("Z", "X")
            and int(fields[2]) == pgid
            and int(fields[19]) >= started_after
        ):
            members.append(pid)
    return members


def marked(sandbox_dir: Path) -> list[int]:
    """Live processes (other than this one) whose environment names ``sandbox_dir``, and every
    member of a process group one of them leads: a Ray head's agents overwrite their environment
    with a process title, and once a killed raylet has orphaned them only their group is left."""
    needle = f"{MARKER}={sandbox_dir}".encode()
    found, group = set(), {}
    for pid in _all_pids():
        fields = _stat(pid)
        if pid == os.getpid() or fields is None or fields[0] in ("Z", "X"):
            continue
        group[pid] = int(fields[2])
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if needle in environ.split(b"\0"):
            found.add(pid)
    leaders = {pid for pid in found if group[pid] == pid}
    return sorted(found | {pid for pid, leader in group.items() if leader in leaders})


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


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of the log at ``path``, headed by where it is."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"(no log at {path})"
    return f"last lines of {path}:\n" + "\n".join(text.splitlines()[-lines:])
