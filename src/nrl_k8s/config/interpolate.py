"""Infra interpolation with OmegaConf's grammar and semantics, bounded in time and memory.

A string holding ``${`` is read as OmegaConf reads it (the earlier launcher resolved infra
files with OmegaConf, as NeMo-RL resolves recipes), so upstream infra files load unchanged:

- references ``${a.b}``, ``${a.0}`` / ``${a[0]}``, ``${a.${b}}``; a leading dot is relative to
  the node's parent (``${.replicas}`` a sibling, ``${..x}`` one level further up per dot); a
  reference that is the whole value keeps its type (number, mapping, list);
- resolvers ``${user:}``, ``${env:NAME[,default]}``, ``${oc.env:NAME[,default]}``,
  ``${oc.select:key[,default]}``, ``${oc.decode:text}``, ``${oc.dict.keys:key}``,
  ``${oc.dict.values:key}`` and the earlier launcher's ``${mul:a,b}``, ``${div:a,b}``,
  ``${max:a,b}``; arguments are typed as OmegaConf types them (``2``, ``1.5``, ``true``,
  ``null``, ``'quoted'``, ``[a, b]``, ``{k: v}``) and may hold interpolations;
- ``\\${X}`` is a literal ``${X}`` (shell variables in entrypoints).

Unlike OmegaConf, on purpose: a value embedded in text renders booleans as true/false and null
as nothing, and a mapping or list cannot be embedded; ``mul``, ``div`` and ``max`` take numbers
and stay within 64 bits, and ``div`` of integers that divide exactly is an integer (Kubernetes
integer fields refuse 4.0); ``env`` keeps everything after its first comma as the default.

OmegaConf itself is not used: importing it costs ~0.1 s per command (bench/startup.py) and it
resolves a key again at every reference, exponential in a chain of keys that each reference the
next twice. Here every key is resolved once, and what interpolation copies or builds is bounded
(``MAX_VALUES``, ``MAX_CHARS``, ``MAX_DEPTH``, ``MAX_FRAMES``). A bad interpolation is a
ConfigError naming the file and the key.
"""

from __future__ import annotations

import copy
import math
import os
import pwd
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from nrl_k8s.config.safe_yaml import INT64, MAX_BYTES, MAX_DEPTH, MAX_NODES
from nrl_k8s.errors import ConfigError, one_line
from nrl_k8s.kinds.k8s_rules import DNS_LABEL, describe

from .provenance import Provenance, dotted

MAX_VALUES = MAX_NODES  # values copied by references
MAX_CHARS = 4 * MAX_BYTES  # characters of text built or copied by interpolation
# Python frames resolution may hold at once (the interpreter stops at 1000): a mapping or list
# being resolved holds 2, a string with interpolations 10, an interpolation or argument list
# inside another 6. Real infra files use a few dozen.
MAX_FRAMES = 600
_FRAMES = {"container": 2, "string": 10, "nested": 6}

_HINT = ("supported: ${key.path}, ${.sibling}, ${user:}, ${env:NAME[,default]}, ${oc.env:NAME[,default]}, "
         "${oc.select:key[,default]}, ${oc.decode:text}, ${oc.dict.keys:key}, ${oc.dict.values:key}, "
         "${mul:a,b}, ${div:a,b}, ${max:a,b}; write \\${VAR} for a literal ${VAR}")
_MISSING = object()

# OmegaConf's lexer, as far as a value needs it (omegaconf/grammar/OmegaConfGrammarLexer.g4).
_KEY = re.compile(r"[^\\{}()\[\]:. \t'\"]+")
_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_RUN = re.compile(r"[^,\]}\[{$\\]+")
_BACKSLASHES = re.compile(r"\\+")
_QUOTED_RUN = {quote: re.compile(rf"[^{quote}$\\]+") for quote in "'\""}
_DICT_KEY = re.compile(r"[^:,{}\[\]'\"$]+")
_WORDS = {"true": True, "false": False, "null": None}
_ESCAPABLE = "\\()[]{}:=, \t"
_UINT = r"(?:0|[1-9](?:_?[0-9])*)"
_POINT = rf"(?:{_UINT}\.|{_UINT}?\.[0-9](?:_?[0-9])*)"
_INT = re.compile(rf"[+-]?{_UINT}")
_FLOAT = re.compile(rf"[+-]?(?:{_POINT}|(?:{_UINT}|{_POINT})[eE][+-]?[0-9](?:_?[0-9])*|[Ii][Nn][Ff]|[Nn][Aa][Nn])")

