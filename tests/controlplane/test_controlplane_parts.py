"""The real control plane's own parts, without starting it: the egress proxy never dials an address
it was not given, the front proxy classifies requests as the fault rules name them and finds where
each answer ends on a kept-alive connection, kwok's Stages
leave exactly the local kubelet's pods alone, and building without Go says how to get it."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sandbox_harness import DEADLINE_S, NRL_K8S, run_cli

from nrl_k8s_sandbox.controlplane import binaries, kubelet, stages
from nrl_k8s_sandbox.controlplane.egress import EgressProxy
from nrl_k8s_sandbox.controlplane.front import _Body, classify
from nrl_k8s_sandbox.faults import Faults


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args: object) -> None:
        pass


def _connect(path: Path, target: str) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(path))
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        reply = sock.recv(4096)
        if reply.startswith(b"HTTP/1.1 200"):
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while chunk := sock.recv(4096):
                reply += chunk
        return reply


def test_egress_maps_known_addresses_and_refuses_the_rest(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    local = server.server_address[1]
    proxy = EgressProxy(
        tmp_path / "egress.sock", lambda host, port: local if (host, port) == ("10.250.0.7", 8265) else None
    )
    proxy.start()
    try:
        assert oct((tmp_path / "egress.sock").stat().st_mode & 0o777) == "0o600"
        assert _connect(tmp_path / "egress.sock", "10.250.0.7:8265").endswith(b"hello")
        for target in ("10.250.0.7:22", "192.0.2.1:80", "example.com:443", f"127.0.0.1:{local}"):
            assert _connect(tmp_path / "egress.sock", target).startswith(b"HTTP/1.1 502"), target
    finally:
        proxy.stop()
        server.shutdown()


@pytest.mark.parametrize(("method", "target", "expected"), [
    ("GET", "/api/v1/namespaces/ns/pods", ("list", "pods")),
    ("GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5", ("watch", "pods")),
    ("GET", "/api/v1/namespaces/ns/pods/p/log?follow=true", ("get", "pods/log")),
    ("GET", "/api/v1/namespaces/ns/services/s:8265/proxy/api/jobs/", ("get", "services/proxy")),
    ("POST", "/apis/ray.io/v1/namespaces/ns/rayjobs", ("create", "rayjobs")),
    ("PATCH", "/apis/ray.io/v1/namespaces/ns/rayjobs/j/status", ("patch", "rayjobs/status")),
    ("DELETE", "/apis/nvidia.com/v1beta1/namespaces/ns/dynamographdeployments/d", ("delete", "dynamographdeployments")),
    ("GET", "/api/v1/namespaces/ns", ("get", "namespaces")),
    ("GET", "/api/v1/namespaces", ("list", "namespaces")),
    ("GET", "/api/v1/watch/namespaces/ns/pods", ("watch", "pods")),
])
def test_front_classifies_requests_as_the_fault_rules_name_them(method, target, expected):
    assert classify(method, target) == expected


CHUNKED = b"4;ext=1\r\nWiki\r\n7\r\npedia i\r\n0\r\nExpires: never\r\n\r\n"


@pytest.mark.parametrize("split", [1, 2, 5, len(CHUNKED)])
def test_front_finds_where_a_chunked_answer_ends_however_it_arrives(split):
    """A watch's or a log's answer: chunk sizes (with extensions), data, trailers; whatever comes
    after the last empty line is not the answer's."""
    stream = CHUNKED + b"HTTP/1.1 200 OK"
    body, seen = _Body(None, chunked=True), 0
    for at in range(0, len(stream), split):
        piece = stream[at:at + split]
        end = body.feed(piece)
        if end is not None:
            assert seen + end == len(CHUNKED)
            return
        seen += len(piece)
    raise AssertionError("the end of the chunked answer was not found")


def test_front_finds_where_a_sized_answer_ends_and_waits_for_an_unsized_one():
    sized = _Body(10, chunked=False)
    assert (sized.feed(b"0123"), sized.feed(b"456789extra")) == (None, 6)
    unsized = _Body(None, chunked=False)
    assert unsized.feed(b"x" * 100_000) is None  # it ends only when kube-apiserver closes


