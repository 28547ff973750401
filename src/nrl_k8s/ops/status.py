"""`nrl-k8s status`: what is running for a run config, as plain data (the CLI renders it).

``driver`` is the run's exec driver (``execdriver``) when the exec submitter is in play: the run
record's, else the newest on the training cluster's head pod.

``left`` lists what a run that died (SIGKILL, lost laptop) can leave running with nothing to
remove it, each with the command that does: among them this user's objects of a long-lived
bring-up that has not finished (``gc.unfinished_rows``), before their deadline too (a killed run's, or a
live one's: the row says which to expect by when).

Per DGD, ``frontend`` and ``rl`` are what a trainer binds to (``fleet``: the frontend's health and
models, the RL workers with their weight versions), asked through the API server's proxies
within one bounded wait for the whole DYNAMO section.

``waiting`` says why each of the run's pod groups that waits for a node waits (``ops.waiting``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from nrl_k8s.config.interpolate import user_name
from nrl_k8s.errors import NotFoundError, NrlK8sError
from nrl_k8s.kinds import dgd, lease, pod, raycluster, rayjob
from nrl_k8s.kinds.base import OWNER_LABEL, delete_command
from nrl_k8s.kinds.readiness import condition_true
from nrl_k8s.kube import dgd_users as usage
from nrl_k8s.ops import fleet, gc, waiting

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube


def _role(kube: Kube, infra: dict, role: str, ns: str) -> tuple[dict, list[dict]]:
    """The role's row, and its live RayJob and RayCluster (those that exist)."""
    name = raycluster.cluster_name(infra, role)
    cluster = kube.find(raycluster.KIND, name, ns)
    job = kube.find(rayjob.KIND, name, ns)
    if cluster is None and job is not None and (created := rayjob.cluster_name(job)):
        cluster = kube.find(raycluster.KIND, created, ns)
    row = {"role": role, "name": name, "cluster": None, "state": "not found", "head": "-", "workers": "-",
           "daemon": "-"}
    live = [obj for obj in (job, cluster) if obj is not None]
    if cluster is None:
        return row, live
    cname = cluster["metadata"]["name"]
    pods = kube.list(pod.KIND, ns, label_selector=f"ray.io/cluster={cname}")
    heads = [p for p in pods if p["metadata"].get("labels", {}).get("ray.io/node-type") == "head"]
    workers = [p for p in pods if p not in heads]
    status = cluster.get("status") or {}
    row.update(
        cluster=cname,
        state=status.get("state") or ("provisioned" if raycluster.provisioned(cluster) else "pending"),
        head=(heads[0].get("status") or {}).get("phase", "?") if heads else "missing",
        workers=f"{sum(pod.containers_ready(p) for p in workers)}/{len(workers)} ready",
        daemon=_daemon(kube, infra, role, cluster, ns),
    )
    return row, live


def _daemon(kube: Kube, infra: dict, role: str, live: dict, ns: str) -> str:
    """``STATUS submission-id`` of the role's daemon, ``-`` when it declares none."""
    daemon = infra["kuberay"][role].get("daemon")
    if not daemon:
        return "-"
    from nrl_k8s.flows.raycluster import latest_daemon_job
    from nrl_k8s.ray.dashboard import of_raycluster

    submission_id = raycluster.daemon_submission_id(infra, role, live["metadata"]["name"])
    try:
        with of_raycluster(kube, live, ns, retries=1) as dash:
            job = latest_daemon_job(dash.list_jobs(), submission_id)
    except NrlK8sError as err:
        return f"unknown ({err.message})"
    return f"{job.status} {job.submission_id}" if job else f"not submitted ({submission_id})"


def _rayjob(kube: Kube, infra: dict, ns: str) -> dict | None:
    if "training" not in (infra.get("kuberay") or {}):
        return None
    job = kube.find(rayjob.KIND, rayjob.job_name(infra), ns)
    if job is None:
        return None
    status = job.get("status") or {}
    return {
        "name": job["metadata"]["name"],
        "namespace": ns,
        "deployment_status": status.get("jobDeploymentStatus") or "",
        "job_status": status.get("jobStatus") or "",
        "job_id": status.get("jobId") or "",
        "raycluster": status.get("rayClusterName") or "",
        "start": status.get("startTime") or "",
        "end": status.get("endTime") or "",
        "message": status.get("message") or "",
        "held_until": _held_until(kube, job, ns),
    }


def _held_until(kube: Kube, job: dict, ns: str) -> str | None:
    """When the start lease holding the suspended RayJob ``job`` ends ("" before it has started);
    None when none holds it. Created suspended is enough: right after a run dies, KubeRay may not
    have reported the RayJob Suspended yet."""
    if not (rayjob.suspended(job) or (job.get("spec") or {}).get("suspend")):
        return None
    found = kube.find(lease.KIND, lease.name_of(job["metadata"]["name"]), ns)
    return None if found is None else lease.ends(found) or ""


