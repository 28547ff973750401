"""Named faults the sandbox can inject: the front proxy, RBAC, kwok's Stages, the kubelet and our controllers read them.

A fault is active when set; its value is ``""`` for plain switches. Values:

    miss-driver-submission, dgd-stuck-pending, proxy-forbidden, no-dgd-crd   no value
    rules-incomplete                  no value: SelfSubjectRulesReview answers incomplete, as behind a
                                      webhook authorizer (EKS, GKE, AKS): the front proxy passes on
                                      RBAC's rules marked incomplete, with the webhook's evaluation error
    old-rayjob-crd                    no value; like no-dgd-crd, read at start: KubeRay 1.5's RayJob CRD
    dgd-failed[=MESSAGE]              optional condition message
    frontend-unavailable=SECONDS      number >= 0
    slow=FACTOR                       number > 0: every pod (FACTOR - 1) s later Ready
    api-outage=SECONDS                number > 0: every user request answers 503 for that long
    api-errors=VERB:RESOURCE:CODE:COUNT[;...]   the next COUNT matching calls fail with CODE
    api-latency=VERB:RESOURCE:SECONDS:COUNT[;...]   the next COUNT matching calls are answered
                                      SECONDS late, as by a loaded API server (0 < SECONDS <= 600)
    rbac-deny=VERB:RESOURCE[;...]     matching calls are Forbidden
    delay=KIND:SECONDS[;...]          KIND (dgd, raycluster, deployment, rayjob) becomes ready only
                                      SECONDS after it is created (``sandbox up --delay KIND=SECONDS``)
    kueue=queued|all[,RES=QTY...]     read at start (``sandbox up --kueue``): Kueue runs, managing
                                      queued jobs or all of them (``controlplane.kueue``)
    nodes=POOL[;POOL...]              read at start (``sandbox up --nodes POOL``): the kwok nodes, in
                                      pools that replace the default ones (``controlplane.nodes``)

VERB is one of get, list, watch, create, update, patch, delete or ``*``; RESOURCE is a plural
(``rayjobs``, ``pods``) or ``*``. ``api-errors`` and ``api-latency`` count down as calls consume
them and clear themselves when every entry is used up; ``api-outage`` clears itself once its time
is over. ``slow`` adds to ``delay``'s seconds, never scales them: they are the time a benchmark
asked for.
"""

from __future__ import annotations

import threading
import time

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "*")
_SWITCHES = ("miss-driver-submission", "dgd-stuck-pending", "proxy-forbidden", "no-dgd-crd", "old-rayjob-crd",
             "rules-incomplete")
DELAY_KINDS = ("dgd", "raycluster", "deployment", "rayjob")


def _parse_entries(
    name: str, value: str, fields: int, *, shape: str = "", first: tuple[str, ...] = VERBS
) -> list[list[str]]:
    entries = [[field.strip() for field in part.split(":")] for part in value.split(";") if part.strip()]
    if not entries:
        raise ValueError(f"fault {name} needs a value")
    shape = shape or ("VERB:RESOURCE:CODE:COUNT" if fields == 4 else "VERB:RESOURCE")
    for entry in entries:
        if len(entry) != fields or not all(entry):
            raise ValueError(f"fault {name}: {':'.join(entry)!r} is not {shape}")
        if entry[0] not in first:
            raise ValueError(
                f"fault {name}: unknown {shape.split(':')[0].lower()} {entry[0]!r} (one of {', '.join(first)})"
            )
    return entries


#: The faults whose entries matching calls consume: VERB:RESOURCE:WHAT:COUNT, WHAT's shape.
COUNTED = {"api-errors": "CODE", "api-latency": "SECONDS"}


def _parse_counted(name: str, value: str) -> list[list]:
    parsed: list[list] = []
    for verb, resource, what, count in _parse_entries(name, value, 4, shape=f"VERB:RESOURCE:{COUNTED[name]}:COUNT"):
        if name == "api-errors":
            if not (what.isdigit() and 400 <= int(what) <= 599):
                raise ValueError(f"fault api-errors: code {what!r} is not an HTTP error code 400-599")
            value: float = int(what)
        elif not 0 < (value := _float(what)) <= 600:
            raise ValueError(f"fault api-latency: seconds {what!r} is not a number in (0, 600]")
        if not (count.isdigit() and int(count) > 0):
            raise ValueError(f"fault {name}: count {count!r} is not a positive integer")
        parsed.append([verb, resource, value, int(count)])
    return parsed


def _float(text: str) -> float:
    """``text`` as a number, NaN when it is none (every comparison with NaN is false)."""
    try:
        return float(text)
    except ValueError:
        return float("nan")


