"""The sandbox's own tests (``nrl-k8s sandbox ...`` on the real control plane): official-client
fixtures on the session sandbox; helpers live in ``operator_helpers.py``."""

from __future__ import annotations

import pytest
from kubernetes import client


@pytest.fixture(scope="module")
def api(sandbox):
    with sandbox.api_client() as api_client:
        yield api_client


@pytest.fixture(scope="module")
def core(api) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def custom(api) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)
