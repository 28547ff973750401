"""Which layer (file or override token) set each infra key, so errors can name the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nrl_k8s.errors import dotted

__all__ = ["Provenance", "Source", "dotted"]

Source = Path | str
"""A file path, or a label such as ``override 'infra.image=x'``."""


class Provenance:
    """Maps dotted key paths to the last layer that set them (record layers low to high)."""

    def __init__(self) -> None:
        self._by_path: dict[tuple, Source] = {}

    def record(self, data: Any, source: Source, path: tuple = ()) -> None:
        """Attribute `data` (and every key and list item nested in it) at `path` to `source`."""
        if path:
            self._by_path[_key(path)] = source
        items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
        for key, value in items:
            self.record(value, source, (*path, key))

    def record_override(self, value: Any, source: Source, path: tuple) -> None:
        """Like ``record``; the keys an override creates on its way to ``path`` are its own too."""
        for end in range(1, len(path)):
            self._by_path.setdefault(_key(path[:end]), source)
        self.record(value, source, path)

    def source(self, path: tuple) -> Source | None:
        """The layer that set `path`, or the closest enclosing key that has one."""
        for end in range(len(path), 0, -1):
            found = self._by_path.get(_key(path[:end]))
            if found is not None:
                return found
        return None

    def label(self, path: tuple) -> str:
        """A human label for the layer that set `path` (file path or override)."""
        source = self.source(path)
        return "infra" if source is None else str(source)


def _key(path: tuple) -> tuple:
    """List indices as strings, as override paths write them (`containers.0`)."""
    return tuple(str(part) for part in path)
