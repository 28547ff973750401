"""``pods/log`` in the sandbox: what each simulated container printed, served as the kubelet would.

No container runs, so ``PodLogs.source`` says where a container's output comes from:

- the Ray container (the first) of a Ray head pod (label ``ray.io/node-type=head``): the real
  Ray head's output (``DIR/ray-head.log``), the same for every RayCluster since they share it;
- a RayJob's submitter, the container ``ray-job-submitter`` (KubeRay's submitter pod, labelled
  ``ray.io/originated-from-cr-name``, or the head pod's sidecar): the RayJob driver's real log,
  the file Ray writes (``job-driver-<submission id>.log`` in the head's session logs);
- the pods of a DGD or Deployment that a stub serves: what the stub prints (a start line and one
  line per request), registered by the operators with ``stub_output``;
- any other running container: one line from the sandbox saying that nothing runs in it.

Reading a container that cannot have output fails like the real server (400 ``BadRequest``):
a pod with no node (``does not have a host assigned``), a container waiting (``is waiting to
start: REASON``), ``previous`` (no container ever restarts here), an unknown container, or no
container named for a pod with several. ``LogQuery`` holds ``tailLines``, ``limitBytes``,
``sinceSeconds``/``sinceTime``, ``timestamps`` and ``follow``; lines carry the time they were
written (a stub's) or first seen (a file's: its modification time for what it already held),
printed in RFC 3339 with nanoseconds like the kubelet's.
"""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from nrl_k8s.sandbox.head_proxy import scoped
from nrl_k8s.sandbox.statuses import ApiStatus

SUBMITTER = "ray-job-submitter"
ORIGIN_NAME = "ray.io/originated-from-cr-name"
OUTPUT_LIMIT = 1 << 20  # bytes of a stub's output kept (the oldest lines go first)
FILE_POLL_S = 0.2
Line = tuple[float, bytes]
# (group, version, plural, namespace, name) -> the stored object or None
Lookup = Callable[[str, str, str, str, str], "dict | None"]


class Source(Protocol):
    def read(self, cursor: int, final: bool = False) -> tuple[list[Line], int]:
        """The lines after ``cursor`` and the cursor after them (``final``: a last unterminated line too)."""

    def wait(self, cursor: int, timeout: float) -> None:
        """Return when there may be lines after ``cursor``, or after ``timeout`` seconds."""


class Output:
    """What one simulated process prints: timestamped lines in memory, the oldest dropped past ``limit`` bytes."""

    def __init__(self, limit: int = OUTPUT_LIMIT):
        self._limit = limit
        self._lines: deque[Line] = deque()
        self._first = 0  # the cursor of _lines[0]
        self._size = 0
        self._changed = threading.Condition()

    def write(self, text: str) -> None:
        stamp = time.time()
        with self._changed:
            for line in text.splitlines():
                data = line.encode() + b"\n"
                self._lines.append((stamp, data))
                self._size += len(data)
            while self._size > self._limit and self._lines:
                self._size -= len(self._lines.popleft()[1])
                self._first += 1
            self._changed.notify_all()

    def _end(self) -> int:
        return self._first + len(self._lines)

    def read(self, cursor: int, final: bool = False) -> tuple[list[Line], int]:
        with self._changed:
            return list(itertools.islice(self._lines, max(cursor - self._first, 0), None)), self._end()

    def wait(self, cursor: int, timeout: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._end() > cursor, timeout)


