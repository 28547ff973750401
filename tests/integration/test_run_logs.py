"""Driver logs as a user follows them, and `run`'s --timeout, --rayjob-name and head Service
check, against the sandbox.

Every test runs the installed `nrl-k8s` as a subprocess with the sandbox's kubeconfig, in a
namespace and a user cache of its own. Drivers that must still run when the test looks wait for
its ``Gate``; what comes and goes is awaited with list-then-watch (``observe``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, Gate, find_custom, observe, run_cli, status_is

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
RAY, NVIDIA = ("ray.io", "v1"), ("nvidia.com", "v1alpha1")
# A driver printing numbered lines (one with a secret-looking value), then what it is given.
LINES = 3000
PRINTER = ("python3 -c 'for i in range({n}): print(\"line %05d \" % i + \"x\" * 60)'; "
           "echo WANDB_API_KEY=wk-s3cr3t-value; ")


class Streamed:
    """A command's stdout as the test has read it so far (``seen``)."""

    def __init__(self, process: subprocess.Popen):
        self.process, self.seen = process, ""

    def until(self, text: str) -> None:
        """Read lines until ``text`` was printed; fail with the command's stderr if it ended first."""
        while text not in self.seen:
            line = self.process.stdout.readline()
            assert line, self.process.stderr.read()
            self.seen += line

    def end(self) -> tuple[int, str, str]:
        """(exit code, all of stdout, stderr) once it has ended."""
        out = self.seen + self.process.stdout.read()  # not communicate(): it would skip what readline() buffered
        errors = self.process.stderr.read()
        return self.process.wait(timeout=DEADLINE_S), out, errors


