"""The environment that stands for Dynamo's images: a venv with Dynamo's runtime from PyPI.

``nrl-k8s sandbox build`` (``make setup``) makes it once per machine, beside the control plane in
the user cache (``~/.cache/nrl-k8s/dynamo/<version>-<hash>/``, the lock's and the interpreter's),
outside the product's own install: ``pip install --no-deps -r requirements.lock`` (every version
pinned there; see its header for why nothing is resolved). It is built in a folder of its own
under a lock and marked complete last, so a build that was cut short is started again, and two
builds never race.
``$NRL_K8S_DYNAMO_RUNTIME`` names another such folder (the tests give their private caches the
one ``make setup`` built). The tiny models (``model.py``) are written beside the venv.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from nrl_k8s.errors import SandboxError

from ..controlplane.binaries import cache_root as control_plane_cache

VERSION = "1.6.1"
LOCK = Path(__file__).with_name("requirements.lock")
_COMPLETE = ".complete"
ENV_ROOT = "NRL_K8S_DYNAMO_RUNTIME"


def key() -> str:
    """The lock's and the interpreter's hash: a venv runs on the interpreter it was made from."""
    made_from = f"{sys.base_prefix}\n{sys.version}".encode()
    return f"ai-dynamo-{VERSION}-{hashlib.sha256(LOCK.read_bytes() + made_from).hexdigest()[:10]}"


def root() -> Path:
    named = os.environ.get(ENV_ROOT)
    return Path(named).expanduser() if named else control_plane_cache().parent / "dynamo" / key()


def python() -> Path:
    """The venv's interpreter, or SandboxError saying how to build it."""
    where = root()
    if not (where / _COMPLETE).is_file():
        raise SandboxError(f"Dynamo's runtime (ai-dynamo {VERSION}) is not installed for the sandbox on this machine",
                           hint="run 'make setup' or 'nrl-k8s sandbox build' (once per machine)")
    return where / "venv" / "bin" / "python"


def build(progress: Callable[[str], None]) -> tuple[Path, float]:
    """Install the venv unless it is there; (its folder, seconds spent)."""
    where = root()
    if (where / _COMPLETE).is_file():
        return where, 0.0
    where.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(where.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (where / _COMPLETE).is_file():
            return where, 0.0
        shutil.rmtree(where, ignore_errors=True)
        progress(f"installing Dynamo's runtime (ai-dynamo {VERSION}) for the sandbox's DGD pods")
        _run([sys.executable, "-m", "venv", str(where / "venv")])
        _run([str(where / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
              "--disable-pip-version-check", "-r", str(LOCK)])
        (where / _COMPLETE).write_text(f"{time.monotonic() - started:.1f}\n")
    return where, time.monotonic() - started


def _run(argv: list[str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        raise SandboxError(f"installing Dynamo's runtime failed: {tail}",
                           hint="check that PyPI is reachable (pip's index), then run 'nrl-k8s sandbox build' again")
