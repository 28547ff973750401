"""The dashboard client's protocol tests run against the session sandbox's real Ray head (a
dashboard on 127.0.0.1 with the real Job REST API): no second head to start."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def sandbox(simulated_sandbox):
    return simulated_sandbox


@pytest.fixture(scope="module")
def ray_dashboard_url(simulated_sandbox) -> str:
    return simulated_sandbox.dashboard_url
