"""The one wait primitive: list, then watch from that resourceVersion until a deadline.

The watch is re-established when it expires, a 410 Gone re-lists, and any other failure to
watch (refused, 5xx once the request's retries are spent, ...) falls back to polling, still
bounded by the deadline: only a failure to read at all ends the wait. 401 and a kind the
server does not serve are raised at once. Each state is
judged by a readiness function returning ``Ready`` / ``Pending(reason)`` / ``Failed(reason)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from nrl_k8s.errors import ApiError, NotFoundError, ResourceFailed, UnauthorizedError, WaitTimeout
from nrl_k8s.kinds.base import Kind
from nrl_k8s.kinds.readiness import Failed, Readiness, Ready
from nrl_k8s.kube.diagnose import report
from nrl_k8s.kube.errors import GoneError

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube


@overload
def wait(kube: Kube, kind: Kind, readiness: Callable[[dict | None], Readiness], *, name: str,
         label_selector: None = None, namespace: str | None = None, timeout_s: float,
         on_progress: Callable[[str], None] | None = None, what: str = "", pods: str | None = None) -> dict | None:
    ...


@overload
def wait(kube: Kube, kind: Kind, readiness: Callable[[list[dict]], Readiness], *, name: None = None,
         label_selector: str, namespace: str | None = None, timeout_s: float,
         on_progress: Callable[[str], None] | None = None, what: str = "", pods: str | None = None) -> list[dict]:
    ...


def wait(
    kube: Kube,
    kind: Kind,
    readiness: Callable[[Any], Readiness],  # gets the object (or None) by name, a list by selector
    *,
    name: str | None = None,
    label_selector: str | None = None,
    namespace: str | None = None,
    timeout_s: float,
    on_progress: Callable[[str], None] | None = None,
    what: str = "",
    pods: str | None = None,
) -> dict | list[dict] | None:
    """Wait until ``readiness`` says Ready and return what it judged.

    With ``name``, readiness gets the object (None while absent); with ``label_selector``, the
    list of matching objects sorted by name. Failed raises ResourceFailed(``what``: reason);
    the deadline raises WaitTimeout naming ``what`` and the last Pending reason, which is also
    passed to ``on_progress`` each time it changes. ``pods``, the label selector of the pods
    the object runs, adds to either error why those not Ready are not and the Warning Events
    of them and of the object (``diagnose.report``).
    """
    if (name is None) == (label_selector is None):
        raise ValueError("wait needs exactly one of name or label_selector")
    try:
        return _wait(kube, kind, readiness, name, label_selector, namespace, timeout_s, on_progress, what)
    except (ResourceFailed, WaitTimeout) as err:
        if pods is None:
            raise
        found = report(kube, namespace or kube.namespace, pods, (kind, name) if name else None)
        raise type(err)(err.message + found, hint=err.hint) from None


def _wait(kube: Kube, kind, readiness, name, label_selector, namespace, timeout_s, on_progress, what):
    what = what or (f'{kind.kind} "{name}"' if name else f"{kind.plural} matching {label_selector}")
    judge = _Judge(readiness, name, on_progress, what)
    target = {"namespace": namespace, "label_selector": label_selector}
    deadline = time.monotonic() + timeout_s
    objects: dict[str, dict] = {}
    version: str | None = None
    watching = True
    while True:
        if version is None:
            items, version = kube.snapshot(kind, field_selector=f"metadata.name={name}" if name else None, **target)
            objects = {obj["metadata"]["name"]: obj for obj in items}
            if judge(objects):
                return judge.result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(
                f"timed out after {timeout_s:.0f}s waiting for {what}; last state: {judge.last or 'nothing reported'}",
                hint="raise the timeout or inspect the resource with `kubectl describe`",
            )
        if not watching:
            time.sleep(min(kube.tuning.poll_interval_s, remaining))
            version = None
            continue
        window = min(remaining, kube.tuning.watch_window_s)
        try:
            for event, obj in kube.watch(kind, name=name, resource_version=version, timeout_s=window, **target):
                version = obj["metadata"].get("resourceVersion") or version
                if event == "DELETED":
                    objects.pop(obj["metadata"]["name"], None)
                else:
                    objects[obj["metadata"]["name"]] = obj
                if judge(objects):
                    return judge.result
        except GoneError:
            version = None
        except (UnauthorizedError, NotFoundError):
            raise
        except ApiError:
            watching, version = False, None


class _Judge:
    """Applies the readiness function to the current state; remembers the last Pending reason."""

    def __init__(self, readiness: Callable[[object], Readiness], name: str | None, on_progress, what: str):
        self.readiness, self.name, self.on_progress, self.what = readiness, name, on_progress, what
        self.last: str | None = None
        self.result: object = None

    def __call__(self, objects: dict[str, dict]) -> bool:
        subject = objects.get(self.name) if self.name else [objects[key] for key in sorted(objects)]
        state = self.readiness(subject)
        if isinstance(state, Ready):
            self.result = subject
            return True
        if isinstance(state, Failed):
            raise ResourceFailed(f"{self.what}: {state.reason}")
        if state.reason != self.last:
            self.last = state.reason
            if self.on_progress is not None:
                self.on_progress(state.reason)
        return False
