"""NVIDIA Dynamo DynamoGraphDeployment (DGD): manifest loading, pure rendering, readiness.

Both served versions sit behind this one interface; the manifest's ``apiVersion`` picks the
version module holding its shape rules (``dgd_v1alpha1``: ``spec.services`` map with
``extraPodSpec.mainContainer``; ``dgd_v1beta1``: ``spec.components`` list keyed by ``name`` with
a ``podTemplate`` whose container ``main`` is the workload). Flows never ask which: they call
``kind_of(manifest)`` for the descriptor (the live object is read in the manifest's version, so
drift compares like with like) and the functions below for everything else.

``render`` builds the object from ``infra.dynamo.KEY``: a manifest file, whose ``${...}``
interpolations are resolved as the infra's are (``${user:}``, ``${oc.env:...}``..., references
relative to the file's ``spec``, or its ``metadata``) before anything reads it, as upstream
does; or an inline ``spec`` (with ``name`` and an optional ``apiVersion``, v1alpha1 by default),
part of the infra and so resolved with it. Then four steps:

1. merge ``overrides`` onto the manifest's ``.spec`` (dicts merge, lists replace; v1beta1
   components and pod-template containers merge by name);
2. ``name`` overrides ``metadata.name`` (error if neither gives one); namespace = the entry's
   namespace, else the infra namespace;
3. labels: managed-by < infra labels < manifest labels < entry labels; annotations
   infra < manifest < entry;
4. per service/component pod: the main container's image = infra image only where unset,
   ``imagePullSecrets`` only where unset, ``serviceAccountName`` never injected (the operator
   wires its own discovery service account; an explicit value is kept).

``readiness`` is the operator gate only (the status is the same in both versions); the pod and
frontend gates need the cluster (see ``pod_selector``, ``frontend_service``, ``FRONTEND_PORT``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nrl_k8s.config import safe_yaml
from nrl_k8s.kinds import k8s_rules as rules
from nrl_k8s.kinds.k8s_rules import Invalid
from nrl_k8s.kinds.names import validate_name

from ..config.interpolate import interpolate_document
from ..errors import ConfigError, InfraError, dotted
from . import dgd_v1alpha1, dgd_v1beta1, dra
from .base import MANAGED_BY, Kind, object_metadata, without_nulls
from .readiness import Failed, Pending, Readiness, Ready, condition, describe_condition

_VERSIONS = {module.KIND.api_version: module for module in (dgd_v1alpha1, dgd_v1beta1)}
KINDS = tuple(module.KIND for module in _VERSIONS.values())
#: For calls that touch only metadata when no manifest says which version (v1alpha1 is served by
#: every Dynamo release: natively before 1.2, through the operator's conversion webhook since).
KIND = dgd_v1alpha1.KIND
SUPPORTED_API_VERSIONS = tuple(_VERSIONS)
POD_LABEL = "nvidia.com/dynamo-graph-deployment-name"
FRONTEND_PORT = 8000  # the operator's frontend Service, <dgd>-frontend (port name http)
SYSTEM_PORT = 9090  # a worker's system server: the operator sets DYN_SYSTEM_PORT to it unless the env does

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


@dataclass(frozen=True)
class ServiceInfo:
    """One DGD service (v1beta1: component) as ``check`` reports it; ``gpus`` is per replica (all its nodes)."""

    name: str
    component_type: str | None
    replicas: int
    gpus: int


@dataclass(frozen=True)
class Workload:
    """One service's (v1beta1: component's) main container: what it runs and with which env."""

    name: str
    role: str | None  # frontend, worker, prefill, decode... (v1alpha1: subComponentType, else componentType)
    argv: tuple[str, ...]  # command + args
    env: dict[str, str | None]  # graph < service < container; None: a valueFrom (not in the manifest)
    env_from: bool  # more env comes from a Secret or ConfigMap (envFrom, envFromSecret)


def _version(obj: dict):
    return _VERSIONS[obj.get("apiVersion")]


def kind_of(obj: dict) -> Kind:
    """The descriptor of a DGD manifest or object, in its own version."""
    return _version(obj).KIND


def load_manifest(path: str | Path, *, where: str, env: Mapping[str, str] | None = None) -> dict:
    """The first DynamoGraphDeployment document of ``path``, interpolated (with ``env``, by
    default this process's), without server-assigned fields.

    ``where`` names the config key that points at the file (``infra.dynamo.KEY.manifest``).
    The fields nrl-k8s reads or renders are checked by type (the version's ``check_spec``);
    problems name the manifest file and the key in it.
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
            hint=f"use apiVersion: {' or '.join(reversed(SUPPORTED_API_VERSIONS))}",
        )
    manifest = {k: v for k, v in found.items() if k != "status"}
    env = os.environ if env is None else env
    for part in ("metadata", "spec"):
        if isinstance(manifest.get(part), dict):
            manifest[part] = interpolate_document(manifest[part], env, f"{path} ({part})")
    version = _VERSIONS[api_version]
    try:
        metadata = without_nulls(rules.expect(manifest.get("metadata") or {}, dict, ("metadata",)))
        for field, rule in (("labels", rules.labels), ("annotations", rules.annotations)):
            if field in metadata:
                rule(metadata[field], ("metadata", field))
        if manifest.get("spec") is None:
            raise Invalid(
                ("spec",), "is missing", f"a DGD of {api_version} declares its parts under spec.{version.FIELD}"
            )
        manifest["spec"] = version.check_spec(manifest["spec"])
    except Invalid as bad:
        raise ConfigError(
            f"{path}: {dotted(bad.path)}: {bad.problem}", hint=f"{bad.hint} (the DGD manifest named by {where})"
        ) from None
    for key in _SERVER_METADATA:
        metadata.pop(key, None)
    manifest["metadata"] = metadata
    return manifest


def render(infra: dict, key: str) -> dict:
    """The DGD object for ``infra.dynamo.KEY`` (without ownerReferences), in the manifest's version."""
    entry = (infra.get("dynamo") or {}).get(key)
    if not entry:
        raise InfraError(("dynamo", key), "is not set", hint="declare it with a manifest path")
    manifest = _source(entry, key)
    version = _version(manifest)
    meta = manifest["metadata"]
    overrides = entry.get("overrides") or {}
    spec = _merged_spec(version, manifest["spec"], overrides, key)

    if entry.get("name"):
        name = validate_name(entry["name"], what="DGD name", key=("dynamo", key, "name"))
    elif meta.get("name"):
        name = validate_name(meta["name"], what="DGD name", where=f"{entry['manifest']} metadata.name")
    else:
        raise InfraError(
            ("dynamo", key),
            "the DGD has no name",
            hint=f"set dynamo.{key}.name or metadata.name in {entry['manifest']}",
        )

    metadata = object_metadata(
        name,
        entry.get("namespace") or infra["namespace"],
        [MANAGED_BY, infra.get("labels"), meta.get("labels"), entry.get("labels")],
        [infra.get("annotations"), meta.get("annotations"), entry.get("annotations")],
        key=("dynamo", key),
    )
    metadata.update({k: v for k, v in meta.items() if k not in metadata and k not in ("labels", "annotations")})
    try:
        version.apply_pod_defaults(spec, infra.get("image"), infra.get("imagePullSecrets") or [])
    except Invalid as bad:
        raise _blame(bad, overrides, manifest["spec"], key, entry) from None
    return {"apiVersion": manifest["apiVersion"], "kind": KIND.kind, "metadata": metadata, "spec": spec}


def _source(entry: dict, key: str) -> dict:
    """The DGD an entry declares: its manifest file loaded, or its inline ``spec`` wrapped."""
    if entry.get("manifest"):
        return load_manifest(entry["manifest"], where=f"infra.dynamo.{key}.manifest")
    if not entry.get("spec"):
        raise InfraError(
            ("dynamo", key, "manifest"), "is not set", hint="point it at a DGD YAML file, or give an inline spec"
        )
    manifest = {"apiVersion": entry.get("apiVersion") or KIND.api_version, "kind": KIND.kind, "metadata": {},
                "spec": copy.deepcopy(entry["spec"])}
    try:
        manifest["spec"] = _VERSIONS[manifest["apiVersion"]].check_spec(manifest["spec"])
    except Invalid as bad:  # paths start at the object: spec.services...
        raise InfraError(("dynamo", key, *bad.path), bad.problem, bad.hint) from None
    return manifest


def _merged_spec(version, spec: dict, overrides: dict, key: str) -> dict:
    """``overrides`` merged onto the manifest's spec by the version's rules, then checked: the
    result (a secret written inline anywhere, first), then that every field they set exists."""
    where = ("dynamo", key, "overrides")
    try:
        merged = version.merge(copy.deepcopy(spec), copy.deepcopy(overrides))
    except Invalid as bad:
        raise InfraError((*where, *bad.path), bad.problem, bad.hint) from None
    try:
        merged = version.check_spec(merged)
    except Invalid as bad:
        raise InfraError((*where, *bad.path[1:]), bad.problem, bad.hint) from None
    try:
        version.check_override_fields(spec, overrides, _OVERRIDE_HINTS)
    except Invalid as bad:
        raise InfraError((*where, *bad.path), bad.problem, bad.hint) from None
    return merged


_OVERRIDE_HINTS = {"spec": "overrides merge onto the DGD's spec: drop the leading spec."}


def _blame(bad: Invalid, overrides: dict, spec: dict, key: str, entry: dict) -> ConfigError:
    """A rendered-spec problem at the override that set it (the override reaches its key, or
    further than the manifest's ``spec`` does: it added what lacks the key), else in the manifest."""
    parts = bad.path[1:]
    reached = _depth(overrides, parts)
    if reached == len(parts) or reached > _depth(spec, parts):
        return InfraError(("dynamo", key, "overrides", *parts), bad.problem, bad.hint)
    if not entry.get("manifest"):
        return InfraError(("dynamo", key, "spec", *parts), bad.problem, bad.hint)
    return ConfigError(f"{entry['manifest']}: {dotted(bad.path)}: {bad.problem}", hint=bad.hint)


def _depth(node: object, parts: tuple) -> int:
    """How many of ``parts`` lead into ``node`` (a list-map entry is found by its ``name``)."""
    for depth, part in enumerate(parts):
        if isinstance(node, list):
            node = {item.get("name"): item for item in node if isinstance(item, dict)}
        if not isinstance(node, dict) or part not in node:
            return depth
        node = node[part]
    return len(parts)


def wire_claims(manifest: dict, key: str, training_dra: list[dict], training_owner: str) -> dict:
    """``manifest`` with its pods' ``roce-channel`` / ``compute-domain-channel`` claims pointed at
    the training cluster's DRA objects (``training_dra``, owned by ``training_owner``), as upstream
    does: the DGD's workers share the training's RoCE template and IMEX domain."""
    wired = copy.deepcopy(manifest)
    dra.wire_claims(_version(wired).pod_specs(wired["spec"]), training_dra, training_owner, f"infra.dynamo.{key}")
    return wired


def services(dgd: dict) -> list[ServiceInfo]:
    """Per service (v1beta1: component): name, type, replicas and GPUs per replica."""
    return [ServiceInfo(name, type_, replicas, gpus * nodes)
            for name, type_, replicas, nodes, gpus in _version(dgd).parts(dgd.get("spec") or {})]


def workloads(dgd: dict) -> list[Workload]:
    """Per service (v1beta1: component): its main container's command line and env."""
    out = []
    for name, role, container, outer_env, from_secret in _version(dgd).main_containers(dgd.get("spec") or {}):
        entries = [e for e in [*outer_env, *(container.get("env") or [])] if isinstance(e, dict) and "name" in e]
        env = {str(e["name"]): None if "valueFrom" in e else "" if e.get("value") is None else str(e["value"])
               for e in entries}
        argv = tuple(str(word) for word in [*(container.get("command") or []), *(container.get("args") or [])])
        out.append(Workload(name, role, argv, env, from_secret or bool(container.get("envFrom"))))
    return out


def component_pods(dgd: dict) -> list[tuple[str, dict, int]]:
    """Per service (v1beta1: component): its name, the pod spec the operator makes, and how many pods."""
    return _version(dgd).component_pods(dgd.get("spec") or {})


def desired_pods(dgd: dict) -> int:
    """How many pods the DGD runs when ready (replicas × nodes, summed over services)."""
    return sum(replicas * nodes for _, _, replicas, nodes, _ in _version(dgd).parts(dgd.get("spec") or {}))


def ready_replicas(obj: dict) -> dict[str, int]:
    """Ready replicas per service (v1beta1: component) as the operator reports them."""
    observed = (obj.get("status") or {}).get(_version(obj).FIELD) or {}
    return {name: int((counts or {}).get("readyReplicas") or 0) for name, counts in observed.items()}


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
