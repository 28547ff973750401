"""The one Kubernetes access layer: every verb for every kind, with retries and typed errors.

Every request goes through ``Kube._call`` (urllib3, with a ``connection.Connection`` from the
kubeconfig or the pod's service account); paths come from a ``Kind`` descriptor, so there is no
per-kind code. Failures become typed errors in ``kube_errors.api_error`` (the only adapter);
waits are ``wait.wait`` (watch + deadline).
Only 429 (honouring Retry-After), 5xx, connection errors and timeouts are retried, with capped
exponential backoff and jitter for up to ``Tuning.retry_budget_s`` (a minute: a short API
outage is survived); a create that timed out may have landed, so its retry can raise
ConflictError. Connecting (TCP and TLS handshake) takes ``Tuning.reach_s`` at most. Until the
server has answered once, its answer must come within that same budget, counted once for the
whole Kube (the command), or, over TLS, within ``Tuning.first_answer_s`` of a finished handshake
(which proves the server runs: a loaded one, or one queueing requests by priority and fairness,
answers its first request late): the first request that gets none raises ``UnreachableError``, unretried
(a handshake the server broke off with an alert is tried again within that budget, or within the
retry budget once it has answered; a certificate refused never is),
and so does every request after it, at once (an exec credential plugin that never worked is not
run again either, ``credentials.ExecPlugin``).
Live commands only (it imports urllib3).
"""

from __future__ import annotations

import builtins
import codecs
import json
import math
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypedDict, TypeVar, Unpack
from urllib.parse import quote, urlencode

import urllib3

from nrl_k8s import __version__
from nrl_k8s.config.kubeconfig import SERVICE_ACCOUNT_DIR
from nrl_k8s.errors import ConflictError, ForbiddenError, NotFoundError, UnreachableError
from nrl_k8s.kinds.base import Kind
from nrl_k8s.kinds.core import SELF_SUBJECT_ACCESS_REVIEW, SELF_SUBJECT_RULES_REVIEW
from nrl_k8s.kinds.pod import KIND as POD
from nrl_k8s.kinds.readiness import Pending, Readiness, Ready
from nrl_k8s.kinds.service import KIND as SERVICE
from nrl_k8s.kube import wait as waiting
from nrl_k8s.kube.closing import Closing
from nrl_k8s.kube.connection import REACH_S, Connection, from_kubeconfig, in_cluster
from nrl_k8s.kube.errors import (
    GoneError,
    HandshakeTimeout,
    HttpError,
    KindNotServedError,
    NoClusterError,
    Op,
    api_error,
    resource_name,
    retry_after,
    retryable,
    status_body,
    tls_interrupted,
    unreachable,
)

__all__ = [
    "FIELD_MANAGER", "PATCH_TYPES", "GoneError", "KindNotServedError", "Kube", "NoClusterError", "Request", "Tuning",
    "kind_path", "resource_name",
]

FIELD_MANAGER = "nrl-k8s"
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
_PAGE_SIZE = 500
_LOG_CHUNK = 64 * 1024
_USER_AGENT = f"nrl-k8s/{__version__}"
_PROXY_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


T = TypeVar("T")


class Selection(TypedDict, total=False):
    """Which objects a list takes: by selectors, and in every namespace or one."""

    label_selector: str | None
    field_selector: str | None
    all_namespaces: bool


@dataclass(frozen=True)
class Tuning:
    """Retry, timeout and wait knobs (tests shrink them)."""

    backoff_s: float = 0.25
    backoff_cap_s: float = 5.0
    retry_budget_s: float = 60.0  # how long one request keeps retrying transient failures
    watch_retry_budget_s: float = 10.0  # shorter for a watch: waits poll when they cannot watch
    request_timeout_s: float = 30.0
    reach_s: float = REACH_S  # connect and TLS handshake; until the server has answered once, the answer too
    first_answer_s: float = 10.0  # over TLS, the first answer after a finished handshake
    watch_window_s: float = 300.0
    poll_interval_s: float = 2.0


