"""Typed progress events: the core reports, the CLI renders, tests collect them in a list.

`resource` is a short label such as ``dynamo.serving``, ``rayjob`` or ``raycluster``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Applied:
    resource: str
    name: str
    action: str  # "created" | "reused"


@dataclass(frozen=True)
class Waiting:
    resource: str
    reason: str


@dataclass(frozen=True)
class Became:
    """A resource reached a milestone (e.g. ready, owner linked, driver submitted)."""

    resource: str
    what: str


@dataclass(frozen=True)
class Warning:
    message: str


@dataclass(frozen=True)
class RolledBack:
    deleted: tuple[str, ...]
    kept: tuple[str, ...] = ()  # what this run did not delete on purpose, and why
    aborted: bool = False  # a further Ctrl-C stopped the rollback


@dataclass(frozen=True)
class LeftBehind:
    """An object a run leaves running that nothing will remove: why, and the command that removes it."""

    what: str
    reason: str
    command: str


Event = Applied | Waiting | Became | Warning | RolledBack | LeftBehind
Emit = Callable[[Event], None]


def discard(_: Event) -> None:
    """An `Emit` that ignores everything."""
