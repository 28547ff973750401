"""Work at once on threads: a fan-out of waits with one progress stream, a call in the background,
and checks gathered in call order. Daemon threads, so Ctrl-C stays immediate."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from nrl_k8s.errors import NrlK8sError
from nrl_k8s.events import Emit


def fan_out(jobs: dict[str, Callable[[Emit], object]], emit: Emit, done: Callable[[str], None]) -> None:
    """Run ``jobs`` (label -> fn) at once; ``done(label)`` as each finishes; the first error wins.

    Daemon threads, so Ctrl-C is immediate; events of jobs still running after a failure are dropped.
    """
    results: queue.Queue = queue.Queue()
    stopped = threading.Event()

    def guarded(event) -> None:
        if not stopped.is_set():
            emit(event)

    def run(label: str, fn) -> None:
        try:
            fn(guarded)
            results.put((label, None))
        except NrlK8sError as err:
            results.put((label, err))

    for label, fn in jobs.items():
        threading.Thread(target=run, args=(label, fn), daemon=True, name=f"wait-{label}").start()
    try:
        for _ in jobs:
            label, error = results.get()
            if error is not None:
                raise error
            done(label)
    finally:
        stopped.set()


class Background:
    """``call()`` running in a daemon thread (Ctrl-C stays immediate); :meth:`result` waits for it
    and returns its value or raises its error."""

    def __init__(self, call: Callable[[], Any], name: str = "background"):
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, args=(call,), daemon=True, name=name).start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self._value = call()
        except BaseException as exc:  # raised in the thread that asks for the result
            self._error = exc
        finally:
            self._done.set()

    def result(self):
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


def gather(*calls: Callable[[], Any]) -> list:
    """Run ``calls`` at once, the first in this thread; their results in order. The first error in
    call order is raised, so checks that run together fail as they would one after another."""
    others = [Background(call, f"gather-{index}") for index, call in enumerate(calls[1:], 1)]
    first = calls[0]()
    return [first, *(task.result() for task in others)]
