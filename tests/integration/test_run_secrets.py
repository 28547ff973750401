"""Secrets against the sandbox: the driver gets them, nothing nrl-k8s applies, prints or writes shows them.

A run with a token in ``infra.launch.env``, a secret-looking recipe key and its own ``PATH``
(the driver's Python first, then the system directories): the driver (a script in tmp_path) checks hashes of
what it was given and exits 0 only when it got both values and the recipe; then it prints both
values, as a careless driver would, which every output of nrl-k8s must hide.
Both ways a driver is submitted are covered: by KubeRay (HTTPMode) and by nrl-k8s's rescue
through the API server's service proxy.

Without the run config (issue 30): a driver that echoes a launch.env value, a recipe value and a
value its head reads by ``secretKeyRef`` from ``<user>-secrets`` (``dev setup-secrets``), bare,
is shown redacted by every command that prints or keeps its log (the follow command ``run``
prints, ``logs``, ``logs --run``, ``job logs``, ``job logs --cluster``, ``run --wait`` and the log
it saves), and no kwok Exec object holds a value its head reads from a Secret.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import stat
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client, watch
from test_run_rayjob import NVIDIA, PAIR, RAY, Run

TOKEN = f"hf_s3cr3t{uuid.uuid4().hex}"
RECIPE_KEY = f"wb_s3cr3t{uuid.uuid4().hex}"
LEAKS = ("s3cr3t",)  # in both values, in nothing else

DRIVER = """\
import hashlib, os, sys, yaml

def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()

with open(os.environ["NRL_K8S_RECIPE"]) as handle:
    recipe = yaml.safe_load(handle)
