"""The driver log `run --wait` keeps beside the run record (``records``): ``<run id>.log``, 0600.

``follow`` keeps the log of a run's driver as it streams (from the dashboard's ``follow_logs``,
or an exec driver's) until its job ends: redacted whole lines at a time, shown and kept, its last
``LOG_LIMIT_BYTES`` at most, so ``job logs`` still has it once the cluster is gone
(``saved_log`` finds it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from nrl_k8s.cache import private_dir
from nrl_k8s.flows import records
from nrl_k8s.redact import LineRedactor

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


def follow(chunks: Iterable[str], record: dict, on_log: Callable[[str], None]) -> None:
    """Pass the driver log of the run ``record`` names, as ``chunks`` of it stream until its job
    ends: redacted, to ``on_log`` and into the run's saved copy. The record then tells how much was
    kept (``log``: complete, bytes, cut_bytes) and is saved again, also when following failed."""
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
