"""Every wait falls back to polling when watching fails for any reason but 401 or a missing kind."""

from __future__ import annotations

import threading

import pytest
from sandbox_harness import DEADLINE_S
from test_kube_wait import configmap, phase_readiness, set_phase

from nrl_k8s.errors import ServerError
from nrl_k8s.kinds.core import CONFIGMAP
from nrl_k8s.kube.client import Kube, Tuning

SHORT = Tuning(backoff_s=0.01, backoff_cap_s=0.02, retry_budget_s=0.3, watch_retry_budget_s=0.3, poll_interval_s=0.05)


@pytest.mark.parametrize("code", ["500", "503", "429"])
def test_wait_polls_when_watch_keeps_failing(kubeconfig, kube, sandbox, fault, code):
    fault("api-errors", f"watch:configmaps:{code}:100000")
    kube.create(CONFIGMAP, configmap("subject", "starting"))
    seen = threading.Event()
    threading.Thread(target=lambda: seen.wait(DEADLINE_S) and set_phase(kube, "subject", "ready"), daemon=True).start()
    with Kube.connect(kubeconfig=str(kubeconfig), namespace=kube.namespace, tuning=SHORT) as client:
        obj = client.wait(
            CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S, on_progress=lambda _: seen.set()
        )
    assert obj["data"]["phase"] == "ready"
    counts = sandbox.request_counts()
    assert counts["watch configmaps"] >= 1 and counts["list configmaps"] >= 2  # polled after the watch failed


def test_wait_survives_a_few_transient_watch_errors(kube, sandbox, fault):
    fault("api-errors", "watch:configmaps:500:3")
    kube.create(CONFIGMAP, configmap("subject", "starting"))
    seen = threading.Event()
    threading.Thread(target=lambda: seen.wait(DEADLINE_S) and set_phase(kube, "subject", "ready"), daemon=True).start()
    obj = kube.wait(CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S, on_progress=lambda _: seen.set())
    assert obj["data"]["phase"] == "ready"


def test_wait_fails_when_it_cannot_even_list(kubeconfig, kube, sandbox, fault):
    fault("api-errors", "list:configmaps:500:100000")
    with Kube.connect(kubeconfig=str(kubeconfig), namespace=kube.namespace, tuning=SHORT) as client:
        with pytest.raises(ServerError):
            client.wait(CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S)


def test_a_failing_watch_gives_up_sooner_than_other_requests(kubeconfig, kube, sandbox, fault):
    """Requests keep retrying for a long budget; a watch only briefly, since polling works too."""
    fault("api-errors", "watch:configmaps:500:100000")
    kube.create(CONFIGMAP, configmap("subject", "starting"))
    seen = threading.Event()
    threading.Thread(target=lambda: seen.wait(DEADLINE_S) and set_phase(kube, "subject", "ready"), daemon=True).start()
    patient = Tuning(backoff_s=0.01, backoff_cap_s=0.02, retry_budget_s=60, watch_retry_budget_s=0.3,
                     poll_interval_s=0.05)
    with Kube.connect(kubeconfig=str(kubeconfig), namespace=kube.namespace, tuning=patient) as client:
        obj = client.wait(
            CONFIGMAP, phase_readiness, name="subject", timeout_s=DEADLINE_S, on_progress=lambda _: seen.set()
        )
    assert obj["data"]["phase"] == "ready"
