"""CRD version conversion, as a conversion webhook does it: DGD ``nvidia.com/v1alpha1`` ⇄ ``v1beta1``.

The store keeps every object in its CRD's storage version and converts on the way in and out
(``convert``). The DGD mapping follows the Dynamo operator's webhook:

- spec: ``services{NAME: ...}`` ⇄ ``components[{name: NAME, ...}]``, ``envs`` ⇄ ``env``;
- per service: ``componentType`` (+ ``subComponentType`` prefill/decode of a worker) ⇄ ``type``;
  ``sharedMemory{size|disabled}`` ⇄ ``sharedMemorySize`` ("0" = disabled); ``resources`` (gpu as
  ``nvidia.com/gpu``), ``envs``, ``envFromSecret`` (as ``envFrom: [{secretRef: {name}}]``, which
  ``mainContainer.envFrom`` replaces) and ``extraPodSpec.mainContainer`` ⇄ the pod template's
  container ``main`` (the other PodSpec fields and containers ⇄ the rest of ``podTemplate.spec``);
  ``envFromSecret`` comes back as ``mainContainer.envFrom`` (the saved spec restores it);
  ``extraPodMetadata`` ⇄ ``podTemplate.metadata``; every other field is carried as is;
- status: ``services`` ⇄ ``components`` (the per-part replica counts); the rest is identical.

Round trips are exact: what one version cannot express is kept, as JSON, in the converted
object's annotation ``nvidia.com/dgd-spec`` (the webhook's own bookkeeping annotation), and
restored on the way back while the spec it was saved beside is unchanged.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

ALPHA, BETA = "nvidia.com/v1alpha1", "nvidia.com/v1beta1"
SPEC_ANNOTATION = "nvidia.com/dgd-spec"
MAIN = "main"
GPU = "nvidia.com/gpu"
_WORKER_SUBTYPES = ("prefill", "decode")


def convert(obj: dict, api_version: str) -> dict:
    """``obj`` in ``api_version`` (a converted copy; ``obj`` itself when no conversion applies)."""
    converter = _CONVERTERS.get((obj.get("apiVersion"), api_version))
    return converter(obj) if converter else obj


# -- one service/component ---------------------------------------------------------------------
def _resources_to_native(resources: dict) -> dict:
    out = {k: v for k, v in resources.items() if k not in ("requests", "limits")}
    for section in ("requests", "limits"):
        if isinstance(resources.get(section), dict):
            item = dict(resources[section])
            custom, gpu_type = item.pop("custom", None) or {}, item.pop("gpuType", None) or GPU
            out[section] = {(gpu_type if name == "gpu" else name): value for name, value in {**item, **custom}.items()}
    return out


def _resources_from_native(resources: dict) -> dict:
    out = {k: v for k, v in resources.items() if k not in ("requests", "limits")}
    for section in ("requests", "limits"):
        if isinstance(resources.get(section), dict):
            item, custom = {}, {}
            for name, value in resources[section].items():
                if name in ("cpu", "memory"):
                    item[name] = value
                elif name == GPU:
                    item["gpu"] = value
                else:
                    custom[name] = value
            out[section] = {**item, **({"custom": custom} if custom else {})}
    return out


def _merge_env(common: list, specific: list) -> list:
    merged = {e.get("name"): e for e in common}
    merged.update({e.get("name"): e for e in specific})
    return list(merged.values())


def _service_to_component(name: str, service: dict) -> dict:
    rest = dict(service)
    component = {"name": name}
    kind, sub = rest.pop("componentType", None), rest.get("subComponentType")
    if kind == "worker" and sub in _WORKER_SUBTYPES:
        component["type"] = rest.pop("subComponentType")
    elif kind is not None:
        component["type"] = kind
    shared = rest.pop("sharedMemory", None)
    if isinstance(shared, dict):
        component["sharedMemorySize"] = "0" if shared.get("disabled") else shared.get("size")
    elif shared is not None:
        rest["sharedMemory"] = shared
    if not isinstance(rest.get("envFromSecret", ""), str):
        raise TypeError("envFromSecret is not a string")  # carried as is
    pod_keys = ("resources", "envs", "envFromSecret", "extraPodSpec", "extraPodMetadata")
    if any(key in rest for key in pod_keys):
        extra = dict(rest.pop("extraPodSpec", None) or {})
        main = {"name": MAIN}
        if "resources" in rest:
            main["resources"] = _resources_to_native(rest.pop("resources") or {})
        if secret := rest.pop("envFromSecret", None):  # before mainContainer, whose envFrom replaces it
            main["envFrom"] = [{"secretRef": {"name": secret}}]
        envs = rest.pop("envs", None) or []
        main.update({k: v for k, v in (extra.pop("mainContainer", None) or {}).items() if k != "name"})
        if envs or main.get("env"):
            main["env"] = _merge_env(envs, main.get("env") or [])
        extra["containers"] = [main, *(c for c in extra.get("containers") or [] if c.get("name") != MAIN)]
        template = {"spec": extra}
        if rest.get("extraPodMetadata"):
            template["metadata"] = rest.pop("extraPodMetadata")
        rest.pop("extraPodMetadata", None)
        component["podTemplate"] = template
    return {**component, **rest}


def _component_to_service(component: dict) -> dict:
    rest = {k: v for k, v in component.items() if k != "name"}
    service = {}
    kind = rest.pop("type", None)
    if kind in _WORKER_SUBTYPES:
        service.update(componentType="worker", subComponentType=kind)
    elif kind is not None:
        service["componentType"] = kind
    if "sharedMemorySize" in rest:
        size = rest.pop("sharedMemorySize")
        service["sharedMemory"] = {"disabled": True} if str(size) == "0" else {"size": size}
    template = rest.pop("podTemplate", None)
    if isinstance(template, dict):
        if template.get("metadata"):
            service["extraPodMetadata"] = template["metadata"]
        extra = dict(template.get("spec") or {})
        containers = list(extra.pop("containers", None) or [])
        main = next((c for c in containers if c.get("name") == MAIN), None)
        others = [c for c in containers if c is not main]
        if main is not None:
            main = {k: v for k, v in main.items() if k != "name"}
            if "resources" in main:
                service["resources"] = _resources_from_native(main.pop("resources") or {})
            if "env" in main:
                service["envs"] = main.pop("env")
            if main:
                extra["mainContainer"] = main
        if others:
            extra["containers"] = others
        if extra:
            service["extraPodSpec"] = extra
    return {**service, **rest}


# -- whole specs ---------------------------------------------------------------------------
def _safely(convert_one: Callable[..., dict], carried: dict, *args) -> dict:
    """``convert_one(*args)``; a shape the mapping does not understand is ``carried`` as is (the
    saved spec restores it on the way back)."""
    try:
        return convert_one(*args)
    except (AttributeError, TypeError, ValueError):
        return carried


def _named(value: object) -> bool:
    """A components list every entry of which has a distinct string name."""
    names = [c.get("name") for c in value if isinstance(c, dict)] if isinstance(value, list) else []
    return len(names) == len(value or []) and all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def _to_beta(spec: dict) -> dict:
    out = {}
    for key, value in spec.items():
        if key == "services" and isinstance(value, dict) and all(isinstance(s, dict) for s in value.values()):
            out["components"] = [_safely(_service_to_component, {"name": name, **service}, name, service)
                                 for name, service in value.items()]
        else:
            out["env" if key == "envs" else key] = value
    return out


def _to_alpha(spec: dict) -> dict:
    out = {}
    for key, value in spec.items():
        if key == "components" and _named(value):
            out["services"] = {c["name"]: _safely(_component_to_service, {k: v for k, v in c.items() if k != "name"}, c)
                               for c in value}
        else:
            out["envs" if key == "env" else key] = value
    return out


def _status(status: object, old: str, new: str) -> object:
    if not isinstance(status, dict) or old not in status or new in status:
        return status
    return {(new if key == old else key): value for key, value in status.items()}


def _dgd(to: str, forward: Callable[[dict], dict], back: Callable[[dict], dict], counts: tuple[str, str]):
    def converter(obj: dict) -> dict:
        out = copy.deepcopy(obj)
        out["apiVersion"] = to
        metadata = out.setdefault("metadata", {})
        annotations = dict(metadata.get("annotations") or {})
        saved = annotations.pop(SPEC_ANNOTATION, None)
        spec = obj.get("spec")
        if isinstance(spec, dict):
            restored = _restored(saved, spec, back)
            if restored is not None:
                out["spec"] = restored
            else:
                out["spec"] = forward(spec)
                if back(out["spec"]) != spec:
                    annotations[SPEC_ANNOTATION] = json.dumps(spec, separators=(",", ":"))
        if annotations:
            metadata["annotations"] = annotations
        else:
            metadata.pop("annotations", None)
        if "status" in out:
            out["status"] = _status(out["status"], *counts)
        return out

    return converter


def _restored(saved: str | None, spec: dict, back: Callable[[dict], dict]) -> dict | None:
    """The spec saved beside ``spec`` when it still converts back to exactly ``spec``."""
    try:
        candidate = json.loads(saved) if saved else None
    except ValueError:
        return None
    return candidate if isinstance(candidate, dict) and back(candidate) == spec else None


_CONVERTERS = {
    (ALPHA, BETA): _dgd(BETA, _to_beta, _to_alpha, ("services", "components")),
    (BETA, ALPHA): _dgd(ALPHA, _to_alpha, _to_beta, ("components", "services")),
}