checks = {{
    "hf": digest(os.environ.get("HF_TOKEN", "")) == "{token}",
    "wandb": digest(recipe["logger"]["wandb"]["api_key"]) == "{recipe_key}",
    "dgd": recipe["policy"]["generation"]["dynamo_cfg"]["dgd_name"] == "{dgd}",
    "run": os.environ["NRL_K8S_RUN_ID"].startswith("{job}-"),
    "path": os.environ["PATH"] == "{path}",
}}
print("driver-checks", " ".join(f"{{k}}={{v}}" for k, v in checks.items()))
# a careless driver: its values in lines of no secret shape (redacted by value wherever they show)
print("echo", os.environ.get("HF_TOKEN"), "and", recipe["logger"]["wandb"]["api_key"])
sys.exit(0 if all(checks.values()) else 3)
"""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _leaks(text: str) -> list[str]:
    return [value for value in LEAKS if value in text]


@pytest.fixture
def run(sandbox, sandbox_namespace):
    r = Run(sandbox, sandbox_namespace)
    yield r
    r.api.close()


def _secret_run(run: Run, tmp_path: Path) -> tuple[str, ...]:
    """Overrides for a run whose driver checks what it was given (see the module docstring)."""
    # Ray itself needs bash on PATH to start the job's processes, as it would in a container
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(token=_digest(TOKEN), recipe_key=_digest(RECIPE_KEY), dgd=run.dgd, job=run.job,
                                    path=path))
    return (f"++infra.launch.env.HF_TOKEN={TOKEN}", f"++logger.wandb.api_key={RECIPE_KEY}",
            f"++infra.launch.env.PATH={path}", f"infra.launch.entrypoint=python {script}")


def _wait_secret_gone(core: client.CoreV1Api, ns: str, name: str, timeout: int = 60) -> None:
    """Watch until the Secret is deleted; fail at the deadline."""
    listing = core.list_namespaced_secret(ns, field_selector=f"metadata.name={name}")
    if not listing.items:
        return
    for event in watch.Watch().stream(core.list_namespaced_secret, ns, field_selector=f"metadata.name={name}",
                                      resource_version=listing.metadata.resource_version, timeout_seconds=timeout):
        if event["type"] == "DELETED":
            return
    pytest.fail(f"Secret {name} still exists after {timeout}s")


@pytest.mark.parametrize("rescued", [False, True], ids=["kuberay-submits", "nrl-k8s-rescues"])
def test_secrets_reach_the_driver_and_nothing_else(run, tmp_path, rescued):
    extra = _secret_run(run, tmp_path)
    if rescued:
        with run.sandbox.fault("miss-driver-submission"):
            result = run.run("--wait", "--no-shutdown", "--driver-grace", "2", extra=extra)
        assert "nrl-k8s submitted it" in result.stderr, result.stderr
    else:
        result = run.run("--wait", "--no-shutdown", extra=extra)
        assert "submitted by KubeRay" in result.stderr, result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    assert not _leaks(result.stdout + result.stderr)

    job = run.get(RAY, "rayjobs", run.job)
    assert not _leaks(json.dumps(job))
    status = job["status"]
    assert status["jobStatus"] == "SUCCEEDED"

    run_id = job["metadata"]["labels"]["nrl-k8s.io/run-id"]
    dgd = run.get(NVIDIA, "dynamographdeployments", run.dgd)  # every other object the run applied
    assert dgd is not None and not _leaks(json.dumps(dgd))
    # every file the run saved: its record and the driver's log kept beside it
    saved = list((Path(os.environ["XDG_CACHE_HOME"]) / "nrl-k8s" / "runs").glob(f"{run_id}*"))
    assert len(saved) >= 2 and not any(_leaks(path.read_text(errors="replace")) for path in saved), saved

    core = client.CoreV1Api(run.api)
    secret = core.read_namespaced_secret(run_id, run.ns)
    (owner,) = secret.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == ("RayJob", run.job, job["metadata"]["uid"])

    logs = run.cli("logs", *PAIR, *run.overrides(*extra))
    job_logs = run.cli("job", "logs", *PAIR, *run.overrides(*extra))
    listed = run.cli("job", "list", *PAIR, *run.overrides(*extra))
    for shown in (logs, job_logs, listed):
        assert shown.returncode == 0, shown.stderr
        assert not _leaks(shown.stdout + shown.stderr)
    assert "driver-checks hf=True wandb=True dgd=True run=True path=True" in logs.stdout
    assert "echo <redacted> and <redacted>" in logs.stdout and "echo <redacted> and <redacted>" in result.stdout
    assert job_logs.stdout == logs.stdout

    # job details through the API server's service proxy: what a real dashboard would show
    details = core.connect_get_namespaced_service_proxy_with_path(
        f"{status['rayClusterName']}-head-svc:8265", run.ns, f"api/jobs/{status['jobId']}")
    assert status["jobId"] in details and not _leaks(details) and "sandbox.nrl-k8s.io" not in details

    # the recipe the driver read: written by the sandbox for this cluster, owner-only
    recipe = run.sandbox.dir / "volumes" / run.ns / status["rayClusterName"] / "nrl-k8s-run" / "recipe.yaml"
    assert stat.S_IMODE(recipe.stat().st_mode) == 0o600
    assert stat.S_IMODE(recipe.parent.stat().st_mode) == 0o700

    run.custom.delete_namespaced_custom_object(*RAY, run.ns, "rayjobs", run.job)
    _wait_secret_gone(core, run.ns, secret.metadata.name)


def test_offline_outputs_never_show_the_values(run, tmp_path):
    extra = _secret_run(run, tmp_path)
    dry = run.run("--dry-run", extra=extra)
    check = run.cli("check", *PAIR, *run.overrides(*extra), "-o", str(tmp_path / "bundle.yaml"))
    for result in (dry, check):
        assert result.returncode == 0, result.stderr
        assert not _leaks(result.stdout + result.stderr)
    bundle = tmp_path / "bundle.yaml"
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o600 and not _leaks(bundle.read_text())
    kinds = [doc["kind"] for doc in yaml.safe_load_all(dry.stdout)]
    assert kinds == ["Job", "RayJob", "Secret", "DynamoGraphDeployment"]


def test_a_leftover_run_secret_is_refused_before_anything_is_applied(run, tmp_path):
    extra = _secret_run(run, tmp_path)
    planned = [d for d in yaml.safe_load_all(run.run("--dry-run", extra=extra).stdout) if d["kind"] == "Secret"][0]
    client.CoreV1Api(run.api).create_namespaced_secret(
        run.ns, {"metadata": planned["metadata"], "stringData": {"x": "y"}}
    )
    result = run.run("--wait", extra=extra)
    assert result.returncode == 2, result.stderr
    assert f"Secret {planned['metadata']['name']}" in result.stderr and "already exists" in result.stderr
    assert run.get(("nvidia.com", "v1alpha1"), "dynamographdeployments", run.dgd) is None
    assert run.get(RAY, "rayjobs", run.job) is None


# -- issue 30: logs printed and kept without the run config ------------------------------------
PLANTED = "Pl4nt"  # in each value below, in nothing else
ECHOED = {"HF_TOKEN": f"hf_{PLANTED}{uuid.uuid4().hex[:8]}", "recipe": f"{PLANTED}-rcp-{uuid.uuid4().hex[:8]}",
          "user": f"{PLANTED}-usr-{uuid.uuid4().hex[:8]}"}
#: The driver prints each value bare (no secret-looking shape around it), the issue's way.
ECHO_ENTRYPOINT = ('infra.launch.entrypoint=\'echo "token is $HF_TOKEN" && echo "user $SETUP_VALUE" && '
                   'sed -n "s/.*api_key:.//p" "$NRL_K8S_RECIPE"\'')
SHOWN = ["token is <redacted>\n", "user <redacted>\n", "\n<redacted>\n"]


def _echo_run(run: Run, monkeypatch) -> tuple[str, ...]:
    """The user's Secret (dev setup-secrets) read by the head as SETUP_VALUE; overrides for the echoing run."""
    monkeypatch.setenv("SETUP_VALUE", ECHOED["user"])
    stored = run.cli("-n", run.ns, "dev", "setup-secrets", "--from-env", "SETUP_VALUE")
    assert stored.returncode == 0 and PLANTED not in stored.stdout + stored.stderr, stored.stderr
    head = ("[{name: ray-head, env: [{name: SETUP_VALUE, valueFrom: {secretKeyRef: "
            "{name: it-secrets, key: SETUP_VALUE}}}]}]")
    return (f"++infra.launch.env.HF_TOKEN={ECHOED['HF_TOKEN']}", f"++logger.wandb.api_key={ECHOED['recipe']}",
            f"++infra.kuberay.training.spec.headGroupSpec.template.spec.containers={head}", ECHO_ENTRYPOINT)


