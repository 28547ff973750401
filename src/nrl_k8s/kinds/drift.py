"""Compare what we would apply with what is live: desired fields must match, server additions are fine."""

from __future__ import annotations


def drift(desired, live, path: str = "", limit: int = 10) -> list[str]:
    """Dotted paths (at most `limit`) where `desired` differs from `live`; [] means "matches".

    Fields only present on the live object (server defaults, status, ...) are not drift, also
    inside list items (a real API server gives a port ``protocol: TCP``, a worker group
    ``maxReplicas``). Lists of mappings keyed by ``name`` or ``groupName`` (DGD v1beta1 components,
    containers, KubeRay worker groups, ...) are compared item by item by that key, as list-maps, so
    a path names the item (``spec.components.Frontend.replicas``); other lists of mappings of the
    same length item by item in order.
    """
    out: list[str] = []
    _walk(desired, live, path, out, limit)
    return out


def _walk(desired, live, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(desired, dict) and isinstance(live, dict):
        for key, value in desired.items():
            _walk(value, live.get(key), f"{path}.{key}" if path else str(key), out, limit)
    elif (key := _key(desired)) is not None and _key(live) == key:
        found = {item[key]: item for item in live}
        for item in desired:
            _walk(item, found.get(item[key]), f"{path}.{item[key]}" if path else item[key], out, limit)
    elif _mappings(desired) and _mappings(live) and len(desired) == len(live):
        for index, (want, have) in enumerate(zip(desired, live, strict=True)):
            _walk(want, have, f"{path}.{index}" if path else str(index), out, limit)
    elif desired != live:
        out.append(f"{path or '(root)'}: live {_short(live)} != desired {_short(desired)}")


def _mappings(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _key(value) -> str | None:
    """The list-map key of a non-empty list of mappings (``name`` or ``groupName``, distinct strings)."""
    if not _mappings(value) or not value:
        return None
    for key in ("name", "groupName"):
        names = [item.get(key) for item in value]
        if all(isinstance(name, str) for name in names) and len(set(names)) == len(names):
            return key
    return None


def _short(value) -> str:
    from nrl_k8s.redact import redact_text  # before the cut: a cut value no longer looks like one

    text = redact_text(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."


def spec_drift(desired: dict, live: dict) -> list[str]:
    """Drift of the spec (what the object does), ignoring metadata and status."""
    return drift(desired.get("spec") or {}, live.get("spec") or {}, "spec")
