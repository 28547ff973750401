"""The Kubernetes protobuf bodies kubectl sends, decoded to the JSON objects the sandbox stores.

``kubectl create namespace|configmap|secret|serviceaccount|service|deployment`` and ``kubectl
auth can-i`` send ``application/vnd.kubernetes.protobuf``: the magic ``k8s\\0``, then a
``runtime.Unknown`` envelope (``typeMeta`` 1, ``raw`` 2, ``contentEncoding`` 3, ``contentType``
4) whose ``raw`` is the object's message. ``decode`` reads the protobuf wire format by hand
with the field numbers of k8s.io/api (core/v1, apps/v1, authorization/v1) and
k8s.io/apimachinery (meta/v1, runtime, intstr, resource) ``generated.proto``: ``SCHEMAS`` holds
exactly the messages and fields these commands fill.

JSON shape follows the Go types: a zero scalar or empty message is left out (``omitempty``)
unless the Go field is a pointer (``PTR``: presence on the wire means set, e.g.
``spec.replicas: 0``); map entries and repeated items are always kept; ``bytes`` become base64
strings, ``metav1.Time`` RFC 3339, ``Quantity`` its string, ``IntOrString`` an int or a string.
A field this module does not know is skipped when it holds a zero value (kubectl writes every
optional field) and refused otherwise (``Unsupported``): nothing a client sent is dropped
silently. Stdlib only.
"""

from __future__ import annotations

import base64
import datetime as dt
import json

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
PTR = "ptr"  # a Go pointer field: kept even when zero
REPEATED = "repeated"
MAP = "map"  # map<string, TYPE>: repeated entries {key = 1, value = 2}

# Scalar types; anything else names a message in SCHEMAS (or a special one in _SPECIAL).
STRING, BYTES, INT, BOOL = "string", "bytes", "int", "bool"

_META = {
    1: ("name", STRING), 2: ("generateName", STRING), 3: ("namespace", STRING), 4: ("selfLink", STRING),
    5: ("uid", STRING), 6: ("resourceVersion", STRING), 7: ("generation", INT), 8: ("creationTimestamp", "Time"),
    9: ("deletionTimestamp", "Time"), 10: ("deletionGracePeriodSeconds", INT, PTR), 11: ("labels", STRING, MAP),
    12: ("annotations", STRING, MAP), 13: ("ownerReferences", "OwnerReference", REPEATED),
    14: ("finalizers", STRING, REPEATED), 17: ("managedFields", "ManagedFieldsEntry", REPEATED),
}  # fmt: skip
_CONTAINER = {
    1: ("name", STRING), 2: ("image", STRING), 3: ("command", STRING, REPEATED), 4: ("args", STRING, REPEATED),
    5: ("workingDir", STRING), 6: ("ports", "ContainerPort", REPEATED), 7: ("env", "EnvVar", REPEATED),
    8: ("resources", "ResourceRequirements"), 13: ("terminationMessagePath", STRING), 14: ("imagePullPolicy", STRING),
    16: ("stdin", BOOL), 17: ("stdinOnce", BOOL), 18: ("tty", BOOL), 19: ("envFrom", "EnvFromSource", REPEATED),
    20: ("terminationMessagePolicy", STRING),
}  # fmt: skip

