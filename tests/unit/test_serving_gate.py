"""The frontend gate's reading of ``/v1/models``: serving means a model is listed (or no route)."""

from __future__ import annotations

import pytest

from nrl_k8s.flows.serving import healthy, serves_a_model

CASES = {
    "a model listed": (200, b'{"object": "list", "data": [{"id": "Qwen/Qwen3-0.6B"}]}', True),
    "no worker registered yet": (200, b'{"object": "list", "data": []}', False),
    "an older frontend without the route": (404, b"", True),
    "not JSON": (200, b"<html>", False),
    "starting": (503, b'{"error": "starting"}', False),
    "nothing answered": (None, b"", False),
}


@pytest.mark.parametrize(("status", "body", "serving"), CASES.values(), ids=CASES.keys())
def test_serves_a_model(status, body, serving):
    assert serves_a_model(status, body) is serving


@pytest.mark.parametrize(("status", "ok"), [(200, True), (204, True), (301, False), (404, False), (None, False)])
def test_healthy_is_a_2xx(status, ok):
    assert healthy(status, b"") is ok
