"""`run --raycluster` killed with SIGKILL midway: `status` lists what it left, `gc` removes exactly
that once its deadline has passed, and nothing of another user's, a person's or a finished bring-up's.

The example pair (examples/sandbox_longlived.*) runs as a user of its own in the test's namespace;
the run is killed the moment a watch sees a given object appear. Its deadline (``nrl-k8s.io/owner-deadline``)
bounds every wait of a live bring-up, so `gc` is asked as of a time past it (``$NRL_K8S_NOW``)
instead of waiting for it.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, History, observe, played, run_cli

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox_longlived.yaml"), "--infra", str(ROOT / "examples/sandbox_longlived.infra.yaml")]
DEADLINE = "nrl-k8s.io/owner-deadline"
BRINGUP = "nrl-k8s.io/bringup"
RUN_ID = "nrl-k8s.io/run-id"


class User:
    """One user of the example pair in the test's namespace, and reads of what is there."""

    def __init__(self, sandbox, namespace: str, tmp: Path):
        self.ns, self.sandbox = namespace, sandbox
        self.name = f"u{uuid.uuid4().hex[:6]}"  # every name in the example derives from ${user:}
        self.env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": self.name,
                    "XDG_CACHE_HOME": str(tmp)}
        self.pair = [*PAIR, f"infra.namespace={namespace}"]
        self.api = sandbox.api_client(admin=True)
        self.custom, self.apps, self.core = (
            client.CustomObjectsApi(self.api),
            client.AppsV1Api(self.api),
            client.CoreV1Api(self.api),
        )

    def cli(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return run_cli(list(args), env={**self.env, **(env or {})}, timeout=DEADLINE_S, cwd=ROOT)

    def start(self) -> subprocess.Popen:
        return subprocess.Popen([NRL_K8S, "run", "--raycluster", "--no-wait", *self.pair], env=self.env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def lists(self) -> dict[str, callable]:
        """What the flow creates, by kind: a list call of the official client each."""
        return {
            "RayCluster": lambda **kw: self.custom.list_namespaced_custom_object(
                "ray.io", "v1", self.ns, "rayclusters", **kw
            ),
            "Deployment": lambda **kw: self.apps.list_namespaced_deployment(self.ns, **kw),
            "Service": lambda **kw: self.core.list_namespaced_service(self.ns, **kw),
            "DynamoGraphDeployment": lambda **kw: self.custom.list_namespaced_custom_object(
                "nvidia.com", "v1beta1", self.ns, "dynamographdeployments", **kw
            ),
        }

    def mine(self) -> dict[str, dict]:
        """``{"Kind name": object}`` of every object this user's runs made (label nrl-k8s/owner)."""
        found = {}
        for kind, list_fn in self.lists().items():
            listing = json.loads(list_fn(label_selector=f"nrl-k8s/owner={self.name}", _preload_content=False).data)
            found.update({f"{kind} {item['metadata']['name']}": item for item in listing["items"]})
        return found

    def gc(self, *flags: str, now: float | None = None) -> list[str]:
        result = self.cli("-n", self.ns, "gc", *flags, env={"NRL_K8S_NOW": str(now)} if now else None)
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()

    def left(self) -> dict[str, dict]:
        status = self.cli("status", "-o", "json", *self.pair)
        assert status.returncode == 0, status.stderr
        return {row["what"]: row for row in json.loads(status.stdout)["left"]}


@pytest.fixture
def user(sandbox, sandbox_namespace, tmp_path):
    u = User(sandbox, sandbox_namespace, tmp_path)
    yield u
    u.cli("cluster", "down", "--force", *u.pair)
    u.api.close()


def killed_when(user: User, kind: str, name: str) -> None:
    """Start the user's run; SIGKILL it the moment a watch sees ``kind`` ``name`` appear."""
    with History(user.lists()[kind]) as history:
        run = user.start()
        try:
            history.wait(lambda h: name in h.objects(), what=f"{kind} {name} created")
        finally:
            run.send_signal(signal.SIGKILL)
            run.wait(timeout=DEADLINE_S)
    assert run.returncode == -signal.SIGKILL


def killed_at_line(user: User, words: list[str], *flags: str) -> None:
    """Start the user's run with ``flags``; SIGKILL it the moment stderr shows a progress line whose
    words after the time are ``words`` (e.g. ``["code", "ok"]``)."""
    run = subprocess.Popen([NRL_K8S, "run", "--raycluster", "--no-wait", *flags, *user.pair], env=user.env, cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [*map(lines.put, run.stderr), lines.put(None)], daemon=True).start()
    seen, deadline = [], time.monotonic() + DEADLINE_S
    try:
        while (line := lines.get(timeout=max(deadline - time.monotonic(), 0.1))) is not None:
            seen.append(line)
            if line.partition("]")[2].split()[:len(words)] == words:
                break
        else:
            pytest.fail(f"the run ended before a {' '.join(words)!r} line:\n{''.join(seen)}")
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=DEADLINE_S)
    assert run.returncode == -signal.SIGKILL, "".join(seen)


def deadline_of(obj: dict) -> float:
    return datetime.strptime(obj["metadata"]["annotations"][DEADLINE], "%Y-%m-%dT%H:%M:%S%z").timestamp()


def foreign_services(user: User) -> list[str]:
    """Another user's unfinished Service, past its deadline, and a person's carrying the same marks
    but no managed-by label: gc must keep both."""
    marks = {"labels": {BRINGUP: "unfinished", RUN_ID: "other-run"}, "annotations": {DEADLINE: "2000-01-01T00:00:00Z"}}
    names = []
    for name, extra in ((f"{user.name}-other", {"app.kubernetes.io/managed-by": "nrl-k8s", "nrl-k8s/owner": "other"}),
                        (f"{user.name}-person", {})):
        user.core.create_namespaced_service(user.ns, {"metadata": {"name": name, "labels": {**marks["labels"], **extra},
                                                                   "annotations": marks["annotations"]},
                                                      "spec": {"ports": [{"port": 80}]}})
        names.append(name)
    return names


PHASES = {  # the object whose creation the run is killed at
    "deployment": ("Deployment", "{u}-ll-web"),
    "service": ("Service", "{u}-ll-web"),
    "training-raycluster": ("RayCluster", "{u}-ll-train"),
    "gym-raycluster": ("RayCluster", "{u}-ll-gym"),
    "dgd": ("DynamoGraphDeployment", "{u}-ll-dgd"),
}


#: A run killed as an object appears never reaches its heads: kwok plays them.
PLAYED_HEADS = played(heads=("training", "gym"))


@pytest.mark.parametrize("kind,name", PHASES.values(), ids=PHASES.keys())
def test_a_killed_bring_up_is_listed_then_gc_removes_exactly_it(user, kind, name):
    user.pair += PLAYED_HEADS
    others = foreign_services(user)
    killed_when(user, kind, name.format(u=user.name))
    made = user.mine()
    assert f"{kind} {name.format(u=user.name)}" in made, made.keys()
    listed_then_removed(user, others, made)


def test_a_run_killed_between_its_code_and_its_driver_is_listed_then_gc_removes_it(user):
    """The code is on the cluster and the driver's submission is under way (its POST answered 503
    and retried, so the kill lands there): nothing was submitted, so nothing may be finished."""
    others = foreign_services(user)
    with user.sandbox.fault("api-errors", "create:services/proxy:503:1000"):
        killed_at_line(user, ["code", "ok"], "--skip-daemons")
    made = user.mine()
    assert {f"RayCluster {user.name}-ll-train", f"RayCluster {user.name}-ll-gym", f"Deployment {user.name}-ll-web",
            f"DynamoGraphDeployment {user.name}-ll-dgd"} <= set(made), made.keys()
    listed_then_removed(user, others, made)


def listed_then_removed(user: User, others: list[str], made: dict[str, dict]) -> None:
    """What the killed run made without an owner is marked, listed by `status`, kept by `gc` before
    its deadline and deleted after it, with what it owned; other users' and people's objects stay."""
    unowned = {what: obj for what, obj in made.items() if not obj["metadata"].get("ownerReferences")}
    assert unowned, made.keys()
    for what, obj in unowned.items():  # labelled with its run, unfinished, a deadline to judge it by
        labels = obj["metadata"]["labels"]
        assert labels.get(BRINGUP) == "unfinished" and labels.get(RUN_ID, "").startswith(f"{user.name}-ll-train-"), what
    latest = max(deadline_of(obj) for obj in unowned.values())

    # status names each, with what it is and how to remove it, before the deadline too.
    left = user.left()
    for what in unowned:
        assert what in left and "bring-up has not finished" in left[what]["reason"], (what, left)
        assert "kubectl" in left[what]["remove"] and "gc" in left[what]["remove"]
    # Before the deadline a live run may still be bringing it up: gc deletes nothing.
    assert not [line for line in user.gc("--dry-run") if line.startswith("would delete")]

    after = latest + 1
    dry = user.gc("--dry-run", now=after)
    assert sorted(line.split(" (")[0] for line in dry if line.startswith("would delete")) == \
        sorted(f"would delete: {what}" for what in unowned), dry
    assert f"kept: Service {others[0]} (run other-run: an unfinished bring-up's, made by user 'other'" in "\n".join(dry)
    assert not [line for line in dry if others[1] in line]  # a person's: not even looked at
    done = user.gc(now=after)
    assert sorted(line.split(" (")[0] for line in done if line.startswith("deleted")) == \
        sorted(f"deleted: {what}" for what in unowned), done
    # What the deleted RayClusters owned (DGD, DRA objects, env Secret) goes with them: nothing of the user's is left.
    for list_fn in user.lists().values():
        observe(list_fn, until=lambda objects: not objects, label_selector=f"nrl-k8s/owner={user.name}")
    services = {s.metadata.name for s in user.core.list_namespaced_service(user.ns).items}
    assert set(others) <= services
    assert not [row for row in user.left() if row.startswith(("RayCluster", "Deployment", "Service"))]


def test_a_rerun_takes_a_killed_bring_up_over_a_finished_one_is_never_a_leftover_and_gc_finishes_it(user):
    killed_when(user, "RayCluster", f"{user.name}-ll-train")
    killed = {what: obj for what, obj in user.mine().items() if not obj["metadata"].get("ownerReferences")}
    assert killed and all(obj["metadata"]["labels"].get(BRINGUP) == "unfinished" for obj in killed.values())

    rerun = user.cli("run", "--raycluster", "--no-wait", *user.pair)
    assert rerun.returncode == 0, rerun.stderr
    for what in killed:
        assert f"{what} taken over from run" in rerun.stderr, rerun.stderr
    made = user.mine()
    assert all(BRINGUP not in obj["metadata"]["labels"] and DEADLINE not in (obj["metadata"].get("annotations") or {})
               for obj in made.values()), {what: obj["metadata"] for what, obj in made.items()}
    # Long after any deadline: the finished bring-up's clusters are no one's leftovers.
    far = deadline_of(next(iter(killed.values()))) + 10 * 24 * 3600
    assert not [line for line in user.gc(now=far) if line.startswith("deleted")]
    assert set(user.mine()) == set(made)
    assert not user.left()
    gc_finishes_a_bring_up_whose_driver_was_submitted(user)


RESOURCES = {"RayCluster": "rayclusters.ray.io", "Deployment": "deployments", "Service": "services",
             "DynamoGraphDeployment": "dynamographdeployments.nvidia.com"}


def gc_finishes_a_bring_up_whose_driver_was_submitted(user: User) -> None:
    """A run killed between the driver's submission and clearing its marks, made by marking a
    finished run's objects again, past their deadline: gc finds the run's driver on its RayCluster
    and finishes the bring-up (the marks come off) instead of deleting the clusters under it."""
    run_id = next(iter(user.mine().values()))["metadata"]["labels"][RUN_ID]
    unowned = [what for what, obj in user.mine().items() if not obj["metadata"].get("ownerReferences")]
    for what in unowned:
        kind, name = what.split()
        user.sandbox.kubectl("-n", user.ns, "label", RESOURCES[kind], name, f"{BRINGUP}=unfinished")
        user.sandbox.kubectl("-n", user.ns, "annotate", RESOURCES[kind], name, f"{DEADLINE}=2000-01-01T00:00:00Z")

    dry = user.gc("--dry-run")
    assert sorted(line.split(" (")[0] for line in dry if line.startswith("would finish")) == \
        sorted(f"would finish: {what}" for what in unowned), dry
    assert f"run {run_id}: its driver was submitted" in "\n".join(dry)
    done = user.gc()
    assert not [line for line in done if line.startswith("deleted")], done
    made = user.mine()
    assert set(unowned) <= set(made)
    assert not [what for what, obj in made.items() if BRINGUP in obj["metadata"]["labels"]]
