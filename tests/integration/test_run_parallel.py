"""`run --rayjob`, parallel and serial, killed or failing, as a user runs it, against the sandbox.

A killed `nrl-k8s` (kill -9) is the case both orders are built for: in the parallel order the
RayJob's pre-running deadline and GC remove everything; in the serial order the start lease
(a Job with a deadline) and GC do. The points where the CLI is killed are found by watching the objects it
creates; per-kind sandbox delays (the ``delay`` fault) keep each wait open long enough.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid

import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, Gate, History, interruptible, status_is, status_of
from test_run_rayjob import EXAMPLE_ENTRYPOINT, NVIDIA, PAIR, RAY, Run

from nrl_k8s.flows.plan import START_MARGIN_S

APPS = ("apps", "v1")
#: The killed runs' readyTimeoutS: a run must not give up on its own before the test kills it, on a
#: machine four times slower either (the serial test's third run waits out a 20-s DGD delay and its
#: Dynamo pods' start); the tests bring each deadline that follows from it forward themselves.
READY_TIMEOUT_S = 120


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
        # KubeRay copies the spec.jobId the run set into its status on a reconcile of its own, maybe after the run ended
        jobs.wait(lambda h: status_of(h.objects().get(run.job), "jobId"), what="the RayJob's status.jobId")
        job = jobs.objects()[run.job]
        cluster = run.get(RAY, "rayclusters", job["status"]["rayClusterName"])
        # The DGD's very first revision already names the cluster as its (non-controlling) owner.
        first = _first(dgds, run.dgd)
        assert _owners(first) == [cluster["metadata"]["uid"]]
        assert first["metadata"]["ownerReferences"][0]["controller"] is False
        assert (
            job["spec"]["submissionMode"] == "InteractiveMode" and job["spec"]["preRunningDeadlineSeconds"] == 120 + 120
        )
        assert job["spec"]["jobId"] == job["status"]["jobId"]
        # The driver was submitted (spec.jobId set) only after the DGD served, and after the cluster
        # existed: the sandbox's resourceVersions are one counter.
        served = next(
            obj for kind, obj in dgds.events(run.dgd) if (obj.get("status") or {}).get("state") == "successful"
        )
        pointed = next(obj for kind, obj in jobs.events(run.job) if (obj.get("spec") or {}).get("jobId"))
        assert _rv(_first(clusters, cluster["metadata"]["name"])) < _rv(first) < _rv(served) < _rv(pointed)
        assert "submitted by nrl-k8s" in result.stderr + result.stdout

        gate.open()
        done = run.wait_for(
            RAY, "rayjobs", run.job, status_is("jobDeploymentStatus", "Complete")
        )
        assert done["status"]["jobStatus"] == "SUCCEEDED"
        logs = run.driver_logs(done["status"]["jobId"])
        assert f"dgd_name: {run.dgd}" in logs and f"run={done['status']['jobId']}" in logs
        dgds.wait(lambda h: any(kind == "DELETED" for kind, _ in h.events(run.dgd)), what="DGD deleted by GC")


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


def _cluster_of(history: History, name: str) -> str | None:
    """The RayCluster the RayJob ``name`` first named while it was not suspended."""
    return next((status_of(o, "rayClusterName") for _, o in history.events(name)
                 if not o["spec"].get("suspend") and status_of(o, "rayClusterName")), None)


def test_kill_9_in_the_parallel_order_leaves_nothing_once_the_deadline_passes(run, tmp_path):
    names = {point: f"par-{point}-{uuid.uuid4().hex[:4]}" for point in ("rayjob", "dgd", "cluster")}
    killed = Killed(run, tmp_path)
    # each CLI waits READY_TIMEOUT_S (the delays keep every wait open) before it would give up and
    # roll back, and the pre-running deadline is READY_TIMEOUT_S + START_MARGIN_S
    with run.history(RAY, "rayjobs") as jobs, run.history(NVIDIA, "dynamographdeployments") as dgds, \
            run.history(RAY, "rayclusters") as clusters, run.sandbox.fault("delay", "dgd:600;raycluster:600"):
        for name in names.values():
            killed.start(name, "--parallel", extra=(f"infra.dynamo.serving.readyTimeoutS={READY_TIMEOUT_S}",))
        killed.kill_when(jobs, names["rayjob"], names["rayjob"])  # right after the RayJob is created
        killed.kill_when(dgds, names["dgd"], f"{names['dgd']}-dgd")  # during the DGD wait
        jobs.wait(lambda h: _cluster_of(h, names["cluster"]), what="the third run's cluster named")
        killed.kill_when(clusters, names["cluster"], _cluster_of(jobs, names["cluster"]))  # during the cluster wait

        # The deadline each run set, then brought forward: the test does not wait out KubeRay's clock
        jobs.wait(lambda h: all(h.events(n) for n in names.values()), what="every RayJob seen")
        for name in names.values():
            assert _first(jobs, name)["spec"]["preRunningDeadlineSeconds"] == READY_TIMEOUT_S + START_MARGIN_S
            run.custom.patch_namespaced_custom_object(*RAY, run.ns, "rayjobs", name,
                                                      {"spec": {"preRunningDeadlineSeconds": 1}})
        for name in names.values():
            failed = run.wait_for(
                RAY, "rayjobs", name, status_is("jobDeploymentStatus", "Failed")
            )
            assert failed["status"]["reason"] == "PreRunningDeadlineExceeded"
        ran = {_cluster_of(jobs, n) for n in names.values()} - {None}
        clusters.wait(lambda h: not any(h.objects().get(c) for c in ran), what="every cluster deleted")
        dgds.wait(lambda h: not h.objects(), what="every DGD collected")
    # Every DGD that was created had its owner from its very first revision.
    created = {obj["metadata"]["name"] for _, obj in dgds.events()}
    assert created and all(_owners(_first(dgds, name)) for name in created)


def test_kill_9_in_the_serial_order_leaves_nothing_once_the_lease_ends(run, tmp_path):
    names = {point: f"ser-{point}-{uuid.uuid4().hex[:4]}" for point in ("rayjob", "dgd", "cluster")}
    killed = Killed(run, tmp_path)
    batch = client.BatchV1Api(run.api)
    # The lease ends READY_TIMEOUT_S + START_MARGIN_S after it is created. The DGD delay keeps the
    # second run's DGD wait open; the failing DGD patches hold the third run where it moves its DGD
    # from the resumed RayJob to the new cluster, before it releases the lease.
    with run.history(RAY, "rayjobs") as jobs, run.history(NVIDIA, "dynamographdeployments") as dgds, \
            run.history(RAY, "rayclusters") as clusters, History(batch.list_namespaced_job, run.ns) as leases, \
            run.sandbox.fault("delay", "dgd:20;raycluster:600"), \
            run.sandbox.fault("api-errors", "patch:dynamographdeployments:500:100000"):
        for name in names.values():
            killed.start(name, extra=(f"infra.dynamo.serving.readyTimeoutS={READY_TIMEOUT_S}",))
        killed.kill_when(jobs, names["rayjob"], names["rayjob"])  # right after the suspended RayJob is created
        killed.kill_when(dgds, names["dgd"], f"{names['dgd']}-dgd")  # during the DGD wait
        jobs.wait(
            lambda h: _cluster_of(h, names["cluster"]), what="the third run's RayJob resumed and its cluster named"
        )
        killed.kill_when(
            clusters, names["cluster"], _cluster_of(jobs, names["cluster"])
        )  # moving its DGD to the cluster

        # The deadline each run set, then brought forward: the test does not wait out the TTL controller's clock
        leases.wait(lambda h: all(h.events(f"{n}-lease") for n in names.values()), what="every lease seen")
        for name in names.values():
            lease = _first(leases, f"{name}-lease")
            assert lease["spec"]["ttlSecondsAfterFinished"] == READY_TIMEOUT_S + START_MARGIN_S
            batch.patch_namespaced_job(f"{name}-lease", run.ns, {"spec": {"ttlSecondsAfterFinished": 1}})
        # No one runs gc: each lease (Complete from its start) is deleted by the TTL controller at its
        # deadline, and GC takes its RayJob and everything that hangs off it.
        leases.wait(lambda h: h.events() and not h.objects(), what="every lease ended")
        jobs.wait(lambda h: not h.objects(), what="every RayJob deleted")
        clusters.wait(lambda h: not h.objects(), what="every cluster deleted")
        dgds.wait(lambda h: h.events() and not h.objects(), what="every DGD collected")
    ended = {obj["metadata"]["name"] for kind, obj in leases.events() if kind != "DELETED"
             and any(c["type"] == "Complete" for c in (obj.get("status") or {}).get("conditions") or [])}
    assert {f"{name}-lease" for name in names.values()} <= ended
    # Nothing was unowned at any moment: each RayJob and DGD had an owner from its first revision.
    assert all(_owners(_first(jobs, name)) for name in names.values())
    assert all(_owners(_first(dgds, name)) for name in {obj["metadata"]["name"] for _, obj in dgds.events()})


def test_parallel_dgd_failure_rolls_back_everything_the_run_created(run):
    # The garbage collector deletes the RayJob's cluster after the run has ended: the watch lasts until then.
    with run.history(RAY, "rayclusters") as clusters:
        with run.sandbox.fault("dgd-failed"):
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
    exit 1 says what still runs and how to stop it (it once rolled back a job that then SUCCEEDED).
    The API server refuses the patch (422), so the run fails at once instead of retrying a 500 for a minute."""
    gate = Gate(tmp_path)
    with run.sandbox.fault("api-errors", "patch:rayjobs:422:100000"):
        result = run.run("--parallel", "--no-wait", extra=(gate.override(EXAMPLE_ENTRYPOINT),))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "rolled back" not in result.stderr and "nothing was deleted" in result.stderr, result.stderr
    assert f"Ray job {run.job}-" in result.stderr and "nrl-k8s job stop" in result.stderr
    assert run.get(RAY, "rayjobs", run.job) is not None
    assert run.get(NVIDIA, "dynamographdeployments", run.dgd) is not None
    gate.open()
