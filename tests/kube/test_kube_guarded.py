"""Guarded writes: read-modify-write that survives conflicts, and version-guarded deletes."""

from __future__ import annotations

import pytest

from nrl_k8s.errors import ConflictError, NotFoundError
from nrl_k8s.kinds.core import CONFIGMAP


def _add(key: str, value: str):
    def change(current: dict) -> dict | None:
        if (current.get("data") or {}).get(key) == value:
            return None
        return {"data": {key: value}}

    return change


def test_modify_rereads_and_retries_on_conflict(kube, sandbox, fault):
    kube.create(CONFIGMAP, {"metadata": {"name": "shared"}, "data": {"a": "1"}})
    fault("api-errors", "patch:configmaps:409:2")
    updated = kube.modify(CONFIGMAP, "shared", _add("b", "2"))
    assert updated["data"] == {"a": "1", "b": "2"}
    counts = sandbox.request_counts()
    assert (counts["patch configmaps"], counts["get configmaps"]) == (3, 3)


def test_modify_sees_a_concurrent_writer(kube, sandbox):
    """A write between our read and our patch makes the guarded patch conflict; the retry keeps both."""
    kube.create(CONFIGMAP, {"metadata": {"name": "raced"}, "data": {"a": "1"}})
    raced = []

    def change(current: dict) -> dict:
        if not raced:
            raced.append(kube.patch(CONFIGMAP, "raced", {"data": {"other": "x"}}))
        return {"data": {"mine": "y"}}

    assert kube.modify(CONFIGMAP, "raced", change)["data"] == {"a": "1", "other": "x", "mine": "y"}
    assert sandbox.request_counts()["patch configmaps"] == 3  # the racing write, our refused patch, our retry


def test_modify_without_change_does_not_write(kube, sandbox):
    kube.create(CONFIGMAP, {"metadata": {"name": "same"}, "data": {"b": "2"}})
    assert kube.modify(CONFIGMAP, "same", _add("b", "2"))["data"] == {"b": "2"}
    assert sandbox.request_counts().get("patch configmaps", 0) == 0


def test_modify_from_a_given_object_reads_nothing(kube, sandbox):
    created = kube.create(CONFIGMAP, {"metadata": {"name": "given"}, "data": {"a": "1"}})
    updated = kube.modify(CONFIGMAP, "given", _add("b", "2"), current=created)
    assert updated["data"] == {"a": "1", "b": "2"}
    assert kube.modify(CONFIGMAP, "given", _add("b", "2"), current=updated) == updated
    counts = sandbox.request_counts()
    assert (counts.get("get configmaps", 0), counts["patch configmaps"]) == (0, 1)


def test_modify_from_a_stale_object_rereads_on_the_conflict(kube, sandbox):
    stale = kube.create(CONFIGMAP, {"metadata": {"name": "stale"}, "data": {"a": "1"}})
    kube.patch(CONFIGMAP, "stale", {"data": {"other": "x"}})
    updated = kube.modify(CONFIGMAP, "stale", _add("b", "2"), current=stale)
    assert updated["data"] == {"a": "1", "other": "x", "b": "2"}
    assert sandbox.request_counts()["get configmaps"] == 1


def test_modify_of_a_missing_object_is_not_found(kube):
    with pytest.raises(NotFoundError):
        kube.modify(CONFIGMAP, "absent", _add("b", "2"))


def test_delete_guarded_by_resource_version(kube):
    created = kube.create(CONFIGMAP, {"metadata": {"name": "guarded"}})
    kube.patch(CONFIGMAP, "guarded", {"data": {"changed": "yes"}})
    with pytest.raises(ConflictError):
        kube.delete(CONFIGMAP, "guarded", resource_version=created["metadata"]["resourceVersion"])
    assert kube.find(CONFIGMAP, "guarded") is not None
    live = kube.get(CONFIGMAP, "guarded")
    assert kube.delete(CONFIGMAP, "guarded", resource_version=live["metadata"]["resourceVersion"]) is True
    assert kube.find(CONFIGMAP, "guarded") is None
