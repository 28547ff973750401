"""`nrl-k8s run --rayjob`, `status`, `check` and `cluster` as a user runs them, against the sandbox.

Every test runs the installed `nrl-k8s` as a subprocess with the sandbox's kubeconfig, in a
namespace of its own, with unique object names. Nothing here depends on the machine's speed:
drivers that must still run when the test looks wait for its signal (``Gate``), and what may
come and go (GC) is asserted on watch histories recorded from before the run (``History``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, Gate, History, interruptible, observe, run_cli, status_is

from nrl_k8s_sandbox import process
from nrl_k8s_sandbox.ray_head import free_ports

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
#: The example's driver command (it checks the recipe nrl-k8s wrote, prints three steps).
EXAMPLE_ENTRYPOINT = yaml.safe_load((ROOT / "examples/sandbox.infra.yaml").read_text())["launch"]["entrypoint"]
RAY, NVIDIA = ("ray.io", "v1"), ("nvidia.com", "v1alpha1")


class Run:
    """One test's names, namespace and helpers around the sandbox."""

    def __init__(self, sandbox, namespace: str):
        self.sandbox, self.ns = sandbox, namespace
        self.job = f"job-{uuid.uuid4().hex[:6]}"
        self.dgd = f"{self.job}-dgd"
        self.api = sandbox.api_client()
        self.custom = client.CustomObjectsApi(self.api)

    def overrides(self, *extra: str) -> list[str]:
        return [f"infra.namespace={self.ns}", f"infra.kuberay.training.name={self.job}",
                f"infra.dynamo.serving.name={self.dgd}", *extra]

    def cli(self, *args: str, timeout: float = DEADLINE_S) -> subprocess.CompletedProcess:
        env = {**os.environ, "KUBECONFIG": str(self.sandbox.kubeconfig), "NRL_K8S_USER": "it"}
        return run_cli(list(args), env=env, timeout=timeout)

    def run(self, *flags: str, extra: tuple[str, ...] = (), timeout: float = DEADLINE_S) -> subprocess.CompletedProcess:
        return self.cli("run", "--rayjob", *flags, *PAIR, *self.overrides(*extra), timeout=timeout)

    def get(self, group_version, plural: str, name: str) -> dict | None:
        try:
            return self.custom.get_namespaced_custom_object(*group_version, self.ns, plural, name)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def wait_for(self, group_version, plural: str, name: str, predicate) -> dict | None:
        """List then watch one object until ``predicate(object or None)`` holds; return it."""
        found = observe(self.custom.list_namespaced_custom_object, *group_version, self.ns, plural,
                        field_selector=f"metadata.name={name}", until=lambda objects: predicate(objects.get(name)))
        return found.get(name)

    def history(self, group_version, plural: str) -> History:
        """Every event of this namespace's ``plural`` from now on."""
        return History(self.custom.list_namespaced_custom_object, *group_version, self.ns, plural)

    def driver_logs(self, job_id: str) -> str:
        return self.sandbox.driver_log(job_id)


@pytest.fixture
def run(sandbox, sandbox_namespace):
    r = Run(sandbox, sandbox_namespace)
    yield r
    r.api.close()


def _gone(obj) -> bool:
    return obj is None


def _deleted(history: History, name: str) -> dict | None:
    return next((obj for kind, obj in history.events(name) if kind == "DELETED"), None)


def _uids(obj: dict) -> list[str]:
    return [o["uid"] for o in obj["metadata"].get("ownerReferences") or []]


