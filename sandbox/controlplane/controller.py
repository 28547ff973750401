"""What our controllers share (Dynamo's and the DRA driver's): a watch-driven loop, timers, Events.

``watch`` (list, then watch, until stopped) is the local kubelet's loop too: stopping hangs up
its open watch at once, since a stopping kube-apiserver waits for its open watches to end.

A ``Controller`` lists then watches its resources through the official ``kubernetes`` client
(the operators' admin kubeconfig), turns every event into a work item, and runs work items one
at a time on its own thread, so a reconcile never races another one of the same controller.
Reconciles are keyed ``(method, namespace, name)`` and de-duplicated; a failed one is retried a
second later. Timers enqueue a key when due (never sleeps). ``record`` writes core/v1 Events as
client-go's recorder does (``<object>.<hex nanoseconds>`` names, a repeat raises ``count`` and
``lastTimestamp``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import heapq
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from ..faults import Faults

log = logging.getLogger("nrl_k8s_sandbox.controllers")

MERGE_PATCH = "application/merge-patch+json"
WATCH_TIMEOUT_S = 60
RETRY_S = 1.0
KEPT_EVENTS = 4096  # events remembered for aggregation, per controller


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str


def now() -> str:
    """RFC 3339 UTC timestamp, second precision, as the API server writes them."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def controller_ref(owner: dict) -> dict:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


Key = tuple[str, ...]


