"""NVIDIA Dynamo DynamoGraphDeployment (DGD): manifest loading, pure rendering, readiness.

``render`` builds the object from ``infra.dynamo.KEY`` in four steps:

1. deep-merge ``overrides`` onto the manifest's ``.spec`` (dicts merge, lists replace);
2. ``name`` overrides ``metadata.name`` (error if neither gives one); namespace = the entry's
   namespace, else the infra namespace;
3. labels: managed-by < infra labels < manifest labels < entry labels; annotations
   infra < manifest < entry;
4. per service ``extraPodSpec``: ``mainContainer.image`` = infra image only where unset,
   ``imagePullSecrets`` only where unset, ``serviceAccountName`` never injected (the operator
   wires its own discovery service account; an explicit value is kept).

``readiness`` is the operator gate only; the pod and frontend gates need the cluster (see
``pod_selector``, ``frontend_service``, ``FRONTEND_PORT``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import yaml
from deepmerge import Merger

from ..errors import ConfigError
from ..names import validate_name
from .base import MANAGED_BY, Failed, Kind, Pending, Readiness, Ready, condition, describe_condition, object_metadata
from .raycluster import pull_secret_refs

KIND = Kind("nvidia.com", "v1alpha1", "dynamographdeployments", "DynamoGraphDeployment")
SUPPORTED_API_VERSIONS = (KIND.api_version,)
POD_LABEL = "nvidia.com/dynamo-graph-deployment-name"
FRONTEND_PORT = 8000

# Metadata the API server assigns; a manifest exported from a cluster must not carry it back.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
)
_SPEC_MERGER = Merger([(dict, ["merge"]), (list, ["override"])], ["override"], ["override"])


@dataclass(frozen=True)
class ServiceInfo:
    """One DGD service as ``check`` reports it; ``gpus`` is per replica (all its nodes)."""

    name: str
    component_type: str | None
    replicas: int
    gpus: int


def load_manifest(path: str | Path, *, where: str) -> dict:
    """The first DynamoGraphDeployment document of ``path``, without server-assigned fields.

    ``where`` names the config key that points at the file (``infra.dynamo.KEY.manifest``).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{where}: DGD manifest {path} not found", hint=f"fix the path in {where}") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise ConfigError(f"{where}: cannot read DGD manifest {path}: {err}") from None
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{at}: malformed YAML in the DGD manifest ({problem})", hint=f"referenced by {where}") from None
    found = next((d for d in docs if isinstance(d, dict) and d.get("kind") == KIND.kind), None)
    if found is None:
        kinds = sorted({str(d.get("kind")) for d in docs if isinstance(d, dict)})
        seen = f" (found: {', '.join(kinds)})" if kinds else ""
        raise ConfigError(
            f"{where}: {path} has no {KIND.kind} document{seen}",
            hint=f"point {where} at a DGD manifest (kind: {KIND.kind})",
        )
    api_version = found.get("apiVersion")
    if api_version not in SUPPORTED_API_VERSIONS:
        raise ConfigError(
            f"{where}: {path} uses apiVersion {api_version!r}, which nrl-k8s does not support",
            hint=f"use apiVersion: {KIND.api_version} (served by every Dynamo operator release)",
        )
    manifest = copy.deepcopy(found)
    manifest.pop("status", None)
    metadata = manifest.get("metadata") or {}
    for key in _SERVER_METADATA:
        metadata.pop(key, None)
    manifest["metadata"] = metadata
    return manifest


def render(infra: dict, key: str) -> dict:
    """The DGD object for ``infra.dynamo.KEY`` (without ownerReferences)."""
    entry = (infra.get("dynamo") or {}).get(key)
    where = f"infra.dynamo.{key}"
    if not entry:
        raise ConfigError(f"{where} is not set", hint="declare it with a manifest path")
    if not entry.get("manifest"):
        raise ConfigError(f"{where}.manifest is not set", hint="point it at a DGD YAML file")
    manifest = load_manifest(entry["manifest"], where=f"{where}.manifest")
    meta = manifest["metadata"]

    spec = copy.deepcopy(manifest.get("spec") or {})
    if entry.get("overrides"):
        spec = _SPEC_MERGER.merge(spec, copy.deepcopy(entry["overrides"]))

    if entry.get("name"):
        name = validate_name(entry["name"], what="DGD name", where=f"{where}.name")
    elif meta.get("name"):
        name = validate_name(meta["name"], what="DGD name", where=f"{entry['manifest']} metadata.name")
    else:
        raise ConfigError(f"{where}: the DGD has no name", hint=f"set {where}.name or metadata.name in {entry['manifest']}")

    metadata = object_metadata(
        name,
        entry.get("namespace") or infra["namespace"],
        [MANAGED_BY, infra.get("labels"), meta.get("labels"), entry.get("labels")],
        [infra.get("annotations"), meta.get("annotations"), entry.get("annotations")],
    )
    metadata.update({k: v for k, v in meta.items() if k not in metadata and k not in ("labels", "annotations")})

    for service in (spec.get("services") or {}).values():
        _patch_service(service, infra)
    return {"apiVersion": manifest["apiVersion"], "kind": KIND.kind, "metadata": metadata, "spec": spec}


