"""The driver log `run --wait` keeps beside the run record (``records``): ``<run id>.log``, 0600.

``follow`` keeps the log of a run's driver as it streams (from the dashboard's ``follow_logs``,
or an exec driver's) until its job ends: redacted whole lines at a time, shown and kept, its last
``LOG_LIMIT_BYTES`` at most, so ``job logs`` still has it once the cluster is gone
(``saved_log`` finds it).

``remember_pod_secrets`` is how every printed or saved log (this one, ``logs``, ``job logs``)
knows the values to hide without a run config: it reads them through the API from the Secrets
the run's pods read, when the log is printed. Nothing nrl-k8s writes holds them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from nrl_k8s import redact
from nrl_k8s.cache import private_dir
from nrl_k8s.errors import ForbiddenError
from nrl_k8s.flows import records
from nrl_k8s.redact import LineRedactor

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

LOG_LIMIT_BYTES = 32 * 1024 * 1024


class SavedLog:
    """The driver log kept beside a run record (``<run id>.log``, 0600): redacted text as it
    streams, at most ``limit`` bytes kept — past twice that, the oldest lines are cut
    (``cut_bytes`` counts them)."""

    def __init__(self, run_id: str, limit: int = LOG_LIMIT_BYTES):
        self.path = private_dir(records.runs_dir()) / f"{run_id}.log"
        self.limit = limit
        self.size = self.cut_bytes = 0
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an older copy keeps its mode otherwise
        self._file = os.fdopen(fd, "w+b")

    def write(self, text: str) -> None:
        data = text.encode()
        self._file.write(data)
        self.size += len(data)
        if self.size > 2 * self.limit:
            self._keep_tail()

    def _keep_tail(self) -> None:
        """Keep the last ``limit`` bytes, from the first line that starts in them."""
        self._file.seek(self.size - self.limit)
        tail = self._file.read()
        tail = tail[tail.find(b"\n") + 1:]
        self._file.seek(0)
        self._file.write(tail)
        self._file.truncate()
        self.cut_bytes += self.size - len(tail)
        self.size = len(tail)

    def close(self) -> None:
        self._file.close()


def follow(chunks: Iterable[str], record: dict, on_log: Callable[[str], None], kube: Kube | None = None) -> None:
    """Pass the driver log of the run ``record`` names, as ``chunks`` of it stream until its job
    ends: redacted (with ``kube``: also every value of the Secrets its training cluster's pods read),
    to ``on_log`` and into the run's saved copy. The record then tells how much was kept (``log``:
    complete, bytes, cut_bytes) and is saved again, also when following failed."""
    if kube is not None:
        remember_pod_secrets(kube, record["namespace"], f"{CLUSTER_LABEL}={record['training_cluster']}")
    saved, redactor, complete = SavedLog(record["run_id"]), LineRedactor(), False

    def emit(text: str) -> None:
        if text:
            saved.write(text)
            on_log(text)

    try:
        for chunk in chunks:
            emit(redactor.feed(chunk))
        complete = True
    finally:
        emit(redactor.flush())
        saved.close()
        record["log"] = {"complete": complete, "bytes": saved.size, "cut_bytes": saved.cut_bytes}
        records.save(record)


def saved_log(namespace: str, *, job_id: str | None = None, name: str | None = None) -> tuple[dict, Path] | None:
    """(record, path) of the newest saved driver log in ``namespace`` of job ``job_id``, else of
    the run whose RayJob or training RayCluster is ``name``; None when there is none."""
    found = []
    for path, record in records.recorded():
        log = path.with_suffix(".log")
        wanted = (record.get("job_id") == job_id if job_id
                  else name in (record.get("rayjob"), record.get("training_cluster")))
        if record.get("namespace") == namespace and wanted and log.is_file():
            found.append((record.get("created") or "", log.stat().st_mtime, record, log))
    if not found:
        return None
    *_, record, log = max(found, key=lambda item: item[:2])
    return record, log


CLUSTER_LABEL = "ray.io/cluster"  # a RayCluster's pods: the driver runs in its head


def remember_pod_secrets(kube: Kube, namespace: str, selector: str) -> None:
    """Hide from now on (``redact.remember_values``) every value the pods matching ``selector`` can
    print from a Secret: the Secrets their containers read (env ``secretKeyRef``, ``envFrom``,
    Secret volumes) and their owner's ``<user>-secrets`` (``dev setup-secrets``). A Secret holding a
    run's recipe carries the run's env, not only secrets: of it, the values under secret-looking
    names and the recipe's. ForbiddenError when one may not be read: the log is not printed."""
    from nrl_k8s.kinds import pod, secret
    from nrl_k8s.kinds.base import OWNER_LABEL

    names: set[str] = set()
    for found in kube.list(pod.KIND, namespace, label_selector=selector):
        if owner := (found["metadata"].get("labels") or {}).get(OWNER_LABEL):
            names.add(secret.user_secret(owner))
        names.update(_secret_names(found.get("spec") or {}))
    for name in sorted(names):
        try:
            obj = kube.find(secret.KIND, name, namespace)
        except ForbiddenError as err:
            raise ForbiddenError(f"cannot read Secret {name}, which pods of this log read, so its values could "
                                 f"not be hidden: the log is not printed ({err.message})",
                                 hint=f"ask for get on secrets in namespace {namespace} (the dev pod's Role has "
                                 "it: `nrl-k8s dev connect`)", status=403) from None
        if obj is not None:
            _remember_secret(obj)


def _secret_names(spec: dict) -> set[str]:
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    refs = [((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name") for c in containers
            for e in c.get("env") or []]
    refs += [(e.get("secretRef") or {}).get("name") for c in containers for e in c.get("envFrom") or []]
    refs += [(v.get("secret") or {}).get("secretName") for v in spec.get("volumes") or []]
    refs += [(s.get("secret") or {}).get("name") for v in spec.get("volumes") or []
             for s in (v.get("projected") or {}).get("sources") or []]
    return {name for name in refs if name}


def _remember_secret(obj: dict) -> None:
    import base64
    import binascii

    from nrl_k8s.config.recipe import RECIPE_KEY
    from nrl_k8s.config.safe_yaml import parse
    from nrl_k8s.errors import ConfigError

    values = {}
    for key, encoded in (obj.get("data") or {}).items():
        try:
            values[key] = base64.b64decode(encoded).decode("utf-8", errors="replace")
        except (binascii.Error, TypeError, ValueError):
            continue
    if RECIPE_KEY not in values:
        redact.remember_values(values.values())
        return
    redact.remember({key: value for key, value in values.items() if key != RECIPE_KEY})
    try:
        redact.remember(parse(values[RECIPE_KEY], f"Secret {obj['metadata']['name']}"))
    except ConfigError:
        pass  # a recipe that does not parse hides nothing more
