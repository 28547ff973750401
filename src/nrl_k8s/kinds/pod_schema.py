"""Pod templates and pod specs checked the way the API server checks them, before anything is applied.

Two layers, both raising ``k8s_rules.Invalid`` with a path relative to the value checked:

1. the Kubernetes OpenAPI schema (types, required fields, no unknown fields), as published by
   ``kubernetes-validate`` (its "strict" JSON schemas of the newest Kubernetes it ships) and
   checked with ``jsonschema-rs`` (the pure-Python checker costs about 0.2 s per command);
2. the value rules the API server adds (``k8s_rules``): container and volume names, images,
   ports, resource quantities, template labels and annotations.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

from nrl_k8s.kinds import k8s_rules as rules
from nrl_k8s.kinds.k8s_rules import Invalid

from ..cache import cache_dir, private_dir
from ..errors import NrlK8sError
from ..redact import redact_text

_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
_ROOTS = {"PodTemplateSpec": "pod", "PodSpec": "pod.spec", "Container": "pod.spec.containers"}


def check_pod_template(template: Any, *, rendered: bool) -> None:
    """A PodTemplateSpec. Before rendering (``rendered=False``) containers may be missing and
    images unset (nrl-k8s fills them in); a rendered template must be complete."""
    rules.expect(template, dict)
    spec = rules.expect(template.get("spec") if template.get("spec") is not None else {}, dict, ("spec",))
    _schema("PodTemplateSpec", template if rendered else {**template, "spec": {"containers": [], **spec}})
    metadata = template.get("metadata") or {}
    if metadata.get("labels") is not None:
        rules.labels(metadata["labels"], ("metadata", "labels"))
    if metadata.get("annotations") is not None:
        rules.annotations(metadata["annotations"], ("metadata", "annotations"))
    try:
        _pod_rules(spec, image_required=rendered)
    except Invalid as bad:
        raise bad.within(("spec",)) from None


def check_extra_pod_spec(pod: Any) -> None:
    """A Dynamo ``extraPodSpec``: PodSpec fields plus ``mainContainer`` (a Container, name optional)."""
    rules.expect(pod, dict)
    main = pod.get("mainContainer")
    rest = {k: v for k, v in pod.items() if k != "mainContainer"}
    _schema("PodSpec", {"containers": [], **rest})
    _pod_rules(rest, image_required=False)
    if main is not None:
        rules.expect(main, dict, ("mainContainer",))
        named = {"name": "main", **main}
        try:
            _schema("Container", named)
            _container(named, image_required=False)
        except Invalid as bad:
            raise bad.within(("mainContainer",)) from None


_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def _pod_rules(spec: dict, *, image_required: bool) -> None:
    names: set[str] = set()
    for field in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(field) or []):
            try:
                _container(container, image_required=image_required)
            except Invalid as bad:
                raise bad.within((field, index)) from None
            if container.get("name") in names:  # the API server: one name across both lists
                raise Invalid((field, index, "name"), f"{container['name']!r} is the name of another container",
                              "give every container and init container of a pod its own name")
            names.add(container.get("name"))
    for index, volume in enumerate(spec.get("volumes") or []):
        rules.dns_name(volume.get("name"), ("volumes", index, "name"), what="volume name")
    if spec.get("nodeSelector"):
        rules.labels(spec["nodeSelector"], ("nodeSelector",))


def _container(container: dict, *, image_required: bool) -> None:
    rules.dns_name(container.get("name"), ("name",), what="container name")
    rules.no_inline_secret(container.get("env"), ("env",))
    if "image" in container:
        rules.image(container["image"], ("image",))
    elif image_required:
        raise Invalid(("image",), "no image", "set infra.image, or an image on the container")
    for index, entry in enumerate(container.get("ports") or []):
        rules.port(entry.get("containerPort"), ("ports", index, "containerPort"))
        if entry.get("hostPort") is not None:
            rules.port(entry["hostPort"], ("ports", index, "hostPort"), minimum=0)
        if entry.get("name") is not None:
            rules.port_name(entry["name"], ("ports", index, "name"))
    for probe in _PROBES:
        for action in ("httpGet", "tcpSocket", "grpc"):
            port = ((container.get(probe) or {}).get(action) or {}).get("port")
            path = (probe, action, "port")
            if isinstance(port, str):  # IntOrString: text is a port name, even "8080"
                rules.port_name(port, path)
            elif port is not None:
                rules.port(port, path)
    resources = container.get("resources") or {}
    for section in ("requests", "limits"):
        for name, value in (resources.get(section) or {}).items():
            path = ("resources", section, name)
            rules.quantity(value, path)
            if "/" in name and not name.startswith("kubernetes.io/"):  # an extended resource
                whole_number(value, path)


def whole_number(value: Any, path: tuple) -> None:
    """Extended resources (GPUs, RDMA devices) are counted in whole units."""
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
        raise Invalid(
            path, f"{rules.describe(value)} is not a whole number", "devices such as GPUs are counted in whole units"
        )


def _schema(definition: str, value: Any) -> None:
    fingerprint = _fingerprint(definition, value)
    if fingerprint in _valid():
        return
    from jsonschema_rs import ValidationError

    try:
        _validators()[definition].validate(value)
    except ValidationError as err:
        raise _invalid(err, _ROOTS[definition]) from None
    _remember(fingerprint)


# -- results of the schema layer, remembered ----------------------------------------------------
# Most commands check the same templates as the previous one (the edit-and-rerun loop). What the
# schema layer accepted is remembered, by a hash of the value and of the installed schemas, in a
# private file, so a re-run neither imports jsonschema-rs nor loads the schemas (~40 ms). Only
# acceptances are kept; the value rules (``k8s_rules``) always run.

_CACHE_FORMAT = "pod-schema-1"
_CACHE_MAX_LINES = 4096  # 65 bytes each: a file never over ~270 KB


def _fingerprint(definition: str, value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{_schema_version()}\0{definition}\0{text}".encode()).hexdigest()


@functools.cache
def _schema_version() -> str:
    """What the remembered results depend on: our format and the installed schema package."""
    spec = importlib.util.find_spec("kubernetes_validate")
    origin = spec.origin if spec is not None and spec.origin else ""
    return f"{_CACHE_FORMAT}|{origin}|{os.stat(origin).st_mtime_ns if origin else 0}"


def _cache_file() -> Path:
    return cache_dir() / "pod-schema-valid"


@functools.cache
def _valid() -> set[str]:
    try:
        with open(_cache_file(), encoding="ascii", errors="replace") as handle:
            lines = handle.read(_CACHE_MAX_LINES * 65).split()
    except OSError:
        return set()
    return {line for line in lines if len(line) == 64} if len(lines) < _CACHE_MAX_LINES else set()


def _remember(fingerprint: str) -> None:
    known = _valid()
    known.add(fingerprint)
    try:
        path = _cache_file()
        private_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            if os.fstat(fd).st_size >= _CACHE_MAX_LINES * 65:  # full: start over
                os.ftruncate(fd, 0)
                known.intersection_update({fingerprint})
            handle.write(f"{fingerprint}\n")
    except OSError:
        pass  # a cache: the next command checks again


def _invalid(err: Any, root: str) -> Invalid:
    path = tuple(err.instance_path)
    kind = type(err.kind).__name__
    explain = ".".join([root, *(str(p) for p in path if isinstance(p, str))])
    if kind == "AdditionalProperties":
        field = err.kind.unexpected[0]
        return Invalid((*path, field), "unknown field", f"check the spelling; see `kubectl explain {explain}`")
    if kind == "Required":
        field = err.kind.property
        return Invalid((*path, field), "is required", f"see `kubectl explain {explain}.{field}`")
    if kind == "Type":
        wanted = " or ".join(t for t in (str(t).lower().rsplit(".", 1)[-1] for t in err.kind.types) if t != "null")
        return Invalid(
            path, f"expected {wanted}, got {rules.describe(err.instance)}", f"see `kubectl explain {explain}`"
        )
    message = redact_text(re.sub(r"\s+", " ", err.message))  # before the cut: a cut value no longer looks like one
    return Invalid(path, message if len(message) <= 160 else message[:157] + "...", f"see `kubectl explain {explain}`")


@functools.cache
def _validators() -> dict[str, Any]:
    import jsonschema_rs

    dialect, needed = _pod_definitions()
    registry = jsonschema_rs.Registry([(_DEFINITIONS_ID, {"$defs": needed})])  # a seventh of the file: faster
    return {
        name: jsonschema_rs.validator_for(
            {"$schema": dialect, "$ref": f"{_DEFINITIONS_ID}#/$defs/io.k8s.api.core.v1.{name}"}, registry=registry
        )
        for name in _ROOTS
    }


def _pod_definitions() -> tuple[str, dict]:
    """($schema, the definitions a PodTemplateSpec reaches): 50 KB of the 1.8 MB file, whose parse
    costs ~25 ms; kept in the user cache (by installed schema version) once extracted."""
    cached = cache_dir() / f"pod-schema-defs-{hashlib.sha256(_schema_version().encode()).hexdigest()[:16]}.json"
    try:
        dialect, needed = json.loads(cached.read_bytes())
        if isinstance(dialect, str) and isinstance(needed, dict) and "io.k8s.api.core.v1.PodTemplateSpec" in needed:
            return dialect, needed
    except (OSError, ValueError, TypeError):
        pass
    document = json.loads((_schema_dir() / "_definitions.json").read_text(encoding="utf-8"))
    extracted = (document["$schema"], _reachable(document["$defs"], "io.k8s.api.core.v1.PodTemplateSpec"))
    try:
        import tempfile

        fd, tmp = tempfile.mkstemp(dir=private_dir(cached.parent), prefix=".defs-")  # 0600
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(extracted, handle, separators=(",", ":"))
        os.replace(tmp, cached)
    except OSError:
        pass  # a cache: extracted again next time
    return extracted


def _reachable(definitions: dict, root: str) -> dict:
    """The definitions ``root`` refers to, directly or not, without their descriptions."""
    found: dict = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if name not in found:
            found[name] = _strip(definitions[name], todo)
    return found


def _strip(node: Any, refs: list) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            refs.append(node["$ref"].rsplit("/", 1)[-1])
        return {k: _strip(v, refs) for k, v in node.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [_strip(v, refs) for v in node]
    return node


def _schema_dir() -> Path:
    """The strict schemas of the newest Kubernetes version kubernetes-validate ships.

    Found without importing the package (its ``__init__`` imports the pure-Python jsonschema).
    """
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:
        raise NrlK8sError("kubernetes-validate is not installed", hint="reinstall nrl-k8s: pip install nrl-k8s")
    root = Path(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"
    versions = [p for p in root.glob("v*-local-strict") if (p / "_definitions.json").is_file()]
    if not versions:
        raise NrlK8sError(f"no Kubernetes schemas under {root}", hint="reinstall kubernetes-validate")
    return max(versions, key=lambda p: tuple(int(n) for n in re.findall(r"\d+", p.name)))
