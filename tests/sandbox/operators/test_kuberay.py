"""The simulated KubeRay operator against a real `sandbox up`, driven with the official client."""

from __future__ import annotations

import json
from functools import partial

import httpx
import pytest
from operator_helpers import condition, field, proxy, ray_cluster_spec, rayjob
from sandbox_harness import INHERITED_ENV, Gate, History, eventually, observe, unique

from nrl_k8s.sandbox.operators.base import parse_time

NS = "default"
K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String
TERMINAL = ("Complete", "Failed")


@pytest.fixture(scope="module")
def rayjobs(custom):
    return partial(custom.list_namespaced_custom_object, "ray.io", "v1", NS, "rayjobs")


@pytest.fixture(scope="module")
def rayclusters(custom):
    return partial(custom.list_namespaced_custom_object, "ray.io", "v1", NS, "rayclusters")


def create(custom, plural: str, body: dict) -> dict:
    return custom.create_namespaced_custom_object("ray.io", "v1", NS, plural, body)


def ray_job(sandbox, job_id: str) -> dict | None:
    """The job as the real (shared) Ray dashboard reports it, stored under its id scoped to its
    RayCluster (``head_proxy.scoped``); None: unknown there."""
    jobs = httpx.get(f"{sandbox.dashboard_url}/api/jobs/", trust_env=False).raise_for_status().json()
    return next((j for j in jobs if (j.get("submission_id") or "").endswith(f"--{job_id}")), None)


def status_of(name: str, *path: str):
    return lambda objects: field(objects.get(name), "status", *path)


def test_rayjob_runs_its_entrypoint_on_the_real_ray_head_then_its_cluster_is_garbage_collected(
    sandbox, core, custom, rayjobs, rayclusters, tmp_path
):
    name = unique("hello")
    proof, gate = tmp_path / "ran.txt", Gate(tmp_path)
    entrypoint = gate.entrypoint(f"echo ran-on-ray ${INHERITED_ENV[0]} $RAY_USAGE_STATS_ENABLED > {proof}; echo driver-output")
    create(custom, "rayjobs", rayjob(name, entrypoint))

    job = observe(rayjobs, field_selector=f"metadata.name={name}", until=lambda o: status_of(name, "jobStatus")(o) == "RUNNING")[name]
    status = job["status"]
    assert status["jobDeploymentStatus"] == "Running"
    assert status["rayClusterName"].startswith(f"{name}-") and len(status["rayClusterName"]) == len(name) + 6
    assert set(status["rayClusterName"][-5:] + status["jobId"][-5:]) <= set(K8S_ALPHABET)
    assert status["jobId"].startswith(f"{name}-")
    cluster = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", status["rayClusterName"])
    owner = cluster["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("RayJob", name, job["metadata"]["uid"], True)
    assert cluster["status"]["state"] == "ready"
    cluster_name = cluster["metadata"]["name"]
    owned = f"{cluster_name}-owned"
    core.create_namespaced_config_map(NS, {
        "metadata": {"name": owned, "ownerReferences": [{
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster_name, "uid": cluster["metadata"]["uid"],
        }]},
        "data": {"k": "v"},
    })  # fmt: skip
    gate.open()

    done = observe(rayjobs, field_selector=f"metadata.name={name}", until=lambda o: status_of(name, "jobDeploymentStatus")(o) in TERMINAL)
    status = done[name]["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"], status["succeeded"], status["failed"]) == ("Complete", "SUCCEEDED", 1, 0)
    assert status["startTime"] <= status["endTime"]
    assert proof.read_text() == f"ran-on-ray {INHERITED_ENV[1]} 0\n"
    real = ray_job(sandbox, status["jobId"])
    assert real["status"] == "SUCCEEDED"
    logs = httpx.get(f"{sandbox.dashboard_url}/api/jobs/{real['submission_id']}/logs", trust_env=False).json()["logs"]
    assert "driver-output" in logs

    observe(rayclusters, field_selector=f"metadata.name={cluster_name}", until=lambda o: not o)
    observe(core.list_namespaced_pod, NS, label_selector=f"ray.io/cluster={cluster_name}", until=lambda o: not o)
    observe(core.list_namespaced_service, NS, field_selector=f"metadata.name={cluster_name}-head-svc", until=lambda o: not o)
    observe(core.list_namespaced_config_map, NS, field_selector=f"metadata.name={owned}", until=lambda o: not o)