def _rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_happy_path_suspend_order_then_dgd_moved_to_cluster_and_gc_cleans_up(run, tmp_path):
    gate = Gate(tmp_path)
    with run.history(RAY, "rayjobs") as jobs, run.history(RAY, "rayclusters") as clusters, \
            run.history(NVIDIA, "dynamographdeployments") as dgds, run.sandbox.fault("delay", "dgd:3"):
        extra = (gate.override(EXAMPLE_ENTRYPOINT),)
        result = run.run("--no-wait", "--driver-grace", "30", extra=extra)
        assert result.returncode == 0, result.stderr
        # The driver waits for the gate: the job, its RayCluster and the linked DGD are all live.
        job = run.get(RAY, "rayjobs", run.job)
        cluster = job["status"]["rayClusterName"]
        cluster_uid = run.get(RAY, "rayclusters", cluster)["metadata"]["uid"]
        (owner,) = run.get(NVIDIA, "dynamographdeployments", run.dgd)["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (
            "RayCluster", cluster, cluster_uid, False, False)
        # The lease is released: the RayJob has no owner left and the Job is gone.
        assert not job["metadata"].get("ownerReferences")
        with pytest.raises(client.ApiException) as gone:
            client.BatchV1Api(run.api).read_namespaced_job(f"{run.job}-lease", run.ns)
        assert gone.value.status == 404

        # The RayJob was created suspended, owned by its lease; the DGD owned by the RayJob from
        # its first revision; the cluster made only once the DGD served (no GPU held meanwhile),
        # then the DGD moved to it (the sandbox's resourceVersions are one global counter).
        (_, created), dgd_events = jobs.events(run.job)[0], dgds.events(run.dgd)
        assert created["spec"]["suspend"] is True
        assert [(o["kind"], o["name"]) for o in created["metadata"]["ownerReferences"]] == [("Job", f"{run.job}-lease")]
        assert dgd_events[0][0] == "ADDED" and _uids(dgd_events[0][1]) == [created["metadata"]["uid"]]
        served = next(obj for _, obj in dgd_events if (obj.get("status") or {}).get("state") == "successful")
        moved = next(obj for _, obj in dgd_events if _uids(obj) == [cluster_uid])
        assert _rv(served) < _rv(clusters.events(cluster)[0][1]) < _rv(moved)
        assert all(_uids(obj) for _, obj in dgd_events), "the DGD had a moment without an owner"
        _status_shows_the_run(run, extra)

        gate.open()
        done = run.wait_for(
            RAY, "rayjobs", run.job, status_is("jobDeploymentStatus", "Complete")
        )
        assert done["status"]["jobStatus"] == "SUCCEEDED"
        logs = run.driver_logs(done["status"]["jobId"])
        assert f"dgd_name: {run.dgd}" in logs and "backend: dynamo" in logs
        clusters.wait(lambda h: _deleted(h, cluster), what=f"RayCluster {cluster} deleted")
        dgds.wait(lambda h: _deleted(h, run.dgd), what=f"DGD {run.dgd} deleted")
    assert _rv(_deleted(clusters, cluster)) < _rv(_deleted(dgds, run.dgd))


def _status_shows_the_run(run, extra: tuple[str, ...]) -> None:
    """`status` of a run whose driver runs: its cluster, and the DGD it serves from, with its owner."""
    status = run.cli("status", *PAIR, *run.overrides(*extra), "-o", "json")
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    (dyn,) = data["dynamo"]
    assert dyn["name"] == run.dgd and dyn["state"] == "successful"
    assert dyn["owners"] == [f"RayCluster {data['rayjob']['raycluster']}"]
    assert dyn["frontend"]["reachable"] is True
    assert all(s["ready"] == s["desired"] for s in dyn["services"])
    (role,) = data["roles"]
    assert role["cluster"] == data["rayjob"]["raycluster"] and role["name"] == run.job
    table = run.cli("status", *PAIR, *run.overrides(*extra))
    assert "DYNAMO" in table.stdout and "owner     RayCluster" in table.stdout


def test_wait_exits_zero_on_success_with_summary_through_transient_api_errors(run):
    """Each code an API server answers a retryable call with (500, then 429) is retried: the run
    ends as a clean one does. The fault clears itself once every answer was taken."""
    transient = "create:dynamographdeployments:500:2;create:dynamographdeployments:429:2"
    with run.sandbox.fault("api-errors", transient):
        result = run.run("--wait")
        assert "api-errors" not in process.status(run.sandbox.dir)["faults"], "not every error was answered"
    assert result.returncode == 0, result.stderr
    cluster = run.get(RAY, "rayjobs", run.job)["status"]["rayClusterName"]
    assert f"raycluster     {cluster}" in result.stdout
    assert f"dgd (created)  {run.dgd}  owner: {cluster}" in result.stdout
    assert "job status     SUCCEEDED" in result.stdout
    assert "submitted by KubeRay" in result.stderr and "nrl-k8s submitted it" not in result.stderr


def test_stalled_driver_is_resubmitted(run):
    with run.sandbox.fault("miss-driver-submission"):
        result = run.run("--wait", "--driver-grace", "2")
    assert result.returncode == 0, result.stderr
    assert "nrl-k8s submitted it" in result.stderr
    assert "submitted by nrl-k8s" in result.stdout


@pytest.mark.parametrize(
    "fault,extra,mention",
    [
        ("dgd-failed", (), "state=failed"),
        # The run's own deadline, reached on purpose; long enough for the operator to have
        # marked the pods Unschedulable first (it takes well under a second here).
        ("dgd-stuck-pending", ("infra.dynamo.serving.readyTimeoutS=15",), "Unschedulable"),
    ],
    ids=["dgd-failed", "dgd-stuck-pending"],
)
def test_dgd_failure_exits_1_and_rolls_back(run, fault, extra, mention):
    with run.sandbox.fault(fault):
        result = run.run("--wait", extra=extra)
    assert result.returncode == 1, result.stderr
    assert mention in result.stderr and "Traceback" not in result.stderr
    assert "rolled back: deleted DynamoGraphDeployment" in result.stderr
    run.wait_for(NVIDIA, "dynamographdeployments", run.dgd, _gone)
    assert run.get(RAY, "rayjobs", run.job) is None


def test_rayjob_apply_failure_rolls_back_dgds(run):
    with run.sandbox.fault("api-errors", "create:rayjobs:422:1"):
        result = run.run("--wait")
    assert result.returncode == 1, result.stderr
    assert "rolled back" in result.stderr
    assert run.get(NVIDIA, "dynamographdeployments", run.dgd) is None


