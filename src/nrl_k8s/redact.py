"""Hide secret-looking environment values in anything we print or write.

A name is secret-looking when one of its ``_``/``-``/``.``-separated word parts is a secret
word (case-insensitive): HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, DB_PASSWORD are;
MONKEY, TOKENIZERS_PARALLELISM, KEYBOARD_LAYOUT are not. camelCase names are not split.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"
SECRET_KEY = re.compile(
    r"(?:^|[_.-])"
    r"(?:token|tokens|secret|secrets|password|passwords|passwd|pass|pwd|key|keys|apikey|"
    r"credential|credentials|auth|private)"
    r"(?:$|[_.-])",
    re.IGNORECASE,
)
# Keys whose value is an environment: a {NAME: value} mapping or a [{name, value}] list.
ENV_KEYS = frozenset({"env", "envs", "extra_env", "env_vars"})
# NAME=value in shell text (optionally after `export`); value is a shell word.
_ASSIGNMENT = re.compile(
    r"(?P<lead>(?:^|(?<=[\s;&|(]))(?:export\s+)?)"
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)="
    r"(?P<value>(?:'[^']*'|\"(?:[^\"\\]|\\.)*\"|[^\s;&|'\"()]+)+)",
    re.MULTILINE,
)


def is_secret(name: str) -> bool:
    return SECRET_KEY.search(name) is not None


def redact(obj: Any) -> Any:
    """A deep copy of ``obj`` with secret env values replaced by ``<redacted>``."""
    return _walk(obj, in_env=False)


def redact_text(text: str) -> str:
    """``text`` with secret ``NAME=value`` shell assignments redacted."""

    def sub(match: re.Match) -> str:
        if not is_secret(match.group("name")):
            return match.group(0)
        return f"{match.group('lead')}{match.group('name')}='{REDACTED}'"

    return _ASSIGNMENT.sub(sub, text)


def _walk(obj: Any, *, in_env: bool) -> Any:
    if isinstance(obj, dict):
        if in_env and "name" in obj and "value" in obj:
            if is_secret(str(obj["name"])) and obj["value"] not in (None, ""):
                return {**{k: _walk(v, in_env=False) for k, v in obj.items()}, "value": REDACTED}
        out = {}
        for key, value in obj.items():
            if in_env and _is_scalar(value) and is_secret(str(key)) and value not in (None, ""):
                out[key] = REDACTED
            else:
                out[key] = _walk(value, in_env=str(key) in ENV_KEYS)
        return out
    if isinstance(obj, list):
        return [_walk(item, in_env=in_env) for item in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None
