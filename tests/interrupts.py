"""A Ctrl-C at every point of a call where CPython can deliver one.

CPython runs a signal's Python handler in the main thread between two steps of Python: at a
function's start, just after a call returns, between lines. ``at_every_point(call, files)`` calls
``call()`` again and again, running SIGINT's handler of the moment (by default it raises
KeyboardInterrupt) from a trace function at the call's first such point inside ``files``, then
its second, and so on, until a call ends before its point; it yields the point after each
interrupted call, for the test to check what the interrupt left behind. A ``with`` line is
skipped: its exit code is one no signal interrupts (a lock's ``with`` always releases it).
"""

from __future__ import annotations

import linecache
import signal
import sys
import threading
from collections.abc import Callable, Iterator

from sandbox_harness import DEADLINE_S


def _interrupting(point: int, files: tuple[str, ...]):
    seen = [0]

    def tracer(frame, what, arg):
        if what == "line" and linecache.getline(frame.f_code.co_filename, frame.f_lineno).lstrip().startswith("with "):
            return tracer
        seen[0] += 1
        if seen[0] == point:
            handler = signal.getsignal(signal.SIGINT)
            if callable(handler):
                handler(signal.SIGINT, frame)
        return tracer

    def start(frame, what, arg):
        return tracer(frame, what, arg) if frame.f_code.co_filename.endswith(files) else None

    return start, seen


def at_every_point(call: Callable[[], object], files: tuple[str, ...]) -> Iterator[int]:
    point = 0
    while True:
        point += 1
        tracer, seen = _interrupting(point, files)
        sys.settrace(tracer)
        try:
            call()
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        if seen[0] < point:  # the call ended before this point: every point was tried
            return
        yield point


def in_thread(call: Callable[[], object], what: str) -> None:
    """``call()`` in another thread: it must end within the deadline, and its error is raised here."""
    errors: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # raised in the test's thread
            errors.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(DEADLINE_S), f"{what} hung"
    if errors:
        raise errors[0]
