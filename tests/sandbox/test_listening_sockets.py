"""Everything a running sandbox listens on is on loopback: the daemon, the control plane's
processes, the Ray heads and every descendant, with a held RayJob so its driver, a task worker
and an actor exist too. And what the heads run: no Ray Client server."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from operator_helpers import HeldJob

from nrl_k8s_sandbox.pids import marked, read_pid

LISTENING = {"tcp": "0A", "tcp6": "0A", "udp": "07", "udp6": "07"}  # TCP LISTEN; UDP unconnected
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _parent(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(raw[raw.rindex(")") + 2 :].split()[1])


def sandbox_processes(box) -> set[int]:
    """The daemon, every marked process (its children carry the marker), and all their descendants."""
    daemon = read_pid(box.dir / "daemon.pid")
    assert daemon, "the sandbox is not running"
    found = {daemon, *marked(box.dir)}
    parents = {int(name): _parent(int(name)) for name in os.listdir("/proc") if name.isdigit()}
    while grown := {pid for pid, parent in parents.items() if parent in found} - found:
        found |= grown
    return found


def _address(hex_address: str) -> tuple[Address, int]:
    """``0100007F:1F90`` as /proc/net/tcp* writes it (32-bit words in host byte order) → (address, port)."""
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    address = ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4)))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address, int(port, 16)


def listening_sockets(pid: int) -> list[tuple[str, Address, int]]:
    """(protocol, address, port) of every listening TCP and unconnected UDP socket ``pid`` holds."""
    try:
        links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        tables = {proto: Path(f"/proc/{pid}/net/{proto}").read_text() for proto in LISTENING}
    except (FileNotFoundError, ProcessLookupError):
        return []  # it exited meanwhile
    inodes = {link[len("socket:[") : -1] for link in links if link.startswith("socket:[")}
    found = []
    for proto, table in tables.items():
        for line in table.splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTENING[proto] and fields[9] in inodes:
                found.append((proto, *_address(fields[1])))
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
    except (FileNotFoundError, ProcessLookupError):
        return "?"


def test_every_socket_the_sandbox_listens_on_is_on_loopback(sandbox, tmp_path):
    job = HeldJob(sandbox, tmp_path)
    try:
        sockets = {pid: listening_sockets(pid) for pid in sandbox_processes(sandbox)}
        commands = {pid: _command(pid) for pid in sockets}
    finally:
        job.release()
    exposed = [f"pid {pid} ({commands[pid]}): {proto} {address}:{port}"
               for pid, found in sockets.items()
               for proto, address, port in found if not address.is_loopback]  # fmt: skip
    assert exposed == [], "listening beyond loopback:\n" + "\n".join(exposed)
    # The scan did see the sandbox's servers and the job's processes: it cannot pass by seeing nothing.
    ports = {port for found in sockets.values() for _, _, port in found}
    servers = (sandbox.api_url, sandbox.info["apiserver_url"])
    assert {int(url.rsplit(":", 1)[1]) for url in servers} <= ports
    assert {role: sockets.get(pid) for role, pid in job.pids.items() if not sockets.get(pid)} == {}
    assert job.final_status() == "SUCCEEDED"
    # a head starts no Ray Client server (ray_start.py): nothing here uses Ray Client
    assert [command for command in commands.values() if "ray.util.client.server" in command] == []
    assert [command for command in commands.values() if "nrl_k8s_sandbox.ray_start" in command]
