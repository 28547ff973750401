"""The one Kubernetes access layer: every verb for every kind, retries, typed errors and wait.

Every request goes through ``Kube._call`` on the official client's ``ApiClient``; paths come
from a ``Kind`` descriptor, so there is no per-kind code. ``_api_error`` is the only place an
``ApiException`` or a urllib3 error becomes one of ``nrl_k8s.errors``:

    401 UnauthorizedError   403 ForbiddenError (names verb + resource)   404 NotFoundError
    (KindNotServedError when the kind's path itself is missing, e.g. no CRD)   409 ConflictError
    410 GoneError   429 / 5xx / connection errors / timeouts ServerError (after retries)

Only 429 (honouring Retry-After), 5xx, connection errors and timeouts are retried, with
exponential backoff and jitter bounded by attempts and total time (``Tuning``). A create that
timed out may have landed: its retry then raises ConflictError. Live commands only: offline
code must not import this module (it imports ``kubernetes``).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import quote

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import SERVICE_HOST_ENV_NAME, InClusterConfigLoader

from nrl_k8s.errors import (
    ApiError,
    ConfigError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    NrlK8sError,
    ResourceFailed,
    ServerError,
    UnauthorizedError,
    WaitTimeout,
)
from nrl_k8s.kinds.base import Failed, Kind, Pending, Readiness, Ready
from nrl_k8s.kinds.core import SELF_SUBJECT_ACCESS_REVIEW
from nrl_k8s.kinds.service import KIND as SERVICE

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
FIELD_MANAGER = "nrl-k8s"
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
_PAGE_SIZE = 500
_PROXY_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class NoClusterError(NrlK8sError):
    """No usable cluster configuration: no kubeconfig and not running in a pod."""


class KindNotServedError(NotFoundError):
    """404 because the API server does not serve the kind at all (e.g. its CRD is missing)."""


class GoneError(ApiError):
    """410: the resourceVersion a watch started from is too old; list again."""


@dataclass(frozen=True)
class Tuning:
    """Retry, timeout and wait knobs (tests shrink them)."""

    attempts: int = 5
    backoff_s: float = 0.25
    backoff_cap_s: float = 5.0
    retry_budget_s: float = 30.0
    request_timeout_s: float = 30.0
    watch_window_s: float = 300.0
    poll_interval_s: float = 2.0


@dataclass(frozen=True)
class _Op:
    """What a request was doing, for error messages."""

    verb: str
    kind: Kind
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None

    @property
    def resource(self) -> str:
        base = resource_name(self.kind)
        return f"{base}/{self.subresource}" if self.subresource else base

    @property
    def scope(self) -> str:
        return f'in namespace "{self.namespace}"' if self.namespace else "at cluster scope"


def resource_name(kind: Kind) -> str:
    """``rayjobs.ray.io`` for grouped kinds, ``pods`` for the core group (as kubectl names them)."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def kind_path(kind: Kind, namespace: str | None, name: str | None = None, subresource: str | None = None) -> str:
    """REST path of a collection (no name) or an object; no namespace segment = all namespaces."""
    path = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    if kind.namespaced and namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{kind.plural}"
    if name:
        path += f"/{quote(name, safe=':')}"
    return f"{path}/{subresource}" if subresource else path


def _status_body(body: str | bytes | None) -> dict:
    """The ``Status`` object of an error body, or {} when the body is not one."""
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) and doc.get("kind") == "Status" else {}


