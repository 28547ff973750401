"""`nrl-k8s run --raycluster` as a user runs it, against the sandbox.

Each test writes its own infra (unique names, its own namespace) next to a small code tree and
runs the installed CLI from that tree (the repo root defaults to the git top-level of the
working directory). What may come and go (GC) is asserted on watch histories recorded from
before the run; drivers that must still run when the test looks wait for its ``Gate``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from sandbox_harness import DEADLINE_S, Gate, History, eventually, run_cli

from nrl_k8s_sandbox.ray_head import free_ports

ROOT = Path(__file__).resolve().parents[2]
RAY, NVIDIA = ("ray.io", "v1"), ("nvidia.com", "v1alpha1")
DRA = [("resource.nvidia.com", "v1beta1", "computedomains"), ("resource.k8s.io", "v1", "resourceclaimtemplates")]
# The driver: prints the DGD name from the recipe nrl-k8s staged and an uploaded file's content.
READ_RECIPE = ("grep -E 'dgd_name: ' nrl_k8s_run.yaml && cat code/hello.txt && "
               'echo "run=$NRL_K8S_RUN_ID recipe=$NRL_K8S_RECIPE mode=$MODE"')
# A gym daemon: an HTTP server on the port the gym head container declares. The sandbox runs
# every pod on this machine's one network and serves a Ray head's container port P on a free
# port of its own, which it names to the head and its jobs in NRL_K8S_SANDBOX_PORT_P.
DAEMON = "python3 -m http.server $NRL_K8S_SANDBOX_PORT_{port} --bind 127.0.0.1"


def _pod(name: str, ports: list[dict] | None = None, claims: bool = False) -> dict:
    container = {"name": name, **({"ports": ports} if ports else {})}
    spec = {"containers": [container]}
    if claims:
        # The RoCE claim names the DeviceClass the sandbox's RoCE driver publishes (a real
        # scheduler leaves a pod whose claim asks for a DeviceClass nobody publishes Pending).
        spec["resourceClaims"] = [{"name": "compute-domain-channel", "resourceClaimTemplateName": "cd-template"},
                                  {"name": "roce-channel", "resourceClaimTemplateName": "roce.nvidia.com"}]
        container["resources"] = {"claims": [{"name": "compute-domain-channel"}, {"name": "roce-channel"}]}
    return {"spec": spec}


class LongLived:
    """One test's code tree, infra file, namespace and helpers."""

    def __init__(self, sandbox, namespace: str, directory: Path):
        self.sandbox, self.ns, self.dir = sandbox, namespace, directory
        tag = uuid.uuid4().hex[:5]
        self.training, self.gym, self.dgd, self.deploy = f"tr-{tag}", f"gym-{tag}", f"dgd-{tag}", f"mx-{tag}"
        self.port = free_ports(1)[0]
        self.api = sandbox.api_client()
        self.custom = client.CustomObjectsApi(self.api)
        (directory / ".git").mkdir()
        (directory / "code").mkdir()
        (directory / "code/hello.txt").write_text(f"hello from {tag}\n")
        (directory / "recipe.yaml").write_text("policy:\n  model_name: Qwen/Qwen3-0.6B\n")
        self.infra = {
            "namespace": namespace,
            "image": "nvcr.io/nvidia/nemo-rl:v0.4.0",
            "launch": {"entrypoint": READ_RECIPE, "codeSource": "upload", "rayUploadPaths": ["code"],
                       "env": {"MODE": "long-lived"}},
            "kuberay": {
                "training": {"name": self.training, "spec": {
                    "headGroupSpec": {"rayStartParams": {}, "template": _pod("ray-head")},
                    "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "rayStartParams": {},
                                          "template": _pod("ray-worker", claims=True)}]}},
                "gym": {"name": self.gym, "spec": {"headGroupSpec": {"rayStartParams": {}, "template": _pod(
                    "ray-head", ports=[{"containerPort": self.port, "name": "gym"}])}},
                    "daemon": {"entrypoint": DAEMON.format(port=self.port), "submissionId": f"gym-server-{tag}",
                               "healthCheckUrl": f"http://{self.gym}-head-svc:{self.port}/",
                               "healthCheckTimeoutS": int(DEADLINE_S)}},
            },
            "deployments": {"mx": {"name": self.deploy, "healthCheckUrl": f"http://{self.deploy}:8001/health",
                                   "spec": {"replicas": 1, "template": {"spec": {"containers": [
                                       {"name": "server", "ports": [{"containerPort": 8001, "name": "http"}]}]}}}}},
            "dynamo": {"serving": {"manifest": str(ROOT / "examples_dgd/qwen3_0.6b_kind.yaml"), "name": self.dgd,
                                   "readyTimeoutS": int(DEADLINE_S)}},
        }
        self.write()

    def write(self) -> None:
        (self.dir / "infra.yaml").write_text(yaml.safe_dump(self.infra))

    def without_gym(self) -> None:
        """Only the training cluster, for a test about its driver: one Ray head fewer to start."""
        del self.infra["kuberay"]["gym"]
        self.write()

    def cli(self, *args: str, timeout: float = DEADLINE_S) -> subprocess.CompletedProcess:
        env = {**os.environ, "KUBECONFIG": str(self.sandbox.kubeconfig), "NRL_K8S_USER": "it",
               "XDG_CACHE_HOME": str(self.dir / "cache")}
        return run_cli(list(args), env=env, timeout=timeout, cwd=self.dir)

    def run(self, *flags: str) -> subprocess.CompletedProcess:
        return self.cli("run", "--raycluster", *flags, "recipe.yaml", "--infra", "infra.yaml")

    def get(self, group_version, plural: str, name: str) -> dict | None:
        try:
            return self.custom.get_namespaced_custom_object(*group_version, self.ns, plural, name)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def history(self, group_version, plural: str) -> History:
        return History(self.custom.list_namespaced_custom_object, *group_version, self.ns, plural)

    def dra_names(self) -> list[str]:
        names = []
        for group, version, plural in DRA:
            names += [o["metadata"]["name"] for o in
                      self.custom.list_namespaced_custom_object(group, version, self.ns, plural)["items"]]
        return names

    def record(self) -> dict:
        runs = self.dir / "cache/nrl-k8s/runs"
        return json.loads((runs / f"{(runs / 'latest').read_text().strip()}.json").read_text())


