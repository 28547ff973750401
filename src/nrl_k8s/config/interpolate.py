"""Infra interpolation: `${user:}`, `${env:NAME[,default]}`, `${a.b}` references, `\\${X}` escapes."""

from __future__ import annotations

import copy
import os
import pwd
import re
from typing import Any, Mapping

from nrl_k8s.errors import ConfigError

from .provenance import Provenance, dotted

_TOKEN = re.compile(r"(\\)?\$\{([^{}]*)\}")
_REFERENCE = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
_RESOLVER = re.compile(r"([A-Za-z_][\w-]*):(.*)", re.DOTALL)
_HINT = "supported: ${user:}, ${env:NAME}, ${env:NAME,default}, ${key.path}; write \\${VAR} for a literal ${VAR}"


def user_name(env: Mapping[str, str]) -> str:
    """`$NRL_K8S_USER` or the login name, lower-cased, with `_` and `.` turned into `-`."""
    name = env.get("NRL_K8S_USER") or env.get("LOGNAME") or env.get("USER") or env.get("USERNAME")
    if not name:
        try:
            name = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            raise ConfigError("cannot determine the user name for ${user:}", hint="set NRL_K8S_USER") from None
    return name.lower().replace("_", "-").replace(".", "-")


def interpolate(infra: dict, env: Mapping[str, str], provenance: Provenance) -> dict:
    """Return a copy of `infra` with every interpolation in its strings resolved.

    Top-level `_`-prefixed keys (YAML anchor scratch space) are left out of the result;
    they are resolved only when another key references them.
    """
    resolver = _Resolver(infra, env, provenance)
    return {key: resolver.resolve((key,)) for key in infra if not (isinstance(key, str) and key.startswith("_"))}


class _Resolver:
    def __init__(self, root: dict, env: Mapping[str, str], provenance: Provenance):
        self.root = root
        self.env = env
        self.provenance = provenance
        self.done: dict[tuple, Any] = {}
        self.active: list[tuple] = []

    def resolve(self, path: tuple) -> Any:
        if path in self.done:
            return self.done[path]
        if path in self.active:
            cycle = " -> ".join(dotted(p) for p in (*self.active[self.active.index(path):], path))
            raise self._error(self.active[-1], f"interpolation cycle: {cycle}", "break the cycle of ${...} references")
        self.active.append(path)
        node = self._node(path)
        if isinstance(node, dict):
            value: Any = {key: self.resolve((*path, key)) for key in node}
        elif isinstance(node, list):
            value = [self.resolve((*path, i)) for i in range(len(node))]
        elif isinstance(node, str):
            value = self._string(node, path)
        else:
            value = node
        self.active.pop()
        self.done[path] = value
        return value

    def _node(self, path: tuple) -> Any:
        node: Any = self.root
        for part in path:
            node = node[part]
        return node

    def _string(self, text: str, path: tuple) -> Any:
        whole = _TOKEN.fullmatch(text)
        if whole and not whole.group(1):
            value = self._token(whole.group(2), path)
            return copy.deepcopy(value)

        def replace(match: re.Match) -> str:
            if match.group(1):
                return "${" + match.group(2) + "}"
            value = self._token(match.group(2), path)
            if isinstance(value, (dict, list)):
                problem = f"'{match.group(0)}' is a {type(value).__name__} and cannot be embedded in a string"
                raise self._error(path, problem, "reference it as the whole value")
            if isinstance(value, bool):
                return "true" if value else "false"
            return "" if value is None else str(value)

        return _TOKEN.sub(replace, text)

    def _token(self, body: str, path: tuple) -> Any:
        resolver = _RESOLVER.fullmatch(body)
        if resolver:
            name, args = resolver.group(1), resolver.group(2)
            if name == "user":
                if args.strip():
                    raise self._error(path, f"'${{{body}}}' takes no arguments", "write ${user:}")
                return user_name(self.env)
            if name == "env":
                return self._env(args, body, path)
            raise self._error(path, f"unknown resolver '{name}' in '${{{body}}}'", _HINT)
        if not _REFERENCE.fullmatch(body.strip()):
            raise self._error(path, f"malformed interpolation '${{{body}}}'", _HINT)
        return self.resolve(self._reference(body.strip(), path))

    def _env(self, args: str, body: str, path: tuple) -> str:
        name, sep, default = args.partition(",")
        name = name.strip()
        if not name:
            raise self._error(path, f"'${{{body}}}' needs a variable name", "write ${env:NAME} or ${env:NAME,default}")
        if name in self.env:
            return self.env[name]
        if sep:
            return default.strip()
        raise self._error(
            path,
            f"environment variable '{name}' is not set (from '${{{body}}}')",
            f"export {name}, or give a default: ${{env:{name},DEFAULT}}",
        )

    def _reference(self, ref: str, path: tuple) -> tuple:
        node: Any = self.root
        resolved: list = []
        for part in ref.split("."):
            if isinstance(node, dict) and part in node:
                key: Any = part
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                key = int(part)
            else:
                hint = "reference an existing infra key, or escape shell variables as \\${VAR}"
                raise self._error(path, f"'${{{ref}}}' refers to a missing key '{ref}'", hint)
            resolved.append(key)
            node = node[key]
        return tuple(resolved)

    def _error(self, path: tuple, problem: str, hint: str) -> ConfigError:
        return ConfigError(f"{self.provenance.label(path)}: {dotted(path)}: {problem}", hint=hint)
