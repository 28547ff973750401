"""Benchmark: a DGD's time to serving with Dynamo's real runtime, and the sandbox's idle CPU with one up.

    .venv/bin/python bench/dynamo_serving.py [--runs N] [--window S]

Starts a sandbox of its own in a temporary folder (and always stops it). Time to serving, per run:
from creating ``examples_dgd/qwen3_0.6b_kind_v1beta1.yaml`` (a unique name, an image on each
``main`` container) until its frontend answers a real chat completion (200) through the API
server's service proxy. The waits are watches with a deadline: the DGD ``Ready`` (the split
printed), the frontend Service's EndpointSlice ready (what the service proxy routes by), and the
frontend's own log, followed as a stream, saying it enabled its chat route once it discovered the
worker's model; then one request. The baseline, in the same run: an nrl-k8s Deployment of one pod
(the sandbox's HTTP stub) and its Service, from creating them until the same request through the
same proxy answers 200. Each is deleted and its pods watched until gone before the next run.

Idle CPU: the CPU time (utime + stime of /proc/PID/stat) of the sandbox daemon and every process
under it (the control plane ``sandbox.json`` lists is started by it), over ``--window`` seconds
with no DGD, then again with one DGD up and served; the Dynamo processes are those whose command
line names Dynamo's venv (``ai-dynamo-``). Prints CPU % of one core for each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import yaml

from nrl_k8s.kinds import deployment, dgd, dgd_v1beta1, pod, service
from nrl_k8s.kinds.base import Kind
from nrl_k8s.kinds.readiness import Pending, Readiness, Ready
from nrl_k8s.kube.client import Kube

ROOT = Path(__file__).resolve().parent.parent
NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))
MANIFEST = ROOT / "examples_dgd/qwen3_0.6b_kind_v1beta1.yaml"
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"  # the API server refuses a container without one
ENDPOINT_SLICE = Kind("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
PORT = dgd.FRONTEND_PORT
MODEL = "Qwen/Qwen3-0.6B"  # the worker's --model in MANIFEST
CHAT_ROUTE_UP = "chat endpoints enabled"  # Dynamo 1.6.1's frontend, once it serves a discovered model
DYNAMO = "ai-dynamo-"  # in the path of Dynamo's venv, hence in the command line of its processes
DEADLINE_S = 180.0
TICK = os.sysconf("SC_CLK_TCK")


def chat(kube: Kube, service_name: str) -> None:
    """One chat completion through the API server's service proxy; it must answer 200."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8}
    status, reply = kube.proxy("POST", service_name, PORT, "v1/chat/completions", json=body, timeout_s=30)
    if status != 200:
        raise SystemExit(f"{service_name}: chat completion answered {status}: {reply[:300]!r}")


def endpoint_ready(kube: Kube, service_name: str) -> None:
    """Watch the Service's EndpointSlices until one endpoint is ready: the service proxy routes by them."""
    def ready(slices: list[dict]) -> Readiness:
        endpoints = [e for s in slices for e in s.get("endpoints") or []]
        if any((e.get("conditions") or {}).get("ready") for e in endpoints):
            return Ready()
        return Pending(f"{len(endpoints)} endpoint(s), none ready")

    kube.wait(ENDPOINT_SLICE, ready, label_selector=f"kubernetes.io/service-name={service_name}",
              timeout_s=DEADLINE_S, what=f"Service {service_name}'s endpoints")


def logged(kube: Kube, pod_name: str, text: str) -> None:
    """Follow the pod's log (a stream from its start) until ``text`` is in it, within the deadline."""
    seen = threading.Event()

    def follow() -> None:
        tail = ""
        for chunk in kube.logs(pod_name, follow=True):
            tail = tail[-len(text):] + chunk
            if text in tail:
                seen.set()
                return

    threading.Thread(target=follow, daemon=True).start()
    if not seen.wait(DEADLINE_S):
        raise SystemExit(f"pod {pod_name} did not log {text!r} within {DEADLINE_S:.0f} s")


