"""``Kube.logs`` (pods/log, streamed) and the pod report a failed wait carries (``diagnose``)."""

from __future__ import annotations

import pytest
from sandbox_harness import DEADLINE_S

from nrl_k8s.errors import ApiError, ResourceFailed, WaitTimeout
from nrl_k8s.kinds import pod
from nrl_k8s.kinds.base import Failed, Pending
from nrl_k8s.kinds.core import CONFIGMAP, EVENT
from nrl_k8s.sandbox.operators import pods as simulated


def make_pod(kube, name: str, *, state: str = "running", labels: dict | None = None, owner: dict | None = None) -> dict:
    manifest = {"metadata": {"name": name, "labels": labels or {}, "ownerReferences": [owner] if owner else []},
                "spec": {"containers": [{"name": "main", "image": "img:1"}]}}
    made = kube.create(pod.KIND, manifest)
    status = {"running": simulated.running, "creating": simulated.creating, "unschedulable": lambda _: simulated.unschedulable()}
    kube.patch_status(pod.KIND, name, {"status": status[state](manifest)})
    return made


def owned_by(uid: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": uid, "controller": True}


def test_logs_reads_and_tails_a_container(kube, sandbox):
    output = sandbox.server.pod_logs.stub_output("uid-read")
    output.write("one\ntwo\nthree")
    make_pod(kube, "web-1", owner=owned_by("uid-read"))
    assert "".join(kube.logs("web-1")) == "one\ntwo\nthree\n"
    assert "".join(kube.logs("web-1", container="main", tail_lines=2)) == "two\nthree\n"


def test_follow_yields_output_as_it_comes_and_ends_with_the_pod(kube, sandbox):
    output = sandbox.server.pod_logs.stub_output("uid-follow")
    output.write("started")
    make_pod(kube, "web-2", owner=owned_by("uid-follow"))
    chunks = kube.logs("web-2", follow=True)
    assert next(chunks) == "started\n"
    output.write("ünïcode line")
    assert next(chunks) == "ünïcode line\n"
    kube.delete(pod.KIND, "web-2")
    assert list(chunks) == []


def test_a_container_not_started_is_the_servers_400(kube):
    make_pod(kube, "waiting", state="creating")
    with pytest.raises(ApiError) as err:
        "".join(kube.logs("waiting"))
    assert err.value.status == 400 and 'is waiting to start: ContainerCreating' in err.value.message


def _never_ready(obj):
    return Pending("still starting") if obj is not None else Pending("absent")


def test_a_timed_out_wait_names_its_failing_pods_reasons_and_events(kube):
    kube.create(CONFIGMAP, {"metadata": {"name": "app"}, "data": {}})
    make_pod(kube, "app-1", state="unschedulable", labels={"app": "a"})
    make_pod(kube, "app-2", state="creating", labels={"app": "a"})
    make_pod(kube, "app-3", labels={"app": "a"})  # ready: not reported
    for name, kind, reason, message in [("app-1", "Pod", "FailedScheduling", "0/1 nodes: insufficient nvidia.com/gpu"),
                                        ("app-1", "Pod", "Unrelated", "not a warning"),
                                        ("app", "ConfigMap", "FailedCreate", "quota exceeded")]:
        kube.create(EVENT, {"metadata": {"name": f"{name}.{reason.lower()}"}, "reason": reason, "message": message,
                            "type": "Normal" if reason == "Unrelated" else "Warning", "count": 2,
                            "involvedObject": {"kind": kind, "name": name, "namespace": kube.namespace}})
    with pytest.raises(WaitTimeout) as err:
        kube.wait(CONFIGMAP, _never_ready, name="app", timeout_s=0.1, pods="app=a")
    lines = err.value.message.splitlines()
    assert lines[0].startswith('timed out after 0s waiting for ConfigMap "app"; last state: still starting')
    assert lines[1:] == [
        "  ConfigMap app: Warning FailedCreate (x2): quota exceeded",
        f"  pod app-1: Unschedulable: {simulated.UNSCHEDULABLE}",
        "    Warning FailedScheduling (x2): 0/1 nodes: insufficient nvidia.com/gpu",
        "  pod app-2: container main: ContainerCreating",
    ]


def test_a_failed_wait_with_no_pods_says_so_and_a_forbidden_report_never_hides_the_error(kube, sandbox):
    kube.create(CONFIGMAP, {"metadata": {"name": "gone"}, "data": {}})
    with pytest.raises(ResourceFailed) as err:
        kube.wait(CONFIGMAP, lambda obj: Failed("broken"), name="gone", timeout_s=DEADLINE_S, pods="app=none")
    assert err.value.message == 'ConfigMap "gone": broken\n  no pods yet (app=none)'
    sandbox.server.faults.set("rbac-deny", "list:pods")
    with pytest.raises(ResourceFailed) as err:
        kube.wait(CONFIGMAP, lambda obj: Failed("broken"), name="gone", timeout_s=DEADLINE_S, pods="app=none")
    assert err.value.message.startswith('ConfigMap "gone": broken\n  (could not read its pods and events: forbidden')
