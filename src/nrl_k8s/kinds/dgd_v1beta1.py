"""DGD ``nvidia.com/v1beta1``: ``spec.components`` is a list keyed by ``name``.

Each component carries ``type``, ``replicas``, ``multinode`` and ``podTemplate`` (a Kubernetes
PodTemplateSpec whose container ``main`` is the workload; other containers are sidecars).
The rules behind ``dgd``'s interface, equivalent to v1alpha1's:

- ``overrides`` merge into ``spec.components`` by component name (an override of one component
  keeps the others; naming an unknown one is an error); inside a component dicts merge and lists
  replace, except the pod template's ``containers`` and ``initContainers``, which merge by
  container name as in a strategic merge patch (an override of ``main``'s args keeps its
  resources). A list-map is written either as a list of entries with ``name`` or as a mapping
  of name to entry (what ``+infra.dynamo.KEY.overrides.components.NAME.replicas=2`` gives);
- pod defaults: the ``main`` container's image only where unset (a template without ``main``
  gets one), ``imagePullSecrets`` on the pod template only where unset, ``serviceAccountName``
  never injected.
"""

from __future__ import annotations

import re
from typing import Any

from deepmerge import Merger
from deepmerge.strategy.core import STRATEGY_END

from nrl_k8s.kinds import k8s_rules as rules
from nrl_k8s.kinds.k8s_rules import Invalid

from .base import Kind, without_nulls
from .dra import GPU_RESOURCE as GPU
from .pod_schema import check_pod_template
from .raycluster import pull_secret_refs

KIND = Kind("nvidia.com", "v1beta1", "dynamographdeployments", "DynamoGraphDeployment")
FIELD = "components"  # where the spec lists the graph's parts (and status counts their replicas)
MAIN = "main"
MAX_COMPONENTS = 25
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$")
_NAME_HINT = "letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
_CONTAINER_LISTS = ("containers", "initContainers")  # merged by name inside podTemplate.spec
# The fields of Dynamo's v1beta1 DynamoGraphDeploymentSpec and of a component in it, as of
# Dynamo 1.6 (deploy/operator/api/v1beta1).
SPEC_FIELDS = frozenset({
    "annotations", "backendFramework", "components", "env", "experimental", "labels", "priorityClassName",
    "providerOverride", "restart", "topologyConstraint",
})
COMPONENT_FIELDS = frozenset({
    "compilationCache", "dynamoSidecar", "eppConfig", "experimental", "frontendSidecar", "globalDynamoNamespace",
    "minAvailable", "modelRef", "multinode", "name", "podTemplate", "providerOverride", "replicas", "roles",
    "runtimeVersionOverride", "scalingAdapter", "sharedMemorySize", "topologyConstraint",
})  # fmt: skip


def check_spec(spec: object) -> dict:
    """``spec`` without null entries, if the fields nrl-k8s reads and renders have their types.

    Components form a list of mappings with unique names (case-insensitively, at most 25);
    replicas, multinode, ``sharedMemorySize`` and ``podTemplate`` (a Kubernetes PodTemplateSpec;
    images may still be unset) are checked the way the operator and Kubernetes read them.
    Problems name the component (``spec.components.NAME...``) once it has a valid name.
    """
    spec = without_nulls(rules.expect(spec, dict, ("spec",)))
    components = spec.get("components")
    if not components:
        problem = "is missing" if components is None else "is empty"
        raise Invalid(("spec", "components"), problem, "declare the graph's components, e.g. a Frontend and a worker")
    components = rules.expect(components, list, ("spec", "components"))
    if len(components) > MAX_COMPONENTS:
        raise Invalid(("spec", "components"), f"has {len(components)} components, more than {MAX_COMPONENTS}",
                      "the operator accepts at most 25 components per graph")
    seen: dict[str, str] = {}
    for index, component in enumerate(components):
        component = rules.expect(component, dict, ("spec", "components", index))
        name = _component_name(component.get("name"), ("spec", "components", index, "name"))
        if name.lower() in seen:
            raise Invalid(("spec", "components", index, "name"), f"{name!r} repeats component {seen[name.lower()]!r}",
                          "component names are unique (case-insensitively)")
        seen[name.lower()] = name
        _check_component(component, ("spec", "components", name))
    rules.no_inline_secrets({k: v for k, v in spec.items() if k != "components"}, ("spec",))  # the graph's env...
    return spec


