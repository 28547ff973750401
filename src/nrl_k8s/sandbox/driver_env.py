"""What a driver submitted for a simulated RayCluster sees of that cluster's head container.

Every simulated RayCluster shares the one real Ray head, whose drivers run as local shell
commands. On a real cluster a driver runs inside the head pod's Ray container (the first
container of ``headGroupSpec``) and sees that container's env and its mounted Secret volumes.
``DriverEnv.submission`` emulates both for a ``POST /api/jobs/`` body, for the two ways a job
is submitted for a cluster: by the simulated KubeRay (HTTPMode) and through the API server's
service proxy to ``<cluster>-head-svc`` (``head_proxy``: ``run --raycluster``, daemons, the
driver rescue):

- each Secret volume mounted in that container is written to
  ``ROOT/<namespace>/<cluster>/<volume>/`` (directories 0700, files 0600), removed again
  with the cluster (``forget``);
- the container's env (``value``, and ``valueFrom.secretKeyRef`` read from the stored
  Secret) is added to the job's ``runtime_env.env_vars``; the submitter's own env_vars win,
  as a process's own environment wins over its container's. A value under a Secret volume's
  ``mountPath`` is rewritten to where that volume was written: a sandbox limitation, the
  driver sees a different path than the pod would;
- the names it added are recorded in the job's metadata (``INJECTED_KEY``), and
  ``head_proxy`` removes them, with their values, from job details returned through the
  service proxy, so a client sees what a real dashboard shows.

Not emulated: other ``valueFrom`` sources, ``envFrom``, ``$(VAR)`` expansion, ``subPath``,
item modes. A missing Secret or key leaves the variable or file out (a real pod would not
start). Unlike a container's env, a runtime_env is seen by Ray itself: the dashboard reached
directly on loopback shows the added values in job details, Ray's state API (tasks, actors)
shows them even through the proxy, and Ray's runtime-env agent logs them
(``runtime_env_agent.log`` in the Ray temp dir), so that directory must stay owner-only.
"""

from __future__ import annotations

import base64
import copy
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Callable

log = logging.getLogger("nrl_k8s.sandbox.driver_env")

INJECTED_KEY = "sandbox.nrl-k8s.io/container-env"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

ReadSecret = Callable[[str], "dict | None"]  # Secret name (in the cluster's namespace) -> object or None


class DriverEnv:
    def __init__(self, root: Path):
        self.root = Path(root)

    def submission(self, body: dict, cluster: dict, read_secret: ReadSecret) -> dict:
        """``body`` plus what the cluster's head container would give its driver (see the module docstring)."""
        pod = (((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
        env = self.container_env(cluster["metadata"], pod, read_secret)
        runtime_env = dict(body.get("runtime_env") or {})
        own = runtime_env.get("env_vars") or {}
        added = {name: value for name, value in env.items() if name not in own}
        if not added:
            return body
        body = copy.deepcopy(body)
        body["runtime_env"] = {**runtime_env, "env_vars": {**added, **own}}
        body["metadata"] = {**(body.get("metadata") or {}), INJECTED_KEY: ",".join(added)}
        return body

    def container_env(self, meta: dict, pod: dict, read_secret: ReadSecret) -> dict[str, str]:
        """The env of ``pod``'s first container, its Secret volumes written under ROOT/NAMESPACE/NAME."""
        container = (pod.get("containers") or [{}])[0]
        mounts = self._write_volumes(meta, pod, container, read_secret)
        env = {}
        for item in container.get("env") or []:
            value = _env_value(item, read_secret)
            if value is not None:
                env[item["name"]] = _relocate(value, mounts)
        return env

    def forget(self, namespace: str, cluster: str) -> None:
        """Remove the files written for a deleted cluster."""
        shutil.rmtree(self.root / namespace / cluster, ignore_errors=True)

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


def _env_value(item: dict, read_secret: ReadSecret) -> str | None:
    if "valueFrom" not in item:
        return str(item.get("value", ""))
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