@pytest.fixture
def ll(sandbox, sandbox_namespace, tmp_path):
    run = LongLived(sandbox, sandbox_namespace, tmp_path)
    yield run
    run.cli("cluster", "down", "recipe.yaml", "--infra", "infra.yaml", "--force")
    run.api.close()


def test_long_lived_run_then_warm_rerun_then_cluster_down(ll):
    with ll.history(NVIDIA, "dynamographdeployments") as dgds:
        first = ll.run("--wait")
        assert first.returncode == 0, first.stderr
        training = ll.get(RAY, "rayclusters", ll.training)
        # The DGD carried its owner from its very first revision: no window without one.
        kind, created = dgds.events(ll.dgd)[0]
        assert kind == "ADDED"
        assert [o["uid"] for o in created["metadata"]["ownerReferences"]] == [training["metadata"]["uid"]]
    # The driver ran from the uploaded tree and read the recipe with the DGD name.
    assert f"dgd_name: {ll.dgd}" in first.stdout
    assert "hello from" in first.stdout and "mode=long-lived" in first.stdout
    record = ll.record()
    assert record["job_id"] in first.stdout and record["uploaded_bytes"] > 0
    assert record["clusters"] == {"training": ll.training, "gym": ll.gym}
    # DRA objects per cluster, owned by it (the DRA driver makes the ComputeDomain's channel
    # template); the worker claims point at them.
    assert sorted(ll.dra_names()) == sorted([f"{ll.training}-cd", f"{ll.training}-cd-channel", f"{ll.training}-roce"])
    claims = training["spec"]["workerGroupSpecs"][0]["template"]["spec"]["resourceClaims"]
    assert {c["resourceClaimTemplateName"] for c in claims} == {f"{ll.training}-cd-channel", f"{ll.training}-roce"}

    # Warm re-run: everything reused, the daemon left running, the unchanged code not uploaded again;
    # permissions from one rules review, each DRA object read once.
    ll.sandbox.request_counts(reset=True)
    second = ll.run("--wait")
    assert second.returncode == 0, second.stderr
    counts = ll.sandbox.request_counts()
    assert counts["create selfsubjectrulesreviews"] == 1 and "create selfsubjectaccessreviews" not in counts, counts
    assert counts["get computedomains"] == counts["get resourceclaimtemplates"] == 1, counts
    for what in ("kuberay.training", "kuberay.gym", "deployments.mx", "dynamo.serving"):
        assert f"{what}" in second.stderr
    assert "created" not in second.stderr, second.stderr
    assert "reused (RUNNING)" in second.stderr
    again = ll.record()
    assert again["run_id"] != record["run_id"] and again["uploaded_bytes"] == 0

    # logs and job logs without a run config: the latest run's driver.
    for command in (("logs",), ("job", "logs")):
        logs = ll.cli(*command)
        assert logs.returncode == 0 and f"dgd_name: {ll.dgd}" in logs.stdout, (command, logs.stderr)

    # status without a run config: the latest run, with the gym daemon running.
    status = ll.cli("status", "-o", "json")
    assert status.returncode == 0, status.stderr
    roles = {r["role"]: r for r in json.loads(status.stdout)["roles"]}
    assert roles["gym"]["daemon"].startswith("RUNNING gym-server-")
    assert json.loads(status.stdout)["run"]["run_id"] == again["run_id"]
    # --force is for exec drivers; a Ray job (the daemon) is stopped by Ray, and left running here.
    forced = ll.cli("job", "stop", "-r", "gym", "--force")
    assert forced.returncode == 2 and "--force applies to exec drivers" in forced.stderr, forced.stderr

    # Taking the training cluster down lets GC collect the DGD and the DRA objects it owns.
    down = ll.cli("cluster", "down", "recipe.yaml", "--infra", "infra.yaml", "--target", "kuberay.training")
    assert down.returncode == 0, down.stderr
    eventually(lambda: ll.get(NVIDIA, "dynamographdeployments", ll.dgd) is None and not ll.dra_names(),
               what="GC of the DGD and the DRA objects")