#: message name -> {field number: (json name, type[, PTR | REPEATED | MAP])}
SCHEMAS: dict[str, dict[int, tuple]] = {
    # k8s.io/apimachinery/pkg/runtime
    "Unknown": {1: ("typeMeta", "TypeMeta"), 2: ("raw", BYTES), 3: ("contentEncoding", STRING), 4: ("contentType", STRING)},
    "TypeMeta": {1: ("apiVersion", STRING), 2: ("kind", STRING)},
    # k8s.io/apimachinery/pkg/apis/meta/v1
    "ObjectMeta": _META,
    "OwnerReference": {5: ("apiVersion", STRING), 1: ("kind", STRING), 3: ("name", STRING), 4: ("uid", STRING),
                       6: ("controller", BOOL, PTR), 7: ("blockOwnerDeletion", BOOL, PTR)},
    "ManagedFieldsEntry": {1: ("manager", STRING), 2: ("operation", STRING), 3: ("apiVersion", STRING), 4: ("time", "Time"),
                           6: ("fieldsType", STRING), 7: ("fieldsV1", "FieldsV1"), 8: ("subresource", STRING)},
    "LabelSelector": {1: ("matchLabels", STRING, MAP), 2: ("matchExpressions", "SelectorRequirement", REPEATED)},
    "SelectorRequirement": {1: ("key", STRING), 2: ("operator", STRING), 3: ("values", STRING, REPEATED)},
    # k8s.io/api/core/v1
    "Namespace": {1: ("metadata", "ObjectMeta"), 2: ("spec", "NamespaceSpec"), 3: ("status", "NamespaceStatus")},
    "NamespaceSpec": {1: ("finalizers", STRING, REPEATED)},
    "NamespaceStatus": {1: ("phase", STRING)},
    "ConfigMap": {1: ("metadata", "ObjectMeta"), 2: ("data", STRING, MAP), 3: ("binaryData", BYTES, MAP),
                  4: ("immutable", BOOL, PTR)},
    "Secret": {1: ("metadata", "ObjectMeta"), 2: ("data", BYTES, MAP), 3: ("type", STRING), 4: ("stringData", STRING, MAP),
               5: ("immutable", BOOL, PTR)},
    "ServiceAccount": {1: ("metadata", "ObjectMeta"), 2: ("secrets", "ObjectReference", REPEATED),
                       3: ("imagePullSecrets", "LocalObjectReference", REPEATED),
                       4: ("automountServiceAccountToken", BOOL, PTR)},
    "ObjectReference": {1: ("kind", STRING), 2: ("namespace", STRING), 3: ("name", STRING), 4: ("uid", STRING),
                        5: ("apiVersion", STRING), 6: ("resourceVersion", STRING), 7: ("fieldPath", STRING)},
    "LocalObjectReference": {1: ("name", STRING)},
    "Service": {1: ("metadata", "ObjectMeta"), 2: ("spec", "ServiceSpec"), 3: ("status", "ServiceStatus")},
    "ServiceSpec": {
        1: ("ports", "ServicePort", REPEATED), 2: ("selector", STRING, MAP), 3: ("clusterIP", STRING),
        4: ("type", STRING), 5: ("externalIPs", STRING, REPEATED), 7: ("sessionAffinity", STRING),
        8: ("loadBalancerIP", STRING), 9: ("loadBalancerSourceRanges", STRING, REPEATED), 10: ("externalName", STRING),
        11: ("externalTrafficPolicy", STRING), 12: ("healthCheckNodePort", INT), 13: ("publishNotReadyAddresses", BOOL),
        17: ("ipFamilyPolicy", STRING, PTR), 18: ("clusterIPs", STRING, REPEATED), 19: ("ipFamilies", STRING, REPEATED),
        20: ("allocateLoadBalancerNodePorts", BOOL, PTR), 21: ("loadBalancerClass", STRING, PTR),
        22: ("internalTrafficPolicy", STRING, PTR), 23: ("trafficDistribution", STRING, PTR),
    },
    "ServicePort": {1: ("name", STRING), 2: ("protocol", STRING), 3: ("port", INT), 4: ("targetPort", "IntOrString"),
                    5: ("nodePort", INT), 6: ("appProtocol", STRING, PTR)},
    "ServiceStatus": {1: ("loadBalancer", "LoadBalancerStatus")},
    "LoadBalancerStatus": {},
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta"), 2: ("spec", "PodSpec")},
    "PodSpec": {
        2: ("containers", "Container", REPEATED), 3: ("restartPolicy", STRING), 4: ("terminationGracePeriodSeconds", INT, PTR),
        5: ("activeDeadlineSeconds", INT, PTR), 6: ("dnsPolicy", STRING), 7: ("nodeSelector", STRING, MAP),
        8: ("serviceAccountName", STRING), 9: ("serviceAccount", STRING), 10: ("nodeName", STRING),
        11: ("hostNetwork", BOOL), 15: ("imagePullSecrets", "LocalObjectReference", REPEATED), 19: ("schedulerName", STRING),
        20: ("initContainers", "Container", REPEATED), 21: ("automountServiceAccountToken", BOOL, PTR),
        24: ("priorityClassName", STRING), 30: ("enableServiceLinks", BOOL, PTR),
    },
    "Container": _CONTAINER,
    "ContainerPort": {1: ("name", STRING), 2: ("hostPort", INT), 3: ("containerPort", INT), 4: ("protocol", STRING),
                      5: ("hostIP", STRING)},
    "EnvVar": {1: ("name", STRING), 2: ("value", STRING), 3: ("valueFrom", "EnvVarSource", PTR)},
    "EnvVarSource": {3: ("configMapKeyRef", "KeySelector", PTR), 4: ("secretKeyRef", "KeySelector", PTR)},
    "KeySelector": {1: ("name", "Inline:LocalObjectReference"), 2: ("key", STRING), 3: ("optional", BOOL, PTR)},
    "EnvFromSource": {1: ("prefix", STRING), 2: ("configMapRef", "EnvSource", PTR), 3: ("secretRef", "EnvSource", PTR)},
    "EnvSource": {1: ("name", "Inline:LocalObjectReference"), 2: ("optional", BOOL, PTR)},
    "ResourceRequirements": {1: ("limits", "Quantity", MAP), 2: ("requests", "Quantity", MAP)},
    # k8s.io/api/apps/v1
    "Deployment": {1: ("metadata", "ObjectMeta"), 2: ("spec", "DeploymentSpec"), 3: ("status", "DeploymentStatus")},
    "DeploymentSpec": {1: ("replicas", INT, PTR), 2: ("selector", "LabelSelector", PTR), 3: ("template", "PodTemplateSpec"),
                       4: ("strategy", "DeploymentStrategy"), 5: ("minReadySeconds", INT), 6: ("revisionHistoryLimit", INT, PTR),
                       7: ("paused", BOOL), 9: ("progressDeadlineSeconds", INT, PTR)},
    "DeploymentStrategy": {1: ("type", STRING), 2: ("rollingUpdate", "RollingUpdateDeployment", PTR)},
    "RollingUpdateDeployment": {1: ("maxUnavailable", "IntOrString", PTR), 2: ("maxSurge", "IntOrString", PTR)},
    "DeploymentStatus": {},
    # k8s.io/api/authorization/v1
    "SelfSubjectAccessReview": {1: ("metadata", "ObjectMeta"), 2: ("spec", "SelfSubjectAccessReviewSpec"),
                                3: ("status", "SubjectAccessReviewStatus")},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes", PTR),
                                    2: ("nonResourceAttributes", "NonResourceAttributes", PTR)},
    "ResourceAttributes": {1: ("namespace", STRING), 2: ("verb", STRING), 3: ("group", STRING), 4: ("version", STRING),
                           5: ("resource", STRING), 6: ("subresource", STRING), 7: ("name", STRING),
                           8: ("fieldSelector", "SelectorAttributes", PTR), 9: ("labelSelector", "SelectorAttributes", PTR)},
    "SelectorAttributes": {1: ("rawSelector", STRING), 2: ("requirements", "SelectorRequirement", REPEATED)},
    "NonResourceAttributes": {1: ("path", STRING), 2: ("verb", STRING)},
    "SubjectAccessReviewStatus": {1: ("allowed", BOOL), 2: ("reason", STRING), 3: ("evaluationError", STRING),
                                  4: ("denied", BOOL)},
}

