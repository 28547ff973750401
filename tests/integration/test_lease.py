"""`run --rayjob`'s start lease and its margins (issue 30, item 6).

The lease (``kinds.lease``) ends a run whose launcher died before the RayJob was released; a live
run extends it before its DGD waits and once its DGDs serve, so however slow its creates were, no
later wait is left a second and no live run is rolled back for it. When the run cannot tell
whether its driver started, its hint names the commands that tell and that stop it.
"""

from __future__ import annotations

import shlex

from kubernetes import client
from sandbox_harness import observe
from test_rollback import NVIDIA, RAY, env  # noqa: F401 (the fixture)

OUTAGE_S = 45  # within the CLI's retry budget (a minute): each create waits it out


def progressed(stderr: str, *words: str) -> bool:
    """Whether a progress line (``[time] RESOURCE PHASE REASON``) starts with ``words`` after its time."""
    return any(line.partition("]")[2].split()[:len(words)] == list(words) for line in stderr.splitlines())


def test_slow_creates_leave_the_waits_after_the_dgds_their_time(env):  # noqa: F811
    """readyTimeoutS 60: the lease starts at 180 s. Three API outages, one per create after the
    lease (the RayJob, the run Secret, the DGD), and a DGD that serves 50 s after it is made take
    ~185 s of it: without the lease's extensions the waits after the DGDs would get 1 s."""
    jobs, core = client.BatchV1Api(env.api), client.CoreV1Api(env.api)
    with env.sandbox.fault("delay", "dgd:50"):
        run = env.start("run", "--rayjob", "--no-wait", extra=("infra.dynamo.serving.readyTimeoutS=60",))
        observe(jobs.list_namespaced_job, env.ns, until=lambda found: f"{env.job}-lease" in found)
        env.sandbox.set_fault("api-outage", str(OUTAGE_S))
        env.wait_for(RAY, env.job, lambda obj: obj is not None)
        env.sandbox.set_fault("api-outage", str(OUTAGE_S))
        observe(core.list_namespaced_secret, env.ns, until=lambda found: any(n.startswith(env.job) for n in found))
        env.sandbox.set_fault("api-outage", str(OUTAGE_S))
        code, _, stderr = run.finish()
    assert code == 0, stderr
    assert not [line for line in stderr.splitlines() if line.startswith("rolled back")], stderr
    assert progressed(stderr, "lease", "ok", "released"), stderr
    assert progressed(stderr, "driver", "ok", "submitted"), stderr


def test_a_run_that_cannot_tell_whether_its_driver_started_names_the_commands(env):  # noqa: F811
    """The DGD does not serve in time while every read of the RayJob answers 503: the run cannot
    tell whether the driver started, so it deletes nothing and says how to find out and how to stop it."""
    with env.sandbox.fault("delay", "dgd:600"):
        run = env.start("run", "--rayjob", "--no-wait", extra=("infra.dynamo.serving.readyTimeoutS=30",))
        env.wait_for(NVIDIA, env.dgd, lambda obj: obj is not None)
        with env.sandbox.fault("api-errors", "get:rayjobs:503:100000"):
            code, _, stderr = run.finish()
    assert code == 1, stderr
    assert "timed out after 30s waiting for dynamo.serving" in stderr, stderr
    assert not [line for line in stderr.splitlines() if line.startswith("rolled back")], stderr
    assert f"left behind: RayJob {env.job} (not rolled back: could not tell whether the driver started)" in stderr
    hint = next(line for line in stderr.splitlines() if line.startswith("hint: ") and "may be running" in line)
    commands = [shlex.split(part) for part in hint.split("`")[1::2]]
    look = f"kubectl -n {env.ns} get rayjob {env.job}"
    assert shlex.split(look) in commands, hint
    assert shlex.split(f"kubectl -n {env.ns} delete rayjobs.ray.io {env.job}") in commands, hint
    assert f"{env.job}-lease --cascade=orphan" in hint  # the lease still holds it: how to keep a driver that runs
    listed = env.sandbox.kubectl(*shlex.split(look)[1:])  # each works pasted
    assert env.job in listed.stdout
    assert env.get(RAY, env.job) is not None and env.get(NVIDIA, env.dgd) is not None  # nothing was deleted
