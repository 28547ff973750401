"""The infra schema: every accepted field, its type, enum, default and cross-field rule.

`validate(infra, provenance)` checks a merged, interpolated infra mapping and returns a
normalised copy (string maps coerced to strings, image pull secrets as names, defaults
filled). Errors name the dotted key and the file that set it. Values Kubernetes checks
(quantities, labels, annotations, images, ports, names) follow its rules (`k8s_rules`). Free-form
fields (`spec`, `overrides`, `affinity`, `tolerations`) are type-checked here; the renderers check
what they render from them against Kubernetes.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds import k8s_rules
from nrl_k8s.kinds.k8s_rules import DNS_LABEL, Invalid, describe

from .provenance import Provenance, dotted

_TYPE_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "list", dict: "mapping"}


class _Context:
    def __init__(self, provenance: Provenance):
        self.provenance = provenance

    def error(self, path: tuple, problem: str, hint: str) -> ConfigError:
        return ConfigError(f"{self.provenance.label(path)}: infra key '{dotted(path)}': {problem}", hint=hint)

    def expected(self, path: tuple, expected: str, value: Any) -> ConfigError:
        if expected in ("string", "a string") and isinstance(value, (int, float)):
            shown = str(value).lower() if isinstance(value, bool) else value
            hint = f'quote the value to make it a string, e.g. {path[-1]}: "{shown}"'
        else:
            hint = f"set '{dotted(path)}' to {expected}"
        return self.error(path, f"expected {expected}, got {describe(value)}", hint)

    def container(self, value: Any, path: tuple, kind: type) -> Any:
        """``value`` when it is a ``kind`` (a list or a mapping), else the error that says so."""
        if not isinstance(value, kind):
            raise self.expected(path, f"a {_TYPE_NAMES[kind]}", value)
        return value


def _is(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


@dataclass(frozen=True)
class Scalar:
    """A string/number/boolean leaf, optionally restricted to `choices`, a `minimum`, or a DNS-1123 label."""

    types: tuple[type, ...] = (str,)
    choices: tuple[str | bool, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    dns_label: bool = False

    def validate(self, value: Any, path: tuple, ctx: _Context) -> Any:
        if not any(_is(value, t) for t in self.types):
            raise ctx.expected(path, " or ".join(_TYPE_NAMES[t] for t in self.types), value)
        if self.choices and not any(value == c and type(value) is type(c) for c in self.choices):
            shown = [str(c).lower() if isinstance(c, bool) else c for c in self.choices]
            problem = f"expected one of {'|'.join(shown)}, got {describe(value)}"
            raise ctx.error(path, problem, f"use one of: {', '.join(shown)}")
        if self.minimum is not None and _is(value, float) and value < self.minimum:
            raise ctx.error(
                path,
                f"expected a number >= {self.minimum}, got {describe(value)}",
                f"use a value of at least {self.minimum}",
            )
        if self.maximum is not None and _is(value, float) and value > self.maximum:
            raise ctx.error(
                path,
                f"expected a number <= {self.maximum}, got {describe(value)}",
                f"use a value of at most {self.maximum}",
            )
        if self.dns_label and (len(value) > 63 or not DNS_LABEL.fullmatch(value)):
            hint = "use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
            raise ctx.error(path, f"{value!r} is not a valid Kubernetes name", hint)
        return value


@dataclass(frozen=True)
class Rule:
    """A value Kubernetes checks: ``check(value)`` is a ``k8s_rules`` function raising Invalid,
    applied after ``base`` (e.g. the string check, with its hints) when given."""

    check: Callable[[Any], object]
    base: Any = None

    def validate(self, value: Any, path: tuple, ctx: _Context) -> Any:
        if self.base is not None:
            value = self.base.validate(value, path, ctx)
        try:
            self.check(value)
        except Invalid as bad:
            raise ctx.error((*path, *bad.path), bad.problem, bad.hint) from None
        return value


@dataclass(frozen=True)
class StrMap:
    """A mapping of string keys to strings; scalar values are coerced to strings, then ``rule`` applies."""

    rule: Callable[[Any], None] | None = None

    def validate(self, value: Any, path: tuple, ctx: _Context) -> dict:
        if not isinstance(value, dict):
            raise ctx.expected(path, "a mapping of strings", value)
        result = {}
        for key, item in value.items():
            if isinstance(item, bool):
                item = "true" if item else "false"
            elif isinstance(item, (int, float)):
                item = str(item)
            elif not isinstance(item, str):
                raise ctx.expected((*path, key), "a string", item)
            result[str(key)] = item
        return Rule(self.rule).validate(result, path, ctx) if self.rule else result


@dataclass(frozen=True)
class Free:
    """A free-form mapping or list: only its container type is checked."""

    kind: type = dict

    def validate(self, value: Any, path: tuple, ctx: _Context) -> Any:
        return ctx.container(value, path, self.kind)


@dataclass(frozen=True)
class ListOf:
    item: Any

    def validate(self, value: Any, path: tuple, ctx: _Context) -> list:
        items = ctx.container(value, path, list)
        return [self.item.validate(v, (*path, i), ctx) for i, v in enumerate(items)]


@dataclass(frozen=True)
class SecretName:
    """An image pull secret: `name` or `{name: name}`; normalised to the name."""

    def validate(self, value: Any, path: tuple, ctx: _Context) -> str:
        if isinstance(value, dict) and set(value) == {"name"}:
            value = value["name"]
        if not isinstance(value, str) or not value:
            raise ctx.expected(path, "a secret name or {name: NAME}", value)
        return _subdomain("Secret name").validate(value, path, ctx)


_UNSET: tuple[object, ...] = (None, "", {}, [])


@dataclass(frozen=True)
class Requires:
    """Cross-field rule: when `key` is one of `values` (None: set at all), `needed` must be set (non-empty)."""

    key: str
    values: tuple[Any, ...] | None
    needed: str

    def check(self, value: dict, path: tuple, ctx: _Context) -> None:
        applies = value.get(self.key) not in _UNSET if self.values is None else value.get(self.key) in self.values
        if applies and value.get(self.needed) in _UNSET:
            shown = self.key if self.values is None else repr(value[self.key])
            raise ctx.error(
                (*path, self.key),
                f"{shown} requires '{dotted((*path, self.needed))}' to be set",
                f"set {dotted((*path, self.needed))}",
            )


@dataclass(frozen=True)
class OneOf:
    """Cross-field rule: exactly one of `keys` is set."""

    keys: tuple[str, ...]

    def check(self, value: dict, path: tuple, ctx: _Context) -> None:
        given = [key for key in self.keys if value.get(key) not in _UNSET]
        if len(given) == 1:
            return
        hint = f"set exactly one of {', '.join(dotted((*path, key)) for key in self.keys)}"
        if not given:
            raise ctx.error((*path, self.keys[0]), "is required", hint)
        raise ctx.error((*path, given[1]), f"is set together with '{dotted((*path, given[0]))}'", hint)


@dataclass(frozen=True)
class Struct:
    """A mapping with a fixed set of keys; unknown keys are errors."""

    fields: Mapping[str, Any]
    required: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    rules: tuple[Requires | OneOf, ...] = ()

    def validate(self, value: Any, path: tuple, ctx: _Context) -> dict:
        ctx.container(value, path, dict)
        for key in value:
            if key not in self.fields:
                raise _unknown(key, path, self.fields, ctx)
        # A null value unsets the key (e.g. to clear a lower layer's value).
        result = {
            key: self.fields[key].validate(item, (*path, key), ctx) for key, item in value.items() if item is not None
        }
        for key in self.required:
            if result.get(key) is None:
                raise ctx.error((*path, key), "is required", f"set {dotted((*path, key))}")
        for key, default in self.defaults.items():
            if result.get(key) is None:
                result[key] = default
        for rule in self.rules:
            rule.check(result, path, ctx)
        return result


@dataclass(frozen=True)
class DictOf:
    """A mapping of user-chosen keys (e.g. `dynamo.KEY`) to values of one shape."""

    value: Any

    def validate(self, value: Any, path: tuple, ctx: _Context) -> dict:
        ctx.container(value, path, dict)
        result = {}
        for key, item in value.items():
            if not isinstance(key, str) or not key:
                raise ctx.error(
                    (*path, key), "keys must be non-empty strings", "name each entry with a non-empty string key"
                )
            result[key] = self.value.validate(item if item is not None else {}, (*path, key), ctx)
        return result


def _unknown(key: Any, path: tuple, allowed: Mapping[str, Any], ctx: _Context) -> ConfigError:
    close = difflib.get_close_matches(str(key), list(allowed), n=1)
    hint = f"did you mean '{dotted((*path, close[0]))}'?" if close else f"allowed keys here: {', '.join(allowed)}"
    return ConfigError(f"{ctx.provenance.label((*path, key))}: unknown infra key '{dotted((*path, key))}'", hint=hint)


STR = Scalar((str,))
BOOL = Scalar((bool,))
POSITIVE_INT = Scalar((int,), minimum=1, maximum=k8s_rules.INT32_MAX)
TIMEOUT_S = Scalar((int,), minimum=1, maximum=7 * 24 * 3600)  # a week; waits take it as a float deadline
QUANTITY = Rule(k8s_rules.quantity)
IMAGE = Rule(k8s_rules.image, STR)
PORT = Rule(k8s_rules.port, Scalar((int,)))
LABELS = StrMap(k8s_rules.labels)
ANNOTATIONS = StrMap(k8s_rules.annotations)
STR_LIST = ListOf(STR)


def _subdomain(what: str) -> Rule:
    return Rule(lambda value: k8s_rules.dns_name(value, what=what, subdomain=True), STR)

ROLES = ("training", "generation", "gym")  # the roles infra.kuberay may declare (kinds.raycluster uses them)


# Storage kinds that mount a volume; `lustre` (a Lustre-backed PVC, as the earlier launcher named it)
# mounts `pvcName` like `pvc`. The others mount nothing: `none`; for the workspace `rayUpload` (the
# code is uploaded: launch.codeSource upload) and `auto` (accepted, not used: `check` lists it).
MOUNTED_KINDS = ("pvc", "lustre", "hostPath", "emptyDir")
PVC_KINDS = ("pvc", "lustre")
# The code source a workspace kind stands for when launch.codeSource is not set.
CODE_SOURCE_OF_WORKSPACE = {"rayUpload": "upload", "lustre": "lustre"}


def _volume(kinds: tuple[str, ...], **extra: Any) -> Struct:
    rules = [Requires("kind", PVC_KINDS, "pvcName")]
    if "hostPath" in extra:
        rules.append(Requires("kind", ("hostPath",), "hostPath"))
    rules.append(Requires("kind", tuple(k for k in kinds if k in MOUNTED_KINDS), "mountPath"))
    fields = {"kind": Scalar(choices=kinds), "pvcName": _subdomain("PVC name"), "mountPath": STR, **extra}
    return Struct(fields, required=("kind",), rules=tuple(rules))


_POD_SIZE = Struct({"cpu": QUANTITY, "memory": QUANTITY, "gpu": Scalar((int,), minimum=0, maximum=k8s_rules.INT32_MAX)})

_DAEMON = Struct({
    "entrypoint": STR,
    "submissionId": STR,
    "env": StrMap(),
    "healthCheckUrl": STR,
    "healthCheckTimeoutS": TIMEOUT_S,
    "rayUploadPaths": STR_LIST,
})

_KUBERAY_ROLE = Struct({
    "name": STR,
    "spec": Free(dict),
    "labels": LABELS,
    "annotations": ANNOTATIONS,
    "segmentSize": POSITIVE_INT,
    "daemon": _DAEMON,
})

_DEPLOYMENT = Struct({
    "name": STR,
    "spec": Free(dict),
    "labels": LABELS,
    "annotations": ANNOTATIONS,
    "healthCheckUrl": STR,
    "healthCheckTimeoutS": TIMEOUT_S,
})

_DYNAMO_GRAPH = Struct(
    {
        "manifest": STR,
        # inline instead of a manifest file (upstream tk/pr-2429): the DGD's .spec, with `name`
        "spec": Free(dict),
        "apiVersion": Scalar(choices=("nvidia.com/v1alpha1", "nvidia.com/v1beta1")),
        "name": STR,
        "namespace": Scalar(dns_label=True),
        "overrides": Free(dict),
        "labels": LABELS,
        "annotations": ANNOTATIONS,
        "readyTimeoutS": TIMEOUT_S,
    },
    rules=(OneOf(("manifest", "spec")), Requires("spec", None, "name")),
    defaults={"readyTimeoutS": 600},
)

INFRA_SCHEMA = Struct({
    "namespace": Scalar(dns_label=True),
    "image": IMAGE,
    "imagePullSecrets": ListOf(SecretName()),
    "serviceAccount": _subdomain("ServiceAccount name"),
    "rayVersion": STR,
    "labels": LABELS,
    "annotations": ANNOTATIONS,
    "scheduler": Struct(
        {"kind": Scalar(choices=("default", "kai", "kueue")), "queue": STR},
        rules=(Requires("kind", ("kai", "kueue"), "queue"),),
    ),
    "placement": Struct({"nodeSelector": LABELS, "tolerations": Free(list), "affinity": Free(dict)}),
    "networking": Struct({
        "hostNetwork": BOOL,
        "gloo_socket_ifname": STR,
        "nccl_socket_ifname": STR,
        "nccl_ib_disable": Scalar((bool, int)),
        "nccl_net": STR,
        "extra_env": Rule(k8s_rules.no_inline_secret, StrMap()),
    }),
    "workspace": _volume(("pvc", "lustre", "hostPath", "emptyDir", "rayUpload", "auto"),
                         repoSubdir=STR, size=QUANTITY, hostPath=STR),
    "hf_cache": _volume(("pvc", "lustre", "emptyDir", "none")),
    "checkpoints": _volume(("pvc", "lustre", "emptyDir", "none")),
    "submit": Struct({
        "kind": STR,
        "portForward": Scalar((bool, str), choices=("auto", "kubectl-ray-plugin", "kubectl-port-forward", True, False)),
        "devPod": STR,
        "localDashboardPort": PORT,
        "submitter": Scalar(choices=("dashboard", "portForward", "exec")),  # portForward: upstream's dashboard
        "execTmpDir": STR,
    }),
    "launch": Struct(
        {
            # rayjob / bringup: the flow `run` takes without --rayjob / --raycluster (plan.default_flow)
            "mode": Scalar(choices=("single", "disagg", "attach", "rayjob", "bringup")),
            "runMode": Scalar(choices=("interactive", "batch")),
            "attach": Struct({role: STR for role in ROLES}),
            "peerWatcher": BOOL,
            "entrypoint": STR,
            "env": StrMap(),
            "rayUploadPaths": STR_LIST,
            "codeSource": Scalar(choices=("upload", "image", "lustre")),
            "codePath": STR,
            # serial: DGDs serve, then the RayJob; parallel: both at once (run --rayjob --parallel)
            "bringUp": Scalar(choices=("serial", "parallel")),
        },
        rules=(Requires("mode", ("attach",), "attach"), Requires("codeSource", ("lustre",), "codePath")),
    ),
    "resources": Struct({role: Struct({"head": _POD_SIZE, "worker": _POD_SIZE}) for role in ROLES}),
    "kuberay": Struct({role: _KUBERAY_ROLE for role in ROLES}),
    "deployments": DictOf(_DEPLOYMENT),
    "dynamo": DictOf(_DYNAMO_GRAPH),
    # DRA objects the special claims make (kinds/dra.py says the defaults)
    "dra": Struct({
        "roce": Struct({"deviceClassName": _subdomain("DeviceClass name"), "count": POSITIVE_INT}),
        "computeDomain": Struct({"numNodes": Scalar((int,), minimum=0, maximum=k8s_rules.INT32_MAX)}),
    }),
})


def validate(infra: dict, provenance: Provenance) -> dict:
    """Validate a merged infra mapping; return it normalised with schema defaults filled
    (and ``launch.codeSource`` from ``workspace.kind`` where unset)."""
    ctx = _Context(provenance)
    result = INFRA_SCHEMA.validate(infra, (), ctx)
    _code_source_from_workspace(result, ctx)
    return result


def _code_source_from_workspace(infra: dict, ctx: _Context) -> None:
    """``workspace.kind: rayUpload | lustre`` sets ``launch.codeSource`` (upload | lustre) unless it is set."""
    kind = (infra.get("workspace") or {}).get("kind")
    launch = infra.get("launch") or {}
    if kind not in CODE_SOURCE_OF_WORKSPACE or launch.get("codeSource") is not None:
        return
    source = CODE_SOURCE_OF_WORKSPACE[kind]
    if source == "lustre" and not launch.get("codePath"):
        raise ctx.error(
            ("workspace", "kind"),
            "'lustre' makes launch.codeSource lustre, which requires 'launch.codePath'",
            "set launch.codePath (where the code is on the Lustre volume), or set launch.codeSource",
        )
    infra["launch"] = {**launch, "codeSource": source}


def field_paths(node: Any = INFRA_SCHEMA, prefix: str = "") -> list[str]:
    """Every dotted field name the schema accepts (`KEY` stands for user-chosen keys)."""
    if isinstance(node, Struct):
        paths = []
        for key, child in node.fields.items():
            path = f"{prefix}{key}"
            paths.append(path)
            paths.extend(field_paths(child, f"{path}."))
        return paths
    if isinstance(node, DictOf):
        return field_paths(node.value, f"{prefix}KEY.")
    return []