Arg = tuple[Any, "str | None"]
"""A resolver argument: its value and, for a plain literal, its text as written."""


def user_name(env: Mapping[str, str]) -> str:
    """`$NRL_K8S_USER` or the login name, lower-cased, with `_` and `.` turned into `-`: a DNS
    label (it goes into object names and the owner label), else a ConfigError naming its source."""
    source = next((var for var in ("NRL_K8S_USER", "LOGNAME", "USER", "USERNAME") if env.get(var)), None)
    if source is not None:
        name, where = env[source], f"${source}"
    else:
        try:
            name, where = pwd.getpwuid(os.getuid()).pw_name, "the login name"
        except KeyError:
            raise ConfigError("cannot determine the user name for ${user:}", hint="set NRL_K8S_USER") from None
    user = name.lower().replace("_", "-").replace(".", "-")
    if len(user) > 63 or not DNS_LABEL.fullmatch(user):
        shown = [one_line(describe(text)).removeprefix("string ") for text in (name, user)]
        raise ConfigError(f"{where} {shown[0]} makes the user name {shown[1]}, not a Kubernetes name "
                          "(object names and the nrl-k8s/owner label are made of it)",
                          hint="set NRL_K8S_USER to at most 63 lower-case letters, digits and '-', starting and "
                               "ending with a letter or digit, e.g. NRL_K8S_USER=jdoe")
    return user


def interpolate(infra: dict, env: Mapping[str, str], provenance: Provenance) -> dict:
    """Return a copy of `infra` with every interpolation in its strings resolved.

    Top-level `_`-prefixed keys (YAML anchor scratch space) are left out of the result;
    they are resolved only when another key references them.
    """
    resolver = _Resolver(infra, env, provenance)
    return {key: resolver.resolve((key,)) for key in infra if not (isinstance(key, str) and key.startswith("_"))}


def interpolate_document(document: dict, env: Mapping[str, str], source: str) -> dict:
    """``document`` (a file other than the infra: a DGD manifest's spec or metadata) with every
    interpolation resolved as the infra's are; references are relative to its top, and errors
    name ``source``."""
    provenance = Provenance()
    provenance.record(document, source)
    resolver = _Resolver(document, env, provenance)
    return {key: resolver.resolve((key,)) for key in document}