@pytest.mark.parametrize(("pod", "local"), [
    ({"metadata": {"labels": {"ray.io/node-type": "head", "ray.io/cluster": "c"}}}, True),
    ({"metadata": {"labels": {"ray.io/node-type": "worker", "ray.io/cluster": "c"}}}, False),
    ({"metadata": {"ownerReferences": [{"kind": "ReplicaSet"}, {"kind": "Job"}]}}, True),
    ({"metadata": {"labels": {"nvidia.com/dynamo-graph-deployment-name": "g",
                              "nvidia.com/dynamo-component-type": "frontend"}}}, True),
    ({"metadata": {"labels": {"nvidia.com/dynamo-graph-deployment-name": "g",
                              "nvidia.com/dynamo-component-type": "worker"}}}, True),
    ({"metadata": {"labels": {"nvidia.com/dynamo-component-type": "worker"}}}, False),
    ({"metadata": {"labels": {"nrl-k8s.io/deployment": "web"}}}, True),
    ({"metadata": {}}, False),
    ({"metadata": {"labels": {"ray.io/node-type": "head", stages.PLAYED_LABEL: "true"}}}, False),
    ({"metadata": {"labels": {"nvidia.com/dynamo-graph-deployment-name": "g", stages.PLAYED_LABEL: ""}}}, False),
])
def test_kwok_leaves_exactly_the_local_kubelets_pods_alone(pod, local):
    """The pod-ready Stages of each kind exclude LOCAL_PODS and played pods; one Stage takes every
    played pod; kubelet.is_local reads the same terms."""
    assert kubelet.is_local(pod) is local
    ready = {s["metadata"]["name"]: s["spec"]["selector"]["matchExpressions"] for s in stages.stages({})
             if s["metadata"]["name"].startswith("pod-ready-")}
    played = f'.metadata.labels["{stages.PLAYED_LABEL}"]'
    assert {"key": played, "operator": "Exists"} in ready.pop("pod-ready-played")
    for terms in ready.values():
        excluded = {(t["key"], t["operator"]) for t in terms}
        assert (played, "DoesNotExist") in excluded
        for query, values in stages.LOCAL_PODS:
            assert (query, "DoesNotExist" if values is None else "NotIn") in excluded


def test_delays_go_to_the_stage_of_their_kind():
    by_name = {s["metadata"]["name"]: s["spec"] for s in stages.stages({"dgd": 2.5})}
    assert by_name["pod-ready-dgd"]["delay"] == {"durationMilliseconds": 2500}
    assert "delay" not in by_name["pod-ready-raycluster"]


