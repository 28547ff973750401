"""`run --rayjob`'s start lease and its margins (issue 30, item 6).

The lease (``kinds.lease``) ends a run whose launcher died before the RayJob was released; a live
run extends it before its DGD waits and once its DGDs serve, so however slow its creates were, no
later wait is left a second and no live run is rolled back for it. When the run cannot tell
whether its driver started, its hint names the commands that tell and that stop it.
"""

from __future__ import annotations

import shlex

from test_rollback import NVIDIA, RAY, env  # noqa: F401 (the fixture)

# Each create after the lease's answers 503 this many times: retried with backoff (0.25 s doubling
# to 5 s, times 0.5-1), it lands 26-53 s later, ~40 s on average, within the one-minute retry budget.
FAILURES = 14


def progressed(stderr: str, *words: str) -> bool:
    """Whether a progress line (``[time] RESOURCE PHASE REASON``) starts with ``words`` after its time."""
    return any(line.partition("]")[2].split()[:len(words)] == list(words) for line in stderr.splitlines())


def test_slow_creates_leave_the_waits_after_the_dgds_their_time(env):  # noqa: F811
    """readyTimeoutS 60: the lease starts at 180 s. The three creates after it (the RayJob, the run
    Secret, the DGD) take ~120 s between them (79 s at the least) and the RayJob's resume takes ~40 s
    more: without the lease's extensions the waits after the DGDs would get 1 s (11 s at the most),
    and the lease would end at 180 s under the live run. The DGD serves 12 s after it is made (its
    delay: more than those 11 s), plus its Dynamo processes' start, which took up to 23 s at half
    this machine's speed: the 48 s left for that are twice as much."""
    slow = ";".join(f"{verb}:{plural}:503:{FAILURES}" for verb, plural in (
        ("create", "rayjobs"), ("create", "secrets"), ("create", "dynamographdeployments"), ("patch", "rayjobs")))
    with env.sandbox.fault("delay", "dgd:12"), env.sandbox.fault("api-errors", slow):
        result = env.cli("run", "--rayjob", "--no-wait", extra=("infra.dynamo.serving.readyTimeoutS=60",))
    assert result.returncode == 0, result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith("rolled back")], result.stderr
    assert progressed(result.stderr, "lease", "ok", "released"), result.stderr
    assert progressed(result.stderr, "driver", "ok", "submitted"), result.stderr


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
