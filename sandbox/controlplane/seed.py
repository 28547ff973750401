"""etcd as kube-apiserver leaves it once the CRDs from files are established: made by the first
sandbox on a machine, copied by every later one.

Creating KubeRay's CRDs (~1 MB each) and establishing them is most of a sandbox's start: ~5 of
kube-apiserver's ~7 CPU-seconds. The copy holds what a fresh kube-apiserver writes for itself
(namespaces, bootstrap RBAC, the ``kubernetes`` Service) and those CRDs, nothing of a sandbox of
its own: certificates and tokens are files, and the nodes, RBAC, Stages and Dynamo's CRDs (with
the sandbox's webhook address and CA) are made after. It lives beside the binaries, keyed by
them, the service range and the CRD files' bytes (a fault choosing other files gets a copy of its
own); where they cannot be written, every start makes its CRDs as before. Sandboxes that start
side by side with no copy yet (a new machine's first ``make test``) take turns (``Turn``): one makes
it while the others wait, so that every one of them holds the same objects.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from . import binaries, components

log = logging.getLogger("nrl_k8s_sandbox.controlplane")
SERVED = "served.json"  # (group, version, plural) of every served version: what to wait for
DATA = "etcd"


def folder(installed: binaries.Installed, files: list[Path]) -> Path:
    digest = hashlib.sha256(f"{binaries.key()} {components.SERVICE_CIDR}".encode())
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return installed.crds.parent / "etcd-seeds" / digest.hexdigest()[:16]


class Turn:
    """The turn to make ``seed``: a lock file beside it, held by the one sandbox making it and freed
    however that sandbox ends, so that sandboxes starting side by side without a seed wait for the
    first one's instead of each making CRDs of their own."""

    def __init__(self, seed: Path):
        self.seed = seed
        self._fd: int | None = None
        try:
            seed.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(seed.parent / f"{seed.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as err:  # no turns: this start makes its CRDs and may keep them (save)
            log.info("no turn to make the copy of etcd at %s: %s", seed, err)

    def ready(self) -> bool:
        """True once the seed is there to copy, or this sandbox holds the turn to make it."""
        if self._fd is None or (self.seed / SERVED).is_file():
            return True
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def end(self) -> None:
        """Give the turn up (the seed is made, or was there)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def copy(seed: Path, data: Path) -> list[tuple[str, str, str]] | None:
    """Copy ``seed``'s etcd into ``data`` (which must not exist); what its CRDs serve, or None
    when there is no such seed."""
    try:
        served = json.loads((seed / SERVED).read_text())
    except FileNotFoundError:
        return None
    shutil.copytree(seed / DATA, data)
    return [tuple(resource) for resource in served]


def save(seed: Path, data: Path, served: set[tuple[str, str, str]]) -> None:
    """Keep a copy of the stopped etcd in ``data`` as ``seed``; the first of sandboxes starting side
    by side wins, and a folder that cannot be written only costs the copy."""
    try:
        seed.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=seed.parent))
    except OSError as err:
        log.info("no copy of etcd kept at %s: %s", seed, err)
        return
    try:
        shutil.copytree(data, staging / DATA)
        (staging / SERVED).write_text(json.dumps(sorted(served)))
        staging.rename(seed)
    except OSError as err:
        log.info("no copy of etcd kept at %s: %s", seed, err)
        shutil.rmtree(staging, ignore_errors=True)
