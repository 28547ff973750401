"""What a wait judges an object by: Ready, Pending or Failed, and the status conditions it reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ready:
    reason: str = ""


@dataclass(frozen=True)
class Pending:
    reason: str


@dataclass(frozen=True)
class Failed:
    reason: str


Readiness = Ready | Pending | Failed


def condition(obj: dict, type_: str) -> dict | None:
    """The status condition of ``type_`` on ``obj``, or None."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return cond
    return None


def condition_true(obj: dict, type_: str) -> bool:
    cond = condition(obj, type_)
    return cond is not None and cond.get("status") == "True"


def describe_condition(cond: dict) -> str:
    """``Type=Status (Reason: message)`` for messages."""
    detail = ": ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k))
    text = f"{cond.get('type')}={cond.get('status')}"
    return f"{text} ({detail})" if detail else text
