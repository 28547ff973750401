"""`status`'s DYNAMO section: what a trainer binds to (``ops.fleet``), and how the CLI prints it.

The real ``Kube`` talks HTTP to ``FakeCluster``, a stand-in API server in a thread holding one
DGD and its pods; behind its service and pod proxies are the answers of Dynamo 1.6.1's frontend
(``/v1/models``, ``/health``), its RL listener (``/v1/rl/workers`` on the frontend pod's port
8001) and the workers' system servers (``POST /engine/get_weight_version`` on port 9090). A proxy
target with no answer gets the API server's own 503, as a real one answers for a port nothing
listens on.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml

from nrl_k8s.config.loader import load_config
from nrl_k8s.errors import WaitTimeout
from nrl_k8s.flows import serving
from nrl_k8s.kinds import dgd, pod
from nrl_k8s.kube.client import Kube, Tuning, kind_path
from nrl_k8s.ops import fleet, status
from nrl_k8s_sandbox.json_reply import send_json

ROOT = Path(__file__).resolve().parents[2]
NS, NAME = "default", "tester-sandbox-dgd"
FRONT_POD, WORKER_A, WORKER_B = f"{NAME}-frontend-7d9c", f"{NAME}-vllmdecodeworker-0", f"{NAME}-vllmdecodeworker-1"
ID_A, ID_B = 1855137951676199936, 0x652F6A2C1D9E4000  # ID_A: one Dynamo 1.6.1 gave (hex 19bec6235b017400)
SVC = f"services/{NAME}-frontend:8000/proxy"
RL = f"pods/{FRONT_POD}:8001/proxy/v1/rl/workers"
_COLLECTION = re.compile(r"^/api/v1(/namespaces/[^/]+)?/[a-z]+$|^/apis/[^/]+/[^/]+(/namespaces/[^/]+)?/[a-z]+$")
ROUTES = ["get_weight_version", "pause_generation", "resume_generation", "update_weights_from_distributed"]


def weight_path(pod_name: str) -> str:
    return f"pods/{pod_name}:9090/proxy/engine/get_weight_version"


def make_pod(name: str, component: str, ip: str, env: dict[str, str] | None = None) -> dict:
    return {"metadata": {"name": name, "namespace": NS,
                         "labels": {dgd.POD_LABEL: NAME, fleet.COMPONENT_LABEL: component}},
            "spec": {"containers": [{"name": "main",
                                     "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "containerStatuses": [{"name": "main", "ready": True}]}}


PODS = [make_pod(FRONT_POD, "frontend", "10.250.0.5", {"DYN_ENABLE_RL": "true"}),
        make_pod(WORKER_A, "worker", "10.250.0.7"), make_pod(WORKER_B, "worker", "10.250.0.8")]


def listed(instance_id: int, url: str | None, *, error: str | None = None) -> dict:
    """One entry of the RL listener's ``workers``, as Dynamo 1.6.1 lists it."""
    entry = {"namespace": "dynamo", "component": "backend", "endpoint": "rl", "instance_id": instance_id,
             "model": "tiny", "routes": [] if error else ROUTES, "world_size": 2}
    return {**entry, "error": error} if error else {**entry, "system_url": url}


def healthy(*workers: dict) -> dict:
    """The answers of a serving frontend with an RL listener listing ``workers``."""
    instances = [{"component": "backend", "endpoint": endpoint, "namespace": "dynamo", "instance_id": i,
                  "transport": {"tcp": "127.0.0.1:46763/x"}} for i in (ID_A, ID_B) for endpoint in ("generate", "rl")]
    return {
        ("GET", f"{SVC}/v1/models"): (200, {"object": "list", "data": [{"id": "tiny", "object": "model"}]}),
        ("GET", f"{SVC}/health"): (200, {"status": "healthy", "endpoints": ["dyn://dynamo.backend.generate",
                                                                            "dyn://dynamo.backend.rl"],
                                         "instances": instances}),
        ("GET", RL): (200, {"protocol_version": 1, "namespace": "dynamo", "workers": list(workers)}),
        ("POST", weight_path(WORKER_A)): (200, {"status": "ok", "version": 3, "version_declared": True}),
        ("POST", weight_path(WORKER_B)): (200, {"status": "ok", "version": 3, "version_declared": True}),
    }


