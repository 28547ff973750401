"""The real control plane's daemon: what ``nrl-k8s sandbox up`` leaves running.

``serve`` runs the start-up steps in order over one ``Plane``: certificates and tokens (``pki``),
etcd and kube-apiserver (TLS, RBAC, a token for the user, the egress selector to
``egress.EgressProxy``; etcd a copy of the machine's seed, ``seed.py``), the CRDs (KubeRay's and
kwok's from their modules, in the seed; Dynamo's and the ComputeDomain's of our own, the DGD
conversion webhook), the user's RBAC and kwok's Stages, kwok nodes in pools (``nodes``) and the GPU
nodes' DRA devices, then kube-controller-manager, kube-scheduler, kwok, the KubeRay operator
(``--use-kubernetes-proxy``) and, in this process, the local kubelet and the Dynamo and DRA
controllers; last the user's door (``front.FrontProxy``) and ``sandbox.json``. ``ready`` goes to
the inherited pipe when all of that answers; a child that exits during start-up fails it at once,
naming the child and its log. Everything listens on 127.0.0.1 (the egress proxy on a Unix socket,
0600) and every file is private (umask 077). SIGTERM stops it all, the last started first.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import ssl
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import kubernetes
import yaml
from kubernetes.watch.watch import iter_resp_lines

from nrl_k8s.errors import SandboxError

from ..faults import Faults
from ..pids import MARKER, log_tail
from ..ray_head import free_ports, temp_dir_for
from . import binaries, components, kueue, nodes, rbac, seed, stages
from .controller import json_body
from .crds import crds as dynamo_crds
from .dra import ComputeDomains
from .dra import devices as dra_devices
from .dynamo import Dynamo
from .egress import EgressProxy, egress_config
from .front import FrontProxy
from .kubelet import LocalKubelet, played_pods_logs
from .pki import Authority
from .webhook import ConversionWebhook

log = logging.getLogger("nrl_k8s_sandbox.controlplane")
USER = "nrl-k8s-user"
USER_GROUP = "nrl-k8s:users"
ADMIN = "nrl-k8s-sandbox-admin"  # the operators' user, in system:masters
#: How long the start may take before the daemon gives up (a child that exits ends it at once): the
#: control plane's start took 112 s for a sandbox started beside a half-speed suite's four workers,
#: so a machine four times slower needs more than twice that. Only a hang waits it out.
START_S = 600.0
APPLYING = 8  # objects applied at once (the admin ApiClient keeps 5 connections a CPU)
#: What ``sandbox status`` counts, by plural: (group, version) or None for the core group.
COUNTED = {"pods": None, "services": None, "rayclusters": ("ray.io", "v1"), "rayjobs": ("ray.io", "v1"),
           "dynamographdeployments": ("nvidia.com", "v1alpha1")}
KWOK_CONFIG = {
    "apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
    "options": {"enableCRDs": ["Stage", "Logs", "ClusterLogs", "Exec", "ClusterExec", "PortForward",
                               "ClusterPortForward", "Attach", "ClusterAttach"],
                "enableDebuggingHandlers": True, "enableProfilingHandler": False,
                # kwok plays a node once it holds its Lease: 16 at a time bring 500 nodes up in seconds; a
                # Lease renewed every 150 s (the lifecycle controller waits an hour) keeps them idle cheaply
                "nodeLeaseDurationSeconds": 600, "nodeLeaseParallelism": 16,
                "podPlayStageParallelism": 4, "nodePlayStageParallelism": 16}}


def _environment(sandbox_dir: Path, scratch: Path) -> dict[str, str]:
    """The environment children get: ``sandbox up``'s, this interpreter's bin dir first on PATH,
    and a temp dir in the sandbox's scratch, the daemon's own too. What is left in one goes with
    ``sandbox down``, even after a crash: a socket folder per Ray head's dashboard, a logging config
    per Dynamo process (~200 a test run)."""
    temp = scratch / "tmp"
    temp.mkdir(mode=0o700, exist_ok=True)
    tempfile.tempdir = str(temp)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env[MARKER] = str(sandbox_dir)
    env["TMPDIR"] = str(temp)
    return env


def _answers(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


class Plane:
    """The daemon's state while it starts, runs and stops: what each step made, for the next."""

    def __init__(self, sandbox_dir: Path, faults: dict[str, str]):
        self.dir = sandbox_dir
        self.started = time.monotonic()
        self.deadline = self.started + START_S
        self.faults = Faults()
        for name, value in faults.items():
            self.faults.set(name, value)
        self.pools = nodes.pools(self.faults.get("nodes"))
        self.installed = binaries.find(kueue="kueue" in faults)
        self.scratch = temp_dir_for(sandbox_dir).parent  # short: Unix socket paths are length-limited
        self.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.env = _environment(sandbox_dir, self.scratch)
        self.processes = components.Processes(sandbox_dir, self.installed, self.env)
        self.running: list = []  # what has a stop(), in start order
        self.kubelet: LocalKubelet | None = None
        self.dynamic: kubernetes.dynamic.DynamicClient | None = None
        self.info: dict = {}

    def wait(self, what: str, probe: Callable[[], bool]) -> None:
        """Until ``probe()``; SandboxError at the deadline or as soon as a child has exited."""
        while not probe():
            exited = self.processes.exited()
            if exited:
                name, code = next(iter(exited.items()))
                raise SandboxError(f"{name} exited with code {code} while waiting for {what}",
                                   hint=log_tail(self.dir / "logs" / f"{name}.log", 5))
            if time.monotonic() > self.deadline:
                raise SandboxError(f"{what} did not happen within {START_S:.0f} s", hint=f"see {self.dir / 'logs'}")
            time.sleep(0.1)
        log.info("%s (%.1f s)", what, time.monotonic() - self.started)

    def apply(self, *objs: dict) -> None:
        """Create or update ``objs`` (server-side apply keeps re-applying idempotent), ``APPLYING`` at a
        time: 500 nodes and their 1,000 ResourceSlices take a minute one by one."""
        if self.dynamic is None:  # its discovery (cached in the sandbox's folder) refreshes on an unknown kind
            self.dynamic = kubernetes.dynamic.DynamicClient(self.api, cache_file=str(self.dir / "discovery.json"))
        kinds = {(obj["apiVersion"], obj["kind"]) for obj in objs}
        resources = {kind: self.dynamic.resources.get(api_version=kind[0], kind=kind[1]) for kind in kinds}

        def one(obj: dict) -> None:
            resources[obj["apiVersion"], obj["kind"]].server_side_apply(
                body=obj, namespace=(obj.get("metadata") or {}).get("namespace"), field_manager="nrl-k8s-sandbox",
                force_conflicts=True)
        with ThreadPoolExecutor(APPLYING) as pool:
            list(pool.map(one, objs))

    def keep(self, thing) -> None:
        """Start ``thing``; it is stopped with the plane, before the children."""
        thing.start()
        self.running.append(thing)

    def stop(self) -> None:
        for thing in reversed(self.running):
            thing.stop()
        self.processes.stop()

    def count(self) -> dict[str, int]:
        """How many objects of each ``COUNTED`` kind there are, in all namespaces."""
        core, custom = kubernetes.client.CoreV1Api(self.api), kubernetes.client.CustomObjectsApi(self.api)
        counts = {}
        for plural, group in COUNTED.items():
            try:
                if group is None:
                    listing = getattr(core, f"list_{plural[:-1]}_for_all_namespaces")(_preload_content=False)
                else:
                    listing = custom.list_cluster_custom_object(*group, plural, _preload_content=False)
            except kubernetes.client.ApiException:
                continue  # not served (the no-dgd-crd fault)
            counts[plural] = len(json.loads(listing.data)["items"])
        return counts


