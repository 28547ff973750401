"""The control plane's processes: how each is started, and on which loopback ports.

Every process is a child of the sandbox daemon: it gets SIGKILL when the daemon dies
(``PR_SET_PDEATHSIG``), runs at the background niceness (``pids.BACKGROUND_NICE``), carries the
sandbox marker in its environment (so ``sandbox down`` finds it after a crash) and logs to
``DIR/logs/NAME.log`` (0600).
"""

from __future__ import annotations

import base64
import ctypes
import functools
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..pids import MARKER, background_niceness, open_private, terminate
from .binaries import Installed
from .pki import Authority, Pair

_PR_SET_PDEATHSIG = 1
SERVICE_CIDR = "10.96.0.0/16"
CLUSTER_NAME = "nrl-k8s-sandbox"


def _child(niceness: int) -> None:
    """In the child before exec: die with the daemon, run in the background (before any thread)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setpriority(os.PRIO_PROCESS, 0, niceness)


def kubeconfig(server: str, ca_pem: bytes, user: dict, namespace: str = "default") -> str:
    """A kubeconfig with one context named like the sandbox."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": CLUSTER_NAME, "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": CLUSTER_NAME, "user": user}],
        "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": CLUSTER_NAME,
                                                        "namespace": namespace}}],
        "current-context": CLUSTER_NAME, "preferences": {},
    }, sort_keys=False)


def write_private(path: Path, text: str) -> Path:
    with open_private(path) as handle:
        handle.write(text)
    return path


@dataclass
class Processes:
    """Starts and stops the control plane's children."""

    dir: Path
    binaries: Installed
    env: dict[str, str]
    running: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(self, name: str, argv: list[str], extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        logs = self.dir / "logs"
        logs.mkdir(mode=0o700, exist_ok=True)
        with open_private(logs / f"{name}.log", "ab") as log:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       env={**self.env, **(extra_env or {}), MARKER: str(self.dir)},
                                       preexec_fn=functools.partial(_child, background_niceness()), cwd=self.dir)
        self.running[name] = process
        return process

    def exited(self) -> dict[str, int]:
        """The children that have exited, with their codes."""
        return {name: code for name, p in self.running.items() if (code := p.poll()) is not None}

    def stop(self, *names: str, grace: float = 10.0) -> None:
        """Stop the children ``names`` (all without names), the last started first."""
        for name in reversed([name for name in self.running if not names or name in names]):
            terminate([self.running[name].pid], grace)
            self.running.pop(name).wait()


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    kwok: int


def etcd(bin: Installed, data: Path, ports: Ports) -> list[str]:
    client, peer = f"http://127.0.0.1:{ports.etcd_client}", f"http://127.0.0.1:{ports.etcd_peer}"
    return [bin.path("etcd"), "--name=sandbox", f"--data-dir={data}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=sandbox={peer}", "--unsafe-no-fsync", "--log-level=warn",
            "--listen-metrics-urls=", "--quota-backend-bytes=4294967296"]


#: kube-apiserver's Go collector, tuned for a short-lived local server: collect at 5x the live heap
#: (not 2x), capped at 1 GiB. Measured on a start plus 20 s: 13-14 -> 10 CPU-s, RSS 650 MB -> 1 GB.
APISERVER_GC_ENV = {"GOGC": "400", "GOMEMLIMIT": "1GiB"}


#: A sandbox's API server has a handful of clients: it reads and watches etcd directly, with no
#: watch cache (a cache per served kind, each waking every second to send bookmarks), and does not
#: count every kind's objects in etcd every minute (a metric nothing reads). Both are serving
#: optimizations for many clients. What a client sees is the same, except that a watch from a
#: resourceVersion is answered while etcd still has its history (kube-apiserver compacts it every
#: 5 minutes), not while a cache does. Measured on an idle sandbox: ~2.3 -> ~1.4 CPU-s a
#: minute for kube-apiserver and etcd, and a start ~1.5 CPU-s cheaper.
QUIET_APISERVER = ("--watch-cache=false", "--etcd-count-metric-poll-period=0")


