"""The checks KubeRay's controllers run before reconciling (``utils/validation.go``), with its messages.

``rayjob_problem`` → ``(event reason, message)`` of the first broken rule, or None: the RayJob
then ends ``ValidationFailed``. ``raycluster_problem`` → the same for a RayCluster, which KubeRay
then leaves alone (a Warning event, no pods). Ported: name length and DNS-1035 syntax, suspend
and TTL rules, ``deletionStrategy`` exclusivity, ``clusterSelector`` and SidecarMode/
InteractiveMode restrictions, the cluster spec's containers and replica bounds (missing bounds
read as the CRD defaults 0 and 2147483647), ``runtimeEnvYAML`` syntax, positive deadlines, a
non-negative ``backoffLimit``, and ``Waiting`` only in InteractiveMode. Not ported: the GCS
fault-tolerance, autoscaler, auth, TLS, label and resource-field rules.
"""

from __future__ import annotations

import re

import yaml

MAX_RAYCLUSTER_NAME = 53
MAX_RAYJOB_NAME = MAX_RAYCLUSTER_NAME - 6  # room for "-" and the 5-character suffix of its RayCluster
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1035_MESSAGE = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
JOB_SPEC = "The RayJob spec is invalid: "


def dns1035_errors(name: str) -> list[str]:
    """apimachinery's ``IsDNS1035Label``."""
    errors = ["must be no more than 63 characters"] if len(name) > 63 else []
    return errors + ([] if _DNS1035.fullmatch(name) else [_DNS1035_MESSAGE])


def _go_list(items: list[str]) -> str:
    return "[" + " ".join(items) + "]"


def _int(spec: dict, key: str, default: int | None = None) -> int | None:
    value = spec.get(key)
    return default if value is None else int(value)


