"""DGD pods as Dynamo's own processes: how the local kubelet wires a graph on loopback.

A pod of a DGD (label ``nvidia.com/dynamo-graph-deployment-name``) runs its ``main`` container's
command in Dynamo's venv (``dynamo_runtime``: the frontend as written, GPU engines as Dynamo's
mocker). What a real operator and cluster give a graph, the sandbox gives it here, all on
127.0.0.1 with ports the sandbox allocates:

* discovery: Dynamo's file backend in a folder of the graph's own (``DYN_FILE_KV``);
* the request plane: tcp (``DYN_TCP_RPC_HOST``, and ``DYN_TCP_RPC_PORT`` chosen here, so a
  process that dies is taken out of discovery as Kubernetes' backend would: ``forget``);
* the event plane: zmq through a broker of the graph's own (``dynamo_runtime/broker.py``);
* the pod's in-cluster ports (the frontend's 8000, a worker's system port 9090, the frontend's
  RL listener) on loopback ports: ``DYN_SYSTEM_PORT``, ``DYN_RL_PORT`` and ``--http-port`` are
  rewritten to them, and the egress proxy, ``kubectl port-forward`` and the Service map the
  in-cluster ports back.

The engine that really runs is written on the pod (annotation ``ENGINE_ANNOTATION``, which
``kubectl describe pod`` shows) and at the top of its log.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from ..dynamo_runtime import engines, model, venv
from ..pids import open_private, terminate, to_background
from ..ray_head import free_ports

log = logging.getLogger("nrl_k8s_sandbox.dynamo_pods")
LABEL_DGD = "nvidia.com/dynamo-graph-deployment-name"
ENGINE_ANNOTATION = "sandbox.nrl-k8s.io/engine"
BROKER = Path(engines.__file__).with_name("broker.py")
RL_PORT = 8001  # the frontend's RL listener when DYN_RL_PORT is not set
TRUE = engines.TRUE


@dataclass
class Graph:
    """One DGD's shared wiring: its discovery folder and event broker, and the pods using them."""

    folder: Path
    broker: subprocess.Popen
    xsub: int
    xpub: int
    pods: set[str] = field(default_factory=set)

    def env(self) -> dict[str, str]:
        return {
            "DYN_DISCOVERY_BACKEND": "file", "DYN_FILE_KV": str(self.folder / "discovery"),
            "DYN_REQUEST_PLANE": "tcp", "DYN_TCP_RPC_HOST": "127.0.0.1", "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1",
            "DYN_EVENT_PLANE": "zmq", "DYN_EVENT_PLANE_HOST": "127.0.0.1",
            "DYN_ZMQ_BROKER_URL": f"xsub=tcp://127.0.0.1:{self.xsub} , xpub=tcp://127.0.0.1:{self.xpub}",
            "DYN_SYSTEM_HOST": "127.0.0.1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        }


@dataclass(frozen=True)
class Plan:
    """What to start for one pod: argv, env, the in-cluster -> loopback ports, what runs."""

    argv: list[str]
    env: dict[str, str]
    ports: dict[int, int]
    launch: engines.Launch
    rpc_port: int


def is_dynamo(pod: dict) -> bool:
    return LABEL_DGD in ((pod.get("metadata") or {}).get("labels") or {})


def main_container(pod: dict) -> dict:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return next((c for c in containers if c.get("name") == "main"), containers[0])


class DynamoPods:
    """The graphs of the DGD pods this kubelet runs (``folder``/dynamo/NS/DGD), and the tiny models."""

    def __init__(self, folder: Path):
        self.folder = folder / "dynamo"
        self.models = venv.root() / "models"
        self._graphs: dict[tuple[str, str], Graph] = {}
        self._lock = threading.Lock()

    def plan(self, pod: dict, env: dict[str, str], pod_ip: str) -> Plan:
        """How to run ``pod`` (its container env ``env``, sandbox env under it); NotDynamo or
        SandboxError (no Dynamo venv) when it cannot run."""
        python = venv.python()
        meta = pod["metadata"]
        declared = [p["containerPort"] for p in main_container(pod).get("ports") or [] if p.get("containerPort")]
        ports: dict[int, int] = {}

        def local_port(port: int) -> int:
            if port not in ports:
                ports[port] = free_ports(1)[0]
            return ports[port]

        container = main_container(pod)
        launch = engines.launch([str(w) for w in container.get("command") or []],
                                [str(w) for w in container.get("args") or []], env, local_port,
                                lambda model_id: model.ensure(self.models, model_id))
        for port in declared:
            local_port(port)
        wiring = self._join(meta["namespace"], meta["labels"][LABEL_DGD], meta["uid"])
        env = {**env, **wiring.env()}
        if "DYN_SYSTEM_PORT" in env:
            system = int(env["DYN_SYSTEM_PORT"])
            env["DYN_SYSTEM_PORT"] = str(local_port(system))
            env["NRL_K8S_SANDBOX_SYSTEM_URL"] = f"http://{pod_ip}:{system}"
        if launch.module == engines.FRONTEND and env.get("DYN_ENABLE_RL", "").strip().lower() in TRUE:
            env["DYN_RL_PORT"] = str(local_port(int(env.get("DYN_RL_PORT") or RL_PORT)))
        rpc_port = free_ports(1)[0]
        env["DYN_TCP_RPC_PORT"] = str(rpc_port)
        return Plan([str(python), *launch.argv], env, ports, launch, rpc_port)

    def _join(self, namespace: str, dgd: str, uid: str) -> Graph:
        """The graph's wiring, its broker started with its first pod."""
        with self._lock:
            graph = self._graphs.get((namespace, dgd))
            if graph is None or graph.broker.poll() is not None:
                folder = self.folder / namespace / dgd
                (folder / "discovery").mkdir(mode=0o700, parents=True, exist_ok=True)
                xsub, xpub = free_ports(2)
                with open_private(folder / "broker.log", "ab") as out:
                    broker = subprocess.Popen([str(venv.python()), str(BROKER), str(xsub), str(xpub)],
                                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                              start_new_session=True)
                to_background(broker.pid)
                graph = Graph(folder, broker, xsub, xpub, graph.pods if graph else set())
                self._graphs[(namespace, dgd)] = graph
            graph.pods.add(uid)
            return graph

    def forget(self, pod_meta: dict, rpc_port: int | None) -> None:
        """A pod of the graph is gone: its instances leave discovery; the last pod takes the
        graph's broker and folder with it."""
        namespace, dgd = pod_meta["namespace"], (pod_meta.get("labels") or {}).get(LABEL_DGD, "")
        with self._lock:
            graph = self._graphs.get((namespace, dgd))
            if graph is None:
                return
            if rpc_port is not None:
                _withdraw(graph.folder / "discovery", rpc_port)
            graph.pods.discard(pod_meta["uid"])
            if graph.pods:
                return
            del self._graphs[(namespace, dgd)]
        terminate([graph.broker.pid], 5.0)
        shutil.rmtree(graph.folder, ignore_errors=True)

    def stop(self) -> None:
        with self._lock:
            graphs, self._graphs = list(self._graphs.values()), {}
        terminate([graph.broker.pid for graph in graphs if graph.broker.poll() is None], 5.0)


def _withdraw(discovery: Path, rpc_port: int) -> None:
    """Remove from file discovery every registration of the process whose request plane was on
    ``rpc_port`` (its instances, and the model cards under the same lease)."""
    mark = f"127.0.0.1:{rpc_port}/"
    leases = set()
    for path in discovery.rglob("*"):
        if not path.is_file():
            continue
        try:
            tcp = (json.loads(path.read_text()).get("transport") or {}).get("tcp") or ""
        except (OSError, ValueError, AttributeError):
            continue
        if tcp.startswith(mark):
            leases.add(urllib.parse.unquote(path.name).rsplit("/", 1)[-1])
    for path in discovery.rglob("*"):
        if path.is_file() and urllib.parse.unquote(path.name).rsplit("/", 1)[-1] in leases:
            path.unlink(missing_ok=True)
