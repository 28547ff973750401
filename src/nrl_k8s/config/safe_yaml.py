"""The one YAML reader for every file nrl-k8s reads (recipe, infra, defaults, DGD manifests,
kubeconfig) and for override values.

Bad input is refused fast and in bounded memory with one ConfigError,
``<file>:<line>: <key path>: <problem>``, and a hint:

- only regular files: a device, FIFO or socket is refused without being opened for long, a
  symlink loop is named; at most ``MAX_BYTES`` are read; the text is UTF-8 without control
  characters (a NUL byte is located at its key);
- at most ``MAX_NODES`` values counting every alias expansion, so an alias bomb is refused while
  it is parsed; nesting at most ``MAX_DEPTH`` levels;
- mapping keys are strings and unique (YAML itself lets the later key win silently);
- only JSON-like values: strings, 64-bit integers, finite floats as written (``.nan``/``.inf``
  stay allowed), booleans, null, lists, mappings. Dates stay strings, as Kubernetes reads them;
  ``!!set``, ``!!binary`` and other tags are refused.

libyaml does the parsing when PyYAML has it; the composing (where the limits are kept) is ours.
"""

from __future__ import annotations

import errno
import math
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from nrl_k8s.errors import ConfigError, dotted


class _PyEvents(Reader, Scanner, Parser):
    """The pure-Python parser: the same events as libyaml's, with no limits of its own."""

    def __init__(self, stream: str):
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)


try:
    from yaml._yaml import CParser as _Events
except ImportError:  # PyYAML built without libyaml
    _Events = _PyEvents


MAX_BYTES = 1 << 20  # 1 MiB: recipes and manifests are a few KiB (the recipe must fit in a 120 KB entrypoint)
MAX_NODES = 50_000  # values after alias expansion; a large NeMo-RL recipe has about a thousand
MAX_DEPTH = 64  # a RayCluster pod affinity term is about 15 levels below the infra's top
INT64 = 1 << 63  # a value is an int64 when -INT64 <= value < INT64 (interpolate checks it too)

_YAML = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = (_YAML + t for t in ("str", "int", "float", "bool", "null"))
SEQ, MAP, MERGE, TIMESTAMP = (_YAML + t for t in ("seq", "map", "merge", "timestamp"))
_SCALAR_TAGS = {STR, INT, FLOAT, BOOL, NULL, MERGE}  # MERGE: the `<<` key
#: a sequence or mapping node
N = TypeVar("N", SequenceNode, MappingNode)

_KINDS = {INT: "an integer", FLOAT: "a number", BOOL: "a boolean", NULL: "null"}
# YAML's printable set, negated: C0 controls but tab/LF/CR, DEL, C1 controls but NEL, non-characters.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ufffe\uffff]")
_FILE_TYPES = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
               stat.S_IFSOCK: "a socket"}


def resolve(path: str | Path) -> Path:
    """``path`` made absolute with symlinks resolved; a loop or a bad name is a ConfigError."""
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError) as err:  # RuntimeError: symlink loop (Python < 3.13), no home directory
        raise ConfigError(f"{_short(path)}: cannot resolve the path: {_reason(err)}", hint="fix the path") from None


