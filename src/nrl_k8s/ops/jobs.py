"""Ray jobs on a role's cluster: find the cluster (following a RayJob) and its dashboard; and the
training cluster's exec drivers (``execdriver``), which the job commands read like Ray jobs."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from nrl_k8s.config import workflow
from nrl_k8s.errors import NotFoundError
from nrl_k8s.flows import records as runs
from nrl_k8s.kinds import raycluster, rayjob
from nrl_k8s.ray.dashboard import Dashboard, of_raycluster

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube


def role_cluster(kube: Kube, infra: dict, role: str) -> tuple[str, dict | None]:
    """(RayCluster name, the RayJob of that name or None); the bare name first, then `.status.rayClusterName`."""
    name = raycluster.cluster_name(infra, role)
    ns = infra["namespace"]
    job = kube.find(rayjob.KIND, name, ns)
    if kube.find(raycluster.KIND, name, ns) is not None:
        return name, job
    if job is not None and (created := rayjob.cluster_name(job)):
        return created, job
    raise NotFoundError(
        f"no RayCluster for role {role} ({name}) in namespace {ns}",
        hint=f"start it with `nrl-k8s run RECIPE` or `nrl-k8s cluster up RECIPE --target kuberay.{role}` "
        f"(RECIPE: its run config)",
    )


def current_job(dash: Dashboard, job: dict | None) -> str:
    """The RayJob's job id, else the most recently started job on the cluster."""
    if job is not None and (job_id := rayjob.job_id(job)):
        return job_id
    jobs = sorted(dash.list_jobs(), key=lambda j: j.start_time or 0)
    ids = [found for j in jobs if (found := j.submission_id or j.job_id)]
    if not ids:
        raise NotFoundError("no Ray jobs on this cluster yet", hint="submit one with `nrl-k8s run`")
    return ids[-1]


def exec_drivers(kube: Kube, infra: dict, record: dict | None, cluster: str):
    """The exec drivers of the training RayCluster ``cluster`` (an ``execdriver.ExecDrivers``), or None
    when no run uses the exec submitter there: neither the run record, nor the infra's submitter,
    nor a run recorded on this machine for that cluster."""
    from nrl_k8s.ray.execdriver import ExecDrivers

    dirs = [posixpath.dirname(record["exec"]["dir"])] if record is not None and record.get("exec") else []
    if workflow.submitter(infra) == "exec":
        dirs.append(workflow.exec_tmp_dir(infra))
    dirs += runs.exec_dirs(infra["namespace"], cluster)
    return ExecDrivers(kube, infra["namespace"], cluster, dirs) if dirs else None


def exec_job(kube: Kube, infra: dict, record: dict | None, cluster: str, job_id: str | None):
    """(exec drivers, job id) when job ``job_id`` of ``cluster`` is an exec driver. With no ``job_id``:
    the driver of the latest run recorded here for that cluster when it used exec, else the newest
    exec driver when the infra's submitter is exec. None: a Ray job."""
    drivers = exec_drivers(kube, infra, record, cluster)
    if drivers is None:
        return None
    latest = runs.latest_record(infra["namespace"], cluster) if job_id is None else None
    if latest is not None and latest.get("exec"):
        job_id = latest["job_id"]
    elif job_id is None and workflow.submitter(infra) == "exec":
        listed = drivers.list_jobs()
        job_id = listed[-1].submission_id if listed else None
    if job_id is None or drivers.get_job(job_id) is None:
        drivers.close()
        return None
    return drivers, job_id


def job_source(kube: Kube, infra: dict, record: dict | None, role: str, job: str | None, url: str | None = None,
               *, for_log: bool = False):
    """(where job ``job`` is read and stopped, its id): the training cluster's exec drivers when it is
    an exec driver (``exec_job``), else the role's dashboard (a ``Dashboard``). ``job`` None: the job
    the run record names (training), else the current one. ``for_log``: the values of the Secrets the
    cluster's pods read are remembered for redaction first. Close what it returns."""
    from nrl_k8s.flows.driver_log import CLUSTER_LABEL, remember_pod_secrets

    recorded = record["job_id"] if record is not None and role == "training" else None
    cluster, rayjob_obj = role_cluster(kube, infra, role)
    if for_log:
        remember_pod_secrets(kube, infra["namespace"], f"{CLUSTER_LABEL}={cluster}")
    if role == "training" and (found := exec_job(kube, infra, record, cluster, job or recorded)):
        return found
    dash = of_raycluster(kube, cluster, infra["namespace"], url=url)
    try:
        return dash, job or recorded or current_job(dash, rayjob_obj)
    except BaseException:
        dash.close()
        raise


def list_jobs(kube: Kube, infra: dict, record: dict | None, role: str, url: str | None = None) -> list:
    """The Ray jobs on the role's cluster, then (training) its exec drivers, as ``JobInfo``."""
    cluster, _ = role_cluster(kube, infra, role)
    with of_raycluster(kube, cluster, infra["namespace"], url=url) as dash:
        found = dash.list_jobs()
    drivers = exec_drivers(kube, infra, record, cluster) if role == "training" else None
    if drivers is not None:
        with drivers:
            found += drivers.list_jobs()
    return found