def test_raycluster_applied_directly_gets_pods_service_and_ready_status(core, custom, rayclusters):
    name = unique("rc")
    spec = ray_cluster_spec(workers=2)
    spec["workerGroupSpecs"][0]["numOfHosts"] = 2
    created = create(custom, "rayclusters", {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name}, "spec": spec})

    cluster = observe(rayclusters, field_selector=f"metadata.name={name}", until=lambda o: status_of(name, "state")(o) == "ready")[name]
    status = cluster["status"]
    assert condition(cluster, "HeadPodReady")["status"] == "True"
    assert condition(cluster, "RayClusterProvisioned")["status"] == "True"
    assert status["head"]["serviceName"] == f"{name}-head-svc"
    assert (status["desiredWorkerReplicas"], status["readyWorkerReplicas"]) == (4, 4)

    pods = json.loads(core.list_namespaced_pod(NS, label_selector=f"ray.io/cluster={name}", _preload_content=False).data)["items"]
    kinds = sorted((p["metadata"]["labels"]["ray.io/node-type"], p["metadata"]["labels"]["ray.io/group"]) for p in pods)
    assert kinds == [("head", "headgroup")] + [("worker", "workers")] * 4
    assert status["head"]["podName"] in [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["status"]["phase"] == "Running"
        assert all(c["ready"] for c in pod["status"]["containerStatuses"])
        assert pod["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
        assert pod["metadata"]["ownerReferences"][0]["controller"] is True

    service = core.read_namespaced_service(f"{name}-head-svc", NS)
    assert {p.name: p.port for p in service.spec.ports} == {"dashboard": 8265, "client": 10001, "gcs-server": 6379}

    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", name)
    observe(core.list_namespaced_pod, NS, label_selector=f"ray.io/cluster={name}", until=lambda o: not o)


def test_service_proxy_reaches_the_real_ray_dashboard(sandbox, api, custom, rayclusters):
    name = unique("proxy")
    create(custom, "rayclusters", {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name}, "spec": ray_cluster_spec()})
    observe(rayclusters, field_selector=f"metadata.name={name}", until=lambda o: status_of(name, "state")(o) == "ready")

    code, body = proxy(api, "GET", NS, f"{name}-head-svc:8265", "api/version")
    direct = httpx.get(f"{sandbox.dashboard_url}/api/version", trust_env=False).json()
    assert code == 200
    assert json.loads(body)["session_name"] == direct["session_name"]
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", name)


def test_miss_driver_submission_stalls_running_until_the_job_is_submitted_by_hand(sandbox, api, custom, rayjobs, tmp_path):
    name = unique("stall")
    proof = tmp_path / "rescued.txt"
    with sandbox.fault("miss-driver-submission"), History(rayjobs, field_selector=f"metadata.name={name}") as history:
        create(custom, "rayjobs", rayjob(name, f"echo rescued > {proof}"))
        history.wait(lambda h: status_of(name, "jobDeploymentStatus")(h.objects()) == "Running", what="Running")
        status = history.objects()[name]["status"]
        # The operator polls about once a second; over several polls nothing is submitted.
        history.holds(lambda o: status_of(name, "jobDeploymentStatus")(o) == "Running" and not status_of(name, "jobStatus")(o),
                      seconds=3)  # fmt: skip
        assert ray_job(sandbox, status["jobId"]) is None

        body = {"entrypoint": f"echo rescued > {proof}", "submission_id": status["jobId"]}
        code, reply = proxy(api, "POST", NS, f"{status['rayClusterName']}-head-svc:8265", "api/jobs/", body)
        assert code == 200, reply  # through the cluster's head Service, as nrl-k8s's rescue submits
        done = observe(rayjobs, field_selector=f"metadata.name={name}", until=lambda o: status_of(name, "jobDeploymentStatus")(o) in TERMINAL)
    assert done[name]["status"]["jobDeploymentStatus"] == "Complete"
    assert proof.read_text() == "rescued\n"


def test_active_deadline_stops_the_ray_job_and_fails_the_rayjob(sandbox, custom, rayjobs, rayclusters, tmp_path):
    name = unique("deadline")
    create(custom, "rayjobs", rayjob(name, Gate(tmp_path).entrypoint(), activeDeadlineSeconds=3600))
    observe(rayjobs, field_selector=f"metadata.name={name}", until=lambda o: status_of(name, "jobStatus")(o) == "RUNNING")
    # Lowered only once the driver runs: a short deadline set up front could pass before the
    # driver is even submitted on a slow machine, and then no Ray job would be stopped.
    custom.patch_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", name, {"spec": {"activeDeadlineSeconds": 1}},
                                          _content_type="application/merge-patch+json")  # fmt: skip

    done = observe(rayjobs, field_selector=f"metadata.name={name}", until=lambda o: status_of(name, "jobDeploymentStatus")(o) in TERMINAL)
    status = done[name]["status"]
    assert (status["jobDeploymentStatus"], status["reason"], status["failed"]) == ("Failed", "DeadlineExceeded", 1)
    eventually(lambda: (ray_job(sandbox, status["jobId"]) or {}).get("status") == "STOPPED", what="Ray job STOPPED")
    observe(rayclusters, field_selector=f"metadata.name={status['rayClusterName']}", until=lambda o: not o)