def test_running_driver_needs_replace(ll, tmp_path):
    ll.without_gym()
    gate = Gate(tmp_path)
    ll.infra["launch"]["entrypoint"] = gate.entrypoint(READ_RECIPE)
    ll.write()
    held = ll.run("--no-wait")
    assert held.returncode == 0, held.stderr
    first = ll.record()["job_id"]
    refused = ll.run("--no-wait")
    assert refused.returncode == 2 and first in refused.stderr and "--replace" in refused.stderr
    replaced = ll.run("--no-wait", "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert ll.record()["job_id"] != first
    stopped = ll.cli("job", "list", "-r", "training")
    assert "STOPPED" in stopped.stdout
    gate.open()


def test_failed_daemon_is_an_error_until_replace_which_resets_the_gym_endpoint_registry(ll):
    job_id = f"rk-{uuid.uuid4().hex[:6]}"
    # the gym's --job-id as the gym takes it, on a daemon that fails at once
    ll.infra["kuberay"]["gym"]["daemon"].update(entrypoint=f"sh -c 'exit 3' gym --job-id {job_id}", healthCheckUrl=None)
    ll.write()
    first = ll.run("--no-wait")
    assert first.returncode == 0, first.stderr
    eventually(lambda: "FAILED" in ll.cli("job", "list", "-r", "gym").stdout, what="the daemon failing")
    again = ll.run("--no-wait")
    assert again.returncode == 1
    assert "daemon gym-server-" in again.stderr and "FAILED" in again.stderr and "--replace" in again.stderr
    assert "Traceback" not in again.stderr

    name = f"nemo-rl-endpoints-{job_id}"
    core = client.CoreV1Api(ll.api)
    core.create_namespaced_config_map(ll.ns, {"metadata": {"name": name}, "data": {"gym_head_server": "http://x"}})
    with History(core.list_namespaced_config_map, ll.ns) as maps:
        replaced = ll.run("--no-wait", "--replace")
        assert replaced.returncode == 0, replaced.stderr
        maps.wait(lambda h: any(kind == "DELETED" for kind, _ in h.events(name)), what=f"ConfigMap {name} deleted")
    daemon_id = ll.infra["kuberay"]["gym"]["daemon"]["submissionId"]
    assert re.search(rf"daemon gym +submitted {daemon_id}-\d+", replaced.stderr), replaced.stderr
    assert f"configmap {name}" in replaced.stderr and "deleted" in replaced.stderr
    # Not there: a 404 is fine, and said.
    once_more = ll.run("--no-wait", "--replace")
    assert once_more.returncode == 0, once_more.stderr
    assert f"configmap {name}" in once_more.stderr and "not there" in once_more.stderr, once_more.stderr


def test_failure_before_the_driver_rolls_back_what_the_run_created(ll):
    with ll.sandbox.fault("dgd-failed"):
        failed = ll.run("--no-wait")
    assert failed.returncode == 1, failed.stderr
    assert "rolled back" in failed.stderr.lower() or "deleted" in failed.stderr.lower()
    for group_version, plural, name in ((RAY, "rayclusters", ll.training), (RAY, "rayclusters", ll.gym),
                                        (NVIDIA, "dynamographdeployments", ll.dgd)):
        eventually(lambda gv=group_version, plural=plural, name=name: ll.get(gv, plural, name) is None,
                   what=f"{plural} {name} deleted")
    apps = client.AppsV1Api(ll.api)
    eventually(lambda: not apps.list_namespaced_deployment(ll.ns).items, what="the Deployment deleted")
    eventually(lambda: not ll.dra_names(), what="the DRA objects deleted")


def test_the_example_pair_runs_and_cluster_up_submits_the_daemon(sandbox, sandbox_namespace, tmp_path):
    """examples/sandbox_longlived.* as the README shows it, from the project checkout."""
    user = f"u{uuid.uuid4().hex[:6]}"  # every name in the example derives from ${user:}
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": user, "XDG_CACHE_HOME": str(tmp_path)}
    pair = [
        str(ROOT / "examples/sandbox_longlived.yaml"),
        "--infra",
        str(ROOT / "examples/sandbox_longlived.infra.yaml"),
        f"infra.namespace={sandbox_namespace}",
    ]

    def cli(*args: str) -> subprocess.CompletedProcess:
        return run_cli(list(args), env=env, timeout=DEADLINE_S, cwd=ROOT)

    # The example's gym daemon serves the head's container port 18431 on the free port the
    # sandbox gives it (NRL_K8S_SANDBOX_PORT_18431): no two runs of it share a port.
    try:
        run = cli("run", "--raycluster", "--wait", *pair)
        assert run.returncode == 0, run.stderr
        assert f"dgd_name: {user}-ll-dgd" in run.stdout and "message: " in run.stdout
        assert "healthy" in run.stderr  # the Deployment and the gym daemon answered their health URLs
        # The example's DGD is nvidia.com/v1beta1; the same object reads in v1alpha1 too (conversion).
        custom = client.CustomObjectsApi(sandbox.api_client())
        beta, alpha = (custom.get_namespaced_custom_object("nvidia.com", version, sandbox_namespace,
                                                           "dynamographdeployments", f"{user}-ll-dgd")
                       for version in ("v1beta1", "v1alpha1"))
        assert beta["metadata"]["uid"] == alpha["metadata"]["uid"] and isinstance(beta["spec"]["components"], list)
        assert beta["metadata"]["ownerReferences"][0]["name"] == f"{user}-ll-train"
        status = cli("status", "-o", "json")
        assert status.returncode == 0, status.stderr
        assert [d["name"] for d in json.loads(status.stdout)["dynamo"]] == [f"{user}-ll-dgd"], status.stdout
        # The gym cluster again from scratch: cluster up brings it up and submits its daemon.
        assert cli("cluster", "down", "-t", "kuberay.gym", *pair).returncode == 0
        up = cli("cluster", "up", "-t", "kuberay.gym", *pair)
        assert up.returncode == 0, up.stderr
        assert f"{user}-ll-gym-server" in up.stderr and "submitted" in up.stderr
        jobs = cli("job", "list", "-r", "gym", *pair)
        if not (f"{user}-ll-gym-server" in jobs.stdout and "RUNNING" in jobs.stdout):
            logs = cli("job", "logs", "-r", "gym", "-j", f"{user}-ll-gym-server", *pair)
            pytest.fail(
                f"the daemon is not running:\n{jobs.stdout}{jobs.stderr}\nits log:\n{logs.stdout}{logs.stderr}\n"
                f"cluster up said:\n{up.stderr}"
            )
    finally:
        cli("cluster", "down", "--force", *pair)


# -- the exec submitter and the run-mode presets ---------------------------------------------------
# An upstream-style driver: it reads the recipe its hard-coded --config names (nrl-k8s points that
# at the run's recipe), and shows what it was given. The token is printed as a shell assignment
# (the CLI redacts it) and as a digest (to compare).
EXEC_DRIVER = '''\
import hashlib, os, sys
cfg = sys.argv[sys.argv.index("--config") + 1]
print("recipe " + next(line.strip() for line in open(cfg) if "dgd_name" in line))
print("mode=" + os.environ["MODE"] + " cwd=" + os.getcwd())
token = os.environ.get("HF_TOKEN", "")
print("HF_TOKEN=" + token)
print("token sha " + hashlib.sha256(token.encode()).hexdigest())
with open(os.environ["PID_FILE"], "w") as out:
    out.write(str(os.getpid()))
'''


def _exec_infra(ll: LongLived, token: str) -> None:
    """The driver's code in the test's tree (the "image": the sandbox's head runs on this machine),
    the exec submitter's files under the test's tmp dir."""
    (ll.dir / "code/driver.py").write_text(EXEC_DRIVER)
    ll.infra["submit"] = {"execTmpDir": str(ll.dir / "exec")}
    ll.infra["launch"]["entrypoint"] = "python3 code/driver.py --config examples/grpo_upstream.yaml"
    ll.infra["launch"]["env"].update(HF_TOKEN=token, PID_FILE=str(ll.dir / "driver.pid"))
    ll.write()


def _gone(pid: int) -> bool:
    """The process ended (a zombie nobody reaped counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_exec_submitter_runs_the_driver_on_the_head_pod_and_keeps_its_log(ll):
    ll.without_gym()
    token = f"hf_{uuid.uuid4().hex}"
    _exec_infra(ll, token)
    run = ll.run("--wait", "--submitter", "exec", "--code-source", "image", "--code-path", str(ll.dir))
    assert run.returncode == 0, run.stderr
    # The hard-coded --config was pointed at the run's recipe (said once); the driver read the DGD name from it.
    assert "`--config examples/grpo_upstream.yaml` -> `--config \"$NRL_K8S_RECIPE\"`" in run.stderr, run.stderr
    assert f"recipe dgd_name: {ll.dgd}" in run.stdout
    assert f"mode=long-lived cwd={ll.dir}" in run.stdout
    # The secret reached the driver through the container's env (never a file or command line of
    # ours), and nothing printed shows it.
    assert f"token sha {hashlib.sha256(token.encode()).hexdigest()}" in run.stdout, run.stdout
    assert token not in run.stdout + run.stderr
    record = ll.record()
    assert record["submitter"] == "exec" and record["exec"]["dir"] == str(ll.dir / f"exec/nrl-{record['run_id']}")
    assert "through exec" in run.stderr and record["uploaded_bytes"] == 0

    # After it ended: the log is read from the head pod (the copy run --wait saved is removed first).
    (ll.dir / f"cache/nrl-k8s/runs/{record['run_id']}.log").unlink()
    for command in (("logs",), ("job", "logs"), ("logs", "recipe.yaml", "--infra", "infra.yaml")):
        logs = ll.cli(*command)
        assert logs.returncode == 0, (command, logs.stderr)
        assert f"recipe dgd_name: {ll.dgd}" in logs.stdout and token not in logs.stdout, command
    assert (ll.dir / f"exec/nrl-{record['run_id']}/stdout.log").is_file()
    listed = ll.cli("job", "list")
    assert re.search(rf"{record['run_id']} +SUCCEEDED +\[exec\]", listed.stdout), listed.stdout
    status = ll.cli("status", "-o", "json")
    assert json.loads(status.stdout)["driver"]["status"] == "SUCCEEDED", status.stdout


def test_batch_mode_starts_the_driver_by_exec_without_waiting_and_job_stop_force_kills_it(ll, tmp_path):
    ll.without_gym()
    gate = Gate(tmp_path)  # never opened: the driver runs until it is killed
    _exec_infra(ll, "hf_unused")
    # TERM is ignored by the driver's processes: only `job stop --force` (KILL) ends it.
    pid_file = ll.dir / "driver.pid"
    for key in ("codeSource", "rayUploadPaths"):  # the preset picks the code source (an explicit one would win)
        ll.infra["launch"].pop(key)
    ll.infra["launch"].update(runMode="batch", codePath=str(ll.dir),
                              entrypoint=f"trap '' TERM; echo $$ > {shlex.quote(str(pid_file))}; " + gate.entrypoint())
    ll.write()
    run = ll.run()  # batch: exec, the code in the image, no wait
    assert run.returncode == 0, run.stderr
    assert "through exec" in run.stderr and "job status" not in run.stdout
    run_id = ll.record()["run_id"]
    assert re.search(rf"{run_id} +RUNNING", ll.cli("job", "list").stdout)
    pid = int(eventually(lambda: pid_file.is_file() and pid_file.read_text().strip(), what="the driver's pid file"))
    # A second run refuses while it runs, naming it.
    again = ll.run()
    assert again.returncode == 2 and run_id in again.stderr and "--replace" in again.stderr
    term = ll.cli("job", "stop")
    assert term.returncode == 0 and "TERM" in term.stderr, term.stderr
    kill = ll.cli("job", "stop", "--force")
    assert kill.returncode == 0 and "KILL" in kill.stderr, kill.stderr
    eventually(lambda: _gone(pid), what="the driver killed")
    eventually(lambda: re.search(rf"{run_id} +STOPPED", ll.cli("job", "list").stdout), what="the driver STOPPED")
