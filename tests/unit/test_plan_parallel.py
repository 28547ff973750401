"""`run --rayjob --parallel`: the RayJob waits for the run's own driver under a deadline; every
object a run creates carries its run id."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrl_k8s.config.loader import load_config
from nrl_k8s.flows.plan import START_MARGIN_S, RunOptions, parallel_bringup, plan_run
from nrl_k8s.kinds import rayjob

ROOT = Path(__file__).resolve().parents[2]
PAIR = (ROOT / "examples/grpo_two_dgds.yaml", ROOT / "examples/grpo_two_dgds.kind.infra.yaml")
ENV = {"NRL_K8S_USER": "unit"}


def plan(*overrides: str, parallel: bool = False, shutdown: bool = True):
    return plan_run(
        load_config(PAIR[0], list(overrides), PAIR[1], env=ENV), RunOptions(parallel=parallel, shutdown=shutdown)
    )


def test_serial_rayjob_is_http_mode_without_a_pre_running_deadline():
    spec = plan().rayjob["spec"]
    assert spec["submissionMode"] == "HTTPMode" and "preRunningDeadlineSeconds" not in spec
    assert not rayjob.interactive(plan().rayjob)


def test_parallel_rayjob_waits_for_its_job_id_until_the_longest_ready_timeout_plus_a_margin():
    p = plan("++infra.dynamo.policy.readyTimeoutS=30", "++infra.dynamo.judge.readyTimeoutS=900", parallel=True)
    spec = p.rayjob["spec"]
    assert spec["submissionMode"] == "InteractiveMode" and "jobId" not in spec
    assert spec["preRunningDeadlineSeconds"] == 900 + START_MARGIN_S
    assert spec["shutdownAfterJobFinishes"] is True  # KubeRay deletes the cluster (and GC the DGDs) when it fails
    assert "suspend" not in spec and p.lease is None
    # the same objects as the serial plan otherwise, which adds its start lease
    serial = plan("++infra.dynamo.policy.readyTimeoutS=30", "++infra.dynamo.judge.readyTimeoutS=900")
    assert sorted(m["metadata"]["name"] for m in p.manifests()) == sorted(
        m["metadata"]["name"] for m in serial.manifests() if m is not serial.lease)


def test_the_serial_rayjob_starts_suspended_and_held_by_a_lease_until_the_longest_ready_timeout_plus_a_margin():
    p = plan("++infra.dynamo.policy.readyTimeoutS=30", "++infra.dynamo.judge.readyTimeoutS=900")
    assert p.rayjob["spec"]["suspend"] is True and p.rayjob["spec"]["submissionMode"] == "HTTPMode"
    spec = p.lease["spec"]
    assert (p.lease["apiVersion"], p.lease["kind"]) == ("batch/v1", "Job")
    assert p.lease["metadata"]["name"] == p.rayjob["metadata"]["name"] + "-lease"
    # never a pod, Complete at once (suspended by Kueue or not); deleted by the TTL controller at the deadline
    assert spec["parallelism"] == 0 and spec["completions"] == 0 and "activeDeadlineSeconds" not in spec
    assert spec["ttlSecondsAfterFinished"] == 900 + START_MARGIN_S
    assert p.lease["metadata"]["labels"][rayjob.RUN_ID_LABEL] == p.run_id
    # the lease comes first, then the RayJob it owns, then what the RayJob owns
    kinds = [m["kind"] for m in p.manifests()]
    assert kinds.index("Job") < kinds.index("RayJob") < kinds.index("Secret") < kinds.index("DynamoGraphDeployment")


def test_a_rayjob_that_keeps_its_cluster_is_not_suspended_but_still_leased():
    """KubeRay fails a suspended RayJob whose shutdownAfterJobFinishes is false (ValidationFailed)."""
    p = plan(shutdown=False)
    assert "suspend" not in p.rayjob["spec"] and p.rayjob["spec"]["shutdownAfterJobFinishes"] is False
    assert p.lease is not None


def test_a_kueue_rayjob_is_created_without_its_queue_label_and_handed_to_kueue_by_it():
    p = plan("++infra.scheduler.kind=kueue", "++infra.scheduler.queue=team-a")
    assert p.rayjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert "kueue.x-k8s.io/queue-name" not in rayjob.held(p.rayjob)["metadata"]["labels"]
    assert "kueue.x-k8s.io/queue-name" not in p.lease["metadata"]["labels"]  # Kueue would suspend the lease
    assert rayjob.resume_patch(p.rayjob) == {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-a"}}}
    assert rayjob.resume_patch(plan().rayjob) == {"spec": {"suspend": False}}


def test_every_object_the_run_creates_carries_its_run_id():
    p = plan()
    created = [*p.dgds.values(), p.secret, *p.dra, p.rayjob]
    assert len(p.dgds) == 2
    assert {m["metadata"]["labels"][rayjob.RUN_ID_LABEL] for m in created} == {p.run_id}


@pytest.mark.parametrize("launch, flag, expected", [
    ({}, False, False),
    ({}, True, True),
    ({"bringUp": "parallel"}, False, True),
    ({"bringUp": "serial"}, True, True),  # the flag wins
    ({"bringUp": "serial"}, False, False),
])
def test_bring_up_order_from_the_flag_or_the_infra(launch, flag, expected):
    assert parallel_bringup({"launch": launch}, flag) is expected
