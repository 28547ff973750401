"""CustomResourceDefinitions the sandbox installs: KubeRay RayCluster/RayJob, Dynamo DGD (two versions)
and the NVIDIA DRA driver's ComputeDomain.

Shaped like the upstream CRDs (names, scope, status subresource, short names, printer
columns); the schemas are open (``x-kubernetes-preserve-unknown-fields``) instead of the
upstream field-by-field schemas.
"""

from __future__ import annotations

_OPEN_SCHEMA = {
    "openAPIV3Schema": {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
}


def _column(name: str, json_path: str, type_: str = "string", priority: int = 0) -> dict:
    return {"name": name, "type": type_, "jsonPath": json_path, "priority": priority}


_AGE = _column("Age", ".metadata.creationTimestamp", "date")


def _crd(group: str, version: str, kind: str, plural: str, short: list[str], columns: list[dict], categories=("all",)) -> dict:
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
                    "schema": _OPEN_SCHEMA,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


RAYCLUSTER_CRD = _crd(
    "ray.io",
    "v1",
    "RayCluster",
    "rayclusters",
    [],
    [
        _column("desired workers", ".status.desiredWorkerReplicas", "integer"),
        _column("available workers", ".status.availableWorkerReplicas", "integer"),
        _column("cpus", ".status.desiredCPU"),
        _column("memory", ".status.desiredMemory"),
        _column("gpus", ".status.desiredGPU"),
        _column("status", ".status.state"),
        _AGE,
        _column("head pod IP", ".status.head.podIP", priority=1),
        _column("head service IP", ".status.head.serviceIP", priority=1),
    ],
)

RAYJOB_CRD = _crd(
    "ray.io",
    "v1",
    "RayJob",
    "rayjobs",
    [],
    [
        _column("job status", ".status.jobStatus"),
        _column("deployment status", ".status.jobDeploymentStatus"),
        _column("ray cluster name", ".status.rayClusterName"),
        _column("start time", ".status.startTime", "date"),
        _column("end time", ".status.endTime", "date"),
        _AGE,
    ],
)

DGD_CRD = _crd(
    "nvidia.com",
    "v1beta1",
    "DynamoGraphDeployment",
    "dynamographdeployments",
    ["dgd"],
    [
        _column("Ready", '.status.conditions[?(@.type=="Ready")].status'),
        _column("Backend", ".spec.backendFramework"),
        _column("Age", ".metadata.creationTimestamp", "date"),
    ],
)

COMPUTEDOMAIN_CRD = _crd("resource.nvidia.com", "v1beta1", "ComputeDomain", "computedomains", [], [_AGE], categories=())

# v1beta1 is the storage version (Dynamo >= 1.3); v1alpha1 stays served, converted on the way in
# and out as the operator's conversion webhook does it (``conversion``).
DGD_CRD["spec"]["versions"].append({**DGD_CRD["spec"]["versions"][0], "name": "v1alpha1", "storage": False})

ALL_CRDS = (RAYCLUSTER_CRD, RAYJOB_CRD, DGD_CRD, COMPUTEDOMAIN_CRD)