def gone(kube: Kube, kind: Kind, name: str, pods: str) -> None:
    """Delete the object, then watch until it and its pods (label selector ``pods``) are gone."""
    kube.delete(kind, name)
    kube.wait_gone(kind, name, timeout_s=DEADLINE_S)
    kube.wait(pod.KIND, lambda found: Pending(f"{len(found)} pod(s) left") if found else Ready(),
              label_selector=pods, timeout_s=DEADLINE_S, what=f"the pods of {kind.kind} {name}")


def dgd_manifest(name: str) -> dict:
    manifest = yaml.safe_load(MANIFEST.read_text())
    manifest["metadata"]["name"] = name
    for component in manifest["spec"]["components"]:
        for container in component["podTemplate"]["spec"]["containers"]:
            if container["name"] == "main":
                container["image"] = IMAGE
    return manifest


def serve_dgd(kube: Kube) -> tuple[str, float, float]:
    """(name, seconds to Ready, seconds to serving) of a new DGD."""
    name = f"bench-{uuid.uuid4().hex[:6]}"
    began = time.monotonic()
    kube.create(dgd_v1beta1.KIND, dgd_manifest(name))
    kube.wait(dgd_v1beta1.KIND, lambda obj: dgd.readiness(obj) if obj else Pending("absent"), name=name,
              timeout_s=DEADLINE_S, pods=dgd.pod_selector(name))
    ready = time.monotonic() - began
    frontend = dgd.frontend_service(name)
    endpoint_ready(kube, frontend)
    pods = kube.list(pod.KIND, label_selector=f"{dgd.pod_selector(name)},nvidia.com/dynamo-component-type=frontend")
    logged(kube, pods[0]["metadata"]["name"], CHAT_ROUTE_UP)
    chat(kube, frontend)
    return name, ready, time.monotonic() - began


