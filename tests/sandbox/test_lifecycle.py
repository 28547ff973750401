"""`nrl-k8s sandbox up/down/status/fault` through the installed CLI, and the kubeconfig it writes."""

from __future__ import annotations

import base64
import collections
import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from operator_helpers import not_private, proxy, rayjob, served_deployment
from sandbox_harness import DEADLINE_S, eventually, nrl_k8s, observe, unique

from nrl_k8s_sandbox.faults import Faults
from nrl_k8s_sandbox.pids import BACKGROUND_NICE, alive, marked, read_pid, start_time, wait_gone


def test_starting_twice_is_refused(sandbox):
    result = nrl_k8s("sandbox", "up", "--dir", str(sandbox.dir), check=False)
    assert result.returncode == 1
    assert "already running" in result.stderr and str(sandbox.dir) in result.stderr
    assert result.stdout == ""


def test_status_reports_urls_pids_faults_and_objects(sandbox):
    report = json.loads(nrl_k8s("sandbox", "status", "--dir", str(sandbox.dir), "-o", "json").stdout)
    assert (report["running"], report["api_url"]) == (True, sandbox.api_url)
    assert {"daemon", "etcd", "kube-apiserver", "kuberay-operator", "kwok"} <= set(report["pids"])
    assert all(alive(pid) for pid in report["pids"].values())
    daemon = report["pids"].pop("daemon")  # everything it runs is in the background
    assert {name: os.getpriority(os.PRIO_PROCESS, pid) for name, pid in report["pids"].items()} == \
        dict.fromkeys(report["pids"], _background(daemon))
    assert report["faults"] == sandbox.faults
    assert report["versions"] == sandbox.info["versions"]
    assert set(report["objects"]) == {"pods", "services", "rayclusters", "rayjobs", "dynamographdeployments"}
    assert report["objects"]["pods"] >= 0
    text = nrl_k8s("sandbox", "status", "--dir", str(sandbox.dir)).stdout
    assert "running:    yes" in text and sandbox.api_url in text


def test_the_door_keeps_a_connection_alive_and_counts_every_request_on_it(sandbox):
    """As kube-apiserver keeps it: a list, a get (404) and a watch that runs out (``timeoutSeconds``)
    on one connection, each answered whole, each counted; then a watch's head comes before any event
    (a client blocks on it). Nothing else here asks for limitranges."""
    kubeconfig = yaml.safe_load(sandbox.kubeconfig.read_text())
    cluster, user = kubeconfig["clusters"][0]["cluster"], kubeconfig["users"][0]["user"]
    tls = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    server = urllib.parse.urlsplit(cluster["server"])
    before = sandbox.request_counts()
    connection = http.client.HTTPSConnection(server.hostname, server.port, context=tls, timeout=DEADLINE_S)
    base = "/api/v1/namespaces/default/limitranges"
    answers, sockets = [], []
    try:
        for path in (base, f"{base}/none", f"{base}?watch=1&timeoutSeconds=1"):
            connection.request("GET", path, headers={"Authorization": f"Bearer {user['token']}"})
            response = connection.getresponse()
            answers.append((response.status, response.will_close, response.read()[:1]))
            sockets.append(connection.sock)
        connection.request("GET", f"{base}?watch=1&timeoutSeconds={int(4 * DEADLINE_S)}",
                           headers={"Authorization": f"Bearer {user['token']}"})
        waiting = connection.getresponse()  # its head, or a timeout at DEADLINE_S
        answers.append((waiting.status, waiting.will_close, b""))
    finally:
        connection.close()
    assert answers == [(200, False, b"{"), (404, False, b"{"), (200, False, b""), (200, False, b"")]
    assert sockets[0] is not None and sockets == [sockets[0]] * 3
    after = sandbox.request_counts()
    assert {key: after.get(key, 0) - before.get(key, 0) for key in ("list limitranges", "get limitranges",
                                                                    "watch limitranges")} == \
        {"list limitranges": 1, "get limitranges": 1, "watch limitranges": 2}


def test_status_of_a_directory_with_no_sandbox(tmp_path):
    report = json.loads(nrl_k8s("sandbox", "status", "--dir", str(tmp_path), "-o", "json").stdout)
    assert report == {"dir": str(tmp_path), "running": False, "kubeconfig": str(tmp_path / "kubeconfig")}


def test_faults_are_set_and_cleared_on_the_running_sandbox(sandbox, api, sandbox_namespace):
    name = served_deployment(api, sandbox_namespace)
    ns = sandbox_namespace

    result = nrl_k8s("sandbox", "fault", "set", "proxy-forbidden", "--dir", str(sandbox.dir))
    assert "proxy-forbidden" in result.stderr
    try:
        assert proxy(api, "GET", ns, f"{name}:80", "")[0] == 403
        status = json.loads(nrl_k8s("sandbox", "status", "--dir", str(sandbox.dir), "-o", "json").stdout)
        assert status["faults"] == {**sandbox.faults, "proxy-forbidden": ""}
    finally:
        nrl_k8s("sandbox", "fault", "clear", "proxy-forbidden", "--dir", str(sandbox.dir))
    assert proxy(api, "GET", ns, f"{name}:80", "")[0] == 200


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


