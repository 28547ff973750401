"""The serving half for real: a DGD nrl-k8s brings up runs Dynamo's own frontend and engine (the
mocker) in the sandbox, and everything NeMo-RL's Dynamo backend and its peers rely on answers.

Each test brings up the sandbox pair's DGD with the installed CLI (`cluster up --target
dynamo.serving`: no Ray head needed) and then talks to Dynamo the way a user or a trainer does:
through `nrl-k8s dashboard --target` and `kubectl port-forward` from the laptop, and from inside
the cluster (`kubectl exec` into a pod: cluster DNS names, pod IPs) as a driver does. No stand-in
answers any of it: the frontend, the discovery and the RL routes are ai-dynamo 1.6.1's.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, History, interruptible, run_cli, unique

from nrl_k8s_sandbox.pids import marked

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
MODEL = "Qwen/Qwen3-0.6B"
DGD = ("nvidia.com", "v1alpha1", "dynamographdeployments")
LABEL = "nvidia.com/dynamo-graph-deployment-name"
WORDS = re.compile(r"^( ?w\d+)+$")  # the tiny model's vocabulary: every token id decodes to a word


class Graph:
    """The sandbox pair's DGD under a name of this test's, in its namespace."""

    def __init__(self, sandbox, namespace: str):
        self.sandbox, self.ns, self.name = sandbox, namespace, unique("dyn")
        self.env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": "it"}
        self.overrides = [f"infra.namespace={namespace}", f"infra.dynamo.serving.name={self.name}"]

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return run_cli([*args, *PAIR, *self.overrides], env=self.env)

    def up(self) -> None:
        result = self.cli("cluster", "up", "--target", "dynamo.serving")
        assert result.returncode == 0, result.stderr

    def pod(self, component_type: str) -> dict:
        with self.sandbox.api_client() as api:
            pods = client.CoreV1Api(api).list_namespaced_pod(
                self.ns, label_selector=f"{LABEL}={self.name},nvidia.com/dynamo-component-type={component_type}",
                _preload_content=False)
        running = [p for p in json.loads(pods.data)["items"] if p["status"].get("phase") == "Running"]
        assert len(running) == 1, [p["metadata"]["name"] for p in running]
        return running[0]

    def exec(self, pod: dict, *command: str) -> subprocess.CompletedProcess:
        return self.sandbox.kubectl("exec", "-n", self.ns, pod["metadata"]["name"], "--", *command)


@pytest.fixture
def graph(sandbox, sandbox_namespace):
    graph = Graph(sandbox, sandbox_namespace)
    graph.up()
    return graph


@contextmanager
def relay(graph: Graph):
    """`nrl-k8s dashboard --target dynamo.serving` running: an httpx client at its URL, then Ctrl-C."""
    proc = interruptible([NRL_K8S, "dashboard", "--target", "dynamo.serving", "--port", "0", *PAIR,
                          *graph.overrides], graph.env)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.poll() is not None else url
        base, token = url.split("/?token=")
        with httpx.Client(base_url=base, headers={"Authorization": f"token {token}"}, timeout=60,
                          trust_env=False) as http:
            yield http
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=DEADLINE_S)


def _rl_instances(health: dict) -> list[int]:
    return sorted({i["instance_id"] for i in health["instances"]
                   if i["component"] == "backend" and i["endpoint"] == "rl"})


def test_the_frontend_is_dynamos_own_and_serves_generation(graph):
    with relay(graph) as http:
        assert [m["id"] for m in http.get("/v1/models").json()["data"]] == [MODEL]
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "w5 w6 w7"}], "max_tokens": 6}
        plain = http.post("/v1/chat/completions", json=chat)
        assert plain.status_code == 200, plain.text
        assert plain.json()["usage"]["completion_tokens"] == 6
        assert WORDS.match(plain.json()["choices"][0]["message"]["content"])
        # verifiers' dynamo_chat request: a pre-tokenized prompt, engine data asked for, logprobs
        pre = http.post("/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": "ignored"}], "max_completion_tokens": 4,
            "logprobs": True, "top_logprobs": 1,
            "nvext": {"token_data": [11, 12, 13, 14, 15], "extra_fields": ["engine_data"]}})
        assert pre.status_code == 200, pre.text
        assert (pre.json()["usage"]["prompt_tokens"], pre.json()["usage"]["completion_tokens"]) == (5, 4)
        unknown = http.post("/v1/chat/completions", json={**chat, "nvext": {"no_such_field": 1}})
        assert unknown.status_code == 400  # the real frontend validates nvext
        health = http.get("/health").json()
        assert health["status"] == "healthy" and len(_rl_instances(health)) == 1

    worker = graph.pod("worker")
    described = graph.sandbox.kubectl("describe", "pod", "-n", graph.ns, worker["metadata"]["name"]).stdout
    assert "sandbox.nrl-k8s.io/engine: dynamo.mocker (Dynamo's GPU-less engine) for dynamo.vllm" in described
    logs = graph.sandbox.kubectl("logs", "-n", graph.ns, worker["metadata"]["name"]).stdout
    assert logs.startswith("[sandbox] runs dynamo.mocker")


def test_kubectl_port_forward_reaches_the_frontend_service(graph):
    kubectl = str(Path(graph.sandbox.info["bin"]) / "kubectl")
    forward = subprocess.Popen([kubectl, "port-forward", "-n", graph.ns, f"svc/{graph.name}-frontend", ":8000"],
                               env=graph.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = forward.stdout.readline()
        port = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert port, line + (forward.stderr.read() if forward.poll() is not None else "")
        models = httpx.get(f"http://127.0.0.1:{port.group(1)}/v1/models", timeout=60, trust_env=False)
        assert [m["id"] for m in models.json()["data"]] == [MODEL]
    finally:
        forward.terminate()
        forward.wait(timeout=DEADLINE_S)


PRIME_RL = """
import json, sys, urllib.request
opener = urllib.request.build_opener()  # the pod's env: cluster names through the sandbox's DNS
def call(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    return json.loads(opener.open(request, timeout=60).read())
workers = call("http://%s-frontend:8001/v1/rl/workers")["workers"]
url = workers[0]["system_url"]
seen = {"workers": workers, "refused": call(url + "/engine/update_weights_from_disk", {"model_path": "/ckpt"})}
seen["pause"] = call(url + "/engine/pause_generation", {})
seen["update"] = call(url + "/engine/update_weights_from_disk", {"model_path": "/ckpt", "weight_version": "v7"})
seen["resume"] = call(url + "/engine/resume_generation", {})
seen["version"] = call(url + "/engine/get_weight_version", {})
print(json.dumps(seen))
"""


def test_prime_rls_wire_shape_from_inside_the_cluster(graph):
    """prime-rl's Dynamo client: `GET /v1/rl/workers` on the frontend's RL port, then `POST
    {system_url}/engine/...` on each worker: the Service's short name and the worker's pod IP, from
    a process in a pod of the namespace."""
    seen = json.loads(graph.exec(graph.pod("frontend"), "python3", "-c", PRIME_RL % graph.name).stdout)
    (worker,) = seen["workers"]
    assert worker["system_url"] == f"http://{graph.pod('worker')['status']['podIP']}:9090"
    assert (worker["component"], worker["endpoint"], worker["world_size"]) == ("backend", "rl", 1)
    assert {"pause_generation", "resume_generation", "update_weights_from_disk", "flush_cache",
            "get_weight_version", "liveness_probe", "init_weights_update_group",
            "update_weights_from_distributed"} <= set(worker["routes"])
    assert seen["refused"]["status"] == "error" and "paused" in seen["refused"]["message"]
    assert [seen[step]["status"] for step in ("pause", "update", "resume")] == ["ok", "ok", "ok"]
    assert seen["version"] == {"status": "ok", "version": "v7", "version_declared": True}


def test_the_example_driver_does_an_rl_step_as_nemo_rl_does(graph, tmp_path):
    """examples/sandbox_code/rl_step.py (what `make demo`'s driver runs), from a pod, on a recipe
    naming the DGD as nrl-k8s stamps it: discovery from /health, generation plain and from token
    ids, pause / update / resume on every worker."""
    recipe = f"policy:\n  generation:\n    backend: dynamo\n    dynamo_cfg:\n      dgd_name: {graph.name}\n" \
             f"      namespace: {graph.ns}\n"
    script = (ROOT / "examples/sandbox_code/rl_step.py").read_text()
    frontend = graph.pod("frontend")
    graph.exec(frontend, "sh", "-c", f"cat > recipe.yaml <<'EOF'\n{recipe}EOF")
    graph.exec(frontend, "sh", "-c", f"cat > rl_step.py <<'EOF'\n{script}EOF")
    out = graph.exec(frontend, "python3", "rl_step.py", "recipe.yaml").stdout
    assert f"frontend: http://{graph.name}-frontend.{graph.ns}.svc.cluster.local:8000/v1" in out
    assert f"models: {MODEL}" in out and "fleet: 1 worker(s) with the rl endpoint" in out
    assert re.search(r"chat from token ids: prompt 3 tokens", out)
    assert "paused, weights updated, resumed, weight version step-" in out
    assert out.rstrip().splitlines()[-1].startswith("rl step done: 1 worker(s)")


def test_a_killed_worker_makes_the_dgd_not_ready_and_status_says_so(graph):
    worker = graph.pod("worker")
    mark = f"NRL_K8S_SANDBOX_SYSTEM_URL=http://{worker['status']['podIP']}:9090".encode()
    # pod IPs are per sandbox: another sandbox on the machine may run a pod of the same IP
    pids = [pid for pid in marked(graph.sandbox.dir) if _has(Path(f"/proc/{pid}/environ"), mark)]
    assert len(pids) == 1, pids
    with graph.sandbox.api_client() as api, History(
            client.CustomObjectsApi(api).list_namespaced_custom_object, *DGD[:2], graph.ns, DGD[2],
            field_selector=f"metadata.name={graph.name}") as dgds, \
            graph.sandbox.fault("delay", "dgd:3600"):  # the replacement pod waits: the DGD stays not ready
        os.kill(pids[0], signal.SIGKILL)
        dgds.wait(lambda h: _ready(h.objects().get(graph.name)) == "False", what="the DGD not Ready")
        status = graph.cli("status", "-o", "json")
        assert status.returncode == 0, status.stderr
        (dyn,) = json.loads(status.stdout)["dynamo"]
        assert (dyn["state"], dyn["ready"]) == ("pending", False)
        assert {s["name"]: s["ready"] for s in dyn["services"]}["VllmDecodeWorker"] == 0
        assert dyn["frontend"]["rl_instances"] == []  # the dead worker left discovery
        table = graph.cli("status").stdout
        assert "VllmDecodeWorker     worker     0/1 ready" in table


def _ready(dgd: dict | None) -> str | None:
    return next((c["status"] for c in ((dgd or {}).get("status") or {}).get("conditions") or []
                 if c["type"] == "Ready"), None)


def _has(environ: Path, mark: bytes) -> bool:
    try:
        return mark in environ.read_bytes().split(b"\0")
    except OSError:
        return False