class _Resolver:
    """Resolves keys of one infra mapping, each once (``done``), refusing cycles and excess."""

    def __init__(self, root: dict, env: Mapping[str, str], provenance: Provenance):
        self.root = root
        self.env = env
        self.provenance = provenance
        self.done: dict[tuple, Any] = {}
        self.active: list[tuple] = []
        self.frames = 0
        self.values = 0
        self.chars = 0

    def resolve(self, path: tuple) -> Any:
        if path in self.done:
            return self.done[path]
        if path in self.active:
            cycle = " -> ".join(dotted(p) for p in (*self.active[self.active.index(path):], path))
            raise self.error(self.active[-1], f"interpolation cycle: {cycle}", "break the cycle of ${...} references")
        node = self.node(path)
        interpolated = isinstance(node, str) and "${" in node
        weight = _FRAMES["container"] if isinstance(node, (dict, list)) else _FRAMES["string"] if interpolated else 0
        with self.stacked(path, weight):
            self.active.append(path)
            if isinstance(node, dict):
                value: Any = {key: self.resolve((*path, key)) for key in node}
            elif isinstance(node, list):
                value = [self.resolve((*path, i)) for i in range(len(node))]
            else:
                value = _Reader(self, node, path).value() if interpolated else node
            self.active.pop()
        self.done[path] = value
        return value

    def node(self, path: tuple) -> Any:
        node: Any = self.root
        for part in path:
            node = node[part]
        return node

    # -- references -----------------------------------------------------------------------
    def select(self, dots: int, keys: list[str], path: tuple, token: str) -> Any:
        """The resolved value at ``keys`` (relative to the parent of ``path`` when ``dots``), or _MISSING."""
        if dots > len(path):
            raise self.error(path, f"'{token}' goes {dots} levels up from '{dotted(path)}', above the top of the infra",
                             "use fewer leading dots, or an absolute key")
        start: tuple = path[: len(path) - dots] if dots else ()
        node = self.node(start)
        at: tuple | None = start
        for key in keys:
            if at is not None and isinstance(node, str) and "${" in node:
                node, at = self.resolve(at), None  # continue inside the value it resolves to
            step: str | int = key
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isascii() and key.isdigit() and int(key) < len(node):
                step = int(key)
                node = node[step]
            else:
                return _MISSING
            at = None if at is None else (*at, step)
        return node if at is None else self.resolve(at)

    def reference(self, dots: int, keys: list[str], token: str, path: tuple) -> Any:
        found = self.select(dots, keys, path, token)
        target = ".".join(keys) if not dots else dotted((*path[: len(path) - dots], *keys))
        if found is _MISSING:
            hint = "reference an existing infra key, or escape shell variables as \\${VAR}"
            raise self.error(path, f"'{token}' refers to a missing key '{target}'", hint)
        if found == "???":
            raise self.error(path, f"'{token}' refers to '{target}', which is '???' (a value still to be set)",
                             f"set {target}")
        return self.copy(found, path)

    def copy(self, value: Any, path: tuple) -> Any:
        """``value`` for another key: containers copied; every value and character counted."""
        values, chars, depth = _size(value)
        if len(path) + depth > MAX_DEPTH:
            raise self.error(path, f"the value it refers to would nest more than {MAX_DEPTH} levels deep here",
                             "flatten the structure")
        self.charge(path, values, chars)
        return copy.deepcopy(value) if isinstance(value, (dict, list)) else value

    def charge(self, path: tuple, values: int, chars: int) -> None:
        self.values += values
        self.chars += chars
        if self.values > MAX_VALUES or self.chars > MAX_CHARS:
            what = f"{MAX_VALUES} values" if self.values > MAX_VALUES else f"{MAX_CHARS} characters"
            raise self.error(path, f"interpolation builds more than {what}",
                             "a key referenced several times by keys that are themselves referenced several times "
                             "grows exponentially: reference it fewer times")

    def embed(self, value: Any, token: str, path: tuple) -> str:
        """``value`` as part of a text."""
        if isinstance(value, (dict, list)):
            raise self.error(path, f"'{token}' is a {type(value).__name__} and cannot be embedded in a string",
                             "reference it as the whole value")
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)

    def text(self, arg: Arg, token: str, path: tuple) -> str:
        """An argument as text: a literal as written, else its value embedded."""
        value, literal = arg
        return literal if literal is not None else value if isinstance(value, str) else self.embed(value, token, path)

    @contextmanager
    def stacked(self, path: tuple, weight: int) -> Iterator[None]:
        """Count ``weight`` frames while resolving inside; refuse past ``MAX_FRAMES``."""
        self.frames += weight
        try:
            if self.frames > MAX_FRAMES:
                start = f" (resolving '{dotted(self.active[0])}')" if self.active and self.active[0] != path else ""
                raise self.error(path, f"interpolations and references nest too deeply{start}",
                                 "refer to values directly rather than through long chains of references")
            yield
        finally:
            self.frames -= weight

    # -- resolvers ------------------------------------------------------------------------
    def call(self, name: str, args: list[Arg], token: str, path: tuple) -> Any:
        found = _RESOLVERS.get(name)
        if found is None:
            raise self.error(path, f"unknown resolver '{name}' in '{token}'", _HINT)
        method, low, high, usage = found
        if not low <= len(args) <= high:
            count = "no arguments" if high == 0 else f"{low} to {high} arguments" if high > low else f"{low} arguments"
            raise self.error(path, f"'{token}' takes {count}, got {len(args)}", f"write {usage}")
        return method(self, args, token, path)

    def _user(self, args: list[Arg], token: str, path: tuple) -> str:
        return user_name(self.env)

    def _env(self, args: list[Arg], token: str, path: tuple) -> str:
        name = self.text(args[0], token, path).strip() if args else ""
        if not name:
            raise self.error(path, f"'{token}' needs a variable name", "write ${env:NAME} or ${env:NAME,default}")
        if name in self.env:
            return self.env[name]
        if len(args) > 1:
            return ",".join(self.text(arg, token, path) for arg in args[1:])
        raise self.error(path, f"environment variable '{name}' is not set (from '{token}')",
                         f"export {name}, or give a default: ${{env:{name},DEFAULT}}")

    def _oc_env(self, args: list[Arg], token: str, path: tuple) -> str | None:
        name = self.text(args[0], token, path)
        if name in self.env:
            return self.env[name]
        if len(args) > 1:
            default = args[1][0]
            return None if default is None else str(default)
        raise self.error(path, f"environment variable '{name}' is not set (from '{token}')",
                         f"export {name}, or give a default: ${{oc.env:{name},DEFAULT}}")

    def _oc_select(self, args: list[Arg], token: str, path: tuple) -> Any:
        found = self.select(*self.key_arg(args[0], token, path), path, token)
        if found is _MISSING or found == "???":
            return args[1][0] if len(args) > 1 else None
        return self.copy(found, path)

    def _oc_decode(self, args: list[Arg], token: str, path: tuple) -> Any:
        text = args[0][0]
        if text is None:
            return None
        if not isinstance(text, str):
            raise self.error(path, f"'{token}' decodes text, got {describe(text)}", "pass a string")
        return _Reader(self, text, path).element_only()

    def _oc_dict(self, args: list[Arg], token: str, path: tuple) -> dict:
        found = self.select(*self.key_arg(args[0], token, path), path, token)
        if not isinstance(found, dict):
            problem = "refers to a missing key" if found is _MISSING else f"refers to {describe(found)}, not a mapping"
            raise self.error(path, f"'{token}' {problem}", "name a mapping in the infra")
        return found

    def _oc_dict_keys(self, args: list[Arg], token: str, path: tuple) -> list:
        return self.copy(list(self._oc_dict(args, token, path)), path)

    def _oc_dict_values(self, args: list[Arg], token: str, path: tuple) -> list:
        return self.copy(list(self._oc_dict(args, token, path).values()), path)

    def key_arg(self, arg: Arg, token: str, path: tuple) -> tuple[int, list[str]]:
        """``(dots, keys)`` of a key given as text (``a.b``, ``.sibling``, ``a[0]``)."""
        key = arg[0]
        if not isinstance(key, str) or not key.strip("."):
            raise self.error(path, f"'{token}' needs a key, got {describe(key)}", "write a dotted key, e.g. a.b")
        rest = key.lstrip(".")
        return len(key) - len(rest), [part for part in rest.replace("[", ".").replace("]", "").split(".") if part]

    def _arith(self, name: str, args: list[Arg], token: str, path: tuple) -> int | float:
        a, b = (value for value, _ in args)
        for value in (a, b):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(path, f"'{token}': {name} takes numbers, got {describe(value)}",
                                 "give numbers (text from ${oc.env:...} becomes one with ${oc.decode:...})")
        if name == "mul":
            result = a * b
        elif name == "max":
            result = max(a, b)
        elif b == 0:
            raise self.error(path, f"'{token}' divides by zero", "divide by a number other than 0")
        else:
            result = a // b if isinstance(a, int) and isinstance(b, int) and a % b == 0 else a / b
        if isinstance(result, int) and not -INT64 <= result < INT64:
            raise self.error(path, f"'{token}' is out of the 64-bit integer range", "use smaller numbers")
        if isinstance(result, float) and not math.isfinite(result):
            raise self.error(path, f"'{token}' is not a finite number ({result})", "use smaller numbers")
        return result

    def error(self, path: tuple, problem: str, hint: str) -> ConfigError:
        return ConfigError(f"{self.provenance.label(path)}: {dotted(path)}: {problem}", hint=hint)


