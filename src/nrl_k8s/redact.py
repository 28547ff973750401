"""The one redaction rule for everything nrl-k8s prints or writes.

Names. A name is split into words at ``_ - . /``, spaces and camelCase humps (``hfToken`` →
hf, token; ``WANDB_API_KEY`` → wandb, api, key). It looks secret when a word is a secret
word (token, secret, password, passwd, pwd, pass, passphrase, apikey, pat, bearer, cookie,
credential(s), creds, auth, authorization, private, jwt, privatekey, secretkey, accesskey) or
ends in a long one (``ACCESSTOKEN``, ``CLIENTSECRET``), or when ``key`` comes with another
word (``API_KEY``; a bare ``key`` is how Kubernetes names selector, toleration and key-ref
fields). It does not look secret when it names or identifies a secret instead of holding one:
its last word is name/ref/id (``secretName``, ``pad_token_id``) or it has the word ``from``
(``envFromSecret``); nor for tokenizer vocabulary (``eos_token``, ``pad_token``). So
TOKENIZERS_PARALLELISM, MONKEY, KEYBOARD_LAYOUT, PATH and PATCH are not secret.

Objects (``redact``): scalar values under a secret-looking key (any value in an environment
mapping or ``{name, value}`` list, strings and numbers elsewhere), every value of a
Secret's ``data``/``stringData``, and the argument after a secret-looking ``--flag`` in a
list of strings. Text (``redact_text``, also every string inside objects): ``NAME=value``
(shell assignments and ``a.b.NAME=value`` overrides; inside a quoted string the value ends with
it), ``--flag value`` / ``--flag=value``, ``"name": "value"``, ``name: 'value'`` and unquoted
YAML ``name: value`` (the value ending its line, or in a flow mapping), ``Authorization: <scheme>
value``, ``Bearer value``, the user info of ``scheme://user:password@host`` and
``scheme://token@host``, and values whose shape alone says they are credentials (``hf_…``,
``ghp_…``, ``sk-…``, ``nvapi-…``, ``AKIA…``). A value that only refers to a variable
(``$HF_TOKEN``, ``${env:HF_TOKEN}``) is left alone.

Values. Whatever a line looks like, a value nrl-k8s knows is secret is replaced wherever it
appears (a driver that echoes its token, a recipe line ``password: ...``): ``remember`` adds the
values under secret-looking names of a config (the infra's envs, the recipe), ``remember_values``
the contents of the Secrets a run's pods read (``driver_log.remember_pod_secrets``), each line of
a multi-line value on its own as well. A run record keeps only salted digests of them (``digests``);
``remember_digests`` hides a value so described wherever it stands as a word, or a part of one
between ``= : , ; @`` and brackets (``logs`` of a recorded run, no run config given).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

REDACTED = "<redacted>"
# Keys whose value is an environment: a {NAME: value} mapping or a [{name, value}] list.
ENV_KEYS = frozenset({"env", "envs", "extra_env", "env_vars"})

_SECRET_WORDS = frozenset({
    "token", "secret", "secrets", "password", "passwords", "passwd", "pwd", "pass", "passphrase",
    "apikey", "pat", "bearer", "cookie", "cookies", "credential", "credentials", "creds", "auth",
    "authorization", "private", "jwt", "privatekey", "secretkey", "accesskey",
})  # fmt: skip
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "apikey", "cookie", "credentials")
_REFERENCE_LAST = frozenset({"name", "names", "ref", "refs", "id", "ids"})
_TOKENIZER_WORDS = frozenset({"pad", "eos", "bos", "unk", "sep", "cls", "mask"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

_QUOTED = r"'[^']*'|\"(?:[^\"\\]|\\.)*\""
# a variable's value, not one written out: $NAME, ${NAME}, ${env:NAME}, $(NAME) (Kubernetes expands
# it in a container's command and args; in a shell, $(...) is what a command prints)
_REFERENCE = re.compile(r"[\"']?\$(?:\{[^}]*\}|\([^()]*\)|\w+)[\"']?")
# An unquoted YAML value: one word that ends its line (a comment may follow) or is followed by
# flow punctuation (``{A: v, B: w}``), so prose after a key (``HF_TOKEN: expected a string``) is
# not taken for one; not a YAML block/flow start nor an Authorization scheme (its own rule)
_BARE = r"(?![\[{|>&*!]|(?i:bearer|basic|digest|token)\s)\S+?(?=[,}\]]+(?:\s|$)|[ \t]*(?:[ \t]#|$))"
# Values whose shape alone says they are credentials (Hugging Face, GitHub, GitLab, OpenAI and
# Anthropic, NVIDIA NGC, Slack, AWS access key ids), wherever they stand
_TOKEN_SHAPES = (r"hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{40,}|glpat-[\w-]{20,}"
                 r"|sk-(?:proj-|ant-)?[\w-]{32,}|nvapi-[\w-]{32,}|xox[abposr]-[\w-]{10,}|AKIA[0-9A-Z]{16}")
_TEXT_RULES = [
    # scheme://user:password@host (the password); scheme://token@host (user info without one: whole)
    re.compile(r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@'\"]*:)(?P<value>[^\s/?#@'\"]+)(?=@)"),
    re.compile(r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<value>[^\s:/?#@'\"<>]+)(?=@)"),
    # Authorization: [scheme] value, then any Bearer value
    re.compile(r"(?i)(?P<keep>\bauthorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?)"
               r"(?P<value>[^\s\"',;]+)"),
    re.compile(r"(?i)(?P<keep>\bbearer\s+)(?P<value>[^\s\"',;]+)"),
    # --flag value | --flag=value
    re.compile(rf"(?P<keep>(?<![\w-])--(?P<name>[A-Za-z][\w-]*)(?:=|[ \t]+))"
               rf"(?P<value>{_QUOTED}|\$\([^()\s]*\)|[^\s'\"-][^\s'\";&|)]*|(?<==)[^\s'\";&|)]+)"),
    # "name": "value" | "name":123 (quoted name) | name: value, quoted or not (a bare name needs the
    # space YAML needs, so a file:line like ``infra_key.yaml:6:`` is not taken for one)
    re.compile(rf"(?P<keep>(?P<q>[\"'])(?P<name>[A-Za-z_][\w.-]*)(?P=q)\s*:\s*)(?P<value>{_QUOTED}|-?\d[\w.+-]*)"),
    re.compile(rf"(?P<keep>(?<![\w./-])(?P<name>[A-Za-z_][\w.-]*):[ \t]+)(?P<value>{_QUOTED}|{_BARE}|-?\d[\w.+-]*)",
               re.MULTILINE),
    # [export] NAME=value, a.b.NAME=value; inside a quoted string the value ends with the string
    # (``echo "X_TOKEN=$X_TOKEN" && echo ok`` keeps its rest)
    re.compile(rf"(?P<keep>(?:^|(?<=[\s;&|(`{{\[,+?])|(?<=(?P<oq>[\"'])))(?:export\s+)?(?P<name>[A-Za-z_][\w.]*)=)"
               rf"(?P<value>(?(oq)(?:(?!(?P=oq))[^\n])+|(?:{_QUOTED}|\$\([^()\n]*\)|[^\s;&|'\"()]+)+))", re.MULTILINE),
    re.compile(rf"(?P<keep>)(?P<value>\b(?:{_TOKEN_SHAPES})\b)"),
]


def words(name: str) -> list[str]:
    """``name`` split at separators and camelCase humps, lower-cased."""
    return [w.lower() for w in _WORD.findall(name)]


def is_secret(name: str) -> bool:
    """Whether a name (env var, key, flag) looks like it holds a secret; see the module docstring."""
    parts = words(name)
    if not parts or parts[-1] in _REFERENCE_LAST or "from" in parts:
        return False
    for i, word in enumerate(parts):
        if word == "token" and i > 0 and parts[i - 1] in _TOKENIZER_WORDS:
            continue
        if word in _SECRET_WORDS or word.endswith(_SECRET_SUFFIXES) or (word in ("key", "keys") and len(parts) > 1):
            return True
    return False


def redact(obj: Any) -> Any:
    """A deep copy of ``obj`` with every secret value replaced by ``<redacted>``."""
    return _walk(obj, in_env=False)


_KNOWN: set[str] = set()  # secret values this process has seen (``remember``)
MIN_KNOWN = 4  # shorter values (a "1", "true") are not worth hiding and would garble text


def remember(obj: Any) -> None:
    """Add every value under a secret-looking name in ``obj`` (a config, a recipe) to the values
    redacted wherever they appear."""
    if isinstance(obj, dict):
        if "name" in obj and "value" in obj and is_secret(str(obj["name"])):
            _know(obj["value"])
        for key, value in obj.items():
            if is_secret(str(key)) and not isinstance(value, (dict, list)):
                _know(value)
            else:
                remember(value)
    elif isinstance(obj, list):
        for item in obj:
            remember(item)


def remember_values(values: Iterable[Any]) -> None:
    """Add each of ``values`` (a Secret's contents) to the values redacted wherever they appear."""
    for value in values:
        _know(value)


def _know(value: Any) -> None:
    text = "" if value is None or isinstance(value, bool) else str(value)
    # each line of a multi-line value too (a key file): a log is redacted a line at a time
    for part in {text, *text.splitlines()}:
        if len(part.strip()) >= MIN_KNOWN and not _REFERENCE.fullmatch(part):
            _KNOWN.add(part)


_DIGESTS: dict[bytes, set[str]] = {}  # salt -> digests of secret values (``remember_digests``)
_WORD_RUN = re.compile(r"[^\s'\"`<>]+")  # where a value could stand: a run of text without spaces or quotes
_WORD_PART = re.compile(r"[^=:,;@()\[\]{}]+")  # and each part of one (``HF_TOKEN=value``, ``{"k":value}``)


def digests() -> dict:
    """Salted digests of the values remembered so far, to keep instead of the values (a run record):
    ``remember_digests`` hides them again wherever they stand as a word or a part of one."""
    salt = os.urandom(16)
    return {"salt": salt.hex(), "sha256": sorted({_digest(salt, value) for value in _KNOWN})}


def remember_digests(found: dict | None) -> None:
    """Hide the values ``digests`` describes (a run record's) wherever they stand as a word in text."""
    if found and found.get("sha256"):
        _DIGESTS.setdefault(bytes.fromhex(found["salt"]), set()).update(found["sha256"])


def _digest(salt: bytes, value: str) -> str:
    return hashlib.sha256(salt + value.encode()).hexdigest()


def _hidden_word(word: str) -> str | None:
    """``<redacted>`` (and the sentence's end after it) when ``word`` is a value ``_DIGESTS`` describes."""
    for value in dict.fromkeys((word, word.rstrip(".!?"))):
        if any(_digest(salt, value) in known for salt, known in _DIGESTS.items()):
            return REDACTED + word[len(value):]
    return None


def _hide_digested(match: re.Match) -> str:
    word = match.group(0)
    return _hidden_word(word) or _WORD_PART.sub(lambda part: _hidden_word(part.group(0)) or part.group(0), word)


def redact_text(text: str) -> str:
    """``text`` with every secret value shape, and every remembered secret value, replaced by ``<redacted>``."""
    for rule in _TEXT_RULES:
        text = rule.sub(_replace, text)
    for value in sorted(_KNOWN, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return _WORD_RUN.sub(_hide_digested, text) if _DIGESTS else text


class LineRedactor:
    """Redacts text that arrives in pieces, whole lines at a time, so a value split across pieces
    is still found: ``feed`` returns the redacted complete lines so far, ``flush`` the rest. A
    line longer than ``max_line`` characters is let through in parts (memory stays bounded)."""

    def __init__(self, max_line: int = 1 << 20):
        self.max_line = max_line
        self._pending = ""

    def feed(self, text: str) -> str:
        self._pending += text
        cut = max(self._pending.rfind("\n"), self._pending.rfind("\r")) + 1
        if not cut and len(self._pending) > self.max_line:
            cut = len(self._pending)
        done, self._pending = self._pending[:cut], self._pending[cut:]
        return redact_text(done) if done else ""

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        return redact_text(rest) if rest else ""


def redact_lines(chunks: Iterable[str]) -> Iterator[str]:
    """Redact a stream of text chunks line by line (a value split across chunks is still found)."""
    redactor = LineRedactor()
    for chunk in chunks:
        if done := redactor.feed(chunk):
            yield done
    if rest := redactor.flush():
        yield rest


def _replace(match: re.Match) -> str:
    value = match.group("value")
    name = match.groupdict().get("name")
    if (name is not None and not is_secret(name)) or value == REDACTED or _REFERENCE.fullmatch(value):
        return match.group(0)
    quote = value[0] if value[0] in "'\"" else ""
    return f"{match.group('keep')}{quote}{REDACTED}{quote}"


def _hidden(value: Any, *, in_env: bool) -> bool:
    if value is None or value == "" or isinstance(value, (dict, list)):
        return False
    return in_env or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def _walk(obj: Any, *, in_env: bool) -> Any:
    if isinstance(obj, dict):
        if (
            in_env
            and "name" in obj
            and "value" in obj
            and is_secret(str(obj["name"]))
            and _hidden(obj["value"], in_env=True)
        ):
            return {**obj, "value": REDACTED}
        secret_object = obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1"
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if secret_object and key in ("data", "stringData") and isinstance(value, dict):
                out[key] = {k: REDACTED if _hidden(v, in_env=True) else v for k, v in value.items()}
            elif is_secret(str(key)) and _hidden(value, in_env=in_env):
                out[key] = REDACTED
            else:
                out[key] = _walk(value, in_env=str(key) in ENV_KEYS)
        return out
    if isinstance(obj, list):
        items: list[Any] = []
        for item in obj:
            last = items[-1] if items else None
            flag = last if isinstance(last, str) and last.startswith("--") and "=" not in last else None
            if flag and is_secret(flag) and isinstance(item, str) and not _REFERENCE.fullmatch(item):
                items.append(REDACTED)
            else:
                items.append(_walk(item, in_env=in_env))
        return items
    if isinstance(obj, str):
        return redact_text(obj)
    return obj
