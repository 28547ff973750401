"""``GET pods/NAME/log``: where each simulated container's output comes from, the query options
and the real server's errors, through HTTP and the real kubectl (when installed)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from sandbox_harness import DEADLINE_S

from nrl_k8s.sandbox.operators import pods
from nrl_k8s.sandbox.pod_logs import PodLogs

LOG = "/api/v1/namespaces/default/pods/{}/log"
STAMP = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ")


@pytest.fixture
def pod_logs(tmp_path) -> PodLogs:
    (tmp_path / "ray-head.log").write_text("Ray runtime started.\nnode ip 127.0.0.1\nlast")
    (tmp_path / "session-logs").mkdir()
    return PodLogs(ray_log=tmp_path / "ray-head.log", driver_logs=tmp_path / "session-logs")


@pytest.fixture
def make_pod(operator_api):
    """Create a pod (as an operator would) in one of the states the simulated kubelet writes."""
    from kubernetes import client

    core = client.CoreV1Api(operator_api)

    def make(name: str, *, labels=None, containers=("main",), state: str | None = "running", owner: dict | None = None) -> dict:
        pod = {"metadata": {"name": name, "labels": labels or {}, "ownerReferences": [owner] if owner else []},
               "spec": {"containers": [{"name": c, "image": "img:1"} for c in containers]}}
        made = core.create_namespaced_pod("default", pod)
        if state is not None:
            status = {"running": pods.running, "creating": pods.creating, "unschedulable": lambda _: pods.unschedulable()}[state](pod)
            core.patch_namespaced_pod_status(name, "default", {"status": status})
        return operator_api.sanitize_for_serialization(made)

    make.core = core
    return make


def test_head_pod_shows_the_ray_heads_output(server, http, make_pod):
    make_pod("head", labels={"ray.io/node-type": "head"}, containers=("ray-head", "sidecar"))
    assert http.get(LOG.format("head"), params={"container": "ray-head"}).text == "Ray runtime started.\nnode ip 127.0.0.1\nlast"
    assert http.get(LOG.format("head"), params={"container": "ray-head", "tailLines": 1}).text == "last"
    assert http.get(LOG.format("head"), params={"container": "ray-head", "limitBytes": 3}).text == "Ray"
    stamped = http.get(LOG.format("head"), params={"container": "ray-head", "timestamps": "true"}).content.splitlines()
    assert len(stamped) == 3 and all(STAMP.match(line) for line in stamped)
    assert stamped[0].endswith(b" Ray runtime started.")
    # The sidecar runs nothing: the sandbox says so.
    assert "no process runs in container sidecar of pod head" in http.get(LOG.format("head"), params={"container": "sidecar"}).text


def test_stub_output_is_the_log_of_the_pods_it_serves(server, http, make_pod, pod_logs):
    owner = {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "name": "g", "uid": "dgd-uid",
             "controller": True}
    output = pod_logs.stub_output("dgd-uid", {"nvidia.com/dynamo-component-type": "frontend"})
    output.write("frontend stub listening")
    make_pod("g-frontend-abcde", labels={"nvidia.com/dynamo-component-type": "frontend"}, owner=owner)
    make_pod("g-decode-abcde", labels={"nvidia.com/dynamo-component-type": "worker", "nvidia.com/dynamo-component": "decode",
                                       "nvidia.com/dynamo-graph-deployment-name": "g"}, owner=owner)
    assert http.get(LOG.format("g-frontend-abcde")).text == "frontend stub listening\n"
    assert "Dynamo component decode of DGD g" in http.get(LOG.format("g-decode-abcde")).text
    pod_logs.forget("dgd-uid")
    assert "no process runs" in http.get(LOG.format("g-frontend-abcde")).text


def test_follow_streams_new_output_until_the_pod_is_deleted(server, http, make_pod, pod_logs):
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "dep-uid", "controller": True}
    output = pod_logs.stub_output("dep-uid")
    output.write("started")
    make_pod("web-1", owner=owner)
    with http.stream("GET", LOG.format("web-1"), params={"follow": "true", "tailLines": 1}, timeout=DEADLINE_S) as response:
        lines = response.iter_lines()
        assert next(lines) == "started"
        output.write("GET /healthz 200")
        assert next(lines) == "GET /healthz 200"
        make_pod.core.delete_namespaced_pod("web-1", "default")
        assert list(lines) == []  # the stream ends with the pod


def test_follow_of_a_file_holds_back_an_unfinished_line(server, http, make_pod, pod_logs):
    make_pod("head", labels={"ray.io/node-type": "head"})
    with http.stream("GET", LOG.format("head"), params={"follow": "1"}, timeout=DEADLINE_S) as response:
        lines = response.iter_lines()
        assert [next(lines), next(lines)] == ["Ray runtime started.", "node ip 127.0.0.1"]
        with open(pod_logs.ray_log, "a") as handle:
            handle.write(" line\nmore\n")
        assert [next(lines), next(lines)] == ["last line", "more"]


def test_submitter_shows_the_rayjob_drivers_log(server, crds, http, make_pod, custom, pod_logs):
    cluster = custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "job-x2b4z"}, "spec": {}})
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", {
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "job"}, "spec": {"entrypoint": "python x.py"}})
    custom.patch_namespaced_custom_object_status("ray.io", "v1", "default", "rayjobs", "job", {
        "status": {"jobId": "job-q5r7s", "rayClusterName": "job-x2b4z"}})
    (pod_logs.driver_logs / f"job-driver-{cluster['metadata']['uid']}--job-q5r7s.log").write_text("step 1/3\n")
    make_pod("job-abcde", labels={"ray.io/originated-from-cr-name": "job", "ray.io/originated-from-crd": "RayJob"},
             containers=("ray-job-submitter",))
    assert http.get(LOG.format("job-abcde")).text == "step 1/3\n"


@pytest.mark.parametrize(
    "state, containers, params, message",
    [
        (None, ("main",), {}, "pod p does not have a host assigned"),
        ("unschedulable", ("main",), {}, "pod p does not have a host assigned"),
        ("creating", ("main",), {}, 'container "main" in pod "p" is waiting to start: ContainerCreating'),
        ("running", ("main",), {"previous": "true"}, 'previous terminated container "main" in pod "p" not found'),
        ("running", ("a", "b"), {}, "a container name must be specified for pod p, choose one of: [a b]"),
        ("running", ("main",), {"container": "other"}, "container other is not valid for pod p"),
        ("running", ("main",), {"tailLines": "-1"}, "tailLines: Invalid value"),
    ],
    ids=["no-status", "unschedulable", "creating", "previous", "several-containers", "unknown-container", "bad-tail"],
)
def test_errors_like_the_real_server(server, http, make_pod, state, containers, params, message):
    make_pod("p", containers=containers, state=state)
    answer = http.get(LOG.format("p"), params=params)
    assert (answer.status_code, answer.json()["reason"]) == (400, "BadRequest") and message in answer.json()["message"]


def test_missing_pod_is_404_and_other_verbs_405(server, http, make_pod):
    assert http.get(LOG.format("nope")).status_code == 404
    make_pod("p")
    assert http.post(LOG.format("p"), content=b"{}").status_code == 405


def test_rbac_deny_applies_to_pods_log(server, faults, http, make_pod):
    make_pod("p")
    faults.set("rbac-deny", "get:pods/log")
    answer = http.get(LOG.format("p"))
    assert answer.status_code == 403 and 'cannot get resource "pods/log"' in answer.json()["message"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_logs(server, kubectl, make_pod, pod_logs):
    make_pod("head", labels={"ray.io/node-type": "head"})
    make_pod("waiting", state="creating")
    assert kubectl("logs", "head") == "Ray runtime started.\nnode ip 127.0.0.1\nlast"
    assert kubectl("logs", "head", "--tail=2") == "node ip 127.0.0.1\nlast"
    failed = kubectl.raw("logs", "waiting")
    assert failed.returncode == 1
    assert 'Error from server (BadRequest): container "main" in pod "waiting" is waiting to start: ContainerCreating' in failed.stderr
    follow = subprocess.Popen([*kubectl.base, "logs", "-f", "head"], stdout=subprocess.PIPE, text=True)
    try:
        assert [follow.stdout.readline() for _ in range(2)] == ["Ray runtime started.\n", "node ip 127.0.0.1\n"]
        with open(pod_logs.ray_log, "a") as handle:
            handle.write("!\n")
        assert follow.stdout.readline() == "last!\n"
        make_pod.core.delete_namespaced_pod("head", "default")
        assert follow.wait(timeout=DEADLINE_S) == 0 and follow.stdout.read() == ""
    finally:
        follow.kill()
        follow.wait()
