"""`run --rayjob --parallel` and `nrl-k8s gc`, as a user runs them, against the sandbox.

A killed `nrl-k8s` (kill -9) is the case both exist for: in the parallel order the RayJob's
pre-running deadline and GC remove everything; in the serial order `gc` removes exactly what
the dead run left. The points where the CLI is killed are found by watching the objects it
creates; per-kind sandbox delays (the ``delay`` fault) keep each wait open long enough.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid

import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, Gate, History, eventually, interruptible, run_cli
from test_run_rayjob import EXAMPLE_ENTRYPOINT, NVIDIA, PAIR, RAY, Run

APPS = ("apps", "v1")


def _owners(obj: dict) -> list[str]:
    return [o["uid"] for o in obj["metadata"].get("ownerReferences") or []]


def _first(history: History, name: str) -> dict:
    return history.events(name)[0][1]


def _rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


@pytest.fixture
def run(sandbox, sandbox_namespace):
    r = Run(sandbox, sandbox_namespace)
    yield r
    r.api.close()


def test_parallel_creates_every_dgd_owned_and_submits_the_driver_once_it_serves(run, tmp_path):
    gate = Gate(tmp_path)
    with run.history(RAY, "rayjobs") as jobs, run.history(NVIDIA, "dynamographdeployments") as dgds, \
            run.history(RAY, "rayclusters") as clusters, run.sandbox.fault("delay", "dgd:3"):
        result = run.run("--parallel", "--no-wait", extra=(gate.override(EXAMPLE_ENTRYPOINT),))
        assert result.returncode == 0, result.stderr
        job = run.get(RAY, "rayjobs", run.job)
        cluster = run.get(RAY, "rayclusters", job["status"]["rayClusterName"])
        # The DGD's very first revision already names the cluster as its (non-controlling) owner.
        first = _first(dgds, run.dgd)
        assert _owners(first) == [cluster["metadata"]["uid"]]
        assert first["metadata"]["ownerReferences"][0]["controller"] is False
        assert job["spec"]["submissionMode"] == "InteractiveMode" and job["spec"]["preRunningDeadlineSeconds"] == 120 + 120
        assert job["spec"]["jobId"] == job["status"]["jobId"]
        # The driver was submitted (spec.jobId set) only after the DGD served, and after the cluster
        # existed: the sandbox's resourceVersions are one counter.
        served = next(obj for kind, obj in dgds.events(run.dgd) if (obj.get("status") or {}).get("state") == "successful")
        pointed = next(obj for kind, obj in jobs.events(run.job) if (obj.get("spec") or {}).get("jobId"))
        assert _rv(_first(clusters, cluster["metadata"]["name"])) < _rv(first) < _rv(served) < _rv(pointed)
        assert "submitted by nrl-k8s" in result.stderr + result.stdout

        gate.open()
        done = run.wait_for(RAY, "rayjobs", run.job, lambda o: o and o["status"].get("jobDeploymentStatus") == "Complete")
        assert done["status"]["jobStatus"] == "SUCCEEDED"
        logs = run.driver_logs(done["status"]["jobId"])
        assert f"dgd_name: {run.dgd}" in logs and f"run={done['status']['jobId']}" in logs
        dgds.wait(lambda h: any(kind == "DELETED" for kind, _ in h.events(run.dgd)), what="DGD deleted by GC")


def test_parallel_is_refused_when_kuberay_lacks_interactive_mode(separate_sandbox, tmp_path):
    with separate_sandbox("old-rayjob-crd") as box:
        env = {**os.environ, "KUBECONFIG": str(box.kubeconfig), "NRL_K8S_USER": "it"}
        result = run_cli(["run", "--parallel", *PAIR], env=env,
                                timeout=DEADLINE_S)
        assert result.returncode == 2, result.stderr
        assert "--parallel needs spec.preRunningDeadlineSeconds" in result.stderr and "nothing was created" in result.stderr
        assert "Traceback" not in result.stderr
        custom = client.CustomObjectsApi(box.api_client())
        assert custom.list_namespaced_custom_object("nvidia.com", "v1alpha1", "default", "dynamographdeployments")["items"] == []


class Killed:
    """Runs started at once, each killed (SIGKILL) when its own object first appears."""

    def __init__(self, run: Run, tmp_path):
        self.run, self.gate, self.procs = run, Gate(tmp_path), {}

    def start(self, name: str, *flags: str, extra: tuple[str, ...] = ()) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.run.sandbox.kubeconfig), "NRL_K8S_USER": "it"}
        overrides = [f"infra.namespace={self.run.ns}", f"infra.kuberay.training.name={name}",
                     f"infra.dynamo.serving.name={name}-dgd", self.gate.override(EXAMPLE_ENTRYPOINT), *extra]
        self.procs[name] = subprocess.Popen([NRL_K8S, "run", "--rayjob", "--no-wait", *flags, *PAIR, *overrides],
                                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def kill_when(self, history: History, name: str, what: str) -> dict:
        """SIGKILL run ``name``'s CLI as soon as ``history`` has seen object ``what``."""
        history.wait(lambda h: h.events(what), what=f"{what} created")
        proc = self.procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=DEADLINE_S)
        assert proc.returncode == -signal.SIGKILL, f"{name} ended before it was killed: {proc.stderr.read()}"
        return history.events(what)[0][1]


