"""`run --rayjob` on a cluster whose Kueue manages every job (``manageJobsWithoutQueueName: true``;
issue 30, item 6), on a sandbox of this module's own started with ``--kueue all``.

Kueue suspends every Job without a queue label, the start lease included, and a suspended Job's
``activeDeadlineSeconds`` clock stops: the lease must still end a dead launcher's run at its
deadline. And with ``scheduler.kind: kueue`` the RayJob is handed to its queue only once its DGDs
serve: until then it carries no queue label and stays suspended, then Kueue admits it and the run
goes to its end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, History, observe, run_cli
from sandbox_harness import separate_sandbox as own_sandbox

from nrl_k8s_sandbox.controlplane import kueue

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
RAYJOBS = ("ray.io", "v1", "rayjobs")
DGDS = ("nvidia.com", "v1alpha1", "dynamographdeployments")


@pytest.fixture(scope="module")
def box(tmp_path_factory, private_user_cache):
    with own_sandbox(tmp_path_factory.mktemp("kueue"), flags=("--kueue", "all")) as started:
        yield started


@pytest.fixture
def run(box, tmp_path):
    """One test's namespace (with a LocalQueue of the sandbox's ClusterQueue), names and CLI."""
    api = box.api_client(admin=True)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    ns, job = f"k-{uuid.uuid4().hex[:6]}", f"q-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "localqueues", kueue.local_queue(ns))
    env = {**os.environ, "KUBECONFIG": str(box.kubeconfig), "NRL_K8S_USER": "kq", "XDG_CACHE_HOME": str(tmp_path)}
    argv = [*PAIR, f"infra.namespace={ns}", f"infra.kuberay.training.name={job}",
            f"infra.dynamo.serving.name={job}-dgd"]

    yield SimpleNamespace(ns=ns, job=job, dgd=f"{job}-dgd", env=env, argv=argv, custom=custom,
                          batch=client.BatchV1Api(api))
    core.delete_namespace(ns)
    api.close()


def test_the_lease_ends_a_dead_launchers_run_though_kueue_suspends_it(run, box):
    """Killed while its DGD warms up: Kueue holds the lease suspended (no queue label), yet at its
    deadline it goes, and garbage collection takes the RayJob, its Secret and the DGD with it."""
    with box.fault("delay", "dgd:900"):
        proc = subprocess.Popen([NRL_K8S, "run", "--rayjob", "--no-wait", *run.argv,
                                 "infra.dynamo.serving.readyTimeoutS=30"], env=run.env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            observe(run.custom.list_namespaced_custom_object, *DGDS[:2], run.ns, DGDS[2],
                    until=lambda found: run.dgd in found)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=DEADLINE_S)
        lease = run.batch.read_namespaced_job(f"{run.job}-lease", run.ns)
        assert lease.spec.suspend is True  # Kueue's webhook suspended it: it manages it
        # its end is known once the Job controller has marked it Complete (at once, but on its own time)
        observe(run.batch.list_namespaced_job, run.ns, until=lambda found: any(
            c["type"] == "Complete" and c["status"] == "True"
            for c in (found.get(f"{run.job}-lease", {}).get("status") or {}).get("conditions") or []))
        assert run.custom.get_namespaced_custom_object(*RAYJOBS[:2], run.ns, RAYJOBS[2], run.job)
        status = run_cli(["status", "-o", "json", *run.argv], env=run.env, cwd=ROOT)
        held = {row["what"]: row["reason"] for row in json.loads(status.stdout)["left"]}.get(f"RayJob {run.job}", "")
        assert "held by its start lease" in held and re.search(r"at \d{4}-\d\d-\d\dT", held), status.stdout
        # the lease's deadline: 30 s + 120 s after it was made; never while Kueue holds it, before the fix
        for plural in (RAYJOBS, DGDS):
            observe(run.custom.list_namespaced_custom_object, *plural[:2], run.ns, plural[2],
                    until=lambda found: not found, timeout_s=400)
    assert run.batch.list_namespaced_job(run.ns).items == []


def test_the_rayjob_reaches_its_queue_only_once_its_dgds_serve(run):
    """Queued (``scheduler.kind: kueue``): the held RayJob has no queue label and stays suspended
    until the DGD serves; then the label is given back and Kueue admits it (it alone clears
    ``suspend``), and the run ends SUCCEEDED."""
    queued = [*run.argv, "++infra.scheduler.kind=kueue", f"++infra.scheduler.queue={kueue.QUEUE}"]
    with History(run.custom.list_namespaced_custom_object, *RAYJOBS[:2], run.ns, RAYJOBS[2]) as jobs, \
            History(run.custom.list_namespaced_custom_object, *DGDS[:2], run.ns, DGDS[2]) as dgds:
        result = run_cli(["run", "--rayjob", *queued], env=run.env, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "step 3/3" in result.stdout
    versions = [obj for _, obj in jobs.events(run.job)]
    labelled = [i for i, obj in enumerate(versions) if kueue.QUEUE_LABEL in (obj["metadata"].get("labels") or {})]
    assert labelled and all(obj["spec"].get("suspend") for obj in versions[:labelled[0]]), versions
    assert versions[labelled[0]]["metadata"]["labels"][kueue.QUEUE_LABEL] == kueue.QUEUE
    served = [obj for _, obj in dgds.events(run.dgd) if (obj.get("status") or {}).get("state") == "successful"]
    assert served, "the DGD never served"
    # one etcd orders every write: the DGD served before the RayJob got its queue label
    assert int(served[0]["metadata"]["resourceVersion"]) < int(versions[labelled[0]]["metadata"]["resourceVersion"])
    assert any(not obj["spec"].get("suspend") for obj in versions[labelled[0]:])  # admitted: Kueue cleared it
