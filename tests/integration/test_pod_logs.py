"""Pod logs as a user reads them, against the sandbox: ``nrl-k8s logs --source`` for each source
(installed CLI), ``kubectl logs``, ``kubectl create ns`` / ``auth can-i`` (protobuf bodies), and the
failing pods' reasons and Events printed when a wait fails.

One run per test module is held open by a gated driver (``Gate``), so its pods stay while the
tests read them; what the driver prints is awaited with ``eventually`` (the dashboard has no watch).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, Gate, eventually, interruptible, observe, run_cli

from nrl_k8s_sandbox.controlplane.kubelet import PLAYED

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
SECRET = "hunter2-not-for-logs"
kubectl_only = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


class Session:
    """A run in its own namespace whose driver prints, then waits for the module's gate."""

    def __init__(self, sandbox, tmp: Path):
        self.sandbox = sandbox
        self.ns = f"logs-{uuid.uuid4().hex[:6]}"
        self.job = f"job-{uuid.uuid4().hex[:6]}"
        self.dgd = f"{self.job}-dgd"
        self.gate = Gate(tmp)
        self.api = sandbox.api_client()
        self.core = client.CoreV1Api(self.api)
        self.env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": "it"}

    def overrides(self) -> list[str]:
        return [f"infra.namespace={self.ns}", f"infra.kuberay.training.name={self.job}",
                f"infra.dynamo.serving.name={self.dgd}"]

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return run_cli(list(args), env=self.env, timeout=DEADLINE_S)

    def logs(self, *flags: str) -> subprocess.CompletedProcess:
        return self.cli("logs", *PAIR, *self.overrides(), *flags)

    def pods(self, selector: str) -> list[str]:
        return sorted(p.metadata.name for p in self.core.list_namespaced_pod(self.ns, label_selector=selector).items)


@pytest.fixture(scope="module")
def session(sandbox, tmp_path_factory):
    run = Session(sandbox, tmp_path_factory.mktemp("logs"))
    run.core.create_namespace({"metadata": {"name": run.ns}})
    driver = f"echo step-$((2-1)) HF_TOKEN={SECRET}; " + run.gate.entrypoint("echo done")  # prints step-1
    started = run.cli(
        "run", "--rayjob", "--no-wait", *PAIR, *run.overrides(), "infra.launch.entrypoint=" + json.dumps(driver)
    )
    assert started.returncode == 0, started.stderr
    yield run
    run.gate.open()
    run.core.delete_namespace(run.ns)
    run.api.close()


def test_driver_log_is_the_default_and_secrets_are_redacted(session):
    shown = eventually(lambda: (r := session.logs()).returncode == 0 and "step-1 " in r.stdout and r,
                       what="the driver's first line")
    assert SECRET not in shown.stdout and "step-1 HF_TOKEN=<redacted>\n" in shown.stdout
    assert "step-1 HF_TOKEN=<redacted>\n" in session.logs("--source", "driver").stdout
    # The driver waits at the gate, so once Ray's "Running entrypoint" line and the driver's line
    # are written (by two processes, in either order) the log stays as it is.
    whole = eventually(lambda: "Running entrypoint" in (text := session.logs().stdout) and "step-1 " in text and text,
                       what="Ray's line and the driver's")
    lines = whole.splitlines(keepends=True)
    assert session.logs("--tail", "1").stdout == lines[-1]
    assert session.logs("--tail", "2").stdout == "".join(lines[-2:])


def test_head_and_worker_sources(session):
    head = session.logs("--source", "head")
    assert head.returncode == 0 and "Ray runtime started" in head.stdout
    tail = session.logs("--source", "head", "--tail", "1")
    assert tail.returncode == 0 and len(tail.stdout.splitlines()) == 1 and tail.stdout in head.stdout
    (worker,) = session.pods("ray.io/node-type=worker")
    shown = session.logs("--source", "worker")
    assert shown.returncode == 0
    assert shown.stdout.startswith(PLAYED)  # kwok plays the worker pod: nothing runs in it


def test_dgd_sources(session):
    frontend, worker = session.pods(f"nvidia.com/dynamo-graph-deployment-name={session.dgd}")
    every = session.logs("--source", "dgd")
    assert every.returncode == 0, every.stderr
    # Both pods, each line prefixed: Dynamo's processes, each log starting with what really runs.
    assert f"[pod/{frontend}/main] [sandbox] runs dynamo.frontend" in every.stdout
    assert f"[pod/{worker}/main] [sandbox] runs dynamo.mocker" in every.stdout
    one = session.logs("--source", "dgd:frontend", "--tail", "1")
    whole = session.logs("--source", "dgd:frontend")  # after: it holds that line whatever came since
    assert one.returncode == 0 and len(one.stdout.splitlines()) == 1 and one.stdout in whole.stdout
    unknown = session.logs("--source", "dgd:nope")
    assert unknown.returncode == 2
    assert "no such component" in unknown.stderr and "Frontend, VllmDecodeWorker" in unknown.stderr


