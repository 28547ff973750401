"""Helpers for the operator tests: the service proxy, field access, manifests, a held job
(waiting: ``sandbox_harness``)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import stat
from pathlib import Path

from kubernetes import client
from sandbox_harness import eventually, observe, unique


def await_endpoints(api: client.ApiClient, namespace: str, service: str) -> None:
    """Until ``service`` has a ready endpoint: the API server's service proxy answers 503 itself
    ("no endpoints available") before that, however ready the object behind it reports itself."""
    observe(client.DiscoveryV1Api(api).list_namespaced_endpoint_slice, namespace,
            label_selector=f"kubernetes.io/service-name={service}",
            until=lambda slices: any((e.get("conditions") or {}).get("ready")
                                     for s in slices.values() for e in s.get("endpoints") or []))


def proxy(api: client.ApiClient, method: str, namespace: str, target: str, path: str,
          body: dict | bytes | None = None) -> tuple[int, bytes]:  # fmt: skip
    """A request through the API server's service proxy (``target`` = ``NAME:PORT``); a bytes
    ``body`` is sent as it is."""
    content_type = "application/octet-stream" if isinstance(body, bytes) else "application/json"
    method, url, headers, data, post = api.param_serialize(
        method,
        f"/api/v1/namespaces/{namespace}/services/{target}/proxy/{path.lstrip('/')}",
        header_params={"Accept": "application/json", **({"Content-Type": content_type} if body is not None else {})},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, headers, data, post)
    return response.status, response.read()


def field(obj: dict | None, *path: str):
    """``obj[path[0]][path[1]]...`` or None."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in field(obj, "status", "conditions") or [] if c["type"] == kind), {})


def ray_cluster_spec(workers: int = 1) -> dict:
    return {
        "rayVersion": "2.60.0",
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0"}]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]}},
            }
        ],
    }


def rayjob(name: str, entrypoint: str, **spec) -> dict:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": entrypoint,
            "submissionMode": "HTTPMode",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": ray_cluster_spec(),
            **spec,
        },
    }


IMAGE = (
    "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0"  # a Deployment needs one: the API server refuses a container without
)


def dgd(name: str, *, worker_replicas: int = 1, model: str = "Qwen/Qwen3-0.6B") -> dict:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name},
        "spec": {
            "backendFramework": "vllm",
            "services": {
                "Frontend": {
                    "componentType": "frontend",
                    "replicas": 1,
                    "extraPodSpec": {
                        "mainContainer": {"image": IMAGE, "command": ["python3", "-m", "dynamo.frontend"]}
                    },
                },
                "VllmDecodeWorker": {
                    "componentType": "worker",
                    "replicas": worker_replicas,
                    "resources": {"limits": {"gpu": "1"}},
                    "extraPodSpec": {"mainContainer": {"image": IMAGE, "args": ["--model", model]}},
                },
            },
        },
    }


HELD_DRIVER = """
import json, os, sys
import ray

ray.init()

@ray.remote
def pid():
    return os.getpid()

@ray.remote
class Actor:
    def pid(self):
        return os.getpid()

release = os.open(sys.argv[2], os.O_RDWR)  # the FIFO, opened before the test learns we are up
actor = Actor.remote()  # kept referenced: the actor lives until the driver exits
pids = {"driver": os.getpid(), "task": ray.get(pid.remote()), "actor": ray.get(actor.pid.remote())}
with open(sys.argv[1] + ".tmp", "w") as out:
    json.dump(pids, out)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
os.read(release, 1)  # blocks until the test writes to the FIFO
"""


class HeldJob:
    """A RayJob in ``default`` whose driver, with a task worker and an actor, runs until ``release()``;
    ``pids`` holds their pids once they all run."""

    def __init__(self, box, tmp_path: Path):
        self.name = unique("held")
        script, pids_file, self._fifo = tmp_path / "driver.py", tmp_path / "pids.json", tmp_path / "release"
        script.write_text(HELD_DRIVER)
        os.mkfifo(self._fifo)
        entrypoint = shlex.join(["python", str(script), str(pids_file), str(self._fifo)])
        with box.api_client() as api:
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                "ray.io", "v1", "default", "rayjobs", rayjob(self.name, entrypoint)
            )
        found = eventually(
            lambda: pids_file.exists() and pids_file.read_text(), what="the held job's driver, task and actor"
        )
        self.pids: dict[str, int] = json.loads(found)
        self._box = box

    def release(self) -> None:
        """Let the driver exit (zero)."""
        fd = os.open(self._fifo, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)

    def final_status(self) -> str:
        """Wait (watch) for the job to end; return its final ``jobStatus``."""
        with self._box.api_client() as api:
            done = observe(client.CustomObjectsApi(api).list_namespaced_custom_object,
                           "ray.io", "v1", "default", "rayjobs", field_selector=f"metadata.name={self.name}",
                           until=lambda o: field(o.get(self.name), "status", "jobStatus")
                           in ("SUCCEEDED", "FAILED", "STOPPED"))  # fmt: skip
        return done[self.name]["status"]["jobStatus"]


def served_deployment(api: client.ApiClient, namespace: str, port: int = 80) -> str:
    """A Deployment whose pod the sandbox's local kubelet runs (an HTTP stub answering 200), and a
    Service of the same name in front of it; returns the name once the service proxy reaches it."""
    name = unique("web")
    labels = {"app": name, "nrl-k8s.io/deployment": name}
    client.AppsV1Api(api).create_namespaced_deployment(namespace, {
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "web", "image": "example/web:1", "ports": [{"containerPort": port}]}]}}},
    })  # fmt: skip
    client.CoreV1Api(api).create_namespaced_service(namespace, {
        "metadata": {"name": name}, "spec": {"selector": {"app": name}, "ports": [{"port": port, "targetPort": port}]}})
    eventually(lambda: proxy(api, "GET", namespace, f"{name}:{port}", "")[0] == 200, what=f"Service {name} serving")
    return name


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return True
    except OSError:
        return False


def not_private(root: Path, *, dirs: bool = True) -> list[str]:
    """``root`` and everything under it that group or others may access (symlinks skipped;
    directories too unless ``dirs``)."""
    found = []
    for path in [root, *root.rglob("*")]:
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue  # removed meanwhile
        if stat.S_ISLNK(info.st_mode) or (stat.S_ISDIR(info.st_mode) and not dirs):
            continue
        if info.st_mode & 0o077:
            found.append(f"{stat.filemode(info.st_mode)} {path}")
    return found
