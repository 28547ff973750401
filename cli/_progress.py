"""Render core progress events on stderr: a live table on a TTY, plain lines otherwise."""

from __future__ import annotations

import threading
import time

from rich.markup import escape

from nrl_k8s.events import Applied, Became, Event, LeftBehind, RolledBack, Waiting, Warning
from nrl_k8s.redact import redact_text

from ._console import err


class Progress:
    """An `Emit` callable; use as a context manager around the operation."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.rows: dict[str, tuple[str, str]] = {}  # resource -> (phase, reason)
        self.events: list[Event] = []
        self._lock = threading.RLock()  # re-entrant: a signal handler may report while an event prints
        self._live = None
        if err.is_terminal:  # rich's live table only on a TTY: plain lines need neither import
            from rich.live import Live

            self._live = Live(self._table(), console=err, refresh_per_second=4, transient=False)

    def __enter__(self) -> "Progress":
        if self._live:
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live:
            self._live.update(self._table())
            self._live.stop()

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self.start:6.1f}s"

    def _table(self):
        from rich.table import Table

        table = Table(box=None, show_header=False, padding=(0, 2))
        for resource, (phase, reason) in self.rows.items():
            table.add_row(escape(resource), phase, escape(reason))
        table.add_row("", "", f"[dim]{self._elapsed()}[/]")
        return table

    def _set(self, resource: str, phase: str, reason: str) -> None:
        reason = redact_text(reason)  # operator and Ray messages can echo anything
        if self.rows.get(resource) == (phase, reason):
            return
        self.rows[resource] = (phase, reason)
        if self._live:
            self._live.update(self._table())
        else:
            err.print(f"[{self._elapsed()}] {resource:<16} {phase:<9} {reason}", markup=False, highlight=False)

    def _note(self, style: str, text: str) -> None:
        text = redact_text(text)
        if self._live:
            self._live.console.print(f"[{style}]{escape(text)}[/]")
        else:
            err.print(text, markup=False, highlight=False)

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)
            if isinstance(event, Applied):
                self._set(event.resource, event.action, event.name)
            elif isinstance(event, Waiting):
                self._set(event.resource, "waiting", event.reason)
            elif isinstance(event, Became):
                self._set(event.resource, "ok", event.what)
            elif isinstance(event, Warning):
                self._note("yellow", f"warning: {event.message}")
            elif isinstance(event, RolledBack):
                deleted = ", ".join(event.deleted) or "nothing"
                self._note("red", f"{'rollback aborted' if event.aborted else 'rolled back'}: deleted {deleted}")
                for kept in event.kept:
                    self._note("red", f"kept: {kept}")
            elif isinstance(event, LeftBehind):
                self._note("red", f"left behind: {event.what} ({event.reason}); remove it: {event.command}")