def _files_with_planted_values() -> list[Path]:
    """Every file under the test's private cache (run records, saved logs) that holds a planted value."""
    root = Path(os.environ["XDG_CACHE_HOME"])
    return [path for path in root.rglob("*") if path.is_file() and PLANTED in path.read_text(errors="replace")]


def test_every_log_command_hides_the_secrets_a_driver_echoes_without_the_run_config(run, monkeypatch):
    """The issue's reproduction: `run --no-wait`, then its follow command and every log command, no RECIPE."""
    result = run.run("--no-wait", "--ttl", "600", extra=_echo_run(run, monkeypatch))
    assert result.returncode == 0, result.stderr
    follow = next(line for line in result.stdout.splitlines() if "follow logs" in line)
    command = shlex.split(follow.split("follow logs", 1)[1].split("(or:")[0])
    assert command[:3] == ["nrl-k8s", "logs", "-f"], follow
    followed = run.cli(*command[1:])  # until the job ends
    job = run.get(RAY, "rayjobs", run.job)
    cluster, run_id = job["status"]["rayClusterName"], job["metadata"]["labels"]["nrl-k8s.io/run-id"]
    logs = {
        "the follow command": followed,
        "logs": run.cli("logs"),
        "logs --run": run.cli("logs", "--run", run_id),
        "job logs": run.cli("job", "logs"),
        "job logs --cluster": run.cli("-n", run.ns, "job", "logs", "--cluster", cluster),
    }
    others = {"logs --source head": run.cli("logs", "--source", "head"), "job list": run.cli("job", "list")}
    for what, shown in {**logs, **others}.items():
        assert shown.returncode == 0, (what, shown.stderr)
        assert PLANTED not in shown.stdout + shown.stderr, (what, shown.stdout)
    for what, shown in logs.items():
        assert all(line in shown.stdout for line in SHOWN), (what, shown.stdout)
    # kwok's Exec objects (API objects) name no value the head reads from a Secret
    execs = run.custom.list_namespaced_custom_object("kwok.x-k8s.io", "v1alpha1", run.ns, "execs")["items"]
    assert execs and PLANTED not in json.dumps(execs)
    assert not _files_with_planted_values()


def test_run_wait_and_the_log_it_keeps_hide_a_value_of_the_users_secret(run, monkeypatch):
    """A value `dev setup-secrets` stored, which the driver reads through secretKeyRef and echoes."""
    result = run.run("--wait", "--no-shutdown", extra=_echo_run(run, monkeypatch))
    assert result.returncode == 0, result.stderr
    assert PLANTED not in result.stdout + result.stderr
    assert all(line in result.stdout for line in SHOWN), result.stdout
    run_id = run.get(RAY, "rayjobs", run.job)["metadata"]["labels"]["nrl-k8s.io/run-id"]
    saved = Path(os.environ["XDG_CACHE_HOME"]) / "nrl-k8s" / "runs" / f"{run_id}.log"
    assert all(line in saved.read_text() for line in SHOWN)
    assert not _files_with_planted_values()