# -- the start-up steps, in order ------------------------------------------------------------
def certificates(plane: Plane) -> None:
    ca = plane.ca = Authority(plane.dir / "pki")
    plane.serving = ca.issue("apiserver", "kube-apiserver", server=True)
    plane.admin = ca.issue("admin", ADMIN, organizations=("system:masters",), client=True)
    plane.kubelet_pair = ca.issue("kubelet", "kwok-kubelet", server=True)
    plane.webhook_pair = ca.issue("dgd-webhook", "dgd-webhook", server=True)
    plane.sa = ca.service_account_key()
    plane.ports = components.Ports(*free_ports(4))
    plane.operator_token = secrets.token_urlsafe(32)
    plane.user_token = secrets.token_urlsafe(32)
    # the operators' too: kube-apiserver checks a client certificate's chain on every request (~6 %
    # of a busy sandbox's kube-apiserver CPU), a token with a lookup
    plane.admin_token = secrets.token_urlsafe(32)
    plane.tokens = components.write_private(plane.dir / "tokens.csv",
                                            f'{plane.user_token},{USER},{USER},"{USER_GROUP}"\n'
                                            f'{plane.admin_token},{ADMIN},{ADMIN},"system:masters"\n')


def api_server(plane: Plane) -> None:
    """etcd, the egress proxy to pods, kube-apiserver, and the operators' admin kubeconfig."""
    socket_path = plane.scratch / "egress.sock"
    kubelet = lambda: plane.kubelet  # noqa: E731 - made later, by operators()
    plane.keep(EgressProxy(
        socket_path, lambda host, port: kubelet().resolve(host, port) if kubelet() else None,
        lambda *request: kubelet().inspect(*request),
        lambda host, port: kubelet() is not None and kubelet().is_http(host, port)))
    plane.egress = components.write_private(plane.dir / "egress.yaml", egress_config(socket_path))
    # a fresh cluster every time: an earlier sandbox's objects (its nodes' kubelet port) would mislead
    # (a copy of the seed, seed.py, is one)
    shutil.rmtree(plane.dir / "etcd", ignore_errors=True)
    plane.crd_files = _crd_files(plane)
    plane.seed = seed.folder(plane.installed, plane.crd_files)
    plane.seed_turn = seed.Turn(plane.seed)
    plane.wait("the machine's copy of etcd, or the turn to make it", plane.seed_turn.ready)
    plane.seeded = seed.copy(plane.seed, plane.dir / "etcd")
    if plane.seeded is not None:
        plane.seed_turn.end()
    plane.url = f"https://127.0.0.1:{plane.ports.apiserver}"
    _storage(plane)
    plane.admin_config = components.write_private(plane.dir / "admin.kubeconfig", components.kubeconfig(
        plane.url, plane.ca.pem, {"token": plane.admin_token}))
    plane.api = kubernetes.config.new_client_from_config(config_file=str(plane.admin_config))