def _running_driver(box, tmp_path: Path, name: str | None = None, head_env: dict[str, str] | None = None) -> int:
    """Start RayJob ``name`` (its head container with ``head_env``) whose driver sleeps; return
    the driver's pid (found by its marker file)."""
    marker = tmp_path / f"driver-{unique('pid')}"
    name = name or unique("sleeper")
    job = rayjob(name, f"echo $$ > {marker}; exec sleep 600")
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["env"] = [{"name": key, "value": value} for key, value in (head_env or {}).items()]
    with box.api_client() as api:
        custom = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", job)
        observe(custom.list_namespaced_custom_object, "ray.io", "v1", "default", "rayjobs",
                field_selector=f"metadata.name={name}",
                until=lambda o: (o.get(name, {}).get("status") or {}).get("jobStatus") == "RUNNING")  # fmt: skip
    return int(eventually(lambda: marker.exists() and marker.read_text().strip(), what="driver pid file"))


def _descendants(roots: list[int]) -> set[int]:
    """``roots`` and every process started under them (by parent pid, from /proc)."""
    children = collections.defaultdict(list)
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        if stat:
            children[int(stat[stat.rindex(")") + 2 :].split()[1])].append(int(entry.name))
    found, todo = set(), list(roots)
    while todo:
        if (pid := todo.pop()) not in found:
            found.add(pid)
            todo += children[pid]
    return found


CRASHES = {"clean": False, "after-daemon-sigkill": True}


@pytest.mark.parametrize("kill_daemon", CRASHES.values(), ids=CRASHES.keys())
def test_down_stops_every_process_it_started(separate_sandbox, tmp_path, kill_daemon):
    users_tmp = tmp_path / "tmp"  # the temp dir of whoever runs `sandbox up`
    users_tmp.mkdir()
    with separate_sandbox(env={"TMPDIR": str(users_tmp)}) as box:
        driver = _running_driver(box, tmp_path)
        daemon = read_pid(box.dir / "daemon.pid")
        # and what they started: a Ray head's agents write a process title over their environment
        started = {pid: start_time(pid) for pid in _descendants(marked(box.dir))}
        assert {daemon, driver, *box.info["pids"].values()} <= set(started)
        if kill_daemon:
            os.kill(daemon, signal.SIGKILL)
            assert wait_gone([daemon], DEADLINE_S) == []
            assert alive(driver)  # the Ray head and its drivers outlive a crashed daemon: `down` finds them

        result = nrl_k8s("sandbox", "down", "--dir", str(box.dir))
        assert "stopped" in result.stderr
        assert [pid for pid, began in started.items() if alive(pid) and start_time(pid) == began] == []
        assert marked(box.dir) == []
        assert not any((box.dir / f).exists() for f in ("daemon.pid", "sandbox.json"))
        assert (box.dir / "kubeconfig").exists() and (box.dir / "daemon.log").exists()
        # Ray's logs and the drivers' Secret volumes can hold secret values: they go with the sandbox
        assert not Path(box.info["scratch"]).exists() and not (box.dir / "volumes").exists()
        left = not_private(box.dir)  # and what stays is private (test_private_files: while it runs)
        assert left == [], "\n".join(left)
        # what its processes put in a temp dir (Ray's dashboard a socket folder per head) went too
        assert list(users_tmp.iterdir()) == []


def test_sandboxes_started_side_by_side_share_the_copy_of_etcd_the_first_one_made(separate_sandbox, tmp_path):
    """The CRDs from files come with the copy of etcd the machine's first sandbox kept (seed.py): the
    same objects in every sandbox, older than it; Dynamo's CRD, with a sandbox's webhook, its own.
    Here two sandboxes start side by side on a machine with no copy yet (a binaries folder of its
    own, with no etcd-seeds/), as a new machine's first test run starts one per worker: one makes
    the copy while the other waits for it, never a copy of its own each."""
    from nrl_k8s_sandbox.controlplane import binaries

    installed, machine = binaries.find(), tmp_path / "control-plane"
    machine.mkdir()
    (machine / "bin").symlink_to(installed.bin)
    (machine / "crds").symlink_to(installed.crds)
    env = {**os.environ, binaries.ENV_BIN: str(machine)}

    def crd(box, name: str) -> dict:
        return json.loads(box.kubectl("get", "crd", name, "-o", "json").stdout)["metadata"]

    with contextlib.ExitStack() as started, ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: started.enter_context(separate_sandbox(env=env)), range(2))
        for name in ("rayjobs.ray.io", "stages.kwok.x-k8s.io"):
            assert crd(first, name)["uid"] == crd(second, name)["uid"]
        dgds = "dynamographdeployments.nvidia.com"
        assert crd(first, dgds)["uid"] != crd(second, dgds)["uid"]
        made = [(crd(box, "rayjobs.ray.io")["creationTimestamp"], crd(box, dgds)["creationTimestamp"])
                for box in (first, second)]
        # the copy is older than the sandbox that took it (its maker's own CRD may share its second)
        assert all(copied <= own for copied, own in made) and any(copied < own for copied, own in made), made
    assert len([seed for seed in (machine / "etcd-seeds").iterdir() if (seed / "served.json").is_file()]) == 1