def _dynamo(kube: Kube, key: str, manifest: dict, budget: fleet.Budget) -> dict:
    name, ns = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    row = {"key": key, "name": name, "namespace": ns, "state": "not found", "ready": False, "services": [],
           "frontend": None, "rl": None, "owners": [], "users": []}
    live = kube.find(dgd.kind_of(manifest), name, ns)
    if live is None:
        return row
    ready = dgd.ready_replicas(live)
    frontend, rl = fleet.observe(kube, name, ns, kube.list(pod.KIND, ns, label_selector=dgd.pod_selector(name)),
                                 budget)
    row.update(
        state=(live.get("status") or {}).get("state") or "unknown",
        ready=condition_true(live, "Ready"),
        services=[
            {"name": s.name, "type": s.component_type, "desired": s.replicas, "ready": ready.get(s.name, 0)}
            for s in dgd.services(live)
        ],
        frontend=frontend,
        rl=rl,
        owners=[f"{o['kind']} {o['name']}" for o in live["metadata"].get("ownerReferences") or []],
        users=dgd.users(live),
    )
    return row


def _left(kube: Kube, ns: str, job: dict | None, dynamo: list[dict], user: str) -> list[dict]:
    left = []
    for row in dynamo:
        if row["owners"] or not row.get("users"):
            continue  # owned (GC removes it with its cluster) or not made by a run (cluster up)
        running = usage.live(kube, row["users"], row["namespace"])
        reason = (f"no RayCluster owns it, so it outlives run {', '.join(running)} (a run that died before "
                  "linking it leaves this)" if running else
                  f"made by run {', '.join(row['users'])}, which is not running; no RayCluster owns it, so "
                  "nothing deletes it")
        left.append({"what": f"DynamoGraphDeployment {row['name']}", "reason": reason,
                     "remove": delete_command(dgd.KIND, row["name"], row["namespace"])})
    if job is not None and job["held_until"] is not None:
        left.append({"what": f"RayJob {job['name']}", "reason": "suspended and held by its start lease: if its "
                     "`nrl-k8s run` died, the lease deletes it, and the DGDs and DRA objects it owns, "
                     f"at {job['held_until'] or 'its deadline'}",
                     "remove": delete_command(rayjob.KIND, job["name"], job["namespace"])})
    if job is not None and job["deployment_status"] == "Running" and not job["job_status"]:
        left.append({"what": f"RayJob {job['name']}", "reason": "running without a driver: if no `nrl-k8s run` is "
                     "waiting to rescue it, nothing submits it", "remove": delete_command(rayjob.KIND, job["name"],
                     job["namespace"]) + "   (or: nrl-k8s cluster down RECIPE -t kuberay.training --force)"})
    left += [row for row in gc.unfinished_rows(kube, ns, user) if row["what"] not in {r["what"] for r in left}]
    listed = {row["what"] for row in left}
    return left + [row for row in gc_rows(kube, ns) if row["what"] not in listed]


def gc_rows(kube: Kube, namespace: str) -> list[dict]:
    """What `nrl-k8s gc` would delete or link in ``namespace`` (any run's), as LEFT BEHIND rows."""
    return [{"what": f"{item.kind.kind} {item.name}", "reason": f"run {item.run_id}: {item.reason}",
             "remove": f"nrl-k8s -n {namespace} gc" + ("   (links it to its run)" if item.verdict == "link" else "")}
            for item in gc.find(kube, namespace) if item.verdict != "keep"]


def _exec_driver(kube: Kube, infra: dict, record: dict | None) -> dict | None:
    if "training" not in (infra.get("kuberay") or {}):
        return None
    from .jobs import exec_drivers, role_cluster

    try:
        cluster, _ = role_cluster(kube, infra, "training")
    except NotFoundError:
        return None
    drivers = exec_drivers(kube, infra, record, cluster)
    if drivers is None:
        return None
    mine = record["job_id"] if record is not None and record.get("exec") else None
    with drivers:
        try:
            job = drivers.get_job(mine) if mine else None
            if job is None:
                listed = drivers.list_jobs()
                job = listed[-1] if listed else None
        except NrlK8sError as err:
            return {"run_id": mine or "-", "status": "unknown", "detail": err.message}
    return None if job is None else {"run_id": job.submission_id, "status": job.status, "detail": job.message}


def collect(kube: Kube, infra: dict, record: dict | None = None, *, bounds: fleet.Bounds = fleet.BOUNDS) -> dict:
    """Everything `status` shows; ``bounds``: the waits of the DYNAMO section's proxied requests."""
    ns = infra["namespace"]
    job = _rayjob(kube, infra, ns)
    budget = fleet.Budget(bounds)
    dynamo = [_dynamo(kube, key, dgd.render(infra, key), budget) for key in sorted(infra.get("dynamo") or {})]
    roles, live = [], []
    for role in sorted(infra.get("kuberay") or {}):
        row, objects = _role(kube, infra, role, ns)
        roles.append(row)
        live += objects
    owners = waiting.owners(infra, [r["cluster"] for r in roles if r["cluster"]],
                            [(d["name"], d["namespace"]) for d in dynamo])
    return {
        "namespace": ns,
        "roles": roles,
        "driver": _exec_driver(kube, infra, record),
        "rayjob": job,
        "dynamo": dynamo,
        "waiting": waiting.collect(kube, owners, live),
        "left": _left(kube, ns, job, dynamo, (infra.get("labels") or {}).get(OWNER_LABEL) or user_name(os.environ)),
    }