def _storage(plane: Plane) -> None:
    """etcd and kube-apiserver, answering."""
    plane.processes.start("etcd", components.etcd(plane.installed, plane.dir / "etcd", plane.ports))
    plane.processes.start("kube-apiserver", components.apiserver(
        plane.installed, plane.ca, plane.serving, plane.admin, plane.sa, plane.ports, plane.tokens, plane.egress),
        components.APISERVER_GC_ENV)
    context = ssl.create_default_context(cafile=str(plane.ca.cert))
    context.load_cert_chain(str(plane.admin.cert), str(plane.admin.key))
    plane.wait("kube-apiserver ready", lambda: _answers(f"{plane.url}/readyz", context))


def _crd_files(plane: Plane) -> list[Path]:
    """The CRD files a sandbox installs (the ``old-rayjob-crd`` fault chooses one), by name."""
    paths = {path.name: path for path in plane.installed.crds.glob("*.yaml") if path.name not in kueue.FILES}
    if plane.faults.get("old-rayjob-crd") is not None:
        paths["ray.io_rayjobs.yaml"] = plane.installed.crds / "old" / "ray.io_rayjobs.yaml"
    return [paths[name] for name in sorted(paths)]


def resources(plane: Plane) -> None:
    """The CRDs (the ``old-rayjob-crd`` and ``no-dgd-crd`` faults choose which), established. Those from
    files come with the seed's copy; without one they are made, and etcd with them kept as the seed."""
    if plane.seeded is None:
        served = _establish(plane, "the CRDs from files", [doc for path in plane.crd_files for doc in _documents(path)])
        plane.processes.stop("kube-apiserver", "etcd")
        seed.save(plane.seed, plane.dir / "etcd", served)
        plane.seed_turn.end()
        _storage(plane)
        plane.seeded = sorted(served)
    plane.dgds = plane.faults.get("no-dgd-crd") is None
    webhook = ConversionWebhook(plane.webhook_pair.cert, plane.webhook_pair.key)
    plane.keep(webhook)
    docs = [doc for doc in dynamo_crds(webhook.url, plane.ca.pem)
            if plane.dgds or not doc["metadata"]["name"].startswith("dynamographdeployments")]
    _establish(plane, "the CRDs", docs, served=plane.seeded)


def _documents(path: Path) -> list[dict]:
    # libyaml's parser: KubeRay's CRDs are 3 MB of YAML, 7 CPU-s for the pure-Python one
    return [doc for doc in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            if doc]


