"""In-memory object store: resourceVersions, server defaults, watch fan-out, garbage collection.

One re-entrant lock guards every object, the type registry and the watch list. Each write
takes a new global resourceVersion, is appended to a bounded event history (used to replay
watches from a resourceVersion; anything older is ``410 Gone``) and is pushed into the queue
of every matching watch. Nothing here touches a socket.

Deletion follows the real server closely enough for clients:

- an object with ``metadata.finalizers`` only gets ``deletionTimestamp`` and stays until an
  update removes its last finalizer;
- ``Background`` (default) deletes at once; ``Foreground`` adds the ``foregroundDeletion``
  finalizer and the object goes once nothing references it; ``Orphan`` strips the
  ownerReference from every dependent first;
- a garbage-collector thread deletes every object none of whose owners (by uid) exist any
  more, drops dangling references when some owners remain, deletes the dependents of owners
  in foreground deletion, and empties namespaces that are being deleted.
"""

from __future__ import annotations

import base64
import copy
import queue
import random
import re
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from nrl_k8s.sandbox.conversion import convert
from nrl_k8s.sandbox.discovery import Registry, ResourceType
from nrl_k8s.sandbox.statuses import ApiStatus, already_exists, conflict, invalid, not_found

NAMESPACE_TYPE_KEY = ("", "namespaces")
CRD_TYPE_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_OWNED_METADATA = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _spec_part(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


@dataclass
class Event:
    rv: int
    key: tuple[str, str]
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict
    old: dict | None


@dataclass(eq=False)
class Watch:
    """One open watch: events matching it arrive on ``queue`` as ``(type, object)``; ``None`` ends it."""

    rtype: ResourceType
    namespace: str | None
    match: Callable[[dict], bool]
    queue: queue.Queue = field(default_factory=queue.Queue)

    def translate(self, event: Event) -> tuple[str, dict] | None:
        """The event this watch sees, if any (selector moves turn into ADDED/DELETED)."""
        if self.namespace is not None and event.obj["metadata"].get("namespace") != self.namespace:
            return None
        new_ok = self.match(event.obj)
        if event.type == "MODIFIED":
            old_ok = event.old is not None and self.match(event.old)
            kind = {(True, True): "MODIFIED", (False, True): "ADDED", (True, False): "DELETED"}.get((old_ok, new_ok))
        else:
            kind = event.type if new_ok else None
        if kind is None:
            return None
        obj = copy.deepcopy(convert(event.obj, self.rtype.api_version))
        obj["apiVersion"] = self.rtype.api_version
        return kind, obj


class Store:
    def __init__(self, history_size: int = 1000):
        self.lock = threading.RLock()
        self.registry = Registry()
        self._objects: dict[tuple[str, str], dict[tuple[str, str], dict]] = {}
        self._rv = 0
        self._history: deque[Event] = deque()
        self._history_size = history_size
        self._compacted_rv = 0
        self._watches: list[Watch] = []
        self._gc_wanted = threading.Condition(self.lock)
        self._gc_dirty = False
        self._closed = False
        self._gc_thread: threading.Thread | None = None
        for name in ("default", "kube-system"):
            self.create(self.registry.lookup("", "v1", "namespaces"), None, {"metadata": {"name": name}})

    # ----------------------------------------------------------------- reads
    @property
    def resource_version(self) -> str:
        with self.lock:
            return str(self._rv)

    def _bucket(self, rtype: ResourceType) -> dict[tuple[str, str], dict]:
        return self._objects.setdefault(rtype.key, {})

    def _out(self, rtype: ResourceType, obj: dict) -> dict:
        """A copy of a stored object in ``rtype``'s version."""
        result = copy.deepcopy(convert(obj, rtype.api_version))
        result["apiVersion"] = rtype.api_version
        result["kind"] = rtype.kind
        return result

    def _current(self, rtype: ResourceType, namespace: str | None, name: str) -> dict:
        obj = self._bucket(rtype).get((namespace or "", name))
        if obj is None:
            raise not_found(rtype.plural, rtype.group, name)
        return obj

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> dict:
        with self.lock:
            return self._out(rtype, self._current(rtype, namespace, name))

    def list(self, rtype: ResourceType, namespace: str | None, match: Callable[[dict], bool]) -> tuple[list[dict], str]:
        """Matching objects sorted by (namespace, name), and the list resourceVersion."""
        with self.lock:
            bucket = self._bucket(rtype)
            items = [
                self._out(rtype, bucket[k])
                for k in sorted(bucket)
                if (namespace is None or k[0] == namespace) and match(bucket[k])
            ]
            return items, str(self._rv)

    def find_by_uid(self, uid: str) -> dict | None:
        with self.lock:
            for bucket in self._objects.values():
                for obj in bucket.values():
                    if obj["metadata"]["uid"] == uid:
                        return copy.deepcopy(obj)
        return None

    # ----------------------------------------------------------------- writes
    def _commit(self, rtype: ResourceType, event_type: str, obj: dict, old: dict | None) -> dict:
        self._rv += 1
        meta = obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        if event_type == "DELETED":
            self._bucket(rtype).pop(key, None)
            obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self._rv)
        if event_type != "DELETED":
            self._bucket(rtype)[key] = obj
        event = Event(self._rv, rtype.key, event_type, obj, old)
        self._history.append(event)
        while len(self._history) > self._history_size:
            self._compacted_rv = self._history.popleft().rv
        for watch in self._watches:
            if watch.rtype.key == rtype.key and (seen := watch.translate(event)):
                watch.queue.put(seen)
        if event_type == "DELETED" or (event_type == "MODIFIED" and meta.get("deletionTimestamp")):
            self._wake_gc()
        if rtype.key == CRD_TYPE_KEY:
            self._sync_crd(event_type, obj)
        return self._out(rtype, obj)

    def _sync_crd(self, event_type: str, crd: dict) -> None:
        if event_type == "DELETED":
            for t in self.registry.remove_crd(crd["metadata"]["name"]):
                for obj in list(self._bucket(t).values()):
                    self._commit(t, "DELETED", obj, obj)
        else:
            self.registry.add_crd(crd)

    def _check_namespace(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        if not rtype.namespaced:
            return
        ns = self._objects.get(NAMESPACE_TYPE_KEY, {}).get(("", namespace or ""))
        if ns is None:
            raise not_found("namespaces", "", namespace or "")
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiStatus(
                403,
                f'{rtype.plural} "{name}" is forbidden: unable to create new content in namespace '
                f"{namespace} because it is being terminated",
                name=name,
                group=rtype.group,
                kind=rtype.plural,
            )

    def create(self, rtype: ResourceType, namespace: str | None, obj: dict, *, dry_run: bool = False) -> dict:
        with self.lock:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + "".join(random.choices(GENERATE_ALPHABET, k=5))
            name = meta.get("name") or ""
            if not name:
                raise invalid(rtype.kind, rtype.group, "", "metadata.name: Required value: name or generateName is required")
            if len(name) > 253 or not _NAME_RE.match(name):
                raise invalid(
                    rtype.kind,
                    rtype.group,
                    name,
                    f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
                    "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                )
            if rtype.namespaced:
                if meta.get("namespace") not in (None, "", namespace):
                    raise ApiStatus(400, "the namespace of the provided object does not match the namespace sent on the request")
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
            self._check_namespace(rtype, namespace, name)
            if (namespace or "", name) in self._bucket(rtype):
                raise already_exists(rtype.plural, rtype.group, name)
            for key in _SERVER_OWNED_METADATA + ("resourceVersion",):
                meta.pop(key, None)
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
            if rtype.has_status:
                obj.pop("status", None)
            obj = convert({**obj, "apiVersion": rtype.api_version}, rtype.storage_api_version)
            apply_defaults(rtype, obj)
            obj["apiVersion"], obj["kind"] = rtype.storage_api_version, rtype.kind
            if dry_run:
                return self._out(rtype, obj)
            return self._commit(rtype, "ADDED", obj, None)

    def _merge_update(self, rtype: ResourceType, old: dict, new: dict, subresource: str | None) -> dict:
        if subresource == "status":
            result = copy.deepcopy(old)
            if "status" in new:
                result["status"] = copy.deepcopy(new["status"])
            else:
                result.pop("status", None)
            return result
        result = copy.deepcopy(new)
        if rtype.has_status:
            result.pop("status", None)
            if "status" in old:
                result["status"] = copy.deepcopy(old["status"])
        meta = result.setdefault("metadata", {})
        for key in _SERVER_OWNED_METADATA:
            meta.pop(key, None)
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
        meta["name"] = old["metadata"]["name"]
        if "namespace" in old["metadata"]:
            meta["namespace"] = old["metadata"]["namespace"]
        if _spec_part(result) != _spec_part(old):
            meta["generation"] = old["metadata"].get("generation", 1) + 1
        result["apiVersion"], result["kind"] = rtype.storage_api_version, rtype.kind
        return result

    def update(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        change: Callable[[dict], dict] | dict,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict:
        """Replace (dict) or transform (callable on a copy of the live object) one object.

        A dict carrying a stale ``metadata.resourceVersion`` is a 409 Conflict; removing the last
        finalizer of an object being deleted deletes it.
        """
        with self.lock:
            old = self._current(rtype, namespace, name)
            new = change(self._out(rtype, old)) if callable(change) else copy.deepcopy(change)
            meta = new.setdefault("metadata", {})
            if meta.get("name", name) != name:
                raise ApiStatus(400, f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
            sent_rv = meta.get("resourceVersion")
            if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                raise conflict(
                    rtype.plural,
                    rtype.group,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                )
            new = convert({**new, "apiVersion": rtype.api_version}, rtype.storage_api_version)
            if rtype.kind == "Secret":
                encode_string_data(new)
            result = self._merge_update(rtype, old, new, subresource)
            if dry_run:
                return self._out(rtype, result)
            if result["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers"):
                return self._commit(rtype, "DELETED", result, old)
            if {k: v for k, v in result.items() if k != "metadata"} == {k: v for k, v in old.items() if k != "metadata"} and {
                k: v for k, v in result["metadata"].items() if k != "resourceVersion"
            } == {k: v for k, v in old["metadata"].items() if k != "resourceVersion"}:
                return self._out(rtype, old)  # a no-op write keeps its resourceVersion, like the real server
            return self._commit(rtype, "MODIFIED", result, old)

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        *,
        propagation: str = "Background",
        precondition_uid: str | None = None,
        precondition_rv: str | None = None,
        dry_run: bool = False,
    ) -> dict:
        with self.lock:
            old = self._current(rtype, namespace, name)
            meta = old["metadata"]
            if precondition_uid and precondition_uid != meta["uid"]:
                raise conflict(rtype.plural, rtype.group, name, f"Precondition failed: UID in precondition: {precondition_uid}, UID in object meta: {meta['uid']}")
            if precondition_rv and precondition_rv != meta["resourceVersion"]:
                raise conflict(
                    rtype.plural,
                    rtype.group,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: {precondition_rv}, ResourceVersion in object meta: {meta['resourceVersion']}",
                )
            if dry_run:
                return self._out(rtype, old)
            if propagation == "Orphan":
                self._orphan_dependents(meta["uid"])
            finalizers = list(meta.get("finalizers") or [])
            if rtype.key == NAMESPACE_TYPE_KEY:
                finalizers.append("kubernetes")
            if propagation == "Foreground":
                finalizers.append("foregroundDeletion")
            if not finalizers:
                return self._commit(rtype, "DELETED", old, old)
            if meta.get("deletionTimestamp") and propagation != "Foreground":
                return self._out(rtype, old)
            result = copy.deepcopy(old)
            result["metadata"]["deletionTimestamp"] = meta.get("deletionTimestamp") or now()
            result["metadata"]["deletionGracePeriodSeconds"] = 0
            if propagation == "Foreground" and "foregroundDeletion" not in (meta.get("finalizers") or []):
                result["metadata"]["finalizers"] = list(meta.get("finalizers") or []) + ["foregroundDeletion"]
            if rtype.key == NAMESPACE_TYPE_KEY:
                result["status"] = {"phase": "Terminating"}
            return self._commit(rtype, "MODIFIED", result, old)

    def _orphan_dependents(self, uid: str) -> None:
        for key, bucket in self._objects.items():
            for obj in list(bucket.values()):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(r.get("uid") == uid for r in refs):
                    self._replace_refs(key, obj, [r for r in refs if r.get("uid") != uid])

    def _replace_refs(self, key: tuple[str, str], obj: dict, refs: list[dict]) -> None:
        new = copy.deepcopy(obj)
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            new["metadata"].pop("ownerReferences", None)
        self._commit(self._type_for(key, obj), "MODIFIED", new, obj)

    def _type_for(self, key: tuple[str, str], obj: dict) -> ResourceType:
        group, plural = key
        version = obj.get("apiVersion", "v1").rsplit("/", 1)[-1]
        found = self.registry.lookup(group, version, plural)
        if found is None:
            found = next(t for t in self.registry.all_types() if t.key == key)
        return found

    # ----------------------------------------------------------------- watch
    def watch(self, rtype: ResourceType, namespace: str | None, match: Callable[[dict], bool], resource_version: str | None) -> Watch:
        """Open a watch. Without a resourceVersion (or "0") it starts with ADDED for every match."""
        with self.lock:
            w = Watch(rtype, namespace, match)
            if resource_version in (None, "", "0"):
                items, _ = self.list(rtype, namespace, match)
                for item in items:
                    w.queue.put(("ADDED", item))
            else:
                if not resource_version.isdigit():
                    raise ApiStatus(400, f"invalid resource version: {resource_version}")
                since = int(resource_version)
                if since < self._compacted_rv:
                    raise ApiStatus(410, f"too old resource version: {since} ({self._compacted_rv + 1})", reason="Expired")
                for event in self._history:
                    if event.rv > since and event.key == rtype.key and (seen := w.translate(event)):
                        w.queue.put(seen)
            if self._closed:
                w.queue.put(None)
            else:
                self._watches.append(w)
            return w

    def unwatch(self, w: Watch) -> None:
        with self.lock:
            if w in self._watches:
                self._watches.remove(w)

    # ----------------------------------------------------------------- garbage collection
    def _wake_gc(self) -> None:
        self._gc_dirty = True
        self._gc_wanted.notify_all()

    def start_gc(self) -> None:
        self._gc_thread = threading.Thread(target=self._gc_loop, name="sandbox-gc", daemon=True)
        self._gc_thread.start()

    def close(self) -> None:
        with self.lock:
            self._closed = True
            self._gc_wanted.notify_all()
            for w in self._watches:
                w.queue.put(None)
            self._watches.clear()
        if self._gc_thread is not None:
            self._gc_thread.join(timeout=5)

    def _gc_loop(self) -> None:
        with self.lock:
            while True:
                self._gc_wanted.wait_for(lambda: self._gc_dirty or self._closed)
                if self._closed:
                    return
                self._gc_dirty = False
                while self._collect_once():
                    pass

    def _collect_once(self) -> bool:
        """One garbage-collection pass; True when it changed something."""
        live = {obj["metadata"]["uid"]: obj for bucket in self._objects.values() for obj in bucket.values()}
        referenced = {r.get("uid") for o in live.values() for r in o["metadata"].get("ownerReferences") or []}
        for key, bucket in list(self._objects.items()):
            for obj in list(bucket.values()):
                meta = obj["metadata"]
                rtype = self._type_for(key, obj)
                refs = meta.get("ownerReferences") or []
                present = [r for r in refs if r.get("uid") in live]
                foreground_owner = any(
                    "foregroundDeletion" in (live[r["uid"]]["metadata"].get("finalizers") or []) for r in present
                )
                if refs and (not present or foreground_owner) and not meta.get("deletionTimestamp"):
                    self.delete(rtype, meta.get("namespace"), meta["name"])
                    return True
                if refs and len(present) < len(refs):
                    self._replace_refs(key, obj, present)
                    return True
                finalizers = meta.get("finalizers") or []
                if "foregroundDeletion" in finalizers and meta["uid"] not in referenced:
                    self._drop_finalizer(rtype, obj, "foregroundDeletion")
                    return True
                if key == NAMESPACE_TYPE_KEY and meta.get("deletionTimestamp"):
                    if self._empty_namespace(meta["name"]):
                        return True
                    self._commit(rtype, "DELETED", obj, obj)
                    return True
        return False

    def _drop_finalizer(self, rtype: ResourceType, obj: dict, finalizer: str) -> None:
        new = copy.deepcopy(obj)
        rest = [f for f in obj["metadata"]["finalizers"] if f != finalizer]
        new["metadata"]["finalizers"] = rest
        self._commit(rtype, "DELETED" if not rest else "MODIFIED", new, obj)

    def _empty_namespace(self, namespace: str) -> bool:
        changed = False
        for key, bucket in list(self._objects.items()):
            for (ns, _), obj in list(bucket.items()):
                if ns == namespace:
                    self._commit(self._type_for(key, obj), "DELETED", obj, obj)
                    changed = True
        return changed

    # ----------------------------------------------------------------- persistence
    def dump(self) -> dict:
        with self.lock:
            objects = [
                {"group": key[0], "plural": key[1], "object": obj}
                for key, bucket in self._objects.items()
                for obj in bucket.values()
            ]
            return {"resourceVersion": self._rv, "objects": copy.deepcopy(objects)}

    def load(self, data: dict) -> None:
        """Replace the contents with a ``dump()`` (CRDs first so their types are registered)."""
        with self.lock:
            self._objects.clear()
            entries = sorted(data["objects"], key=lambda e: (e["group"], e["plural"]) != CRD_TYPE_KEY)
            for entry in entries:
                obj = entry["object"]
                meta = obj["metadata"]
                self._objects.setdefault((entry["group"], entry["plural"]), {})[(meta.get("namespace") or "", meta["name"])] = obj
                if (entry["group"], entry["plural"]) == CRD_TYPE_KEY:
                    self.registry.add_crd(obj)
            self._rv = max(self._rv, int(data["resourceVersion"]))
            self._compacted_rv = self._rv
            self._history.clear()
            self._wake_gc()


_CLUSTER_IP_COUNTER = iter(range(10, 1 << 16))


def encode_string_data(secret: dict) -> None:
    """A Secret's write-only ``stringData`` merged into ``data`` (base64; it wins over the same
    key in ``data``) and dropped, as the real API server does on every write."""
    string_data = secret.pop("stringData", None) or {}
    if string_data:
        encoded = {k: base64.b64encode(str(v).encode()).decode() for k, v in string_data.items()}
        secret["data"] = {**(secret.get("data") or {}), **encoded}


def apply_defaults(rtype: ResourceType, obj: dict) -> None:
    """Server-side defaults on create for the built-in kinds (and CRD status)."""
    spec = obj.setdefault("spec", {}) if rtype.kind in ("Pod", "Service", "Namespace", "Deployment") else obj.get("spec")
    if rtype.kind == "Pod":
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            image = str(container.get("image", ""))
            container.setdefault("imagePullPolicy", "Always" if image.endswith(":latest") or ":" not in image else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    elif rtype.kind == "Service":
        spec.setdefault("type", "ClusterIP")
        if spec.get("clusterIP") != "None":
            n = next(_CLUSTER_IP_COUNTER)
            spec.setdefault("clusterIP", f"10.96.{n >> 8}.{n & 255}")
        spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        obj["status"] = {"loadBalancer": {}}
    elif rtype.kind == "Namespace":
        spec.setdefault("finalizers", ["kubernetes"])
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        obj["status"] = {"phase": "Active"}
    elif rtype.kind == "Deployment":
        spec.setdefault("replicas", 1)
        obj["status"] = {}
    elif rtype.kind == "Secret":
        obj.setdefault("type", "Opaque")
        encode_string_data(obj)
    elif rtype.kind == "CustomResourceDefinition":
        names = (spec or {}).get("names") or {}
        obj["status"] = {
            "acceptedNames": names,
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now()}
                for t, r, m in (
                    ("NamesAccepted", "NoConflicts", "no conflicts found"),
                    ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                )
            ],
            "storedVersions": [v["name"] for v in (spec or {}).get("versions") or [] if v.get("storage")],
        }