@dataclass(frozen=True)
class Request:
    """One HTTP attempt as ``Kube.observer`` sees it: never its headers or body (credentials, secrets).

    ``status`` is None when no answer came (``error`` then names the failure's type).
    """

    method: str
    path: str  # with the query string
    status: int | None
    ms: float
    error: str | None = None


def kind_path(kind: Kind, namespace: str | None, name: str | None = None, subresource: str | None = None) -> str:
    """REST path of a collection (no name) or an object; no namespace segment = all namespaces."""
    path = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    if kind.namespaced and namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{kind.plural}"
    if name:
        path += f"/{quote(name, safe=':')}"
    return f"{path}/{subresource}" if subresource else path


class Kube(Closing):
    """A connection to one cluster with a default namespace; see the module docstring."""

    def __init__(
        self, connection: Connection, namespace: str, *, in_cluster: bool, context: str | None, tuning: Tuning
    ):
        self.connection = connection
        self._pool = connection.pool(maxsize=32)  # every concurrent watch holds a connection
        self.namespace = namespace
        self.in_cluster = in_cluster
        self.context = context
        self.tuning = tuning
        self._answered = False  # the server has answered a request (connection errors then are outages)
        self._contact_by: float | None = None  # until it has: when its first answer is due
        self._unreached: UnreachableError | None = None  # why it never answered: every request raises it again
        self.observer: Callable[[Request], None] | None = None  # told of every attempt (the CLI's --verbose)

    @classmethod
    def connect(
        cls,
        *,
        context: str | None = None,
        namespace: str | None = None,
        kubeconfig: str | None = None,
        tuning: Tuning = Tuning(),
    ) -> Kube:
        """In-cluster config inside a pod (unless a context or kubeconfig is given), else the kubeconfig.

        Namespace: ``namespace`` > the service account's (in-cluster) or the context's > "default".
        """
        explicit = context is not None or kubeconfig is not None
        in_pod = (
            not explicit
            and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
            and (SERVICE_ACCOUNT_DIR / "token").is_file()
        )
        if in_pod:
            connection = in_cluster(SERVICE_ACCOUNT_DIR)
            ns_file = SERVICE_ACCOUNT_DIR / "namespace"
            default_ns = ns_file.read_text(encoding="utf-8").strip() if ns_file.is_file() else None
            context_name = None
        else:
            connection, context_name, default_ns = from_kubeconfig(kubeconfig, context)
        return cls(
            connection, namespace or default_ns or "default", in_cluster=in_pod, context=context_name, tuning=tuning
        )

    def close(self) -> None:
        self._pool.clear()

    # ------------------------------------------------------------------ transport
    def _call(
        self,
        method: str,
        path: str,
        op: Op,
        *,
        query: dict | None = None,
        body: object = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: float | tuple[float, float | None] | None = None,
        retry: bool = True,
        raise_for_status: bool = True,
        budget_s: float | None = None,
    ):
        """One HTTP request with retries (for ``budget_s``, default ``Tuning.retry_budget_s``).

        Returns urllib3's response (body not yet read).
        """
        shown = path + ("?" + urlencode(query, quote_via=quote) if query else "")
        url = self.connection.host + shown
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": accept, "User-Agent": _USER_AGENT, **({"Content-Type": content_type} if data else {})}
        t = self.tuning
        connect, read = timeout if isinstance(timeout, tuple) else (timeout or t.request_timeout_s,) * 2
        started = time.monotonic()
        attempt, refreshed = 0, False
        broken: urllib3.exceptions.HTTPError | None = None  # the last handshake the server broke off
        while True:
            delay = min(t.backoff_cap_s, t.backoff_s * 2 ** min(attempt, 30)) * random.uniform(0.5, 1.0)
            first = not self._answered
            if self._unreached is not None:  # an earlier request got no answer: neither would this one
                raise UnreachableError(self._unreached.message, hint=self._unreached.hint)
            auth = self.connection.headers()
            reach = t.reach_s
            if first:
                self._contact_by = self._contact_by or time.monotonic() + t.reach_s
                reach = max(0.01, self._contact_by - time.monotonic())
            tls = self.connection.host.startswith("https:")  # the read starts once the handshake is done
            answer = t.first_answer_s if tls else reach
            limits = urllib3.Timeout(connect=min(connect, reach), read=min(read or answer, answer) if first else read)
            sent = time.monotonic()
            try:
                response = self._pool.request(method, url, body=data, headers={**headers, **auth},
                                              timeout=limits, retries=False, redirect=False, preload_content=False)
            except urllib3.exceptions.HTTPError as exc:
                self._observe(method, shown, None, sent, exc)
                broken = exc if tls_interrupted(exc) else broken
                again = tls_interrupted(exc) and (not first or time.monotonic() + delay < (self._contact_by or 0))
                if not again and (first or isinstance(exc, urllib3.exceptions.SSLError)):  # not retried
                    # a retried handshake that only ran out of the budget's rest: the server's break-off is why
                    cause = broken if isinstance(exc, HandshakeTimeout) and broken is not None else exc
                    late = tls and isinstance(cause, urllib3.exceptions.ReadTimeoutError)
                    failure = unreachable(cause, self.connection.host, answer if late else t.reach_s,
                                          after_handshake=late)
                    if first:
                        self._unreached = failure
                    raise failure from None
                error: HttpError | urllib3.exceptions.HTTPError = exc
            else:
                self._observe(method, shown, response.status, sent)
                if first:  # its answer was held to the budget; the rest (a watch, a log) comes at its own pace
                    self._answered = True
                    if (sock := getattr(response.connection, "sock", None)) is not None:
                        sock.settimeout(read)
                if 200 <= response.status < 300 or not raise_for_status:
                    return response
                error = HttpError.of(response)
                if response.status == 401 and not refreshed and self.connection.refresh(auth):
                    refreshed = True  # a credential that expired early or was revoked: once more with a fresh one
                    continue
                if not retryable(response.status):
                    raise api_error(error, op, self.connection.host) from None
                delay = max(delay, retry_after(error) or 0.0)
            if not retry or time.monotonic() - started + delay > (budget_s or t.retry_budget_s):
                break
            time.sleep(delay)
            attempt += 1
        raise api_error(error, op, self.connection.host) from None

    def _observe(self, method: str, path: str, status: int | None, sent: float, exc: Exception | None = None) -> None:
        if self.observer is not None:
            error = None if exc is None else type(getattr(exc, "reason", None) or exc).__name__
            self.observer(Request(method, path, status, (time.monotonic() - sent) * 1000, error))

    def _json(self, method: str, path: str, op: Op, **kwargs) -> dict:
        return json.loads(self._call(method, path, op, **kwargs).read() or b"{}")

    def _ns(self, kind: Kind, namespace: str | None) -> str | None:
        return (namespace or self.namespace) if kind.namespaced else None

    @staticmethod
    def _typed(kind: Kind, obj: dict) -> dict:
        """List and watch items may lack apiVersion/kind; fill them in."""
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        return obj

    # ------------------------------------------------------------------ verbs
    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict:
        ns = self._ns(kind, namespace)
        return self._json("GET", kind_path(kind, ns, name), Op("get", kind, ns, name))

    def find(self, kind: Kind, name: str, namespace: str | None = None) -> dict | None:
        """Like ``get`` but None when the object does not exist (a missing kind still raises)."""
        return _unless_absent(lambda: self.get(kind, name, namespace))

    def list(self, kind: Kind, namespace: str | None = None, **selection: Unpack[Selection]) -> builtins.list[dict]:
        """The objects of ``snapshot``."""
        return self.snapshot(kind, namespace, **selection)[0]

    def snapshot(self, kind: Kind, namespace: str | None = None, *, label_selector: str | None = None,
                 field_selector: str | None = None,
                 all_namespaces: bool = False) -> tuple[builtins.list[dict], str | None]:
        """Every page of a list, and the resourceVersion to watch from."""
        ns = None if all_namespaces else self._ns(kind, namespace)
        query = _selectors(label_selector, field_selector)
        items: list[dict] = []
        version, token = None, None
        while True:
            page = {**query, "limit": _PAGE_SIZE, **({"continue": token} if token else {})}
            doc = self._json("GET", kind_path(kind, ns), Op("list", kind, ns), query=page)
            items += [self._typed(kind, item) for item in doc.get("items") or []]
            meta = doc.get("metadata") or {}
            version = version or meta.get("resourceVersion")
            token = meta.get("continue")
            if not token:
                return items, version

    def create(self, kind: Kind, manifest: dict) -> dict:
        """Create ``manifest`` in its own namespace (else the default one)."""
        meta = manifest.get("metadata") or {}
        ns = self._ns(kind, meta.get("namespace"))
        op = Op("create", kind, ns, meta.get("name"))
        return self._json("POST", kind_path(kind, ns), op, query={"fieldManager": FIELD_MANAGER}, body=manifest)

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: dict | builtins.list,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        force: bool = False,
    ) -> dict:
        """Patch with "merge", "json", "strategic" or "apply" (server-side apply, optionally ``force``)."""
        return self._patch(kind, name, patch, namespace, patch_type, force, subresource=None)

    def patch_status(self, kind: Kind, name: str, patch: dict, *, namespace: str | None = None) -> dict:
        """Merge-patch the ``/status`` subresource."""
        return self._patch(kind, name, patch, namespace, "merge", False, subresource="status")

    def _patch(self, kind, name, patch, namespace, patch_type, force, *, subresource) -> dict:
        if patch_type not in PATCH_TYPES:
            raise ValueError(f"patch_type must be one of {', '.join(PATCH_TYPES)}, not {patch_type!r}")
        ns = self._ns(kind, namespace)
        query: dict = {"fieldManager": FIELD_MANAGER}
        if patch_type == "apply" and force:
            query["force"] = "true"
        op = Op("patch", kind, ns, name, subresource)
        path = kind_path(kind, ns, name, subresource)
        return self._json("PATCH", path, op, query=query, body=patch, content_type=PATCH_TYPES[patch_type])

    def modify(self, kind: Kind, name: str, change: Callable[[dict], dict | None], namespace: str | None = None,
               *, current: dict | None = None) -> dict:
        """Read, merge-patch ``change(current)`` guarded by its resourceVersion, re-read on conflict.

        ``change`` returns the merge patch for the object it is given, or None when nothing needs
        to change. ``current``: the object as just read, used instead of a first read (a stale one
        costs a conflict and a re-read). Conflicts are retried for ``Tuning.retry_budget_s``;
        NotFoundError propagates.
        """
        started = time.monotonic()
        while True:
            if current is None:
                current = self.get(kind, name, namespace)
            patch = change(current)
            if patch is None:
                return current
            guarded = {**patch, "metadata": {**(patch.get("metadata") or {}),
                                             "resourceVersion": current["metadata"]["resourceVersion"]}}
            try:
                return self.patch(kind, name, guarded, namespace=namespace)
            except ConflictError:
                current = None
                if time.monotonic() - started > self.tuning.retry_budget_s:
                    raise
                time.sleep(min(self.tuning.backoff_s, self.tuning.backoff_cap_s) * random.uniform(0.5, 1.0))

    def delete(self, kind: Kind, name: str, namespace: str | None = None, *, propagation: str = "Background",
               resource_version: str | None = None) -> bool:
        """Delete (dependents per ``propagation``); False when it was already gone.

        With ``resource_version``, only that version is deleted (ConflictError once it changed).
        """
        ns = self._ns(kind, namespace)
        options: dict = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if resource_version:
            options["preconditions"] = {"resourceVersion": resource_version}
        op, path = Op("delete", kind, ns, name), kind_path(kind, ns, name)
        return _unless_absent(lambda: self._call("DELETE", path, op, body=options).read()) is not None

    # ------------------------------------------------------------------ watch and wait
    def watch(self, kind: Kind, *, namespace: str | None = None, name: str | None = None,
              label_selector: str | None = None, resource_version: str | None = None,
              timeout_s: float) -> Iterator[tuple[str, dict]]:
        """Yield (ADDED|MODIFIED|DELETED, object) until the server ends the watch after ``timeout_s``.

        A dropped stream also just ends the iteration; an ERROR event raises (410: GoneError).
        """
        ns = self._ns(kind, namespace)
        op = Op("watch", kind, ns, name)
        seconds = max(1, math.ceil(timeout_s))
        query = _selectors(label_selector, f"metadata.name={name}" if name else None)
        query.update(watch="true", timeoutSeconds=seconds)
        if resource_version:
            query["resourceVersion"] = resource_version
        timeout = (min(self.tuning.request_timeout_s, seconds), seconds + 10)
        response = self._call("GET", kind_path(kind, ns), op, query=query, timeout=timeout,
                              budget_s=self.tuning.watch_retry_budget_s)
        try:
            for line in response:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    error = HttpError(status.get("code") or 0, status.get("reason") or "", json.dumps(status))
                    raise api_error(error, op, self.connection.host)
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    yield event["type"], self._typed(kind, event["object"])
        except urllib3.exceptions.HTTPError:
            return  # the stream dropped: same as the watch ending; the caller re-establishes it
        finally:
            response.close()
            response.release_conn()

    #: Watch + deadline until a readiness function says Ready (``nrl_k8s.kube.wait.wait``).
    wait = waiting.wait

    def wait_gone(self, kind: Kind, name: str, namespace: str | None = None, *, timeout_s: float) -> None:
        """Wait until the object no longer exists."""

        def gone(obj: dict | None) -> Readiness:
            if obj is None:
                return Ready()
            return Pending("being deleted" if obj["metadata"].get("deletionTimestamp") else "still exists")

        self.wait(
            kind, gone, name=name, namespace=namespace, timeout_s=timeout_s, what=f'deletion of {kind.kind} "{name}"'
        )

    # ------------------------------------------------------------------ pod logs
    def logs(self, pod: str, namespace: str | None = None, *, container: str | None = None,
             tail_lines: int | None = None, follow: bool = False) -> Iterator[str]:
        """The output of one container of a pod (``pods/log``) as text chunks, as the API server
        sends them; ``follow`` keeps reading until the container or the pod ends.

        A container that has not started (or a pod not scheduled) raises the server's 400 as
        ``ApiError``; the request is retried like any other, the stream is not resumed.
        """
        ns = self._ns(POD, namespace)
        query: dict = {"container": container, "tailLines": tail_lines, "follow": "true" if follow else None}
        timeout = (self.tuning.request_timeout_s, None) if follow else None  # a followed log may stay quiet
        response = self._call("GET", kind_path(POD, ns, pod, "log"), Op("get", POD, ns, pod, "log"),
                              query={k: v for k, v in query.items() if v is not None}, accept="*/*", timeout=timeout)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            for data in response.stream(_LOG_CHUNK, decode_content=True):
                text = decoder.decode(data)
                if text:
                    yield text
            if tail := decoder.decode(b"", final=True):
                yield tail
        except urllib3.exceptions.HTTPError:
            return  # the stream dropped: like the log ending
        finally:
            response.close()
            response.release_conn()

    # ------------------------------------------------------------------ proxy, RBAC, discovery
    def proxy(
        self,
        method: str,
        name: str,
        port: int | str,
        path: str,
        namespace: str | None = None,
        *,
        json: object = None,
        timeout_s: float = 5,
        kind: Kind = SERVICE,
    ) -> tuple[int, bytes]:
        """Send one request through the API server's proxy to a Service (``kind`` SERVICE) or a
        Pod (``kind`` POD) port; (status, body) of the upstream.

        ``name`` may carry a scheme (``https:NAME``). Upstream error codes are returned, not
        raised, and so is the API server's own Status when it cannot reach the upstream (503:
        no endpoints, connection refused); 401/403 from the API server itself raise. Not retried:
        a 5xx here is usually the upstream's answer.
        """
        if kind not in (SERVICE, POD):
            raise ValueError(f"the API server proxies Services and Pods, not {kind.kind}")
        ns = namespace or self.namespace  # Services and Pods are namespaced
        op = Op(_PROXY_VERBS[method.upper()], kind, ns, name, "proxy")
        target = kind_path(kind, ns, f"{name}:{port}", "proxy") + "/" + path.lstrip("/")
        response = self._call(
            method.upper(), target, op, body=json, accept="*/*", timeout=timeout_s, retry=False, raise_for_status=False
        )
        data = response.read()
        if response.status in (401, 403) and status_body(data):
            raise api_error(
                HttpError(response.status, response.reason or "", data, response.headers), op, self.connection.host
            )
        return response.status, data

    def can_i(self, verb: str, resource: str, *, group: str = "", namespace: str | None = None) -> bool:
        """SelfSubjectAccessReview; ``resource`` may name a subresource (``services/proxy``).

        ``namespace=None`` asks about the default namespace, ``""`` about the cluster scope.
        """
        plural, _, subresource = resource.partition("/")
        attributes = {"verb": verb, "resource": plural, "group": group}
        attributes["namespace"] = self.namespace if namespace is None else namespace
        if subresource:
            attributes["subresource"] = subresource
        review = {"apiVersion": SELF_SUBJECT_ACCESS_REVIEW.api_version, "kind": SELF_SUBJECT_ACCESS_REVIEW.kind}
        answer = self.create(SELF_SUBJECT_ACCESS_REVIEW, {**review, "spec": {"resourceAttributes": attributes}})
        return bool((answer.get("status") or {}).get("allowed"))

    def rules_review(self, namespace: str | None = None) -> dict:
        """SelfSubjectRulesReview: what the user may do in ``namespace`` (default: the Kube's), as
        its status ``{"resourceRules": [...], "incomplete": bool, "evaluationError": str}``."""
        kind = SELF_SUBJECT_RULES_REVIEW
        review = {"apiVersion": kind.api_version, "kind": kind.kind,
                  "spec": {"namespace": self.namespace if namespace is None else namespace}}
        return self.create(kind, review).get("status") or {}

    def served_versions(self, plural_group: str) -> builtins.list[str] | None:
        """The versions at which the API server serves ``plural.group`` (e.g.
        ``dynamographdeployments.nvidia.com``); ``[]``: not served (no CRD); None: unknown.

        Asks discovery (``/apis/GROUP/VERSION``), which every authenticated user may read. A 403
        there gives None: restricted RBAC must not trigger a false "install the CRD" hint.
        """
        plural, _, group = plural_group.partition(".")
        op = Op("get", Kind(group, "", plural, "", namespaced=False))
        served = []
        try:
            groups = self._json("GET", "/apis", op).get("groups") or []
            for version in next((g.get("versions") or [] for g in groups if g.get("name") == group), []):
                try:
                    listing = self._json("GET", f"/apis/{group}/{version['version']}", op)
                except KindNotServedError:  # the group changed between the two requests
                    continue
                if any(r.get("name") == plural for r in listing.get("resources") or []):
                    served.append(version["version"])
        except ForbiddenError:
            return None
        return served


def _unless_absent(call: Callable[[], T]) -> T | None:
    """``call()``, or None when its object does not exist (a kind the server does not serve raises)."""
    try:
        return call()
    except KindNotServedError:
        raise
    except NotFoundError:
        return None


def _selectors(label_selector: str | None, field_selector: str | None) -> dict:
    query = {}
    if label_selector:
        query["labelSelector"] = label_selector
    if field_selector:
        query["fieldSelector"] = field_selector
    return query