def _establish(plane: Plane, what: str, crds: list[dict],
               served: Iterable[tuple[str, str, str]] = ()) -> set[tuple[str, str, str]]:
    """Create ``crds`` and wait until the API server serves each, and the ``served`` resources
    (group, version, plural); return what was waited for.

    KubeRay's CRDs are ~1 MB each: they are created once (the plane's etcd is new) with their
    answers left unread, and watched for in discovery, which lists a CRD's resource once it is
    Established (reading the CRDs until then costs the API server more than creating them)."""
    ext, custom = kubernetes.client.ApiextensionsV1Api(plane.api), kubernetes.client.CustomObjectsApi(plane.api)
    for doc in crds:
        ext.create_custom_resource_definition(doc, _preload_content=False).drain_conn()  # read, not parsed
    waited = {(doc["spec"]["group"], version["name"], doc["spec"]["names"]["plural"])
              for doc in crds for version in doc["spec"]["versions"] if version.get("served", True)} | set(served)
    pending = set(waited)

    def established() -> bool:
        for group_version in {(group, version) for group, version, _ in pending}:
            try:
                listed = json_body(custom.get_api_resources(*group_version, _preload_content=False))
            except kubernetes.client.ApiException as exc:
                if exc.status == 404:  # no version of the group served yet
                    continue
                raise
            pending.difference_update({(*group_version, r["name"]) for r in listed["resources"]})
        return not pending
    plane.wait(f"{what} established", established)
    return waited


def access(plane: Plane) -> None:
    """The user's kubeconfig straight to kube-apiserver (for RBAC checks), the RBAC and Stages the
    faults ask for (again on every change of them), kwok's nodes and their DRA devices."""
    user_config = components.write_private(plane.dir / "user.kubeconfig", components.kubeconfig(
        plane.url, plane.ca.pem, {"token": plane.user_token}))
    user_api = kubernetes.config.new_client_from_config(config_file=str(user_config))

    def on_faults(active: dict[str, str]) -> None:
        rbac.apply(plane.api, user_api, plane.faults, USER_GROUP)
        for stage in stages.stages(stages.delays_of(active)):
            plane.apply(stage)
    plane.on_faults = on_faults
    on_faults(plane.faults.active())
    plane.apply(*(pool.node(name) for pool in plane.pools for name in pool.names()),
                *dra_devices([name for pool in plane.pools if pool.gpus for name in pool.names()]))
    log.info("the nodes and their DRA devices applied (%.1f s)", time.monotonic() - plane.started)


def operators(plane: Plane) -> None:
    """The controllers: Kubernetes', kwok, KubeRay (answering its readiness probe), ours."""
    installed, admin = plane.installed, plane.admin_config
    plane.processes.start(
        "kube-controller-manager", components.controller_manager(installed, admin, plane.ca, plane.sa)
    )
    plane.processes.start("kube-scheduler", components.scheduler(installed, admin))
    kwok_config = components.write_private(plane.dir / "kwok.yaml", yaml.safe_dump(KWOK_CONFIG))
    plane.processes.start("kwok", components.kwok(installed, admin, kwok_config, plane.kubelet_pair, plane.ports))
    probe = free_ports(1)[0]
    plane.processes.start("kuberay-operator", *components.kuberay(installed, admin, probe))
    plane.apply(played_pods_logs(plane.dir))
    plane.kubelet = LocalKubelet(plane.api, plane.dir, plane.env, plane.faults, plane.ports.kwok, plane.scratch)
    plane.keep(plane.kubelet)
    if plane.dgds:
        plane.keep(Dynamo(plane.api, plane.faults))
    plane.keep(ComputeDomains(plane.api, plane.faults))
    plane.wait("the KubeRay operator ready", lambda: _answers(f"http://127.0.0.1:{probe}/readyz"))
    # the node lifecycle controller taints a node until kwok reports it Ready: a pod made before then
    # is told "untolerated taint" by the scheduler, and then, once it retries, something else
    plane.wait("every node Ready, without the lifecycle controller's taints",
               _NodesReady(kubernetes.client.CoreV1Api(plane.api), sum(pool.count for pool in plane.pools)))


class _NodesReady:
    """``Plane.wait``'s probe: whether ``expected`` nodes are Ready with no ``node.kubernetes.io/`` taint (a
    pool's own stay). One list, then a watch of a second per call: listing 500 nodes ten times a second
    would take the API server's CPU from the controllers it waits for."""

    def __init__(self, core: kubernetes.client.CoreV1Api, expected: int):
        self.core, self.expected = core, expected
        self.ready: dict[str, bool] = {}
        self.version: str | None = None

    def __call__(self) -> bool:
        if self.version is None:
            listing = json.loads(self.core.list_node(_preload_content=False).data)
            self.version = listing["metadata"]["resourceVersion"]
            self.ready = {node["metadata"]["name"]: _ready(node) for node in listing["items"]}
        else:
            response = self.core.list_node(watch=True, resource_version=self.version, timeout_seconds=1,
                                           _preload_content=False)
            try:
                for line in iter_resp_lines(response):
                    event = json.loads(line)
                    if event["type"] == "ERROR":  # 410: too old, list again
                        self.version = None
                        break
                    node, self.version = event["object"], event["object"]["metadata"]["resourceVersion"]
                    self.ready[node["metadata"]["name"]] = event["type"] != "DELETED" and _ready(node)
            finally:
                response.close()
                response.release_conn()
        return sum(self.ready.values()) == self.expected