class FileOutput:
    """A file a real process appends to (cursor: a byte offset); a missing file is empty."""

    def __init__(self, path: Path):
        self.path = path

    def read(self, cursor: int, final: bool = False) -> tuple[list[Line], int]:
        try:
            with open(self.path, "rb") as handle:
                stamp = min(time.time(), self.path.stat().st_mtime)
                handle.seek(cursor)
                data = handle.read()
        except FileNotFoundError:
            return [], cursor
        if not final:
            data = data[: data.rfind(b"\n") + 1]
        return [(stamp, line) for line in data.splitlines(keepends=True)], cursor + len(data)

    def wait(self, cursor: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.path.stat().st_size > cursor:
                    return
            except FileNotFoundError:
                pass
            time.sleep(min(FILE_POLL_S, max(deadline - time.monotonic(), 0)))


@dataclass(frozen=True)
class LogQuery:
    """The query of ``GET .../pods/NAME/log``."""

    container: str | None = None
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    since: float | None = None  # epoch seconds

    @classmethod
    def parse(cls, query: dict[str, str]) -> "LogQuery":
        def number(name: str, low: int) -> int | None:
            value = query.get(name)
            if value in (None, ""):
                return None
            if not value.lstrip("-").isdigit() or int(value) < low:
                raise ApiStatus(400, f'PodLogOptions "" is invalid: {name}: Invalid value: {value}: must be '
                                     f"{'greater than or equal to 0' if low == 0 else 'greater than 0'}")
            return int(value)

        truthy = ("1", "t", "T", "true", "True", "TRUE")
        since = None
        if query.get("sinceSeconds"):
            since = time.time() - (number("sinceSeconds", 1) or 0)
        elif query.get("sinceTime"):
            try:
                since = dt.datetime.fromisoformat(query["sinceTime"].replace("Z", "+00:00")).timestamp()
            except ValueError:
                raise ApiStatus(400, f"sinceTime: invalid time {query['sinceTime']!r}") from None
        return cls(container=query.get("container") or None, follow=query.get("follow") in truthy,
                   previous=query.get("previous") in truthy, timestamps=query.get("timestamps") in truthy,
                   tail_lines=number("tailLines", 0), limit_bytes=number("limitBytes", 1), since=since)

    def format(self, lines: list[Line]) -> bytes:
        """The lines selected by ``since`` (tailLines is the caller's, on the first read), stamped if asked."""
        chosen = [(stamp, line) for stamp, line in lines if self.since is None or stamp >= self.since]
        if self.timestamps:
            return b"".join(_rfc3339(stamp).encode() + b" " + line for stamp, line in chosen)
        return b"".join(line for _, line in chosen)

    def tail(self, lines: list[Line]) -> list[Line]:
        return lines if self.tail_lines is None else lines[len(lines) - self.tail_lines:] if self.tail_lines else []


def _rfc3339(stamp: float) -> str:
    moment = dt.datetime.fromtimestamp(stamp, dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond * 1000:09d}Z"


class PodLogs:
    """Where each simulated container's output is: see the module docstring."""

    def __init__(self, ray_log: Path | None = None, driver_logs: Path | None = None):
        self.ray_log = ray_log
        self.driver_logs = driver_logs  # the Ray head's session logs dir (job-driver-*.log)
        self._stubs: dict[str, list[tuple[dict[str, str], Output]]] = {}  # owner uid -> (pod labels, output)
        self._lock = threading.Lock()

    def stub_output(self, owner_uid: str, selector: dict[str, str] | None = None) -> Output:
        """The output of the stubs serving the pods owned by ``owner_uid`` whose labels include
        ``selector`` (stubs asking with the same owner and selector share one)."""
        selector = dict(selector or {})
        with self._lock:
            registered = self._stubs.setdefault(owner_uid, [])
            found = next((out for known, out in registered if known == selector), None)
            if found is None:
                found = Output()
                registered.append((selector, found))
            return found

    def forget(self, owner_uid: str) -> None:
        """The owner is gone: drop its stubs' output."""
        with self._lock:
            self._stubs.pop(owner_uid, None)

    def container(self, pod: dict, query: LogQuery) -> str:
        """The container to read, or the error the real server gives for this pod and query."""
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        name = meta["name"]
        containers = [c.get("name", "") for c in spec.get("containers") or []]
        container = query.container
        if container is None:
            if len(containers) != 1:
                raise ApiStatus(400, f"a container name must be specified for pod {name}, choose one of: "
                                     f"[{' '.join(containers)}]", name=name, kind="pods")
            container = containers[0]
        elif container not in containers + [c.get("name") for c in spec.get("initContainers") or []]:
            raise ApiStatus(400, f"container {container} is not valid for pod {name}", name=name, kind="pods")
        if not spec.get("nodeName") and not status.get("hostIP") and not _scheduled(status):
            raise ApiStatus(400, f"pod {name} does not have a host assigned", name=name, kind="pods")
        state = container_state(status, container)
        if query.previous:
            raise ApiStatus(400, f'previous terminated container "{container}" in pod "{name}" not found',
                            name=name, kind="pods")
        if "running" not in state and "terminated" not in state:
            reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
            raise ApiStatus(400, f'container "{container}" in pod "{name}" is waiting to start: {reason}',
                            name=name, kind="pods")
        return container

    def source(self, pod: dict, container: str, lookup: Lookup) -> Source:
        """Where the output of ``container`` (already checked by ``container``) comes from."""
        labels = pod["metadata"].get("labels") or {}
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        if container == SUBMITTER:
            driver = self._driver_log(pod, lookup)
            if driver is not None:
                return FileOutput(driver)
        elif labels.get("ray.io/node-type") == "head" and container == containers[0] and self.ray_log is not None:
            return FileOutput(self.ray_log)
        owner = next((ref.get("uid") for ref in pod["metadata"].get("ownerReferences") or [] if ref.get("controller")), None)
        with self._lock:
            outputs = [out for selector, out in self._stubs.get(owner or "", [])
                       if all(labels.get(k) == v for k, v in selector.items())]
        if outputs:
            return outputs[0]
        note = Output()
        note.write(f"[sandbox] no process runs in container {container} of pod {pod['metadata']['name']}: "
                   f"{_what(labels)}; the sandbox only writes its status")
        return note

    def _driver_log(self, pod: dict, lookup: Lookup) -> Path | None:
        """The driver log of the RayJob this submitter belongs to (None: not known yet)."""
        meta = pod["metadata"]
        labels, namespace = meta.get("labels") or {}, meta["namespace"]
        name = labels.get(ORIGIN_NAME)
        if name is None and labels.get("ray.io/cluster"):  # SidecarMode: the head pod of the RayJob's cluster
            cluster = lookup("ray.io", "v1", "rayclusters", namespace, labels["ray.io/cluster"])
            name = ((cluster or {}).get("metadata", {}).get("labels") or {}).get(ORIGIN_NAME)
        job = lookup("ray.io", "v1", "rayjobs", namespace, name) if name else None
        status = (job or {}).get("status") or {}
        cluster = lookup("ray.io", "v1", "rayclusters", namespace, status["rayClusterName"]) if status.get("rayClusterName") else None
        if self.driver_logs is None or cluster is None or not status.get("jobId"):
            return None
        return self.driver_logs / f"job-driver-{scoped(cluster['metadata']['uid'], status['jobId'])}.log"


def _scheduled(status: dict) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "True" for c in status.get("conditions") or [])


def container_state(status: dict, container: str) -> dict:
    for item in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        if item.get("name") == container:
            return item.get("state") or {}
    return {}


def _what(labels: dict[str, str]) -> str:
    if labels.get("ray.io/node-type") == "worker":
        return "a Ray worker (every RayCluster runs on the sandbox's one Ray head; see the head pod's log)"
    if labels.get("nvidia.com/dynamo-component"):
        return (f"Dynamo component {labels['nvidia.com/dynamo-component']} of DGD "
                f"{labels.get('nvidia.com/dynamo-graph-deployment-name', '?')} (no model is loaded, nothing is inferred)")
    return "no container runs in the sandbox"
