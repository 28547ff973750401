"""The per-user cache directory: ``$XDG_CACHE_HOME/nrl-k8s`` (``~/.cache/nrl-k8s``), private (0700)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nrl-k8s"


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) if needed; make it 0700; return it."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path
