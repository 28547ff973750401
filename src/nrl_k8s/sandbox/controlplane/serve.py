"""The real control plane's daemon: what ``nrl-k8s sandbox up`` leaves running.

In order: certificates (``pki``), etcd, kube-apiserver (TLS, RBAC, a token for the user, the
egress selector to ``egress.EgressProxy``), the CRDs (KubeRay's and kwok's from their modules,
Dynamo's and the ComputeDomain's of our own), the user's RBAC, kwok nodes with GPUs, then
kube-controller-manager, kube-scheduler, kwok (with ``stages``), the KubeRay operator
(``--use-kubernetes-proxy``), and in this process the local kubelet, the Dynamo and DRA
controllers and the DGD conversion webhook. ``ready`` goes to the inherited pipe when all of
that answers. Everything listens on 127.0.0.1 (the egress proxy on a Unix socket, 0600) and every
file is private (umask 077). SIGTERM stops it all, the last started first.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import signal
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import kubernetes
import yaml

from nrl_k8s.errors import SandboxError

from ..faults import Faults
from ..pids import MARKER
from ..ray_head import free_ports, temp_dir_for
from . import binaries, components, rbac, stages
from .egress import EgressProxy, egress_config
from .crds import crds as dynamo_crds
from .dra import ComputeDomains
from .dra import devices as dra_devices
from .dynamo import Dynamo
from .front import FrontProxy
from .webhook import ConversionWebhook
from . import kubelet as kubelet_mod
from .kubelet import LocalKubelet
from .pki import Authority

log = logging.getLogger("nrl_k8s.sandbox.controlplane")
USER = "nrl-k8s-user"
USER_GROUP = "nrl-k8s:users"
START_S = 180.0
#: kwok nodes: (name prefix, count, GPUs each, labels).
GB300 = {"nvidia.com/gpu.product": "NVIDIA-GB300", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "4",
         "nvidia.com/gpu.family": "blackwell", "nvidia.com/gpu.memory": "284000",
         "node.kubernetes.io/instance-type": "gb300-nvl72"}
NODES = (("gb300", 8, 4, GB300), ("cpu", 2, 0, {}))


def _environment(sandbox_dir: Path) -> dict[str, str]:
    """The environment children get: ``sandbox up``'s, this interpreter's bin dir first on PATH."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env[MARKER] = str(sandbox_dir)
    return env


def _node(name: str, gpus: int, labels: dict[str, str]) -> dict:
    capacity = {"cpu": "144", "memory": "960Gi", "pods": "250", "ephemeral-storage": "4Ti"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "type": "kwok", **labels}},
            "status": {"capacity": capacity, "allocatable": capacity}}


def _wait_api(url: str, context: ssl.SSLContext, process, deadline: float) -> None:
    while True:
        try:
            with urllib.request.urlopen(f"{url}/readyz", context=context, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if process.poll() is not None:
            raise SandboxError(f"kube-apiserver exited with code {process.returncode}", hint="see DIR/logs/kube-apiserver.log")
        if time.monotonic() > deadline:
            raise SandboxError("kube-apiserver was not ready in time", hint="see DIR/logs/kube-apiserver.log")
        time.sleep(0.1)


def _apply(api: kubernetes.client.ApiClient, obj: dict) -> None:
    """Create ``obj`` (server-side apply keeps a second start idempotent)."""
    dynamic = kubernetes.dynamic.DynamicClient(api)
    resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    namespace = (obj.get("metadata") or {}).get("namespace")
    resource.server_side_apply(body=obj, namespace=namespace, field_manager="nrl-k8s-sandbox", force_conflicts=True)


def _wait_crds(api: kubernetes.client.ApiClient, names: list[str], deadline: float) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(api)
    pending = set(names)
    while pending:
        for name in list(pending):
            crd = ext.read_custom_resource_definition(name)
            if any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or [])):
                pending.discard(name)
        if time.monotonic() > deadline:
            raise SandboxError(f"CRDs not established: {sorted(pending)}")
        if pending:
            time.sleep(0.1)


