"""One RL step against the run's Dynamo graph, the way NeMo-RL's Dynamo backend drives it.

From the recipe's ``policy.generation.dynamo_cfg`` (``dgd_name`` is what nrl-k8s stamps in):
1. the frontend is ``http://<dgd_name>-frontend.<namespace>.svc.cluster.local:<frontend_port>/v1``
   (the namespace: ``dynamo_cfg.namespace``, else the pod's own from its service account; without
   either, the Service's short name, which a pod resolves in its own namespace);
2. the fleet is fixed from the frontend's ``/health``: its instances of component ``backend`` and
   endpoint ``rl``, one per ``instance_id``, sorted; each worker's system URL comes from Dynamo's
   RL discovery, ``GET /v1/rl/workers`` on the frontend's RL port (``DYN_RL_PORT``, 8001);
3. it generates with ``/v1/chat/completions``, plain and pre-tokenized (``nvext.token_data``);
4. on every worker: ``pause_generation``, ``update_weights_from_disk``, ``resume_generation``,
   ``get_weight_version`` (``POST <system_url>/engine/<route>``), and the fleet is discovered
   again: any change fails the step, as a refit fails.
It prints what it saw and exits 1 on the first thing that is not as expected. Standard library
only: cluster names resolve as in a pod (on the sandbox, through its cluster DNS proxy).
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.request
from pathlib import Path

TIMEOUT_S = 30
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def call(method: str, url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return json.loads(response.read() or b"{}")


def dynamo_cfg(recipe_text: str) -> dict[str, str]:
    """The scalar keys under ``dynamo_cfg:`` (the recipe is YAML; a flat block needs no parser)."""
    found = re.search(r"^(\s*)dynamo_cfg:\s*\n((?:\1\s+.*\n?)*)", recipe_text, re.MULTILINE)
    pairs = re.findall(r"^\s*(\w+):\s*(\S.*?)\s*$", found.group(2) if found else "", re.MULTILINE)
    return {key: value.strip("'\"") for key, value in pairs}


def fleet(frontend: str) -> list[int]:
    health = call("GET", f"{frontend}/health")
    return sorted({i["instance_id"] for i in health.get("instances", [])
                   if i.get("component") == "backend" and i.get("endpoint") == "rl"})


def main(recipe_path: str) -> int:
    cfg = dynamo_cfg(open(recipe_path).read())
    if "dgd_name" not in cfg:
        print(f"{recipe_path}: no policy.generation.dynamo_cfg.dgd_name", file=sys.stderr)
        return 1
    namespace = cfg.get("namespace") or (SERVICE_ACCOUNT.read_text().strip() if SERVICE_ACCOUNT.is_file() else None)
    host = f"{cfg['dgd_name']}-frontend" + (f".{namespace}.svc.cluster.local" if namespace else "")
    frontend = f"http://{host}:{cfg.get('frontend_port', 8000)}"
    print(f"frontend: {frontend}/v1")
    models = [m["id"] for m in call("GET", f"{frontend}/v1/models")["data"]]
    print(f"models: {', '.join(models)}")
    workers = fleet(frontend)
    if not workers:
        print("no worker serves the rl endpoint (is --enable-rl in the worker's args?)", file=sys.stderr)
        return 1
    print(f"fleet: {len(workers)} worker(s) with the rl endpoint: {', '.join(f'{w:x}'[:8] for w in workers)}")

    chat = {"model": models[0], "messages": [{"role": "user", "content": "w11 w12 w13"}], "max_tokens": 8}
    plain = call("POST", f"{frontend}/v1/chat/completions", chat)
    print(f"chat: {plain['choices'][0]['message']['content']!r} ({plain['usage']['completion_tokens']} tokens)")
    tokens = {**chat, "nvext": {"token_data": [11, 12, 13], "extra_fields": ["engine_data"]}}
    pre = call("POST", f"{frontend}/v1/chat/completions", tokens)
    print(f"chat from token ids: prompt {pre['usage']['prompt_tokens']} tokens, "
          f"{pre['choices'][0]['message']['content']!r}")

    listed = call("GET", f"http://{host}:8001/v1/rl/workers")["workers"]
    system_urls = {w["instance_id"]: w["system_url"] for w in listed if w.get("system_url")}
    version = f"step-{os.environ.get('NRL_K8S_RUN_ID', '0')}"
    for worker in workers:
        url = system_urls.get(worker)
        if url is None:
            print(f"worker {worker:x}: no system URL in /v1/rl/workers", file=sys.stderr)
            return 1
        steps = [call("POST", f"{url}/engine/pause_generation", {}),
                 call("POST", f"{url}/engine/update_weights_from_disk",
                      {"model_path": "/checkpoints/step", "weight_version": version}),
                 call("POST", f"{url}/engine/resume_generation", {})]
        if any(step.get("status") != "ok" for step in steps):
            print(f"worker {worker:x}: {steps}", file=sys.stderr)
            return 1
        seen = call("POST", f"{url}/engine/get_weight_version", {})
        print(f"worker {f'{worker:x}'[:8]} at {url}: paused, weights updated, resumed, "
              f"weight version {seen.get('version')}")
        if seen.get("version") != version:
            return 1
    if fleet(frontend) != workers:
        print("the fleet changed during the update", file=sys.stderr)
        return 1
    print(f"rl step done: {len(workers)} worker(s) at weight version {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("NRL_K8S_RECIPE", "nrl_k8s_run.yaml")))
