"""Run records: ``~/.cache/nrl-k8s/runs/<run id>.json`` (``$XDG_CACHE_HOME`` respected).

Both flows write one once the driver is submitted, so ``status``, ``logs`` and ``job stop``
find the latest run without a run config. The record holds names only (clusters, DGDs,
Deployments, the job id, namespace, kube context), the resolved infra with secret values
redacted, and salted digests of the secret values the run's config holds (``secrets``:
``redact.digests``), so a log printed without the config hides them too, the values themselves
never written. ``run --wait`` also keeps the driver log beside it (``driver_log``).
Files are 0600 in a 0700 directory.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from nrl_k8s.cache import cache_dir, private_dir
from nrl_k8s.errors import ConfigError, NotFoundError
from nrl_k8s.redact import digests, redact

LATEST = "latest"  # holds the id of the newest run


def runs_dir() -> Path:
    return cache_dir() / "runs"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def rayjob_record(plan, result, *, context: str | None) -> dict:
    """The record of a `run --rayjob` whose driver was submitted (``plan``: a RunPlan)."""
    return {
        "run_id": plan.run_id,
        "mode": "rayjob",
        "namespace": result.namespace,
        "context": context,
        "created": _now(),
        "rayjob": result.rayjob,
        "clusters": {"training": result.raycluster},
        "training_cluster": result.raycluster,
        "job_id": result.job_id,
        "dgds": sorted(result.dgds),
        "infra": redact(plan.infra),
        "secrets": digests(),
    }


def record_of(plan, result, *, context: str | None, infra: dict | None = None) -> dict:
    return {
        "run_id": plan.run_id,
        "mode": "raycluster",
        "namespace": plan.namespace,
        "context": context,
        "created": _now(),
        "clusters": dict(result.clusters),
        "training_cluster": plan.driver.cluster,
        "job_id": plan.driver.submission_id,
        "dgds": sorted(result.dgds),
        "deployments": sorted(m["metadata"]["name"] for pair in plan.deployments.values() for m in pair[:1]),
        "daemons": dict(result.daemons),
        "package": result.package,
        "uploaded_bytes": result.uploaded_bytes,
        "submitter": plan.submitter,
        "exec": dict(result.exec) if result.exec else None,  # {"pod", "dir"}: where the exec driver runs
        "infra": redact(infra) if infra is not None else None,
        "secrets": digests(),
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
            raise NotFoundError(
                f"no record of run {run_id} in {directory}", hint="`nrl-k8s status` lists the latest run"
            )
        return _read(path)
    latest = directory / LATEST
    if not latest.is_file():
        raise ConfigError(f"no run recorded in {directory} and no run config given",
                          hint="pass RECIPE [--infra INFRA], or start a run with `nrl-k8s run`")
    return load(latest.read_text().strip())


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"run record {path} is unreadable ({err})", hint=f"delete it: rm {path}") from None


def recorded() -> Iterator[tuple[Path, dict]]:
    """(path, record) of every readable run record (any order)."""
    for path in runs_dir().glob("*.json") if runs_dir().is_dir() else []:
        try:
            yield path, _read(path)
        except ConfigError:
            continue


def exec_dirs(namespace: str, cluster: str) -> list[str]:
    """The exec tmp dirs of the runs recorded here that started their driver on ``cluster`` through exec."""
    import posixpath

    return sorted({posixpath.dirname(r["exec"]["dir"]) for _, r in recorded()
                   if r.get("exec") and r.get("namespace") == namespace and r.get("training_cluster") == cluster})


def latest_record(namespace: str, cluster: str) -> dict | None:
    """The newest run recorded here whose driver ran on the training RayCluster ``cluster``."""
    mine = [r for _, r in recorded() if r.get("namespace") == namespace and r.get("training_cluster") == cluster]
    return max(mine, key=lambda r: r.get("created") or "", default=None)