def test_deleting_the_raycluster_stops_its_running_job(sandbox, custom, rayjobs, tmp_path):
    name = unique("orphan")
    create(custom, "rayjobs", rayjob(name, Gate(tmp_path).entrypoint(), shutdownAfterJobFinishes=False))
    job = observe(rayjobs, field_selector=f"metadata.name={name}", until=lambda o: status_of(name, "jobStatus")(o) == "RUNNING")
    status = job[name]["status"]

    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", status["rayClusterName"])
    done = observe(rayjobs, field_selector=f"metadata.name={name}", until=lambda o: status_of(name, "jobDeploymentStatus")(o) in TERMINAL)
    status = done[name]["status"]
    # KubeRay ends a RayJob whose Ray job was STOPPED Complete, and counts no success.
    assert (status["jobDeploymentStatus"], status["jobStatus"], status["succeeded"], status["failed"]) == ("Complete", "STOPPED", 0, 0)
    assert ray_job(sandbox, status["jobId"])["status"] == "STOPPED"


def phases(history: History, name: str) -> list[str]:
    """The ``jobDeploymentStatus`` values the RayJob went through, from its first event on."""
    seen: list[str] = []
    for _, obj in history.events(name):
        phase = field(obj, "status", "jobDeploymentStatus")
        if phase and (not seen or seen[-1] != phase):
            seen.append(phase)
    return seen


def merge_patch(custom, name: str, spec: dict) -> None:
    custom.patch_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", name, {"spec": spec},
                                          _content_type="application/merge-patch+json")  # fmt: skip


def test_interactive_mode_waits_for_spec_job_id_then_tracks_the_job_submitted_under_it(api, custom, rayjobs, rayclusters, tmp_path):
    name, submission = unique("interactive"), unique("driver")
    proof, gate = tmp_path / "ran.txt", Gate(tmp_path)
    with History(rayjobs, field_selector=f"metadata.name={name}") as history:
        create(custom, "rayjobs", rayjob(name, "unused", submissionMode="InteractiveMode"))
        history.wait(lambda h: status_of(name, "jobDeploymentStatus")(h.objects()) == "Waiting", what="Waiting")
        status = history.objects()[name]["status"]
        cluster = status["rayClusterName"]
        assert cluster.startswith(f"{name}-") and status["startTime"]
        assert status["dashboardURL"] == f"{cluster}-head-svc.{NS}.svc.cluster.local:8265"
        assert not status.get("jobId") and not status.get("jobStatus")
        assert custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", cluster)["status"]["state"] == "ready"
        # KubeRay submits nothing of its own: over several of its polls the RayJob stays
        # Waiting and the cluster's head has no job.
        history.holds(lambda o: status_of(name, "jobDeploymentStatus")(o) == "Waiting", seconds=3)
        code, listed = proxy(api, "GET", NS, f"{cluster}-head-svc:8265", "api/jobs/")
        assert (code, json.loads(listed)) == (200, [])

        body = {"entrypoint": gate.entrypoint(f"echo interactive > {proof}"), "submission_id": submission}
        code, reply = proxy(api, "POST", NS, f"{cluster}-head-svc:8265", "api/jobs/", body)
        assert code == 200, reply
        merge_patch(custom, name, {"jobId": submission})
        history.wait(lambda h: status_of(name, "jobStatus")(h.objects()) == "RUNNING", what="the submitted job RUNNING")
        assert status_of(name, "jobId")(history.objects()) == submission
        gate.open()
        history.wait(lambda h: status_of(name, "jobDeploymentStatus")(h.objects()) in TERMINAL, what="the RayJob ending")
    status = history.objects()[name]["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"], status["succeeded"], status["failed"]) == ("Complete", "SUCCEEDED", 1, 0)
    assert phases(history, name) == ["Initializing", "Waiting", "Running", "Complete"]
    assert proof.read_text() == "interactive\n"
    observe(rayclusters, field_selector=f"metadata.name={cluster}", until=lambda o: not o)  # shutdownAfterJobFinishes


