"""``Kube.logs`` (pods/log, streamed) and the pod report a failed wait carries (``diagnose``).

The logged pods are a Job's: the sandbox's local kubelet runs their command as a process on this
machine and kwok's kubelet server streams its output, as the API server asks it to. The reported
pods are as the real scheduler leaves them: unschedulable (more GPUs than any node has), gated
(``schedulingGates``), or Running and ready (kwok plays them).
"""

from __future__ import annotations

import re

import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, Gate, eventually, observe

from nrl_k8s.errors import ApiError, ResourceFailed, WaitTimeout
from nrl_k8s.kinds import pod
from nrl_k8s.kinds.base import Kind
from nrl_k8s.kinds.core import CONFIGMAP, EVENT
from nrl_k8s.kinds.readiness import Failed, Pending, Ready, condition

JOB = Kind("batch", "v1", "jobs", "Job")


def run_job(kube, name: str, script: str) -> str:
    """Run ``sh -c script`` as the one pod of Job ``name``; its pod's name once the pod runs."""
    template = {"metadata": {"labels": {"app": name}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                                                                     "command": ["sh", "-c", script]}]}}
    kube.create(JOB, {"metadata": {"name": name}, "spec": {"backoffLimit": 0, "template": template}})

    def running(pods: list[dict]):
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        return Ready() if "Running" in phases or "Succeeded" in phases else Pending(f"pods {phases}")

    (found,) = kube.wait(pod.KIND, running, label_selector=f"app={name}", timeout_s=DEADLINE_S)
    return found["metadata"]["name"]


def logged(kube, name: str, text: str) -> str:
    """Wait until the pod's log (from the start) reads ``text``; return it."""
    return eventually(lambda: (log := "".join(kube.logs(name))) == text and log, what=f"the log of {name} = {text!r}")


def until_line(chunks) -> str:
    """The chunks of a followed log up to the end of a line."""
    text = ""
    while not text.endswith("\n"):
        text += next(chunks)
    return text


def test_logs_reads_and_tails_a_container(kube):
    name = run_job(kube, "web-1", "printf 'one\\ntwo\\nthree\\n'")
    assert logged(kube, name, "one\ntwo\nthree\n")
    assert "".join(kube.logs(name, container="main", tail_lines=2)) == "two\nthree\n"


def test_follow_yields_output_as_it_comes(kube, tmp_path):
    """Each line arrives while the container still runs: the second is printed only once the
    first has been read. (kwok's kubelet keeps a followed log open after the container or the pod
    ends, so the end of the stream is not tested here.)"""
    gate = Gate(tmp_path)
    name = run_job(kube, "web-2", "echo started; " + gate.entrypoint("echo 'ünïcode line'"))
    logged(kube, name, "started\n")
    chunks = kube.logs(name, follow=True)
    try:
        assert until_line(chunks) == "started\n"
        gate.open()
        assert until_line(chunks) == "ünïcode line\n"
    finally:
        chunks.close()


def test_a_container_the_pod_lacks_is_the_servers_400(kube):
    name = run_job(kube, "web-3", "echo hi")
    with pytest.raises(ApiError) as err:
        "".join(kube.logs(name, container="sidecar"))
    assert err.value.status == 400 and "sidecar" in err.value.message


def _never_ready(obj):
    return Pending("still starting") if obj is not None else Pending("absent")


def make_pod(kube, name: str, spec: dict | None = None) -> dict:
    return kube.create(pod.KIND, {"metadata": {"name": name, "labels": {"app": "a"}},
                                  "spec": {"containers": [{"name": "main", "image": "img:1"}], **(spec or {})}})


def scheduled(status: str):
    """Readiness: the pod's PodScheduled condition has ``status``."""
    def judge(obj: dict | None):
        found = condition(obj or {}, "PodScheduled") or {}
        return Ready() if found.get("status") == status else Pending(f"PodScheduled {found.get('status')}")
    return judge


def test_a_timed_out_wait_names_its_failing_pods_reasons_and_events(kube, sandbox):
    kube.create(CONFIGMAP, {"metadata": {"name": "app"}, "data": {}})
    too_big = {"containers": [{"name": "main", "image": "img:1", "resources": {"limits": {"nvidia.com/gpu": "1000"}}}]}
    make_pod(kube, "app-1", too_big)  # the scheduler: Unschedulable, and a FailedScheduling event
    make_pod(kube, "app-2", {"schedulingGates": [{"name": "example.com/hold"}]})  # SchedulingGated
    make_pod(kube, "app-3")  # kwok runs it: ready, not reported
    # two Events of one reason and message (as a retrying controller writes them) are one line
    quota = ("app", "ConfigMap", "FailedCreate", "quota exceeded")
    for i, (name, kind, reason, message, count) in enumerate([("app-1", "Pod", "Unrelated", "not a warning", 2),
                                                              (*quota, 2), (*quota, 3)]):
        kube.create(EVENT, {"metadata": {"name": f"{name}.{i}"}, "reason": reason, "message": message,
                            "type": "Normal" if reason == "Unrelated" else "Warning", "count": count,
                            "involvedObject": {"kind": kind, "name": name, "namespace": kube.namespace}})
    unschedulable = condition(
        kube.wait(pod.KIND, scheduled("False"), name="app-1", timeout_s=DEADLINE_S), "PodScheduled"
    )
    gated = condition(kube.get(pod.KIND, "app-2"), "PodScheduled")
    kube.wait(pod.KIND, pod.readiness, name="app-3", timeout_s=DEADLINE_S)
    with sandbox.api_client() as api:
        observe(client.CoreV1Api(api).list_namespaced_event, kube.namespace, field_selector="involvedObject.name=app-1",
                until=lambda events: any(e["reason"] == "FailedScheduling" for e in events.values()))
    with pytest.raises(WaitTimeout) as err:
        kube.wait(CONFIGMAP, _never_ready, name="app", timeout_s=0.1, pods="app=a")
    lines = err.value.message.splitlines()
    assert lines[0].startswith('timed out after 0s waiting for ConfigMap "app"; last state: still starting')
    assert lines[1:3] == [
        "  ConfigMap app: Warning FailedCreate (x5): quota exceeded",
        f"  pod app-1: Unschedulable: {unschedulable['message']}",
    ]
    assert re.fullmatch(r"    Warning FailedScheduling( \(x\d+\))?: " + re.escape(unschedulable["message"]), lines[3])
    assert gated["reason"] == "SchedulingGated"
    assert lines[4:] == [f"  pod app-2: SchedulingGated: {gated['message']}"]


def test_a_failed_wait_with_no_pods_says_so_and_a_forbidden_report_never_hides_the_error(kube, fault):
    kube.create(CONFIGMAP, {"metadata": {"name": "gone"}, "data": {}})
    with pytest.raises(ResourceFailed) as err:
        kube.wait(CONFIGMAP, lambda obj: Failed("broken"), name="gone", timeout_s=DEADLINE_S, pods="app=none")
    assert err.value.message == 'ConfigMap "gone": broken\n  no pods yet (app=none)'
    fault("rbac-deny", "list:pods")
    with pytest.raises(ResourceFailed) as err:
        kube.wait(CONFIGMAP, lambda obj: Failed("broken"), name="gone", timeout_s=DEADLINE_S, pods="app=none")
    assert err.value.message.startswith('ConfigMap "gone": broken\n  (could not read its pods and events: forbidden')
