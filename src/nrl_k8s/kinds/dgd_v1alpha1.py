"""DGD ``nvidia.com/v1alpha1``: ``spec.services`` is a map of service name to service.

Each service carries ``componentType``, ``replicas``, ``resources{requests,limits}{cpu,memory,gpu}``,
``multinode`` and ``extraPodSpec`` (PodSpec fields plus ``mainContainer``). The rules behind
``dgd``'s interface: checking a spec, merging ``overrides`` (dicts merge, lists replace),
the pod defaults and the per-service sizes.
"""

from __future__ import annotations

from nrl_k8s.config.files import MERGER
from nrl_k8s.kinds import k8s_rules as rules
from nrl_k8s.kinds.k8s_rules import Invalid

from .base import Kind, without_nulls
from .dra import GPU_RESOURCE as GPU
from .pod_schema import check_extra_pod_spec, whole_number
from .raycluster import pull_secret_refs

KIND = Kind("nvidia.com", "v1alpha1", "dynamographdeployments", "DynamoGraphDeployment")
FIELD = "services"  # where the spec lists the graph's parts (and status counts their replicas)
# The fields of Dynamo's v1alpha1 DynamoGraphDeploymentSpec and of a service in it (its
# DynamoComponentDeploymentSharedSpec), as of Dynamo 1.6 (deploy/operator/api/v1alpha1).
SPEC_FIELDS = frozenset({
    "annotations", "backendFramework", "envs", "experimental", "labels", "priorityClassName", "providerOverride",
    "pvcs", "restart", "services", "topologyConstraint",
})
SERVICE_FIELDS = frozenset({
    "annotations", "autoscaling", "checkpoint", "componentType", "dynamoNamespace", "envFromSecret", "envs",
    "eppConfig", "extraPodMetadata", "extraPodSpec", "failover", "frontendSidecar", "globalDynamoNamespace",
    "gpuMemoryService", "ingress", "labels", "livenessProbe", "modelRef", "multinode", "readinessProbe", "replicas",
    "resources", "scalingAdapter", "serviceName", "sharedMemory", "subComponentType", "topologyConstraint",
    "volumeMounts",
})  # fmt: skip


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
    rules.no_inline_secrets(spec, ("spec",))  # the graph's, every service's, sidecar's... envs
    return spec


def _check_service(service: object, path: tuple) -> None:
    service = rules.expect(service, dict, path)
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


def merge(spec: dict, overrides: dict) -> dict:
    """``overrides`` deep-merged onto ``spec`` (copies of both); they may only name services it has."""
    if "services" in overrides:
        named = overrides["services"]
        if not isinstance(named, dict):
            raise Invalid(("services",), f"expected a mapping of service names, got {rules.describe(named)}",
                          "e.g. services: {VllmDecodeWorker: {replicas: 2}}")
        for name, service in named.items():
            if name not in spec["services"]:
                raise Invalid(("services", name), "the DGD manifest has no such service",
                              f"its services are: {', '.join(spec['services'])}")
            if not isinstance(service, dict):
                raise Invalid(("services", name), f"expected a mapping, got {rules.describe(service)}",
                              "override fields of the service, e.g. replicas: 2")
    return MERGER.merge(spec, overrides)


def check_override_fields(spec: dict, overrides: dict, hints: dict) -> None:
    """Each field ``overrides`` sets is one of the spec or of a service (``hints``: special ones'
    hints), else Invalid: an override of an unknown field would do nothing."""
    rules.known_fields(overrides, SPEC_FIELDS, what="a v1alpha1 DGD spec", present=spec, hints=hints)
    for name, service in (overrides.get("services") or {}).items():
        rules.known_fields(service, SERVICE_FIELDS, ("services", name), what="a v1alpha1 DGD service",
                           present=spec["services"][name])


def apply_pod_defaults(spec: dict, image: str | None, pull_secrets: list) -> None:
    """Per service: ``mainContainer.image`` and ``imagePullSecrets`` only where unset; then the
    rendered ``extraPodSpec`` checked (Invalid with its path in the spec)."""
    for name, service in spec["services"].items():
        pod = service.get("extraPodSpec") or {}
        if image and not (pod.get("mainContainer") or {}).get("image"):
            pod.setdefault("mainContainer", {})["image"] = image
        if pull_secrets and not pod.get("imagePullSecrets"):
            pod["imagePullSecrets"] = pull_secret_refs(pull_secrets)
        if pod:
            service["extraPodSpec"] = pod
            try:
                check_extra_pod_spec(pod)
            except Invalid as bad:
                raise bad.within(("spec", "services", name, "extraPodSpec")) from None


def pod_specs(spec: dict) -> list[dict]:
    """Each service's pod spec (``extraPodSpec``) that the manifest declares."""
    return [service["extraPodSpec"] for service in spec["services"].values() if service.get("extraPodSpec")]


def main_containers(spec: dict) -> list[tuple[str, str | None, dict, list, bool]]:
    """Per service: (name, role: ``subComponentType`` else ``componentType``, ``mainContainer``, the
    env the operator puts before the container's (the graph's ``envs``, then the service's), whether
    more env comes from a Secret (``envFromSecret``))."""
    return [(name, service.get("subComponentType") or service.get("componentType"),
             (service.get("extraPodSpec") or {}).get("mainContainer") or {},
             [*(spec.get("envs") or []), *(service.get("envs") or [])], bool(service.get("envFromSecret")))
            for name, service in (spec.get("services") or {}).items()]


def parts(spec: dict) -> list[tuple[str, str | None, int, int, int]]:
    """Per service: (name, component type, replicas, nodes per replica, GPUs per node)."""
    out = []
    for name, service in (spec.get("services") or {}).items():
        resources = service.get("resources") or {}
        per_pod = (resources.get("limits") or {}).get("gpu") or (resources.get("requests") or {}).get("gpu") or 0
        replicas = service.get("replicas")
        nodes = (service.get("multinode") or {}).get("nodeCount") or 1
        out.append(
            (name, service.get("componentType"), 1 if replicas is None else int(replicas), int(nodes), int(per_pod))
        )
    return out


def component_pods(spec: dict) -> list[tuple[str, dict, int]]:
    """Per service: (name, the pod spec the operator makes of it, pods: replicas x nodes). The pod spec
    is ``extraPodSpec`` with ``mainContainer`` as its container, asking for the service's
    ``resources`` (``gpu`` as ``nvidia.com/gpu``, or its ``gpuType``; ``custom`` as written)."""
    out = []
    for name, service in (spec.get("services") or {}).items():
        pod = dict(service.get("extraPodSpec") or {})
        main = dict(pod.pop("mainContainer", None) or {})
        resources = service.get("resources") or {}
        main["resources"] = {section: _native(resources[section]) for section in ("requests", "limits")
                             if isinstance(resources.get(section), dict)} or main.get("resources") or {}
        pod["containers"] = [{"name": "main", **main}, *(pod.get("containers") or [])]
        replicas = service.get("replicas")
        nodes = (service.get("multinode") or {}).get("nodeCount") or 1
        out.append((name, pod, (1 if replicas is None else int(replicas)) * int(nodes)))
    return out


def _native(section: dict) -> dict:
    custom, gpu_type = section.get("custom") or {}, section.get("gpuType") or GPU
    return {(gpu_type if k == "gpu" else k): v for k, v in {**section, **custom}.items()
            if k not in ("custom", "gpuType") and v not in (None, "")}
