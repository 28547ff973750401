"""Shared fixtures: a real ``nrl-k8s sandbox`` (kube-apiserver, the KubeRay operator, kwok nodes,
real Ray heads).

``sandbox`` (session-scoped) runs the installed ``nrl-k8s sandbox up --dir <tmp>`` once for
the whole test session and ``sandbox down`` at the end; tests share it, so give objects unique
names (``sandbox_harness.unique``) or use ``sandbox_namespace``. ``separate_sandbox`` starts
another one (``with separate_sandbox("no-dgd-crd") as box:``) for tests that need a start-time
fault or that stop or kill it. The harness itself is ``tests/sandbox_harness.py``.

``NRL_K8S_TEST_SANDBOX_FAULTS`` (comma-separated ``NAME[=VALUE]``) starts the session sandbox
with those faults, to prove the tests do not depend on its timing: e.g.
``NRL_K8S_TEST_SANDBOX_FAULTS=slow=3 .venv/bin/pytest -q tests/integration`` holds every pod
two seconds longer before it becomes Ready. ``sandbox.fault(...)`` restores them after its block.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sandbox_harness import Sandbox, eventually, start_sandbox, stop_sandbox, unique
from sandbox_harness import separate_sandbox as _separate

#: The folders of live tests, in the order their files are handed out: the make test run (xdist,
#: ``--dist loadfile --no-loadscope-reorder``) gives each worker the next file as it finishes one, so
#: the long live files start first and the short offline ones fill the workers' tails (xdist's own
#: order, most tests first, started files of two tests that run four minutes last). The sandbox's
#: own tests, which start control planes, come while the integration tests' Ray heads still run; the
#: dashboard's before the short controlplane and kube files (its live file is ~100 s, and handed out
#: last of the live ones it was the run's end).
LIVE_FIRST = ("integration", "sandbox", "dashboard", "controlplane", "kube")
#: Files handed out first (-1) or last (+1) within their folder's turn, the rest keeping their order.
#: Last: test_kueue, whose time is mostly waiting (a lease's deadline, Kueue's), so that the other
#: workers keep both CPUs busy meanwhile (it and test_lease once started together and left 2 of 4
#: workers for 2 CPUs for 3 minutes). First: the offline turn's longest files (20-80 s each at full
#: speed; the others take 1-15 s), so that the run does not end on one of them, its other workers done.
TURN_ORDER = {"test_kueue.py": 1} | dict.fromkeys(
    ("test_bad_inputs.py", "test_unreachable.py", "test_upstream_flags.py", "test_conventions.py", "test_lint.py",
     "test_unused.py"), -1)
#: Handed out before every other file: test_packaging, one worker's ~20 CPU-s (pip resolving twice, a
#: wheel built and installed) and ~50 s of a loaded run, which in the offline turn was the run's end.
FIRST = "test_packaging.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> tuple[int, int]:
        if item.path.name == FIRST:
            return -1, 0
        folder = item.path.parent.name
        turn = LIVE_FIRST.index(folder) if folder in LIVE_FIRST else len(LIVE_FIRST)
        return turn, TURN_ORDER.get(item.path.name, 0)

    items.sort(key=rank)  # stable: each file's tests stay together, in their order


@pytest.fixture(scope="session", autouse=True)
def private_user_cache(tmp_path_factory) -> Iterator[Path]:
    """Every test (and every CLI it starts) uses a cache of its own, never the user's ``~/.cache``;
    only the control plane's binaries and Dynamo's runtime (``make setup`` built them there) are
    taken from the user's, and Go's build cache (Go's default place, made for sharing), so a Go test
    reuses what the control plane's build compiled."""
    from nrl_k8s_sandbox.controlplane import binaries
    from nrl_k8s_sandbox.dynamo_runtime import venv

    built = os.environ.get(binaries.ENV_BIN) or str(binaries.cache_root() / binaries.key())
    runtime = str(venv.root())
    go_cache = os.environ.get("GOCACHE") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache",
                                                     "go-build"))
    path = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(path))
        patch.setenv("GOCACHE", go_cache)
        patch.setenv(binaries.ENV_BIN, built)
        patch.setenv(venv.ENV_ROOT, runtime)
        yield path


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory, private_user_cache) -> Iterator[Sandbox]:
    """The session's sandbox."""
    faults = [f.strip() for f in os.environ.get("NRL_K8S_TEST_SANDBOX_FAULTS", "").split(",") if f.strip()]
    box = start_sandbox(tmp_path_factory.mktemp("sandbox"), *faults)
    try:
        yield box
    finally:
        stop_sandbox(box)


@pytest.fixture
def separate_sandbox(tmp_path) -> Callable[..., contextlib.AbstractContextManager[Sandbox]]:
    """``with separate_sandbox(*faults, env=None, flags=()) as box:`` — a sandbox of its own, always stopped."""
    counter = iter(range(1000))
    return lambda *faults, env=None, flags=(): _separate(Path(tmp_path) / f"sandbox-{next(counter)}", *faults,
                                                         env=env, flags=flags)


@pytest.fixture
def sandbox_namespace(sandbox) -> Iterator[str]:
    """A fresh namespace in the session sandbox, deleted after the test."""
    from kubernetes import client

    name = unique("t")
    with sandbox.api_client() as api:
        core = client.CoreV1Api(api)
        eventually(lambda: _created(core, name), what=f"namespace {name} created")
        yield name
        core.delete_namespace(name)


def _created(core, name: str) -> bool:
    """Create namespace ``name``; False after a server-side timeout (a loaded API server answers 504
    and may have created it all the same), to be tried again."""
    from kubernetes import client

    try:
        core.create_namespace({"metadata": {"name": name}})
    except client.ApiException as err:
        if err.status == 409:
            return True
        if err.status not in (500, 503, 504):
            raise
        return False
    return True
