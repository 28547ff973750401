"""The timed ``api-outage`` fault: every user request answers 503 until it is over or cleared."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException
from sandbox_harness import eventually


def test_outage_answers_503_to_users_not_to_the_operator(faults, core, client_for):
    from kubernetes import client

    faults.set("api-outage", "3600")
    with pytest.raises(ApiException) as err:
        core.list_namespace()
    body = json.loads(err.value.body)
    assert (err.value.status, body["kind"], body["code"]) == (503, "Status", 503)
    client.CoreV1Api(client_for("operator")).list_namespace()
    faults.clear("api-outage")
    core.list_namespace()


def test_outage_ends_by_itself(faults, core):
    faults.set("api-outage", "0.2")
    assert faults.active() == {"api-outage": "0.2"}
    eventually(lambda: not faults.in_outage(), what="the outage's end")
    assert faults.active() == {}
    core.list_namespace()


@pytest.mark.parametrize("value", [None, "0", "-1", "soon"])
def test_outage_needs_a_positive_duration(faults, value):
    with pytest.raises(ValueError):
        faults.set("api-outage", value)