#: (apiVersion, kind) of the top-level objects this module decodes
KINDS = {
    ("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "ServiceAccount"), ("v1", "Service"),
    ("apps/v1", "Deployment"), ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
}  # fmt: skip


class ProtobufError(ValueError):
    """A body that is not a well-formed Kubernetes protobuf message (HTTP 400)."""


class Unsupported(ProtobufError):
    """A well-formed body this decoder does not cover: a kind or a non-zero field (HTTP 415)."""


def decode(body: bytes) -> dict:
    """The JSON object of a ``k8s\\0`` + ``runtime.Unknown`` body (apiVersion and kind included)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("the protobuf body does not start with the Kubernetes magic number")
    envelope = _message(body[len(MAGIC):], "Unknown")
    if envelope.get("contentEncoding"):
        raise Unsupported(f"protobuf content encoding {envelope['contentEncoding']!r} is not supported")
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if (api_version, kind) not in KINDS:
        raise Unsupported(f"the sandbox decodes no protobuf {kind or '(no kind)'} ({api_version or 'no apiVersion'})")
    obj = _message(base64.b64decode(envelope.get("raw", "")), kind)
    return {"apiVersion": api_version, "kind": kind, **obj}


# -- the wire format -------------------------------------------------------------------------
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ProtobufError("truncated or oversized varint in the protobuf body")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of every field of one message, in order: a varint or
    fixed value as an int, a length-delimited one as bytes."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > len(data):
                raise ProtobufError("truncated fixed-width field in the protobuf body")
            value, pos = int.from_bytes(data[pos:pos + size], "little"), pos + size
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError("truncated length-delimited field in the protobuf body")
            value, pos = data[pos:pos + length], pos + length
        else:
            raise ProtobufError(f"unsupported protobuf wire type {wire}")
        if number == 0:
            raise ProtobufError("protobuf field number 0")
        out.append((number, wire, value))
    return out


def _zero(wire: int, value: int | bytes) -> bool:
    """Whether an unknown field holds nothing: 0, "", or a message of zero fields only."""
    if wire != 2:
        return value == 0
    if not value:
        return True
    try:
        return all(_zero(w, v) for _, w, v in fields(value))
    except ProtobufError:
        return False


# -- messages --------------------------------------------------------------------------------
def _message(data: bytes, name: str) -> dict:
    schema = SCHEMAS[name]
    out: dict = {}
    for number, wire, value in fields(data):
        spec = schema.get(number)
        if spec is None:
            if not _zero(wire, value):
                raise Unsupported(f"the sandbox cannot decode field {number} of protobuf {name}; send JSON")
            continue
        key, kind, mode = (*spec, "")[:3]
        if mode == MAP:
            entry = {n: v for n, _, v in fields(_bytes(value, name, key))}
            map_key = _bytes(entry.get(1, b""), name, key).decode("utf-8", "replace")
            out.setdefault(key, {})[map_key] = _value(kind, entry.get(2, b"" if kind != INT else 0), name, key)
        elif mode == REPEATED:
            out.setdefault(key, []).append(_value(kind, value, name, key))
        else:
            decoded = _value(kind, value, name, key)
            if mode == PTR or not _empty(decoded):
                out[key] = decoded
            else:
                out.pop(key, None)
    return out


def _empty(value: object) -> bool:
    return value in (0, "", False, None) or value == {}


def _bytes(value: int | bytes, message: str, key: str) -> bytes:
    if not isinstance(value, bytes):
        raise ProtobufError(f"protobuf {message}.{key}: expected a length-delimited value")
    return value


def _value(kind: str, value: int | bytes, message: str, key: str) -> object:
    if kind == INT:
        if not isinstance(value, int):
            raise ProtobufError(f"protobuf {message}.{key}: expected a number")
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == BOOL:
        return bool(value)
    raw = _bytes(value, message, key)
    if kind == STRING:
        return raw.decode("utf-8", "replace")
    if kind == BYTES:
        return base64.b64encode(raw).decode()
    if kind in _SPECIAL:
        return _SPECIAL[kind](_message(raw, kind) if kind in SCHEMAS else {n: v for n, _, v in fields(raw)})
    if kind.startswith("Inline:"):  # an embedded struct whose fields Go's JSON inlines (LocalObjectReference)
        return _message(raw, kind.removeprefix("Inline:")).get("name", "")
    return _message(raw, kind)


def _time(parts: dict) -> str | None:
    seconds = parts.get(1, 0)
    if not seconds:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _int_or_string(parts: dict) -> int | str:
    if parts.get(1, 0) == 1:
        return _bytes(parts.get(3, b""), "IntOrString", "strVal").decode("utf-8", "replace")
    value = parts.get(2, 0)
    return value - (1 << 64) if value >= 1 << 63 else value


_SPECIAL = {
    "Time": _time,
    "Quantity": lambda parts: _bytes(parts.get(1, b""), "Quantity", "string").decode("ascii", "replace"),
    "IntOrString": _int_or_string,
    "FieldsV1": lambda parts: json.loads(parts.get(1) or b"{}"),
}