def _ready(node: dict) -> bool:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    return not any(t["key"].startswith("node.kubernetes.io/") for t in spec.get("taints") or []) and any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])


def queues(plane: Plane) -> None:
    """Kueue, when ``sandbox up --kueue`` asks (the ``kueue`` start option, ``kueue.py``): its CRDs, the
    manager (its webhooks on loopback, with a certificate of ours), then its queues, active."""
    value = plane.faults.get("kueue")
    if value is None:
        return
    settings, crds = kueue.parse(value, nodes.capacity(plane.pools)), plane.installed.crds
    custom = kubernetes.client.CustomObjectsApi(plane.api)
    _establish(plane, "Kueue's CRDs", [doc for name in sorted(kueue.FILES - {kueue.WEBHOOKS})
                                        for doc in _documents(crds / name)])
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": kueue.NAMESPACE}})
    pair, certs = plane.ca.issue("kueue-webhook", "kueue-webhook", server=True), plane.dir / "kueue"
    certs.mkdir(mode=0o700, exist_ok=True)
    components.write_private(certs / "tls.crt", pair.cert.read_text())
    components.write_private(certs / "tls.key", pair.key.read_text())
    port, probe = free_ports(2)
    config = components.write_private(plane.dir / "kueue.yaml", yaml.safe_dump(
        kueue.configuration(settings, port=port, probe=probe, cert_dir=str(certs))))
    plane.processes.start("kueue", kueue.argv(plane.installed.path("kueue"), str(config)),
                          {"KUBECONFIG": str(plane.admin_config)})
    plane.wait("Kueue ready", lambda: _answers(f"http://127.0.0.1:{probe}/readyz"))
    for doc in kueue.webhooks(_documents(crds / kueue.WEBHOOKS), f"https://127.0.0.1:{port}", plane.ca.pem):
        plane.apply(doc)
    for obj in kueue.queues(settings):
        plane.apply(obj)

    def active() -> bool:
        queue = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", kueue.QUEUE)
        conditions = (queue.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)
    plane.wait(f"Kueue's ClusterQueue {kueue.QUEUE} active", active)


def front_door(plane: Plane) -> None:
    """The user's door (faults, counts, the admin endpoints), the kubeconfig to it, ``sandbox.json``."""
    port = free_ports(1)[0]
    plane.keep(FrontProxy(port, plane.ports.apiserver, plane.serving, str(plane.ca.cert), plane.faults,
                              plane.operator_token, plane.on_faults, plane.count))
    front_url = f"https://127.0.0.1:{port}"
    kubeconfig = components.write_private(plane.dir / "kubeconfig", components.kubeconfig(
        front_url, plane.ca.pem, {"token": plane.user_token}))
    components.write_private(plane.dir / "sandbox.json", json.dumps({
        "control_plane": "real", "api_url": front_url, "apiserver_url": plane.url,
        "etcd_url": f"http://127.0.0.1:{plane.ports.etcd_client}", "kubeconfig": str(kubeconfig),
        "admin_url": front_url, "ca_file": str(plane.ca.cert), "operator_token": plane.operator_token,
        "scratch": str(plane.scratch), "admin_kubeconfig": str(plane.admin_config), "daemon_pid": os.getpid(),
        "bin": str(plane.installed.bin), "pids": {name: p.pid for name, p in plane.processes.running.items()},
        "pools": [pool.summary() for pool in plane.pools],
        "versions": {"kubernetes": binaries.KUBERNETES, "etcd": binaries.ETCD, "kwok": binaries.KWOK,
                     "kuberay": binaries.KUBERAY},
    }, indent=2))


STEPS = (certificates, api_server, resources, access, operators, queues, front_door)


def serve(sandbox_dir: Path, ready_fd: int | None, faults: dict[str, str]) -> int:
    os.umask(0o077)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    plane = Plane(sandbox_dir, faults)
    try:
        for step in STEPS:
            step(plane)
        log.info("ready in %.1f s", time.monotonic() - plane.started)
        if ready_fd is not None:
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)
        while not stop.wait(1.0):
            exited = plane.processes.exited()
            if exited:
                log.error("stopping: %s exited", exited)
                return 1
        return 0
    finally:
        plane.stop()