# Imported by every Python process of the Ray head (its container's PYTHONPATH): the first Ray
# agent to start stalls 40 s, as on a loaded machine, so Ray's raylet aborts that first head start.
SLOW_FIRST_AGENT = """
import os, sys, time
if sys.argv[:1] and sys.argv[0].endswith(("dashboard/agent.py", "runtime_env/agent/main.py")):
    try:
        os.close(os.open(os.environ["NRL_K8S_TEST_SLOW_ONCE"], os.O_CREAT | os.O_EXCL))
        time.sleep(40)
    except FileExistsError:
        pass
"""


def test_a_ray_head_that_aborts_its_start_up_is_started_again(sandbox, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(SLOW_FIRST_AGENT)
    env = {"PYTHONPATH": str(tmp_path), "NRL_K8S_TEST_SLOW_ONCE": str(tmp_path / "slowed")}
    name = unique("aborts")
    try:
        driver = _running_driver(
            sandbox, tmp_path, name, head_env=env
        )  # jobs run: the head is up, not dying behind a ready dashboard
        assert alive(driver) and (tmp_path / "slowed").exists()
        # the head started at the daemon's priority; ready, it went to the background, its jobs with it
        assert os.getpriority(os.PRIO_PROCESS, driver) == _background(read_pid(sandbox.dir / "daemon.pid"))
        log = (sandbox.dir / "daemon.log").read_text()
        assert re.search(rf"the Ray head of default/{name}-\S+ exited during start-up \(attempt 1 of 3\)", log), log[
            -3000:
        ]
    finally:
        with sandbox.api_client() as api:  # its cluster goes with it, and the sleeping driver with the head
            client.CustomObjectsApi(api).delete_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", name)


def _background(daemon: int) -> int:
    return min(19, os.getpriority(os.PRIO_PROCESS, daemon) + BACKGROUND_NICE)


def _namespaces(configuration: client.Configuration) -> list[str]:
    with client.ApiClient(configuration) as api:
        return [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]


def test_kubeconfig_loads_in_the_official_client(sandbox):
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(sandbox.kubeconfig), client_configuration=configuration)
    assert configuration.host == sandbox.api_url and sandbox.api_url.startswith("https://127.0.0.1:")
    assert "default" in _namespaces(configuration)
    assert yaml.safe_load(sandbox.kubeconfig.read_text())["current-context"] == "nrl-k8s-sandbox"


@pytest.mark.parametrize("user", [{"token": "not-the-token"}, {}], ids=["wrong-token", "no-token"])
def test_a_request_without_the_users_token_is_refused(sandbox, tmp_path, user):
    doc = yaml.safe_load(sandbox.kubeconfig.read_text())
    doc["users"][0]["user"] = user
    other = tmp_path / "kubeconfig"
    other.write_text(yaml.safe_dump(doc))
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(other), client_configuration=configuration)
    with pytest.raises(ApiException) as refused:
        _namespaces(configuration)
    assert refused.value.status in (401, 403)  # anonymous auth is off: 401; a client without a token too


def test_plain_http_is_not_served(sandbox):
    import urllib.error
    import urllib.request

    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(sandbox.api_url.replace("https://", "http://") + "/version", timeout=DEADLINE_S)


BROKEN = {"etcd": "exit 3", "kuberay-operator": "exit 4"}


@pytest.mark.parametrize("binary", BROKEN, ids=BROKEN.keys())
def test_a_failed_start_reports_why_and_leaves_nothing_running(tmp_path, binary):
    """A control-plane binary that dies at start: exit 1 naming the log, and no process left behind."""
    built = Path(os.environ["NRL_K8S_CONTROL_PLANE_BIN"])
    broken = tmp_path / "bin"
    shutil.copytree(built, broken, symlinks=True, ignore=shutil.ignore_patterns("bin"))
    (broken / "bin").mkdir()
    for path in (built / "bin").iterdir():
        (broken / "bin" / path.name).symlink_to(path)
    (broken / "bin" / binary).unlink()
    (broken / "bin" / binary).write_text(f"#!/bin/sh\n{BROKEN[binary]}\n")
    (broken / "bin" / binary).chmod(0o700)
    directory = tmp_path / "box"
    result = nrl_k8s("sandbox", "up", "--dir", str(directory), check=False,
                     env={"NRL_K8S_CONTROL_PLANE_BIN": str(broken)})
    assert (result.returncode, result.stdout) == (1, "")
    assert "exited during start-up" in result.stderr and binary in result.stderr
    assert marked(directory.resolve()) == []
    assert not (directory / "daemon.pid").exists()