def apiserver(bin: Installed, ca: Authority, serving: Pair, kubelet_client: Pair, sa: Pair, ports: Ports,
              tokens: Path, egress: Path, audit: Path | None = None) -> list[str]:
    argv = [bin.path("kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={serving.cert}", f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={ca.cert}", f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC", "--anonymous-auth=false",
            f"--service-account-key-file={sa.cert}", f"--service-account-signing-key-file={sa.key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
            "--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false", "--profiling=false",
            *QUIET_APISERVER,
            f"--egress-selector-config-file={egress}",
            f"--kubelet-client-certificate={kubelet_client.cert}", f"--kubelet-client-key={kubelet_client.key}",
            "--kubelet-preferred-address-types=InternalIP", "--v=0"]
    if audit is not None:
        argv.append(f"--audit-log-path={audit}")
    return argv


#: The controllers the sandbox's objects need: owner GC, namespace deletion, Jobs (the lease, KubeRay's
#: submitter), Deployments, Services' endpoints, each namespace's ServiceAccount and CA, DRA claims,
#: node taints and pod GC. The rest (volumes, StatefulSets, DaemonSets, CronJobs, autoscaling, quota,
#: disruption budgets, cloud, certificates) would only watch and resync: they cost CPU on every run.
CONTROLLERS = (
    "garbage-collector-controller", "namespace-controller", "job-controller", "ttl-after-finished-controller",
    "deployment-controller", "replicaset-controller", "endpoints-controller", "endpointslice-controller",
    "serviceaccount-controller", "root-ca-certificate-publisher-controller", "service-cidr-controller",
    "clusterrole-aggregation-controller", "resourceclaim-controller", "node-lifecycle-controller",
    "taint-eviction-controller", "pod-garbage-collector-controller",
)


def controller_manager(bin: Installed, admin: Path, ca: Authority, sa: Pair) -> list[str]:
    return [bin.path("kube-controller-manager"), f"--kubeconfig={admin}", "--leader-elect=false",
            "--bind-address=127.0.0.1", "--secure-port=0", f"--service-account-private-key-file={sa.key}",
            f"--root-ca-file={ca.cert}", "--use-service-account-credentials=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}", f"--controllers={','.join(CONTROLLERS)}",
            "--node-monitor-grace-period=3600s", "--profiling=false", "--v=0",
            # the garbage collector's decisions (which item, which owners, deleted or kept): a
            # dependent left behind after its owner went is then explained by the sandbox's logs
            "--vmodule=garbagecollector=2,graph_builder=2",
            # its client's default 20 requests/s untaint 500 new nodes in two minutes; kwokctl lifts it too
            "--kube-api-qps=5000", "--kube-api-burst=10000"]


def scheduler(bin: Installed, admin: Path) -> list[str]:
    return [bin.path("kube-scheduler"), f"--kubeconfig={admin}", "--leader-elect=false",
            "--bind-address=127.0.0.1", "--secure-port=0", "--profiling=false", "--v=0"]


def kwok(bin: Installed, admin: Path, config: Path, serving: Pair, ports: Ports) -> list[str]:
    return [bin.path("kwok"), f"--kubeconfig={admin}", f"--config={config}",
            f"--server-address=127.0.0.1:{ports.kwok}", f"--tls-cert-file={serving.cert}",
            f"--tls-private-key-file={serving.key}", f"--node-port={ports.kwok}", "--node-ip=127.0.0.1",
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.244.0.0/16"]


def kuberay(bin: Installed, admin: Path, probe_port: int) -> tuple[list[str], dict[str, str]]:
    return ([bin.path("kuberay-operator"), "--use-kubernetes-proxy", "--enable-leader-election=false",
             "--metrics-addr=0", f"--health-probe-bind-address=127.0.0.1:{probe_port}",
             "--log-stdout-encoder=console"],
            {"KUBECONFIG": str(admin)})
