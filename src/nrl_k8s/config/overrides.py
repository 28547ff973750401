"""Hydra-style command-line overrides: `a.b=v`, `+a.b=v`, `++a.b=v`, `~a.b`.

Tokens whose key starts with `infra.` address the infra layer (prefix stripped);
every other token addresses the recipe.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nrl_k8s.config.safe_yaml import MAX_DEPTH, parse
from nrl_k8s.errors import ConfigError
from nrl_k8s.redact import redact_text

Op = Literal["set", "add", "force", "delete"]

_MISSING = object()
_SYNTAX = "use KEY=VALUE (set), +KEY=VALUE (add), ++KEY=VALUE (add or set) or ~KEY (delete)"


@dataclass(frozen=True)
class Override:
    """One parsed override token. `path` is relative to its layer (no `infra.` prefix)."""

    op: Op
    path: tuple[str, ...]
    value: Any
    token: str
    infra: bool = False

    @property
    def key(self) -> str:
        """The dotted key as the user wrote it."""
        return ".".join(("infra", *self.path) if self.infra else self.path)


def label(token: str) -> str:
    """``override 'TOKEN'`` for messages, its secret values redacted before a very long token is cut
    (cut first, a value that lost its end would no longer look like one)."""
    shown = redact_text(token)
    return f"override '{shown if len(shown) <= 100 else shown[:96] + '...'}'"


def parse_override(token: str) -> Override:
    """Parse one token; bad syntax raises ConfigError naming the token."""
    op: Op
    if token.startswith("~"):
        op, body = "delete", token[1:]
        if "=" in body:
            raise ConfigError(
                f"{label(token)}: '~' deletes a key and takes no value", hint=f"write '~{body.split('=', 1)[0]}'"
            )
        key, raw = body, None
    else:
        if token.startswith("++"):
            op, body = "force", token[2:]
        elif token.startswith("+"):
            op, body = "add", token[1:]
        else:
            op, body = "set", token
        if "=" not in body:
            raise ConfigError(f"{label(token)}: missing '=VALUE'", hint=_SYNTAX)
        key, raw = body.split("=", 1)
    path = _parse_key(token, key)
    infra = path[0] == "infra"
    if infra:
        if len(path) == 1:
            raise ConfigError(f"{label(token)}: address a key under infra, e.g. 'infra.image=...'", hint=_SYNTAX)
        path = path[1:]
    value = None if raw is None else _parse_value(token, raw)
    return Override(op=op, path=path, value=value, token=token, infra=infra)


def split_overrides(tokens: Sequence[str]) -> tuple[list[Override], list[Override]]:
    """Parse tokens and split them into (recipe overrides, infra overrides), order kept."""
    parsed = [parse_override(t) for t in tokens]
    return [o for o in parsed if not o.infra], [o for o in parsed if o.infra]


def apply_overrides(data: dict, overrides: Sequence[Override]) -> dict:
    """Return a copy of `data` with the overrides applied in order."""
    result = copy.deepcopy(data)
    for override in overrides:
        _apply(result, override)
    return result


def _parse_key(token: str, key: str) -> tuple[str, ...]:
    key = key.strip()
    if not key:
        raise ConfigError(f"{label(token)}: empty key", hint=_SYNTAX)
    parts = tuple(key.split("."))
    if len(parts) > MAX_DEPTH:
        raise ConfigError(f"{label(token)}: key is more than {MAX_DEPTH} levels deep", hint=_SYNTAX)
    if any(not p or any(c.isspace() for c in p) for p in parts):
        raise ConfigError(
            f"{label(token)}: malformed key '{key}'", hint="keys are dot-separated names, e.g. launch.env.FOO"
        )
    if any(c in key for c in "+~"):
        raise ConfigError(f"{label(token)}: malformed key '{key}'", hint=_SYNTAX)
    return parts


def _parse_value(token: str, raw: str) -> Any:
    if raw == "":
        return ""
    return parse(raw, f"{label(token)}", lines=False)


def _apply(root: dict, o: Override) -> None:
    create = o.op in ("add", "force")
    parent: Any = root
    for depth, part in enumerate(o.path[:-1]):
        child = _get(parent, part, o, depth)
        if child is _MISSING:
            if not create:
                _not_found(o, depth)
            child = {}
            _put(parent, part, child, o, depth)
        elif not isinstance(child, (dict, list)):
            raise ConfigError(
                f"{label(o.token)}: '{_prefix(o, depth)}' is a {type(child).__name__}, not a mapping or list",
                hint="override the parent key as a whole instead",
            )
        parent = child
    last, depth = o.path[-1], len(o.path) - 1
    exists = _get(parent, last, o, depth) is not _MISSING
    if o.op == "delete":
        if not exists:
            _not_found(o, depth)
        del parent[_index(parent, last, o, depth)]
    elif o.op == "set" and not exists:
        _not_found(o, depth)
    elif o.op == "add" and exists:
        raise ConfigError(
            f"{label(o.token)}: key '{o.key}' already exists",
            hint=f"use '{o.key}=VALUE' to change it or '++{o.key}=VALUE' to add or set",
        )
    else:
        _put(parent, last, o.value, o, depth)


def _get(container: Any, part: str, o: Override, depth: int) -> Any:
    if isinstance(container, dict):
        return container.get(part, _MISSING)
    index = _index(container, part, o, depth)
    return container[index] if index < len(container) else _MISSING


def _put(container: Any, part: str, value: Any, o: Override, depth: int) -> None:
    if isinstance(container, dict):
        container[part] = value
        return
    index = _index(container, part, o, depth)
    if index < len(container):
        container[index] = value
    elif index == len(container):
        container.append(value)
    else:
        size = len(container)
        raise ConfigError(
            f"{label(o.token)}: list index {index} out of range for '{_prefix(o, depth - 1)}' (length {size})",
            hint=f"use an index below {size} to replace, or {size} to append",
        )


def _index(container: Any, part: str, o: Override, depth: int) -> Any:
    if isinstance(container, dict):
        return part
    try:
        index = int(part)
    except ValueError:
        index = -1
    if index < 0:
        raise ConfigError(
            f"{label(o.token)}: '{_prefix(o, depth - 1)}' is a list; '{part}' is not a list index",
            hint="use a number, e.g. key.0",
        )
    return index


def _prefix(o: Override, depth: int) -> str:
    """The dotted key up to and including path[depth], as the user wrote it."""
    path = o.path[: depth + 1]
    return ".".join(("infra", *path) if o.infra else path)


def _not_found(o: Override, depth: int) -> None:
    hint = "there is nothing to delete; check the key" if o.op == "delete" else f"use '+{o.key}=VALUE' to add a new key"
    raise ConfigError(f"{label(o.token)}: key '{_prefix(o, depth)}' not found", hint=hint)