def test_kill_9_in_the_parallel_order_leaves_nothing_once_the_deadline_passes(run, tmp_path):
    names = {point: f"par-{point}-{uuid.uuid4().hex[:4]}" for point in ("rayjob", "dgd", "cluster")}
    killed = Killed(run, tmp_path)
    # readyTimeoutS 30: each CLI waits that long (the delays keep every wait open) before it
    # would give up and roll back, and the pre-running deadline is 30 + 120 s
    with run.history(RAY, "rayjobs") as jobs, run.history(NVIDIA, "dynamographdeployments") as dgds, \
            run.history(RAY, "rayclusters") as clusters, run.sandbox.fault("delay", "dgd:600;raycluster:600"):
        for name in names.values():
            killed.start(name, "--parallel", extra=("infra.dynamo.serving.readyTimeoutS=30",))
        killed.kill_when(jobs, names["rayjob"], names["rayjob"])  # right after the RayJob is created
        killed.kill_when(dgds, names["dgd"], f"{names['dgd']}-dgd")  # during the DGD wait
        cluster_of = lambda h, name: next((o["status"].get("rayClusterName") for _, o in h.events(name)  # noqa: E731
                                           if (o.get("status") or {}).get("rayClusterName")), None)
        jobs.wait(lambda h: cluster_of(h, names["cluster"]), what="the third run's cluster named")
        killed.kill_when(clusters, names["cluster"], cluster_of(jobs, names["cluster"]))  # during the cluster wait

        for name in names.values():
            failed = run.wait_for(RAY, "rayjobs", name, lambda o: o and o["status"].get("jobDeploymentStatus") == "Failed")
            assert failed["status"]["reason"] == "PreRunningDeadlineExceeded"
        clusters.wait(lambda h: all(not h.objects().get(c) for c in {cluster_of(jobs, n) for n in names.values()} if c),
                      what="every cluster deleted")
        dgds.wait(lambda h: not h.objects(), what="every DGD collected")
    # Every DGD that was created had its owner from its very first revision.
    created = {obj["metadata"]["name"] for _, obj in dgds.events()}
    assert created and all(_owners(_first(dgds, name)) for name in created)


