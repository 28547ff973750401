"""Upstream's flags against the sandbox, through the installed CLI: `logs --source daemon|auto` reads a
role's daemon (its latest submission), `cluster dashboard NAME` relays to a RayCluster's dashboard
with no recipe (the token of its URL in the ray job CLI's --headers, as its hint says; a job POSTed
with the browser's cookie but no Origin is refused and never reaches Ray), and what
`check --manifests-only` prints, applied by kubectl, runs the job to its end."""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import yaml
from sandbox_harness import DEADLINE_S, NRL_K8S, Gate, History, eventually, interruptible, run_cli, status_of

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
ENDED = ("Complete", "Failed", "ValidationFailed")  # a RayJob's terminal jobDeploymentStatus


@pytest.fixture
def gym(sandbox, sandbox_namespace, tmp_path):
    """A head-only gym RayCluster brought up by `cluster up`, whose daemon prints a line and then waits
    for the test's gate (it runs while the test looks)."""
    gate, name = Gate(tmp_path), f"g-{uuid.uuid4().hex[:6]}"
    role = {
        "name": name,
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head"}]}}}},
        "daemon": {"entrypoint": "echo daemon-one; " + gate.entrypoint(), "submissionId": f"{name}-daemon"},
    }
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": "it"}
    overrides = [f"infra.namespace={sandbox_namespace}", f"infra.kuberay.training.name={name}-t",
                 "+infra.kuberay.gym=" + json.dumps(role)]

    def cli(*args: str, config: bool = True) -> subprocess.CompletedProcess:
        return run_cli([*args, *([*PAIR, *overrides] if config else [])], env=env)

    up = cli("cluster", "up", "-t", "kuberay.gym")
    assert up.returncode == 0, up.stderr
    cli.name, cli.ns, cli.env, cli.daemon = name, sandbox_namespace, env, f"{name}-daemon"
    yield cli
    gate.open()


def relaying(proc: subprocess.Popen) -> tuple[str, list[str]]:
    """(the URL `cluster dashboard` printed, its one stdout line; its stderr lines up to the one telling
    scripts how to send the token). Nothing more is printed until it stops."""
    ready, _, _ = select.select([proc.stdout], [], [], DEADLINE_S)
    url = proc.stdout.readline().strip() if ready else ""
    assert url.startswith("http://127.0.0.1:"), (
        url,
        proc.poll(),
        proc.stderr.read() if proc.poll() is not None else "",
    )
    # read the pipe itself: a readline of the text stream may buffer lines that select then does not see
    text = ""
    while "scripts send the token" not in text:
        ready, _, _ = select.select([proc.stderr], [], [], DEADLINE_S)
        assert ready and (chunk := os.read(proc.stderr.fileno(), 65536)), text
        text += chunk.decode()
    return url, text.splitlines(keepends=True)


def answered(url: str, **headers: str):
    """The JSON of a 200 answer to GET ``url`` through the relay, else None (the head is still starting)."""
    response = httpx.get(url, headers=headers, timeout=DEADLINE_S)
    return response.json() if response.status_code == 200 else None


def ray_cli(hint: str, token: str) -> list[str]:
    """The `ray job ...` command of the relay's hint, TOKEN replaced, run by this environment's ray."""
    argv = shlex.split(hint[hint.index("ray job "):].replace("TOKEN", token))
    return [str(Path(sys.executable).with_name("ray")), *argv[1:]]


def logged(cli, *flags: str, text: str) -> subprocess.CompletedProcess:
    """`logs RECIPE FLAGS` once its output holds ``text`` (Ray writes a job's log as it runs)."""
    return eventually(lambda: (r := cli("logs", *flags)).returncode == 0 and text in r.stdout and r,
                      what=f"`logs {' '.join(flags)}` showing {text!r}")