# name: (method, fewest and most arguments, usage)
_RESOLVERS: dict[str, tuple[Callable[..., Any], float, float, str]] = {
    "user": (_Resolver._user, 0, 0, "${user:}"),
    "env": (_Resolver._env, 0, math.inf, "${env:NAME} or ${env:NAME,default}"),
    "oc.env": (_Resolver._oc_env, 1, 2, "${oc.env:NAME} or ${oc.env:NAME,default}"),
    "oc.select": (_Resolver._oc_select, 1, 2, "${oc.select:key} or ${oc.select:key,default}"),
    "oc.decode": (_Resolver._oc_decode, 1, 1, "${oc.decode:text}"),
    "oc.dict.keys": (_Resolver._oc_dict_keys, 1, 1, "${oc.dict.keys:key}"),
    "oc.dict.values": (_Resolver._oc_dict_values, 1, 1, "${oc.dict.values:key}"),
    **{name: (lambda r, args, token, path, name=name: r._arith(name, args, token, path), 2, 2, f"${{{name}:a,b}}")
       for name in ("mul", "div", "max")},
}


class _Reader:
    """One string read by OmegaConf's grammar (omegaconf/grammar/*.g4), evaluated as it is read.

    Lenient where OmegaConf refuses text it has no use for (any character in an unquoted
    argument, a quote inside one): what OmegaConf accepts reads the same.
    """

    def __init__(self, resolver: _Resolver, text: str, path: tuple):
        self.r = resolver
        self.text = text
        self.path = path
        self.pos = 0
        self.opened: list[int] = []  # where the interpolations being read start

    def value(self) -> Any:
        """The whole string: text with interpolations; one interpolation alone keeps its type."""
        text, parts, start = self.text, [], 0
        while (at := text.find("${", start)) >= 0:
            first = at
            while first > start and text[first - 1] == "\\":
                first -= 1
            slashes = at - first
            parts.append(text[start:first] + "\\" * (slashes // 2))
            if slashes % 2:  # \${ is a literal ${ (and \\\${ a backslash and a literal ${)
                parts.append("${")
                start = at + 2
                continue
            self.pos = begin = at
            value = self.interpolation()
            if begin == 0 and self.pos == len(text):
                return value
            parts.append(self.r.embed(value, text[begin:self.pos], self.path))
            start = self.pos
        parts.append(text[start:])
        return self.joined(parts)

    def element_only(self) -> Any:
        """The string as one argument (``oc.decode``): ``5`` an int, ``[1, 2]`` a list, ..."""
        value, _ = self.element(trim=False)
        if self.pos < len(self.text):
            raise self.malformed(0, "text after the value")
        return value

    # -- interpolations -------------------------------------------------------------------
    def interpolation(self) -> Any:
        """At ``${``: a reference or a resolver call, evaluated."""
        begin = self.pos
        self.opened.append(begin)
        self.pos += 2
        with self.r.stacked(self.path, _FRAMES["nested"]):
            self.skip_ws()
            dots = self.count(".")
            first, name_like = self.key_part()
            keys = [first]
            name_like = name_like and not dots
            while self.peek(".") or self.peek("["):
                if self.peek("."):
                    self.pos += 1
                    key, is_name = self.key_part(brackets=False)
                else:
                    key, is_name = self.key_part()
                    is_name = False
                keys.append(key)
                name_like = name_like and is_name
            self.skip_ws()
            if self.peek("}"):
                self.pos += 1
                self.opened.pop()
                return self.r.reference(dots, keys, self.text[begin:self.pos], self.path)
            if not (self.peek(":") and name_like):
                raise self.malformed(begin, "expected '}'")
            self.pos += 1
            args = self.sequence("}")
            self.expect("}", begin)
            self.opened.pop()
            return self.r.call(".".join(keys), args, self.text[begin:self.pos], self.path)

    def key_part(self, brackets: bool = True) -> tuple[str, bool]:
        """One key of a reference (or one part of a resolver name) and whether it can name a resolver."""
        begin = self.pos
        if brackets and self.peek("["):
            self.pos += 1
            key, _ = self.key_part(brackets=False)
            self.expect("]", begin, skip=False)
            return key, False
        if self.peek("${"):
            key = self.interpolation()
            if not isinstance(key, str):
                raise self.r.error(self.path, f"'{self.text[begin:self.pos]}' is used as a key and must give a string, "
                                   f"got {describe(key)}", "make the inner interpolation give a key name")
            return key, True
        found = _KEY.match(self.text, self.pos)
        if found is None:
            raise self.malformed(begin, "expected a key")
        self.pos = found.end()
        return found.group(), _ID.fullmatch(found.group()) is not None

    # -- resolver arguments (OmegaConf's VALUE_MODE) ----------------------------------------
    def sequence(self, close: str) -> list[Arg]:
        """Comma-separated elements up to ``close``; an element left out is ''."""
        items: list[Arg] = []
        after_comma, commas = True, False
        while True:
            self.skip_ws()
            if self.pos >= len(self.text) or self.peek(close):
                if commas and after_comma:
                    items.append(("", ""))
                return items
            if self.peek(","):
                if after_comma:
                    items.append(("", ""))
                self.pos += 1
                after_comma = commas = True
                continue
            if not after_comma:
                raise self.malformed(self.pos, f"expected ',' or '{close}'")
            items.append(self.element())
            after_comma = False

    def element(self, trim: bool = True) -> Arg:
        begin = self.pos
        if self.peek("'") or self.peek('"'):
            return self.quoted(), None
        if self.peek("[") or self.peek("{"):
            with self.r.stacked(self.path, _FRAMES["nested"]):
                self.pos += 1
                if self.text[begin] == "[":
                    items = [value for value, _ in self.sequence("]")]
                    self.expect("]", begin)
                    return items, None
                return self.mapping(begin), None
        return self.primitive(trim)

    def mapping(self, begin: int) -> dict:
        result: dict = {}
        self.skip_ws()
        while not self.peek("}"):
            found = _DICT_KEY.match(self.text, self.pos)
            if found is None or not found.group().strip():
                raise self.malformed(begin, "expected a key")
            self.pos = found.end()
            self.expect(":", begin)
            self.skip_ws()
            result[found.group().strip()] = self.element()[0]
            self.skip_ws()
            if self.peek(","):
                self.pos += 1
                self.skip_ws()
            elif not self.peek("}"):
                raise self.malformed(begin, "expected ',' or '}'")
        self.expect("}", begin)
        return result

    def primitive(self, trim: bool = True) -> Arg:
        """Unquoted text: a typed literal (``2``, ``1.5``, ``true``, ``null``), one interpolation, or text."""
        text, begin = self.text, self.pos
        pieces: list[tuple[str, Any]] = []  # ("text" | "escaped" | "value", ...)
        while self.pos < len(text) and text[self.pos] not in ",]}":
            char = text[self.pos]
            if char in "[{":
                raise self.malformed(begin, f"unexpected '{char}' (quote the argument)")
            if text.startswith("${", self.pos):
                pieces.append(("value", self.interpolation()))
            elif char == "\\" and text[self.pos + 1:self.pos + 2] in tuple(_ESCAPABLE):
                pieces.append(("escaped", text[self.pos + 1]))
                self.pos += 2
            else:
                run = _RUN.match(text, self.pos)
                end = run.end() if run else self.pos + 1
                pieces.append(("text", text[self.pos:end]))
                self.pos = end
        while trim and pieces and pieces[-1][0] == "text":  # trailing blanks belong to the ',' or the closing bracket
            stripped = pieces[-1][1].rstrip(" \t")
            if stripped:
                pieces[-1] = ("text", stripped)
                break
            pieces.pop()
        if len(pieces) == 1 and pieces[0][0] == "value":
            return pieces[0][1], None
        if pieces and all(kind == "text" for kind, _ in pieces):
            literal = "".join(part for _, part in pieces)
            return self.literal(literal, begin), literal
        token = text[begin:self.pos]
        return self.joined([self.r.embed(part, token, self.path) if kind == "value" else part
                            for kind, part in pieces]), None

    def literal(self, text: str, begin: int) -> Any:
        if _INT.fullmatch(text):
            if len(text.lstrip("+-").replace("_", "")) > 19 or not -INT64 <= int(text) < INT64:
                shown = text if len(text) <= 30 else f"{text[:12]}...{text[-12:]} ({len(text)} characters)"
                raise self.r.error(self.path, f"{shown} is out of the 64-bit integer range", "use a smaller number")
            return int(text)
        if _FLOAT.fullmatch(text):
            return float(text)
        return _WORDS.get(text.lower(), text)

    def quoted(self) -> str:
        """'text' or "text": interpolations allowed, \\' (\\") escapes the quote."""
        text, begin, quote = self.text, self.pos, self.text[self.pos]
        self.pos += 1
        parts: list[str] = []
        while True:
            if self.pos >= len(text):
                raise self.malformed(begin, "unterminated quote")
            char = text[self.pos]
            if char == quote:
                self.pos += 1
                return self.joined(parts)
            if text.startswith("${", self.pos):
                start = self.pos
                parts.append(self.r.embed(self.interpolation(), text[start:self.pos], self.path))
            elif char == "\\":
                run = _BACKSLASHES.match(text, self.pos)
                assert run is not None  # text[self.pos] is a backslash
                slashes, after = len(run.group()), run.end()
                if text.startswith("${", after) or text.startswith(quote, after):
                    parts.append("\\" * (slashes // 2))
                    if slashes % 2:  # an escaped ${ or quote is literal
                        parts.append("${" if text.startswith("${", after) else quote)
                        after += 2 if text.startswith("${", after) else 1
                    self.pos = after
                else:
                    parts.append(run.group())
                    self.pos = after
            else:
                run = _QUOTED_RUN[quote].match(text, self.pos)
                end = run.end() if run else self.pos + 1  # a '$' that opens nothing
                parts.append(text[self.pos:end])
                self.pos = end

    # -- scanning -------------------------------------------------------------------------
    def joined(self, parts: list[str]) -> str:
        result = "".join(parts)
        self.r.charge(self.path, 0, len(result))
        return result

    def peek(self, token: str) -> bool:
        return self.text.startswith(token, self.pos)

    def count(self, char: str) -> int:
        begin = self.pos
        while self.peek(char):
            self.pos += 1
        return self.pos - begin

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def expect(self, token: str, begin: int, skip: bool = True) -> None:
        if skip:
            self.skip_ws()
        if not self.peek(token):
            raise self.malformed(begin, f"expected '{token}'")
        self.pos += len(token)

    def malformed(self, begin: int, what: str) -> ConfigError:
        begin = self.opened[0] if self.opened else begin
        shown = self.text[begin:begin + 80] + ("..." if len(self.text) > begin + 80 else "")
        where = "the end" if self.pos >= len(self.text) else f"character {self.pos - begin + 1}"
        return self.r.error(self.path, f"malformed interpolation {shown!r}: {what} at {where}", _HINT)


def _size(value: Any) -> tuple[int, int, int]:
    """(values, characters, nesting levels) of ``value``."""
    if isinstance(value, dict):
        sizes = [_size(v) for v in value.values()] + [(0, len(str(k)), 0) for k in value]
    elif isinstance(value, list):
        sizes = [_size(v) for v in value]
    else:
        return 1, len(value) if isinstance(value, str) else 0, 0
    return 1 + sum(s[0] for s in sizes), sum(s[1] for s in sizes), 1 + max((s[2] for s in sizes), default=0)
