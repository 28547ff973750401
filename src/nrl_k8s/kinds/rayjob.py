"""KubeRay RayJob: descriptor, pure rendering of the training run, readiness."""

from __future__ import annotations

from .. import recipe as recipe_mod
from ..names import MAX_RAYJOB_NAME_LEN, validate_name
from . import raycluster
from .base import MANAGED_BY, Failed, Kind, Pending, Readiness, Ready, object_metadata

KIND = Kind("ray.io", "v1", "rayjobs", "RayJob")
RUN_ID_LABEL = "nrl-k8s.io/run-id"
DEFAULT_TTL_SECONDS = 3600
TERMINAL_DEPLOYMENT_STATUSES = frozenset({"Complete", "Failed", "ValidationFailed"})


def job_name(infra: dict) -> str:
    """The validated RayJob name (``infra.kuberay.training.name``)."""
    return validate_name(
        raycluster.role_entry(infra, "training").get("name"),
        what="RayJob name",
        where="infra.kuberay.training.name",
        max_len=MAX_RAYJOB_NAME_LEN,
    )


def render(
    infra: dict,
    recipe: dict,
    run_id: str,
    *,
    shutdown: bool = True,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    active_deadline_seconds: int | None = None,
) -> dict:
    """The RayJob running ``recipe`` (the final copy, after ``inject_dynamo``) on a fresh cluster."""
    entry = raycluster.role_entry(infra, "training")
    metadata = object_metadata(
        job_name(infra),
        infra["namespace"],
        [
            MANAGED_BY,
            infra.get("labels"),
            raycluster.scheduler_labels(infra),
            entry.get("labels"),
            {raycluster.ROLE_LABEL: "training", RUN_ID_LABEL: run_id},
        ],
        [infra.get("annotations"), entry.get("annotations")],
    )
    spec = {
        "entrypoint": recipe_mod.driver_entrypoint(infra, recipe, run_id),
        "submissionMode": "HTTPMode",
        "shutdownAfterJobFinishes": shutdown,
    }
    if shutdown:
        spec["ttlSecondsAfterFinished"] = ttl_seconds
    if active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = active_deadline_seconds
    spec["rayClusterSpec"] = raycluster.render_spec(infra, "training")
    return {"apiVersion": KIND.api_version, "kind": KIND.kind, "metadata": metadata, "spec": spec}


def cluster_name(obj: dict) -> str | None:
    """The RayCluster KubeRay created for this RayJob (never compute it, read it)."""
    return (obj.get("status") or {}).get("rayClusterName") or None


def job_id(obj: dict) -> str | None:
    """The submission id KubeRay uses for the driver."""
    return (obj.get("status") or {}).get("jobId") or None


def terminal(obj: dict) -> bool:
    return (obj.get("status") or {}).get("jobDeploymentStatus") in TERMINAL_DEPLOYMENT_STATUSES


def driver_submitted(obj: dict) -> bool:
    """KubeRay fills ``jobStatus`` only from the dashboard's record of the job: the driver exists."""
    return bool((obj.get("status") or {}).get("jobStatus"))


def live(obj: dict | None) -> bool:
    """A RayJob that exists and has not reached a terminal deployment status."""
    return obj is not None and not terminal(obj)


def readiness(obj: dict) -> Readiness:
    """Ready when the job completed with SUCCEEDED; Failed on any other terminal state."""
    status = obj.get("status") or {}
    deployment = status.get("jobDeploymentStatus") or ""
    job = status.get("jobStatus") or ""
    detail = ": ".join(str(status[k]) for k in ("reason", "message") if status.get(k))
    if deployment in TERMINAL_DEPLOYMENT_STATUSES:
        if deployment == "Complete" and job == "SUCCEEDED":
            return Ready(f"job {job}")
        text = f"RayJob {deployment}, job {job or 'unknown'}"
        return Failed(f"{text} ({detail})" if detail else text)
    text = f"RayJob {deployment or 'New'}, job {job or 'not submitted'}"
    return Pending(f"{text} ({detail})" if detail else text)