def _api_error(exc: ApiException | urllib3.exceptions.HTTPError, op: _Op, host: str) -> ApiError:
    """The one adapter from client/transport failures to typed ``nrl_k8s`` errors."""
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return ServerError(
            f"cannot {op.verb} {op.resource} {op.scope}: the API server at {host} did not answer ({exc})",
            hint="check that the cluster is reachable: `kubectl cluster-info`",
        )
    status = exc.status or 0
    body = _status_body(exc.body)
    detail = body.get("message") or exc.reason or ""
    if status == 401:
        return UnauthorizedError(
            f"unauthorized: the API server at {host} rejected the credentials of your kube context",
            hint="log in again or renew the token/certificate in your kubeconfig",
            status=status,
        )
    if status == 403:
        ns_flag = f" -n {op.namespace}" if op.namespace else ""
        return ForbiddenError(
            f"forbidden: cannot {op.verb} {op.resource} {op.scope}",
            hint=f"check with `kubectl auth can-i {op.verb} {op.resource}{ns_flag}`; "
            "ask your cluster admin for a Role (and RoleBinding) that grants it",
            status=status,
        )
    if status == 404:
        missing = (body.get("details") or {}).get("name")  # only object 404s name the object
        if missing:
            message = f'{op.resource} "{op.name}" not found {op.scope}' if missing == op.name else detail
            return NotFoundError(message, status=status)
        hint = None
        if op.kind.group:
            hint = (
                f"the CustomResourceDefinition {resource_name(op.kind)} may be missing: "
                f"`kubectl get crd {resource_name(op.kind)}` (operators install it; see helm/)"
            )
        return KindNotServedError(
            f"the API server does not serve {op.resource} ({op.kind.api_version})", hint=hint, status=status
        )
    if status == 409:
        return ConflictError(f"conflict: {detail}", status=status)
    if status == 410:
        return GoneError(f"gone: {detail}", status=status)
    if status == 429 or status >= 500:
        return ServerError(
            f"cannot {op.verb} {op.resource} {op.scope}: the API server answered {status} {detail}",
            hint="the API server is overloaded or unhealthy; try again later",
            status=status,
        )
    if status == 0:
        return ApiError(f"cannot {op.verb} {op.resource}: {detail}", hint="check the cluster CA in your kubeconfig")
    return ApiError(f"cannot {op.verb} {op.resource} {op.scope}: {status} {detail}", status=status)


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


def _retry_after(exc: ApiException) -> float | None:
    value = (exc.headers or {}).get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _load_kubeconfig(configuration: client.Configuration, context: str | None, kubeconfig: str | None) -> tuple[str, str | None]:
    """Load the kubeconfig into ``configuration``; return (context name, its namespace)."""
    files = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    existing = [p for p in files.split(os.pathsep) if p and Path(p).expanduser().is_file()]
    if not existing:
        if kubeconfig:
            raise ConfigError(f"kubeconfig {kubeconfig} not found", hint="pass an existing file or unset it")
        raise NoClusterError(
            f"no Kubernetes cluster configured: no kubeconfig at {files} and not running in a pod",
            hint="set KUBECONFIG or pass --context; `nrl-k8s sandbox up` starts a local sandbox",
        )
    merged = os.pathsep.join(existing)
    current, by_name = None, {}
    for path in existing:  # kubectl's merge: the first file setting a value wins
        try:
            doc = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise NoClusterError(f"cannot read kubeconfig {path}: {exc}", hint="check it with `kubectl config view`") from None
        if not isinstance(doc, dict):
            raise NoClusterError(f"kubeconfig {path} is not a mapping", hint="check it with `kubectl config view`")
        current = current or doc.get("current-context") or None
        for entry in doc.get("contexts") or []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                by_name.setdefault(entry["name"], entry.get("context") or {})
    name = context or current
    if name not in by_name:
        if context:
            raise ConfigError(
                f"kube context '{context}' not found in {merged}", hint="list contexts with `kubectl config get-contexts`"
            )
        raise NoClusterError(f"no current context in {merged}", hint="pass --context or `kubectl config use-context NAME`")
    try:
        config.load_kube_config(config_file=merged, context=name, client_configuration=configuration, persist_config=False)
    except ConfigException as exc:
        raise ConfigError(f"kube context '{name}' is not usable: {exc}", hint="check it with `kubectl config view`") from None
    return name, by_name[name].get("namespace") or None


