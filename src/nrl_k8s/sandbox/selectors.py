"""Label and field selectors as the Kubernetes API server parses and applies them.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists),
``!k`` (does not exist), comma-separated (AND). Field selectors: ``path=v``, ``path==v``,
``path!=v`` on any dotted path of the object (``metadata.name``, ``involvedObject.name``, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s+\((?P<values>[^)]*)\)\s*$")
_EQ_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_KEY})\s*$")


class SelectorError(ValueError):
    """A selector string that does not parse."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # "!=" and "notin"


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse a label selector string; raise SelectorError when it is malformed."""
    requirements = []
    for part in _split_top_level(text or ""):
        if m := _SET_RE.match(part):
            values = tuple(v.strip() for v in m["values"].split(",") if v.strip())
            requirements.append(Requirement(m["key"], m["op"], values))
        elif m := _EQ_RE.match(part):
            op = "!=" if m["op"] == "!=" else "="
            requirements.append(Requirement(m["key"], op, (m["value"],)))
        elif m := _EXISTS_RE.match(part):
            requirements.append(Requirement(m["key"], "!" if m["neg"] else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
    return requirements


def _lookup(obj: dict, path: str) -> str | None:
    current: object = obj
    for key in path.split("."):
        if not isinstance(current, dict) or key not in current:
            return None
        current = current[key]
    if isinstance(current, bool):
        return str(current).lower()
    return None if isinstance(current, (dict, list)) or current is None else str(current)


def parse_field_selector(text: str | None) -> list[tuple[str, str, str]]:
    """Parse a field selector into ``(path, op, value)`` triples, op ``=`` or ``!=``."""
    terms = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise SelectorError(f"invalid selector: {part.strip()!r}; can't understand it")
        terms.append((m[1], "!=" if m[2] == "!=" else "=", m[3]))
    return terms


def matcher(label_selector: str | None, field_selector: str | None) -> Callable[[dict], bool]:
    """Return a predicate on objects for both selectors (raises SelectorError when malformed)."""
    requirements = parse_label_selector(label_selector)
    terms = parse_field_selector(field_selector)

    def matches(obj: dict) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if not all(r.matches(labels) for r in requirements):
            return False
        for path, op, value in terms:
            actual = _lookup(obj, path) or ""
            if (actual == value) != (op == "="):
                return False
        return True

    return matches