def test_pre_existing_dgd_is_reused_and_never_deleted(run):
    up = run.cli("cluster", "up", "--target", "dynamo.serving", *PAIR, *run.overrides())
    assert up.returncode == 0, up.stderr
    with run.sandbox.fault("api-errors", "patch:rayjobs:422:1"):  # the resume, after the DGD was reused
        result = run.run("--wait")
    assert result.returncode == 1
    assert "reused" in result.stderr and "existed before this run" in result.stderr
    assert run.get(NVIDIA, "dynamographdeployments", run.dgd) is not None


def test_proxy_forbidden_falls_back_with_a_hint(run, tmp_path):
    """RBAC denies services/proxy: the run needs it for the Ray dashboard and refuses before
    creating anything, pointing at --dashboard-url; with that (a kubectl port-forward to the
    head, as the hint says) it goes ahead, gates the DGD on pod readiness alone, saying so, and
    streams the driver's log through the URL."""
    env = {**os.environ, "KUBECONFIG": str(run.sandbox.kubeconfig), "NRL_K8S_USER": "it"}
    port = free_ports(1)[0]
    # The driver prints a line, then waits until the test saw it (`run --wait` streams through the
    # port-forward), then runs the example and waits again until the test saw its last line: the
    # real KubeRay deletes the cluster, and the forwarded head, the moment the job ends.
    gate, last = Gate(tmp_path), Gate(tmp_path)
    entrypoint = "echo started; " + gate.entrypoint(f"{EXAMPLE_ENTRYPOINT}; " + last.entrypoint())
    with run.sandbox.fault("proxy-forbidden"):
        refused = run.run("--wait")
        assert refused.returncode == 1, refused.stderr
        assert "get services/proxy" in refused.stderr and "nothing was created" in refused.stderr
        assert "--dashboard-url" in refused.stderr and "Traceback" not in refused.stderr
        assert run.get(RAY, "rayjobs", run.job) is None and run.get(NVIDIA, "dynamographdeployments", run.dgd) is None

        argv = [NRL_K8S, "run", "--rayjob", "--wait", "--dashboard-url", f"http://127.0.0.1:{port}", *PAIR,
                *run.overrides("infra.launch.entrypoint=" + json.dumps(entrypoint))]
        proc = subprocess.Popen(argv, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        watchdog = threading.Timer(DEADLINE_S, proc.kill)  # a hung run ends the reads below
        watchdog.start()
        forward = None
        try:
            head = _ready_head(run)
            forward = subprocess.Popen([str(Path(run.sandbox.info["bin"]) / "kubectl"), "port-forward", "-n", run.ns,
                                        f"pod/{head}", f"{port}:8265"], env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            streamed = _read_until(proc, "started\n", "")
            gate.open()
            streamed = _read_until(proc, "step 3/3", streamed)
            last.open()
            stdout = streamed + proc.stdout.read()
            stderr = proc.stderr.read()
            proc.wait(timeout=DEADLINE_S)
        finally:
            watchdog.cancel()
            gate.open()
            last.open()
            proc.kill()
            if forward is not None:
                forward.kill()
                forward.wait()
    assert proc.returncode == 0, stderr
    assert "cannot probe the frontend" in stderr and "relying on pod readiness" in stderr
    assert f"dgd_name: {run.dgd}" in stdout  # the driver's log, through --dashboard-url
    assert run.get(RAY, "rayjobs", run.job)["status"]["jobStatus"] == "SUCCEEDED"


def _read_until(proc: subprocess.Popen, text: str, seen: str) -> str:
    """``seen`` and the lines of ``proc``'s stdout up to one with ``text``; fail if it ends first."""
    while text not in seen:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        seen += line
    return seen


def _ready_head(run) -> str:
    """The name of the run's Ray head pod once it is Ready (the RayJob's cluster has only one)."""
    def ready(pod: dict) -> bool:
        return any(
            c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or []
        )

    heads = observe(client.CoreV1Api(run.api).list_namespaced_pod, run.ns, label_selector="ray.io/node-type=head",
                    until=lambda pods: any(ready(p) for p in pods.values()))
    return next(name for name, pod in heads.items() if ready(pod))


def test_ctrl_c_during_dgd_wait_rolls_back(run):
    env = {**os.environ, "KUBECONFIG": str(run.sandbox.kubeconfig), "NRL_K8S_USER": "it"}
    with run.sandbox.fault("dgd-stuck-pending"):
        proc = interruptible([NRL_K8S, "run", "--rayjob", *PAIR, *run.overrides()], env)
        run.wait_for(NVIDIA, "dynamographdeployments", run.dgd, lambda o: o is not None)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode != 0
    assert "rolled back: deleted DynamoGraphDeployment" in stderr and "Traceback" not in stderr
    run.wait_for(NVIDIA, "dynamographdeployments", run.dgd, _gone)

