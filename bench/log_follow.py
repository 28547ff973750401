"""Benchmark: bytes fetched per byte of driver log while following a job (`logs -f`), old vs new.

    .venv/bin/python bench/log_follow.py [--mb 20] [--seconds 20]

Starts a sandbox, creates a RayCluster, and submits one job through its dashboard (the API
server's service proxy, as nrl-k8s reaches it) that prints ``--mb`` MB of log in one-second
bursts over ``--seconds`` seconds. Two followers read that same job at once, each through its
own byte-counting TCP relay in front of the API server (every byte the client receives is
counted: TLS, HTTP headers, JSON or websocket framing):
- old: what `logs -f` did before — every second the job's status and the WHOLE log (`/logs`);
- new: `Dashboard.follow_logs`, the dashboard's log tail websocket.
Each must return exactly the final log. Target: new <= 1.1 bytes per byte of log.
Then the whole log of the job, now over, is read twice: through Ray's log tail (~5 s: Ray polls
an ended log before it closes the stream) and by ``follow_logs`` (one read), timed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import yaml

NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))
TARGET = 1.1
LINE = 100  # bytes per log line, newline included


class CountingRelay:
    """A loopback TCP relay to ``upstream`` that counts the bytes sent back to its clients."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream, self.received = upstream, 0
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self._server.accept()
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._copy, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._copy, args=(server, client, True), daemon=True).start()

    def _copy(self, src: socket.socket, dst: socket.socket, count: bool) -> None:
        try:
            while data := src.recv(65536):
                if count:
                    with self._lock:
                        self.received += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def relayed_dashboard(kubeconfig: Path, relay: CountingRelay, namespace: str, cluster: str):
    """A Dashboard client of ``cluster`` whose API server traffic goes through ``relay``."""
    from nrl_k8s.kube.client import Kube
    from nrl_k8s.ray.dashboard import Dashboard

    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    path = kubeconfig.with_name(f"kubeconfig-{relay.port}")
    path.write_text(yaml.safe_dump(config))
    kube = Kube.connect(kubeconfig=str(path), namespace=namespace)
    return Dashboard.for_cluster(cluster_name=cluster, namespace=namespace, connection=kube.connection, timeout_s=60)


def follow_old(dash, submission_id: str) -> str:
    """The former `logs -f`: status, then the whole log, once a second, printing the new suffix."""
    while True:
        job = dash.get_job(submission_id)  # status first: a terminal status means the log is complete
        text = dash.logs(submission_id)
        if job.terminal:
            return text
        time.sleep(1.0)


def follow_new(dash, submission_id: str) -> str:
    return "".join(dash.follow_logs(submission_id))


def start_cluster(kubeconfig: Path, namespace: str, cluster: str) -> None:
    """Create the RayCluster and wait (a watch) until KubeRay reports it ready: its real Ray head
    runs and its dashboard serves."""
    from nrl_k8s.kinds import raycluster
    from nrl_k8s.kinds.core import NAMESPACE
    from nrl_k8s.kinds.readiness import Pending
    from nrl_k8s.kube.client import Kube

    with Kube.connect(kubeconfig=str(kubeconfig), namespace=namespace) as kube:
        kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kube.create(raycluster.KIND, {
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": cluster, "namespace": namespace},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray"}]}}}}})
        kube.wait(raycluster.KIND, lambda obj: raycluster.readiness(obj) if obj else Pending("absent"), name=cluster,
                  timeout_s=300)


def printer(mb: int, seconds: int) -> str:
    """A driver printing ``mb`` MB of numbered lines in ``seconds`` one-second bursts."""
    lines = mb * 1_000_000 // LINE
    burst = max(1, lines // seconds)
    code = (f"import sys, time\nfor i in range({lines}):\n"
            f"    sys.stdout.write('line %08d ' % i + 'x' * {LINE - 15} + '\\n')\n"
            f"    if i % {burst} == {burst - 1}:\n        sys.stdout.flush(); time.sleep(1)\n")
    return f"python3 -c {shlex.quote(code)}"


def follow_ended(dash, submission_id: str, final: str) -> dict[str, float]:
    """Seconds to read the whole log of the job now over: through Ray's log tail (what follow_logs
    did for any job before), and follow_logs (one read of the log once the job is over)."""
    from nrl_k8s.ray.dashboard import _Deadline

    took = {}
    for name, read in (("tail", lambda: "".join(dash._tail(submission_id, 0, _Deadline(None), 20.0, None))),
                       ("new", lambda: follow_new(dash, submission_id))):
        start = time.perf_counter()
        if read() != final:
            sys.exit(f"{name}: not the whole log of the ended job")
        took[name] = time.perf_counter() - start
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nrlk8s-bench-") as tmp:
        sandbox = Path(tmp)
        subprocess.run([NRL_K8S, "sandbox", "up", "--dir", str(sandbox)], check=True, capture_output=True)
        try:
            kubeconfig = sandbox / "kubeconfig"
            namespace, cluster = f"bench-{uuid.uuid4().hex[:6]}", "logs"
            start_cluster(kubeconfig, namespace, cluster)
            server = urlsplit(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
            relays = {name: CountingRelay((server.hostname, server.port)) for name in ("old", "new")}
            dashes = {name: relayed_dashboard(kubeconfig, relay, namespace, cluster) for name, relay in relays.items()}
            submission_id = dashes["new"].submit(printer(args.mb, args.seconds))
            for relay in relays.values():
                relay.received = 0  # the submission is not following
            results, took = {}, {}

            def follow(name, fn):
                start = time.perf_counter()
                results[name] = fn(dashes[name], submission_id)
                took[name] = time.perf_counter() - start

            threads = [threading.Thread(target=follow, args=(name, fn))
                       for name, fn in (("old", follow_old), ("new", follow_new))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            fetched = {name: relay.received for name, relay in relays.items()}
            final = dashes["new"].logs(submission_id)
            ended = follow_ended(dashes["new"], submission_id, final)
        finally:
            subprocess.run([NRL_K8S, "sandbox", "down", "--dir", str(sandbox)], capture_output=True)
    size = len(final.encode())
    print(f"log: {size / 1e6:.1f} MB printed over ~{args.seconds} s")
    report = {"log_bytes": size}
    for name in ("old", "new"):
        ratio = fetched[name] / size
        complete = results[name] == final
        verdict = "" if name == "old" else f"   target <= {TARGET}  {'ok' if ratio <= TARGET else 'OVER'}"
        print(f"{name}: {fetched[name] / 1e6:8.1f} MB fetched  {ratio:6.2f} bytes per byte of log  "
              f"{took[name]:5.1f} s  {'complete' if complete else 'INCOMPLETE'}{verdict}")
        report[name] = {"fetched_bytes": fetched[name], "ratio": round(ratio, 3), "complete": complete,
                        "seconds": round(took[name], 1)}
    tail_s, new_s = ended["tail"], ended["new"]
    print(f"the job over: Ray's log tail {tail_s:.2f} s, follow_logs {new_s:.2f} s  ratio {new_s / tail_s:.3f}")
    report["ended_job"] = {"tail_s": round(tail_s, 3), "follow_s": round(new_s, 3)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
