"""Runs that fail leave nothing behind unsaid: rollback, interrupts, shared DGDs, leftovers.

The installed `nrl-k8s` runs as a subprocess against the session sandbox, one namespace per
test. Where a test needs the run at a given point, it waits on observable state (an object, a
line on stderr) or holds the run with a sandbox fault until the cluster is where it wants it.
"""

from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, interruptible, observe, status_is, status_of

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).with_name("nrl-k8s"))
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
RAY, NVIDIA = ("ray.io", "v1", "rayjobs"), ("nvidia.com", "v1alpha1", "dynamographdeployments")
RAYCLUSTERS = ("ray.io", "v1", "rayclusters")


class Proc:
    """A background `nrl-k8s` whose stderr is read line by line as it comes."""

    def __init__(self, argv: list[str], env: dict):
        self.proc = interruptible(argv, env)
        self.lines: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        self.stdout: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self._stdout = threading.Thread(target=lambda: self.stdout.extend(self.proc.stdout), daemon=True)
        self._stdout.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def wait_line(self, text: str, timeout: float = DEADLINE_S) -> str:
        """Block until a stderr line contains ``text``; fail at the deadline or when stderr ends."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no stderr line with {text!r}; so far:\n{''.join(self.stderr)}"
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"stderr ended without {text!r}:\n{''.join(self.stderr)}"
            self.stderr.append(line)
            if text in line:
                return line

    def finish(self, timeout: float = DEADLINE_S) -> tuple[int, str, str]:
        """Wait for the exit; (exit code, stdout, all of stderr)."""
        code = self.proc.wait(timeout=timeout)
        while (line := self.lines.get(timeout=timeout)) is not None:
            self.stderr.append(line)
        self._stdout.join(timeout)
        return code, "".join(self.stdout), "".join(self.stderr)


class Env:
    """One test's namespace and names, the CLI, and reads of the objects it makes."""

    def __init__(self, sandbox, namespace: str, tmp: Path):
        self.sandbox, self.ns, self.tmp = sandbox, namespace, tmp
        self.job = f"r-{uuid.uuid4().hex[:6]}"
        self.dgd = f"{self.job}-dgd"
        # The operators' credentials, straight to kube-apiserver: the test's own reads are exempt
        # from the faults it turns on (they act on the user's door and the user's RBAC).
        self.api = sandbox.api_client(admin=True)
        self.custom = client.CustomObjectsApi(self.api)
        self.env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": "it"}
        self.procs: list[Proc] = []

    def overrides(self, *extra: str, job: str | None = None) -> list[str]:
        return [f"infra.namespace={self.ns}", f"infra.kuberay.training.name={job or self.job}",
                f"infra.dynamo.serving.name={self.dgd}", *extra]

    def cli(self, *args: str, extra: tuple[str, ...] = (), job: str | None = None) -> subprocess.CompletedProcess:
        argv = [EXE, *args, *PAIR, *self.overrides(*extra, job=job)]
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=DEADLINE_S)

    def start(self, *args: str, extra: tuple[str, ...] = (), job: str | None = None) -> Proc:
        self.procs.append(Proc([EXE, *args, *PAIR, *self.overrides(*extra, job=job)], self.env))
        return self.procs[-1]

    def held_driver(self) -> tuple[str, Path]:
        """An entrypoint override whose driver runs until the test creates the returned file."""
        release = self.tmp / f"release-{uuid.uuid4().hex[:6]}"
        return f"infra.launch.entrypoint='until [ -e {release} ]; do sleep 0.1; done'", release

    def get(self, what, name: str) -> dict | None:
        try:
            return self.custom.get_namespaced_custom_object(what[0], what[1], self.ns, what[2], name)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def wait_for(self, what, name: str, predicate, timeout: float = DEADLINE_S) -> dict | None:
        """List then watch one object (from the list's resourceVersion: nothing in between is
        missed) until predicate(obj or None) holds; fail at the deadline."""
        found = observe(self.custom.list_namespaced_custom_object, what[0], what[1], self.ns, what[2],
                        field_selector=f"metadata.name={name}", until=lambda objects: predicate(objects.get(name)),
                        timeout_s=timeout)
        return found.get(name)

    def kubectl_command(self, stderr: str, what: str) -> subprocess.CompletedProcess:
        """Run the removal command the CLI printed for ``what`` (it must be exactly runnable)."""
        line = next(line for line in stderr.splitlines() if line.startswith(f"left behind: {what} "))
        command = shlex.split(line.split("remove it: ", 1)[1])
        assert command[0] == "kubectl", line
        return self.sandbox.kubectl(*command[1:])