def test_build_without_go_says_how_to_get_it(tmp_path):
    env = {"PATH": str(Path(NRL_K8S).parent), "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run_cli(["sandbox", "build"], env=env)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "needs Go" in result.stderr and binaries.ENV_BIN in result.stderr


def test_prebuilt_binaries_folder_must_hold_them_all(tmp_path):
    env = {**os.environ, binaries.ENV_BIN: str(tmp_path)}
    result = run_cli(["sandbox", "up", "--dir", str(tmp_path / "box")], env=env)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert binaries.ENV_BIN in result.stderr and "kube-apiserver" in result.stderr


SLOT_USER = """import os, pathlib, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one CPU: one slot
from nrl_k8s_sandbox.ray_head import start_slot
with start_slot(lambda: sys.argv[2] == "try", pathlib.Path(sys.argv[1])) as got:
    print(got, flush=True)
    if got and sys.argv[2] == "hold":
        sys.stdin.read()  # until the test ends it
"""


def test_ray_heads_start_at_most_one_per_cpu_across_sandboxes(tmp_path):
    """Heads started together on a busy machine starve one another past Ray's 30 s start-up limit:
    the kubelets of every sandbox (separate processes) share one start slot per CPU, and a slot is
    freed however its holder ends."""
    slots = tmp_path / "slots"
    use = lambda how, **kw: subprocess.Popen([sys.executable, "-c", SLOT_USER, str(slots), how],  # noqa: E731
                                             stdout=subprocess.PIPE, text=True, **kw)
    holder = use("hold", stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == "True\n"
        assert use("try").communicate(timeout=60)[0] == "False\n"  # the one slot is held
    finally:
        holder.kill()
        holder.wait()
    assert use("try").communicate(timeout=60)[0] == "True\n"
    assert oct(slots.stat().st_mode & 0o777) == "0o700"


def test_a_heads_dashboard_and_agent_run_without_the_kubernetes_client(monkeypatch):
    """ray_start.py runs both through without_kubernetes.py; the agent's command is an argument of the
    raylet's, written and read back as Ray does (list2cmdline, a POSIX split), spaces and all."""
    from ray._private import ray_constants

    from nrl_k8s_sandbox import ray_start

    started: list[list[str]] = []
    monkeypatch.setattr(ray_start, "_start_ray_process", lambda command, *_, **__: started.append(command))
    agent = [sys.executable, "-u", "/my venv/ray/dashboard/agent.py", "--logging-format=%(asctime)s %(message)s"]
    ray_start._start(["raylet", "--node_ip_address=127.0.0.1",
                      f"--dashboard_agent_command={subprocess.list2cmdline(agent)}"], ray_constants.PROCESS_TYPE_RAYLET)
    ray_start._start([sys.executable, "/my venv/ray/dashboard/dashboard.py", "--port=1"],
                     ray_constants.PROCESS_TYPE_DASHBOARD)
    ray_start._start(["gcs_server", "--a=b"], ray_constants.PROCESS_TYPE_GCS_SERVER)
    raylet, dashboard, gcs = started
    assert raylet[:2] == ["raylet", "--node_ip_address=127.0.0.1"]
    assert shlex.split(raylet[2].partition("=")[2]) == [*agent[:2], *ray_start.WITHOUT_KUBERNETES, *agent[2:]]
    assert dashboard[:-1] == [sys.executable, *ray_start.WITHOUT_KUBERNETES, "/my venv/ray/dashboard/dashboard.py",
                              "--port=1"]
    assert gcs == ["gcs_server", "--a=b"]


def test_without_kubernetes_runs_the_script_as_python_would_with_no_kubernetes(tmp_path):
    script = tmp_path / "a dir" / "script.py"
    script.parent.mkdir()
    (script.parent / "sibling.py").write_text("NAME = 'sibling'\n")
    script.write_text("import sys, sibling\ntry:\n    import kubernetes\nexcept ImportError:\n    kubernetes = None\n"
                      "print(__name__, sibling.NAME, sys.argv[1:], kubernetes)\n")
    ran = subprocess.run([sys.executable, "-m", "nrl_k8s_sandbox.without_kubernetes", str(script), "--x", "y z"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert ran.stdout == "__main__ sibling ['--x', 'y z'] None\n"


def test_the_first_seed_of_etcd_is_kept_whole_and_copied(tmp_path):
    from nrl_k8s_sandbox.controlplane import seed

    data, folder = tmp_path / "etcd", tmp_path / "seeds" / "key"
    (data / "member").mkdir(parents=True)
    (data / "member" / "db").write_bytes(b"first")
    assert seed.copy(folder, tmp_path / "none") is None and not (tmp_path / "none").exists()
    seed.save(folder, data, {("ray.io", "v1", "rayjobs")})
    (data / "member" / "db").write_bytes(b"second")
    seed.save(folder, data, {("other", "v1", "things")})  # a sandbox started beside the first: too late
    assert seed.copy(folder, tmp_path / "copy") == [("ray.io", "v1", "rayjobs")]
    assert (tmp_path / "copy" / "member" / "db").read_bytes() == b"first"
    assert [path.name for path in folder.parent.iterdir()] == ["key"]  # no staging folder left


class _EndlessWatch(BaseHTTPRequestHandler):
    """A list answers at once; a watch sends its headers and then nothing, ever (until the test ends)."""

    protocol_version = "HTTP/1.1"
    opened, hung_up, release = threading.Event(), threading.Event(), threading.Event()

    def do_GET(self) -> None:  # noqa: N802
        if "watch=true" not in self.path:
            body = b'{"metadata": {"resourceVersion": "1"}, "items": []}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        type(self).opened.set()
        if self.rfile.read(1) == b"":  # the client hung up (nothing else is ever sent on it)
            type(self).hung_up.set()
        type(self).release.wait()

    def log_message(self, *args) -> None:
        pass


def test_stopping_a_watch_hangs_it_up_at_once():
    """A stopping kube-apiserver waits for its open watches to end: the sandbox's own watches (its
    controllers', its kubelet's) hang up when they stop, not at their timeout."""
    import urllib3

    from nrl_k8s_sandbox.controlplane.controller import Watches, watch

    server = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessWatch)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pool = urllib3.PoolManager()
    base = f"http://127.0.0.1:{server.server_address[1]}/pods"

    def lister(watch: bool = False, _preload_content: bool = True, **params: object) -> urllib3.BaseHTTPResponse:
        return pool.request("GET", base + ("?watch=true" if watch else ""), preload_content=_preload_content)

    stop, watches = threading.Event(), Watches()
    loop = threading.Thread(target=watch, args=("pods", lister, lambda *_: None, stop, watches))
    try:
        loop.start()
        assert _EndlessWatch.opened.wait(DEADLINE_S), "the watch never opened"
        stop.set()
        watches.hang_up()
        loop.join(timeout=DEADLINE_S)  # without the hang-up it never ends: the server never answers
        assert not loop.is_alive()
        assert _EndlessWatch.hung_up.wait(DEADLINE_S)
    finally:
        _EndlessWatch.release.set()
        server.shutdown()


def test_counted_faults_are_consumed_by_matching_calls_and_clear_themselves():
    faults = Faults()
    faults.set("api-latency", "get:customresourcedefinitions:8:2")
    faults.set("api-errors", "*:pods:503:1")
    assert faults.take("api-latency", "list", "customresourcedefinitions") is None
    assert faults.take("api-latency", "get", "customresourcedefinitions") == 8.0
    assert faults.active()["api-latency"] == "get:customresourcedefinitions:8.0:1"
    assert faults.take("api-latency", "get", "customresourcedefinitions") == 8.0
    assert faults.take("api-errors", "watch", "pods") == 503
    assert faults.active() == {} and faults.take("api-latency", "get", "customresourcedefinitions") is None
    for bad in ("get:pods:0:1", "get:pods:soon:1", "get:pods:601:1", "get:pods:2:0", "get:pods:2"):
        with pytest.raises(ValueError, match="fault api-latency"):
            faults.set("api-latency", bad)
