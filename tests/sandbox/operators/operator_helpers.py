"""Helpers for the operator tests: the service proxy, field access, manifests (waiting: ``sandbox_harness``)."""

from __future__ import annotations

from kubernetes import client


def proxy(api: client.ApiClient, method: str, namespace: str, target: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    """A request through the API server's service proxy (``target`` = ``NAME:PORT``)."""
    method, url, headers, data, post = api.param_serialize(
        method,
        f"/api/v1/namespaces/{namespace}/services/{target}/proxy/{path.lstrip('/')}",
        header_params={"Accept": "application/json", **({"Content-Type": "application/json"} if body else {})},
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
                    "extraPodSpec": {"mainContainer": {"command": ["python3", "-m", "dynamo.frontend"]}},
                },
                "VllmDecodeWorker": {
                    "componentType": "worker",
                    "replicas": worker_replicas,
                    "resources": {"limits": {"gpu": "1"}},
                    "extraPodSpec": {"mainContainer": {"args": ["--model", model]}},
                },
            },
        },
    }
