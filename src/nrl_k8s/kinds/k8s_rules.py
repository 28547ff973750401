"""The value rules the Kubernetes API server applies beyond its OpenAPI schema (apimachinery
validation): quantities, ports, replicas, label and annotation syntax and size, DNS names.

A broken rule raises ``Invalid(path, problem, hint)`` with ``path`` relative to the value
checked; the caller knows which file and key the value came from and names them.
"""

# No `from __future__ import annotations` here: it would bind the name of the rule `annotations` below.
import math
import re
from typing import Any, TypeVar

INT32_MAX = (1 << 31) - 1
MAX_ANNOTATIONS_BYTES = 256 * 1024  # keys and values of one object together

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(_DNS_LABEL)
DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_PORT_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
# <sign><digits>[.<digits>]<suffix>: binary SI, decimal SI or a decimal exponent.
_QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")
_QUANTITY_HINT = "use a Kubernetes quantity such as 4, 500m, 16Gi or 1.5"


class Invalid(Exception):
    """A value breaks a Kubernetes rule; ``path`` is relative to the value that was checked."""

    def __init__(self, path: tuple, problem: str, hint: str):
        super().__init__(problem)
        self.path = tuple(path)
        self.problem = problem
        self.hint = hint

    def within(self, prefix: tuple) -> "Invalid":
        """The same problem with ``prefix`` in front of its path."""
        return Invalid((*prefix, *self.path), self.problem, self.hint)


def describe(value: Any) -> str:
    """``"string 'x'"``, ``"integer 3"``, ``"mapping"``, ... for messages (long values cut)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    names = {str: "string", int: "integer", float: "number", list: "list", dict: "mapping"}
    name = names.get(type(value), type(value).__name__)
    if isinstance(value, (str, int, float)):
        from nrl_k8s.redact import redact_text  # before the cut: a cut value no longer looks like one

        shown = repr(redact_text(value) if isinstance(value, str) else value)
        return f"{name} {shown if len(shown) <= 40 else shown[:36] + '...' + shown[-1]}"
    return name


_T = TypeVar("_T")


def expect(value: Any, kind: type[_T], path: tuple = (), what: str | None = None) -> _T:
    """``value`` if it is a ``kind`` (bool is not an int), else Invalid naming what was found."""
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    what = what or {dict: "a mapping", list: "a list", str: "a string", int: "an integer"}[kind]
    raise Invalid(path, f"expected {what}, got {describe(value)}", f"make it {what}")


def count(value: Any, path: tuple = (), *, minimum: int = 0, maximum: int = INT32_MAX, what: str = "an integer") -> int:
    """An integer within ``minimum``..``maximum`` (replicas, node counts: 32-bit in Kubernetes)."""
    expect(value, int, path, what)
    if not minimum <= value <= maximum:
        raise Invalid(path, f"{value} is out of range {minimum}..{maximum}", f"use {what} from {minimum} to {maximum}")
    return value


def port(value: Any, path: tuple = (), *, minimum: int = 1) -> int:
    """A TCP/UDP port number (1..65535; 0 allowed where it means unset)."""
    return count(value, path, minimum=minimum, maximum=65535, what="a port number")


def port_name(value: Any, path: tuple = ()) -> None:
    """An IANA service name: at most 15 lower-case letters, digits and '-', with a letter."""
    expect(value, str, path)
    if len(value) > 15 or not _PORT_NAME.fullmatch(value) or "--" in value or not re.search("[a-z]", value):
        raise Invalid(path, f"{describe(value)} is not a valid port name",
                      "use at most 15 lower-case letters, digits and '-', with at least one letter")


def quantity(value: Any, path: tuple = ()) -> None:
    """A non-negative Kubernetes quantity: a number, or a string such as "500m", "16Gi", "1e3"."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise Invalid(path, f"expected a quantity, got {describe(value)}", _QUANTITY_HINT)
    if isinstance(value, float) and not math.isfinite(value):
        raise Invalid(path, f"{value} is not a quantity", _QUANTITY_HINT)
    if isinstance(value, str):
        match = _QUANTITY.fullmatch(value)
        if match is None:
            raise Invalid(path, f"{describe(value)} is not a quantity", _QUANTITY_HINT)
        negative = value.startswith("-") and float(match.group(1)) != 0
    else:
        negative = value < 0
    if negative:
        raise Invalid(path, f"{describe(value)} is negative", "resource quantities must be at least 0")


