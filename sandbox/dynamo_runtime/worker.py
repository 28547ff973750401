"""A GPU engine's stand-in: Dynamo's mocker, with Dynamo's RL routes when the manifest asks.

Run by the sandbox's kubelet in Dynamo's venv (a script, not a module of ours: that venv has
Dynamo and nothing of nrl-k8s): ``python worker.py [--world-size N] [--enable-rl] -- MOCKER ARGS``.
Without ``--enable-rl`` it is ``python -m dynamo.mocker MOCKER ARGS``. With it, every runtime the
mocker makes also gets, through Dynamo's own helpers (``dynamo.common.rl``), the routes a
``dynamo.vllm --enable-rl`` worker registers, served on its system port as ``POST
/engine/<route>``, and the ``rl`` endpoint (``NS.backend.rl``) that lists them for the frontend's
``GET /v1/rl/workers``. The routes answer with the shapes vLLM's worker answers: pausing and
resuming are state (generation itself is the mocker's), ``update_weights_from_disk`` is refused
unless paused and records the declared version, and the NCCL refit routes answer as a mock.
``$NRL_K8S_SANDBOX_SYSTEM_URL`` is the in-cluster system URL the worker reports (its pod IP and
port 9090), as a worker in a pod reports its own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

SYSTEM_URL_ENV = "NRL_K8S_SANDBOX_SYSTEM_URL"


class Engine:
    """The RL state of one worker."""

    def __init__(self) -> None:
        self.paused = False
        self.version: Any = None
        self.lock = asyncio.Lock()

    def routes(self) -> dict:
        async def liveness_probe(body: dict | None) -> dict:
            return {"status": "ok", "alive": True}

        async def pause_generation(body: dict | None) -> dict:
            async with self.lock:
                self.paused = True
            return {"status": "ok", "message": "Generation paused"}

        async def resume_generation(body: dict | None) -> dict:
            async with self.lock:
                self.paused = False
            return {"status": "ok", "message": "Generation resumed"}

        async def update_weights_from_disk(body: dict | None) -> dict:
            body = body or {}
            async with self.lock:
                if not self.paused:
                    return {"status": "error", "message": "Worker must be paused via pause_generation() before "
                            "updating weights. Call pause_generation() first, then update, then resume_generation()."}
                if not body.get("model_path"):
                    return {"status": "error", "message": "Missing 'model_path' in body"}
                if "weight_version" in body:
                    self.version = body["weight_version"]
                return {"status": "ok", "version": body.get("weight_version", "unknown"),
                        "version_declared": "weight_version" in body}

        async def get_weight_version(body: dict | None) -> dict:
            return {"status": "ok", "version": self.version, "version_declared": self.version is not None}

        async def set_weight_version(body: dict | None) -> dict:
            self.version = (body or {}).get("version")
            return {"status": "ok", "version": self.version}

        async def flush_cache(body: dict | None) -> dict:
            return {"status": "ok", "message": "Cache flushed"}

        async def mock(body: dict | None) -> dict:
            return {"status": "ok", "message": "mock: the sandbox's engine holds no weights"}

        routes = {route.__name__: route for route in (liveness_probe, pause_generation, resume_generation,
                                                       update_weights_from_disk, get_weight_version,
                                                       set_weight_version, flush_cache)}
        for name in ("init_weights_update_group", "update_weights_from_distributed", "destroy_weights_update_group",
                     "start_weight_update", "update_weights", "finish_weight_update", "update_weights_from_tensor",
                     "abort_request"):
            routes[name] = mock
        return routes


class _Reported:
    """The runtime as the RL registry sees it: its system URL the in-cluster one."""

    def __init__(self, runtime: Any, url: str | None):
        self._runtime, self._url = runtime, url

    def system_status_server_url(self) -> str | None:
        return self._url or self._runtime.system_status_server_url()


def main() -> None:
    parser = argparse.ArgumentParser(prog="worker.py")
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--enable-rl", action="store_true")
    cut = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    options = parser.parse_args(sys.argv[1:cut])
    mocker_args = sys.argv[cut + 1:]
    sys.argv = [sys.argv[0], *mocker_args]
    from dynamo.mocker import main as mocker

    if options.enable_rl:
        from dynamo.common.rl import RLRouteRegistry, register_rl_routes

        make_runtime = mocker.create_runtime

        def create_runtime(*args: Any, **kwargs: Any) -> Any:
            runtime, loop = make_runtime(*args, **kwargs)
            registry = RLRouteRegistry(_Reported(runtime, os.environ.get(SYSTEM_URL_ENV)),
                                       world_size=options.world_size)
            register_rl_routes(runtime, registry, Engine().routes(), enable_dispatch=True)
            namespace = os.environ.get("DYN_NAMESPACE", "dynamo")
            asyncio.ensure_future(runtime.endpoint(f"{namespace}.backend.rl").serve_endpoint(registry.dispatch_stream))
            return runtime, loop

        mocker.create_runtime = create_runtime
    mocker.main()


if __name__ == "__main__":
    main()
