"""Our CRDs for the real control plane: Dynamo's DynamoGraphDeployment and the NVIDIA DRA driver's
ComputeDomain (KubeRay's and kwok's come from their own modules, see ``binaries``).

Names, scope, short names, columns and the status subresource as the operators' own, with
structural schemas that type what ``REFERENCE.md`` lists and keep everything else
(``x-kubernetes-preserve-unknown-fields``). The DGD is served in ``v1alpha1`` and ``v1beta1``
(storage); the API server converts between them through our webhook (``webhook.py``).
"""

from __future__ import annotations

import base64

_OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_STRING = {"type": "string"}
_INT32 = {"type": "integer", "format": "int32"}
_COUNT = {**_INT32, "minimum": 0}
MAX_COMPONENTS = 25
_NAME_LENGTH = 63


def _column(name: str, json_path: str, type_: str = "string", priority: int = 0) -> dict:
    return {"name": name, "type": type_, "jsonPath": json_path, "priority": priority}


_AGE = _column("Age", ".metadata.creationTimestamp", "date")


def _crd(group: str, version: str, kind: str, plural: str, short: list[str], columns: list[dict],
         schema: dict, categories: tuple[str, ...] = ("all",)) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
                "categories": list(categories),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": schema,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


def _object(properties: dict, **extra: object) -> dict:
    """An object with typed ``properties`` that keeps any other field."""
    return {**_OPEN, "properties": properties, **extra}


_ENV = {"type": "array", "items": _object({"name": _STRING}, required=["name"])}
_STRINGS = {"type": "object", "additionalProperties": _STRING}
_MULTINODE = _object({"nodeCount": {**_INT32, "minimum": 1}})
_COMPONENT = _object({"name": {**_STRING, "minLength": 1, "maxLength": _NAME_LENGTH}, "type": _STRING,
                      "replicas": _COUNT, "podTemplate": _OPEN, "multinode": _MULTINODE}, required=["name"])
_SERVICE = _object({"componentType": _STRING, "subComponentType": _STRING, "replicas": _COUNT, "envs": _ENV,
                    "extraPodSpec": _OPEN, "resources": _OPEN, "multinode": _MULTINODE})
_V1BETA1_SPEC = _object({
    "components": {
        "type": "array", "maxItems": MAX_COMPONENTS, "items": _COMPONENT,
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-validations": [{
            "rule": "self.all(c, self.exists_one(d, d.name.lowerAscii() == c.name.lowerAscii()))",
            "message": "component names must be unique, case-insensitively"}],
    },
    "env": _ENV, "labels": _STRINGS, "annotations": _STRINGS, "backendFramework": _STRING,
})
_V1ALPHA1_SPEC = _object({"services": {"type": "object", "additionalProperties": _SERVICE}, "envs": _ENV,
                          "backendFramework": _STRING})
_COUNTS = _object({"componentKind": _STRING, "componentNames": {"type": "array", "items": _STRING},
                   **{field: _COUNT for field in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                                                  "scheduledReplicas")}})
_CONDITIONS = {
    "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
    "items": _object({"type": _STRING, "status": _STRING, "reason": _STRING, "message": _STRING,
                      "lastTransitionTime": {**_STRING, "format": "date-time"},
                      "observedGeneration": {"type": "integer", "format": "int64"}}, required=["type", "status"]),
}


def _dgd_status(counts_field: str) -> dict:
    return _object({"state": _STRING, "observedGeneration": {"type": "integer", "format": "int64"},
                    "conditions": _CONDITIONS, counts_field: {"type": "object", "additionalProperties": _COUNTS}})


def _schema(spec: dict, status: dict) -> dict:
    return {"openAPIV3Schema": {"type": "object", "properties": {
        "apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"}, "spec": spec, "status": status}}}


_DGD_COLUMNS = [
    _column("State", ".status.state"),
    _column("Ready", '.status.conditions[?(@.type=="Ready")].status'),
    _column("Backend", ".spec.backendFramework"),
    _AGE,
]


def dgd_crd(webhook_url: str, ca_pem: bytes) -> dict:
    """The DGD CRD: ``v1beta1`` stored, ``v1alpha1`` served, converted by the webhook at
    ``webhook_url`` whose serving certificate ``ca_pem`` signs."""
    crd = _crd("nvidia.com", "v1beta1", "DynamoGraphDeployment", "dynamographdeployments", ["dgd"], _DGD_COLUMNS,
               _schema(_V1BETA1_SPEC, _dgd_status("components")))
    beta = crd["spec"]["versions"][0]
    alpha = {**beta, "name": "v1alpha1", "storage": False, "schema": _schema(_V1ALPHA1_SPEC, _dgd_status("services"))}
    crd["spec"]["versions"] = [alpha, beta]
    crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": webhook_url, "caBundle": base64.b64encode(ca_pem).decode()},
    }}
    return crd


_COMPUTEDOMAIN_SPEC = _object({"numNodes": _COUNT, "channel": _object({
    "resourceClaimTemplate": _object({"name": _STRING}), "allocationMode": _STRING})})
_COMPUTEDOMAIN_STATUS = _object({"status": {**_STRING, "enum": ["Ready", "NotReady"]},
                                 "nodes": {"type": "array", "items": _OPEN}})
COMPUTEDOMAIN_CRD = _crd("resource.nvidia.com", "v1beta1", "ComputeDomain", "computedomains", [], [_AGE],
                         _schema(_COMPUTEDOMAIN_SPEC, _COMPUTEDOMAIN_STATUS), categories=())


def crds(webhook_url: str, ca_pem: bytes) -> list[dict]:
    """Every CRD of ours, the DGD's converted by the webhook at ``webhook_url``."""
    return [dgd_crd(webhook_url, ca_pem), COMPUTEDOMAIN_CRD]
