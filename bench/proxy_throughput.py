"""Benchmark: a Ray package upload (``PUT /api/packages/gcs/...``) hop by hop, as throughput
against the same PUT straight to the Ray dashboard (the baseline, measured in the same run).

    .venv/bin/python bench/proxy_throughput.py [--mib 100] [--runs 3] [--sandbox DIR]

The hops, each adding one piece of the path a user's upload takes:
- direct: the head's Ray dashboard on its loopback port;
- egress: through the sandbox's egress proxy (``CONNECT pod-ip:8265`` on its Unix socket);
- apiserver: kube-apiserver's service proxy (which dials through the egress proxy);
- front: the user's kubeconfig server, the front proxy (TLS) before kube-apiserver.
Starts a sandbox in a temporary folder (or uses a running one with ``--sandbox``) and one
RayCluster in it; prints each hop's median MB/s and its ratio to direct.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from kubernetes import client, config, watch

NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))
SPEC = {"rayVersion": "2.60.0", "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
    {"name": "ray-head", "image": "rayproject/ray:2.60.0"}]}}}}


class _Tunnel(http.client.HTTPConnection):
    """HTTP over ``CONNECT host:port`` on the egress proxy's Unix socket, as kube-apiserver dials."""

    def __init__(self, socket_path: str, target: str):
        super().__init__("egress")
        self.socket_path, self.target = socket_path, target

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self.socket_path)
        sock.sendall(f"CONNECT {self.target} HTTP/1.1\r\nHost: {self.target}\r\n\r\n".encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 200"), reply
        self.sock = sock


def put(connection: http.client.HTTPConnection, path: str, data: bytes, headers: dict[str, str]) -> float:
    """Seconds for one PUT of ``data`` (the answer read whole); fails unless it is 200."""
    began = time.monotonic()
    connection.request("PUT", path, body=data, headers={"Content-Type": "application/octet-stream", **headers})
    response = connection.getresponse()
    body = response.read()
    seconds = time.monotonic() - began
    connection.close()
    assert response.status == 200, (response.status, body[:300])
    return seconds


def head_dashboard_port(scratch: str, uid: str) -> int:
    """The loopback dashboard port of the ``ray start --head`` the kubelet runs for pod ``uid``."""
    marker = f"--temp-dir={scratch}/{uid[:8]}/ray"
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if marker in argv:
            return int(next(a for a in argv if a.startswith("--dashboard-port=")).split("=", 1)[1])
    raise SystemExit(f"no Ray head runs with {marker}")


def ready_head(api: client.ApiClient, ns: str, name: str) -> dict:
    """Create RayCluster ``name`` and return its head pod once the RayCluster is ready."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": ns}})
    custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayclusters",
                                           {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
                                            "spec": SPEC})
    for event in watch.Watch().stream(custom.list_namespaced_custom_object, "ray.io", "v1", ns, "rayclusters",
                                      field_selector=f"metadata.name={name}", timeout_seconds=600):
        if (event["object"].get("status") or {}).get("state") == "ready":
            break
    else:
        raise SystemExit(f"RayCluster {name} was not ready within 600 s")
    pods = core.list_namespaced_pod(ns, label_selector=f"ray.io/cluster={name},ray.io/node-type=head").items
    return {"ip": pods[0].status.pod_ip, "uid": pods[0].metadata.uid}


def measure(box: Path, mib: int, runs: int) -> None:
    info = json.loads((box / "sandbox.json").read_text())
    token = yaml.safe_load((box / "kubeconfig").read_text())["users"][0]["user"]["token"]
    ns, name = f"bench-{uuid.uuid4().hex[:6]}", "throughput"
    with config.new_client_from_config(config_file=str(box / "kubeconfig")) as api:
        head = ready_head(api, ns, name)
        try:
            data = bytes(mib << 20)
            package = f"_ray_pkg_{uuid.uuid4().hex[:16]}.zip"  # one name: Ray keeps the last upload only
            path = f"/api/packages/gcs/{package}"
            service = f"/api/v1/namespaces/{ns}/services/{name}-head-svc:8265/proxy{path}"
            context = ssl.create_default_context(cafile=info["ca_file"])
            bearer = {"Authorization": f"Bearer {token}"}
            port = head_dashboard_port(info["scratch"], head["uid"])
            hops = {
                "direct": lambda: (http.client.HTTPConnection("127.0.0.1", port), path, {}),
                "egress": lambda: (_Tunnel(str(Path(info["scratch"]) / "egress.sock"), f"{head['ip']}:8265"), path, {}),
                "apiserver": lambda: (https(info["apiserver_url"], context), service, bearer),
                "front": lambda: (https(info["api_url"], context), service, bearer),
            }
            seconds: dict[str, list[float]] = {hop: [] for hop in hops}
            for run in range(runs):
                for hop, make in hops.items():
                    connection, target, headers = make()
                    seconds[hop].append(put(connection, target, data, headers))
                    print(f"run {run + 1} {hop:9} {len(data) / seconds[hop][-1] / 1e6:8.1f} MB/s", flush=True)
        finally:
            client.CoreV1Api(api).delete_namespace(ns)
    base = len(data) / statistics.median(seconds["direct"])
    print(f"\n{mib} MiB PUT, median of {runs}:")
    for hop, times in seconds.items():
        rate = len(data) / statistics.median(times)
        print(f"  {hop:9} {rate / 1e6:8.1f} MB/s  {statistics.median(times):7.2f} s  x{rate / base:.3f} of direct")


def https(url: str, context: ssl.SSLContext) -> http.client.HTTPSConnection:
    host, port = re.fullmatch(r"https://([^:]+):(\d+)", url).groups()
    return http.client.HTTPSConnection(host, int(port), context=context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sandbox", type=Path, help="a running sandbox's --dir (else one is started)")
    args = parser.parse_args()
    mib = min(args.mib, 99)  # Ray's dashboard takes bodies under 100 MiB
    if args.sandbox:
        measure(args.sandbox, mib, args.runs)
        return
    with tempfile.TemporaryDirectory(prefix="nrl-k8s-bench-") as tmp:
        box = Path(tmp) / "sandbox"
        subprocess.run([NRL_K8S, "sandbox", "up", "--dir", str(box)], check=True, capture_output=True)
        try:
            measure(box, mib, args.runs)
        finally:
            subprocess.run([NRL_K8S, "sandbox", "down", "--dir", str(box)], check=True, capture_output=True)


if __name__ == "__main__":
    main()