def test_kill_9_in_the_serial_order_then_gc_removes_exactly_the_leftovers(run, tmp_path):
    names = {point: f"ser-{point}-{uuid.uuid4().hex[:4]}" for point in ("dgd", "rayjob", "cluster")}
    killed = Killed(run, tmp_path)
    gc = lambda *flags: run.cli("-n", run.ns, "gc", *flags)  # noqa: E731
    with run.history(RAY, "rayjobs") as jobs, run.history(NVIDIA, "dynamographdeployments") as dgds, \
            run.sandbox.fault("delay", "dgd:45;raycluster:600"):
        # killed in its DGD wait (the CLI would give up at readyTimeoutS 30): its owner deadline is
        # 30 + 60 s after the DGD is created
        killed.start(names["dgd"], extra=("infra.dynamo.serving.readyTimeoutS=30",))
        killed.start(names["rayjob"])
        killed.start(names["cluster"])
        waiting = killed.kill_when(dgds, names["dgd"], f"{names['dgd']}-dgd")
        killed.kill_when(jobs, names["rayjob"], names["rayjob"])
        jobs.wait(lambda h: any((o.get("status") or {}).get("rayClusterName") for _, o in h.events(names["cluster"])),
                  what="the third run's cluster named")
        killed.kill_when(jobs, names["cluster"], names["cluster"])

        # Before its deadline the first run may still be starting: kept. The other two have live
        # RayJobs: whatever of theirs is still unowned (the CLI may have linked its DGD before it
        # died) is linked to their RayJob or its cluster, as the run would have done.
        dry = gc("--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert f"kept: DynamoGraphDeployment {names['dgd']}-dgd" in dry.stdout and "would delete" not in dry.stdout
        for name in (names["rayjob"], names["cluster"]):
            run.wait_for(RAY, "rayjobs", name, lambda o: o and o["status"].get("rayClusterName"))
        linked = gc()
        assert linked.returncode == 0, linked.stderr
        for line in linked.stdout.splitlines():
            assert line.startswith("linked to Ray") or line.startswith(f"kept: DynamoGraphDeployment {names['dgd']}-dgd"), line
        for name in (names["rayjob"], names["cluster"]):
            cluster = run.get(RAY, "rayclusters", run.get(RAY, "rayjobs", name)["status"]["rayClusterName"])
            assert _owners(run.get(NVIDIA, "dynamographdeployments", f"{name}-dgd")) == [cluster["metadata"]["uid"]]
        assert run.get(NVIDIA, "dynamographdeployments", f"{names['dgd']}-dgd") is not None

        # Past the first run's deadline, gc deletes its DGD — and only that.
        deadline = waiting["metadata"]["annotations"]["nrl-k8s.io/owner-deadline"]
        eventually(lambda: gc("--dry-run").stdout.count("would delete") == 1,
                   what=f"the first run's owner deadline ({deadline}) to pass")
        deleted = gc()
        rows = [line for line in deleted.stdout.splitlines() if line.startswith("deleted:")]
        assert rows == [f"deleted: DynamoGraphDeployment {names['dgd']}-dgd (run {waiting['metadata']['labels']['nrl-k8s.io/run-id']}: "
                        "its run died before creating its RayJob)"], deleted.stdout
        dgds.wait(lambda h: any(kind == "DELETED" for kind, _ in h.events(f"{names['dgd']}-dgd")), what="deleted")
        assert {n for n in dgds.objects()} == {f"{names['rayjob']}-dgd", f"{names['cluster']}-dgd"}
        assert gc("--dry-run").stdout.strip().startswith("nothing left behind")


def test_parallel_dgd_failure_rolls_back_everything_the_run_created(run):
    with run.history(RAY, "rayclusters") as clusters, run.sandbox.fault("dgd-failed"):
        result = run.run("--parallel", "--wait")
    assert result.returncode == 1, result.stderr
    assert "state=failed" in result.stderr and "Traceback" not in result.stderr
    assert f"rolled back: deleted DynamoGraphDeployment {run.dgd}" in result.stderr
    assert f"RayJob {run.job}" in result.stderr.split("rolled back:")[1]
    assert run.get(RAY, "rayjobs", run.job) is None
    run.wait_for(NVIDIA, "dynamographdeployments", run.dgd, lambda o: o is None)
    clusters.wait(lambda h: h.events() and not h.objects(), what="the RayJob's cluster deleted")


def test_ctrl_c_during_the_parallel_waits_rolls_back(run):
    env = {**os.environ, "KUBECONFIG": str(run.sandbox.kubeconfig), "NRL_K8S_USER": "it"}
    with run.sandbox.fault("dgd-stuck-pending"):
        proc = interruptible([NRL_K8S, "run", "--rayjob", "--parallel", *PAIR, *run.overrides()], env)
        run.wait_for(NVIDIA, "dynamographdeployments", run.dgd, lambda o: o is not None)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 130, stderr
    assert f"rolled back: deleted DynamoGraphDeployment {run.dgd}" in stderr and "Traceback" not in stderr
    assert run.get(RAY, "rayjobs", run.job) is None


def test_a_failure_after_the_driver_is_submitted_rolls_nothing_back(run, tmp_path):
    """The RayJob's spec.jobId patch fails after the dashboard took the driver: nothing is deleted,
    exit 1 says what still runs and how to stop it (it once rolled back a job that then SUCCEEDED)."""
    gate = Gate(tmp_path)
    with run.sandbox.fault("api-errors", "patch:rayjobs:500:100000"):
        result = run.run("--parallel", "--no-wait", extra=(gate.override(EXAMPLE_ENTRYPOINT),))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "rolled back" not in result.stderr and "nothing was deleted" in result.stderr, result.stderr
    assert f"Ray job {run.job}-" in result.stderr and "nrl-k8s job stop" in result.stderr
    assert run.get(RAY, "rayjobs", run.job) is not None
    assert run.get(NVIDIA, "dynamographdeployments", run.dgd) is not None
    gate.open()
