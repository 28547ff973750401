"""Benchmark: what an API request costs through the sandbox's door (the front proxy), on a kept-alive
connection against a connection per request (the baseline, measured in the same run: each request
asks ``Connection: close``, what the door did for every request before it kept connections).

    .venv/bin/python bench/door_requests.py [--requests 500] [--sandbox DIR]

Starts a sandbox in a temporary folder (or uses a running one with ``--sandbox``), then GETs the
default namespace's pods ``--requests`` times each way with the user's token, and prints the CPU
time per request of the door's process, kube-apiserver and this client (``/proc``), their sum,
and the baseline's sum over the kept connection's.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import yaml

CLI = Path(sys.executable).with_name("nrl-k8s")
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _apiserver(sandbox: Path) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0].endswith(b"kube-apiserver") and any(str(sandbox).encode() in arg for arg in argv):
                return int(entry.name)
    raise SystemExit(f"no kube-apiserver of {sandbox} is running")


def measure(sandbox: Path, requests: int, close: bool) -> tuple[float, float, float]:
    """CPU-ms per request: (door, kube-apiserver, client)."""
    config = yaml.safe_load((sandbox / "kubeconfig").read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    tls = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    server = urllib.parse.urlsplit(cluster["server"])
    headers = {"Authorization": f"Bearer {user['token']}", **({"Connection": "close"} if close else {})}
    door, apiserver = int((sandbox / "daemon.pid").read_text().split()[0]), _apiserver(sandbox)
    before = (_cpu(door), _cpu(apiserver), time.process_time())
    connection = http.client.HTTPSConnection(server.hostname, server.port, context=tls, timeout=60)
    for _ in range(requests):
        connection.request("GET", "/api/v1/namespaces/default/pods", headers=headers)
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status
    connection.close()
    after = (_cpu(door), _cpu(apiserver), time.process_time())
    return tuple(1000 * (b - a) / requests for a, b in zip(before, after, strict=True))  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--sandbox", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nrlbench-") as scratch:
        sandbox = args.sandbox or Path(scratch) / "sandbox"
        if args.sandbox is None:
            subprocess.run([CLI, "sandbox", "up", "--dir", sandbox], check=True, capture_output=True)
        try:
            measure(sandbox, 20, close=False)  # warm: imports, the first handshakes
            rows = {"connection per request": measure(sandbox, args.requests, close=True),
                    "kept-alive connection": measure(sandbox, args.requests, close=False)}
        finally:
            if args.sandbox is None:
                subprocess.run([CLI, "sandbox", "down", "--dir", sandbox], check=False, capture_output=True)
    print(f"{args.requests} GETs of pods through the door, CPU-ms per request")
    print(f"{'':24} {'door':>6} {'apiserver':>10} {'client':>7} {'sum':>6}")
    for name, (door, apiserver, client) in rows.items():
        print(f"{name:24} {door:6.2f} {apiserver:10.2f} {client:7.2f} {door + apiserver + client:6.2f}")
    baseline, kept = (sum(row) for row in rows.values())
    print(f"ratio (connection per request / kept): {baseline / kept:.1f}x")


if __name__ == "__main__":
    main()