def delays(value: str | None) -> dict[str, float]:
    """``KIND:SECONDS[;...]`` (the ``delay`` fault's value) → {kind: seconds}; ValueError when bad."""
    chosen = {}
    for kind, seconds in _parse_entries("delay", value or "", 2, shape="KIND:SECONDS", first=DELAY_KINDS):
        number = _float(seconds)
        if not number >= 0 or number == float("inf"):
            raise ValueError(f"fault delay: {kind + ':' + seconds!r}: SECONDS must be a number >= 0")
        chosen[kind] = number
    return chosen


def _number(name: str, value: str | None, *, positive: bool) -> None:
    try:
        number = float(value or "")
    except ValueError:
        raise ValueError(f"fault {name} needs a number, got {value!r}") from None
    if number < 0 or (positive and number == 0):
        raise ValueError(f"fault {name} must be {'> 0' if positive else '>= 0'}, got {value}")


def validate(name: str, value: str | None) -> str:
    """Return the normalised value of fault ``name``; ValueError when name or value is bad."""
    if name not in Faults.KNOWN:
        raise ValueError(f"unknown fault {name!r} (known: {', '.join(Faults.KNOWN)})")
    if name in _SWITCHES:
        if value:
            raise ValueError(f"fault {name} takes no value")
        return ""
    if name == "dgd-failed":
        return value or ""
    if name == "kueue":
        from .controlplane.kueue import parse

        parse(value or "")
        return str(value)
    if name == "nodes":
        from .controlplane import nodes

        try:
            nodes.parse(value or "")
        except ValueError as err:
            raise ValueError(f"fault nodes: {err}") from None
        return str(value)
    if name in ("frontend-unavailable", "slow", "api-outage"):
        _number(name, value, positive=name != "frontend-unavailable")
        return str(value)
    if name in COUNTED:
        _parse_counted(name, value or "")
    elif name == "delay":
        delays(value)
    else:
        _parse_entries(name, value or "", 2)
    return str(value)


def _matches(entry_verb: str, entry_resource: str, verb: str, resource: str) -> bool:
    return entry_verb in ("*", verb) and entry_resource in ("*", resource)


class Faults:
    """Thread-safe registry of the active faults."""

    KNOWN = (
        "miss-driver-submission",
        "dgd-failed",
        "dgd-stuck-pending",
        "frontend-unavailable",
        "api-errors",
        "api-latency",
        "proxy-forbidden",
        "slow",
        "no-dgd-crd",
        "rbac-deny",
        "api-outage",
        "old-rayjob-crd",
        "delay",
        "rules-incomplete",
        "kueue",
        "nodes",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[str, str] = {}
        self._counted: dict[str, list[list]] = {}  # COUNTED's entries, counting down
        self._outage_until = 0.0

    def set(self, name: str, value: str | None = None) -> None:
        normalised = validate(name, value)
        with self._lock:
            self._active[name] = normalised
            if name in COUNTED:
                self._counted[name] = _parse_counted(name, normalised)
            if name == "api-outage":
                self._outage_until = time.monotonic() + float(normalised)

    def clear(self, name: str) -> None:
        if name not in self.KNOWN:
            raise ValueError(f"unknown fault {name!r} (known: {', '.join(self.KNOWN)})")
        with self._lock:
            self._active.pop(name, None)
            self._counted.pop(name, None)

    def get(self, name: str) -> str | None:
        with self._lock:
            return self._active.get(name)

    def active(self) -> dict[str, str]:
        with self._lock:
            return dict(self._active)

    def take(self, name: str, verb: str, resource: str) -> float | None:
        """Consume one matching entry of the COUNTED fault ``name``: its code or seconds (None: no match)."""
        with self._lock:
            entries = self._counted.get(name, [])
            for entry in entries:
                if _matches(entry[0], entry[1], verb, resource):
                    entry[3] -= 1
                    if left := [e for e in entries if e[3] > 0]:
                        self._counted[name] = left
                        self._active[name] = ";".join(":".join(map(str, e)) for e in left)
                    else:
                        self._counted.pop(name)
                        self._active.pop(name)
                    return entry[2]
        return None

    def in_outage(self) -> bool:
        """True while an ``api-outage`` lasts (it clears itself afterwards)."""
        with self._lock:
            if "api-outage" not in self._active:
                return False
            if time.monotonic() < self._outage_until:
                return True
            self._active.pop("api-outage")
            return False

    def denied(self, verb: str, resource: str) -> bool:
        value = self.get("rbac-deny")
        if value is None:
            return False
        return any(_matches(v, r, verb, resource) for v, r in _parse_entries("rbac-deny", value, 2))
