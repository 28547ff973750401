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
import os
from dataclasses import dataclass
from pathlib import Path

from deepmerge import Merger

from .. import k8s_rules as rules
from .. import safe_yaml
from ..errors import ConfigError, InfraError, dotted
from ..k8s_rules import Invalid
from ..names import validate_name
from .base import MANAGED_BY, Failed, Kind, Pending, Readiness, Ready, condition, describe_condition, object_metadata
from .base import without_nulls
from .pod_schema import check_extra_pod_spec, whole_number
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
    The fields nrl-k8s reads or renders are checked by type (``check_spec``); problems name
    the manifest file and the key in it.
    """
    path = Path(path)
    if not os.path.lexists(path):
        raise ConfigError(f"{where}: DGD manifest {path} not found", hint=f"fix the path in {where}")
    try:
        docs = safe_yaml.load_documents(path)
    except ConfigError as err:
        raise ConfigError(err.message, hint=f"{err.hint} (the DGD manifest named by {where})") from None
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
    manifest = {k: v for k, v in found.items() if k != "status"}
    try:
        metadata = without_nulls(rules.expect(manifest.get("metadata") or {}, dict, ("metadata",)))
        for field, rule in (("labels", rules.labels), ("annotations", rules.annotations)):
            if field in metadata:
                rule(metadata[field], ("metadata", field))
        if manifest.get("spec") is None:
            raise Invalid(("spec",), "is missing", "a DGD declares its services under spec.services")
        manifest["spec"] = check_spec(manifest["spec"])
    except Invalid as bad:
        raise ConfigError(f"{path}: {dotted(bad.path)}: {bad.problem}", hint=f"{bad.hint} (the DGD manifest named by {where})") from None
    for key in _SERVER_METADATA:
        metadata.pop(key, None)
    manifest["metadata"] = metadata
    return manifest


def check_spec(spec: object) -> dict:
    """``spec`` without null entries, if the fields nrl-k8s reads and renders have their types.

    Every service is a mapping; replicas, resources, multinode and ``extraPodSpec`` (a Kubernetes
    PodSpec plus ``mainContainer``) are checked the way the operator and Kubernetes read them.
    """
    spec = without_nulls(rules.expect(spec, dict, ("spec",)))
    services = spec.get("services")
    if not services:
        problem = "is missing" if services is None else "is empty"
        raise Invalid(("spec", "services"), problem, "declare the graph's services, e.g. a Frontend and a worker")
    for name, service in rules.expect(services, dict, ("spec", "services")).items():
        _check_service(service, ("spec", "services", name))
    return spec


def _check_service(service: object, path: tuple) -> None:
    rules.expect(service, dict, path)
    if "componentType" in service:
        rules.expect(service["componentType"], str, (*path, "componentType"))
    if "replicas" in service:
        rules.count(service["replicas"], (*path, "replicas"), what="a replica count")
    resources = rules.expect(service.get("resources", {}), dict, (*path, "resources"))
    for section in ("requests", "limits"):
        for name, value in rules.expect(resources.get(section, {}), dict, (*path, "resources", section)).items():
            at = (*path, "resources", section, name)
            rules.quantity(value, at)
            if name == "gpu":
                whole_number(value, at)
    multinode = rules.expect(service.get("multinode", {}), dict, (*path, "multinode"))
    if "nodeCount" in multinode:
        rules.count(multinode["nodeCount"], (*path, "multinode", "nodeCount"), minimum=1, what="a node count")
    if "extraPodSpec" in service:
        try:
            check_extra_pod_spec(service["extraPodSpec"])
        except Invalid as bad:
            raise bad.within((*path, "extraPodSpec")) from None


def render(infra: dict, key: str) -> dict:
    """The DGD object for ``infra.dynamo.KEY`` (without ownerReferences)."""
    entry = (infra.get("dynamo") or {}).get(key)
    if not entry:
        raise InfraError(("dynamo", key), "is not set", hint="declare it with a manifest path")
    if not entry.get("manifest"):
        raise InfraError(("dynamo", key, "manifest"), "is not set", hint="point it at a DGD YAML file")
    manifest = load_manifest(entry["manifest"], where=f"infra.dynamo.{key}.manifest")
    meta = manifest["metadata"]
    overrides = entry.get("overrides") or {}
    spec = _merged_spec(manifest["spec"], overrides, key)

    if entry.get("name"):
        name = validate_name(entry["name"], what="DGD name", key=("dynamo", key, "name"))
    elif meta.get("name"):
        name = validate_name(meta["name"], what="DGD name", where=f"{entry['manifest']} metadata.name")
    else:
        raise InfraError(("dynamo", key), "the DGD has no name", hint=f"set dynamo.{key}.name or metadata.name in {entry['manifest']}")

    metadata = object_metadata(
        name,
        entry.get("namespace") or infra["namespace"],
        [MANAGED_BY, infra.get("labels"), meta.get("labels"), entry.get("labels")],
        [infra.get("annotations"), meta.get("annotations"), entry.get("annotations")],
        key=("dynamo", key),
    )
    metadata.update({k: v for k, v in meta.items() if k not in metadata and k not in ("labels", "annotations")})

    for service_name, service in spec["services"].items():
        _patch_service(service, infra)
        if "extraPodSpec" in service:
            try:
                check_extra_pod_spec(service["extraPodSpec"])
            except Invalid as bad:
                raise _blame(bad.within(("spec", "services", service_name, "extraPodSpec")), overrides, key, entry) from None
    return {"apiVersion": manifest["apiVersion"], "kind": KIND.kind, "metadata": metadata, "spec": spec}


def _merged_spec(spec: dict, overrides: dict, key: str) -> dict:
    """``overrides`` deep-merged onto the manifest's spec; they may only name services it has."""
    where = ("dynamo", key, "overrides")
    if "services" in overrides:
        named = overrides["services"]
        if not isinstance(named, dict):
            raise InfraError((*where, "services"), f"expected a mapping of service names, got {rules.describe(named)}",
                             hint="e.g. services: {VllmDecodeWorker: {replicas: 2}}")
        for name, service in named.items():
            if name not in spec["services"]:
                known = ", ".join(spec["services"])
                raise InfraError((*where, "services", name), "the DGD manifest has no such service",
                                 hint=f"its services are: {known}")
            if not isinstance(service, dict):
                raise InfraError((*where, "services", name), f"expected a mapping, got {rules.describe(service)}",
                                 hint="override fields of the service, e.g. replicas: 2")
    merged = _SPEC_MERGER.merge(copy.deepcopy(spec), copy.deepcopy(overrides))
    try:
        return check_spec(merged)
    except Invalid as bad:
        raise InfraError((*where, *bad.path[1:]), bad.problem, bad.hint) from None


def _blame(bad: Invalid, overrides: dict, key: str, entry: dict) -> ConfigError:
    """A rendered-spec problem at the override that set it, else in the manifest."""
    node: object = overrides
    for part in bad.path[1:]:
        if not isinstance(node, dict) or part not in node:
            return ConfigError(f"{entry['manifest']}: {dotted(bad.path)}: {bad.problem}", hint=bad.hint)
        node = node[part]
    return InfraError(("dynamo", key, "overrides", *bad.path[1:]), bad.problem, bad.hint)


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