def go_time(stamp: str) -> str:
    """How KubeRay's messages print a time (Go's ``%v`` of a ``metav1.Time`` in UTC)."""
    return stamp.replace("T", " ").replace("Z", " +0000 UTC")


def test_pre_running_deadline_fails_a_waiting_rayjob_and_its_cluster_is_deleted(custom, rayjobs, rayclusters):
    name = unique("prerun")
    with History(rayjobs, field_selector=f"metadata.name={name}") as history:
        create(custom, "rayjobs", rayjob(name, "unused", submissionMode="InteractiveMode"))
        history.wait(lambda h: status_of(name, "jobDeploymentStatus")(h.objects()) == "Waiting", what="Waiting")
        merge_patch(custom, name, {"preRunningDeadlineSeconds": 1})  # set while Waiting: due at once or within a second
        history.wait(lambda h: status_of(name, "jobDeploymentStatus")(h.objects()) in TERMINAL, what="the RayJob failing")
    status = history.objects()[name]["status"]
    assert (status["jobDeploymentStatus"], status["reason"], status["failed"], status["succeeded"]) == (
        "Failed", "PreRunningDeadlineExceeded", 1, 0)
    assert status["message"] == (f"The RayJob has passed the preRunningDeadlineSeconds. StartTime: {go_time(status['startTime'])}. "
                                 "PreRunningDeadlineSeconds: 1")
    assert phases(history, name) == ["Initializing", "Waiting", "Failed"]
    observe(rayclusters, field_selector=f"metadata.name={status['rayClusterName']}", until=lambda o: not o)


def test_pre_running_deadline_set_at_creation_fires_on_its_own_timer(custom, rayjobs):
    name = unique("prerun")
    with History(rayjobs, field_selector=f"metadata.name={name}") as history:
        create(custom, "rayjobs", rayjob(name, "unused", submissionMode="InteractiveMode", preRunningDeadlineSeconds=3))
        history.wait(lambda h: status_of(name, "jobDeploymentStatus")(h.objects()) in TERMINAL, what="the RayJob failing")
    status = history.objects()[name]["status"]
    assert (status["jobDeploymentStatus"], status["reason"]) == ("Failed", "PreRunningDeadlineExceeded")
    assert parse_time(status["endTime"]) - parse_time(status["startTime"]) >= 3  # never before its deadline
    assert "Running" not in phases(history, name)


def test_suspend_deletes_the_cluster_and_resume_starts_over_on_a_new_one(sandbox, custom, rayjobs, rayclusters, tmp_path):
    name, gate = unique("suspend"), Gate(tmp_path)
    with History(rayjobs, field_selector=f"metadata.name={name}") as history:
        create(custom, "rayjobs", rayjob(name, gate.entrypoint()))
        history.wait(lambda h: status_of(name, "jobStatus")(h.objects()) == "RUNNING", what="RUNNING")
        first = history.objects()[name]["status"]
        merge_patch(custom, name, {"suspend": True})
        history.wait(lambda h: status_of(name, "jobDeploymentStatus")(h.objects()) == "Suspended", what="Suspended")
        suspended = history.objects()[name]["status"]
        assert [suspended.get(k) for k in ("rayClusterName", "jobId", "jobStatus", "dashboardURL")] == ["", "", "", ""]
        assert not custom.list_namespaced_custom_object("ray.io", "v1", NS, "rayclusters",
                                                        field_selector=f"metadata.name={first['rayClusterName']}")["items"]
        eventually(lambda: (ray_job(sandbox, first["jobId"]) or {}).get("status") == "STOPPED", what="the first Ray job STOPPED")

        merge_patch(custom, name, {"suspend": False})
        history.wait(lambda h: status_of(name, "jobStatus")(h.objects()) == "RUNNING", what="RUNNING again")
        second = history.objects()[name]["status"]
        assert second["rayClusterName"] != first["rayClusterName"] and second["jobId"] != first["jobId"]
        gate.open()
        history.wait(lambda h: status_of(name, "jobDeploymentStatus")(h.objects()) in TERMINAL, what="the RayJob ending")
    assert status_of(name, "jobStatus")(history.objects()) == "SUCCEEDED"
    assert phases(history, name) == ["Initializing", "Running", "Suspending", "Suspended", "Initializing", "Running", "Complete"]