def _component_name(name: object, path: tuple) -> str:
    if name is None:
        raise Invalid(path, "is required", "every component has a name, e.g. name: Frontend")
    name = rules.expect(name, str, path)
    if len(name) > 63 or not _NAME.match(name):
        raise Invalid(path, f"{name!r} is not a valid component name", _NAME_HINT)
    return name


def _check_component(component: dict, path: tuple) -> None:
    if "type" in component:
        rules.expect(component["type"], str, (*path, "type"))
    if "replicas" in component:
        rules.count(component["replicas"], (*path, "replicas"), what="a replica count")
    multinode = rules.expect(component.get("multinode", {}), dict, (*path, "multinode"))
    if "nodeCount" in multinode:
        rules.count(multinode["nodeCount"], (*path, "multinode", "nodeCount"), minimum=1, what="a node count")
    if "sharedMemorySize" in component:
        rules.quantity(component["sharedMemorySize"], (*path, "sharedMemorySize"))
    if "podTemplate" in component:
        _check_template(component["podTemplate"], (*path, "podTemplate"), rendered=False)
    rules.no_inline_secrets(component, path)  # its roles', sidecars'... envs too


def _check_template(template: Any, path: tuple, *, rendered: bool) -> None:
    """``check_pod_template``, with a container named in the problem's path (``containers.main``)
    as overrides name it, rather than by its index."""
    try:
        check_pod_template(template, rendered=rendered)
    except Invalid as bad:
        where = bad.path
        if (
            len(where) > 2
            and where[:2] in (("spec", field) for field in _CONTAINER_LISTS)
            and isinstance(where[2], int)
        ):
            item = template["spec"][where[1]][where[2]]
            if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
                where = (*where[:2], item["name"], *where[3:])
        raise Invalid((*path, *where), bad.problem, bad.hint) from None


# -- overrides ------------------------------------------------------------------------------
def _by_name(merger: Merger, path: list, base: list, patch: list):
    """deepmerge list strategy: a pod template's containers merge by name (others fall through)."""
    if tuple(path[-3:-1]) != ("podTemplate", "spec") or path[-1] not in _CONTAINER_LISTS:
        return STRATEGY_END
    merged = list(base)
    for item in patch:
        index = next((i for i, old in enumerate(merged) if old.get("name") == item["name"]), None)
        if index is None:
            merged.append(item)
        else:
            merged[index] = merger.value_strategy([*path, index], merged[index], item)
    return merged


_MERGER = Merger([(dict, ["merge"]), (list, [_by_name, "override"])], ["override"], ["override"])


def _keyed(value: object, path: tuple, what: str) -> dict[str, dict]:
    """A list-map override (a list of entries with ``name``, or a mapping of name to entry) as a
    mapping of name to entry."""
    if isinstance(value, dict):
        entries = value
    elif isinstance(value, list):
        entries = {}
        for index, item in enumerate(value):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise Invalid((*path, index), f"expected a mapping with the {what}'s name, got {rules.describe(item)}",
                              "e.g. [{name: NAME, ...}], or a mapping {NAME: {...}}")
            entries[item["name"]] = {k: v for k, v in item.items() if k != "name"}
    else:
        raise Invalid(path, f"expected a list of {what}s or a mapping of {what} names, got {rules.describe(value)}",
                      "e.g. {NAME: {...}} or [{name: NAME, ...}]")
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            raise Invalid((*path, name), f"expected a mapping, got {rules.describe(entry)}",
                          f"override fields of the {what}, e.g. {{{name}: {{...}}}}")
    return entries


def _component_override(override: dict, path: tuple) -> dict:
    """``override`` with its pod template's container lists as lists of named containers."""
    template = override.get("podTemplate")
    pod = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(template, dict) or not isinstance(pod, dict):
        return override
    pod = {**pod, **{field: [{"name": name, **entry} for name, entry in
                             _keyed(pod[field], (*path, "podTemplate", "spec", field), "container").items()]
                     for field in _CONTAINER_LISTS if pod.get(field) is not None}}
    return {**override, "podTemplate": {**template, "spec": pod}}


def merge(spec: dict, overrides: dict) -> dict:
    """``overrides`` merged onto ``spec`` (copies of both): components by name, the rest as deep merge."""
    named = _keyed(overrides["components"], ("components",), "component") if "components" in overrides else {}
    known = [component["name"] for component in spec["components"]]
    for name in named:
        if name not in known:
            raise Invalid(("components", name), "the DGD manifest has no such component",
                          f"its components are: {', '.join(known)}")
    merged = _MERGER.merge(spec, {k: v for k, v in overrides.items() if k != "components"})
    merged["components"] = [
        _MERGER.merge(component, _component_override(named[component["name"]], ("components", component["name"])))
        if component["name"] in named else component
        for component in spec["components"]
    ]
    return merged


