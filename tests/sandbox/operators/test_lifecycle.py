"""`nrl-k8s sandbox up/down/status/fault` through the installed CLI, and the kubeconfig it writes."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from operator_helpers import dgd, field, proxy, ray_cluster_spec, rayjob
from sandbox_harness import DEADLINE_S, eventually, nrl_k8s, observe, unique

from nrl_k8s.sandbox.faults import Faults
from nrl_k8s.sandbox.pids import alive, group_members, marked, read_pid, start_time, wait_gone
from nrl_k8s.sandbox.ray_head import temp_dir_for


def test_starting_twice_is_refused(sandbox):
    result = nrl_k8s("sandbox", "up", "--dir", str(sandbox.dir), check=False)
    assert result.returncode == 1
    assert "already running" in result.stderr and str(sandbox.dir) in result.stderr
    assert result.stdout == ""


def test_status_reports_urls_pids_faults_and_objects(sandbox):
    report = json.loads(nrl_k8s("sandbox", "status", "--dir", str(sandbox.dir), "-o", "json").stdout)
    assert report["running"] is True and report["ray_head_running"] is True
    assert (report["api_url"], report["dashboard_url"]) == (sandbox.api_url, sandbox.dashboard_url)
    assert all(alive(pid) for pid in report["pids"].values())
    assert report["faults"] == sandbox.faults
    assert set(report["objects"]) == {"pods", "services", "rayclusters", "rayjobs", "dynamographdeployments"}
    text = nrl_k8s("sandbox", "status", "--dir", str(sandbox.dir)).stdout
    assert "running:    yes" in text and sandbox.dashboard_url in text


def test_status_of_a_directory_with_no_sandbox(tmp_path):
    report = json.loads(nrl_k8s("sandbox", "status", "--dir", str(tmp_path), "-o", "json").stdout)
    assert report == {"dir": str(tmp_path), "running": False, "kubeconfig": str(tmp_path / "kubeconfig")}


def test_faults_are_set_and_cleared_on_the_running_sandbox(sandbox, api, core):
    name = unique("svc")
    annotation = json.dumps({"80": sandbox.dashboard_url})
    core.create_namespaced_service("default", {
        "metadata": {"name": name, "annotations": {"sandbox.nrl-k8s.io/endpoints": annotation}},
        "spec": {"ports": [{"port": 80}]},
    })  # fmt: skip
    assert proxy(api, "GET", "default", f"{name}:80", "api/version")[0] == 200

    result = nrl_k8s("sandbox", "fault", "set", "proxy-forbidden", "--dir", str(sandbox.dir))
    assert "proxy-forbidden" in result.stderr
    try:
        assert proxy(api, "GET", "default", f"{name}:80", "api/version")[0] == 403
        status = json.loads(nrl_k8s("sandbox", "status", "--dir", str(sandbox.dir), "-o", "json").stdout)
        assert status["faults"] == {**sandbox.faults, "proxy-forbidden": ""}
    finally:
        nrl_k8s("sandbox", "fault", "clear", "proxy-forbidden", "--dir", str(sandbox.dir))
    assert proxy(api, "GET", "default", f"{name}:80", "api/version")[0] == 200
    core.delete_namespaced_service(name, "default")


BAD_FAULTS = {
    "up-unknown": ["sandbox", "up", "--fault", "bogus"],
    "up-bad-value": ["sandbox", "up", "--fault", "slow=fast"],
    "set-unknown": ["sandbox", "fault", "set", "bogus"],
    "clear-unknown": ["sandbox", "fault", "clear", "bogus"],
}


@pytest.mark.parametrize("argv", BAD_FAULTS.values(), ids=BAD_FAULTS.keys())
def test_bad_faults_exit_2_listing_the_valid_ones(tmp_path, argv):
    result = nrl_k8s(*argv, "--dir", str(tmp_path), check=False)
    assert result.returncode == 2, result.stderr
    assert all(name in result.stderr for name in Faults.KNOWN)
    assert not (tmp_path / "daemon.pid").exists()


def _running_driver(box, tmp_path: Path) -> int:
    """Start a RayJob whose driver sleeps; return the driver's pid (found by its marker file)."""
    marker = tmp_path / f"driver-{unique('pid')}"
    name = unique("sleeper")
    with box.api_client() as api:
        custom = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", rayjob(name, f"echo $$ > {marker}; exec sleep 600"))
        observe(custom.list_namespaced_custom_object, "ray.io", "v1", "default", "rayjobs",
                field_selector=f"metadata.name={name}",
                until=lambda o: (o.get(name, {}).get("status") or {}).get("jobStatus") == "RUNNING")  # fmt: skip
    return int(eventually(lambda: marker.exists() and marker.read_text().strip(), what="driver pid file"))


CRASHES = {"clean": False, "after-daemon-sigkill": True}


@pytest.mark.parametrize("kill_daemon", CRASHES.values(), ids=CRASHES.keys())
def test_down_stops_every_process_it_started(separate_sandbox, tmp_path, kill_daemon):
    with separate_sandbox() as box:
        driver = _running_driver(box, tmp_path)
        daemon, ray_head = read_pid(box.dir / "daemon.pid"), read_pid(box.dir / "ray-head.pid")
        started = {pid: start_time(pid) for pid in set(marked(box.dir)) | set(group_members(ray_head))}
        assert {daemon, ray_head, driver} <= set(started)
        if kill_daemon:
            os.kill(daemon, signal.SIGKILL)
            assert wait_gone([daemon], DEADLINE_S) == []
            assert alive(ray_head) and alive(driver)

        result = nrl_k8s("sandbox", "down", "--dir", str(box.dir))
        assert "stopped" in result.stderr
        assert [pid for pid, began in started.items() if alive(pid) and start_time(pid) == began] == []
        assert marked(box.dir) == []
        assert not any((box.dir / f).exists() for f in ("daemon.pid", "ray-head.pid", "sandbox.json"))
        assert (box.dir / "kubeconfig").exists() and (box.dir / "daemon.log").exists()
        # Ray's logs and the drivers' Secret volumes can hold secret values: they go with the sandbox
        assert not temp_dir_for(box.dir).parent.exists() and not (box.dir / "volumes").exists()


