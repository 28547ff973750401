"""Reading YAML files, following `defaults:` inheritance chains, and deep merging."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping

import yaml
from deepmerge import Merger

from nrl_k8s.errors import ConfigError

# Dicts merge key by key; lists and scalars (and type mismatches) are replaced by the top layer.
_MERGER = Merger([(dict, ["merge"]), (list, ["override"])], ["override"], ["override"])

Layer = tuple[Path, dict]
"""One file's contribution: the file it came from and its mapping (`defaults:` removed)."""


def load_yaml_file(path: Path) -> Any:
    """Parse one YAML file; missing files and malformed YAML raise one clear ConfigError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = "check the path (relative paths are resolved from the current directory)"
        raise ConfigError(f"{path}: file not found", hint=hint) from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, expected a YAML file", hint="pass the path of a .yaml file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read file: {err}", hint="check the file's permissions and encoding (UTF-8)") from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = err.problem or err.context or "invalid YAML"
        raise ConfigError(f"{path}{line}: {problem}", hint="fix the YAML syntax at that line") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {err}", hint="fix the YAML syntax") from None


def load_mapping(path: Path) -> dict:
    """Load a YAML file whose top level must be a mapping (an empty file is an empty mapping)."""
    data = load_yaml_file(path)
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
    return _MERGER.merge(copy.deepcopy(dict(base)), copy.deepcopy(dict(top)))


def merge_layers(layers: list[Layer]) -> dict:
    """Merge layers in order, later layers on top."""
    merged: dict = {}
    for _, data in layers:
        merged = deep_merge(merged, data)
    return merged


def file_layers(path: Path) -> list[Layer]:
    """The layers of one file: its `defaults:` parents (recursively) first, then the file itself."""
    return _file_layers(Path(path).resolve(), ())


def block_layers(block: Any, declared_in: Path, key: str) -> list[Layer]:
    """The layers of a mapping embedded in `declared_in` under `key` (e.g. a bundled `infra:` block)."""
    if block is None:
        return []
    if not isinstance(block, dict):
        raise ConfigError(
            f"{declared_in}: '{key}' must be a mapping, got {type(block).__name__}",
            hint=f"write '{key}:' as a block of `key: value` pairs",
        )
    return _expand(dict(block), declared_in, (declared_in,), where=f"{declared_in}: {key}.defaults")


def _file_layers(path: Path, stack: tuple[Path, ...]) -> list[Layer]:
    if path in stack:
        cycle = " -> ".join(str(p) for p in (*stack[stack.index(path):], path))
        raise ConfigError(f"defaults cycle: {cycle}", hint="remove one of the `defaults:` entries in the cycle")
    return _expand(load_mapping(path), path, (*stack, path), where=f"{path}: defaults")


def _expand(data: dict, declared_in: Path, stack: tuple[Path, ...], where: str) -> list[Layer]:
    parents = data.pop("defaults", None)
    layers: list[Layer] = []
    for entry in _parent_entries(parents, where):
        parent = (declared_in.parent / Path(entry).expanduser()).resolve()
        if not parent.is_file():
            raise ConfigError(
                f"{where}: parent '{entry}' not found ({parent})",
                hint=f"`defaults:` paths are relative to {declared_in.parent}",
            )
        layers.extend(_file_layers(parent, stack))
    layers.append((declared_in, data))
    return layers


def _parent_entries(parents: Any, where: str) -> list[str]:
    if parents is None:
        return []
    if isinstance(parents, str):
        parents = [parents]
    if not isinstance(parents, list) or not all(isinstance(p, str) and p for p in parents):
        raise ConfigError(
            f"{where}: expected a path or a list of paths, got {parents!r}",
            hint="e.g. `defaults: base.yaml` or `defaults: [a.yaml, b.yaml]`",
        )
    return parents