def read_text(path: str | Path, *, max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``, read in bounded memory."""
    shown = _short(path)
    try:
        mode = os.stat(path).st_mode
        _regular(mode, shown)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # never block, even on a swapped-in FIFO
        with os.fdopen(fd, "rb") as handle:
            _regular(os.fstat(fd).st_mode, shown)
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise ConfigError(
            f"{shown}: file not found", hint="check the path (relative paths are resolved from the current directory)"
        ) from None
    except OSError as err:
        raise ConfigError(
            f"{shown}: cannot read file: {_reason(err)}", hint="check the path and the file's permissions"
        ) from None
    if len(data) > max_bytes:
        raise ConfigError(
            f"{shown}: file is larger than {max_bytes // 1024} KiB",
            hint="nrl-k8s reads YAML files of at most that size; is this the right file?",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ConfigError(
            f"{shown}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x})", hint="save the file as UTF-8"
        ) from None


def load_file(path: str | Path, *, max_bytes: int = MAX_BYTES) -> Any:
    """The single YAML document of ``path`` (None when the file is empty)."""
    return parse(read_text(path, max_bytes=max_bytes), _short(path))


def load_documents(path: str | Path) -> list:
    """Every YAML document of ``path`` (the node budget is shared by all of them)."""
    return parse(read_text(path), _short(path), documents=True)


def parse(text: str, source: str, *, documents: bool = False, lines: bool = True) -> Any:
    """Parse ``text``; ``source`` names it in errors (a file path, or ``override '...'`` with ``lines=False``)."""
    bad = _UNPRINTABLE.search(text)
    bad_at = None
    if bad is not None:
        line = text.count("\n", 0, bad.start())
        bad_at = (line, bad.start() - (text.rfind("\n", 0, bad.start()) + 1), ord(bad.group()))
        text = _UNPRINTABLE.sub("\ufffd", text)  # keep parsing to find the key it is in
    loader = _Loader(text, source, bad_at, lines)
    try:
        data = _read(loader, documents)
    except yaml.MarkedYAMLError as err:
        if _Events is not _PyEvents:
            # libyaml may stop at limits of its own (a nesting depth, since 0.2.5) before ours
            # are reached; the pure-Python parser has none, so ours name the key instead.
            _our_limits(text, source, bad_at, lines, documents)
        mark = err.problem_mark or err.context_mark
        problem = err.problem or err.context or "invalid YAML"
        raise loader.fail(mark, f"invalid YAML: {problem}", "fix the YAML syntax at that line") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: invalid YAML: {_one_line(err)}", hint="fix the YAML syntax") from None
    finally:
        loader.dispose()
    if bad_at is not None:  # outside any value, e.g. in a comment
        raise loader.fail(None, _bad_char(bad_at[2]), _BAD_CHAR_HINT, at_line=bad_at[0])
    return data


def _read(loader: Any, documents: bool) -> Any:
    return list(loader.documents()) if documents else loader.get_single_data()


def _our_limits(text: str, source: str, bad_at: tuple[int, int, int] | None, lines: bool, documents: bool) -> None:
    """Raise the ConfigError this project's own limits give for ``text``, if any."""
    loader = _PyLoader(text, source, bad_at, lines)
    try:
        _read(loader, documents)
    except yaml.YAMLError:
        pass
    finally:
        loader.dispose()


_BAD_CHAR_HINT = "remove it (is this a binary file?)"


def _bad_char(code: int) -> str:
    return "contains a NUL byte" if code == 0 else f"contains the control character U+{code:04X}"


class _Resolver(Resolver):
    """YAML 1.1 implicit types without timestamps: dates stay strings, as in Kubernetes."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != TIMESTAMP]
        for first, resolvers in Resolver.yaml_implicit_resolvers.items()
    }


class _Composer:
    """Builds the node graph from parser events, keeping the limits and the key path for errors."""

    def __init__(self, source: str, bad_at: tuple[int, int, int] | None, lines: bool):
        self.source = source
        self.lines = lines
        self.bad_at = bad_at
        self.anchors: dict[str, Any] = {}
        self.sizes: dict[str, int] = {}  # anchor -> values it expands to, once composed
        self.path: list = []
        self.count = 0

    if TYPE_CHECKING:  # provided by the parser, constructor and resolver it is mixed with (_Loader)
        def check_event(self, *choices: type) -> bool: ...
        def peek_event(self) -> Any: ...
        def get_event(self) -> Any: ...
        def check_data(self) -> bool: ...
        def get_data(self) -> Any: ...
        def resolve(self, kind: type, value: Any, implicit: Any) -> str: ...
        def construct_yaml_int(self, node: ScalarNode) -> int: ...
        def construct_yaml_float(self, node: ScalarNode) -> float: ...

    def fail(
        self, mark: Any, problem: str, hint: str, *, path: list | None = None, at_line: int | None = None
    ) -> ConfigError:
        line = mark.line if mark is not None else at_line
        where = self.source if line is None or not self.lines else f"{self.source}:{line + 1}"
        keys = dotted(self.path if path is None else path)
        return ConfigError(f"{where}: {keys}: {problem}" if keys else f"{where}: {problem}", hint=hint)

    # The interface BaseConstructor expects.
    def check_node(self) -> bool:
        if self.check_event(StreamStartEvent):
            self.get_event()
        return not self.check_event(StreamEndEvent)

    def get_node(self) -> Any:
        return None if self.check_event(StreamEndEvent) else self.compose_document()

    def get_single_node(self) -> Any:
        self.get_event()
        node = None if self.check_event(StreamEndEvent) else self.compose_document()
        if not self.check_event(StreamEndEvent):
            raise self.fail(self.peek_event().start_mark, "expected one YAML document, found a second",
                            "remove the '---' separator or the second document", path=[])
        self.get_event()
        return node

    def documents(self):
        while self.check_data():
            yield self.get_data()

    def compose_document(self) -> Any:
        self.get_event()
        node = self.compose_node()
        self.get_event()
        self.anchors, self.sizes = {}, {}
        return node

    def compose_node(self) -> Any:
        if self.check_event(AliasEvent):
            event = self.get_event()
            if event.anchor not in self.anchors:
                raise self.fail(event.start_mark, f"alias *{event.anchor} has no anchor &{event.anchor} before it",
                                "define the anchor before using the alias")
            if event.anchor not in self.sizes:
                raise self.fail(event.start_mark, f"alias *{event.anchor} refers to a value that contains it",
                                "a value cannot include itself")
            self._count(self.sizes[event.anchor], event.start_mark)
            return self.anchors[event.anchor]
        event = self.peek_event()
        if len(self.path) >= MAX_DEPTH:
            raise self.fail(event.start_mark, f"nested more than {MAX_DEPTH} levels deep", "flatten the structure")
        if event.anchor in self.anchors:
            raise self.fail(event.start_mark, f"anchor &{event.anchor} is defined twice", "rename one of the anchors")
        before = self.count
        if isinstance(event, ScalarEvent):
            node = self._scalar()
        elif isinstance(event, SequenceStartEvent):
            node = self._sequence()
        else:
            node = self._mapping()
        if event.anchor is not None:
            self.anchors[event.anchor] = node
            self.sizes[event.anchor] = self.count - before
        return node

    def _count(self, values: int, mark: Any) -> None:
        self.count += values
        if self.count > MAX_NODES:
            raise self.fail(mark, f"more than {MAX_NODES} values (counting every alias expansion)",
                            "nrl-k8s reads configs of at most that size; use fewer aliases or a smaller file")

    def _tag(self, event: Any, kind: type, allowed: set[str]) -> str:
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolve(kind, getattr(event, "value", None), event.implicit)
        if tag not in allowed:
            raise self.fail(event.start_mark, f"YAML tag {tag.replace(_YAML, '!!')} is not supported",
                            "use plain strings, numbers, booleans, null, lists and mappings")
        return tag

    def _scalar(self) -> ScalarNode:
        event = self.get_event()
        node = ScalarNode(self._tag(event, ScalarNode, _SCALAR_TAGS), event.value, event.start_mark, event.end_mark,
                          style=event.style)
        self._count(1, event.start_mark)
        if self.bad_at is not None:
            start, end, at = node.start_mark, node.end_mark, self.bad_at[:2]
            if (start.line, start.column) <= at < (end.line, end.column):
                raise self.fail(start, _bad_char(self.bad_at[2]), _BAD_CHAR_HINT)
        if node.tag in (INT, FLOAT):
            self._check_number(node)
        return node

    def _check_number(self, node: ScalarNode) -> None:
        shown = node.value if len(node.value) <= 24 else f"{node.value[:20]}... ({len(node.value)} characters)"
        if node.tag == INT:
            in_range = len(node.value) <= 40 and -INT64 <= self.construct_yaml_int(node) < INT64
        else:
            in_range = not math.isinf(self.construct_yaml_float(node)) or "inf" in node.value.lower()
        if not in_range:
            raise self.fail(node.start_mark, f"number {shown} is out of range", "use a number that fits in 64 bits")

    def _collection(self, kind: type[N], tag: str) -> N:
        """The node a sequence or mapping starts, counted, and known by its anchor (an alias to
        it from inside is refused: it has no size yet)."""
        start = self.get_event()
        node = kind(self._tag(start, kind, {tag}), [], start.start_mark, None, flow_style=start.flow_style)
        self._count(1, start.start_mark)
        if start.anchor is not None:
            self.anchors[start.anchor] = node
        return node

    def _sequence(self) -> SequenceNode:
        node = self._collection(SequenceNode, SEQ)
        while not self.check_event(SequenceEndEvent):
            self.path.append(len(node.value))
            node.value.append(self.compose_node())
            self.path.pop()
        node.end_mark = self.get_event().end_mark
        return node

    def _mapping(self) -> MappingNode:
        node = self._collection(MappingNode, MAP)
        lines: dict[str, int] = {}
        while not self.check_event(MappingEndEvent):
            key = self._key(self.compose_node(), lines)
            self.path.append(key.value)
            node.value.append((key, self.compose_node()))
            self.path.pop()
        node.end_mark = self.get_event().end_mark
        return node

    def _key(self, key: Any, lines: dict[str, int]) -> Any:
        if not isinstance(key, ScalarNode):
            raise self.fail(key.start_mark, "a key is a list or mapping, not a string", "keys must be plain strings")
        if key.tag not in (STR, MERGE):
            raise self.fail(key.start_mark, f"key {key.value or '(empty)'} is {_KINDS[key.tag]}, not a string",
                            f'quote the key: "{key.value}": ...')
        path = [*self.path, key.value]
        if key.value in lines:
            raise self.fail(key.start_mark, f"duplicate key (first set on line {lines[key.value]})",
                            "remove one of them: YAML would silently keep only the last", path=path)
        lines[key.value] = key.start_mark.line + 1
        return key


def _set_up(loader: Any, events: type[Any], text: str, source: str, bad_at: tuple[int, int, int] | None,
            lines: bool) -> None:
    """A loader's set-up, over the events of its parser (libyaml's or the pure-Python one)."""
    events.__init__(loader, text)
    _Composer.__init__(loader, source, bad_at, lines)
    SafeConstructor.__init__(loader)
    _Resolver.__init__(loader)


class _Loader(_Composer, _Events, SafeConstructor, _Resolver):
    def __init__(self, *args: Any):
        _set_up(self, _Events, *args)


class _PyLoader(_Composer, _PyEvents, SafeConstructor, _Resolver):
    def __init__(self, *args: Any):
        _set_up(self, _PyEvents, *args)


def file_kind(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is when it is not a regular file ("a FIFO", ...), else None."""
    if stat.S_ISREG(mode):
        return None
    return "a directory" if stat.S_ISDIR(mode) else _FILE_TYPES.get(stat.S_IFMT(mode), "not a regular file")


def _regular(mode: int, shown: str) -> None:
    if stat.S_ISDIR(mode):
        raise ConfigError(f"{shown}: is a directory, expected a YAML file", hint="pass the path of a .yaml file")
    if not stat.S_ISREG(mode):
        kind = _FILE_TYPES.get(stat.S_IFMT(mode), "not a regular file")
        raise ConfigError(f"{shown}: is {kind}, expected a regular YAML file", hint="pass the path of a .yaml file")


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError):
        return "symlink loop" if err.errno == errno.ELOOP else (err.strerror or str(err))
    return "symlink loop" if "loop" in str(err).lower() else str(err)


def _short(path: str | Path, limit: int = 200) -> str:
    """A path for messages: long ones are cut in the middle."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]}"


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())
