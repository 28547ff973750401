"""CustomResourceDefinitions the sandbox installs: KubeRay RayCluster/RayJob, Dynamo DGD (two versions)
and the NVIDIA DRA driver's ComputeDomain.

Shaped like the upstream CRDs (names, scope, status subresource, short names, printer
columns); the schemas are open (``x-kubernetes-preserve-unknown-fields``) instead of the
upstream field-by-field schemas, except the RayJob's ``spec``, which lists the top-level fields
of KubeRay 1.7's schema as upstream types them (``submissionMode`` a free string; nested objects
left open) so ``check`` can read what the run needs. ``RAYJOB_CRD_1_5`` is KubeRay 1.5's: no
``preRunningDeadlineSeconds`` (the ``old-rayjob-crd`` fault installs it).
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


def _crd(group: str, version: str, kind: str, plural: str, short: list[str], columns: list[dict],
         schema: dict = _OPEN_SCHEMA, categories=("all",)) -> dict:
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

_OPEN_OBJECT = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_INT32 = {"type": "integer", "format": "int32"}
_RAYJOB_SPEC_1_5 = {
    "activeDeadlineSeconds": _INT32,
    "backoffLimit": {**_INT32, "default": 0},
    "clusterSelector": {"type": "object", "additionalProperties": {"type": "string"}},
    "deletionStrategy": _OPEN_OBJECT,
    "entrypoint": {"type": "string"},
    "entrypointNumCpus": {"type": "number"},
    "entrypointNumGpus": {"type": "number"},
    "entrypointResources": {"type": "string"},
    "jobId": {"type": "string"},
    "managedBy": {"type": "string"},
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    "rayClusterSpec": _OPEN_OBJECT,
    "runtimeEnvYAML": {"type": "string"},
    "shutdownAfterJobFinishes": {"type": "boolean"},
    "submissionMode": {"type": "string", "default": "K8sJobMode"},  # upstream has no enum
    "submitterConfig": _OPEN_OBJECT,
    "submitterPodTemplate": _OPEN_OBJECT,
    "suspend": {"type": "boolean"},
    "ttlSecondsAfterFinished": {**_INT32, "default": 0},
}


def _rayjob_schema(spec_fields: dict) -> dict:
    properties = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                  "spec": {"type": "object", "properties": spec_fields}, "status": _OPEN_OBJECT}
    return {"openAPIV3Schema": {"type": "object", "properties": properties}}


_RAYJOB_COLUMNS = [
    _column("job status", ".status.jobStatus"),
    _column("deployment status", ".status.jobDeploymentStatus"),
    _column("ray cluster name", ".status.rayClusterName"),
    _column("start time", ".status.startTime", "date"),
    _column("end time", ".status.endTime", "date"),
    _AGE,
]
RAYJOB_CRD = _crd("ray.io", "v1", "RayJob", "rayjobs", [], _RAYJOB_COLUMNS, _rayjob_schema(
    {**_RAYJOB_SPEC_1_5, "preRunningDeadlineSeconds": {**_INT32, "minimum": 1}}))
RAYJOB_CRD_1_5 = _crd("ray.io", "v1", "RayJob", "rayjobs", [], _RAYJOB_COLUMNS, _rayjob_schema(_RAYJOB_SPEC_1_5))

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