def _patch_service(service: dict, infra: dict) -> None:
    image = infra.get("image")
    secrets = infra.get("imagePullSecrets") or []
    pod = service.get("extraPodSpec") or {}
    if image and not (pod.get("mainContainer") or {}).get("image"):
        pod.setdefault("mainContainer", {})["image"] = image
    if secrets and not pod.get("imagePullSecrets"):
        pod["imagePullSecrets"] = pull_secret_refs(secrets)
    if pod:
        service["extraPodSpec"] = pod


def services(dgd: dict) -> list[ServiceInfo]:
    """Per service: name, component type, replicas and GPUs per replica."""
    out = []
    for name, svc in ((dgd.get("spec") or {}).get("services") or {}).items():
        resources = svc.get("resources") or {}
        per_pod = (resources.get("limits") or {}).get("gpu") or (resources.get("requests") or {}).get("gpu") or 0
        nodes = (svc.get("multinode") or {}).get("nodeCount") or 1
        replicas = svc.get("replicas")
        out.append(
            ServiceInfo(
                name=name,
                component_type=svc.get("componentType"),
                replicas=1 if replicas is None else int(replicas),
                gpus=int(per_pod) * int(nodes),
            )
        )
    return out


def desired_pods(dgd: dict) -> int:
    """How many pods the DGD runs when ready (replicas × nodes, summed over services)."""
    total = 0
    for svc in ((dgd.get("spec") or {}).get("services") or {}).values():
        replicas = svc.get("replicas")
        total += (1 if replicas is None else int(replicas)) * int((svc.get("multinode") or {}).get("nodeCount") or 1)
    return total


def owner_reference(obj: dict) -> dict:
    """A non-controlling ownerReference to ``obj`` (any kind), for garbage collection only.

    Kubernetes ignores owners in another namespace (and may then delete the dependent), so
    only point a namespaced object at an owner in its own namespace.
    """
    metadata = obj.get("metadata") or {}
    if not metadata.get("uid") or not metadata.get("name"):
        raise ValueError("owner_reference needs an object read from the API server (metadata.name and uid)")
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": False,
        "blockOwnerDeletion": False,
    }


def readiness(obj: dict) -> Readiness:
    """The operator gate: state successful, Ready condition True, observedGeneration current."""
    status = obj.get("status") or {}
    state = status.get("state") or "unknown"
    conditions = status.get("conditions") or []
    messages = "; ".join(describe_condition(c) for c in conditions if c.get("status") != "True")
    if state == "failed":
        return Failed(f"state=failed: {messages}" if messages else "state=failed")
    ready = condition(obj, "Ready")
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if state != "successful":
        return Pending(f"state={state}: {messages}" if messages else f"state={state}")
    if ready is not None and ready.get("status") != "True":
        return Pending(f"state=successful but {describe_condition(ready)}")
    if generation is not None and observed is not None and observed < generation:
        return Pending(f"state=successful for generation {observed}, waiting for generation {generation}")
    return Ready()


def pod_selector(name: str) -> str:
    """Label selector for the pods of DGD ``name``."""
    return f"{POD_LABEL}={name}"


def frontend_service(name: str) -> str:
    """The frontend ClusterIP Service of DGD ``name`` (port ``FRONTEND_PORT``)."""
    return f"{name}-frontend"


# -- users: the runs (RayJob names) that use a DGD ------------------------------------------
# A run that creates a DGD lists itself at creation; a run that reuses one adds itself with a
# version-guarded patch. Rollback never deletes a DGD that another live run lists.
USERS_ANNOTATION = "nrl-k8s.io/users"


def users(obj: dict) -> list[str]:
    """The runs listed in ``USERS_ANNOTATION`` (in the order they were added)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(USERS_ANNOTATION) or ""
    return [name for name in (part.strip() for part in value.split(",")) if name]


def with_user(manifest: dict, run: str) -> dict:
    """``manifest`` listing ``run`` as its (first) user."""
    metadata = manifest["metadata"]
    annotations = {**(metadata.get("annotations") or {}), USERS_ANNOTATION: run}
    return {**manifest, "metadata": {**metadata, "annotations": annotations}}


def users_patch(obj: dict, *, add: str | None = None, remove: str | None = None) -> dict | None:
    """A merge patch adding or removing one user; None when nothing changes."""
    current = users(obj)
    wanted = [name for name in current if name != remove]
    if add and add not in wanted:
        wanted.append(add)
    if wanted == current:
        return None
    return {"metadata": {"annotations": {USERS_ANNOTATION: ",".join(wanted) or None}}}