class Kube:
    """A connection to one cluster with a default namespace; see the module docstring."""

    def __init__(self, api: client.ApiClient, namespace: str, *, in_cluster: bool, context: str | None, tuning: Tuning):
        self._api = api
        self.configuration = api.configuration
        self.namespace = namespace
        self.in_cluster = in_cluster
        self.context = context
        self.tuning = tuning

    @classmethod
    def connect(
        cls,
        *,
        context: str | None = None,
        namespace: str | None = None,
        kubeconfig: str | None = None,
        tuning: Tuning = Tuning(),
    ) -> "Kube":
        """In-cluster config inside a pod (unless a context or kubeconfig is given), else the kubeconfig.

        Namespace: ``namespace`` > the service account's (in-cluster) or the context's > "default".
        """
        configuration = client.Configuration()
        token = SERVICE_ACCOUNT_DIR / "token"
        in_cluster = context is None and kubeconfig is None and bool(os.environ.get(SERVICE_HOST_ENV_NAME)) and token.is_file()
        if in_cluster:
            try:
                InClusterConfigLoader(str(token), str(SERVICE_ACCOUNT_DIR / "ca.crt")).load_and_set(configuration)
            except ConfigException as exc:
                raise NoClusterError(f"in-cluster config is not usable: {exc}", hint="check the pod's service account mount") from None
            ns_file = SERVICE_ACCOUNT_DIR / "namespace"
            default_ns = ns_file.read_text(encoding="utf-8").strip() if ns_file.is_file() else None
            context_name = None
        else:
            context_name, default_ns = _load_kubeconfig(configuration, context, kubeconfig)
        configuration.retries = False  # retries are ours (see _call), never urllib3's
        return cls(client.ApiClient(configuration), namespace or default_ns or "default", in_cluster=in_cluster, context=context_name, tuning=tuning)

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> "Kube":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport
    def _call(
        self,
        method: str,
        path: str,
        op: _Op,
        *,
        query: dict | None = None,
        body: object = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
        retry: bool = True,
        raise_for_status: bool = True,
    ):
        """One HTTP request with retries; returns the client's RESTResponse (body not yet read)."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self._api.param_serialize(
            method, path, query_params=query or None, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        t = self.tuning
        started = time.monotonic()
        for attempt in range(t.attempts):
            delay = min(t.backoff_cap_s, t.backoff_s * 2**attempt) * random.uniform(0.5, 1.0)
            try:
                response = self._api.call_api(*request, _request_timeout=timeout or t.request_timeout_s)
            except urllib3.exceptions.HTTPError as exc:
                error: ApiException | urllib3.exceptions.HTTPError = exc
            except ApiException as exc:  # raised by the client itself for TLS failures (status 0)
                raise _api_error(exc, op, self.configuration.host) from None
            else:
                if 200 <= response.status < 300 or not raise_for_status:
                    return response
                response.read()
                error = ApiException(http_resp=response)
                if not _retryable(response.status):
                    raise _api_error(error, op, self.configuration.host) from None
                delay = max(delay, _retry_after(error) or 0.0)
            if not retry or attempt + 1 == t.attempts or time.monotonic() - started + delay > t.retry_budget_s:
                break
            time.sleep(delay)
        raise _api_error(error, op, self.configuration.host) from None

    def _json(self, method: str, path: str, op: _Op, **kwargs) -> dict:
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
        return self._json("GET", kind_path(kind, ns, name), _Op("get", kind, ns, name))

    def find(self, kind: Kind, name: str, namespace: str | None = None) -> dict | None:
        """Like ``get`` but None when the object does not exist (a missing kind still raises)."""
        try:
            return self.get(kind, name, namespace)
        except KindNotServedError:
            raise
        except NotFoundError:
            return None

    def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        all_namespaces: bool = False,
    ) -> list[dict]:
        ns = None if all_namespaces else self._ns(kind, namespace)
        return self._list(kind, ns, _selectors(label_selector, field_selector))[0]

    def _list(self, kind: Kind, ns: str | None, query: dict) -> tuple[list[dict], str | None]:
        """All pages of a list; returns (items, resourceVersion of the snapshot)."""
        items: list[dict] = []
        version, token = None, None
        while True:
            page = {**query, "limit": _PAGE_SIZE, **({"continue": token} if token else {})}
            doc = self._json("GET", kind_path(kind, ns), _Op("list", kind, ns), query=page)
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
        op = _Op("create", kind, ns, meta.get("name"))
        return self._json("POST", kind_path(kind, ns), op, query={"fieldManager": FIELD_MANAGER}, body=manifest)

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: dict | list,
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
        op = _Op("patch", kind, ns, name, subresource)
        path = kind_path(kind, ns, name, subresource)
        return self._json("PATCH", path, op, query=query, body=patch, content_type=PATCH_TYPES[patch_type])

    def delete(self, kind: Kind, name: str, namespace: str | None = None, *, propagation: str = "Background") -> bool:
        """Delete (dependents per ``propagation``); False when it was already gone."""
        ns = self._ns(kind, namespace)
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        try:
            self._call("DELETE", kind_path(kind, ns, name), _Op("delete", kind, ns, name), body=options).read()
        except KindNotServedError:
            raise
        except NotFoundError:
            return False
        return True

    # ------------------------------------------------------------------ watch and wait
    def watch(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        name: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_s: float,
    ) -> Iterator[tuple[str, dict]]:
        """Yield (ADDED|MODIFIED|DELETED, object) until the server ends the watch after ``timeout_s``.

        A dropped stream also just ends the iteration; an ERROR event raises (410 -> GoneError).
        """
        ns = self._ns(kind, namespace)
        field_selector = f"metadata.name={name}" if name else None
        return self._watch(kind, ns, _selectors(label_selector, field_selector), resource_version, timeout_s)

    def _watch(self, kind: Kind, ns: str | None, query: dict, version: str | None, timeout_s: float) -> Iterator[tuple[str, dict]]:
        op = _Op("watch", kind, ns)
        seconds = max(1, math.ceil(timeout_s))
        query = {**query, "watch": "true", "timeoutSeconds": seconds, **({"resourceVersion": version} if version else {})}
        connect = min(self.tuning.request_timeout_s, seconds)
        response = self._call("GET", kind_path(kind, ns), op, query=query, timeout=(connect, seconds + 10)).response
        try:
            for line in response:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    error = ApiException(status=status.get("code"), reason=status.get("reason"))
                    error.body = json.dumps(status)
                    raise _api_error(error, op, self.configuration.host)
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    yield event["type"], self._typed(kind, event["object"])
        except urllib3.exceptions.HTTPError:
            return  # the stream dropped: same as the watch ending, the caller re-establishes it
        finally:
            response.close()
            response.release_conn()

    def wait(
        self,
        kind: Kind,
        readiness: Callable[[object], Readiness],
        *,
        name: str | None = None,
        label_selector: str | None = None,
        namespace: str | None = None,
        timeout_s: float,
        on_progress: Callable[[str], None] | None = None,
        what: str = "",
    ) -> dict | list[dict] | None:
        """Wait until ``readiness`` says Ready; return what it judged (object, None, or list).

        ``name``: readiness(object or None when absent); ``label_selector``: readiness(list).
        List (state + resourceVersion), then watch from that version, re-established when it
        expires; 410 re-lists; polls only when watch is refused (403/405). Failed raises
        ResourceFailed; the deadline raises WaitTimeout with the last Pending reason.
        """
        if (name is None) == (label_selector is None):
            raise ValueError("wait needs exactly one of name or label_selector")
        ns = self._ns(kind, namespace)
        what = what or (f'{kind.kind} "{name}"' if name else f"{kind.plural} matching {label_selector}")
        judge = _Judge(readiness, name, on_progress, what)
        query = _selectors(label_selector, f"metadata.name={name}" if name else None)
        deadline = time.monotonic() + timeout_s
        objects: dict[str, dict] = {}
        version: str | None = None
        watching = True
        while True:
            if version is None:
                items, version = self._list(kind, ns, query)
                objects = {obj["metadata"]["name"]: obj for obj in items}
                if judge(objects):
                    return judge.result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(
                    f"timed out after {timeout_s:g}s waiting for {what}; last state: {judge.last or 'nothing reported'}",
                    hint="raise the timeout or inspect the resource with `kubectl describe`",
                )
            if not watching:
                time.sleep(min(self.tuning.poll_interval_s, remaining))
                version = None
                continue
            try:
                for event, obj in self._watch(kind, ns, query, version, min(remaining, self.tuning.watch_window_s)):
                    version = obj["metadata"].get("resourceVersion") or version
                    if event == "DELETED":
                        objects.pop(obj["metadata"]["name"], None)
                    else:
                        objects[obj["metadata"]["name"]] = obj
                    if judge(objects):
                        return judge.result
            except GoneError:
                version = None
            except ApiError as exc:
                if not isinstance(exc, ForbiddenError) and exc.status not in (405, 501):
                    raise
                watching, version = False, None

    def wait_gone(self, kind: Kind, name: str, namespace: str | None = None, *, timeout_s: float) -> None:
        """Wait until the object no longer exists."""

        def gone(obj: dict | None) -> Readiness:
            if obj is None:
                return Ready()
            return Pending("being deleted" if obj["metadata"].get("deletionTimestamp") else "still exists")

        self.wait(kind, gone, name=name, namespace=namespace, timeout_s=timeout_s, what=f'deletion of {kind.kind} "{name}"')

    # ------------------------------------------------------------------ proxy, RBAC, discovery
    def proxy(
        self,
        method: str,
        service: str,
        port: int | str,
        path: str,
        namespace: str | None = None,
        *,
        json: object = None,
        timeout_s: float = 5,
    ) -> tuple[int, bytes]:
        """Send one request through the API server's service proxy; (status, body) of the upstream.

        Upstream error codes are returned, not raised; 401/403 from the API server itself raise.
        Not retried: a 5xx here is usually the upstream's answer.
        """
        ns = self._ns(SERVICE, namespace)
        op = _Op(_PROXY_VERBS[method.upper()], SERVICE, ns, service, "proxy")
        target = kind_path(SERVICE, ns, f"{service}:{port}", "proxy") + "/" + path.lstrip("/")
        response = self._call(
            method.upper(), target, op, body=json, accept="*/*", timeout=timeout_s, retry=False, raise_for_status=False
        )
        data = response.read()
        if response.status in (401, 403) and _status_body(data):
            error = ApiException(http_resp=response)
            raise _api_error(error, op, self.configuration.host)
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

    def crd_installed(self, plural_group: str) -> bool:
        """Whether the API server serves ``plural.group`` (e.g. ``dynamographdeployments.nvidia.com``).

        Asks discovery (``/apis/GROUP/VERSION``), which every authenticated user may read. A 403
        there counts as installed: restricted RBAC must not trigger a false "install the CRD" hint.
        """
        plural, _, group = plural_group.partition(".")
        op = _Op("get", Kind(group, "", plural, "", namespaced=False))
        try:
            groups = self._json("GET", "/apis", op).get("groups") or []
            versions = next((g.get("versions") or [] for g in groups if g.get("name") == group), [])
            for version in versions:
                listing = self._json("GET", f"/apis/{group}/{version['version']}", op)
                if any(r.get("name") == plural for r in listing.get("resources") or []):
                    return True
        except ForbiddenError:
            return True
        except KindNotServedError:
            return False
        return False


def _selectors(label_selector: str | None, field_selector: str | None) -> dict:
    query = {}
    if label_selector:
        query["labelSelector"] = label_selector
    if field_selector:
        query["fieldSelector"] = field_selector
    return query


class _Judge:
    """Applies a readiness function to the watched state and remembers the last Pending reason."""

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
