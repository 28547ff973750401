"""Kubernetes object name validation (RFC 1123 labels)."""

from __future__ import annotations

import re

from nrl_k8s.errors import ConfigError, InfraError

from .k8s_rules import DNS_LABEL as _RFC1123_LABEL

MAX_NAME_LEN = 63
MAX_RAYCLUSTER_NAME_LEN = 53  # KubeRay appends suffixes for pods and services
MAX_RAYJOB_NAME_LEN = 47  # KubeRay derives the RayCluster name from it


def validate_name(
    name: object, *, what: str, where: str | None = None, key: tuple | None = None, max_len: int = MAX_NAME_LEN,
    letter_first: bool = False,
) -> str:
    """Return ``name`` if it is a valid RFC 1123 label of at most ``max_len`` chars (``letter_first``:
    an RFC 1035 label, as KubeRay requires of RayJob and RayCluster names and Kubernetes of Services).

    Raises ConfigError naming ``what`` (e.g. "RayJob name") and ``where`` it was set, or an
    InfraError at the infra ``key`` (the caller names the file).
    """

    def fail(problem: str, hint: str) -> ConfigError:
        return InfraError(key, problem, hint) if key is not None else ConfigError(f"{where}: {problem}", hint=hint)

    rule = (
        f"lowercase letters, digits and '-', starting and ending with a letter or digit, at most {max_len} characters"
    )
    if not isinstance(name, str) or not name:
        raise fail(f"{what} must be a non-empty string, got {name!r}", f"use {rule}")
    if len(name) > max_len:
        raise fail(
            f"{what} {name[:80]!r} is {len(name)} characters, more than {max_len}",
            f"shorten it to at most {max_len} characters",
        )
    if not _RFC1123_LABEL.fullmatch(name):
        suggestion = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:max_len].rstrip("-")
        hint = f"use {rule}" + (f", e.g. {suggestion!r}" if suggestion else "")
        raise fail(f"{what} {name!r} is not a valid Kubernetes name", hint)
    if letter_first and not name[0].isalpha():
        raise fail(f"{what} {name!r} must start with a letter (an RFC 1035 label)", f"e.g. {('r-' + name)[:max_len]!r}")
    return name
