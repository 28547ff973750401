"""Reading YAML files, following `defaults:` inheritance chains, and deep merging.

A chain is at most ``MAX_DEFAULTS_DEPTH`` files deep and one file's chains read at most
``MAX_DEFAULTS_READS`` files (a parent listed by several files counts each time).

Infra files may wrap their body in ``infra:`` (the earlier launcher's own defaults file does):
read with ``wrapper="infra"``, each file of a chain is unwrapped on its own (see ``_unwrapped``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deepmerge import Merger

from nrl_k8s.config.safe_yaml import MAX_BYTES, resolve
from nrl_k8s.config.safe_yaml import load_file as load_yaml_file
from nrl_k8s.errors import ConfigError

# Dicts merge key by key; lists and scalars (and type mismatches) are replaced by the top layer.
MERGER = Merger([(dict, ["merge"]), (list, ["override"])], ["override"], ["override"])  # dicts merge, all else replaced

MAX_DEFAULTS_DEPTH = 16
MAX_DEFAULTS_READS = 64
MAX_PATH_CHARS = 1024

Layer = tuple[Path, dict]
"""One file's contribution: the file it came from and its mapping (`defaults:` removed)."""


def load_mapping(path: Path, *, max_bytes: int = MAX_BYTES) -> dict:
    """Load a YAML file whose top level must be a mapping (an empty file is an empty mapping)."""
    data = load_yaml_file(path, max_bytes=max_bytes)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: top level must be a mapping, got {type(data).__name__}",
            hint="write the file as `key: value` pairs",
        )
    return data


def deep_merge(base: Mapping, top: Mapping) -> dict:
    """Return `top` merged onto `base` (inputs are not modified)."""
    return MERGER.merge(copy.deepcopy(dict(base)), copy.deepcopy(dict(top)))


def merge_layers(layers: list[Layer]) -> dict:
    """Merge layers in order, later layers on top."""
    merged: dict = {}
    for _, data in layers:
        merged = deep_merge(merged, data)
    return merged


def file_layers(path: Path, *, wrapper: str | None = None) -> list[Layer]:
    """The layers of one file: its `defaults:` parents (recursively) first, then the file itself.

    With ``wrapper``, a file (and each parent) whose body sits under that key is unwrapped.
    """
    return _Inheritance(wrapper).file(resolve(path), ())


def block_layers(block: Any, declared_in: Path, key: str, *, wrapper: str | None = None) -> list[Layer]:
    """The layers of a mapping embedded in `declared_in` under `key` (e.g. a bundled `infra:` block);
    ``wrapper`` as for ``file_layers`` (for the parents its `defaults:` name)."""
    if block is None:
        return []
    if not isinstance(block, dict):
        raise ConfigError(
            f"{declared_in}: '{key}' must be a mapping, got {type(block).__name__}",
            hint=f"write '{key}:' as a block of `key: value` pairs",
        )
    return _Inheritance(wrapper).expand(
        dict(block), declared_in, (declared_in,), where=f"{declared_in}: {key}.defaults"
    )


class _Inheritance:
    """Follows `defaults:` parents, refusing cycles and chains that are too deep or too many."""

    def __init__(self, wrapper: str | None = None) -> None:
        self.reads = 0
        self.wrapper = wrapper

    def file(self, path: Path, stack: tuple[Path, ...]) -> list[Layer]:
        if path in stack:
            cycle = " -> ".join(str(p) for p in (*stack[stack.index(path):], path))
            raise ConfigError(f"defaults cycle: {cycle}", hint="remove one of the `defaults:` entries in the cycle")
        self.reads += 1
        if self.reads > MAX_DEFAULTS_READS:
            raise ConfigError(
                f"{stack[-1]}: defaults: the `defaults:` chains read more than {MAX_DEFAULTS_READS} files",
                hint="list fewer parents: each parent and its own parents are read again for every file that "
                "lists them",
            )
        data = load_mapping(path)
        if self.wrapper is not None:
            data = _unwrapped(data, path, self.wrapper)
        return self.expand(data, path, (*stack, path), where=f"{path}: defaults")

    def expand(self, data: dict, declared_in: Path, stack: tuple[Path, ...], where: str) -> list[Layer]:
        parents = data.pop("defaults", None)
        entries = _parent_entries(parents, where)
        if entries and len(stack) >= MAX_DEFAULTS_DEPTH:
            raise ConfigError(
                f"{where}: the `defaults:` chain is more than {MAX_DEFAULTS_DEPTH} files deep "
                f"({stack[0].name} -> ... -> {declared_in.name})",
                hint="flatten the chain: one file can list several parents",
            )
        layers: list[Layer] = []
        for entry in entries:
            parent = resolve(declared_in.parent / Path(entry).expanduser())
            if not os.path.lexists(parent):
                raise ConfigError(
                    f"{where}: parent '{entry}' not found ({parent})",
                    hint=f"`defaults:` paths are relative to {declared_in.parent}",
                )
            layers.extend(self.file(parent, stack))
        layers.append((declared_in, data))
        return layers


def _unwrapped(data: dict, path: Path, wrapper: str) -> dict:
    """The body of a file written as ``{wrapper: {...}}``: the body, plus the file's own
    ``defaults:`` and ``_`` scratch keys (``${_x}`` stays reachable); any other key beside the
    wrapper is an error, not dropped."""
    if wrapper not in data:
        return data
    body = data[wrapper]
    if not isinstance(body, dict):
        raise ConfigError(
            f"{path}: '{wrapper}' must be a mapping, got {type(body).__name__}",
            hint=f"write '{wrapper}:' as a block of `key: value` pairs",
        )
    beside = [key for key in data if key not in (wrapper, "defaults") and not str(key).startswith("_")]
    if beside:
        raise ConfigError(
            f"{path}: {beside[0]}: set beside an '{wrapper}:' block that holds the rest of the file",
            hint=f"move '{beside[0]}' under '{wrapper}:', or unwrap the whole file",
        )
    if "defaults" in data and "defaults" in body:
        raise ConfigError(
            f"{path}: defaults: set both at the top and under '{wrapper}:'",
            hint="list every parent in one `defaults:`",
        )
    scratch = {key: value for key, value in data.items() if key not in (wrapper, "defaults")}
    return {**({"defaults": data["defaults"]} if "defaults" in data else {}), **scratch, **body}


def _parent_entries(parents: Any, where: str) -> list[str]:
    if parents is None:
        return []
    if isinstance(parents, str):
        parents = [parents]
    if not isinstance(parents, list) or not all(isinstance(p, str) and p for p in parents):
        raise ConfigError(
            f"{where}: expected a path or a list of paths, got {_shown(parents)}",
            hint="e.g. `defaults: base.yaml` or `defaults: [a.yaml, b.yaml]`",
        )
    for entry in parents:
        if len(entry) > MAX_PATH_CHARS or any(len(part.encode()) > 255 for part in Path(entry).parts):
            raise ConfigError(
                f"{where}: parent path {_shown(entry)} is too long ({len(entry)} characters)",
                hint="file names are at most 255 bytes and paths at most 1024 characters",
            )
    return parents


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."
