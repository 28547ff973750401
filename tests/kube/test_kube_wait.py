"""watch and the one wait primitive: watch + deadline, re-established, re-listed, or polled.

The counts are the sandbox front proxy's; a 410 Gone is the real server's answer to a watch from a
resourceVersion older than its history, or the front proxy's (``api-errors``) to one watch.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.request

import pytest
from sandbox_harness import DEADLINE_S, eventually

from nrl_k8s.errors import ResourceFailed, WaitTimeout
from nrl_k8s.kinds.core import CONFIGMAP
from nrl_k8s.kinds.rayjob import KIND as RAYJOB
from nrl_k8s.kinds.readiness import Failed, Pending, Ready
from nrl_k8s.kube.client import GoneError, Kube, Tuning


def configmap(name: str, phase: str, labels: dict | None = None, reason: str = "") -> dict:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": {"phase": phase, "reason": reason}}


def phase_readiness(obj: dict | None):
    """A toy readiness function over a ConfigMap's ``data.phase``."""
    if obj is None:
        return Pending("absent")
    data = obj.get("data") or {}
    if data["phase"] == "ready":
        return Ready()
    if data["phase"] == "failed":
        return Failed(data["reason"])
    return Pending(f"phase {data['phase']}")


def set_phase(kube: Kube, name: str, phase: str) -> None:
    kube.patch(CONFIGMAP, name, {"data": {"phase": phase}})


