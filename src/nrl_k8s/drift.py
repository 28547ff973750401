"""Compare what we would apply with what is live: desired fields must match, server additions are fine."""

from __future__ import annotations


def drift(desired, live, path: str = "", limit: int = 10) -> list[str]:
    """Dotted paths (at most `limit`) where `desired` differs from `live`; [] means "matches".

    Fields only present on the live object (server defaults, status, ...) are not drift.
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
    elif desired != live:
        out.append(f"{path or '(root)'}: live {_short(live)} != desired {_short(desired)}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def spec_drift(desired: dict, live: dict) -> list[str]:
    """Drift of the spec (what the object does), ignoring metadata and status."""
    return drift(desired.get("spec") or {}, live.get("spec") or {}, "spec")