def qualified_name(key: Any, path: tuple = (), *, what: str = "label key") -> None:
    """A label or annotation key: ``[DNS subdomain prefix/]name``, the name at most 63 characters."""
    if not isinstance(key, str):
        raise Invalid(path, f"{what} must be a string, got {describe(key)}", "quote the key")
    prefix, slash, name = key.rpartition("/")
    problem = None
    if slash and (not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix)):
        problem = f"the prefix {prefix!r} is not a DNS subdomain (lower-case, at most 253 characters)"
    elif not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        problem = (
            "the name part must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
    if problem:
        raise Invalid(path, f"{what} {describe(key)} is invalid: {problem}",
                      "e.g. team, app.kubernetes.io/name or example.com/owner")


def labels(mapping: Any, path: tuple = ()) -> None:
    """Label keys and values (values: at most 63 letters, digits, '-', '_', '.', or empty)."""
    expect(mapping, dict, path)
    for key, value in mapping.items():
        qualified_name(key, (*path, key))
        text = _label_text(value)
        if text is None or len(text) > 63 or (text and not _QUALIFIED_NAME.fullmatch(text)):
            raise Invalid((*path, key), f"label value {describe(value)} is invalid",
                          "use at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")


def annotations(mapping: Any, path: tuple = ()) -> None:
    """Annotation keys (as label keys), string values, at most 256 KiB together."""
    expect(mapping, dict, path)
    size = 0
    for key, value in mapping.items():
        qualified_name(key, (*path, key), what="annotation key")
        text = _label_text(value)
        if text is None:
            raise Invalid((*path, key), f"expected a string, got {describe(value)}", "quote the value")
        size += len(key.encode()) + len(text.encode())
    if size > MAX_ANNOTATIONS_BYTES:
        raise Invalid(path, f"annotations take {size} bytes, more than the {MAX_ANNOTATIONS_BYTES} Kubernetes allows",
                      "keep large data out of annotations (use a ConfigMap)")


def image(value: Any, path: tuple = ()) -> None:
    """A container image reference: a non-empty string without whitespace."""
    expect(value, str, path)
    if not value:
        raise Invalid(path, "image is empty", "set an image, e.g. nvcr.io/nvidia/nemo-rl:v0.4.0")
    if any(c.isspace() for c in value):
        raise Invalid(path, f"image {describe(value)} contains whitespace", "remove the whitespace")


def dns_name(value: Any, path: tuple = (), *, what: str, subdomain: bool = False) -> None:
    """An RFC 1123 label (at most 63) or subdomain (at most 253) name."""
    expect(value, str, path)
    pattern, limit = (DNS_SUBDOMAIN, 253) if subdomain else (DNS_LABEL, 63)
    if len(value) > limit or not pattern.fullmatch(value):
        raise Invalid(path, f"{what} {describe(value)} is not a valid Kubernetes name",
                      f"use at most {limit} lower-case letters, digits and '-'" + (" or '.'" if subdomain else "")
                      + ", starting and ending with a letter or digit")


def _label_text(value: Any) -> str | None:
    """The string Kubernetes would get for a label/annotation value (numbers and booleans as written)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)) or (isinstance(value, float) and math.isfinite(value)):
        return str(value)
    return None


def no_inline_secret(env: Any, path: tuple = ()) -> None:
    """An env ({NAME: value} or [{name, value}]) whose secret-looking names carry no value written
    inline: it would sit in the object for anyone who may read it."""
    from nrl_k8s.redact import is_secret  # light; kept out of this module's import time

    items = (
        env.items()
        if isinstance(env, dict)
        else ((e.get("name"), e.get("value")) for e in env or [] if isinstance(e, dict))
    )
    for index, (name, value) in enumerate(items):
        if isinstance(name, str) and is_secret(name) and value not in (None, ""):
            raise Invalid(
                (*path, name if isinstance(env, dict) else index),
                f"{name} is a secret-looking value written inline",
                "put it in infra.launch.env (nrl-k8s keeps it in the run's Secret and references it), or "
                "reference a Secret of yours with valueFrom.secretKeyRef",
            )



def no_inline_secrets(tree: Any, path: tuple = ()) -> None:
    """``no_inline_secret`` for every env (a key ``env`` or ``envs``) anywhere in ``tree``: each
    container, pod template, component and sidecar, whatever field holds it."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            (no_inline_secret if key in ("env", "envs") else no_inline_secrets)(value, (*path, key))
    elif isinstance(tree, list):
        for index, item in enumerate(tree):
            no_inline_secrets(item, (*path, index))


def known_fields(value: dict, fields: frozenset, path: tuple = (), *, what: str, present: Any = None,
                 hints: dict | None = None) -> None:
    """Every key of ``value`` is a field of ``what`` (``fields``), or one ``present`` already has
    (a manifest written for a newer operator), else Invalid: an unknown field would do nothing."""
    for key in value:
        if key in fields or (isinstance(present, dict) and key in present):
            continue
        bracket = re.fullmatch(r"(.+)\[(\d+)\]", str(key))
        hint = ((hints or {}).get(key)
                or (f"an override names a list item as {bracket[1]}.{bracket[2]}, not {key}" if bracket else
                    f"check the spelling; the fields of {what}: {', '.join(sorted(fields))}"))
        raise Invalid((*path, key), "unknown field", hint)
