"""Compare what we would apply with what is live: desired fields must match, server additions are fine."""

from __future__ import annotations


def drift(desired, live, path: str = "", limit: int = 10) -> list[str]:
    """Dotted paths (at most `limit`) where `desired` differs from `live`; [] means "matches".

    Fields only present on the live object (server defaults, status, ...) are not drift. Lists of
    named mappings (DGD v1beta1 components, containers, ...) are compared item by item by name,
    as list-maps, so a path names the item (``spec.components.Frontend.replicas``).
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
    elif _named(desired) and _named(live):
        found = {item["name"]: item for item in live}
        for item in desired:
            _walk(item, found.get(item["name"]), f"{path}.{item['name']}" if path else item["name"], out, limit)
    elif desired != live:
        out.append(f"{path or '(root)'}: live {_short(live)} != desired {_short(desired)}")


def _named(value) -> bool:
    """A non-empty list of mappings with distinct string names."""
    if not isinstance(value, list) or not value:
        return False
    names = [item.get("name") if isinstance(item, dict) else None for item in value]
    return all(isinstance(name, str) for name in names) and len(set(names)) == len(names)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def spec_drift(desired: dict, live: dict) -> list[str]:
    """Drift of the spec (what the object does), ignoring metadata and status."""
    return drift(desired.get("spec") or {}, live.get("spec") or {}, "spec")