def check_override_fields(spec: dict, overrides: dict, hints: dict) -> None:
    """Each field ``overrides`` sets is one of the spec or of a component (``hints``: special ones'
    hints), else Invalid: an override of an unknown field would do nothing."""
    rules.known_fields(overrides, SPEC_FIELDS, what="a v1beta1 DGD spec", present=spec, hints=hints)
    components = {component["name"]: component for component in spec["components"]}
    named = _keyed(overrides["components"], ("components",), "component") if "components" in overrides else {}
    for name, override in named.items():
        rules.known_fields(override, COMPONENT_FIELDS, ("components", name), what="a v1beta1 DGD component",
                           present=components[name])


# -- pod defaults ---------------------------------------------------------------------------
def apply_pod_defaults(spec: dict, image: str | None, pull_secrets: list) -> None:
    """Per component: the ``main`` container's image and the pod's ``imagePullSecrets`` only
    where unset; then the rendered ``podTemplate`` checked (Invalid with its path in the spec):
    a ``main`` container with an image, every sidecar with one."""
    for component in spec["components"]:
        template = component.get("podTemplate") or {}
        pod = template.get("spec") or {}
        containers = pod.get("containers") or []
        main = next((c for c in containers if c.get("name") == MAIN), None)
        if image and main is None:
            containers.insert(0, main := {"name": MAIN, "image": image})
        elif image and main is not None and not main.get("image"):
            main["image"] = image
        if pull_secrets and not pod.get("imagePullSecrets"):
            pod["imagePullSecrets"] = pull_secret_refs(pull_secrets)
        path = ("spec", "components", component["name"], "podTemplate")
        if main is None:
            raise Invalid((*path, "spec", "containers"), f"has no container named {MAIN!r}",
                          f"the {MAIN!r} container runs the component: add one with an image, or set infra.image")
        component["podTemplate"] = {**template, "spec": {**pod, "containers": containers}}
        _check_template(component["podTemplate"], path, rendered=True)


def pod_specs(spec: dict) -> list[dict]:
    """Each component's pod spec (``podTemplate.spec``)."""
    return [component["podTemplate"]["spec"] for component in spec["components"]
            if (component.get("podTemplate") or {}).get("spec")]


def main_containers(spec: dict) -> list[tuple[str, str | None, dict, list, bool]]:
    """Per component: (name, type, its ``main`` container, the graph's ``env`` (put before the
    container's), False: no Secret adds env outside the container's own ``envFrom``)."""
    out = []
    for component in spec.get("components") or []:
        containers = ((component.get("podTemplate") or {}).get("spec") or {}).get("containers") or []
        main: dict = next((c for c in containers if c.get("name") == MAIN), {})
        out.append((component["name"], component.get("type"), main, list(spec.get("env") or []), False))
    return out


def parts(spec: dict) -> list[tuple[str, str | None, int, int, int]]:
    """Per component: (name, type, replicas, nodes per replica, GPUs per node: every container's
    ``nvidia.com/gpu`` limit, else request)."""
    out = []
    for component in spec.get("components") or []:
        gpus = 0
        for container in ((component.get("podTemplate") or {}).get("spec") or {}).get("containers") or []:
            resources = container.get("resources") or {}
            gpus += int((resources.get("limits") or {}).get(GPU) or (resources.get("requests") or {}).get(GPU) or 0)
        replicas = component.get("replicas")
        nodes = (component.get("multinode") or {}).get("nodeCount") or 1
        out.append(
            (component["name"], component.get("type"), 1 if replicas is None else int(replicas), int(nodes), gpus)
        )
    return out


def component_pods(spec: dict) -> list[tuple[str, dict, int]]:
    """Per component: (name, its ``podTemplate``'s pod spec, pods: replicas x nodes)."""
    out = []
    for component in spec.get("components") or []:
        replicas = component.get("replicas")
        nodes = (component.get("multinode") or {}).get("nodeCount") or 1
        pod = ((component.get("podTemplate") or {}).get("spec")) or {}
        out.append((component["name"], pod, (1 if replicas is None else int(replicas)) * int(nodes)))
    return out
