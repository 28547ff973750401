"""Run records: ``~/.cache/nrl-k8s/runs/<run id>.json`` (``$XDG_CACHE_HOME`` respected).

A long-lived run writes one after its driver is submitted, so ``status``, ``logs`` and
``job stop`` find the latest run without a run config. The record holds names only (clusters,
DGDs, Deployments, the job id, namespace, kube context) and the resolved infra with secret
values redacted; files are 0600 in a 0700 directory.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .cache import cache_dir, private_dir
from .errors import ConfigError, NotFoundError
from .redact import redact


LATEST = "latest"  # holds the id of the newest run


def runs_dir() -> Path:
    return cache_dir() / "runs"


def record_of(plan, result, *, context: str | None, infra: dict | None = None) -> dict:
    return {
        "run_id": plan.run_id,
        "mode": "raycluster",
        "namespace": plan.namespace,
        "context": context,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "clusters": dict(result.clusters),
        "training_cluster": plan.driver.cluster,
        "job_id": plan.driver.submission_id,
        "dgds": sorted(result.dgds),
        "deployments": sorted(m["metadata"]["name"] for pair in plan.deployments.values() for m in pair[:1]),
        "daemons": dict(result.daemons),
        "package": result.package,
        "uploaded_bytes": result.uploaded_bytes,
        "infra": redact(infra) if infra is not None else None,
    }


def save(record: dict) -> Path:
    """Write atomically, private to the user; returns the path."""
    directory = private_dir(runs_dir())
    path = directory / f"{record['run_id']}.json"
    _write(path, json.dumps(record, indent=2, default=str))
    _write(directory / LATEST, record["run_id"])  # not mtimes: two saves can share a timestamp tick
    return path


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def load(run_id: str | None = None) -> dict:
    """The record of ``run_id``, else the newest one."""
    directory = runs_dir()
    if run_id is not None:
        path = directory / f"{run_id}.json"
        if not path.is_file():
            raise NotFoundError(f"no record of run {run_id} in {directory}", hint="`nrl-k8s status` lists the latest run")
        return _read(path)
    latest = directory / LATEST
    if not latest.is_file():
        raise ConfigError(f"no run recorded in {directory} and no run config given",
                          hint="pass RECIPE [--infra INFRA], or start a run with `nrl-k8s run --raycluster`")
    return load(latest.read_text().strip())


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"run record {path} is unreadable ({err})", hint=f"delete it: rm {path}") from None
