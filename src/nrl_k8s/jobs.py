"""Ray jobs on a role's cluster: find the cluster (following a RayJob) and its dashboard."""

from __future__ import annotations

from .dashboard import Dashboard
from .errors import NotFoundError
from .kinds import raycluster, rayjob


def role_cluster(kube, infra: dict, role: str) -> tuple[str, dict | None]:
    """(RayCluster name, the RayJob of that name or None); the bare name first, then `.status.rayClusterName`."""
    name = raycluster.cluster_name(infra, role)
    ns = infra["namespace"]
    job = kube.find(rayjob.KIND, name, ns)
    if kube.find(raycluster.KIND, name, ns) is not None:
        return name, job
    if job is not None and rayjob.cluster_name(job):
        return rayjob.cluster_name(job), job
    raise NotFoundError(
        f"no RayCluster for role {role} ({name}) in namespace {ns}",
        hint=f"start it with `nrl-k8s run` or `nrl-k8s cluster up --target kuberay.{role}`",
    )


def head_service(kube, cluster: str, namespace: str) -> str:
    """The head Service of the live RayCluster ``cluster`` (``raycluster.head_service_of``)."""
    live = kube.find(raycluster.KIND, cluster, namespace)
    return raycluster.head_service_of(live) if live is not None else raycluster.head_service(cluster)


def cluster_dashboard(kube, cluster: str, namespace: str, url: str | None = None) -> Dashboard:
    """The dashboard of RayCluster ``cluster``: ``url`` when given, else through its head Service."""
    service = None if url else head_service(kube, cluster, namespace)
    return Dashboard.for_cluster(cluster_name=cluster, namespace=namespace, connection=kube.connection,
                                 in_cluster=kube.in_cluster, url=url, service=service)


def dashboard(kube, infra: dict, role: str, url: str | None = None) -> tuple[Dashboard, dict | None]:
    cluster, job = role_cluster(kube, infra, role)
    return cluster_dashboard(kube, cluster, infra["namespace"], url), job


def current_job(dash: Dashboard, job: dict | None) -> str:
    """The RayJob's job id, else the most recently started job on the cluster."""
    if job is not None and rayjob.job_id(job):
        return rayjob.job_id(job)
    jobs = sorted(dash.list_jobs(), key=lambda j: j.start_time or 0)
    if not jobs:
        raise NotFoundError("no Ray jobs on this cluster yet", hint="submit one with `nrl-k8s run`")
    return jobs[-1].submission_id or jobs[-1].job_id