class User:
    """One test's namespace, names, user cache and CLI."""

    def __init__(self, sandbox, namespace: str, cache: Path):
        self.sandbox, self.ns, self.cache = sandbox, namespace, cache
        self.job = f"logs-{uuid.uuid4().hex[:6]}"
        self.dgd = f"{self.job}-dgd"
        self.api = sandbox.api_client()
        self.custom = client.CustomObjectsApi(self.api)

    def env(self) -> dict:
        return {**os.environ, "KUBECONFIG": str(self.sandbox.kubeconfig), "NRL_K8S_USER": "it",
                "XDG_CACHE_HOME": str(self.cache)}

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return run_cli(list(args), env=self.env(), timeout=DEADLINE_S)

    def run_args(self, *flags: str, entrypoint: str) -> list[str]:
        return [
            "run",
            "--rayjob",
            *flags,
            *PAIR,
            f"infra.namespace={self.ns}",
            f"infra.kuberay.training.name={self.job}",
            f"infra.dynamo.serving.name={self.dgd}",
            "infra.launch.entrypoint=" + json.dumps(entrypoint),
        ]

    def run(self, *flags: str, entrypoint: str) -> subprocess.CompletedProcess:
        return self.cli(*self.run_args(*flags, entrypoint=entrypoint))

    @contextlib.contextmanager
    def started(self, *args: str) -> Iterator[Streamed]:
        """The CLI in the background, its output read as it comes; killed at the deadline."""
        process = subprocess.Popen([NRL_K8S, *args], env=self.env(), text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        watchdog = threading.Timer(DEADLINE_S, process.kill)  # a hung command ends the reads
        watchdog.start()
        try:
            yield Streamed(process)
        finally:
            watchdog.cancel()
            process.kill()
            process.wait()

    def get(self, plural: str, name: str, group_version=RAY) -> dict | None:
        return find_custom(self.custom, group_version, self.ns, plural, name)

    def wait_for(self, plural: str, name: str, predicate, group_version=RAY) -> dict | None:
        found = observe(self.custom.list_namespaced_custom_object, *group_version, self.ns, plural,
                        field_selector=f"metadata.name={name}", until=lambda objects: predicate(objects.get(name)))
        return found.get(name)


@pytest.fixture
def user(sandbox, sandbox_namespace, tmp_path):
    u = User(sandbox, sandbox_namespace, tmp_path / "cache")
    yield u
    u.api.close()


def _two_gates(tmp_path, before: str, after: str) -> tuple[Gate, Gate, str]:
    """A driver that prints ``before``, waits for the first gate, prints ``after``, then waits for
    the second: the test releases it once it has seen ``after``, because KubeRay deletes the
    cluster as the job ends, and with its head what the log stream had not sent yet."""
    gate, last = Gate(tmp_path), Gate(tmp_path)
    return gate, last, before + gate.entrypoint(f"{after}; " + last.entrypoint())


def test_run_wait_keeps_the_whole_log_of_a_driver_that_ends_at_once_and_job_logs_prints_it(user):
    # Ray writes a short job's log as the job ends: run --wait keeps the cluster (its TTL) until the
    # log is in, then deletes it, and job logs prints the copy it saved once the cluster is gone.
    result = user.run("--wait", entrypoint=PRINTER.format(n=LINES) + "echo done")
    code, stdout, errors = result.returncode, result.stdout, result.stderr
    assert code == 0, errors
    job = user.get("rayjobs", user.job)
    assert job["status"]["jobStatus"] == "SUCCEEDED" and job["spec"]["ttlSecondsAfterFinished"] == 30
    assert "deleted: the job is over and its log kept" in errors
    user.wait_for("rayclusters", job["status"]["rayClusterName"], lambda obj: obj is None)

    streamed = stdout[:stdout.index("\nrun ")]  # the driver log, then the run's summary
    assert "line 00000" in streamed and streamed.endswith("done\n") and "wk-s3cr3t-value" not in streamed
    (saved,) = (user.cache / "nrl-k8s/runs").glob("*.log")
    assert saved.read_text() == streamed and stat.S_IMODE(saved.stat().st_mode) == 0o600

    for args in (
        ["job", "logs"],
        [
            "logs",
            *PAIR,
            f"infra.namespace={user.ns}",
            f"infra.kuberay.training.name={user.job}",
            f"infra.dynamo.serving.name={user.dgd}",
        ],
    ):
        logs = user.cli(*args)
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout == streamed
        assert f"this is the driver log `run --wait` saved, {saved}" in logs.stderr
        assert f"job {job['status']['jobId']} SUCCEEDED" in logs.stderr


def test_timeout_exits_1_naming_what_still_runs_and_its_follow_command_streams_the_whole_log(user, tmp_path):
    gate, last, entrypoint = _two_gates(tmp_path, PRINTER.format(n=LINES), "echo after the gate")
    try:
        result = user.run("--wait", "--timeout", "3", entrypoint=entrypoint)
        assert result.returncode == 1, result.stderr
        job = user.get("rayjobs", user.job)
        cluster, job_id = job["status"]["rayClusterName"], job["status"]["jobId"]
        assert re.search(f"error: job {job_id} is still (PENDING|RUNNING) after 3s", result.stderr), result.stderr
        assert (f"RayJob {user.job} keeps running (RayCluster {cluster}, Ray job {job_id}); nothing was deleted"
                in result.stderr)
        run_id = job["metadata"]["labels"]["nrl-k8s.io/run-id"]
        assert f"`nrl-k8s logs -f --run {run_id}`" in result.stderr, result.stderr
        assert f"`nrl-k8s job stop --run {run_id}`" in result.stderr
        assert job["status"].get("jobDeploymentStatus") not in ("Complete", "Failed")
        assert user.get("rayclusters", cluster) is not None and user.get("dynamographdeployments", user.dgd, NVIDIA)
        # The follow command as the hint gives it streams the whole output, from while the driver
        # still waits for the gate to its last line.
        with user.started("logs", "-f", "--run", run_id) as follow:
            follow.until(f"line {LINES - 1:05d} ")
            gate.open()
            follow.until("after the gate\n")
            last.open()
            code, printed, errors = follow.end()
    finally:
        gate.open()
        last.open()
    assert code == 0, errors
    assert printed == user.sandbox.driver_log(job_id).replace("wk-s3cr3t-value", "<redacted>")
    assert printed.endswith("after the gate\n") and "WANDB_API_KEY=<redacted>" in printed
    assert (
        user.wait_for("rayjobs", user.job, status_is("jobDeploymentStatus", "Complete"))["status"]["jobStatus"]
        == "SUCCEEDED"
    )


def test_two_runs_from_one_infra_side_by_side_with_rayjob_name(user, tmp_path):
    gate = Gate(tmp_path)
    names = [f"{user.job}-a", f"{user.job}-b"]
    try:
        for name in names:
            result = user.run(
                "--no-wait", "--rayjob-name", name, entrypoint=gate.entrypoint("echo from $NRL_K8S_RUN_ID")
            )
            assert result.returncode == 0, result.stderr
        jobs = [user.wait_for("rayjobs", name, status_is("jobStatus", "RUNNING")) for name in names]
        run_ids = [job["metadata"]["labels"]["nrl-k8s.io/run-id"] for job in jobs]
        assert run_ids[0] != run_ids[1] and all(r.startswith(n) for r, n in zip(run_ids, names, strict=True))
        clusters = [job["status"]["rayClusterName"] for job in jobs]
        dgd = user.get("dynamographdeployments", user.dgd, NVIDIA)  # one DGD, used by both runs
        assert dgd["metadata"]["annotations"]["nrl-k8s.io/users"] == ",".join(names)
        assert sorted(o["name"] for o in dgd["metadata"]["ownerReferences"]) == sorted(clusters)
    finally:
        gate.open()
    for name, run_id in zip(names, run_ids, strict=True):
        done = user.wait_for("rayjobs", name, status_is("jobDeploymentStatus", "Complete"))
        assert f"from {run_id}" in user.sandbox.driver_log(done["status"]["jobId"])


def test_a_head_service_collision_is_refused_before_anything_is_applied(user):
    core = client.CoreV1Api(user.api)
    core.create_namespaced_service(user.ns, {"metadata": {"name": f"{user.job}-head-svc",
                                                          "labels": {"ray.io/cluster": user.job}},
                                             "spec": {"ports": [{"port": 8265}]}})
    result = user.run("--wait", entrypoint="true")
    assert result.returncode == 2
    assert (f"error: RayJob {user.job} would get the head Service {user.job}-head-svc (KubeRay 1.5+ gives a RayJob a "
            f"head Service of its own name" in result.stderr)
    assert f"already exists in namespace {user.ns} for Ray cluster {user.job}" in result.stderr
    assert "hint: name the RayJob differently: `run --rayjob-name NAME`" in result.stderr
    assert "Traceback" not in result.stderr
    assert user.get("rayjobs", user.job) is None and user.get("dynamographdeployments", user.dgd, NVIDIA) is None
    assert [s.metadata.name for s in core.list_namespaced_secret(user.ns).items] == []
