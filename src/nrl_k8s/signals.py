"""Signal handling, in one place: SIGTERM turned into Ctrl-C during a bring-up or a relay, and the
Ctrl-C policy of a rollback (the first warns, the next aborts)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from nrl_k8s.errors import NrlK8sError
from nrl_k8s.events import Emit, Warning


class Interrupted(NrlK8sError):
    """Ctrl-C / SIGTERM during the bring-up."""

    exit_code = 130


@contextmanager
def interrupts_raise():
    """Turn SIGTERM into KeyboardInterrupt so both roll back the same way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class RollbackInterrupts:
    """Use around a rollback: the first Ctrl-C (or SIGTERM) warns, the next raises KeyboardInterrupt once."""

    def __init__(self, emit: Emit):
        self.emit, self.count, self.abortable = emit, 0, True
        self._previous: list = []

    def _handle(self, signum, frame) -> None:
        self.count += 1
        if self.count == 1:
            self.emit(Warning("rolling back, Ctrl-C again to abort (what is not deleted yet is left behind)"))
        elif self.abortable:
            self.abortable = False
            raise KeyboardInterrupt

    def __enter__(self) -> RollbackInterrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = [(s, signal.signal(s, self._handle)) for s in (signal.SIGINT, signal.SIGTERM)]
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous:
            signal.signal(signum, handler)
