"""Signal handling, in one place: SIGTERM turned into Ctrl-C during a bring-up or a relay, the
Ctrl-C policy of a rollback (the first warns, the next aborts), and Ctrl-C held back from code it
cannot safely interrupt."""

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


_HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def held_back():
    """Hold Ctrl-C and SIGTERM back until the block ends, then deliver them to the handlers of the
    moment. For httpx's connection pool: httpcore takes its locks in Python code, so a Ctrl-C
    raised just after one is taken leaves it held, and httpcore's own clean-up, the next request
    and closing the client all wait on it forever. A held-back Ctrl-C acts once the request in
    flight ends: at once, or at worst after its timeout."""
    if threading.current_thread() is not threading.main_thread():  # signal handlers run in the main thread
        yield
        return
    held: list[int] = []
    previous = [(s, signal.signal(s, lambda signum, frame: held.append(signum))) for s in _HELD]
    try:
        yield
    finally:
        for signum, handler in previous:
            signal.signal(signum, handler)
        for pending in dict.fromkeys(held):
            signal.raise_signal(pending)


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