def unreachable(target: str) -> tuple[int, dict]:
    """The API server's own answer for a proxy target it cannot reach: a Service without ready pods,
    a pod port where nothing listens (k8s apimachinery's proxy transport)."""
    kind, _, name = target.partition("/")
    message = (f'no endpoints available for service "{name.split(":")[0]}"' if kind == "services" else
               f"error trying to reach service: dial tcp 10.250.0.5:{name.split(':')[1]}: connect: connection refused")
    return 503, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                 "reason": "ServiceUnavailable", "code": 503}


#: The longest a held answer waits for its test to let it go.
HELD_S = 300.0


class FakeCluster:
    """A stand-in API server (plain HTTP on 127.0.0.1): the DGD, its pods (label selectors honoured),
    empty collections, 404 for other objects, and ``answers[(method, path under the namespace)]``
    behind the proxies (a ``threading.Event`` answer: no answer until it is set, 5 minutes at most).
    ``asked`` lists the proxied (method, path) in order."""

    def __init__(self, manifest: dict, pods: list[dict], answers: dict):
        live = {**manifest, "status": {"state": "successful", "conditions": [{"type": "Ready", "status": "True"}]}}
        self.objects = {kind_path(dgd.kind_of(manifest), NS, NAME): live}
        self.pods, self.answers = pods, answers
        self.asked: list[tuple[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - stdlib hook
                fake.answer(self)

            def do_POST(self) -> None:  # noqa: N802 - stdlib hook
                fake.answer(self)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        path = unquote(parts.path)
        if length := int(handler.headers.get("Content-Length") or 0):
            handler.rfile.read(length)
        if "/proxy/" in path:
            key = (handler.command, path.removeprefix(f"/api/v1/namespaces/{NS}/"))
            self.asked.append(key)
            found = self.answers.get(key) or unreachable(key[1].split("/proxy")[0])
            if isinstance(found, threading.Event):
                found.wait(HELD_S)
                found = (200, {})
            try:
                send_json(handler, *found)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped waiting (a bounded request)
        elif path == f"/api/v1/namespaces/{NS}/pods":
            wanted = dict(s.split("=") for s in parse_qs(parts.query).get("labelSelector", [""])[0].split(",") if s)
            items = [p for p in self.pods if wanted.items() <= p["metadata"]["labels"].items()]
            send_json(handler, 200, {"kind": "List", "metadata": {"resourceVersion": "1"}, "items": items})
        elif path in self.objects:
            send_json(handler, 200, self.objects[path])
        elif _COLLECTION.match(path):
            send_json(handler, 200, {"kind": "List", "metadata": {"resourceVersion": "1"}, "items": []})
        else:
            send_json(handler, 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                     "details": {"name": path.rsplit("/", 1)[-1]}, "code": 404})

    def kube(self, tmp_path: Path) -> Kube:
        config = tmp_path / "kubeconfig"
        config.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{self.server.server_port}"}}],
            "users": [{"name": "u", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": NS}}]}))
        return Kube.connect(kubeconfig=str(config), tuning=Tuning(retry_budget_s=1.0, backoff_s=0.01))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def infra(tmp_path) -> dict:
    env = {"NRL_K8S_USER": "tester", "HOME": str(tmp_path)}
    return load_config(ROOT / "examples/sandbox.yaml", infra=ROOT / "examples/sandbox.infra.yaml", env=env).infra


@pytest.fixture
def cluster(infra) -> Iterator:
    made: list[FakeCluster] = []

    def start(answers: dict, pods: list[dict] = PODS) -> FakeCluster:
        made.append(FakeCluster(dgd.render(infra, "serving"), pods, answers))
        return made[-1]

    yield start
    for fake in made:
        fake.close()


def dynamo_row(fake: FakeCluster, infra: dict, tmp_path: Path, bounds: fleet.Bounds = fleet.BOUNDS) -> dict:
    with fake.kube(tmp_path) as kube:
        (row,) = status.collect(kube, infra, bounds=bounds)["dynamo"]
    assert row["name"] == NAME and row["state"] == "successful"
    return row


def table(row: dict) -> list[str]:
    """The DYNAMO section's lines for ``row`` as `nrl-k8s status` prints them, from the frontend line on."""
    from nrl_k8s_cli._console import out
    from nrl_k8s_cli._render import render_status

    with out.capture() as captured:
        render_status({"namespace": NS, "roles": [], "driver": None, "rayjob": None, "dynamo": [row], "waiting": [],
                       "left": []})
    lines = captured.get().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("    frontend"))
    return [line.rstrip() for line in lines[first:] if not line.startswith(("    owner", "    users"))]


def test_healthy_frontend_and_two_rl_workers_with_weight_versions(cluster, infra, tmp_path):
    fake = cluster(healthy(listed(ID_A, "http://10.250.0.7:9090"), listed(ID_B, "http://10.250.0.8:9090")))
    row = dynamo_row(fake, infra, tmp_path)
    assert row["frontend"] == {"address": f"{NAME}-frontend.{NS}.svc:8000", "reachable": True, "detail": "HTTP 200",
                               "health": "healthy", "models": ["tiny"], "rl_instances": ["19bec623", "652f6a2c"]}
    assert row["rl"]["state"] == "on" and row["rl"]["source"] == f"{FRONT_POD}:8001"
    assert [(w["instance"], w["instance_id"], w["system_url"], w["pod"], w["world_size"], w["weight_version"],
             w["error"]) for w in row["rl"]["workers"]] == [
        ("19bec623", ID_A, "http://10.250.0.7:9090", WORKER_A, 2, 3, None),
        ("652f6a2c", ID_B, "http://10.250.0.8:9090", WORKER_B, 2, 3, None)]
    assert row["rl"]["workers"][0]["routes"] == ROUTES
    assert json.loads(json.dumps(row)) == row  # `-o json` carries it as it is
    routes = ", ".join(ROUTES)
    assert table(row) == [
        f"    frontend  {NAME}-frontend.{NS}.svc:8000  reachable (HTTP 200)",
        "    health    healthy  models: tiny, rl instances: 19bec623, 652f6a2c",
        f"    rl fleet  2 worker(s) listed by {FRONT_POD}:8001",
        f"      19bec623  http://10.250.0.7:9090  world_size=2  weight_version=3  routes: {routes}",
        f"      652f6a2c  http://10.250.0.8:9090  world_size=2  weight_version=3  routes: {routes}",
    ]


def test_an_unreachable_frontend_is_one_line_and_nothing_behind_it_is_asked(cluster, infra, tmp_path):
    fake = cluster({})  # every proxied request: the API server's 503
    row = dynamo_row(fake, infra, tmp_path)
    assert row["frontend"]["reachable"] is False and row["frontend"]["models"] == []
    assert row["rl"] == {"state": "unknown", "detail": "not asked: the frontend is not reachable", "source": None,
                         "workers": []}
    assert fake.asked == [("GET", f"{SVC}/v1/models")]
    assert table(row) == [f"    frontend  {NAME}-frontend.{NS}.svc:8000  not reachable (HTTP 503: no endpoints "
                          f'available for service "{NAME}-frontend")']


@pytest.mark.parametrize("listener", [None, (404, {"error": "not found"})], ids=["port-refused", "upstream-404"])
def test_without_an_rl_listener_one_line_says_rl_discovery_is_off(cluster, infra, tmp_path, listener):
    answers = {k: v for k, v in healthy().items() if k[1] != RL} | ({("GET", RL): listener} if listener else {})
    plain_frontend = [make_pod(FRONT_POD, "frontend", "10.250.0.5"), *PODS[1:]]  # no DYN_ENABLE_RL
    row = dynamo_row(cluster(answers, plain_frontend), infra, tmp_path)
    assert row["rl"] == {"state": "off", "detail": fleet.RL_OFF, "source": f"{FRONT_POD}:8001", "workers": []}
    assert table(row)[-1] == "    rl fleet  RL discovery off (DYN_ENABLE_RL not set on the frontend)"


def test_an_rl_listener_that_should_answer_and_does_not_says_so(cluster, infra, tmp_path):
    answers = {k: v for k, v in healthy().items() if k[1] != RL}  # DYN_ENABLE_RL=true, port 8001 refused
    row = dynamo_row(cluster(answers), infra, tmp_path)
    assert row["rl"]["state"] == "unknown"
    assert row["rl"]["detail"] == (f"RL listener {FRONT_POD}:8001 (DYN_ENABLE_RL is set): HTTP 503: error trying to "
                                   "reach service: dial tcp 10.250.0.5:8001: connect: connection refused")


def test_the_rl_port_comes_from_the_frontends_dyn_rl_port(cluster, infra, tmp_path):
    answers = healthy(listed(ID_A, "http://10.250.0.7:9090"))
    answers[("GET", RL.replace(":8001", ":18001"))] = answers.pop(("GET", RL))
    front = make_pod(FRONT_POD, "frontend", "10.250.0.5", {"DYN_ENABLE_RL": "true", "DYN_RL_PORT": "18001"})
    row = dynamo_row(cluster(answers, [front, *PODS[1:]]), infra, tmp_path)
    assert row["rl"]["source"] == f"{FRONT_POD}:18001" and row["rl"]["workers"][0]["weight_version"] == 3


def test_a_worker_the_frontend_cannot_reach_is_one_line(cluster, infra, tmp_path):
    gone = "Unavailable: failed to connect to http://10.250.0.8:9090"
    fake = cluster(healthy(listed(ID_A, "http://10.250.0.7:9090"), listed(ID_B, None, error=gone)))
    row = dynamo_row(fake, infra, tmp_path)
    ok, bad = row["rl"]["workers"]
    assert (ok["weight_version"], ok["error"]) == (3, None)
    assert (bad["instance"], bad["system_url"], bad["routes"], bad["weight_version"]) == ("652f6a2c", None, [], None)
    assert bad["error"] == f"not reachable by the frontend: {gone}"
    assert ("POST", weight_path(WORKER_B)) not in fake.asked
    assert table(row)[-1] == f"      652f6a2c  not reachable by the frontend: {gone}"


def test_a_system_url_that_is_no_pod_of_the_dgd_is_one_line(cluster, infra, tmp_path):
    fake = cluster(healthy(listed(ID_A, "http://10.250.0.7:9090"), listed(ID_B, "http://10.9.9.9:9090")))
    row = dynamo_row(fake, infra, tmp_path)
    bad = row["rl"]["workers"][1]
    assert (bad["pod"], bad["weight_version"]) == (None, None)
    assert bad["error"] == f"system_url http://10.9.9.9:9090 is no pod of DGD {NAME}"
    assert [key for key in fake.asked if key[0] == "POST"] == [("POST", weight_path(WORKER_A))]
    assert table(row)[-1] == f"      652f6a2c  system_url http://10.9.9.9:9090 is no pod of DGD {NAME}"


def test_a_worker_that_does_not_answer_waits_only_the_bound(cluster, infra, tmp_path):
    answers = healthy(listed(ID_A, "http://10.250.0.7:9090"), listed(ID_B, "http://10.250.0.8:9090"))
    held = threading.Event()  # the worker answers once the row is made: it has a version only if it was waited for
    answers[("POST", weight_path(WORKER_B))] = held
    try:
        row = dynamo_row(cluster(answers), infra, tmp_path, fleet.Bounds(request_s=2.0, section_s=30.0))
    finally:
        held.set()
    ok, slow = row["rl"]["workers"]
    assert (ok["weight_version"], slow["weight_version"]) == (3, None)
    assert slow["error"] == "http://10.250.0.8:9090 not reachable: no answer within 2 s"


def test_a_route_answering_an_error_leaves_the_weight_version_unknown(cluster, infra, tmp_path):
    answers = healthy(listed(ID_A, "http://10.250.0.7:9090"))
    answers[("POST", weight_path(WORKER_A))] = (404, {"message": "Route /engine/get_weight_version not found"})
    row = dynamo_row(cluster(answers), infra, tmp_path)
    (worker,) = row["rl"]["workers"]
    assert (worker["weight_version"], worker["error"]) == (None, None)
    assert worker["detail"] == "get_weight_version: HTTP 404: Route /engine/get_weight_version not found"
    assert "weight_version=? (get_weight_version: HTTP 404: Route" in table(row)[-1]


def test_forbidden_pod_proxy_is_one_line(cluster, infra, tmp_path):
    answers = healthy(listed(ID_A, "http://10.250.0.7:9090"))
    answers[("GET", RL)] = (403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                                  "code": 403, "message": "pods \"x\" is forbidden"})
    row = dynamo_row(cluster(answers), infra, tmp_path)
    assert row["rl"]["state"] == "unknown"
    assert row["rl"]["detail"] == f'RL listener {FRONT_POD}:8001: forbidden: cannot get pods/proxy in namespace "{NS}"'


@pytest.mark.parametrize(("ids", "short"), [
    ([ID_A, ID_B], ["19bec623", "652f6a2c"]),
    ([ID_A, ID_A + 0x1000], ["19bec6235b017", "19bec6235b018"]),  # the same first 8 digits: as many as tell them apart
], ids=["distinct", "shared-prefix"])
def test_short_instance_ids(ids, short):
    front = {"rl_instances": list(ids)}
    rows = {"workers": [{"instance_id": i} for i in ids]}
    fleet._shorten(front, rows)
    assert front["rl_instances"] == short == [w["instance"] for w in rows["workers"]]


def test_a_frontend_slower_than_the_probe_is_not_ready_yet_never_a_failed_run(cluster, infra, tmp_path):
    """`run`'s frontend gate through the API server's proxy: an answer that does not come within the
    probe's 5 s (a frontend starting on a loaded node) is "nothing answered" and the wait goes on to
    its deadline; it is not "the API server did not answer", which rolled a whole run back."""
    answers = healthy()
    fake = cluster(answers)
    models = ("GET", f"{SVC}/v1/models")
    held = answers[models] = threading.Event()  # no answer within the probe's timeout
    shown: list = []
    with fake.kube(tmp_path) as kube:
        kube.list(pod.KIND, NS)  # the API server has answered
        try:
            with pytest.raises(WaitTimeout, match="answered nothing"):
                serving.wait_frontend(kube, "dynamo.serving", NAME, NS, time.monotonic() + 1, shown.append)
        finally:
            held.set()
        answers[models] = healthy()[models]
        assert serving.wait_frontend(kube, "dynamo.serving", NAME, NS, time.monotonic() + 60, shown.append)
    assert fake.asked.count(models) >= 2


class _Leases:
    """What ``status`` asks about a RayJob's start lease: one Job, the lease of ``q``, made a moment ago."""

    def find(self, kind, name, namespace):
        return {"metadata": {"name": name}, "spec": {"ttlSecondsAfterFinished": 150}} if name == "q-lease" else None


@pytest.mark.parametrize(("job", "held"), [
    ({"spec": {"suspend": True}}, ""),  # created suspended; KubeRay has not reported it yet
    ({"spec": {"suspend": True}, "status": {"jobDeploymentStatus": "Suspended"}}, ""),
    ({"spec": {}, "status": {"jobDeploymentStatus": "Running"}}, None),
], ids=["not-yet-reported", "suspended", "running"])
def test_a_rayjob_created_suspended_is_held_by_its_lease_before_kuberay_reports_it(job, held):
    assert status._held_until(_Leases(), {"metadata": {"name": "q"}, **job}, NS) == held
