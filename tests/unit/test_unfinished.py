"""What counts as a killed long-lived bring-up's leftover (``unfinished``), as a table of named cases."""

from __future__ import annotations

import time

import pytest

from nrl_k8s.flows import unfinished
from nrl_k8s.flows.raycluster import bringup_seconds
from nrl_k8s.kinds.base import MANAGED_BY, OWNER_LABEL
from nrl_k8s.kinds.rayjob import RUN_ID_LABEL
from nrl_k8s.ops import gc

NOW = 1_700_000_000.0
RUN = "tr-20250101-000000-abcd"


def made(*, owner: str | None = "it", due: float | None = NOW + 60, managed: bool = True, marked: bool = True,
         owners: list | None = None) -> dict:
    labels = {**(MANAGED_BY if managed else {}), RUN_ID_LABEL: RUN}
    if owner:
        labels[OWNER_LABEL] = owner
    obj = {"kind": "RayCluster", "metadata": {"name": "tr", "labels": labels, "annotations": {}}}
    if marked:
        obj["metadata"]["labels"][unfinished.LABEL] = unfinished.UNFINISHED
    if due is not None:
        obj = gc.with_deadline(obj, due - NOW, now=NOW)
    if owners:
        obj["metadata"]["ownerReferences"] = owners
    return obj


CASES = {
    "mine, before the deadline: a live run may still be bringing it up": (made(), "keep", "has not finished"),
    "mine, past the deadline: its bring-up was killed": (made(due=NOW - 1), "delete", "did not finish"),
    "mine, exactly at the deadline": (made(due=NOW), "delete", "did not finish"),
    "another user's, past the deadline": (made(owner="bob", due=NOW - 1), "keep", "user 'bob'"),
    "no owner label, past the deadline": (made(owner=None, due=NOW - 1), "keep", "without an nrl-k8s/owner label"),
    "made by a person (no managed-by), past the deadline": (made(managed=False, due=NOW - 1), "keep", "someone else"),
    "mine, no deadline annotation": (made(due=None), "keep", "no deadline"),
}


@pytest.mark.parametrize("obj,verdict,words", CASES.values(), ids=CASES.keys())
def test_judge(obj, verdict, words):
    got, reason = gc.judge_unfinished(obj, "it", NOW)
    assert got == verdict and words in reason, reason


def test_stamp_marks_only_what_has_no_owner():
    manifest = {"kind": "RayCluster", "metadata": {"name": "tr", "labels": dict(MANAGED_BY)}}
    before = time.time()
    stamped = unfinished.stamp(manifest, RUN, 90)
    assert stamped["metadata"]["labels"][RUN_ID_LABEL] == RUN and unfinished.unfinished(stamped)
    assert before + 89 <= gc.deadline(stamped) <= time.time() + 91
    assert "labels" in manifest["metadata"] and unfinished.LABEL not in manifest["metadata"]["labels"]  # a copy
    owned = {**manifest, "metadata": {**manifest["metadata"], "ownerReferences": [{"uid": "u"}]}}
    stamped = unfinished.stamp(owned, RUN, 90)
    assert stamped["metadata"]["labels"][RUN_ID_LABEL] == RUN
    assert not unfinished.unfinished(stamped) and gc.deadline(stamped) is None  # GC removes it with its owner


def test_takeover_and_finished_patches():
    patch = unfinished.takeover("next-run", 60)
    assert patch["metadata"]["labels"] == {RUN_ID_LABEL: "next-run", unfinished.LABEL: unfinished.UNFINISHED}
    assert gc.deadline(patch) is not None
    assert unfinished.FINISHED == {"metadata": {"labels": {unfinished.LABEL: None},
                                                "annotations": {gc.DEADLINE_ANNOTATION: None}}}


def test_gc_now_reads_the_environment(monkeypatch):
    monkeypatch.setenv(gc.NOW_ENV, "1234.5")
    assert gc.current_time() == 1234.5
    monkeypatch.setenv(gc.NOW_ENV, "+3600")
    assert gc.current_time() >= time.time() + 3599
    monkeypatch.setenv(gc.NOW_ENV, "tomorrow")
    with pytest.raises(gc.ConfigError, match="NRL_K8S_NOW"):
        gc.current_time()


def test_the_deadline_bounds_every_wait_of_the_bring_up():
    """Deployments (600 s + health), then clusters (1800 s) and DGDs at once, then daemon health, then a margin."""

    class Daemon:
        def __init__(self, health):
            self.health = health

    class Plan:
        deployments = {"web": [], "db": []}
        health = {"web": ("http://web/", 120.0)}
        ready_timeouts = {"serving": 2400.0}
        daemons = {"gym": Daemon(("http://gym/", 30.0)), "other": Daemon(None)}

    assert bringup_seconds(Plan()) == (600 + 120) + 2400 + 30 + 600
    Plan.deployments, Plan.ready_timeouts, Plan.daemons = {}, {"serving": 120.0}, {}
    assert bringup_seconds(Plan()) == 1800 + 600