def _lines(process: subprocess.Popen) -> queue.Queue:
    """The lines the process prints, as they come ("" once it ends): read by a thread, so a test
    waits on them with a deadline."""
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_follow_prints_new_output_and_ctrl_c_ends_it(session):
    from nrl_k8s.kube.client import Kube

    process = interruptible(
        [NRL_K8S, "logs", *PAIR, *session.overrides(), "--source", "dgd:Frontend", "-f"], session.env
    )
    try:
        marker = f"probe-{uuid.uuid4().hex[:6]}"
        with Kube.connect(kubeconfig=str(session.sandbox.kubeconfig), namespace=session.ns) as kube:
            assert kube.proxy("GET", f"{session.dgd}-frontend", 8000, marker)[0] == 404  # Dynamo logs a 404
        # The whole log, then what comes: the probe shows whether it came before or after the stream opened.
        printed = _lines(process)
        while marker not in (line := printed.get(timeout=DEADLINE_S)):
            assert line, "the follow ended"
        assert f"/{marker}" in line
        process.send_signal(signal.SIGINT)
        process.wait(timeout=DEADLINE_S)
        assert "Traceback" not in process.stderr.read()
    finally:
        process.kill()
        process.wait()


def test_a_k8sjobmode_submitter_pod_logs_its_driver(session):
    """A RayJob in K8sJobMode (KubeRay's default; nrl-k8s itself uses HTTPMode): the real KubeRay's
    submitter pod runs `ray job submit` on this machine and follows the driver, and `kubectl logs`
    shows that pod's log as it is."""
    job = f"{session.job}-k8s"
    driver = f"echo step-1 HF_TOKEN={SECRET}"
    overrides = [f"infra.namespace={session.ns}", f"infra.kuberay.training.name={job}",
                 f"infra.dynamo.serving.name={job}-dgd", "infra.launch.entrypoint=" + json.dumps(driver)]
    dry = yaml.safe_load_all(session.cli("run", "--rayjob", "--dry-run", "--no-wait", *PAIR, *overrides).stdout)
    manifest = next(doc for doc in dry if doc["kind"] == "RayJob")
    manifest["spec"].pop("suspend")  # applied alone: no run of nrl-k8s resumes it
    manifest["spec"].update(submissionMode="K8sJobMode", entrypoint=driver)
    manifest["spec"].pop("runtimeEnvYAML", None)
    # only the RayJob is applied, not the run's Secret: nothing may read it (a kubelet would hold the pod)
    pod = manifest["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    secret_volumes = {v["name"] for v in pod.get("volumes") or [] if "secret" in v}
    pod["volumes"] = [v for v in pod.get("volumes") or [] if v["name"] not in secret_volumes]
    for container in pod["containers"]:
        container["env"] = [e for e in container.get("env") or [] if "valueFrom" not in e]
        container["volumeMounts"] = [m for m in container.get("volumeMounts") or [] if m["name"] not in secret_volumes]
    session.sandbox.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    custom = client.CustomObjectsApi(session.api)
    observe(
        custom.list_namespaced_custom_object,
        "ray.io",
        "v1",
        session.ns,
        "rayjobs",
        field_selector=f"metadata.name={job}",
        until=lambda jobs: jobs.get(job, {}).get("status", {}).get("jobDeploymentStatus") == "Complete",
    )
    (pod,) = session.pods(f"batch.kubernetes.io/job-name={job}")
    raw = session.sandbox.kubectl("-n", session.ns, "logs", pod).stdout
    assert f"step-1 HF_TOKEN={SECRET}" in raw  # kubectl shows the pod's log as it is


@kubectl_only
def test_kubectl_logs_create_ns_and_auth_can_i(session):
    kubectl = session.sandbox.kubectl
    job = client.CustomObjectsApi(session.api).get_namespaced_custom_object("ray.io", "v1", session.ns, "rayjobs",
                                                                             session.job)
    (head,) = session.pods(f"ray.io/node-type=head,ray.io/cluster={job['status']['rayClusterName']}")
    assert "Ray runtime started" in kubectl("-n", session.ns, "logs", head).stdout
    assert len(kubectl("-n", session.ns, "logs", head, "--tail=2").stdout.splitlines()) == 2
    namespace = f"made-{uuid.uuid4().hex[:6]}"
    assert kubectl("create", "namespace", namespace).stdout.strip() == f"namespace/{namespace} created"
    try:
        assert (
            kubectl("-n", namespace, "create", "secret", "generic", "s", f"--from-literal=token={SECRET}").returncode
            == 0
        )
        data = json.loads(kubectl("-n", namespace, "get", "secret", "s", "-o", "json").stdout)["data"]
        assert data == {"token": "aHVudGVyMi1ub3QtZm9yLWxvZ3M="}
        assert kubectl("auth", "can-i", "create", "rayjobs.ray.io").stdout.strip() == "yes"
    finally:
        kubectl("delete", "namespace", namespace)


def test_a_failed_wait_prints_the_failing_pods_reasons_and_events(sandbox, sandbox_namespace):
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": "it"}
    job = f"job-{uuid.uuid4().hex[:6]}"
    args = [
        NRL_K8S,
        "run",
        "--rayjob",
        *PAIR,
        f"infra.namespace={sandbox_namespace}",
        f"infra.kuberay.training.name={job}",
        f"infra.dynamo.serving.name={job}-dgd",
        "infra.dynamo.serving.readyTimeoutS=15",
    ]
    with sandbox.fault("dgd-stuck-pending"):
        result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=DEADLINE_S)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    failing = [line for line in lines if line.startswith(f"  pod {job}-dgd-")]
    # The real scheduler's condition reason and its Warning event, relayed (not their wording).
    assert failing and all(": Unschedulable: " in line for line in failing), result.stderr
    assert any(line.startswith("    Warning FailedScheduling: ") for line in lines)