def in_background(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_watch_yields_events_in_order(kube):
    start = kube.create(CONFIGMAP, configmap("marker", "x"))["metadata"]["resourceVersion"]
    kube.create(CONFIGMAP, configmap("watched", "starting"))
    kube.create(CONFIGMAP, configmap("ignored", "starting"))
    set_phase(kube, "watched", "ready")
    kube.delete(CONFIGMAP, "watched")
    events = []
    for event, obj in kube.watch(CONFIGMAP, name="watched", resource_version=start, timeout_s=DEADLINE_S):
        events.append((event, obj["metadata"]["name"], obj["data"]["phase"], obj["kind"]))
        if event == "DELETED":
            break
    assert events == [
        ("ADDED", "watched", "starting", "ConfigMap"),
        ("MODIFIED", "watched", "ready", "ConfigMap"),
        ("DELETED", "watched", "ready", "ConfigMap"),
    ]


def compact_etcd(sandbox) -> None:
    """What kube-apiserver does every 5 minutes: drop etcd's history before its current revision
    (etcd's own JSON gateway; the sandbox's API server reads etcd directly, with no watch cache)."""
    def post(path: str, body: dict) -> dict:
        request = urllib.request.Request(sandbox.info["etcd_url"] + path, data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
            return json.load(response)

    revision = post("/v3/kv/range", {"key": base64.b64encode(b"/").decode(), "count_only": True})["header"]["revision"]
    post("/v3/kv/compaction", {"revision": revision, "physical": True})


def test_a_watch_from_before_the_servers_history_is_gone(kube, sandbox):
    """A watch from a resourceVersion older than the history the server keeps gets a 410."""
    kube.create(CONFIGMAP, configmap("written", "starting"))  # a revision after 1 to compact to
    compact_etcd(sandbox)
    with pytest.raises(GoneError) as caught:
        list(kube.watch(RAYJOB, resource_version="1", timeout_s=DEADLINE_S))
    assert caught.value.status == 410


def test_watch_ends_when_the_server_closes_it(kube):
    kube.create(CONFIGMAP, configmap("quiet", "starting"))
    assert [event for event, _ in kube.watch(CONFIGMAP, label_selector="none=here", timeout_s=1)] == []


@pytest.mark.parametrize(
    ("phase", "outcome"),
    [("ready", "ready"), ("failed", "ResourceFailed")],
    ids=["already-ready", "already-failed"],
)
def test_wait_judges_the_initial_state(kube, phase, outcome):
    kube.create(CONFIGMAP, configmap("subject", phase, reason="image pull failed"))
    if outcome == "ready":
        assert kube.wait(CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S)["data"]["phase"] == "ready"
        return
    with pytest.raises(ResourceFailed) as caught:
        kube.wait(CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S, what="configmap subject")
    assert caught.value.message == "configmap subject: image pull failed"


def test_wait_ready_via_watch_after_background_update(kube, sandbox):
    kube.create(CONFIGMAP, configmap("subject", "starting"))
    progress: list[str] = []
    seen = threading.Event()

    def report(reason: str) -> None:
        progress.append(reason)
        seen.set()

    thread = in_background(lambda: seen.wait(DEADLINE_S) and set_phase(kube, "subject", "ready"))
    obj = kube.wait(CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S, on_progress=report)
    thread.join(DEADLINE_S)
    assert obj["data"]["phase"] == "ready"
    assert progress == ["phase starting"]
    counts = sandbox.request_counts()
    assert counts["list configmaps"] == 1 and counts["watch configmaps"] >= 1


def test_wait_failed_via_watch(kube):
    kube.create(CONFIGMAP, configmap("subject", "starting"))
    seen = threading.Event()

    def fail() -> None:
        seen.wait(DEADLINE_S)
        kube.patch(CONFIGMAP, "subject", {"data": {"phase": "failed", "reason": "CrashLoopBackOff"}})

    in_background(fail)
    with pytest.raises(ResourceFailed, match='ConfigMap "subject": CrashLoopBackOff'):
        kube.wait(CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S, on_progress=lambda _: seen.set())


@pytest.mark.parametrize(
    ("existing", "last_reason"),
    [(True, "phase starting"), (False, "absent")],
    ids=["stuck-object", "never-created"],
)
def test_wait_timeout_names_what_and_the_last_reason(kube, existing, last_reason):
    if existing:
        kube.create(CONFIGMAP, configmap("stuck", "starting"))
    with pytest.raises(WaitTimeout) as caught:
        kube.wait(CONFIGMAP, phase_readiness, name="stuck", timeout_s=1, what="dynamo.serving")
    assert "waiting for dynamo.serving" in caught.value.message
    assert caught.value.message.endswith(f"last state: {last_reason}")


def test_wait_over_a_label_selector(kube):
    labels = {"group": "workers"}
    progress: list[str] = []
    seen = threading.Event()

    def all_ready(objs: list[dict]):
        ready = sum(obj["data"]["phase"] == "ready" for obj in objs)
        return Ready() if ready == 3 else Pending(f"{ready}/3 ready")

    def create_workers() -> None:
        seen.wait(DEADLINE_S)
        for index in range(3):
            kube.create(CONFIGMAP, configmap(f"worker-{index}", "ready", labels))

    kube.create(CONFIGMAP, configmap("outsider", "ready"))
    in_background(create_workers)
    objs = kube.wait(
        CONFIGMAP,
        all_ready,
        label_selector="group=workers",
        timeout_s=DEADLINE_S,
        on_progress=lambda r: (progress.append(r), seen.set()),
    )
    assert [obj["metadata"]["name"] for obj in objs] == ["worker-0", "worker-1", "worker-2"]
    assert progress[0] == "0/3 ready" and progress[-1] == "2/3 ready"


def test_wait_reestablishes_an_expired_watch(kubeconfig, kube, sandbox):
    kube.create(CONFIGMAP, configmap("subject", "starting"))
    # A watch of a 1-s window is made anew each second, and its connect and TLS handshake are held to that
    # second: on a loaded machine some may fail, and past the retry budget (10 s) the wait would poll instead
    # (its own test: test_kube_wait_fallback.py) and list again. Here the budget outlasts any such stall.
    tuning = Tuning(watch_window_s=1, watch_retry_budget_s=DEADLINE_S)
    short = Kube.connect(kubeconfig=str(kubeconfig), namespace=kube.namespace, tuning=tuning)

    def after_second_watch() -> None:
        eventually(lambda: sandbox.request_counts().get("watch configmaps", 0) >= 2, what="a second watch")
        set_phase(kube, "subject", "ready")

    thread = in_background(after_second_watch)
    with short:
        assert short.wait(CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S)["data"]["phase"] == "ready"
    thread.join(DEADLINE_S)
    counts = sandbox.request_counts()
    assert counts["watch configmaps"] >= 2 and counts["list configmaps"] == 1


def test_wait_relists_when_the_watch_is_gone(kube, sandbox, fault):
    """410 Gone: the listed resourceVersion fell out of the server's history before the watch began
    (the front proxy answers the first watch so); the wait lists again and watches from there."""
    kube.create(CONFIGMAP, configmap("subject", "starting"))
    fault("api-errors", "watch:configmaps:410:1")
    seen = threading.Event()
    thread = in_background(lambda: seen.wait(DEADLINE_S) and set_phase(kube, "subject", "ready"))
    obj = kube.wait(CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S, on_progress=lambda _: seen.set())
    thread.join(DEADLINE_S)
    assert obj["data"]["phase"] == "ready"
    counts = sandbox.request_counts()
    assert counts["list configmaps"] == 2 and counts["watch configmaps"] >= 1  # the second list may see it ready


def test_wait_polls_when_watch_is_forbidden(kube, sandbox, fault):
    fault("rbac-deny", "watch:configmaps")
    kube.create(CONFIGMAP, configmap("subject", "starting"))
    sandbox.request_counts(reset=True)
    seen = threading.Event()
    thread = in_background(lambda: seen.wait(DEADLINE_S) and set_phase(kube, "subject", "ready"))
    obj = kube.wait(CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S, on_progress=lambda _: seen.set())
    thread.join(DEADLINE_S)
    assert obj["data"]["phase"] == "ready"
    counts = sandbox.request_counts()
    assert counts["watch configmaps"] == 1 and counts["list configmaps"] >= 2


def test_wait_gone(kube):
    kube.wait_gone(CONFIGMAP, "never-existed", timeout_s=DEADLINE_S)
    held = configmap("held", "x")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    kube.create(CONFIGMAP, held)
    kube.delete(CONFIGMAP, "held")
    with pytest.raises(WaitTimeout, match='deletion of ConfigMap "held".*being deleted'):
        kube.wait_gone(CONFIGMAP, "held", timeout_s=1)
    in_background(lambda: kube.patch(CONFIGMAP, "held", {"metadata": {"finalizers": None}}))
    kube.wait_gone(CONFIGMAP, "held", timeout_s=DEADLINE_S)
    assert kube.find(CONFIGMAP, "held") is None


def test_wait_needs_exactly_one_target(kube):
    with pytest.raises(ValueError, match="exactly one"):
        kube.wait(CONFIGMAP, phase_readiness, timeout_s=1)
    with pytest.raises(ValueError, match="exactly one"):
        kube.wait(CONFIGMAP, phase_readiness, name="a", label_selector="b=c", timeout_s=1)