def serve(sandbox_dir: Path, ready_fd: int | None, faults: dict[str, str]) -> int:
    os.umask(0o077)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    started = time.monotonic()
    deadline = started + START_S
    registry = Faults()
    for name, value in faults.items():
        registry.set(name, value)
    installed = binaries.find()
    env = _environment(sandbox_dir)
    processes = components.Processes(sandbox_dir, installed, env)
    private = temp_dir_for(sandbox_dir).parent  # short: Unix socket paths are length-limited
    private.mkdir(mode=0o700, parents=True, exist_ok=True)
    controllers: list = []
    stoppable: list = []  # started apart from the controllers, stopped after them
    egress: EgressProxy | None = None
    try:
        ca = Authority(sandbox_dir / "pki")
        serving = ca.issue("apiserver", "kube-apiserver", server=True)
        admin = ca.issue("admin", "nrl-k8s-sandbox-admin", organizations=("system:masters",), client=True)
        kubelet_pair = ca.issue("kubelet", "kwok-kubelet", server=True)
        sa = ca.service_account_key()
        ports = components.Ports(*free_ports(4))
        front_port = free_ports(1)[0]
        operator_token = secrets.token_urlsafe(32)
        user_token = secrets.token_urlsafe(32)
        tokens = components.write_private(sandbox_dir / "tokens.csv", f'{user_token},{USER},{USER},"{USER_GROUP}"\n')
        socket_path = private / "egress.sock"
        kubelet_holder: list[LocalKubelet] = []
        egress = EgressProxy(
            socket_path, lambda host, port: kubelet_holder[0].resolve(host, port) if kubelet_holder else None,
            lambda *request: kubelet_holder[0].inspect(*request),
            lambda host, port: bool(kubelet_holder) and kubelet_holder[0].is_dashboard(host, port))
        egress.start()
        egress_file = components.write_private(sandbox_dir / "egress.yaml", egress_config(socket_path))
        processes.start("etcd", components.etcd(installed, sandbox_dir / "etcd", ports))
        apiserver = processes.start("kube-apiserver", components.apiserver(
            installed, ca, serving, admin, sa, ports, tokens, egress_file))
        url = f"https://127.0.0.1:{ports.apiserver}"
        context = ssl.create_default_context(cafile=str(ca.cert))
        context.load_cert_chain(str(admin.cert), str(admin.key))
        _wait_api(url, context, apiserver, deadline)
        log.info("kube-apiserver ready at %s (%.1f s)", url, time.monotonic() - started)
        admin_config = components.write_private(sandbox_dir / "admin.kubeconfig", components.kubeconfig(url, ca.pem, {
            "client-certificate-data": base64.b64encode(admin.cert.read_bytes()).decode(),
            "client-key-data": base64.b64encode(admin.key.read_bytes()).decode()}))
        api = kubernetes.config.new_client_from_config(config_file=str(admin_config))
        paths = {path.name: path for path in installed.crds.glob("*.yaml")}
        if registry.get("old-rayjob-crd") is not None:
            paths["ray.io_rayjobs.yaml"] = installed.crds / "old" / "ray.io_rayjobs.yaml"
        crd_docs = [doc for path in paths.values() for doc in yaml.safe_load_all(path.read_text()) if doc]
        dgds = registry.get("no-dgd-crd") is None
        hook_pair = ca.issue("dgd-webhook", "dgd-webhook", server=True)
        webhook = ConversionWebhook(hook_pair.cert, hook_pair.key)
        webhook.start()
        stoppable.append(webhook)
        crd_docs += [doc for doc in dynamo_crds(webhook.url, ca.pem)
                     if dgds or not doc["metadata"]["name"].startswith("dynamographdeployments")]
        for doc in crd_docs:
            _apply(api, doc)
        _wait_crds(api, [doc["metadata"]["name"] for doc in crd_docs], deadline)
        user_config = components.write_private(sandbox_dir / "user.kubeconfig", components.kubeconfig(
            url, ca.pem, {"token": user_token}))
        user_api = kubernetes.config.new_client_from_config(config_file=str(user_config))

        def on_faults(active: dict[str, str]) -> None:
            rbac.apply(api, user_api, registry, USER_GROUP)
            for stage in stages.stages(stages.delays_of(active)):
                _apply(api, stage)

        on_faults(registry.active())
        for prefix, count, gpus, labels in NODES:
            for index in range(count):
                _apply(api, _node(f"{prefix}-{index}", gpus, labels))
        for obj in dra_devices([f"{prefix}-{i}" for prefix, count, gpus, _ in NODES if gpus for i in range(count)]):
            _apply(api, obj)
        processes.start("kube-controller-manager", components.controller_manager(installed, admin_config, ca, sa))
        processes.start("kube-scheduler", components.scheduler(installed, admin_config))
        kwok_config = components.write_private(sandbox_dir / "kwok.yaml", yaml.safe_dump({
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
            "options": {"enableCRDs": ["Stage", "Logs", "ClusterLogs", "Exec", "ClusterExec", "PortForward",
                                       "ClusterPortForward", "Attach", "ClusterAttach"],
                        "enableDebuggingHandlers": True, "enableProfilingHandler": False,
                        "nodeLeaseDurationSeconds": 40, "nodeLeaseParallelism": 2,
                        "podPlayStageParallelism": 4, "nodePlayStageParallelism": 2}}))
        processes.start("kwok", components.kwok(installed, admin_config, kwok_config, kubelet_pair, ports))
        argv, extra = components.kuberay(installed, admin_config)
        processes.start("kuberay-operator", argv, extra)
        _apply(api, kubelet_mod.played_pods_logs(sandbox_dir))
        kubelet = LocalKubelet(api, sandbox_dir, env, registry, ports.kwok, private)
        kubelet_holder.append(kubelet)
        controllers.append(kubelet)
        controllers += [Dynamo(api, registry)] if dgds else []
        controllers.append(ComputeDomains(api, registry))
        for controller in controllers:
            controller.start()
        front = FrontProxy(front_port, ports.apiserver, serving, str(ca.cert), registry, operator_token, on_faults)
        front.start()
        controllers.append(front)
        front_url = f"https://127.0.0.1:{front_port}"
        kubeconfig = components.write_private(sandbox_dir / "kubeconfig", components.kubeconfig(
            front_url, ca.pem, {"token": user_token}))
        components.write_private(sandbox_dir / "sandbox.json", json.dumps({
            "control_plane": "real", "api_url": front_url, "apiserver_url": url, "kubeconfig": str(kubeconfig),
            "admin_url": front_url, "ca_file": str(ca.cert), "operator_token": operator_token, "scratch": str(private),
            "admin_kubeconfig": str(admin_config), "daemon_pid": os.getpid(), "bin": str(installed.bin),
            "pids": {name: p.pid for name, p in processes.running.items()},
            "versions": {"kubernetes": binaries.KUBERNETES, "etcd": binaries.ETCD, "kwok": binaries.KWOK,
                         "kuberay": binaries.KUBERAY},
        }, indent=2))
        log.info("ready in %.1f s", time.monotonic() - started)
        if ready_fd is not None:
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)
        while not stop.wait(1.0):
            exited = processes.exited()
            if exited:
                log.error("stopping: %s exited", exited)
                return 1
        return 0
    finally:
        for controller in reversed(controllers + stoppable):
            controller.stop()
        processes.stop()
        if egress is not None:
            egress.stop()
