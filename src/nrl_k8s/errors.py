"""The nrl-k8s exception hierarchy.

    NrlK8sError(message, hint)          exit 1 unless stated
    ├── ConfigError                     exit 2: bad config, flags, overrides, names, manifests
    │   └── InfraError(key)             a bad infra value found while rendering (names the key)
    ├── ApiError(status)                a Kubernetes API call failed
    │   ├── UnauthorizedError           401
    │   ├── ForbiddenError              403 (names the verb and resource refused)
    │   ├── NotFoundError               404
    │   ├── ConflictError               409
    │   └── ServerError                 429 / 5xx / timeouts after retries
    ├── UnreachableError                no answer from the API server (refused, silent, TLS failed or
    │                                   stalled): ends the command, never taken for "cannot tell"
    ├── ResourceFailed                  a resource reported a terminal failure
    ├── WaitTimeout                     a wait passed its deadline (carries the last reason)
    ├── DashboardError                  the Ray dashboard refused or failed a request
    │   └── SubmissionExists            a job with that submission_id already exists
    ├── MissingExtra                    exit 2: an optional part used without its extra installed
    └── SandboxError                    the local sandbox could not start/stop

The CLI maps these to exit codes in exactly one handler and prints
``error: <message>`` plus ``hint: <hint>``; it never shows a traceback for them.
"""

from __future__ import annotations

import re


class NrlK8sError(Exception):
    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class ConfigError(NrlK8sError):
    """Bad input: config files, overrides, flags, names, manifests. Nothing is applied."""

    exit_code = 2


class FitError(ConfigError):
    """A pod group of the run never fits the cluster (``ops.fit``). Nothing is applied."""


class InfraError(ConfigError):
    """A bad value at infra ``key`` (a path tuple), found while rendering.

    Renderers see only the merged infra; ``located(source)`` names the file (or override)
    that set the key, once the caller knows it (``LoadedConfig.located``).
    """

    def __init__(self, key: tuple, problem: str, hint: str | None = None):
        self.key = tuple(key)
        self.problem = problem
        super().__init__(f"infra.{dotted(self.key)}: {problem}", hint)

    def located(self, source: object) -> ConfigError:
        return ConfigError(f"{source}: {dotted(self.key)}: {self.problem}", hint=self.hint)


def dotted(path: tuple | list) -> str:
    """A key path as messages show it (``a.b.0``); a very deep one keeps its ends."""
    parts = [str(p) for p in path]
    if len(parts) > 12:
        parts = [*parts[:4], f"<{len(parts) - 8} more>", *parts[-4:]]
    return ".".join(parts)


# What would break a printed line or hide text: C0/C1 controls (newline, CR, ESC), the Unicode line
# and paragraph separators, and the bidirectional overrides and isolates.
_UNPRINTED = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def one_line(text: str) -> str:
    """``text`` on one line: control characters written as escapes, as ``repr`` writes them
    (``\\n``, ``\\x1b``, ``\\u2028``). Messages quote user values; this is how they are printed."""
    return _UNPRINTED.sub(lambda m: _NAMED.get(m[0]) or (f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100
                                                          else f"\\u{ord(m[0]):04x}"), text)


class CredentialError(NrlK8sError):
    """A credential could not be had: the exec plugin failed, hung or printed nothing usable (exit 1)."""


class ApiError(NrlK8sError):
    def __init__(self, message: str, hint: str | None = None, status: int | None = None):
        super().__init__(message, hint)
        self.status = status


class UnauthorizedError(ApiError):
    pass


class ForbiddenError(ApiError):
    pass


class NotFoundError(ApiError):
    pass


class ConflictError(ApiError):
    pass


class ServerError(ApiError):
    pass


class UnreachableError(NrlK8sError):
    """No answer from the API server at all: not an ``ApiError``, so no caller takes it for
    "cannot verify, going ahead"; the command ends."""


class ResourceFailed(NrlK8sError):
    pass


class WaitTimeout(NrlK8sError):
    pass


class DashboardError(NrlK8sError):
    pass


class SubmissionExists(DashboardError):
    """Ray never reuses a submission id: the job was already submitted (by us or the operator)."""


class JobGone(DashboardError):
    """The dashboard lost a job while its log was followed: the Ray head went away (KubeRay deletes
    a RayJob's cluster as soon as its job ends, often before Ray closes the log stream)."""


class MissingExtra(NrlK8sError):
    """An optional part (the sandbox) was used without its extra; the message names the install."""

    exit_code = 2


class SandboxError(NrlK8sError):
    pass
