"""The local kubelet: pods whose work must really happen run as processes on this machine.

kwok plays every other pod (``stages.py``). The pods ``stages.LOCAL_PODS`` names are this
module's, once the scheduler has bound them to a node:

* a **Ray head** (``ray.io/node-type=head``): a real ``ray start --head`` of its own, in the
  head container's env (values, ``secretKeyRef``, Secret volumes written privately), so the
  drivers it runs see what they would in the pod; Ready once its node is ALIVE. Its other
  container ports are free ports named by ``NRL_K8S_SANDBOX_PORT_<port>`` (see ``PORT_ENV``);
* a **Job's pod** (KubeRay's submitter in K8sJobMode): the container's command, run as it is,
  cluster DNS names of Services (``SVC.NS.svc[.cluster.local][:PORT]``) in its args and env
  pointed at the process behind them; it ends Succeeded or Failed with the command's exit code;
* a **DGD's pod**: Dynamo's own frontend or engine (Dynamo's mocker), wired on loopback
  (``dynamo_pods.py``); Ready once its readiness probe (``/health``) answers, and not Ready again
  while it fails; its process gone, the pod ends Failed and its instances leave discovery;
* the pods of an **nrl-k8s Deployment**: HTTP stub servers (``stub.py``).

Each gets a pod IP of its own (``10.250.x.y``); the egress proxy maps that IP and a container port
to the process's loopback port (``resolve``). kwok's Logs, PortForward and Exec objects, owned by
the pod, point ``kubectl logs``, ``port-forward`` and ``exec`` at the process, its ports and a
shell in its folder; no value a container reads from a Secret is in them (``_exec_secrets``). A
deleted pod's process is stopped; so are all of them on ``stop``. Every process it starts (and
every ``kubectl exec`` into its pods) resolves cluster names as in a pod, through the sandbox's
cluster DNS proxy (``cluster_dns.py``: ``HTTP_PROXY`` in their env).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import kubernetes

from nrl_k8s.errors import SandboxError

from ..driver_env import DriverEnv
from ..dynamo_runtime.engines import NotDynamo
from ..faults import Faults
from ..pids import open_private, terminate, to_background
from ..ray_head import RayHead, free_ports, start_slot
from .cluster_dns import ClusterDns
from .controller import Watches, watch
from .dynamo_pods import ENGINE_ANNOTATION, DynamoPods, is_dynamo, main_container
from .stages import LOCAL_PODS, PLAYED_LABEL, delays_of, local_kind

log = logging.getLogger("nrl_k8s_sandbox.kubelet")
POD_CIDR = ipaddress.ip_network("10.250.0.0/16")
RAY_READY_S = 120.0
RAY_START_ATTEMPTS = 3
PROBE_S = 0.25  # how often a readiness probe asks until it first succeeds (then: the probe's periodSeconds)
UNAVAILABLE = {"error": {"message": "frontend is starting (sandbox: not serving yet)"}}
OPERATOR_AGENT = "kuberay-operator/"  # client-go's User-Agent: the binary's name
#: Every pod shares this machine's network: a container port P of a Ray head is served on a free
#: port that ``NRL_K8S_SANDBOX_PORT_P`` names to the head and the jobs it runs.
PORT_ENV = "NRL_K8S_SANDBOX_PORT_"
#: In the env of what ``kubectl exec`` starts in a Ray head (kwok runs it on this machine): the
#: pod's uid, so those processes end with the pod, as a container's do.
EXEC_MARK = "NRL_K8S_SANDBOX_EXEC_POD"
EXEC_ENV_FILE = "exec.env"  # a Ray head's env read from Secrets, for what kubectl exec starts (_exec_secrets)
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KWOK = ("kwok.x-k8s.io", "v1alpha1")
_SERVICE_DNS = re.compile(
    r"\b([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?(:(\d+))?\b"
)


def is_local(pod: dict) -> bool:
    """Whether ``pod`` is one this kubelet runs (the same terms as kwok's Stages leave out)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if PLAYED_LABEL in labels:
        return False
    owners = [o.get("kind") for o in (pod.get("metadata") or {}).get("ownerReferences") or []]
    for query, values in LOCAL_PODS:
        if query.startswith(".metadata.ownerReferences"):
            if any(kind in values for kind in owners):
                return True
            continue
        key = query.split('"')[1]
        if (values is None and key in labels) or (values is not None and labels.get(key) in values):
            return True
    return False


def _secret_env_names(container: dict) -> set[str]:
    """The names of ``container``'s env read from a Secret (``valueFrom.secretKeyRef``)."""
    return {item["name"] for item in container.get("env") or [] if (item.get("valueFrom") or {}).get("secretKeyRef")}


def _raw(call: Callable, *args: object, **kwargs: object) -> dict:
    """An API call's JSON body as the server sent it (camelCase keys)."""
    return json.loads(call(*args, _preload_content=False, **kwargs).data)


PLAYED = "[sandbox] no process runs in this pod: kwok plays it (Running and Ready, nothing executes)"


def played_pods_logs(folder: Path) -> dict:
    """kwok's ClusterLogs for every pod without Logs of its own (the pods kwok plays): one line
    saying that nothing runs in them, so ``kubectl logs`` answers for every pod."""
    path = folder / "played-pod.log"
    with open_private(path, "w") as out:
        out.write(f"{_now()} stdout F {PLAYED}\n")
    return {"apiVersion": "/".join(KWOK), "kind": "ClusterLogs", "metadata": {"name": "nrl-k8s-sandbox-played-pods"},
            "spec": {"selector": {}, "logs": [{"logsFile": str(path)}]}}


def _copy_cri(fd: int, path: Path) -> None:
    with os.fdopen(fd, "rb") as source, open_private(path, "ab") as sink:
        for line in source:
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            sink.write(stamp.encode() + b" stdout F " + line.rstrip(b"\n") + b"\n")
            sink.flush()


def _exec_processes(uid: str) -> list[int]:
    """The processes ``kubectl exec`` started in pod ``uid`` (their env holds ``EXEC_MARK``), detached ones included."""
    mark = f"{EXEC_MARK}={uid}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except (OSError, ValueError):
            continue
    return found


def _volume_owner(meta: dict) -> str:
    return (meta.get("labels") or {}).get("ray.io/cluster") or meta["name"]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _http_reply(code: int, reason: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _answers_http(port: int, path: str, timeout: float) -> bool:
    """An HTTP probe: a status from 200 to 399 (what a kubelet's httpGet probe counts as success)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
            return 200 <= response.status < 400
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@dataclass
class Local:
    """One pod's process and what it answers on."""

    namespace: str
    name: str
    uid: str
    ip: str
    folder: Path
    ports: dict[int, int] = field(default_factory=dict)  # container port -> loopback port
    process: subprocess.Popen | None = None
    owner: str = ""  # what its Secret volumes are filed under (_volume_owner)
    head: RayHead | None = None
    stopped: bool = False
    started: float = field(default_factory=time.monotonic)
    meta: dict = field(default_factory=dict)  # a DGD pod's metadata (what leaves discovery with it)
    rpc_port: int | None = None  # a DGD pod's request plane port


class LocalKubelet:
    def __init__(self, api: kubernetes.client.ApiClient, folder: Path, env: dict[str, str], faults: Faults,
                 node_port: int, scratch: Path):
        self.core = kubernetes.client.CoreV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.folder = folder
        self.env = env
        self.faults = faults
        self.node_port = node_port
        self.scratch = scratch  # short and private: Ray heads' temp dirs (socket paths are length-limited)
        self.drivers = DriverEnv(folder / "volumes")
        self.dynamo = DynamoPods(folder)
        self.cluster_dns = ClusterDns(self._service_port, self.resolve, POD_CIDR)
        self.pods: dict[str, Local] = {}  # uid -> process
        self._by_ip: dict[str, Local] = {}
        self._next_ip = 1
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watches = Watches()
        self._thread = threading.Thread(target=self._run, name="local-kubelet", daemon=True)

    # -- the egress proxy asks ------------------------------------------------------------
    def resolve(self, host: str, port: int) -> int | None:
        if host == "127.0.0.1" and port == self.node_port:
            return port  # kwok's kubelet server: logs, exec, port-forward
        with self._lock:
            local = self._by_ip.get(host)
            return None if local is None else local.ports.get(port)

    def is_http(self, host: str, port: int) -> bool:
        """Whether requests to ``host:port`` are read first (``inspect``): a Ray dashboard, a frontend's port."""
        with self._lock:
            local = self._by_ip.get(host)
            return local is not None and ((local.head is not None and port == 8265)
                                          or port == local.meta.get("frontend", -1))

    def inspect(self, host: str, port: int, method: str, path: str, headers: dict[str, str]) -> bytes | None:
        """Answers in a process's place while a fault says so.

        ``frontend-unavailable=S``: a DGD frontend answers 503 for S seconds after it started (an
        older frontend warming up), through every path from the cluster.
        ``miss-driver-submission``: KubeRay (HTTPMode) submits a job when the dashboard answers
        404 for it. While the job does not exist, the operator's own look-ups answer 503, which it
        retries without submitting: the stall of a reconcile that missed the cluster's readiness.
        Everyone else (nrl-k8s's rescue included) reaches the dashboard as it is."""
        with self._lock:
            local = self._by_ip.get(host)
        unavailable = self.faults.get("frontend-unavailable")
        if local is not None and local.head is None:
            if unavailable is None or time.monotonic() - local.started >= float(unavailable or 0):
                return None
            return _http_reply(503, "Service Unavailable", json.dumps(UNAVAILABLE).encode())
        job = re.fullmatch(r"/api/jobs/([^/?]+)", path)
        if job is None or method != "GET" or self.faults.get("miss-driver-submission") is None \
                or not headers.get("user-agent", "").startswith(OPERATOR_AGENT):
            return None
        with self._lock:
            local = self._by_ip.get(host)
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{local.ports[port]}/api/jobs/{job.group(1)}", timeout=10).close()
            return None  # the job exists: let KubeRay track it
        except urllib.error.HTTPError as err:
            if err.code != 404:
                return None
        except (urllib.error.URLError, OSError, AttributeError, KeyError):
            return None
        return _http_reply(503, "Service Unavailable",
                           b'{"error": "sandbox fault miss-driver-submission: the operator never submits"}')

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self.cluster_dns.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._watches.hang_up()
        with self._lock:
            locals_ = list(self.pods.values())
        for local in locals_:
            self._kill(local)
        self.dynamo.stop()
        self.cluster_dns.stop()

    def _run(self) -> None:
        watch("pod watch", self.core.list_pod_for_all_namespaces,
              lambda kind, pod: self._on(pod, deleted=kind == "DELETED"), self._stop, self._watches)

    def _on(self, pod: dict, *, deleted: bool) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        with self._lock:
            known = self.pods.get(uid)
        if deleted or meta.get("deletionTimestamp"):
            if known is not None:
                self._kill(known)
            return
        if known is None and (pod.get("spec") or {}).get("nodeName") and is_local(pod) \
                and (pod.get("status") or {}).get("phase") in (None, "Pending"):
            threading.Thread(target=self._launch, args=(pod,), name=f"pod-{meta['name']}", daemon=True).start()

    # -- one pod ----------------------------------------------------------------------------
    def _launch(self, pod: dict) -> None:
        meta = pod["metadata"]
        with self._lock:
            if meta["uid"] in self.pods:
                return
            ip = str(POD_CIDR[self._next_ip])
            self._next_ip += 1
            folder = self.folder / "pods" / meta["namespace"] / meta["name"]
            local = Local(meta["namespace"], meta["name"], meta["uid"], ip, folder, owner=_volume_owner(meta))
            self.pods[local.uid] = local
            self._by_ip[ip] = local
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        labels = meta.get("labels") or {}
        if self._stop.wait(delays_of(self.faults.active()).get(local_kind(pod), 0.0)):
            return  # the ``delay`` and ``slow`` faults hold it Pending, as kwok's Stages hold the others
        if not self._await_secrets(pod, local):
            return
        try:
            if labels.get("ray.io/node-type") == "head":
                self._ray_head(pod, local)
            elif any(o.get("kind") == "Job" for o in meta.get("ownerReferences") or []):
                self._job(pod, local)
            elif is_dynamo(pod):
                self._dynamo(pod, local)
            else:
                self._stub(pod, local)
        except kubernetes.client.ApiException as err:
            log.warning("pod %s/%s: %s", local.namespace, local.name, err.reason)

    def _await_secrets(self, pod: dict, local: Local) -> bool:
        """As a kubelet does (CreateContainerConfigError, retried): the first container starts only once
        every Secret it reads without ``optional`` (env ``secretKeyRef``, a Secret volume it mounts)
        exists. False when the sandbox stops or the pod goes first."""
        spec = pod.get("spec") or {}
        container = (spec.get("containers") or [{}])[0]
        volumes = {v.get("name"): v.get("secret") for v in spec.get("volumes") or [] if v.get("secret")}
        needed = {ref["name"] for item in container.get("env") or []
                  if (ref := ((item.get("valueFrom") or {}).get("secretKeyRef") or {})).get("name")
                  and not ref.get("optional")}
        needed |= {source["secretName"] for mount in container.get("volumeMounts") or []
                   if (source := volumes.get(mount.get("name"))) and source.get("secretName")
                   and not source.get("optional")}
        while any(self._read_secret(local.namespace, name) is None for name in sorted(needed)):
            if self._stop.wait(0.2) or local.stopped:  # the kubelet's retry
                return False
        return True

    def _env(self, local: Local) -> dict[str, str]:
        """What every process of a pod in ``local``'s namespace starts with: the sandbox's env and
        its cluster DNS (``cluster_dns.py``)."""
        return {**self.env, **self.cluster_dns.env(local.namespace)}

    def _log_file(self, local: Local) -> Path:
        return local.folder / "container.log"

    def _container_env(self, pod: dict, local: Local) -> dict[str, str]:
        """The first container's env; its Secret volumes written under DIR/volumes/NS/OWNER (the
        RayCluster's name for a Ray pod, else the pod's)."""
        meta = pod["metadata"]
        read = lambda name: self._read_secret(meta["namespace"], name)  # noqa: E731
        fields = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"], "metadata.uid": meta["uid"],
                  "spec.nodeName": (pod.get("spec") or {}).get("nodeName", ""), "status.podIP": local.ip,
                  "status.hostIP": "127.0.0.1"}
        return self.drivers.container_env({"namespace": meta["namespace"], "name": _volume_owner(meta)},
                                          pod.get("spec") or {}, read, fields)

    def _read_secret(self, namespace: str, name: str) -> dict | None:
        try:
            return _raw(self.core.read_namespaced_secret, name, namespace)
        except kubernetes.client.ApiException:
            return None

    def _ray_head(self, pod: dict, local: Local) -> None:
        declared = [p["containerPort"] for p in pod["spec"]["containers"][0].get("ports") or []
                    if p.get("containerPort") not in (8265, 6379, 10001)]
        extra = dict(zip(declared, free_ports(len(declared)), strict=True))
        env = {**self._env(local), **self._container_env(pod, local),
               **{f"{PORT_ENV}{k}": str(v) for k, v in extra.items()}}
        (self.scratch / local.uid[:8]).mkdir(mode=0o700, exist_ok=True)
        head = RayHead(temp_dir=self.scratch / local.uid[:8] / "ray",
                       log_path=self._log_file(local), env=env)
        local.head = head
        local.ports = {8265: head.dashboard_port, 6379: head.gcs_port, **extra}  # no Ray Client: ray_start.py
        self._running(pod, local, ready=False)
        # an exec'd process gets the container's environment, as on a cluster; kwok adds its own,
        # which is the sandbox's. What the container reads from a Secret stays out of the Exec object
        # (an API object): the shells kubectl exec starts source it from a private file (_exec_secrets).
        container = {k: v for k, v in env.items() if self.env.get(k) != v}
        hidden = _secret_env_names(pod["spec"]["containers"][0]) & container.keys()
        self._kwok_objects(pod, local, {**{k: v for k, v in container.items() if k not in hidden},
                                        **self._exec_secrets(local, {k: container[k] for k in hidden}),
                                        "RAY_ADDRESS": head.gcs_address, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                                        EXEC_MARK: local.uid})
        with start_slot(lambda: local.stopped or self._stop.is_set()) as slot:
            if not slot or local.stopped:
                return
            for attempt in range(1, RAY_START_ATTEMPTS + 1):
                with self._container_log(local) as out:
                    head.start(out)
                local.process = head.process
                try:
                    head.wait_ready(RAY_READY_S)
                    to_background(head.process.pid)  # its process group, jobs and all
                    break
                except Exception as err:  # noqa: BLE001 - any failure to start is reported on the pod
                    if head.process.poll() is None or attempt == RAY_START_ATTEMPTS or local.stopped:
                        log.warning("the Ray head of %s/%s did not start: %s", local.namespace, local.name, err)
                        self._finished(local, head.process.poll() or 1)
                        return
                    # Ray aborts it when its raylet has not registered within 30 s (a loaded machine)
                    log.warning("the Ray head of %s/%s exited during start-up (attempt %d of %d), starting it again",
                                local.namespace, local.name, attempt, RAY_START_ATTEMPTS)
                    head.stop()
        self._ready(local)
        threading.Thread(target=self._await_exit, args=(local,), daemon=True).start()

    def _exec_secrets(self, local: Local, values: dict[str, str]) -> dict[str, str]:
        """Write ``values`` as ``export NAME='value'`` lines to the pod's private ``exec.env`` (0600 in a
        0700 dir, removed with the pod); the env that makes a shell source it: ``BASH_ENV`` (every
        non-interactive bash: ``bash -c``, a script, the exec submitter's driver), ``PROMPT_COMMAND``
        (an interactive bash, before its first prompt) and ``ENV`` (an interactive ``sh``). Not
        reached: a command kwok starts without such a shell (``kubectl exec -- env``, a dash ``sh -c``)."""
        if not values:
            return {}
        path = self.scratch / local.uid[:8] / EXEC_ENV_FILE
        with open_private(path) as out:
            out.writelines(f"export {k}={shlex.quote(v)}\n" for k, v in values.items() if _SHELL_NAME.fullmatch(k))
        return {"BASH_ENV": str(path), "ENV": str(path),
                "PROMPT_COMMAND": f". {shlex.quote(str(path))}; unset PROMPT_COMMAND"}

    def _job(self, pod: dict, local: Local) -> None:
        if self.faults.get("miss-driver-submission") is not None:  # K8sJobMode's way to submit
            log.info("fault miss-driver-submission: %s/%s is never started", local.namespace, local.name)
            return
        container = pod["spec"]["containers"][0]
        env = {**self._env(local), **{k: self._in_cluster(v, local.namespace)
                              for k, v in self._container_env(pod, local).items()}}
        argv = [self._in_cluster(word, local.namespace) for word in
                [*(container.get("command") or []), *(container.get("args") or [])]]
        self._running(pod, local, ready=True)
        self._spawn(local, argv, env)
        self._kwok_objects(pod, local, {})
        self._await_exit(local)

    def _stub(self, pod: dict, local: Local) -> None:
        container_ports = sorted({p["containerPort"] for c in pod["spec"].get("containers") or []
                                  for p in c.get("ports") or [] if p.get("containerPort")})
        local.ports = dict(zip(container_ports, free_ports(len(container_ports)), strict=True))
        argv = ["http", "--label", f"{local.namespace}/{local.name}",
                *[f"--port={port}" for port in local.ports.values()]]
        self._running(pod, local, ready=False)
        self._spawn(local, [sys.executable, "-m", "nrl_k8s_sandbox.controlplane.stub", *argv], self._env(local))
        self._kwok_objects(pod, local, {})
        deadline = time.monotonic() + 60
        while not all(_listening(port) for port in local.ports.values()):
            if local.process.poll() is not None or time.monotonic() > deadline or self._stop.is_set():
                self._finished(local, local.process.poll() or 1)
                return
            time.sleep(0.05)
        self._ready(local)
        self._await_exit(local)

    def _dynamo(self, pod: dict, local: Local) -> None:
        """A DGD pod: Dynamo's process (``dynamo_pods``), Ready while its readiness probe answers."""
        local.meta = {"namespace": local.namespace, "uid": local.uid, "labels": pod["metadata"].get("labels") or {}}
        env = {**self._env(local), **self._container_env(pod, local)}
        try:
            plan = self.dynamo.plan(pod, env, local.ip)
        except (NotDynamo, SandboxError) as err:
            with open_private(self._log_file(local), "a") as out:
                out.write(f"{_now()} stdout F [sandbox] this pod cannot run here: {err}\n")
            self._running(pod, local, ready=False)
            self._kwok_objects(pod, local, {})
            self._finished(local, 1)
            return
        local.ports, local.rpc_port = plan.ports, plan.rpc_port
        if plan.launch.http_port is not None:
            local.meta["frontend"] = plan.launch.http_port
        with open_private(self._log_file(local), "a") as out:
            out.write(f"{_now()} stdout F [sandbox] runs {plan.launch.description}\n")
        self._annotate(local, {ENGINE_ANNOTATION: plan.launch.description})
        self._running(pod, local, ready=False)
        self._spawn(local, plan.argv, plan.env)
        self._kwok_objects(pod, local, {})
        probe = main_container(pod).get("readinessProbe") or {}
        threading.Thread(target=self._probe, args=(local, probe, main_container(pod)), daemon=True).start()
        self._await_exit(local)

    def _probe(self, local: Local, probe: dict, container: dict) -> None:
        """A kubelet's readiness probe (``httpGet`` on a container port; none: Ready once started):
        every ``PROBE_S`` until it first succeeds, then every ``periodSeconds``; Ready after one
        success, not Ready after ``failureThreshold`` failures in a row."""
        get = probe.get("httpGet") or {}
        port = get.get("port")
        if isinstance(port, str) and not port.isdigit():
            port = next((p["containerPort"] for p in container.get("ports") or [] if p.get("name") == port), None)
        target = local.ports.get(int(port)) if port is not None else None
        period = float(probe.get("periodSeconds") or 10)
        threshold = int(probe.get("failureThreshold") or 3)
        ready, failures = False, 0
        while not local.stopped and local.process is not None and local.process.poll() is None:
            timeout = float(probe.get("timeoutSeconds") or 1)
            ok = target is None or _answers_http(target, get.get("path") or "/", timeout)
            failures = 0 if ok else failures + 1
            if ok and not ready:
                ready = True
                self._ready(local)
            elif ready and failures >= threshold:
                ready = False
                self._ready(local, False)
            if self._stop.wait(period if ready else PROBE_S):
                return

    def _spawn(self, local: Local, argv: list[str], env: dict[str, str]) -> None:
        with self._container_log(local) as out:
            local.process = subprocess.Popen(argv, env=env, cwd=local.folder, stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        to_background(local.process.pid)

    @contextlib.contextmanager
    def _container_log(self, local: Local) -> Iterator[int]:
        """A pipe for the process's output; a thread writes its lines to the pod's log file in the
        CRI format kwok's kubelet reads (``TIME stdout F LINE``)."""
        read_end, write_end = os.pipe()
        threading.Thread(target=_copy_cri, args=(read_end, self._log_file(local)), daemon=True).start()
        try:
            yield write_end
        finally:
            os.close(write_end)

    def _await_exit(self, local: Local) -> None:
        assert local.process is not None
        code = local.process.wait()
        if not local.stopped:
            self._finished(local, code)

    def _in_cluster(self, text: str, namespace: str) -> str:
        """``text`` with every Service DNS name pointed at the local process behind it."""
        def swap(match: re.Match) -> str:
            port = int(match.group(7)) if match.group(7) else 80
            local_port = self._service_port(match.group(3), match.group(1), port)
            return match.group(0) if local_port is None else f"127.0.0.1:{local_port}"
        return _SERVICE_DNS.sub(swap, text)

    def _service_port(self, namespace: str, service: str, port: int) -> int | None:
        """The loopback port of a local process behind ``service:port``, if there is one."""
        try:
            svc = _raw(self.core.read_namespaced_service, service, namespace)
            selector = svc["spec"].get("selector") or {}
            pods = _raw(self.core.list_namespaced_pod, namespace,
                        label_selector=",".join(f"{k}={v}" for k, v in selector.items()))["items"]
        except kubernetes.client.ApiException:
            return None
        spec_port = next((p for p in svc["spec"].get("ports") or [] if p["port"] == port), None)
        if spec_port is None or not selector:
            return None
        target = spec_port.get("targetPort", port)
        with self._lock:
            for pod in pods:
                local = self.pods.get(pod["metadata"]["uid"])
                if local is None:
                    continue
                number = target if isinstance(target, int) else next(
                    (p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports") or []
                     if p.get("name") == target), None)
                if number in local.ports:
                    return local.ports[number]
        return None

    # -- what the API sees ------------------------------------------------------------------
    def _running(self, pod: dict, local: Local, *, ready: bool) -> None:
        now = _now()
        containers = pod["spec"].get("containers") or []
        status = {
            "phase": "Running", "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": local.ip, "podIPs": [{"ip": local.ip}], "startTime": now,
            "conditions": [{"type": t, "status": "True" if t in ("PodScheduled", "Initialized") or ready else "False",
                            "lastTransitionTime": now}
                           for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
            "containerStatuses": [{"name": c["name"], "image": c.get("image", ""),
                                   "imageID": f"sandbox://{c.get('image', '')}", "ready": ready, "started": True,
                                   "restartCount": 0, "state": {"running": {"startedAt": now}}} for c in containers],
        }
        self.core.patch_namespaced_pod_status(local.name, local.namespace, {"status": status})

    def _ready(self, local: Local, ready: bool = True) -> None:
        if local.stopped:
            return
        self._patch_status(local, lambda pod: {
            "conditions": [{"type": t, "status": str(ready), "lastTransitionTime": _now()}
                           for t in ("ContainersReady", "Ready")],
            "containerStatuses": [{**c, "ready": ready} for c in pod["status"].get("containerStatuses") or []],
        })

    def _annotate(self, local: Local, annotations: dict[str, str]) -> None:
        try:
            self.core.patch_namespaced_pod(local.name, local.namespace, {"metadata": {"annotations": annotations}})
        except kubernetes.client.ApiException as err:
            log.info("pod %s/%s not annotated: %s", local.namespace, local.name, err.reason)

    def _finished(self, local: Local, code: int | None) -> None:
        if local.meta:
            self.dynamo.forget(local.meta, local.rpc_port)
        now = _now()
        code = 1 if code is None else code
        reason = "Completed" if code == 0 else "Error"
        self._patch_status(
            local,
            lambda pod: {
                "phase": "Succeeded" if code == 0 else "Failed",
                "conditions": [
                    {"type": t, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
                    for t in ("ContainersReady", "Ready")
                ],
                "containerStatuses": [
                    {
                        **c,
                        "ready": False,
                        "started": False,
                        "state": {
                            "terminated": {
                                "exitCode": code,
                                "reason": reason,
                                "finishedAt": now,
                                "startedAt": (c.get("state") or {}).get("running", {}).get("startedAt", now),
                            }
                        },
                    }
                    for c in pod["status"].get("containerStatuses") or []
                ],
            },
        )

    def _patch_status(self, local: Local, change: Callable[[dict], dict]) -> None:
        try:
            pod = _raw(self.core.read_namespaced_pod_status, local.name, local.namespace)
            self.core.patch_namespaced_pod_status(local.name, local.namespace, {"status": change(pod)})
        except kubernetes.client.ApiException as err:
            log.info("pod %s/%s status not written: %s", local.namespace, local.name, err.reason)

    def _kwok_objects(self, pod: dict, local: Local, exec_env: dict[str, str]) -> None:
        """kwok's Logs, Exec (what ``kubectl exec`` starts gets ``exec_env`` and the cluster DNS)
        and PortForward for ``local``."""
        exec_env = {**self.cluster_dns.env(local.namespace), **exec_env}
        owner = [{"apiVersion": "v1", "kind": "Pod", "name": local.name, "uid": local.uid}]
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        specs = {
            "logs": {"logs": [{"containers": names, "logsFile": str(self._log_file(local)), "follow": True}]},
            "execs": {"execs": [{"containers": names, "local": {
                "workDir": str(local.folder), "envs": [{"name": k, "value": v} for k, v in exec_env.items()]}}]},
        }
        if local.ports:
            specs["portforwards"] = {"forwards": [{"ports": [port], "target": {"port": target, "address": "127.0.0.1"}}
                                                  for port, target in local.ports.items()]}
        kinds = {"logs": "Logs", "execs": "Exec", "portforwards": "PortForward"}
        for plural, spec in specs.items():
            body = {"apiVersion": "/".join(KWOK), "kind": kinds[plural],
                    "metadata": {"name": local.name, "namespace": local.namespace, "ownerReferences": owner},
                    "spec": spec}
            try:
                self.custom.create_namespaced_custom_object(*KWOK, local.namespace, plural, body)
            except kubernetes.client.ApiException as err:
                if err.status != 409:
                    log.warning("kwok %s for %s/%s: %s", plural, local.namespace, local.name, err.reason)

    def _kill(self, local: Local) -> None:
        local.stopped = True
        with self._lock:
            self.pods.pop(local.uid, None)
            self._by_ip.pop(local.ip, None)
        if local.head is not None:
            local.head.stop()
            terminate(_exec_processes(local.uid), 5.0)
            (self.scratch / local.uid[:8] / EXEC_ENV_FILE).unlink(missing_ok=True)
        elif local.process is not None and local.process.poll() is None:
            terminate([local.process.pid], 5.0)
        if local.meta:
            self.dynamo.forget(local.meta, local.rpc_port)
        self.drivers.forget(local.namespace, local.owner)