def test_logs_source_daemon_and_cluster_dashboard(gym, tmp_path):
    opened, browser = tmp_path / "opened", tmp_path / "browser"
    browser.write_text(
        f"#!{sys.executable}\nimport pathlib, sys\npathlib.Path({str(opened)!r}).write_text(sys.argv[1])\n"
    )
    browser.chmod(0o700)
    proc = interruptible([NRL_K8S, "cluster", "dashboard", gym.name, "-n", gym.ns, "--port", "0", "--open"],
                         {**gym.env, "BROWSER": str(browser)})
    try:
        printed, early = relaying(proc)
        (token,), url = parse_qs(urlsplit(printed).query)["token"], printed.partition("?")[0]
        script = {"Authorization": f"token {token}"}
        assert eventually(lambda: answered(f"{url}api/version", **script),
                          what="the Ray dashboard through the relay")["ray_version"]
        assert eventually(opened.is_file, what="the browser opened")  # a URL whose own token logs in once
        assert opened.read_text().partition("?")[0] == url and token not in opened.read_text()
        assert httpx.get(f"{url}api/jobs/", timeout=DEADLINE_S).status_code == 403  # no token
        listed = subprocess.run(
            ray_cli(early[-1], token), env=gym.env, capture_output=True, text=True, timeout=DEADLINE_S
        )
        assert listed.returncode == 0 and gym.daemon in listed.stdout, listed.stdout + listed.stderr

        # a page of another site POSTing a job with the browser's cookie, without Origin (an old browser,
        # a privacy extension): refused, and Ray never gets it
        with httpx.Client(base_url=url, timeout=DEADLINE_S) as browser:
            assert browser.get(printed).status_code == 302 and len(browser.cookies) == 1
            forged = browser.post(
                "api/jobs/", json={"entrypoint": "echo forged", "submission_id": f"forged-{gym.name}"}
            )
            assert forged.status_code == 403 and "only from its own pages" in forged.text, forged.text
            own = browser.get("api/jobs/", headers={"Origin": url.rstrip("/")})  # the relay's own page reads jobs
            assert own.status_code == 200
        assert [j["submission_id"] for j in own.json()] == [gym.daemon]  # no forged job

        daemon = logged(gym, "--role", "gym", "--source", "daemon", text="daemon-one")
        assert daemon.stdout == logged(gym, "--role", "gym", "--source", "auto", text="daemon-one").stdout

        # another job on the gym cluster: the driver source follows the newest job, the daemon source keeps the daemon
        other = httpx.post(
            f"{url}api/jobs/",
            json={"entrypoint": "echo other-job", "submission_id": f"other-{gym.name}"},
            headers=script,
            timeout=DEADLINE_S,
        )
        assert other.status_code == 200, other.text
        logged(gym, "--role", "gym", text="other-job")
        assert "other-job" not in logged(gym, "--role", "gym", "--source", "daemon", text="daemon-one").stdout

        # the daemon submitted again under a suffixed id (as `run --raycluster --replace` does): its latest submission
        again = httpx.post(
            f"{url}api/jobs/",
            json={"entrypoint": "echo daemon-two", "submission_id": f"{gym.daemon}-2"},
            headers=script,
            timeout=DEADLINE_S,
        )
        assert again.status_code == 200, again.text
        logged(gym, "--role", "gym", "--source", "daemon", text="daemon-two")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=DEADLINE_S)
    err = "".join(early) + rest
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert out == "" and f"the Ray dashboard of RayCluster {gym.name} (namespace {gym.ns})" in err
    assert token not in err

    # training declares no daemon: auto is what `logs` shows by default (here: no training cluster)
    plain, auto = gym("logs"), gym("logs", "--source", "auto")
    assert plain.returncode == auto.returncode == 1 and plain.stderr == auto.stderr, plain.stderr + auto.stderr

    missing = gym("cluster", "dashboard", "nope", "-n", gym.ns, config=False)
    assert missing.returncode == 1 and missing.stdout == "" and "Traceback" not in missing.stderr
    assert f"no RayCluster nope in namespace {gym.ns}" in missing.stderr and "cluster list" in missing.stderr


def test_manifests_only_piped_to_kubectl_runs_the_job_to_its_end(sandbox, sandbox_namespace):
    """`check --manifests-only --show-secrets | kubectl apply -f -` (the sandbox's kubectl) is a run:
    KubeRay starts the RayJob at once (never suspended, no lease), its driver reads the real recipe
    and its launch.env value from the stream's Secret and succeeds, KubeRay deletes the cluster as the
    job ends (TTL 0), and `nrl-k8s gc` then deletes the Secret, which no stream can give an owner."""
    from kubernetes import client

    ns, env = sandbox_namespace, {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": "it"}
    entrypoint = 'grep -q max_num_steps "$NRL_K8S_RECIPE" && echo "token bytes $(printf %s "$HF_TOKEN" | wc -c)"'
    stream = run_cli(["check", *PAIR, f"infra.namespace={ns}", "~infra.dynamo",
                      "++infra.launch.env.HF_TOKEN=hf_0123456789", f"infra.launch.entrypoint={entrypoint}",
                      "--manifests-only", "--show-secrets"], env=env)
    assert stream.returncode == 0, stream.stderr
    assert [doc["kind"] for doc in yaml.safe_load_all(stream.stdout)] == ["RayJob", "Secret"]
    with sandbox.api_client() as api:
        custom = client.CustomObjectsApi(api)
        with History(custom.list_namespaced_custom_object, "ray.io", "v1", ns, "rayjobs") as jobs, \
                History(custom.list_namespaced_custom_object, "ray.io", "v1", ns, "rayclusters") as clusters:
            applied = sandbox.kubectl("apply", "-f", "-", stdin=stream.stdout).stdout.split()
            assert applied[::2] == ["rayjob.ray.io/it-sandbox", f"secret/{applied[2].split('/')[1]}"], applied
            jobs.wait(lambda h: status_of(h.objects().get("it-sandbox"), "jobDeploymentStatus") in ENDED,
                      what="the RayJob to end")
            clusters.wait(lambda h: any(kind == "DELETED" for kind, _ in h.events()), what="its RayCluster deleted")
    job = jobs.objects()["it-sandbox"]
    assert (status_of(job, "jobDeploymentStatus"), status_of(job, "jobStatus")) == ("Complete", "SUCCEEDED"), job
    assert not [obj for _, obj in jobs.events() if status_of(obj, "jobDeploymentStatus") in ("Suspending", "Suspended")]
    assert "token bytes 13" in sandbox.driver_log(status_of(job, "jobId"))  # the Secret's value, not <redacted>
    collected = run_cli(["-n", ns, "gc"], env=env)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert sandbox.kubectl("get", "secrets", "-n", ns, "-l", "nrl-k8s.io/run-id", "-o", "name").stdout == ""
