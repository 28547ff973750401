"""KubeRay RayJob: descriptor, pure rendering of the training run (and its Secret), readiness.

A run is two objects: the RayJob and one Secret named after the run id (``render_secret``)
holding ``recipe.yaml`` (the final recipe) and every ``infra.launch.env`` value. All of
launch.env goes through the Secret, not only secret-looking names, so no value ever appears in
the RayJob, whatever its name. The Ray container (the first one) of the head and of every
worker group gets ``NRL_K8S_RUN_ID``, ``NRL_K8S_RECIPE`` and each launch.env name as a
``secretKeyRef`` (replacing an entry of the same name), and the recipe mounted read-only at
``/etc/nrl-k8s/run``. The run makes the RayJob the Secret's owner once both exist.
"""

from __future__ import annotations

import copy
from typing import TypeGuard

from nrl_k8s.config import recipe as recipe_mod
from nrl_k8s.kinds.names import MAX_RAYJOB_NAME_LEN, validate_name

from . import dra, raycluster, secret
from .base import MANAGED_BY, Kind, object_metadata
from .readiness import Failed, Pending, Readiness, Ready

KIND = Kind("ray.io", "v1", "rayjobs", "RayJob")
RUN_ID_LABEL = "nrl-k8s.io/run-id"
# 0: KubeRay frees the cluster (and the DGDs and DRA objects it owns) as the job ends; no GPU waits
# (upstream keeps it 3600 s). `run --wait` keeps the driver's log beside the run record.
DEFAULT_TTL_SECONDS = 0
# ... but a run that follows its job (`run --wait`) sets this TTL and deletes the cluster itself once
# the driver's log is in: Ray writes a short job's log as it ends, and a cluster deleted at once takes
# the log's end with its head. The TTL frees the GPUs should the run die first.
LOG_GRACE_S = 30
TERMINAL_DEPLOYMENT_STATUSES = frozenset({"Complete", "Failed", "ValidationFailed"})
SUSPENDED = "Suspended"
RUN_VOLUME = "nrl-k8s-run"
INTERACTIVE_MODE = "InteractiveMode"


def job_name(infra: dict) -> str:
    """The validated RayJob name (``infra.kuberay.training.name``)."""
    return validate_name(
        raycluster.role_entry(infra, "training").get("name"),
        what="RayJob name",
        key=("kuberay", "training", "name"),
        max_len=MAX_RAYJOB_NAME_LEN,
        letter_first=True,
    )


def render(
    infra: dict,
    run_id: str,
    *,
    shutdown: bool = True,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    active_deadline_seconds: int | None = None,
    pre_running_deadline_seconds: int | None = None,
    suspend: bool = False,
) -> dict:
    """The RayJob of run ``run_id`` on a fresh cluster; the recipe and launch.env reach its driver
    through ``render_secret(infra, recipe, run_id)``.

    With ``pre_running_deadline_seconds`` (``run --parallel``) the RayJob is in InteractiveMode:
    KubeRay brings the cluster up and waits for ``spec.jobId`` (the run submits the driver and
    then sets it), and fails the RayJob (deleting its cluster) when that does not happen in time.
    With ``suspend`` (the serial run) KubeRay makes nothing until the run resumes it (``resume_patch``).
    """
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
        key=("kuberay", "training"),
    )
    spec: dict[str, object] = {
        "entrypoint": recipe_mod.driver_entrypoint(infra),
        "submissionMode": "HTTPMode" if pre_running_deadline_seconds is None else INTERACTIVE_MODE,
        "shutdownAfterJobFinishes": shutdown,
    }
    if suspend:
        spec["suspend"] = True
    if pre_running_deadline_seconds is not None:
        spec["preRunningDeadlineSeconds"] = pre_running_deadline_seconds
    if shutdown:
        spec["ttlSecondsAfterFinished"] = ttl_seconds
    if active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = active_deadline_seconds
    spec["rayClusterSpec"] = cluster_spec = raycluster.render_spec(infra, "training")
    _deliver(cluster_spec, run_id, list(recipe_mod.launch_env(infra)))
    return {"apiVersion": KIND.api_version, "kind": KIND.kind, "metadata": metadata, "spec": spec}


