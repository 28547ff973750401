"""The dashboard client's protocol tests run against the session sandbox's real Ray head (a
dashboard on 127.0.0.1 with the real Job REST API): no second head to start."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_dashboard_url(sandbox) -> str:
    return sandbox.dashboard_url