def test_a_rayjob_created_suspended_never_gets_a_cluster(custom, rayjobs, rayclusters):
    name = unique("parked")
    with History(rayclusters, label_selector=f"ray.io/originated-from-cr-name={name}") as clusters, \
            History(rayjobs, field_selector=f"metadata.name={name}") as history:  # fmt: skip
        create(custom, "rayjobs", rayjob(name, "true", suspend=True))
        history.wait(lambda h: status_of(name, "jobDeploymentStatus")(h.objects()) == "Suspended", what="Suspended")
        history.holds(lambda o: status_of(name, "jobDeploymentStatus")(o) == "Suspended", seconds=2)
    assert phases(history, name) == ["Initializing", "Suspending", "Suspended"]
    assert clusters.events() == []
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", name)


INVALID_RAYJOBS = {
    "name-too-long": (48, {}, "The RayJob metadata is invalid: RayJob name should be no more than 47 characters"),
    "ttl-without-shutdown": (None, {"shutdownAfterJobFinishes": False, "ttlSecondsAfterFinished": 30},
                             "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false cannot have "
                             "TTLSecondsAfterFinished"),
}


@pytest.mark.parametrize("length, spec, message", INVALID_RAYJOBS.values(), ids=INVALID_RAYJOBS.keys())
def test_an_invalid_rayjob_ends_validation_failed_without_a_cluster(custom, rayjobs, rayclusters, length, spec, message):
    name = unique("invalid").ljust(length or 0, "x")
    body = rayjob(name, "true", **spec)
    with History(rayclusters, label_selector=f"ray.io/originated-from-cr-name={name}") as clusters:
        create(custom, "rayjobs", body)
        done = observe(rayjobs, field_selector=f"metadata.name={name}",
                       until=lambda o: status_of(name, "jobDeploymentStatus")(o) == "ValidationFailed")
    status = done[name]["status"]
    assert (status["reason"], status["message"]) == ("ValidationFailed", message)
    assert not status.get("rayClusterName") and clusters.events() == []
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", name)


def test_a_rayjob_gets_a_head_service_of_its_own_and_takes_over_one_of_that_name(api, core, custom, rayjobs, tmp_path):
    name, other, gate = unique("svc"), unique("svc"), Gate(tmp_path)
    service = f"{name}-head-svc"
    core.create_namespaced_service(NS, {"metadata": {"name": service}, "spec": {
        "selector": {"ray.io/cluster": "another-cluster", "ray.io/node-type": "head"}, "ports": [{"name": "dashboard", "port": 8265}]}})  # fmt: skip
    for job in (name, other):
        create(custom, "rayjobs", rayjob(job, gate.entrypoint()))
    running = observe(rayjobs, until=lambda o: all(status_of(j, "jobStatus")(o) == "RUNNING" for j in (name, other)))
    cluster = running[name]["status"]["rayClusterName"]
    observe(core.list_namespaced_service, NS, field_selector=f"metadata.name={service}",
            until=lambda o: field(o.get(service), "spec", "selector", "ray.io/cluster") == cluster)  # KubeRay updates it
    created = observe(core.list_namespaced_service, NS, field_selector=f"metadata.name={other}-head-svc", until=bool)[f"{other}-head-svc"]
    owner = created["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("RayJob", other)
    assert created["metadata"]["labels"]["ray.io/originated-from-cr-name"] == other
    # Through it, the dashboard of the RayJob's cluster: its job only.
    code, body = proxy(api, "GET", NS, f"{name}-head-svc:8265", "api/jobs/")
    assert code == 200 and [j["submission_id"] for j in json.loads(body)] == [running[name]["status"]["jobId"]]
    gate.open()