def serve_stub(kube: Kube) -> tuple[str, float]:
    """(name, seconds to serving) of a new one-pod nrl-k8s Deployment and its Service."""
    name = f"stub-{uuid.uuid4().hex[:6]}"
    labels = {"app": name, "nrl-k8s.io/deployment": name}
    began = time.monotonic()
    template = {"metadata": {"labels": labels}, "spec": {"containers": [
        {"name": "web", "image": "example/web:1", "ports": [{"containerPort": PORT}]}]}}
    kube.create(deployment.KIND, {"metadata": {"name": name}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": template}})
    kube.create(service.KIND, {"metadata": {"name": name},
                               "spec": {"selector": {"app": name}, "ports": [{"port": PORT, "targetPort": PORT}]}})
    endpoint_ready(kube, name)
    chat(kube, name)
    return name, time.monotonic() - began


def processes(roots: set[int]) -> dict[tuple[int, int], tuple[float, str, bool]]:
    """(pid, start time) -> (CPU seconds, name, is Dynamo's) of ``roots`` and every process under
    them; the name is the command's (``comm``), "Dynamo's " before it for Dynamo's processes."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue  # ended meanwhile
            fields = text[text.rindex(")") + 2:].split()  # from field 3, state
            stats[int(entry)] = (int(fields[1]), text[text.index("(") + 1:text.rindex(")")], fields)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, [pid for pid in roots if pid in stats]
    while todo:
        pid = todo.pop()
        _, name, fields = stats[pid]
        if (pid, int(fields[19])) in found:
            continue  # a root under another root
        try:
            dynamo = DYNAMO in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        found[pid, int(fields[19])] = ((int(fields[11]) + int(fields[12])) / TICK,
                                       f"Dynamo's {name}" if dynamo else name, dynamo)
        todo += children.get(pid, [])
    return found


def idle_cpu(roots: set[int], window_s: float) -> tuple[float, float, int, list[tuple[str, float]]]:
    """(CPU % of one core of the whole tree, of Dynamo's processes, Dynamo processes, the top three
    by name) over ``window_s`` seconds of waiting: the wait is the measurement."""
    before = processes(roots)
    began = time.monotonic()
    time.sleep(window_s)
    after = processes(roots)
    elapsed = time.monotonic() - began
    spent: dict[str, float] = {}
    total = dynamo = 0.0
    for key, (seconds, name, is_dynamo) in after.items():
        used = seconds - before.get(key, (0.0,))[0]
        total += used
        dynamo += used if is_dynamo else 0.0
        spent[name] = spent.get(name, 0.0) + used
    top = sorted(spent.items(), key=lambda item: -item[1])[:3]
    percent = 100 / elapsed
    return (total * percent, dynamo * percent, sum(d for _, _, d in after.values()),
            [(name, used * percent) for name, used in top])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window", type=float, default=30.0, help="seconds of each idle CPU sample")
    args = parser.parse_args()
    dgds, stubs, idle = [], [], {}
    with tempfile.TemporaryDirectory(prefix="nrlk8s-bench-") as tmp:
        sandbox = Path(tmp)
        subprocess.run([NRL_K8S, "sandbox", "up", "--dir", str(sandbox)], check=True, capture_output=True)
        try:
            info = json.loads((sandbox / "sandbox.json").read_text())
            roots = {info["daemon_pid"], *info["pids"].values()}
            with Kube.connect(kubeconfig=str(sandbox / "kubeconfig")) as kube:
                for run in range(args.runs):
                    name, stub_s = serve_stub(kube)
                    stubs.append(stub_s)
                    gone(kube, deployment.KIND, name, f"app={name}")
                    kube.delete(service.KIND, name)
                    name, ready_s, serving_s = serve_dgd(kube)
                    dgds.append((ready_s, serving_s))
                    gone(kube, dgd_v1beta1.KIND, name, dgd.pod_selector(name))
                    print(f"run {run + 1}: baseline serving {stub_s:.2f} s; DGD Ready {ready_s:.2f} s, "
                          f"serving {serving_s:.2f} s", flush=True)
                idle["no DGD"] = idle_cpu(roots, args.window)
                name, _, _ = serve_dgd(kube)
                idle["one DGD served"] = idle_cpu(roots, args.window)
                gone(kube, dgd_v1beta1.KIND, name, dgd.pod_selector(name))
        finally:
            subprocess.run([NRL_K8S, "sandbox", "down", "--dir", str(sandbox)], capture_output=True)
    stub = statistics.median(stubs)
    ready, serving = (statistics.median(run[i] for run in dgds) for i in range(2))
    print(f"time to serving, median of {args.runs}: baseline (Deployment + Service, HTTP stub) {stub:.2f} s; "
          f"DGD (Dynamo frontend + mocker) {serving:.2f} s, of which to Ready {ready:.2f} s; "
          f"ratio DGD / baseline {serving / stub:.2f}")
    for label, (total, dynamo, count, top) in idle.items():
        print(f"idle CPU over {args.window:g} s, {label}: sandbox tree {total:.2f} % of one core, "
              f"Dynamo's {count} process(es) {dynamo:.2f} %; top: "
              + ", ".join(f"{name} {percent:.2f} %" for name, percent in top))
    (without, *_), (with_dgd, dynamo, *_) = idle.values()
    print(f"idle CPU ratio with / without a DGD: {with_dgd / without:.2f} (Dynamo's share {dynamo:.2f} % of one core)")
    print(json.dumps({"baseline_serving_s": stub, "dgd_ready_s": ready, "dgd_serving_s": serving,
                      "ratio": serving / stub, "idle_cpu_percent_without": without, "idle_cpu_percent_with": with_dgd,
                      "idle_cpu_percent_dynamo": dynamo}))


if __name__ == "__main__":
    main()