@pytest.fixture
def env(sandbox, sandbox_namespace, tmp_path):
    e = Env(sandbox, sandbox_namespace, tmp_path)
    yield e
    for proc in e.procs:  # a failed test may leave its run going
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait()
    e.api.close()


def gone(obj) -> bool:
    return obj is None


def users(obj: dict) -> list[str]:
    value = (obj["metadata"].get("annotations") or {}).get("nrl-k8s.io/users") or ""
    return [name for name in value.split(",") if name]


# -- rollback that cannot delete ----------------------------------------------------------------
def test_delete_denied_in_rollback_shows_the_cause_and_what_is_left(env):
    # the DGD's owner (the RayJob) and the RayJob's (the lease) denied too: else GC would take it
    denied = "delete:dynamographdeployments:403:1;delete:rayjobs:403:1;delete:jobs:403:1"
    with env.sandbox.fault("dgd-failed"), env.sandbox.fault("api-errors", denied):
        result = env.cli("run", "--wait")
    assert result.returncode == 1, result.stderr
    assert "error: dynamo.serving" in result.stderr and "state=failed" in result.stderr  # the original cause
    assert "Traceback" not in result.stderr
    assert f"left behind: DynamoGraphDeployment {env.dgd} (delete failed: forbidden" in result.stderr
    assert f"left behind: RayJob {env.job} (delete failed: forbidden" in result.stderr
    assert env.get(NVIDIA, env.dgd) is not None
    env.kubectl_command(result.stderr, f"DynamoGraphDeployment {env.dgd}")
    env.kubectl_command(result.stderr, f"RayJob {env.job}")
    env.wait_for(NVIDIA, env.dgd, gone)


def test_rollback_retries_a_failing_delete(env):
    with env.sandbox.fault("dgd-failed"), env.sandbox.fault("api-errors", "delete:dynamographdeployments:503:4"):
        result = env.cli("run", "--wait")
    assert result.returncode == 1, result.stderr
    assert "state=failed" in result.stderr and "left behind" not in result.stderr
    assert f"rolled back: deleted DynamoGraphDeployment {env.dgd}" in result.stderr
    env.wait_for(NVIDIA, env.dgd, gone)


# -- permissions ------------------------------------------------------------------------------
def test_missing_permissions_refuse_the_run_before_anything_is_created(env):
    with env.sandbox.fault("rbac-deny", "create:rayjobs;delete:dynamographdeployments;patch:secrets"):
        result = env.cli("run", "--wait")
    assert result.returncode == 1, result.stderr
    error = next(line for line in result.stderr.splitlines() if line.startswith("error:"))
    for missing in ("create rayjobs.ray.io", "delete dynamographdeployments.nvidia.com", "patch secrets"):
        assert missing in error
    assert "get rayjobs" not in error and "rolled back" not in result.stderr
    assert env.get(NVIDIA, env.dgd) is None and env.get(RAY, env.job) is None


