"""``Status`` error bodies exactly as the real API server writes them, raised as ``ApiStatus``."""

from __future__ import annotations

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiStatus(Exception):
    """An API failure carrying its HTTP code, reason and ``details``."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        name: str | None = None,
        group: str | None = None,
        kind: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "InternalError" if code >= 500 else "BadRequest")
        self.details = {k: v for k, v in (("name", name), ("group", group), ("kind", kind)) if v is not None}
        self.headers = headers or {}

    def body(self) -> dict:
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            status["details"] = self.details
        return status


def qualified(plural: str, group: str) -> str:
    """``rayjobs.ray.io`` for grouped resources, ``pods`` for the core group."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiStatus:
    return ApiStatus(404, f'{qualified(plural, group)} "{name}" not found', name=name, group=group, kind=plural)


def already_exists(plural: str, group: str, name: str) -> ApiStatus:
    return ApiStatus(
        409,
        f'{qualified(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        name=name,
        group=group,
        kind=plural,
    )


def conflict(plural: str, group: str, name: str, why: str) -> ApiStatus:
    return ApiStatus(
        409,
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        name=name,
        group=group,
        kind=plural,
    )


def invalid(kind: str, group: str, name: str, why: str) -> ApiStatus:
    return ApiStatus(422, f'{kind} "{name}" is invalid: {why}', name=name, group=group, kind=kind)


def forbidden(verb: str, plural: str, group: str, namespace: str | None, name: str | None, user: str) -> ApiStatus:
    subject = f'{qualified(plural, group)} "{name}"' if name else qualified(plural, group)
    scope = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    message = (
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{plural}" '
        f'in API group "{group}"{scope}'
    )
    return ApiStatus(403, message, name=name, group=group, kind=plural)
