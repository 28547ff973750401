"""The one adapter from Kubernetes API failures to typed ``nrl_k8s`` errors.

    401 UnauthorizedError       403 ForbiddenError (names the verb and resource refused)
    404 NotFoundError           KindNotServedError: the kind's path itself is missing (no CRD)
    409 ConflictError           410 GoneError: a watch's resourceVersion is too old
    429 / 5xx / connection errors / timeouts: ServerError (raised once retries are spent)
    no answer before the server ever answered, or TLS failed: UnreachableError (``unreachable``)
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

import urllib3
from urllib3.util.ssl_match_hostname import CertificateError

from nrl_k8s.errors import (
    ApiError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    NrlK8sError,
    ServerError,
    UnauthorizedError,
    UnreachableError,
)
from nrl_k8s.kinds.base import Kind, resource_name


class NoClusterError(NrlK8sError):
    """No usable cluster configuration: no kubeconfig and not running in a pod."""


class HandshakeTimeout(urllib3.exceptions.ConnectTimeoutError):
    """The TCP connection opened, the TLS handshake did not finish within the connect timeout."""


class KindNotServedError(NotFoundError):
    """404 because the API server does not serve the kind at all (e.g. its CRD is missing)."""


class GoneError(ApiError):
    """410: the resourceVersion a watch started from is too old; list again."""


class HttpError(Exception):
    """An API server's error answer (status 0: a watch's ERROR event that gave no code)."""

    def __init__(self, status: int, reason: str = "", body: bytes | str | None = None, headers: Mapping | None = None):
        super().__init__(f"{status} {reason}")
        self.status, self.reason, self.body, self.headers = status, reason, body, headers or {}

    @classmethod
    def of(cls, response: urllib3.BaseHTTPResponse) -> HttpError:
        """From an unread urllib3 response (reads its body)."""
        return cls(response.status, response.reason or "", response.read(), response.headers)


@dataclass(frozen=True)
class Op:
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


def status_body(body: str | bytes | None) -> dict:
    """The ``Status`` object of an error body, or {} when the body is not one."""
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) and doc.get("kind") == "Status" else {}


def retryable(status: int) -> bool:
    return status == 429 or status >= 500


def retry_after(exc: HttpError) -> float | None:
    """Seconds from a Retry-After header, if any."""
    value = (exc.headers or {}).get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def tls_interrupted(exc: urllib3.exceptions.HTTPError) -> bool:
    """A TLS handshake the server broke off (an alert, a closed connection), which a loaded server or
    load balancer does now and then; not a certificate refused, which no retry changes."""
    reason = exc.args[0] if exc.args else None
    return isinstance(exc, urllib3.exceptions.SSLError) and not isinstance(
        reason, ssl.SSLCertVerificationError | CertificateError)


def unreachable(exc: urllib3.exceptions.HTTPError, host: str, within_s: float, *,
                after_handshake: bool = False) -> UnreachableError:
    """What kept a request from getting any answer from ``host``, in one line with a hint."""
    cause = exc.__cause__ or exc.__context__
    hint = "check the server address and that the cluster is up: `kubectl cluster-info`"
    if isinstance(exc, urllib3.exceptions.SSLError):
        what, hint = f"TLS failed ({exc})", "check the cluster's certificate-authority in your kubeconfig"
    elif isinstance(exc, HandshakeTimeout):
        what = f"the TLS handshake did not finish within {within_s:g}s"
    elif isinstance(exc, urllib3.exceptions.NameResolutionError):
        what = f"its host name does not resolve ({cause})"
    elif isinstance(exc, urllib3.exceptions.NewConnectionError):
        what = "connection refused" if isinstance(cause, ConnectionRefusedError) else f"cannot connect ({cause})"
    elif isinstance(exc, urllib3.exceptions.TimeoutError):  # the connect, or the answer
        what = f"no answer within {within_s:g}s" + (" of the TLS handshake" if after_handshake else "")
    else:
        what = f"no answer ({exc})"
    return UnreachableError(f"cannot reach the API server at {host}: {what}", hint=hint)


def api_error(exc: HttpError | urllib3.exceptions.HTTPError, op: Op, host: str) -> ApiError:
    """Map a client/transport failure of ``op`` against ``host`` to a typed error with a hint."""
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return ServerError(
            f"cannot {op.verb} {op.resource} {op.scope}: the API server at {host} did not answer ({exc})",
            hint="check that the cluster is reachable: `kubectl cluster-info`",
        )
    status = exc.status or 0
    body = status_body(exc.body)
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
        missing = (body.get("details") or {}).get("name")  # only object 404s name an object
        if missing:
            message = f'{op.resource} "{op.name}" not found {op.scope}' if missing == op.name else detail
            return NotFoundError(message, status=status)
        crd = resource_name(op.kind)
        hint = f"the CustomResourceDefinition {crd} may be missing: `kubectl get crd {crd}` (see helm/)"
        message = f"the API server does not serve {op.resource} ({op.kind.api_version})"
        return KindNotServedError(message, hint=hint if op.kind.group else None, status=status)
    if status == 409:
        return ConflictError(f"conflict: {detail}", status=status)
    if status == 410:
        return GoneError(f"gone: {detail}", status=status)
    if retryable(status):
        return ServerError(
            f"cannot {op.verb} {op.resource} {op.scope}: the API server answered {status} {detail}",
            hint="the API server is overloaded or unhealthy; try again later",
            status=status,
        )
    return ApiError(f"cannot {op.verb} {op.resource} {op.scope}: {status} {detail}", status=status)