def held(job: dict) -> dict:
    """A suspended ``job`` as the run creates it: without its Kueue queue label, since Kueue
    admits a queued job (clearing ``suspend``) on its own, whatever the DGDs' state."""
    labels = {k: v for k, v in job["metadata"]["labels"].items() if k != raycluster.KUEUE_QUEUE_LABEL}
    return {**job, "metadata": {**job["metadata"], "labels": labels}}


def resume_patch(job: dict) -> dict:
    """What hands the suspended ``job`` over once its DGDs serve: ``suspend`` cleared, or with a
    Kueue queue its label given back (Kueue then clears ``suspend`` when it admits the job)."""
    queue = job["metadata"]["labels"].get(raycluster.KUEUE_QUEUE_LABEL)
    return {"metadata": {"labels": {raycluster.KUEUE_QUEUE_LABEL: queue}}} if queue else {"spec": {"suspend": False}}


def suspended(obj: dict) -> bool:
    """KubeRay has suspended it: no cluster, and a cluster name only after it is resumed."""
    return (obj.get("status") or {}).get("jobDeploymentStatus") == SUSPENDED


def render_with_dra(infra: dict, run_id: str, **options) -> tuple[dict, list[dict]]:
    """``render(infra, run_id, **options)`` with its DRA claims rewritten, and the DRA objects
    they need, named after the RayJob (the run makes its RayCluster their owner once it exists)."""
    job = render(infra, run_id, **options)
    objects = dra.render_for_pods(raycluster.pod_specs(job["spec"]["rayClusterSpec"]), job["metadata"]["name"], infra)
    return job, objects


def render_secret(infra: dict, recipe: dict, run_id: str) -> dict:
    """The run's Secret: ``recipe.yaml`` and one key per launch.env name (its value)."""
    data = {recipe_mod.RECIPE_KEY: recipe_mod.recipe_text(recipe), **recipe_mod.launch_env(infra)}
    labels = [MANAGED_BY, infra.get("labels"), {RUN_ID_LABEL: run_id}]
    return secret.render(run_id, infra["namespace"], labels, data,
                         hint="the Secret carries the recipe and infra.launch.env: make the recipe smaller")


def _deliver(cluster_spec: dict, run_id: str, env_names: list[str]) -> None:
    """Wire the run Secret (named ``run_id``) into the Ray container of the head and every worker group."""
    env = [
        {"name": recipe_mod.RUN_ID_ENV, "value": run_id},
        {"name": recipe_mod.RECIPE_ENV, "value": recipe_mod.RECIPE_PATH},
    ]
    volume = secret.volume(RUN_VOLUME, run_id, [recipe_mod.RECIPE_KEY])
    mount = {"name": RUN_VOLUME, "mountPath": recipe_mod.RUN_DIR, "readOnly": True}
    for pod, ray in _ray_containers(cluster_spec):
        _put(pod.setdefault("volumes", []), volume, "name")
        _put(ray.setdefault("volumeMounts", []), mount, "mountPath")
        for entry in env:
            _put(ray.setdefault("env", []), entry, "name")
    wire_env(cluster_spec, run_id, env_names)


def wire_env(cluster_spec: dict, secret_name: str, env_names: list[str]) -> None:
    """Each env name read from the same key of Secret ``secret_name``, in every Ray container."""
    for _, ray in _ray_containers(cluster_spec):
        for name in env_names:
            _put(ray.setdefault("env", []), secret.env_ref(name, secret_name, name), "name")


def _ray_containers(cluster_spec: dict):
    """(pod spec, Ray container) of the head and every worker group."""
    for group in [cluster_spec["headGroupSpec"], *(cluster_spec.get("workerGroupSpecs") or [])]:
        pod = group["template"]["spec"]
        yield pod, pod["containers"][0]


def _put(items: list[dict], item: dict, key: str) -> None:
    """A copy of ``item`` replaces the entry with the same ``key`` in place, else is appended."""
    item = copy.deepcopy(item)
    for i, current in enumerate(items):
        if current.get(key) == item[key]:
            items[i] = item
            return
    items.append(item)


def interactive(obj: dict) -> bool:
    """A RayJob that waits for the run to submit its driver (``run --parallel``)."""
    return (obj.get("spec") or {}).get("submissionMode") == INTERACTIVE_MODE


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


def live(obj: dict | None) -> TypeGuard[dict]:
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