def cluster_spec_problem(spec: dict) -> str | None:
    """``ValidateRayClusterSpec``, the container and replica rules."""
    head = ((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    if not head.get("containers"):
        return "headGroupSpec should have at least one container"
    for group in spec.get("workerGroupSpecs") or []:
        name = group.get("groupName", "")
        if not (((group.get("template") or {}).get("spec") or {}).get("containers")):
            return "workerGroupSpec should have at least one container"
        low, high = _int(group, "minReplicas", 0), _int(group, "maxReplicas", 2147483647)
        if low < 0:
            return f"worker group {name} has negative minReplicas {low}"
        if high < 0:
            return f"worker group {name} has negative maxReplicas {high}"
        if low > high:
            return f"worker group {name} has minReplicas {low} greater than maxReplicas {high}"
    return None


def _deletion_problem(spec: dict, shutdown: bool) -> str | None:
    if not shutdown and (_int(spec, "ttlSecondsAfterFinished", 0) or 0) > 0:
        return JOB_SPEC + "a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished"
    strategy = spec.get("deletionStrategy")
    if strategy is None:
        return None
    legacy = strategy.get("onSuccess") is not None or strategy.get("onFailure") is not None
    rules = bool(strategy.get("deletionRules"))
    if rules and shutdown:
        return JOB_SPEC + "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"
    if rules and legacy:
        return JOB_SPEC + "Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously"
    if legacy and (strategy.get("onSuccess") is None or strategy.get("onFailure") is None):
        return ("both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy "
                "deletion policy fields of DeletionStrategy")
    if not legacy and not rules:
        return JOB_SPEC + "DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)"
    return None


def _selector_and_mode_problem(spec: dict, mode: str) -> str | None:
    selector = spec.get("clusterSelector") or {}
    if spec.get("suspend") and selector:
        return JOB_SPEC + "the ClusterSelector mode doesn't support the suspend operation"
    if spec.get("rayClusterSpec") is None and not selector:
        return JOB_SPEC + "one of RayClusterSpec or ClusterSelector must be set"
    backoff = _int(spec, "backoffLimit", 0)
    if selector:
        if not selector.get("ray.io/cluster"):
            return "cluster name in ClusterSelector should not be empty"
        if mode == "SidecarMode":
            return "ClusterSelector is not supported in SidecarMode"
        if backoff > 0:
            return JOB_SPEC + "BackoffLimit is incompatible with ClusterSelector mode"
    if mode == "InteractiveMode" and backoff > 0:
        return JOB_SPEC + "BackoffLimit is incompatible with InteractiveMode"
    if mode == "SidecarMode":
        if spec.get("submitterPodTemplate") is not None:
            return "Currently, SidecarMode doesn't support SubmitterPodTemplate"
        if spec.get("submitterConfig") is not None:
            return "Currently, SidecarMode doesn't support SubmitterConfig"
        head = (((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
        if head.get("restartPolicy") not in (None, "", "Never"):
            return "restartPolicy for head Pod should be Never or unset when using SidecarMode"
    return None


def rayjob_spec_problem(spec: dict, mode: str, *, pre_running_deadline: bool = True) -> str | None:
    """``ValidateRayJobSpec``."""
    shutdown = bool(spec.get("shutdownAfterJobFinishes"))
    if spec.get("suspend") and not shutdown:
        return JOB_SPEC + "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"
    if (_int(spec, "ttlSecondsAfterFinished", 0) or 0) < 0:
        return JOB_SPEC + "TTLSecondsAfterFinished must be a non-negative integer"
    problem = _deletion_problem(spec, shutdown) or _selector_and_mode_problem(spec, mode)
    if problem:
        return problem
    if spec.get("rayClusterSpec") is not None:
        problem = cluster_spec_problem(spec["rayClusterSpec"])
        if problem:
            return JOB_SPEC + problem
    text = spec.get("runtimeEnvYAML") or ""
    try:
        loaded = yaml.safe_load(text)
        if loaded is not None and not isinstance(loaded, dict):
            raise yaml.YAMLError(f"cannot unmarshal {type(loaded).__name__} into a map")
    except yaml.YAMLError as err:
        return f"failed to unmarshal RuntimeEnvYAML: {text}: {str(err).splitlines()[0]}"
    for key in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
        if (key != "preRunningDeadlineSeconds" or pre_running_deadline) and (_int(spec, key, 1) or 0) <= 0:
            return JOB_SPEC + f"{key} must be a positive integer"
    if _int(spec, "backoffLimit", 0) < 0:
        return JOB_SPEC + "backoffLimit must be a positive integer"
    return None


def rayjob_problem(job: dict, mode: str, *, pre_running_deadline: bool = True) -> tuple[str, str] | None:
    """KubeRay's ``validateRayJob``: (event reason, message) of the first broken rule, or None."""
    name = job["metadata"]["name"]
    if len(name) > MAX_RAYJOB_NAME:
        return "InvalidRayJobMetadata", f"The RayJob metadata is invalid: RayJob name should be no more than {MAX_RAYJOB_NAME} characters"
    if dns1035_errors(name):
        return "InvalidRayJobMetadata", ("The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: "
                                         + _go_list(dns1035_errors(name)))
    problem = rayjob_spec_problem(job.get("spec") or {}, mode, pre_running_deadline=pre_running_deadline)
    if problem:
        return "InvalidRayJobSpec", problem
    if (job.get("status") or {}).get("jobDeploymentStatus") == "Waiting" and mode != "InteractiveMode":
        return "InvalidRayJobStatus", ("The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when "
                                       "SubmissionMode is not InteractiveMode")
    return None


def raycluster_problem(cluster: dict) -> tuple[str, str] | None:
    """The RayCluster controller's metadata and spec checks: (event reason, event message) or None."""
    meta = cluster["metadata"]
    where = f"{meta['namespace']}/{meta['name']}"
    if len(meta["name"]) > MAX_RAYCLUSTER_NAME:
        problem = f"RayCluster name should be no more than {MAX_RAYCLUSTER_NAME} characters"
    elif dns1035_errors(meta["name"]):
        problem = f"RayCluster name should be a valid DNS1035 label: {_go_list(dns1035_errors(meta['name']))}"
    else:
        problem = None
    if problem:
        return "InvalidRayClusterMetadata", f"The RayCluster metadata is invalid {where}: {problem}"
    problem = cluster_spec_problem(cluster.get("spec") or {})
    return ("InvalidRayClusterSpec", f"The RayCluster spec is invalid {where}: {problem}") if problem else None
