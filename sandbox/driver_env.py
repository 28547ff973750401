"""What a pod the local kubelet runs sees of its container: env values and Secret volumes.

On a cluster a Ray head (and every driver it runs) lives in the head container and sees that
container's env and its mounted Secret volumes. The local kubelet runs the head's ``ray start``
as a local process with ``DriverEnv.container_env``:

- each Secret volume mounted in the first container is written to
  ``ROOT/<namespace>/<owner>/<volume>/`` (directories 0700, files 0600), removed again with the
  pod's owner (``forget``);
- the container's env (``value``, ``valueFrom.secretKeyRef`` read from the stored Secret, and
  ``valueFrom.fieldRef`` from the pod's own fields) is returned. A value under a Secret volume's
  ``mountPath`` is rewritten to where that volume was written: a sandbox limitation, the process
  sees a different path than the pod would.

Not emulated: other ``valueFrom`` sources, ``envFrom``, ``$(VAR)`` expansion, ``subPath``,
item modes. A missing Secret or key leaves the variable or file out (a real pod would not
start). Ray's own logs show a job's env (``runtime_env_agent.log`` in the Ray temp dir), so that
directory must stay owner-only.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

log = logging.getLogger("nrl_k8s_sandbox.driver_env")

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

ReadSecret = Callable[[str], "dict | None"]  # Secret name (in the pod's namespace) -> object or None


class DriverEnv:
    def __init__(self, root: Path):
        self.root = Path(root)

    def container_env(self, meta: dict, pod: dict, read_secret: ReadSecret,
                      fields: dict[str, str] | None = None) -> dict[str, str]:
        """The env of ``pod``'s first container, its Secret volumes written under ROOT/NAMESPACE/NAME;
        ``fields`` are the pod's values a ``fieldRef`` names (``metadata.name``, ``status.podIP``, ...)."""
        container = (pod.get("containers") or [{}])[0]
        mounts = self._write_volumes(meta, pod, container, read_secret)
        env = {}
        for item in container.get("env") or []:
            value = _env_value(item, read_secret, fields or {})
            if value is not None:
                env[item["name"]] = _relocate(value, mounts)
        return env

    def forget(self, namespace: str, owner: str) -> None:
        """Remove the files written for a deleted owner."""
        shutil.rmtree(self.root / namespace / owner, ignore_errors=True)

    def _write_volumes(self, meta: dict, pod: dict, container: dict, read_secret: ReadSecret) -> dict[str, Path]:
        """Write each mounted Secret volume; mountPath -> the local directory."""
        volumes = {v.get("name"): v for v in pod.get("volumes") or []}
        mounts = {}
        for mount in container.get("volumeMounts") or []:
            name = str(mount.get("name"))
            source = (volumes.get(name) or {}).get("secret")
            if source is None or not _DNS_LABEL.fullmatch(name) or not mount.get("mountPath"):
                continue
            directory = self._private_dir(meta["namespace"], meta["name"], name)
            data = _secret_data(read_secret, source.get("secretName"))
            items = source.get("items") or [{"key": key, "path": key} for key in data]
            for item in items:
                value = _decoded(data, item.get("key"), source.get("secretName"))
                if value is not None:
                    _write_private(directory, str(item.get("path", "")), value)
            mounts[str(mount["mountPath"])] = directory
        return mounts

    def _private_dir(self, *parts: str) -> Path:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.root
        for part in parts:
            path = path / part
            path.mkdir(mode=0o700, exist_ok=True)
        return path


def _env_value(item: dict, read_secret: ReadSecret, fields: dict[str, str]) -> str | None:
    if "valueFrom" not in item:
        return str(item.get("value", ""))
    field = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
    if field is not None:
        return fields.get(field)
    ref = (item.get("valueFrom") or {}).get("secretKeyRef")
    if not ref:
        return None
    value = _decoded(_secret_data(read_secret, ref.get("name")), ref.get("key"), ref.get("name"))
    return None if value is None else value.decode("utf-8", errors="replace")


def _secret_data(read_secret: ReadSecret, name: str | None) -> dict:
    secret = read_secret(name) if name else None
    return (secret or {}).get("data") or {}


def _decoded(data: dict, key: str | None, secret_name: str | None) -> bytes | None:
    try:
        return base64.b64decode(data[key], validate=True)
    except (KeyError, TypeError, ValueError):
        log.warning("Secret %s has no key %r (or it is not base64): left out for the driver", secret_name, key)
        return None


def _relocate(value: str, mounts: dict[str, Path]) -> str:
    for mount_path, local in mounts.items():
        base = mount_path.rstrip("/")
        if value == base or value.startswith(base + "/"):
            return str(local) + value[len(base):]
    return value


def _write_private(directory: Path, relative: str, content: bytes) -> None:
    """Write ``directory/relative`` (0600) atomically; a path leaving the directory is refused."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
        log.warning("refusing to write Secret item path %r", relative)
        return
    target = directory.joinpath(*parts)
    parent = directory
    for part in parts[:-1]:
        parent = parent / part
        parent.mkdir(mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=parent)  # created 0600
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)
    os.replace(tmp, target)