class Watches:
    """The watches one component has open; ``hang_up`` shuts their sockets, so a read blocked on
    one ends at once, and every watch opened after it too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[urllib3.BaseHTTPResponse] = set()
        self._hung_up = False

    @contextlib.contextmanager
    def held(self, response: urllib3.BaseHTTPResponse) -> Iterator[urllib3.BaseHTTPResponse]:
        with self._lock:
            self._open.add(response)
            hung_up = self._hung_up
        try:
            if hung_up:
                _shut(response)
            yield response
        finally:
            with self._lock:
                self._open.discard(response)
            response.close()
            response.release_conn()

    def hang_up(self) -> None:
        with self._lock:
            self._hung_up, responses = True, list(self._open)
        for response in responses:
            _shut(response)


def _shut(response: urllib3.BaseHTTPResponse) -> None:
    with contextlib.suppress(ValueError, RuntimeError, OSError):  # already released or closed
        response.shutdown()  # type: ignore[attr-defined]


def watch(name: str, lister: Callable[..., urllib3.BaseHTTPResponse], handle: Callable[[str, dict], None],
          stop: threading.Event, watches: Watches) -> None:
    """List, then watch from the list's resourceVersion until ``stop``; relist on 410 (also sent as
    an ERROR event); watch again after any other failure, a second later. ``handle(type, object)``
    gets every object listed (as ADDED) and every change."""
    version = None
    while not stop.is_set():
        try:
            if version is None:
                listing = json_body(lister(_preload_content=False))
                version = listing["metadata"]["resourceVersion"]
                for item in listing["items"]:
                    handle("ADDED", item)
            response = lister(watch=True, resource_version=version, timeout_seconds=WATCH_TIMEOUT_S,
                              allow_watch_bookmarks=True, _preload_content=False)
            with watches.held(response):
                for line in iter_resp_lines(response):
                    if stop.is_set():
                        return
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        handle(event["type"], obj)
        except ApiException as err:
            if err.status == 410:
                version = None
                continue
            if not stop.is_set():
                log.warning("%s failed: %s", name, err)
                stop.wait(RETRY_S)
        except Exception as err:  # noqa: BLE001 - a dropped connection (or a handler's bug) must not end it
            if not stop.is_set():
                log.warning("%s lost: %s", name, err)
                stop.wait(RETRY_S)


class Controller:
    """Watch → work queue → one reconcile at a time; subclasses list their watches and handlers."""

    name = "controller"

    def __init__(self, api: kubernetes.client.ApiClient, faults: Faults):
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.core = kubernetes.client.CoreV1Api(api)
        self.faults = faults
        self._queue: queue.Queue[Key | Callable[[], None] | None] = queue.Queue()
        self._queued: set[Key] = set()
        self._lock = threading.Lock()
        self._timers: list[tuple[float, Key]] = []
        self._timer_wakeup = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._watches = Watches()
        self._threads: list[threading.Thread] = []
        self._recorded: dict[tuple, tuple[str, int]] = {}  # aggregation key -> (Event name, count)
        self._recorder_lock = threading.Lock()

    def watches(self) -> list[tuple[Resource, Callable[[str, dict], None]]]:
        raise NotImplementedError

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        targets = [(self._work, "work"), (self._run_timers, "timers")]
        targets += [(lambda r=r, h=h: watch(f"{self.name}: watch {r.plural}", self._lister(r), h, self._stop,
                                            self._watches), f"watch-{r.plural}") for r, h in self.watches()]
        for target, label in targets:
            thread = threading.Thread(target=target, name=f"{self.name}-{label}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self._watches.hang_up()
        self._queue.put(None)
        with self._lock:
            self._timer_wakeup.notify_all()

    # -- scheduling ------------------------------------------------------------------------
    def enqueue(self, *key: str) -> None:
        """Queue a keyed reconcile ``(method, args...)`` unless the same key is already queued."""
        with self._lock:
            if key in self._queued:
                return
            self._queued.add(key)
        self._queue.put(key)

    def call(self, fn: Callable[[], None]) -> None:
        """Queue a one-off call (e.g. a deletion handler that needs the last object seen)."""
        self._queue.put(fn)

    def later(self, delay: float, *key: str) -> None:
        """Enqueue ``key`` after ``delay`` seconds; an earlier pending timer for it wins."""
        due = time.monotonic() + max(delay, 0.0)
        with self._lock:
            if any(k == key and d <= due for d, k in self._timers):
                return
            heapq.heappush(self._timers, (due, key))
            self._timer_wakeup.notify()

    def _run_timers(self) -> None:
        with self._lock:
            while not self._stop.is_set():
                if not self._timers:
                    self._timer_wakeup.wait()
                    continue
                due, key = self._timers[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._timer_wakeup.wait(wait)
                    continue
                heapq.heappop(self._timers)
                self._lock.release()
                try:
                    self.enqueue(*key)
                finally:
                    self._lock.acquire()

    def _work(self) -> None:
        while not self._stop.is_set():
            item = self._queue.get()
            if item is None:
                return
            if callable(item):
                self._guard(item, None)
                continue
            with self._lock:
                self._queued.discard(item)
            method, *args = item
            self._guard(lambda method=method, args=args: getattr(self, method)(*args), item)

    def _guard(self, fn: Callable[[], None], key: Key | None) -> None:
        try:
            fn()
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as err:
            log.warning("%s: %s failed, retrying in %.0fs: %s", self.name, key or fn, RETRY_S, err)
            if key is not None:
                self.later(RETRY_S, *key)
        except Exception:  # noqa: BLE001 - a reconcile's bug is logged; the loop must live on
            log.exception("%s: %s failed", self.name, key or fn)

    # -- watching --------------------------------------------------------------------------
    def _lister(self, resource: Resource) -> Callable[..., urllib3.BaseHTTPResponse]:
        """The cluster-wide list call for ``resource`` (a core kind, or any group's by path)."""
        if not resource.group:
            return getattr(self.core, f"list_{resource.plural[:-1]}_for_all_namespaces")
        return partial(self.custom.list_cluster_custom_object, resource.group, resource.version, resource.plural)

    # -- events ----------------------------------------------------------------------------
    def record(self, obj: dict, type_: str, reason: str, message: str, *, component: str, action: str = "",
               field_path: str = "", host: str = "") -> None:
        """A core/v1 Event about ``obj``, as client-go's recorder writes it: the same event again
        (same object, source, type, reason and message) raises ``count`` and ``lastTimestamp``.
        Best effort, like client-go: a failure is logged, never raised."""
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        key = (namespace, meta.get("uid", ""), field_path, component, type_, reason, message)
        stamp = now()
        try:
            with self._recorder_lock:
                known = self._recorded.get(key)
                if known is not None and self._bump(namespace, known, stamp):
                    self._recorded[key] = (known[0], known[1] + 1)
                    return
                name = f"{meta['name']}.{time.time_ns():x}"
                self.core.create_namespaced_event(namespace, {
                    "apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": name, "namespace": namespace},
                    "involvedObject": {
                        "apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", ""), "name": meta["name"],
                        "namespace": namespace, "uid": meta.get("uid", ""),
                        "resourceVersion": meta.get("resourceVersion", ""),
                        **({"fieldPath": field_path} if field_path else {}),
                    },
                    "reason": reason, "message": message, "type": type_,
                    "source": {"component": component, **({"host": host} if host else {})},
                    "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
                    "reportingComponent": component, "reportingInstance": host,
                    **({"action": action} if action else {}),
                }, _preload_content=False)  # fmt: skip
                self._recorded[key] = (name, 1)
                while len(self._recorded) > KEPT_EVENTS:
                    self._recorded.pop(next(iter(self._recorded)))
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as err:
            log.warning("%s: recording event %s on %s/%s failed: %s", self.name, reason, namespace, meta["name"], err)

    def _bump(self, namespace: str, known: tuple[str, int], stamp: str) -> bool:
        """Count one more of an Event already written; False when it is gone (write a new one)."""
        try:
            self.core.patch_namespaced_event(known[0], namespace, {"count": known[1] + 1, "lastTimestamp": stamp},
                                             _content_type=MERGE_PATCH, _preload_content=False)  # fmt: skip
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    # -- small API helpers -----------------------------------------------------------------
    def get(self, resource: Resource, namespace: str, name: str) -> dict | None:
        try:
            return self.custom.get_namespaced_custom_object(
                resource.group, resource.version, namespace, resource.plural, name
            )
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def patch_status(self, resource: Resource, namespace: str, name: str, status: dict) -> None:
        self.custom.patch_namespaced_custom_object_status(
            resource.group, resource.version, namespace, resource.plural, name,
            {"status": status}, _content_type=MERGE_PATCH,
        )  # fmt: skip

    def read_core(self, read: Callable[..., urllib3.BaseHTTPResponse], namespace: str, name: str) -> dict | None:
        """A core object as JSON (``read`` is e.g. ``self.core.read_namespaced_service``); None: 404."""
        try:
            return json_body(read(name, namespace, _preload_content=False))
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def create_core(self, create: Callable[..., object], namespace: str, body: dict) -> None:
        """Create a core object; an existing one (409) is fine."""
        try:
            create(namespace, body)
        except ApiException as err:
            if err.status != 409:
                raise


    def list_pods(self, namespace: str, selector: str) -> list[dict]:
        response = self.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
        return json_body(response)["items"]


def json_body(response: urllib3.BaseHTTPResponse) -> dict:
    return json.loads(response.data)
