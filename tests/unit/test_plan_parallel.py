"""`run --rayjob --parallel`: the RayJob waits for the run's own driver under a deadline; every
object a run creates carries its run id."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrl_k8s.config.loader import load_config
from nrl_k8s.kinds import rayjob
from nrl_k8s.plan import PRE_RUNNING_MARGIN_S, RunOptions, parallel_bringup, plan_run

ROOT = Path(__file__).resolve().parents[2]
PAIR = (ROOT / "examples/grpo_two_dgds.yaml", ROOT / "examples/grpo_two_dgds.kind.infra.yaml")
ENV = {"NRL_K8S_USER": "unit"}


def plan(*overrides: str, parallel: bool = False):
    return plan_run(load_config(PAIR[0], list(overrides), PAIR[1], env=ENV), RunOptions(parallel=parallel))


def test_serial_rayjob_is_http_mode_without_a_pre_running_deadline():
    spec = plan().rayjob["spec"]
    assert spec["submissionMode"] == "HTTPMode" and "preRunningDeadlineSeconds" not in spec
    assert not rayjob.interactive(plan().rayjob)


def test_parallel_rayjob_waits_for_its_job_id_until_the_longest_ready_timeout_plus_a_margin():
    p = plan("++infra.dynamo.policy.readyTimeoutS=30", "++infra.dynamo.judge.readyTimeoutS=900", parallel=True)
    spec = p.rayjob["spec"]
    assert spec["submissionMode"] == "InteractiveMode" and "jobId" not in spec
    assert spec["preRunningDeadlineSeconds"] == 900 + PRE_RUNNING_MARGIN_S
    assert spec["shutdownAfterJobFinishes"] is True  # KubeRay deletes the cluster (and GC the DGDs) when it fails
    # the same objects as the serial plan otherwise
    serial = plan("++infra.dynamo.policy.readyTimeoutS=30", "++infra.dynamo.judge.readyTimeoutS=900")
    assert [m["metadata"]["name"] for m in p.manifests()] == [m["metadata"]["name"] for m in serial.manifests()]


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
