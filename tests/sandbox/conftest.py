"""The simulator's own tests run on the simulated sandbox (``simulated_sandbox``)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable

import pytest
from sandbox_harness import Sandbox
from sandbox_harness import separate_sandbox as _separate


@pytest.fixture(scope="session")
def sandbox(simulated_sandbox) -> Sandbox:
    return simulated_sandbox


@pytest.fixture
def separate_sandbox(tmp_path) -> Callable[..., contextlib.AbstractContextManager[Sandbox]]:
    counter = iter(range(1000))
    return lambda *faults, state=None, env=None: _separate(Path(tmp_path) / f"sandbox-{next(counter)}", *faults,
                                                           state=state, env=env, control_plane="simulated")
