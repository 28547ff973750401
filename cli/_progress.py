"""Render core progress events on stderr: a live table when both stdout and stderr are a terminal,
plain lines in order otherwise (a pipe or a file keeps every line).

The live table is rebuilt on each refresh (4 a second), so the elapsed time of every wait ticks
while nothing happens. Driver and pod log lines go through `Progress.log`: printed above the live
table (rich prints above a `Live` through its console), never under it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from nrl_k8s.events import Applied, Became, Event, LeftBehind, RolledBack, Waiting, Warning
from nrl_k8s.redact import redact_text

from ._console import err, out

_WAITING = "waiting"


@dataclass
class _Row:
    phase: str
    reason: str
    since: float | None = None  # when the current wait began
    took: float | None = None  # how long the last wait took, once it ended
    waited: set[str] = field(default_factory=set)  # the reasons of the wait that ended: stale if seen again


class Progress:
    """An `Emit` callable; use as a context manager around the operation.

    ``live`` (default: stdout and ``console`` are both a terminal) draws the refreshing table;
    ``clock`` and ``stdout`` are seams for tests."""

    def __init__(self, *, console: Console = err, live: bool | None = None, clock: Callable[[], float] = time.monotonic,
                 stdout: TextIO | None = None) -> None:
        self.console, self.clock, self._stdout = console, clock, stdout
        self.start = clock()
        self.rows: dict[str, _Row] = {}
        self.events: list[Event] = []
        self._lock = threading.RLock()  # orders prints; re-entrant: a signal handler may report while an event prints
        self._state = (
            threading.RLock()
        )  # guards `rows` only; never held while rich draws (its refresh thread reads rows)
        self._partial = ""  # a log line not yet ended
        self._live = None
        if live if live is not None else console.is_terminal and out.is_terminal:
            from rich.live import Live

            self._live = Live(console=console, refresh_per_second=4, transient=False, get_renderable=self.table)

    def __enter__(self) -> Progress:
        if self._live:
            self._live.start()
        return self

    def __exit__(self, exc_type, *_) -> None:
        with self._lock:
            self._flush_partial()
            with self._state:
                waiting = [resource for resource, row in self.rows.items() if row.phase == _WAITING]
            for resource in waiting:  # the operation is over: no row is waiting any more
                self._set(resource, "stopped" if exc_type else "ended", "")
            if self._live:
                self._live.refresh()
                self._live.stop()

    # -- the table ---------------------------------------------------------------------------
    def table(self):
        """The live table as it stands now: one row per resource, each wait with its elapsed time."""
        from rich.table import Table

        now = self.clock()
        with self._state:
            rows = [
                (resource, row.phase, row.reason, self._row_elapsed(row, now)) for resource, row in self.rows.items()
            ]
        # Cells are Text, not markup: a log line printed above the table (markup=False) draws the
        # table with its options, and a markup cell would then show "[dim]" and change the frame's shape.
        table = Table(box=None, show_header=False, padding=(0, 2))
        for resource, phase, reason, elapsed in rows:
            table.add_row(Text(resource), Text(phase), Text(reason), Text(elapsed, style="dim"))
        table.add_row("", "", "", Text(f"{now - self.start:6.1f}s", style="dim"))
        return table

    @staticmethod
    def _row_elapsed(row: _Row, now: float) -> str:
        if row.since is not None:
            return f"{now - row.since:6.1f}s"
        return "" if row.took is None else f"{row.took:6.1f}s"

    # -- events ------------------------------------------------------------------------------
    def _elapsed(self) -> str:
        return f"{self.clock() - self.start:6.1f}s"

    def _end(self, row: _Row, phase: str, reason: str) -> None:
        """A final state replaces the row's waiting state; its wait's reasons are stale from now on."""
        if row.since is not None:
            row.took = self.clock() - row.since
            row.since = None
        if row.phase == _WAITING:
            row.waited.add(row.reason)
        row.phase, row.reason = phase, reason

    def _set(self, resource: str, phase: str, reason: str) -> None:
        reason = redact_text(reason)  # operator and Ray messages can echo anything
        with self._state:
            row = self.rows.get(resource)
            if phase == _WAITING:
                if row is not None and row.phase != _WAITING and reason in row.waited:
                    return  # a late report of a wait that has ended
                if row is None:
                    row = self.rows[resource] = _Row(phase, reason, since=self.clock())
                elif (row.phase, row.reason) == (phase, reason):
                    return
                else:
                    if row.since is None:
                        row.since, row.took, row.waited = self.clock(), None, set()
                    row.phase, row.reason = phase, reason
            elif row is None:
                self.rows[resource] = _Row(phase, reason)
            elif (row.phase, row.reason) == (phase, reason):
                return
            else:
                self._end(row, phase, reason)
        if self._live:
            self._live.refresh()
        else:
            self.console.print(f"[{self._elapsed()}] {resource:<16} {phase:<9} {reason}", markup=False,
                               highlight=False)

    def _note(self, style: str, text: str) -> None:
        text = redact_text(text)
        if self._live:
            self._live.console.print(f"[{style}]{escape(text)}[/]")
        else:
            self.console.print(text, markup=False, highlight=False)

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)
            if isinstance(event, Applied):
                self._set(event.resource, event.action, event.name)
            elif isinstance(event, Waiting):
                self._set(event.resource, _WAITING, event.reason)
            elif isinstance(event, Became):
                self._set(event.resource, "ok", event.what)
            elif isinstance(event, Warning):
                self._note("yellow", f"warning: {event.message}")
            elif isinstance(event, RolledBack):
                deleted = ", ".join(event.deleted) or "nothing"
                done = "rollback aborted" if event.aborted else "rolled back"
                if "rollback" in self.rows:
                    self._set("rollback", "stopped" if event.aborted else "ok", done)
                self._note("red", f"{done}: deleted {deleted}")
                for kept in event.kept:
                    self._note("red", f"kept: {kept}")
            elif isinstance(event, LeftBehind):
                self._note("red", f"left behind: {event.what} ({event.reason}); remove it: {event.command}")

    # -- log lines ---------------------------------------------------------------------------
    def log(self, text: str) -> None:
        """Driver or pod log text as it streams (already redacted), in chunks that need not end a line:
        on stdout through a pipe; above the live table, a whole line at a time, in a terminal."""
        with self._lock:
            if not self._live:
                stream = self._stdout or sys.stdout
                stream.write(text)
                stream.flush()
                return
            *lines, self._partial = (self._partial + text).split("\n")
            for line in lines:
                self._live.console.print(line, markup=False, highlight=False, emoji=False)

    def _flush_partial(self) -> None:
        if self._live and self._partial:
            self._live.console.print(self._partial, markup=False, highlight=False, emoji=False)
        self._partial = ""