# Imported by every Python process of the sandbox (PYTHONPATH): the first Ray agent to start
# stalls 40 s, as on a loaded machine, so Ray's raylet aborts that first head start.
SLOW_FIRST_AGENT = """
import os, sys, time
if sys.argv[:1] and sys.argv[0].endswith(("dashboard/agent.py", "runtime_env/agent/main.py")):
    try:
        os.close(os.open(os.environ["NRL_K8S_TEST_SLOW_ONCE"], os.O_CREAT | os.O_EXCL))
        time.sleep(40)
    except FileExistsError:
        pass
"""


def test_a_ray_head_that_aborts_its_start_up_is_started_again(separate_sandbox, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(SLOW_FIRST_AGENT)
    env = {"PYTHONPATH": str(tmp_path), "NRL_K8S_TEST_SLOW_ONCE": str(tmp_path / "slowed")}
    with separate_sandbox(env=env) as box:
        driver = _running_driver(box, tmp_path)  # jobs run: the head is up, not dying behind a ready dashboard
        assert alive(driver) and (tmp_path / "slowed").exists()
        assert "the Ray head exited during start-up (attempt 1 of 3)" in (box.dir / "daemon.log").read_text()


def test_no_dgd_crd_fault_serves_no_dgd_path(separate_sandbox):
    with separate_sandbox("no-dgd-crd") as box, box.api_client() as api:
        custom = client.CustomObjectsApi(api)
        with pytest.raises(ApiException) as missing:
            custom.list_namespaced_custom_object("nvidia.com", "v1alpha1", "default", "dynamographdeployments")
        assert missing.value.status == 404
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
        assert "nvidia.com" not in groups and "ray.io" in groups
        assert custom.list_namespaced_custom_object("ray.io", "v1", "default", "rayjobs")["items"] == []


def _namespaces(configuration: client.Configuration) -> list[str]:
    with client.ApiClient(configuration) as api:
        return [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]


def test_kubeconfig_loads_in_the_official_client(sandbox):
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(sandbox.kubeconfig), client_configuration=configuration)
    assert configuration.host == sandbox.api_url and sandbox.api_url.startswith("https://127.0.0.1:")
    assert "default" in _namespaces(configuration)
    assert yaml.safe_load(sandbox.kubeconfig.read_text())["current-context"] == "nrl-k8s-sandbox"


@pytest.mark.parametrize("with_token", [True, False], ids=["token", "no-token"])
def test_plain_http_with_a_bearer_token_is_accepted(sandbox, tmp_path, with_token):
    doc = yaml.safe_load(sandbox.kubeconfig.read_text())
    doc["clusters"][0]["cluster"] = {"server": sandbox.api_url.replace("https://", "http://")}
    if not with_token:
        doc["users"][0]["user"] = {}
    plain = tmp_path / "kubeconfig"
    plain.write_text(yaml.safe_dump(doc))
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plain), client_configuration=configuration)
    if with_token:
        assert "default" in _namespaces(configuration)
    else:
        with pytest.raises(ApiException) as refused:
            _namespaces(configuration)
        assert refused.value.status == 401


GROUP_DGD = "nvidia.com"


def test_state_file_keeps_objects_across_restarts_and_their_services_follow(separate_sandbox, tmp_path):
    state = tmp_path / "state.json"
    rc, graph = unique("kept"), unique("kept")
    with separate_sandbox(state=state) as box, box.api_client() as api:
        custom = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", {
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": rc}, "spec": ray_cluster_spec(),
        })  # fmt: skip
        custom.create_namespaced_custom_object(GROUP_DGD, "v1alpha1", "default", "dynamographdeployments", dgd(graph))
        observe(custom.list_namespaced_custom_object, GROUP_DGD, "v1alpha1", "default", "dynamographdeployments",
                until=lambda o: field(o.get(graph), "status", "state") == "successful")  # fmt: skip
        first_dashboard = box.dashboard_url
    assert state.exists()

    with separate_sandbox(state=state) as box, box.api_client() as api:
        assert box.dashboard_url != first_dashboard
        ready = client.CustomObjectsApi(api).get_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", rc)
        assert field(ready, "status", "state") == "ready"
        eventually(lambda: proxy(api, "GET", "default", f"{rc}-head-svc:8265", "api/version")[0] == 200, what="new Ray head behind the restored Service")
        eventually(lambda: proxy(api, "GET", "default", f"{graph}-frontend:8000", "v1/models")[0] == 200, what="a new stub behind the restored DGD")


BAD_STATES = {
    "not-json": ("not json", 2, "is not a sandbox state file"),
    "not-a-dump": ('{"objects": 5}', 1, "exited during start-up"),
}


@pytest.mark.parametrize("content, code, message", BAD_STATES.values(), ids=BAD_STATES.keys())
def test_a_failed_start_reports_why_and_leaves_nothing_running(tmp_path, content, code, message):
    state = tmp_path / "state.json"
    state.write_text(content)
    directory = tmp_path / "box"
    result = nrl_k8s("sandbox", "up", "--control-plane", "simulated", "--dir", str(directory), "--state", str(state),
                     check=False)
    assert (result.returncode, result.stdout) == (code, "")
    assert message in result.stderr
    assert state.read_text() == content
    assert marked(directory.resolve()) == []
    assert not (directory / "daemon.pid").exists()