def test_check_fails_on_rejected_credentials(env, tmp_path):
    bad = tmp_path / "kubeconfig"
    text = env.sandbox.kubeconfig.read_text()
    assert "token: " in text
    bad.write_text("\n".join(line.split("token: ")[0] + "token: not-a-valid-token" if "token: " in line else line
                             for line in text.splitlines()))
    result = subprocess.run([EXE, "check", *PAIR], capture_output=True, text=True, timeout=DEADLINE_S,
                            env={**env.env, "KUBECONFIG": str(bad)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL credentials  unauthorized" in result.stdout and "skipped" not in result.stdout


# -- interrupts during rollback -----------------------------------------------------------------
def _interrupted_rollback(env) -> Proc:
    """A run interrupted in bring-up whose rollback is stuck retrying the DGD delete."""
    run = env.start("run", "--wait")
    env.wait_for(NVIDIA, env.dgd, lambda o: o is not None)
    run.proc.send_signal(signal.SIGINT)
    run.wait_line(f"deleting DynamoGraphDeployment {env.dgd}")
    run.proc.send_signal(signal.SIGINT)
    run.wait_line("rolling back, Ctrl-C again to abort")
    return run


def test_second_ctrl_c_keeps_rolling_back(env):
    with env.sandbox.fault("dgd-stuck-pending"):
        with env.sandbox.fault("api-errors", "delete:dynamographdeployments:503:100000"):
            run = _interrupted_rollback(env)
        code, _, stderr = run.finish()
    assert code == 130, stderr
    assert f"rolled back: deleted DynamoGraphDeployment {env.dgd}" in stderr and "Traceback" not in stderr
    env.wait_for(NVIDIA, env.dgd, gone)


def test_third_ctrl_c_aborts_and_says_what_is_left(env):
    with env.sandbox.fault("dgd-stuck-pending"):
        with env.sandbox.fault("api-errors", "delete:dynamographdeployments:503:100000"):
            run = _interrupted_rollback(env)
            run.proc.send_signal(signal.SIGINT)
            code, _, stderr = run.finish()
        assert code == 130, stderr
        assert "rollback aborted: deleted nothing" in stderr and "Traceback" not in stderr
        assert f"left behind: DynamoGraphDeployment {env.dgd} (rollback aborted)" in stderr
        assert env.get(NVIDIA, env.dgd) is not None
        env.kubectl_command(stderr, f"DynamoGraphDeployment {env.dgd}")
    env.wait_for(NVIDIA, env.dgd, gone)


# -- watch failures and a job that finishes unseen -----------------------------------------------
def test_job_that_finished_unseen_is_not_rolled_back(env):
    """Watch denied, and the run frozen from just after it created the RayJob until the job has
    succeeded and its cluster is gone: nothing it polls afterwards shows the cluster. (--ttl 0: KubeRay
    deletes the cluster as the job ends, instead of the frozen run once it has the log.)"""
    with env.sandbox.fault("rbac-deny", "watch:*"):
        run = env.start("run", "--wait", "--ttl", "0")
        env.wait_for(RAY, env.job, lambda o: o is not None and o["spec"].get("suspend") is False)  # resumed
        run.proc.send_signal(signal.SIGSTOP)
        try:
            done = env.wait_for(
                RAY, env.job, status_is("jobDeploymentStatus", "Complete")
            )
            cluster = done["status"]["rayClusterName"]
            env.wait_for(RAYCLUSTERS, cluster, gone)
        finally:
            run.proc.send_signal(signal.SIGCONT)
        code, stdout, stderr = run.finish()
    assert code == 0, stderr
    assert "job status     SUCCEEDED" in stdout and "rolled back:" not in stderr
    assert env.get(RAY, env.job)["status"]["jobStatus"] == "SUCCEEDED"
    # Linked before the freeze, or reported as left behind when the cluster was gone first.
    assert f"owner: {cluster}" in stdout or f"left behind: DynamoGraphDeployment {env.dgd} (not linked" in stderr


def test_failure_after_the_driver_is_submitted_deletes_nothing(env):
    """Conflicts hold the run at the owner back-patch; it is frozen there (SIGSTOP) until KubeRay has
    submitted the driver, however long the head takes to start (its conflict retries are bounded in
    time), with its start lease lengthened meanwhile; then the patch is refused and it fails."""
    entrypoint, release = env.held_driver()
    try:
        with env.sandbox.fault("api-errors", "patch:dynamographdeployments:409:100000"):
            run = env.start("run", "--wait", extra=(entrypoint,))
            env.wait_for(RAY, env.job, lambda o: o is not None and o["spec"].get("suspend") is False)  # resumed
            run.proc.send_signal(signal.SIGSTOP)
            try:
                client.BatchV1Api(env.api).patch_namespaced_job(
                    f"{env.job}-lease", env.ns, {"spec": {"ttlSecondsAfterFinished": 3600}})
                env.wait_for(RAY, env.job, lambda o: status_of(o, "jobStatus") == "RUNNING")
                env.sandbox.set_fault("api-errors", "patch:dynamographdeployments:403:1")
            finally:
                run.proc.send_signal(signal.SIGCONT)
            code, _, stderr = run.finish()
        assert code == 1, stderr
        assert f"RayJob {env.job} keeps running" in stderr and "rolled back:" not in stderr
        assert f"left behind: DynamoGraphDeployment {env.dgd} (not linked" in stderr
        assert env.get(NVIDIA, env.dgd) is not None
        assert env.get(RAY, env.job)["status"]["jobStatus"] == "RUNNING"
    finally:
        release.touch()
    done = env.wait_for(RAY, env.job, status_is("jobDeploymentStatus", "Complete"))
    assert done["status"]["jobStatus"] == "SUCCEEDED"


# -- short API outages ---------------------------------------------------------------------------
def test_short_api_outages_are_survived_also_during_the_driver_rescue(env):
    """An outage just after the RayJob is created, and one while nrl-k8s rescues the driver KubeRay
    did not submit: the run rides out both."""
    with env.sandbox.fault("miss-driver-submission"):
        run = env.start("run", "--wait", "--driver-grace", "2")
        env.wait_for(RAY, env.job, lambda o: o is not None)
        try:
            env.sandbox.set_fault("api-outage", "15")
            run.wait_line("waiting for KubeRay to submit the driver")
            env.sandbox.set_fault("api-outage", "15")
            code, stdout, stderr = run.finish()
        finally:  # a watch opened before an outage may see the job end first
            env.sandbox.clear_fault("api-outage")
    assert code == 0, stderr
    assert "nrl-k8s submitted it" in stderr and "job status     SUCCEEDED" in stdout


# -- a DGD shared by two runs -------------------------------------------------------------------
def test_rollback_keeps_a_dgd_another_live_run_uses(env):
    other = f"{env.job}-b"
    with env.sandbox.fault("dgd-stuck-pending"):
        first = env.start("run", "--wait")
        env.wait_for(NVIDIA, env.dgd, lambda o: o is not None)
        second = env.start("run", "--wait", job=other)
        env.wait_for(NVIDIA, env.dgd, lambda o: o is not None and other in users(o))
        first.proc.send_signal(signal.SIGINT)
        code, _, stderr = first.finish()
        assert code == 130, stderr
        assert f"kept: DynamoGraphDeployment {env.dgd} (run {other} uses it too)" in stderr
        assert env.get(NVIDIA, env.dgd) is not None

        second.wait_line(f"dynamo.serving   reused    {env.dgd}")
        second.proc.send_signal(signal.SIGINT)
        code, _, stderr = second.finish()
    assert code == 130, stderr
    assert f"kept: DynamoGraphDeployment {env.dgd} (existed before this run)" in stderr
    assert users(env.get(NVIDIA, env.dgd)) == [env.job]  # the second run took itself off


def test_rollback_unlinks_a_kept_dgd_so_gc_cannot_take_it(env):
    """A linked its DGD to its RayCluster; B reuses it and is still starting when A rolls back."""
    other = f"{env.job}-b"
    with env.sandbox.fault("miss-driver-submission"):
        first = env.start("run", "--wait", "--driver-grace", "3600")
        first.wait_line("waiting for KubeRay to submit the driver")
        cluster = env.get(RAY, env.job)["status"]["rayClusterName"]
        assert [o["name"] for o in env.get(NVIDIA, env.dgd)["metadata"]["ownerReferences"]] == [cluster]
        with env.sandbox.fault("api-errors", "patch:rayjobs:503:100000"):  # B is not resumed
            second = env.start("run", "--wait", job=other)
            env.wait_for(NVIDIA, env.dgd, lambda o: o is not None and other in users(o)
                         and other in [ref["name"] for ref in o["metadata"].get("ownerReferences") or []])
            first.proc.send_signal(signal.SIGINT)
            code, _, stderr = first.finish()
            assert code == 130, stderr
            assert f"kept: DynamoGraphDeployment {env.dgd} (run {other} uses it too)" in stderr
            assert "rolled back: deleted" in stderr and f"RayJob {env.job}" in stderr.split("rolled back: deleted")[1]
            kept = env.get(NVIDIA, env.dgd)  # only B's suspended RayJob owns it: A's cluster is off it
            assert [o["name"] for o in kept["metadata"]["ownerReferences"]] == [other]
    code, stdout, stderr = second.finish()
    assert code == 0, stderr
    second_cluster = env.get(RAY, other)["status"]["rayClusterName"]
    assert f"dgd (reused)   {env.dgd}  owner: {second_cluster}" in stdout


def test_ctrl_c_after_the_driver_is_submitted_leaves_the_job_running_and_a_rerun_or_down_refuses_it(env):
    entrypoint, release = env.held_driver()
    try:
        run = env.start("run", "--wait", extra=(entrypoint,))
        run.wait_line("submitted by KubeRay")
        run.proc.send_signal(signal.SIGINT)
        code, _, stderr = run.finish()
        assert code == 130, stderr
        assert f"RayJob {env.job} keeps running" in stderr and "rolled back:" not in stderr
        assert rayjob_live(env.get(RAY, env.job))
        # The same config again is refused while it runs, and so is `cluster down` without --force.
        again = env.cli("run", "--wait", extra=(entrypoint,))
        assert again.returncode == 2, again.stderr
        assert f"RayJob {env.job} already exists in namespace {env.ns} and is still running" in again.stderr
        down = env.cli("cluster", "down", extra=(entrypoint,))
        assert down.returncode == 2, down.stderr
        assert f"dynamo.serving (DynamoGraphDeployment {env.dgd}) is used by running RayJob {env.job}" in down.stderr
        assert f"kuberay.training (RayJob {env.job}) is used by running RayJob {env.job}" in down.stderr
        assert "--force" in down.stderr
        assert env.get(NVIDIA, env.dgd) is not None and env.get(RAY, env.job) is not None
    finally:
        release.touch()
    done = env.wait_for(RAY, env.job, status_is("jobDeploymentStatus", "Complete"))
    assert done["status"]["jobStatus"] == "SUCCEEDED"


def rayjob_live(obj) -> bool:
    return obj is not None and status_of(obj, "jobDeploymentStatus") not in ("Complete", "Failed")


# -- cluster down, status and what a dead run left ------------------------------------------------
def test_status_lists_what_a_killed_run_left_and_cluster_down_removes_it(env):
    with env.sandbox.fault("miss-driver-submission"):
        run = env.start("run", "--wait", "--driver-grace", "3600")
        run.wait_line("waiting for KubeRay to submit the driver")
        run.proc.kill()
        run.finish()
        status = env.cli("status")
        # still inside the fault: once it clears, KubeRay submits the driver and the job can end
        refused = env.cli("cluster", "down", "-t", "kuberay.training")
    assert status.returncode == 0, status.stderr
    assert "LEFT BEHIND" in status.stdout and f"RayJob {env.job}: running without a driver" in status.stdout
    assert f"kubectl -n {env.ns} delete rayjobs.ray.io {env.job}" in status.stdout
    assert refused.returncode == 2 and "--force" in refused.stderr
    removed = env.cli("cluster", "down", "-t", "kuberay.training", "--force")
    assert removed.returncode == 0, removed.stderr
    assert f"RayJob {env.job} deleted" in removed.stderr
    assert env.get(RAY, env.job) is None
    env.wait_for(NVIDIA, env.dgd, gone)


def test_status_lists_the_suspended_rayjob_of_a_run_killed_in_its_dgd_wait(env):
    with env.sandbox.fault("dgd-stuck-pending"):
        run = env.start("run", "--wait")
        env.wait_for(NVIDIA, env.dgd, lambda o: o is not None)
        run.proc.kill()
        run.finish()
    status = env.cli("status")
    assert status.returncode == 0, status.stderr
    assert f"RayJob {env.job}: suspended and held by its start lease" in status.stdout, status.stdout
    down = env.cli("cluster", "down", "-t", "kuberay.training")
    assert down.returncode == 0, down.stderr
    assert env.get(RAY, env.job) is None
    env.wait_for(NVIDIA, env.dgd, gone)  # GC: it hung off the RayJob


# -- running the same config again ---------------------------------------------------------------
def test_a_conflict_on_the_owner_patch_is_retried_and_a_rerun_replaces_the_finished_rayjob(env):
    with env.sandbox.fault("api-errors", "patch:dynamographdeployments:409:2"):
        first = env.cli("run", "--wait")
    assert first.returncode == 0, first.stderr
    cluster = env.get(RAY, env.job)["status"]["rayClusterName"]
    assert f"dgd (created)  {env.dgd}  owner: {cluster}" in first.stdout
    uid = env.get(RAY, env.job)["metadata"]["uid"]
    again = env.cli("run", "--wait")
    assert again.returncode == 0, again.stderr
    assert f"RayJob {env.job} from an earlier run has finished (Complete, job SUCCEEDED)" in again.stderr
    assert env.get(RAY, env.job)["metadata"]["uid"] != uid
