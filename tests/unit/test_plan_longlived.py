"""`run --raycluster` offline: the plan (objects, daemons, driver, code source) and the daemon rules."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx
import pytest

from nrl_k8s.config.loader import load_config
from nrl_k8s.errors import ConfigError, ResourceFailed
from nrl_k8s.flows import raycluster as longlived
from nrl_k8s.flows import records as runs
from nrl_k8s.flows.lifecycle import LiveOptions
from nrl_k8s.flows.plan import DRIVER_RECIPE, Code, Submission, default_flow, plan_longlived, unstaged_recipe_reads
from nrl_k8s.flows.raycluster import latest_daemon_job, submit_daemon
from nrl_k8s.ray.dashboard import Dashboard
from nrl_k8s.ray.package import stage

ROOT = Path(__file__).resolve().parents[2]
PAIR = (ROOT / "examples/sandbox_longlived.yaml", ROOT / "examples/sandbox_longlived.infra.yaml")
ENV = {"NRL_K8S_USER": "ut"}


def plan(*overrides: str, run_id: str | None = None):
    return plan_longlived(load_config(PAIR[0], list(overrides), PAIR[1], env=ENV), run_id)


def kinds(manifests: list[dict]) -> list[str]:
    return [m["kind"] for m in manifests]


def test_objects_in_apply_order_with_dra_per_cluster():
    p = plan()
    assert kinds(p.manifests()) == ["Deployment", "Service", "RayCluster", "ComputeDomain", "ResourceClaimTemplate",
                                    "RayCluster", "DynamoGraphDeployment"]
    assert [m["metadata"]["name"] for m in p.dra["training"]] == ["ut-ll-train-cd", "ut-ll-train-roce"]
    assert p.dra["gym"] == []
    assert p.health["web"] == ("http://ut-ll-web:8000/", 120.0)


def test_driver_submission_carries_run_id_recipe_and_code():
    p = plan(run_id="my-run-1")
    driver = p.driver
    assert (driver.submission_id, driver.cluster, driver.role) == ("my-run-1", "ut-ll-train", "training")
    assert driver.env["NRL_K8S_RUN_ID"] == "my-run-1" and driver.env["NRL_K8S_RECIPE"] == DRIVER_RECIPE
    assert driver.code == Code("upload", ("examples/sandbox_code",), None)
    assert p.recipe["policy"]["generation"]["dynamo_cfg"]["dgd_name"] == "ut-ll-dgd"


def test_generated_run_ids_differ_and_start_with_the_cluster():
    first, second = plan().run_id, plan().run_id
    assert first != second and first.startswith("ut-ll-train-")


def test_daemon_submission():
    daemon = plan().daemons["gym"]
    assert daemon.submission_id == "ut-ll-gym-server" and daemon.cluster == "ut-ll-gym"
    assert daemon.health == ("http://ut-ll-gym-head-svc:18431/", 120.0)
    assert daemon.code.source == "upload"


@pytest.mark.parametrize("override, in_secret, in_env", [
    ("++infra.launch.env.HF_TOKEN=hf_abc", "HF_TOKEN", None),
    ("++infra.launch.env.wandbApiKey=k", "wandbApiKey", None),
    ("++infra.launch.env.MODE=fast", None, "MODE"),
])
def test_secret_env_goes_to_a_cluster_secret_never_to_the_job(override, in_secret, in_env):
    p = plan(override)
    if in_secret:
        secret = p.env_secrets["training"]
        assert secret["metadata"]["name"] == "ut-ll-train-env" and in_secret in (
            secret.get("stringData") or secret.get("data")
        )
        assert in_secret not in p.driver.env
        head = p.clusters["training"]["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
        assert any(e["name"] == in_secret and e["valueFrom"]["secretKeyRef"]["name"] == "ut-ll-train-env"
                   for e in head["env"])
        assert "hf_abc" not in json.dumps([p.clusters, p.driver.env, p.driver.entrypoint])
    else:
        assert "training" not in p.env_secrets and p.driver.env[in_env] == "fast"


@pytest.mark.parametrize("override, key", [
    ("++infra.kuberay.gym.daemon.entrypoint=", "kuberay.gym.daemon.entrypoint"),
    ("++infra.launch.env.NRL_K8S_RUN_ID=x", "NRL_K8S_RUN_ID"),
])
def test_bad_long_lived_keys_name_the_key(override, key):
    with pytest.raises(ConfigError) as err:
        plan(override)
    assert key in str(err.value) + (err.value.hint or "")


def test_a_bad_run_id_is_refused():
    with pytest.raises(ConfigError):
        plan(run_id="Not A Valid Id!")


# -- daemons ---------------------------------------------------------------------------------
def job(submission_id: str, status: str, start: int) -> dict:
    return {"submission_id": submission_id, "job_id": None, "status": status, "start_time": start, "entrypoint": "x"}


class Dash:
    """A dashboard over MockTransport: GET lists ``jobs``; POST / stop are recorded."""

    def __init__(self, jobs: list[dict]):
        self.jobs, self.posted, self.stopped = jobs, [], []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path == "/api/jobs/":
            return httpx.Response(200, json=self.jobs)
        if request.method == "GET" and path.startswith("/api/jobs/"):
            sid = path.rsplit("/", 1)[-1]
            found = [
                dict(j, status="STOPPED") if sid in self.stopped else j for j in self.jobs if j["submission_id"] == sid
            ]
            return httpx.Response(200, json=found[0]) if found else httpx.Response(404, text="not found")
        if request.method == "POST" and path.endswith("/stop"):
            self.stopped.append(path.split("/")[-2])
            return httpx.Response(200, json={"stopped": True})
        if request.method == "POST" and path == "/api/jobs/":
            self.posted.append(json.loads(request.content))
            return httpx.Response(200, json={"submission_id": self.posted[-1]["submission_id"]})
        return httpx.Response(404, text="unexpected " + path)

    def client(self) -> Dashboard:
        return Dashboard("http://dash", transport=httpx.MockTransport(self), backoff_s=0)


DAEMON = Submission(role="gym", cluster="gym-c", submission_id="gym-server", entrypoint="python serve.py",
                    env={"PORT": "1"}, code=Code("image", None, None))


@pytest.mark.parametrize("jobs, replace, outcome", [
    ([], False, "submitted gym-server"),
    ([job("gym-server", "RUNNING", 1)], False, "running gym-server"),
    ([job("gym-server", "SUCCEEDED", 1)], False, "succeeded gym-server"),
    ([job("gym-server", "FAILED", 1)], False, ResourceFailed),
    ([job("gym-server", "FAILED", 1), job("gym-server-5", "RUNNING", 2)], False, "running gym-server-5"),
    ([job("gym-server", "FAILED", 1)], True, "submitted gym-server-"),
    ([job("other", "RUNNING", 1)], False, "submitted gym-server"),
])
def test_daemon_rules(jobs, replace, outcome):
    dash = Dash(jobs)
    with dash.client() as client:
        if outcome is ResourceFailed:
            with pytest.raises(ResourceFailed) as err:
                submit_daemon(client, DAEMON, None, namespace="ns", replace=replace, emit=lambda e: None)
            assert "gym-server" in err.value.message and "--replace" in err.value.hint
            assert not dash.posted
            return
        done = submit_daemon(client, DAEMON, None, namespace="ns", replace=replace, emit=lambda e: None)
    assert done.startswith(outcome)
    if outcome.startswith("submitted"):
        assert dash.posted[-1]["submission_id"] == done.split()[-1]
        assert dash.posted[-1]["runtime_env"] == {"env_vars": {"PORT": "1"}}


class Listings(Dash):
    """Each job list a later one (the last repeats); every package is on the cluster."""

    def __init__(self, *listings: list[dict]):
        super().__init__(listings[0])
        self.listings, self.lists = list(listings), 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/api/packages/gcs/"):
            return httpx.Response(200)
        if request.method == "GET" and request.url.path == "/api/jobs/":
            self.jobs = self.listings[min(self.lists, len(self.listings) - 1)]
            self.lists += 1
        return super().__call__(request)


@pytest.mark.parametrize("bound_s, outcome", [(3600.0, ConfigError), (0.0, "submitted")],
                         ids=["fresh-read-ahead-is-used", "stale-read-ahead-is-read-again"])
def test_the_driver_step_uses_its_read_ahead_only_while_fresh(tmp_path, monkeypatch, bound_s, outcome):
    """Read ahead, the training cluster still ran the previous driver; it ended before the driver step."""
    monkeypatch.setattr(longlived, "_READ_AHEAD_S", bound_s)
    p = plan(run_id="r-2")
    dash = Listings([job("r-1", "RUNNING", 1)], [job("r-1", "SUCCEEDED", 1)])
    package = stage(tmp_path, [], "a: 1\n")
    with longlived.LongLived(None, p, LiveOptions(), lambda event: None) as run:
        run.live["training"] = {"status": {"state": "ready"}}
        run._dashboards["training"] = dash.client()
        run.read_ahead(package)
        if outcome is ConfigError:
            with pytest.raises(ConfigError, match="still running job.* r-1"):
                run.driver(package)
            assert dash.lists == 1
            return
        run.driver(package)
    assert dash.lists == 2 and dash.posted[-1]["submission_id"] == "r-2"


def test_latest_daemon_job_ignores_other_ids():
    jobs = [job("gym-server-9", "FAILED", 5), job("gym-serverless", "RUNNING", 9), job("gym-server", "FAILED", 1)]
    from nrl_k8s.ray.dashboard import JobInfo

    infos = [JobInfo.from_json(j) for j in jobs]
    assert latest_daemon_job(infos, "gym-server").submission_id == "gym-server-9"


# -- run records -----------------------------------------------------------------------------
def test_records_are_private_and_the_latest_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(ConfigError):
        runs.load()
    first = runs.save({"run_id": "a-1", "namespace": "ns"})
    runs.save({"run_id": "b-2", "namespace": "ns"})
    assert stat.S_IMODE(first.stat().st_mode) == 0o600
    assert stat.S_IMODE(first.parent.stat().st_mode) == 0o700
    assert runs.load()["run_id"] == "b-2" and runs.load("a-1")["run_id"] == "a-1"


@pytest.mark.parametrize(
    "launch, flow",
    [
        ({}, "rayjob"),
        ({"mode": "rayjob"}, "rayjob"),
        ({"mode": "bringup"}, "raycluster"),
        ({"mode": "single"}, "rayjob"),
    ],
    ids=["unset", "rayjob", "bringup", "single"],
)
def test_launch_mode_picks_the_default_flow(launch, flow):
    assert default_flow({"launch": launch}) == flow


READS = f"python run.py --config {DRIVER_RECIPE}"
READING_DAEMON = {"name": "g", "daemon": {"entrypoint": f"python serve.py {DRIVER_RECIPE}"}}


@pytest.mark.parametrize(
    "infra, warned",
    [
        (
            {"launch": {"entrypoint": READS}},
            ["launch.entrypoint reads nrl_k8s_run.yaml, which only run --raycluster stages"],
        ),
        ({"launch": {"entrypoint": READS, "mode": "rayjob"}}, ["which only run --raycluster stages"]),
        ({"launch": {"entrypoint": READS, "mode": "bringup"}}, []),
        (
            {"launch": {"entrypoint": READS, "mode": "bringup", "codeSource": "image", "codePath": "/opt/rl"}},
            ["but with launch.codeSource image nothing stages it: the driver starts in launch.codePath (/opt/rl)"],
        ),
        (
            {"launch": {"entrypoint": READS, "codeSource": "lustre", "codePath": "/lustre/rl"}},
            ["with launch.codeSource lustre nothing stages it"],
        ),
        ({"launch": {"entrypoint": 'python run.py --config "$NRL_K8S_RECIPE"'}}, []),
        (
            {"launch": {"mode": "bringup"}, "kuberay": {"gym": READING_DAEMON}},
            ["kuberay.gym.daemon.entrypoint reads nrl_k8s_run.yaml, but the daemon uploads no working dir"],
        ),
        (
            {"kuberay": {"gym": {**READING_DAEMON, "daemon": {**READING_DAEMON["daemon"], "rayUploadPaths": ["gym"]}}}},
            [],
        ),
    ],
    ids=[
        "upload-default-flow",
        "upload-rayjob",
        "upload-bringup",
        "image",
        "lustre",
        "reads-the-env-var",
        "daemon-without-upload",
        "daemon-with-upload",
    ],
)
def test_unstaged_recipe_reads_are_warned_with_the_fix(infra, warned):
    found = unstaged_recipe_reads(infra)
    assert len(found) == len(warned)
    for (message, fix), expected in zip(found, warned, strict=True):
        assert expected in message
        assert '"$NRL_K8S_RECIPE"' in fix
